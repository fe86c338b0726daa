package sqlsim

import (
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

// source evaluates a FROM clause: the first table, CROSS APPLY
// sys.dm_exec_sql_text, then the joins left to right.
func (x *execCtx) source(f *fromClause) (*relation, error) {
	rel, err := x.tableSource(f.name, f.alias)
	if err != nil {
		return nil, err
	}
	if f.apply {
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
// rows with NULLs on the right.
func (x *execCtx) join(left, right *relation, j joinClause) (*relation, error) {
	if left.gen != nil || right.gen != nil {
		return nil, errNotSupported("joins with a generated table (only COUNT(*), COUNT_BIG(*), MAX and MIN read them)")
	}
	out := &relation{cols: append(append([]relCol(nil), left.cols...), right.cols...)}
	for _, l := range left.rows {
		matched := false
		for _, r := range right.rows {
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
			col(qual, "source_database_id", tds.TypeInt, 0)}
		for _, db := range x.in.allDatabases() {
			rm := "FULL"
			if db.Name == "tempdb" || db.Name == "msdb" || db.Name == "master" {
				rm = "SIMPLE"
			}
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
			// datetime columns hold the server's local wall clock, like GETDATE().
			rel.rows = append(rel.rows, []any{db.Name, int64(db.ID), x.in.serverTime(created), state, stateDesc, rm, db.UserAccess, int64(160), "SQL_Latin1_General_CP1_CI_AS", db.ReadOnly, nil})
		}
	case "database_files", "master_files":
		rel.cols = []relCol{col(qual, "database_id", tds.TypeInt, 0), col(qual, "file_id", tds.TypeInt, 0),
			col(qual, "type", tds.TypeTinyInt, 0), col(qual, "type_desc", tds.TypeNVarChar, 60),
			col(qual, "name", tds.TypeNVarChar, 128), col(qual, "physical_name", tds.TypeNVarChar, 260),
			col(qual, "state_desc", tds.TypeNVarChar, 60), col(qual, "size", tds.TypeInt, 0),
			col(qual, "max_size", tds.TypeInt, 0), col(qual, "growth", tds.TypeInt, 0)}
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
			for _, f := range db.Files {
				typ := int64(0)
				if f.Log {
					typ = 1
				}
				rel.rows = append(rel.rows, []any{int64(db.ID), int64(f.FileID), typ, f.typeDesc(), f.Logical, f.Physical, "ONLINE", f.Pages, int64(-1), int64(8192)})
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
		sortRows(rel.rows, 0)
	default:
		return nil, errInvalidObject("sys." + name)
	}
	return rel, nil
}

func sortRows(rows [][]any, col int) {
	for i := 1; i < len(rows); i++ {
		for j := i; j > 0; j-- {
			if c, ok := compare(rows[j-1][col], rows[j][col]); ok && c > 0 {
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
		v, err := (&env{x: x, rel: rel, row: row}).eval(f.applyArg)
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
	if name == "restorehistory" || name == "backupset" {
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
			rel.rows = append(rel.rows, []any{r.ID, x.in.serverTime(r.Date), r.Database, r.User, r.BackupSetID, r.Type, r.Replace, r.Recovery, false, nil, nil})
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
			col(qual, "family_guid", tds.TypeUniqueIdentifier, 0)}
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
			rel.rows = append(rel.rows, []any{b.ID, b.GUID, b.ID, b.Database, b.Server, "D", x.in.serverTime(b.Start), x.in.serverTime(b.Finish),
				itoa(int64(b.FirstLSN)), itoa(int64(b.LastLSN)), b.CopyOnly, b.Checksums, itoa(b.Size), itoa(b.CompSize),
				name, desc, family})
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

func (x *execCtx) createSchema(n *createSchemaStmt) error {
	d := x.currentDB()
	if d.system {
		return errNotSupported("CREATE SCHEMA in a system database")
	}
	if err := x.mayWrite(d, "CREATE SCHEMA"); err != nil {
		return err
	}
	return x.in.updateMetadata(d, func(md *metadata) error {
		if containsFold(md.Schemas, n.name) || strings.EqualFold(n.name, "sys") {
			return sqlErr(2714, 16, "There is already an object named '%s' in the database.", n.name)
		}
		md.Schemas = append(md.Schemas, n.name)
		return nil
	})
}

func (x *execCtx) tableTarget(o objName) (*database, string, string, error) {
	dbName, schema, name, err := x.resolveName(o)
	if err != nil {
		return nil, "", "", err
	}
	if schema == "" {
		schema = "dbo"
	}
	d, err := x.userDB(dbName)
	if err != nil {
		return nil, "", "", err
	}
	if d.system {
		return nil, "", "", errNotSupported("tables in system database " + d.Name)
	}
	return d, schema, name, nil
}

func (x *execCtx) createTable(n *createTableStmt) error {
	d, schema, name, err := x.tableTarget(n.name)
	if err != nil {
		return err
	}
	if err := x.mayWrite(d, "CREATE TABLE"); err != nil {
		return err
	}
	for _, c := range n.cols {
		switch c.Type {
		case "int", "bigint", "smallint", "tinyint", "nvarchar", "varchar", "nchar", "char", "datetime", "datetime2", "date", "bit", "sysname":
		default:
			return errNotSupported("column type " + c.Type)
		}
	}
	return x.in.updateMetadata(d, func(md *metadata) error {
		if !containsFold(md.Schemas, schema) {
			return sqlErr(2760, 16, "The specified schema name \"%s\" either does not exist or you do not have permission to use it.", schema)
		}
		if findTable(md, schema, name) != nil {
			return sqlErr(2714, 16, "There is already an object named '%s' in the database.", name)
		}
		t := &tableDef{Schema: schema, Name: name, ObjectID: uint32(901578250 + 32000011*len(md.Tables)), Columns: n.cols, PrimaryKey: n.pk, Checks: n.checks}
		if n.pk != nil {
			for _, c := range n.pk.Columns {
				_, cd := t.column(c)
				if cd == nil {
					return sqlErr(1911, 16, "Column name '%s' does not exist in the target table or view.", c)
				}
				cd.NotNull = true
			}
		}
		md.Tables = append(md.Tables, t)
		return nil
	})
}

func (x *execCtx) alterTable(n *alterTableStmt) error {
	d, schema, name, err := x.tableTarget(n.name)
	if err != nil {
		return err
	}
	if err := x.mayWrite(d, "ALTER"); err != nil {
		return err
	}
	return x.in.updateMetadata(d, func(md *metadata) error {
		t := findTable(md, schema, name)
		if t == nil {
			return sqlErr(4902, 16, "Cannot find the object \"%s\" because it does not exist or you do not have permissions.", n.name.String())
		}
		if n.check == nil {
			return nil
		}
		for _, c := range t.Checks {
			if strings.EqualFold(c.Name, n.check.Name) {
				return sqlErr(2714, 16, "There is already an object named '%s' in the database.", c.Name)
			}
		}
		if err := x.checkRows(t, t.Rows, "ALTER TABLE", d.Name); err != nil {
			return err
		}
		t.Checks = append(t.Checks, *n.check)
		return nil
	})
}

// checkRows enforces the CHECK constraints and the primary key.
func (x *execCtx) checkRows(t *tableDef, rows [][]any, verb, dbName string) error {
	rel := &relation{}
	for _, c := range t.Columns {
		rel.cols = append(rel.cols, relCol{name: c.Name, col: sqlColumn(c)})
	}
	for _, ck := range t.Checks {
		toks, err := lex(ck.Expr)
		if err != nil {
			return err
		}
		e, err := (&parser{toks: toks, sql: ck.Expr}).expr()
		if err != nil {
			return err
		}
		for _, r := range rows {
			v, err := (&env{x: x, rel: rel, row: r}).eval(e)
			if err != nil {
				return err
			}
			if v != nil && !truthy(v) {
				return sqlErr(547, 16, "The %s statement conflicted with the CHECK constraint \"%s\". The conflict occurred in database \"%s\", table \"%s.%s\".", verb, ck.Name, dbName, t.Schema, t.Name)
			}
		}
	}
	for i, c := range t.Columns {
		if c.NotNull {
			for _, r := range rows {
				if r[i] == nil {
					return sqlErr(515, 16, "Cannot insert the value NULL into column '%s', table '%s.%s.%s'; column does not allow nulls. %s fails.", c.Name, dbName, t.Schema, t.Name, verb)
				}
			}
		}
	}
	if t.PrimaryKey != nil {
		seen := map[string]bool{}
		for _, r := range rows {
			var key []string
			for _, kc := range t.PrimaryKey.Columns {
				i, _ := t.column(kc)
				key = append(key, strings.ToLower(toString(normValue(r[i]))))
			}
			k := strings.Join(key, ", ")
			if seen[k] {
				return sqlErr(2627, 14, "Violation of PRIMARY KEY constraint '%s'. Cannot insert duplicate key in object '%s.%s'. The duplicate key value is (%s).", t.PrimaryKey.Name, t.Schema, t.Name, k)
			}
			seen[k] = true
		}
	}
	return nil
}

func (x *execCtx) insert(n *insertStmt) error {
	d, schema, name, err := x.tableTarget(n.name)
	if err != nil {
		return err
	}
	if x.in.readOnly(d) {
		return errReadOnly(d.Name)
	}
	var count int64
	err = x.in.updateMetadata(d, func(md *metadata) error {
		t := findTable(md, schema, name)
		if t == nil {
			return errInvalidObject(n.name.String())
		}
		if t.Generated {
			return errNotSupported("INSERT into the generated table " + t.Schema + "." + t.Name)
		}
		if err := x.mayTable(d, t.Schema, t.Name, "INSERT"); err != nil {
			return err
		}
		idx := make([]int, 0, len(t.Columns))
		if len(n.cols) == 0 {
			for i := range t.Columns {
				idx = append(idx, i)
			}
		} else {
			for _, c := range n.cols {
				i, _ := t.column(c)
				if i < 0 {
					return errInvalidColumn(c)
				}
				idx = append(idx, i)
			}
		}
		rows := append([][]any(nil), t.Rows...)
		for _, vals := range n.rows {
			if len(vals) > len(idx) {
				return sqlErr(110, 15, "There are fewer columns in the INSERT statement than values specified in the VALUES clause. The number of values in the VALUES clause must match the number of columns specified in the INSERT statement.")
			}
			if len(vals) < len(idx) {
				return sqlErr(109, 15, "There are more columns in the INSERT statement than values specified in the VALUES clause. The number of values in the VALUES clause must match the number of columns specified in the INSERT statement.")
			}
			row := make([]any, len(t.Columns))
			for j, e := range vals {
				v, err := (&env{x: x}).eval(e)
				if err != nil {
					return err
				}
				row[idx[j]] = storeValue(t.Columns[idx[j]], v)
			}
			rows = append(rows, row)
		}
		if err := x.checkRows(t, rows, "INSERT", d.Name); err != nil {
			return err
		}
		t.Rows = rows
		count = int64(len(n.rows))
		return nil
	})
	if err != nil {
		return err
	}
	x.rows = count
	return x.w.StatementDone(tds.CmdInsert, count, true)
}

func storeValue(c columnDef, v any) any {
	v = normValue(v)
	if t, ok := v.(time.Time); ok {
		return t.UTC().Format(time.RFC3339Nano)
	}
	switch c.Type {
	case "int", "bigint", "smallint", "tinyint":
		if s, ok := v.(string); ok {
			n, err := castTo(s, "bigint")
			if err == nil {
				return n
			}
		}
	}
	return v
}

// update runs UPDATE t SET ... [OUTPUT inserted.c, ...] [WHERE ...]; the
// read-modify-write happens under the metadata lock, so concurrent
// increments never hand out the same number.
func (x *execCtx) update(n *updateStmt) error {
	d, schema, name, err := x.tableTarget(n.name)
	if err != nil {
		return err
	}
	if x.in.readOnly(d) {
		return errReadOnly(d.Name)
	}
	var out *relation
	var count int64
	err = x.in.updateMetadata(d, func(md *metadata) error {
		t := findTable(md, schema, name)
		if t == nil {
			return errInvalidObject(n.name.String())
		}
		if t.Generated {
			return errNotSupported("UPDATE of the generated table " + t.Schema + "." + t.Name)
		}
		if err := x.mayUpdate(d, t, n); err != nil {
			return err
		}
		rel := &relation{}
		for _, c := range t.Columns {
			rel.cols = append(rel.cols, relCol{qual: strings.ToLower(name), name: c.Name, col: sqlColumn(c)})
		}
		ins := &relation{}
		for _, c := range rel.cols {
			c.qual = "inserted"
			ins.cols = append(ins.cols, c)
		}
		for _, c := range rel.cols {
			c.qual = "deleted"
			ins.cols = append(ins.cols, c)
		}
		if len(n.output) > 0 {
			out = &relation{}
			for _, it := range n.output {
				out.cols = append(out.cols, relCol{name: columnName(it), col: (&env{x: x, rel: ins}).exprColumn(it.e, columnName(it))})
			}
		}
		rows := make([][]any, len(t.Rows))
		for i, r := range t.Rows {
			row := make([]any, len(t.Columns))
			for j := range t.Columns {
				if j < len(r) {
					row[j] = columnValue(&t.Columns[j], r[j])
				}
			}
			rows[i] = row
		}
		for i, old := range rows {
			if n.where != nil {
				v, err := (&env{x: x, rel: rel, row: old}).eval(n.where)
				if err != nil {
					return err
				}
				if !truthy(v) {
					continue
				}
			}
			row := append([]any(nil), old...)
			for _, s := range n.sets {
				v, err := (&env{x: x, rel: rel, row: old}).eval(s.e)
				if err != nil {
					return err
				}
				if s.column != "" {
					j, cd := t.column(s.column)
					if cd == nil {
						return errInvalidColumn(s.column)
					}
					row[j] = normValue(v)
				}
				if s.variable != "" {
					vr, ok := x.vars[strings.ToLower(s.variable)]
					if !ok {
						return errMustDeclare(s.variable)
					}
					vr.v = normValue(v)
				}
			}
			rows[i] = row
			count++
			if out != nil {
				both := append(append([]any(nil), row...), old...)
				orow := make([]any, len(n.output))
				for k, it := range n.output {
					v, err := (&env{x: x, rel: ins, row: both}).eval(it.e)
					if err != nil {
						return err
					}
					orow[k] = v
				}
				out.rows = append(out.rows, orow)
			}
		}
		if err := x.checkRows(t, rows, "UPDATE", d.Name); err != nil {
			return err
		}
		stored := make([][]any, len(rows))
		for i, r := range rows {
			stored[i] = make([]any, len(r))
			for j, v := range r {
				stored[i][j] = storeValue(t.Columns[j], v)
			}
		}
		t.Rows = stored
		return nil
	})
	if err != nil {
		return err
	}
	x.rows = count
	if out != nil {
		cols := make([]tds.Column, len(out.cols))
		for i, c := range out.cols {
			cols[i] = c.col
		}
		if err := x.w.Columns(cols); err != nil {
			return err
		}
		for _, r := range out.rows {
			vals := make([]any, len(r))
			for i, v := range r {
				vals[i] = outValue(v, cols[i])
			}
			if err := x.w.Row(vals...); err != nil {
				return err
			}
		}
	}
	return x.w.StatementDone(tds.CmdUpdate, count, true)
}

// dropDatabase runs DROP DATABASE [IF EXISTS] a, b.
func (x *execCtx) dropDatabase(n *dropDBStmt) error {
	for _, e := range n.names {
		v, err := (&env{x: x}).eval(e)
		if err != nil {
			return err
		}
		name := toString(v)
		x.in.mu.Lock()
		d := x.in.lookupDBLocked(name)
		if d == nil {
			x.in.mu.Unlock()
			if n.ifExists {
				continue
			}
			return sqlErr(3701, 11, "Cannot drop the database '%s', because it does not exist or you do not have permission.", name)
		}
		if d.system {
			x.in.mu.Unlock()
			return sqlErr(3708, 16, "Cannot drop the database '%s' because it is a system database.", d.Name)
		}
		x.in.mu.Unlock()
		if err := x.mayDrop(d); err != nil {
			return err
		}
		x.in.mu.Lock()
		if x.in.lookupDBLocked(name) != d {
			x.in.mu.Unlock()
			return sqlErr(3701, 11, "Cannot drop the database '%s', because it does not exist or you do not have permission.", name)
		}
		if x.in.dbInUseLocked(d, x.s) {
			x.in.mu.Unlock()
			return sqlErr(3702, 16, "Cannot drop database \"%s\" because it is currently in use.", d.Name)
		}
		err = x.in.removeDatabaseLocked(d)
		x.in.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// dbInUseLocked reports whether another session is in d or a request runs
// against it.
func (in *Instance) dbInUseLocked(d *database, self *session) bool {
	for r := range in.requests {
		if r.dbID == d.ID && r.sessionID != int(self.id) && r.command != "SELECT" {
			return true
		}
		// A RESTORE holds its target exclusively from its start
		// (https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-3000-to-3999,
		// 3101 "Exclusive access could not be obtained because the
		// database is in use"): a second RESTORE into it fails.
		if r.target != "" && strings.EqualFold(r.target, d.Name) && r.sessionID != int(self.id) {
			return true
		}
	}
	for _, s := range in.sessions {
		if s != self && strings.EqualFold(s.Database(), d.Name) {
			return true
		}
	}
	return false
}

// restoringLocked reports another session's RESTORE into name, a database
// that does not exist yet (its first RESTORE creates it).
func (in *Instance) restoringLocked(name string, self *session) bool {
	for r := range in.requests {
		if r.target != "" && strings.EqualFold(r.target, name) && r.sessionID != int(self.id) {
			return true
		}
	}
	return false
}

// alterDatabase handles SET SINGLE_USER/MULTI_USER/RESTRICTED_USER and
// READ_ONLY/READ_WRITE [WITH ROLLBACK IMMEDIATE]: other sessions' requests
// against the database are cancelled and their sessions moved to master.
// READ_ONLY and READ_WRITE need exclusive access: without ROLLBACK, another
// session in the database fails the statement with 5070
// (https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-database-transact-sql-set-options#database_update).
func (x *execCtx) alterDatabase(n *alterDBStmt) error {
	v, err := (&env{x: x}).eval(n.db)
	if err != nil {
		return err
	}
	name := toString(v)
	failed := sqlErr(5069, 16, "ALTER DATABASE statement failed.")
	d := x.in.lookupDB(name)
	if d == nil || d.system || !x.mayAlterDB(d) {
		return tds.Errors{
			sqlErr(5011, 14, "User does not have permission to alter database '%s', the database does not exist, or the database is not in a state that allows access checks.", name),
			failed,
		}
	}
	x.in.mu.Lock()
	if x.in.lookupDBLocked(name) != d {
		x.in.mu.Unlock()
		return tds.Errors{sqlErr(5011, 14, "User does not have permission to alter database '%s', the database does not exist, or the database is not in a state that allows access checks.", name), failed}
	}
	if d.State == "RESTORING" {
		x.in.mu.Unlock()
		return tds.Errors{
			sqlErr(5052, 16, "ALTER DATABASE is not permitted while a database is in the Restoring state."),
			failed,
		}
	}
	exclusive := n.option == "SINGLE_USER" || n.option == "READ_ONLY" || n.option == "READ_WRITE" || n.option == "OFFLINE"
	if exclusive && n.option != "SINGLE_USER" && !n.rollback && x.in.dbInUseLocked(d, x.s) {
		x.in.mu.Unlock()
		return tds.Errors{
			sqlErr(5070, 16, "Database state cannot be changed while other users are using the database '%s'", d.Name),
			failed,
		}
	}
	rolledBack := false
	if exclusive {
		for r := range x.in.requests {
			if r.dbID == d.ID && r.sessionID != int(x.s.id) {
				r.cancel()
				rolledBack = true
			}
		}
		for _, s := range x.in.sessions {
			if s != x.s && strings.EqualFold(s.Database(), d.Name) {
				s.setDatabase("master")
				rolledBack = true
			}
		}
	}
	switch n.option {
	case "READ_ONLY":
		d.ReadOnly = true
	case "READ_WRITE":
		d.ReadOnly = false
	case "OFFLINE":
		d.State = "OFFLINE"
	case "ONLINE":
		d.State = ""
	default:
		d.UserAccess = n.option
	}
	err = x.in.saveCatalog()
	x.in.mu.Unlock()
	if err != nil {
		return err
	}
	if n.option == "SINGLE_USER" || rolledBack {
		return x.w.Info(5060, 10, "Nonqualified transactions are being rolled back. Estimated rollback completion: 100%.")
	}
	return nil
}
