package sqlsim

import (
	"errors"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Table sources of SELECT: the system views and msdb tables the product
// reads, and the user tables of a database.

func col(qual, name string, typ tds.ColumnType, size int) relCol {
	return relCol{qual: qual, name: name, col: tds.Column{Name: name, Type: typ, Size: size, Nullable: true}}
}

// resolveName splits a 1-3 part name into database, schema and object,
// defaulting the database to the session's and the schema to dbo.
func (x *execCtx) resolveName(o objName) (db, schema, name string, err error) {
	p := o.parts
	switch len(p) {
	case 1:
		return x.s.Database(), "", p[0], nil
	case 2:
		return x.s.Database(), p[0], p[1], nil
	case 3:
		db = p[0]
		if db == "" {
			db = x.s.Database()
		}
		return db, p[1], p[2], nil
	}
	return "", "", "", errNotSupported("four-part (linked server) names")
}

// source evaluates a FROM clause: the first table (or table-valued
// function), CROSS APPLY sys.dm_exec_sql_text or sys.dm_os_volume_stats,
// then the joins left to right.
func (x *execCtx) source(f *fromClause) (*relation, error) {
	var rel *relation
	var err error
	if f.args != nil {
		rel, err = x.tableFunction(f)
	} else {
		rel, err = x.tableSource(f.name, f.alias)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case f.apply && f.applyFn == "dm_os_volume_stats":
		if rel, err = x.applyVolumeStats(rel, f); err != nil {
			return nil, err
		}
	case f.apply:
		if rel, err = x.applySQLText(rel, f); err != nil {
			return nil, err
		}
	}
	for _, j := range f.joins {
		right, err := x.tableSource(j.name, j.alias)
		if err != nil {
			return nil, err
		}
		if rel, err = x.join(rel, right, j); err != nil {
			return nil, err
		}
	}
	return rel, nil
}

// join is a nested-loop join: the rows of left x right for which on is
// TRUE (NULL and FALSE drop the pair, as in SQL); LEFT keeps unmatched left
// rows with NULLs on the right. An ON equating two integer columns pairs
// only the rows with equal keys (equiJoin), so that joining msdb's
// restorehistory to backupset costs what it costs SQL Server, not the
// product of their rows.
func (x *execCtx) join(left, right *relation, j joinClause) (*relation, error) {
	if left.gen != nil || right.gen != nil {
		return nil, errNotSupported("joins with a generated table (only COUNT(*), COUNT_BIG(*), MAX and MIN read them)")
	}
	out := &relation{cols: append(append([]relCol(nil), left.cols...), right.cols...)}
	byKey, li := equiJoin(left, right, j)
	for _, l := range left.rows {
		matched := false
		rights := right.rows
		if byKey != nil {
			// Only the right rows with the same integer key can match.
			rights = nil
			if k, ok := normValue(l[li]).(int64); ok {
				rights = byKey[k]
			}
		}
		for _, r := range rights {
			row := append(append(make([]any, 0, len(out.cols)), l...), r...)
			if j.on != nil {
				v, err := (&env{x: x, rel: out, row: row}).eval(j.on)
				if err != nil {
					return nil, err
				}
				if !truthy(v) {
					continue
				}
			}
			matched = true
			out.rows = append(out.rows, row)
		}
		if !matched && j.kind == "LEFT" {
			out.rows = append(out.rows, append(append(make([]any, 0, len(out.cols)), l...), make([]any, len(right.cols))...))
		}
	}
	return out, nil
}

// equiJoin indexes right by its column of an ON that is an equality of
// an integer column of each side (ON rh.backup_set_id =
// bs.backup_set_id), as SQL Server seeks a key instead of comparing every
// pair: the rows of right by key, and the left column's index. nil for
// any other ON, or when either column holds anything but integers and
// NULLs (the nested loop then compares, with the collation's rules); a
// NULL key matches nothing, as NULL = x is not TRUE.
func equiJoin(left, right *relation, j joinClause) (map[int64][][]any, int) {
	b, ok := j.on.(*binExpr)
	if !ok || b.op != "=" {
		return nil, 0
	}
	lc, lok := b.l.(*colExpr)
	rc, rok := b.r.(*colExpr)
	if !lok || !rok {
		return nil, 0
	}
	// Each column must be one side's alone (else the nested loop
	// reports the ambiguity or the unknown column).
	side := func(parts []string) (int, bool, bool) {
		i, lerr := (&env{rel: left}).lookupCol(parts)
		k, rerr := (&env{rel: right}).lookupCol(parts)
		switch {
		case lerr == nil && rerr != nil:
			return i, true, true
		case rerr == nil && lerr != nil:
			return k, false, true
		}
		return 0, false, false
	}
	i1, left1, ok1 := side(lc.parts)
	i2, left2, ok2 := side(rc.parts)
	if !ok1 || !ok2 || left1 == left2 {
		return nil, 0
	}
	li, ri := i1, i2
	if left2 {
		li, ri = i2, i1
	}
	for _, l := range left.rows {
		if v := normValue(l[li]); v != nil {
			if _, ok := v.(int64); !ok {
				return nil, 0
			}
		}
	}
	byKey := map[int64][][]any{}
	for _, r := range right.rows {
		switch v := normValue(r[ri]).(type) {
		case nil:
		case int64:
			byKey[v] = append(byKey[v], r)
		default:
			return nil, 0
		}
	}
	return byKey, li
}

// tableSource reads one named table or view into a relation whose columns
// are qualified by alias (or the object name).
func (x *execCtx) tableSource(o objName, alias string) (*relation, error) {
	dbName, schema, name, err := x.resolveName(o)
	if err != nil {
		return nil, err
	}
	qual := strings.ToLower(name)
	if alias != "" {
		qual = strings.ToLower(alias)
	}
	var rel *relation
	switch {
	case strings.EqualFold(schema, "sys"):
		d := x.in.lookupDB(dbName)
		if d == nil {
			return nil, errNoDatabase(dbName)
		}
		rel, err = x.sysView(d, strings.ToLower(name), qual)
	case strings.EqualFold(dbName, "msdb") && (schema == "" || strings.EqualFold(schema, "dbo")):
		rel, err = x.msdbTable(strings.ToLower(name), qual)
	default:
		if schema == "" {
			schema = "dbo"
		}
		rel, err = x.userTable(dbName, schema, name, qual)
	}
	if te := (*tds.Error)(nil); errors.As(err, &te) && te.Number == 208 {
		// SQL Server names the object as the statement wrote it: "FROM
		// Orders" fails with 'Orders', not 'dbo.Orders'.
		return nil, errInvalidObject(o.String())
	}
	if err != nil {
		return nil, err
	}
	return rel, nil
}

func (x *execCtx) sysView(d *database, name, qual string) (*relation, error) {
	rel := &relation{}
	switch name {
	case "databases":
		rel.cols = []relCol{col(qual, "name", tds.TypeNVarChar, 128), col(qual, "database_id", tds.TypeInt, 0),
			col(qual, "create_date", tds.TypeDateTime, 0), col(qual, "state", tds.TypeTinyInt, 0),
			col(qual, "state_desc", tds.TypeNVarChar, 60), col(qual, "recovery_model_desc", tds.TypeNVarChar, 60),
			col(qual, "user_access_desc", tds.TypeNVarChar, 60), col(qual, "compatibility_level", tds.TypeTinyInt, 0),
			col(qual, "collation_name", tds.TypeNVarChar, 128), col(qual, "is_read_only", tds.TypeBit, 0),
			// The emulator has no database snapshots, so source_database_id
			// is always NULL (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-databases-transact-sql:
			// "Non-NULL = ID of the source database of this database snapshot").
			col(qual, "source_database_id", tds.TypeInt, 0),
			// "Indicates whether the database is encrypted (reflects the state
			// last set by using the ALTER DATABASE SET ENCRYPTION clause)".
			col(qual, "is_encrypted", tds.TypeBit, 0),
			// 0 NONE, 1 PARTIAL (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-databases-transact-sql).
			col(qual, "containment", tds.TypeTinyInt, 0), col(qual, "containment_desc", tds.TypeNVarChar, 60),
			// Who owns it ("SID (Security-Identifier) of the external owner
			// of the database, as registered to the server": the login that
			// created or restored it, sa for the system databases), whether
			// it is trusted, how its pages are verified and Service Broker's
			// state (security.go, restore.go): options a restore carries or
			// resets.
			col(qual, "owner_sid", tds.TypeVarBinary, 85), col(qual, "is_trustworthy_on", tds.TypeBit, 0),
			col(qual, "page_verify_option_desc", tds.TypeNVarChar, 60), col(qual, "is_broker_enabled", tds.TypeBit, 0),
			col(qual, "service_broker_guid", tds.TypeUniqueIdentifier, 0),
			// replica_id: "ID of the local availability group availability
			// replica of the database"; NULL when the database is not part
			// of an availability group; group_database_id: its id within
			// the group (sys.databases).
			col(qual, "replica_id", tds.TypeUniqueIdentifier, 0), col(qual, "group_database_id", tds.TypeUniqueIdentifier, 0),
			// recovery_model: 1 FULL, 2 BULK_LOGGED, 3 SIMPLE; is_in_standby:
			// "Database is read-only for restore log" (sys.databases); a
			// STANDBY database is ONLINE and read-only (logchain.go).
			col(qual, "recovery_model", tds.TypeTinyInt, 0), col(qual, "is_in_standby", tds.TypeBit, 0)}
		for _, db := range x.in.allDatabases() {
			rm := recoveryModel(&db)
			created := db.Created
			if created.IsZero() {
				created = time.Date(2003, 4, 8, 9, 13, 36, 0, time.UTC)
			}
			state, stateDesc := int64(0), "ONLINE"
			switch db.State {
			case "RESTORING":
				state, stateDesc = 1, "RESTORING"
			case "OFFLINE":
				state, stateDesc = 6, "OFFLINE"
			}
			// datetime columns hold the server's local wall clock of when
			// the database was created (serverTime), kept as written.
			containment := "NONE"
			if db.Containment == 1 {
				containment = "PARTIAL"
			}
			verify, broker, brokerGUID := "CHECKSUM", db.Name == "msdb", any(nil)
			if !db.system && state == 0 {
				if md, err := x.in.readMetadata(&db); err == nil {
					if md.PageVerify != "" {
						verify = md.PageVerify
					}
					broker, brokerGUID = md.BrokerEnabled, [16]byte(md.BrokerGUID)
				}
			}
			var replica, groupDB any
			if s, ok := x.in.agOf(db.Name); ok {
				replica, groupDB = [16]byte(s.replica), [16]byte(x.in.familyGUID(&db))
			}
			rel.rows = append(rel.rows, []any{db.Name, int64(db.ID), created, state, stateDesc, rm, db.UserAccess, x.in.versionInfo().compat,
				x.in.cfg.Collation, db.ReadOnly || db.Standby, nil, db.TDEThumbprint != "", int64(db.Containment), containment,
				x.in.ownerSID(&db), db.Trustworthy || db.Name == "msdb", verify, broker, brokerGUID, replica, groupDB,
				recoveryModels[rm], db.Standby})
		}
	case "database_files", "master_files":
		rel.cols = []relCol{col(qual, "database_id", tds.TypeInt, 0), col(qual, "file_id", tds.TypeInt, 0),
			col(qual, "type", tds.TypeTinyInt, 0), col(qual, "type_desc", tds.TypeNVarChar, 60),
			col(qual, "name", tds.TypeNVarChar, 128), col(qual, "physical_name", tds.TypeNVarChar, 260),
			col(qual, "state_desc", tds.TypeNVarChar, 60), col(qual, "size", tds.TypeInt, 0),
			col(qual, "max_size", tds.TypeInt, 0), col(qual, "growth", tds.TypeInt, 0),
			// redo_start_lsn: "Log sequence number (LSN) at which the next
			// roll forward must start. Is NULL unless state = RESTORING or
			// state = RECOVERY_PENDING" (sys.master_files,
			// https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-master-files-transact-sql):
			// where the next RESTORE LOG must begin. A STANDBY database,
			// still in its restore sequence, shows it too (not documented).
			col(qual, "redo_start_lsn", tds.TypeNumeric, 0),
			// redo_start_fork_guid: "Unique identifier of the recovery
			// fork. The first_fork_guid of the next log backup restored
			// must match this value" (same page); NULL with redo_start_lsn.
			col(qual, "redo_start_fork_guid", tds.TypeUniqueIdentifier, 0)}
		rel.cols[len(rel.cols)-2].col.Precision = 25
		if name == "database_files" {
			if err := x.mayUse(d); err != nil {
				return nil, err
			}
		}
		// sys.master_files shows a row only to CREATE DATABASE, ALTER ANY
		// DATABASE or VIEW ANY DEFINITION
		// (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-master-files-transact-sql#permissions):
		// a backup login with db_backupoperator alone sees no rows, while
		// [db].sys.database_files is open to every user of db.
		seeAll := name == "database_files" || x.in.seesAllFiles(x.sessionLogin())
		for _, db := range x.in.allDatabases() {
			if name == "database_files" && db.ID != d.ID || !seeAll {
				continue
			}
			for _, f := range x.in.filesOf(&db) {
				// size is in 8-KB pages: the file's allocated size.
				fileState, redo, fork := "ONLINE", any(nil), any(nil)
				if db.State == "RESTORING" || db.Standby {
					redo, fork = lsnText(db.RedoLSN), [16]byte(x.in.redoFork(&db))
					if db.State == "RESTORING" {
						fileState = "RESTORING"
					}
				}
				rel.rows = append(rel.rows, []any{int64(db.ID), int64(f.FileID), f.typeID(), f.typeDesc(), f.Logical, f.Physical, fileState,
					f.Pages + f.Free, int64(-1), int64(8192), redo, fork})
			}
		}
		if name == "database_files" {
			// sys.database_files has no database_id column: it is the
			// current (or named) database's own view
			// (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-database-files-transact-sql).
			rel.cols = rel.cols[1:]
			for i := range rel.rows {
				rel.rows[i] = rel.rows[i][1:]
			}
		}
	case "schemas":
		rel.cols = []relCol{col(qual, "name", tds.TypeNVarChar, 128), col(qual, "schema_id", tds.TypeInt, 0), col(qual, "principal_id", tds.TypeInt, 0)}
		md, err := x.in.readMetadata(d)
		if err != nil {
			return nil, err
		}
		for i, s := range md.Schemas {
			rel.rows = append(rel.rows, []any{s, int64(i + 1), int64(1)})
		}
		if d.system || !containsFold(md.Schemas, "sys") {
			rel.rows = append(rel.rows, []any{"sys", int64(4), int64(4)})
		}
	case "tables", "objects":
		rel.cols = []relCol{col(qual, "name", tds.TypeNVarChar, 128), col(qual, "object_id", tds.TypeInt, 0),
			col(qual, "schema_id", tds.TypeInt, 0), col(qual, "type", tds.TypeChar, 2), col(qual, "type_desc", tds.TypeNVarChar, 60)}
		md, err := x.in.readMetadata(d)
		if err != nil {
			return nil, err
		}
		for _, t := range md.Tables {
			sid := int64(0)
			for i, s := range md.Schemas {
				if strings.EqualFold(s, t.Schema) {
					sid = int64(i + 1)
				}
			}
			rel.rows = append(rel.rows, []any{t.Name, int64(t.ObjectID), sid, "U ", "USER_TABLE"})
		}
	case "dm_exec_requests":
		rel.cols = []relCol{col(qual, "session_id", tds.TypeSmallInt, 0), col(qual, "request_id", tds.TypeInt, 0),
			col(qual, "start_time", tds.TypeDateTime, 0), col(qual, "status", tds.TypeNVarChar, 30),
			col(qual, "command", tds.TypeNVarChar, 32), col(qual, "sql_handle", tds.TypeVarBinary, 64),
			col(qual, "database_id", tds.TypeSmallInt, 0), col(qual, "blocking_session_id", tds.TypeSmallInt, 0),
			col(qual, "wait_type", tds.TypeNVarChar, 60), col(qual, "percent_complete", tds.TypeReal, 0),
			col(qual, "estimated_completion_time", tds.TypeBigInt, 0), col(qual, "total_elapsed_time", tds.TypeInt, 0)}
		now := time.Now()
		all := x.in.canSeeAllRequests(x.sessionLogin())
		x.in.mu.Lock()
		for r := range x.in.requests {
			if !all && r.sessionID != int(x.s.id) {
				continue // without VIEW SERVER (PERFORMANCE) STATE: only the own session
			}
			status := "suspended"
			if r == x.req {
				status = "running"
			}
			var waitType any
			if r.waitType != "" {
				status, waitType = "suspended", r.waitType
			}
			eta := int64(0)
			elapsed := now.Sub(r.start)
			if r.progress && r.percent > 0 {
				eta = int64(float64(elapsed.Milliseconds()) * (100 - r.percent) / r.percent)
			}
			rel.rows = append(rel.rows, []any{int64(r.sessionID), int64(0), x.in.serverTime(r.start), status, r.command,
				sqlHandle(r.id), int64(r.dbID), int64(0), waitType, float64(float32(r.percent)), eta, elapsed.Milliseconds()})
		}
		x.in.mu.Unlock()
		sortRows(x.in.coll, rel.rows, 0)
	case "database_recovery_status":
		return x.recoveryStatusView(qual), nil
	case "dm_exec_sessions", "dm_exec_connections":
		return x.sessionView(name, qual)
	case "certificates":
		return x.certificatesView(d, qual), nil
	case "asymmetric_keys":
		return x.asymmetricKeysView(d, qual), nil
	case "dm_database_encryption_keys":
		return x.encryptionKeysView(qual)
	case "sql_logins":
		return x.sqlLogins(qual), nil
	default:
		if rel, ok, err := x.hostView(name, qual); ok {
			return rel, err
		}
		if rel, ok, err := x.agView(name, qual); ok {
			return rel, err
		}
		return nil, errInvalidObject("sys." + name)
	}
	return rel, nil
}

func sortRows(coll collation, rows [][]any, col int) {
	for i := 1; i < len(rows); i++ {
		for j := i; j > 0; j-- {
			if c, ok := coll.compareValues(rows[j-1][col], rows[j][col]); ok && c > 0 {
				rows[j-1], rows[j] = rows[j], rows[j-1]
			}
		}
	}
}

func sqlHandle(id int64) []byte {
	h := make([]byte, 20)
	copy(h, "\x02\x00\x00\x00SQSIM")
	for i := range 8 {
		h[12+i] = byte(id >> (8 * i))
	}
	return h
}

// applySQLText joins each row with sys.dm_exec_sql_text(<handle>): columns
// dbid, objectid, number, encrypted, text.
func (x *execCtx) applySQLText(rel *relation, f *fromClause) (*relation, error) {
	qual := strings.ToLower(f.applyAlias)
	out := &relation{cols: append(append([]relCol(nil), rel.cols...),
		col(qual, "dbid", tds.TypeSmallInt, 0), col(qual, "objectid", tds.TypeInt, 0), col(qual, "number", tds.TypeSmallInt, 0),
		col(qual, "encrypted", tds.TypeBit, 0), col(qual, "text", tds.TypeNVarChar, 0))}
	texts := map[string]*request{}
	all := x.in.canSeeAllRequests(x.sessionLogin())
	x.in.mu.Lock()
	for r := range x.in.requests {
		if all || r.sessionID == int(x.s.id) {
			texts[string(sqlHandle(r.id))] = r
		}
	}
	x.in.mu.Unlock()
	for _, row := range rel.rows {
		v, err := (&env{x: x, rel: rel, row: row}).eval(f.applyArgs[0])
		if err != nil {
			return nil, err
		}
		h, _ := v.([]byte)
		r := texts[string(h)]
		if r == nil {
			continue // CROSS APPLY drops rows without a match
		}
		out.rows = append(out.rows, append(append([]any(nil), row...), int64(r.dbID), nil, nil, false, r.text))
	}
	return out, nil
}

func (x *execCtx) msdbTable(name, qual string) (*relation, error) {
	// SQL Server Agent's tables are read by sysadmin and through msdb's
	// SQLAgent roles' procedures; a SELECT on them needs SELECT in msdb
	// (https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/dbo-sysjobsteps-transact-sql).
	if name == "restorehistory" || name == "backupset" || name == "backupmediafamily" || name == "sysjobs" || name == "sysjobsteps" {
		if err := x.mayReadMsdb(name); err != nil {
			return nil, err
		}
	}
	rel := &relation{}
	x.in.mu.Lock()
	defer x.in.mu.Unlock()
	switch name {
	case "restorehistory":
		rel.cols = []relCol{col(qual, "restore_history_id", tds.TypeInt, 0), col(qual, "restore_date", tds.TypeDateTime, 0),
			col(qual, "destination_database_name", tds.TypeNVarChar, 128), col(qual, "user_name", tds.TypeNVarChar, 128),
			col(qual, "backup_set_id", tds.TypeInt, 0), col(qual, "restore_type", tds.TypeChar, 1),
			col(qual, "replace", tds.TypeBit, 0), col(qual, "recovery", tds.TypeBit, 0), col(qual, "restart", tds.TypeBit, 0),
			col(qual, "stop_at", tds.TypeDateTime, 0), col(qual, "device_count", tds.TypeTinyInt, 0)}
		for _, r := range x.in.cat.RestoreHistory {
			var stopAt any
			if !r.StopAt.IsZero() {
				stopAt = r.StopAt
			}
			rel.rows = append(rel.rows, []any{r.ID, r.Date, r.Database, r.User, r.BackupSetID, r.Type, r.Replace, r.Recovery, false, stopAt, nil})
		}
	case "backupset":
		rel.cols = []relCol{col(qual, "backup_set_id", tds.TypeInt, 0), col(qual, "backup_set_uuid", tds.TypeUniqueIdentifier, 0),
			col(qual, "media_set_id", tds.TypeInt, 0), col(qual, "database_name", tds.TypeNVarChar, 128),
			col(qual, "server_name", tds.TypeNVarChar, 128), col(qual, "type", tds.TypeChar, 1),
			col(qual, "backup_start_date", tds.TypeDateTime, 0), col(qual, "backup_finish_date", tds.TypeDateTime, 0),
			col(qual, "first_lsn", tds.TypeNumeric, 0), col(qual, "last_lsn", tds.TypeNumeric, 0),
			col(qual, "is_copy_only", tds.TypeBit, 0), col(qual, "has_backup_checksums", tds.TypeBit, 0),
			col(qual, "backup_size", tds.TypeNumeric, 0), col(qual, "compressed_backup_size", tds.TypeNumeric, 0),
			col(qual, "name", tds.TypeNVarChar, 128), col(qual, "description", tds.TypeNVarChar, 255),
			col(qual, "family_guid", tds.TypeUniqueIdentifier, 0),
			// The chain columns (backupset (Transact-SQL)): checkpoint_lsn,
			// database_backup_lsn, who took it (user_name: another login's
			// or tool's backup shows as theirs), the recovery model and
			// begins_log_chain.
			col(qual, "checkpoint_lsn", tds.TypeNumeric, 0), col(qual, "database_backup_lsn", tds.TypeNumeric, 0),
			col(qual, "user_name", tds.TypeNVarChar, 128), col(qual, "recovery_model", tds.TypeNVarChar, 60),
			col(qual, "begins_log_chain", tds.TypeBit, 0),
			// time_zone: "Difference between local time (where the backup
			// operation is taking place) and UTC in 15-minute intervals
			// using the time zone information at the time the backup
			// operation started ... A value of 127 indicates unknown"
			// (backupset (Transact-SQL)).
			col(qual, "time_zone", tds.TypeSmallInt, 0),
			// The recovery path the set covers (forks.go).
			col(qual, "first_recovery_fork_guid", tds.TypeUniqueIdentifier, 0), col(qual, "last_recovery_fork_guid", tds.TypeUniqueIdentifier, 0),
			col(qual, "fork_point_lsn", tds.TypeNumeric, 0),
			// A differential's base: "Base LSN for differential backups"
			// and "the unique identifier of the differential base"; NULL
			// for other types (backupset (Transact-SQL)).
			col(qual, "differential_base_lsn", tds.TypeNumeric, 0), col(qual, "differential_base_guid", tds.TypeUniqueIdentifier, 0),
			// The build that wrote the set: "Microsoft SQL Server major
			// version number that created the backup set", its minor
			// version and build number, tinyint, tinyint and smallint
			// (backupset (Transact-SQL),
			// https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/backupset-transact-sql).
			col(qual, "software_major_version", tds.TypeTinyInt, 0), col(qual, "software_minor_version", tds.TypeTinyInt, 0),
			col(qual, "software_build_version", tds.TypeSmallInt, 0),
			// An encrypted backup's algorithm, encryptor thumbprint and
			// type (backupenc.go, encryptionColumns).
			col(qual, "key_algorithm", tds.TypeNVarChar, 32), col(qual, "encryptor_thumbprint", tds.TypeVarBinary, 20),
			col(qual, "encryptor_type", tds.TypeNVarChar, 32)}
		for i := range rel.cols {
			if rel.cols[i].col.Type == tds.TypeNumeric {
				rel.cols[i].col.Precision = 25
			}
		}
		for _, b := range x.in.cat.BackupSets {
			// NAME = and DESCRIPTION = of the BACKUP; NULL when not given.
			var name, desc, family any
			if b.Name != "" {
				name = b.Name
			}
			if b.Description != "" {
				desc = b.Description
			}
			if b.FamilyGUID != (guid{}) {
				family = [16]byte(b.FamilyGUID)
			}
			firstFork, lastFork, forkPoint := forkColumns(backupSetForks(b))
			diffBaseLSN, diffBaseGUID := diffBaseColumns(b.DiffBaseLSN, b.DiffBaseGUID)
			major, minor, build := softwareColumns(b.SoftwareVersion)
			keyAlg, encTP, encType := encryptionColumns(b.KeyAlgorithm, b.EncryptorThumbprint, b.EncryptorType)
			typ, model := b.Type, b.RecoveryModel
			if typ == "" {
				typ = "D"
			}
			if model == "" {
				model = "FULL"
			}
			var user any
			if b.User != "" {
				user = b.User
			}
			rel.rows = append(rel.rows, []any{b.ID, b.GUID, b.ID, b.Database, b.Server, typ, b.Start, b.Finish,
				itoa(int64(b.FirstLSN)), itoa(int64(b.LastLSN)), b.CopyOnly, b.Checksums, itoa(b.Size), itoa(b.CompSize),
				name, desc, family, itoa(int64(b.CheckpointLSN)), itoa(int64(b.DatabaseBackupLSN)), user, model, b.BeginsLogChain,
				backupTimeZone(b.Start), firstFork, lastFork, forkPoint, diffBaseLSN, diffBaseGUID, major, minor, build, keyAlg, encTP, encType})
		}
	case "backupmediafamily":
		// One row per media family: media_set_id (the emulator's is the
		// backup set's id), family_sequence_number and physical_device_name
		// as given in the BACKUP ("backupmediafamily (Transact-SQL)").
		rel.cols = []relCol{col(qual, "media_set_id", tds.TypeInt, 0), col(qual, "family_sequence_number", tds.TypeTinyInt, 0),
			col(qual, "media_family_id", tds.TypeUniqueIdentifier, 0), col(qual, "physical_device_name", tds.TypeNVarChar, 260),
			col(qual, "device_type", tds.TypeTinyInt, 0)}
		for _, b := range x.in.cat.BackupSets {
			for i, dev := range b.Devices {
				rel.rows = append(rel.rows, []any{b.ID, int64(i + 1), nil, dev, int64(2)})
			}
		}
	case "sysjobs":
		rel.cols = []relCol{col(qual, "job_id", tds.TypeUniqueIdentifier, 0), col(qual, "name", tds.TypeNVarChar, 128),
			col(qual, "enabled", tds.TypeTinyInt, 0)}
		for _, j := range x.in.cat.AgentJobs {
			rel.rows = append(rel.rows, []any{[16]byte(j.ID), j.Name, int64(1)})
		}
	case "sysjobsteps":
		rel.cols = []relCol{col(qual, "job_id", tds.TypeUniqueIdentifier, 0), col(qual, "step_id", tds.TypeInt, 0),
			col(qual, "step_name", tds.TypeNVarChar, 128), col(qual, "subsystem", tds.TypeNVarChar, 40),
			col(qual, "command", tds.TypeNVarChar, 0), col(qual, "database_name", tds.TypeNVarChar, 128)}
		for _, j := range x.in.cat.AgentJobs {
			for i, st := range j.Steps {
				var db any
				if st.Database != "" {
					db = st.Database
				}
				rel.rows = append(rel.rows, []any{[16]byte(j.ID), int64(i + 1), st.Name, st.Subsystem, st.Command, db})
			}
		}
	default:
		return nil, errInvalidObject("msdb.dbo." + name)
	}
	return rel, nil
}

// findTable returns a user table of a database's metadata.
func findTable(md *metadata, schema, name string) *tableDef {
	for _, t := range md.Tables {
		if strings.EqualFold(t.Schema, schema) && strings.EqualFold(t.Name, name) {
			return t
		}
	}
	return nil
}

func (x *execCtx) userDB(dbName string) (*database, error) {
	d := x.in.lookupDB(dbName)
	if d == nil {
		return nil, errNoDatabase(dbName)
	}
	if x.in.restoring(d) {
		return nil, errRestoring(d.Name)
	}
	if x.in.offline(d) {
		return nil, errOffline(d.Name)
	}
	if e := x.in.agAccess(d); e != nil {
		return nil, e
	}
	return d, nil
}

func (x *execCtx) userTable(dbName, schema, name, qual string) (*relation, error) {
	d, err := x.userDB(dbName)
	if err != nil {
		return nil, err
	}
	md, err := x.in.readMetadata(d)
	if err != nil {
		return nil, err
	}
	t := findTable(md, schema, name)
	if t == nil {
		return nil, errInvalidObject(qualified(dbName, schema, name, x.s.Database()))
	}
	if err := x.mayTable(d, t.Schema, t.Name, "SELECT"); err != nil {
		return nil, err
	}
	rel := &relation{}
	for _, c := range t.Columns {
		rel.cols = append(rel.cols, relCol{qual: qual, name: c.Name, col: sqlColumn(c)})
	}
	if t.Generated {
		rel.gen = t
		return rel, nil
	}
	if t.CommitLog {
		return x.commitLogRelation(d, rel)
	}
	for _, r := range t.Rows {
		row := make([]any, len(t.Columns))
		for i := range t.Columns {
			if i < len(r) {
				row[i] = columnValue(&t.Columns[i], r[i])
			}
		}
		rel.rows = append(rel.rows, row)
	}
	return rel, nil
}

func qualified(db, schema, name, current string) string {
	if strings.EqualFold(db, current) {
		return schema + "." + name
	}
	return db + "." + schema + "." + name
}

// objectID answers OBJECT_ID('[db].[schema].[name]').
func (x *execCtx) objectID(text string) (any, error) {
	toks, err := lex(text)
	if err != nil {
		return nil, nil
	}
	p := &parser{toks: toks, sql: text}
	o, err := p.objName()
	if err != nil || p.peek().kind != tEOF {
		return nil, nil
	}
	dbName, schema, name, err := x.resolveName(o)
	if err != nil {
		return nil, nil
	}
	if schema == "" {
		schema = "dbo"
	}
	d := x.in.lookupDB(dbName)
	if d == nil || d.system {
		return nil, nil
	}
	md, err := x.in.readMetadata(d)
	if err != nil {
		return nil, err
	}
	if t := findTable(md, schema, name); t != nil {
		return int64(t.ObjectID), nil
	}
	return nil, nil
}

// backupTimeZone is backupset.time_zone of a backup that started at start
// (stamped on the server's wall clock, in its zone then): its offset from
// UTC in 15-minute units, 127 when unknown.
func backupTimeZone(start time.Time) int64 {
	if start.IsZero() {
		return 127
	}
	_, off := start.Zone()
	return int64(off / (15 * 60))
}
