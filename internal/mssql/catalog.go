package mssql

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	mssqldb "github.com/microsoft/go-mssqldb"
)

// BackupHeader is one row of RESTORE HEADERONLY (the columns the cycle uses).
type BackupHeader struct {
	BackupName           string
	BackupType           int64 // 1 database, 2 log, 5 differential
	Position             int64
	ServerName           string
	DatabaseName         string
	BackupSize           int64
	CompressedBackupSize int64
	FirstLSN             string // numeric(25,0), as text
	LastLSN              string
	CheckpointLSN        string
	DatabaseBackupLSN    string
	BackupStartDate      time.Time // datetime: the backing-up server's wall clock, labelled UTC (see catalog.Header)
	BackupFinishDate     time.Time
	Compressed           bool
	HasBackupChecksums   bool
	IsDamaged            bool
	IsCopyOnly           bool
	BackupSetGUID        string
	FamilyGUID           string
	// DifferentialBaseGUID and DifferentialBaseLSN name a differential's
	// base, the full backup whose changes since it the set holds ("" for
	// any other type; RESTORE HEADERONLY).
	DifferentialBaseGUID string
	DifferentialBaseLSN  string
	// SoftwareVersion is the build that wrote the backup,
	// SoftwareVersionMajor.Minor.Build ("16.0.4135"); "" when not reported.
	SoftwareVersion string
	// Containment is 1 for a partially contained database (SQL Server
	// 2012+).
	Containment int64
	// CompressionAlgorithm is MS_XPRESS, QAT_DEFLATE, ... for a compressed
	// set (SQL Server 2022 and later; "" before).
	CompressionAlgorithm string
	// Fork is the recovery path the set is on (FirstRecoveryForkID,
	// RecoveryForkID, ForkPointLSN).
	Fork RecoveryFork
	// A set taken WITH ENCRYPTION: KeyAlgorithm (aes_256, ...),
	// EncryptorThumbprint (ThumbprintText) and EncryptorType (CERTIFICATE,
	// ASYMMETRIC KEY); all "" for a set that is not encrypted (NULL or
	// NO_Encryption, "RESTORE Statements - HEADERONLY (Transact-SQL)").
	KeyAlgorithm, EncryptorThumbprint, EncryptorType string
}

// FileListEntry is one row of RESTORE FILELISTONLY.
type FileListEntry struct {
	LogicalName   string
	PhysicalName  string
	Type          string // D data, L log, F full-text, S filestream
	FileGroupName string
	Size          int64
	FileID        int64
	// BackupSizeInBytes is how much of the file the backup holds.
	BackupSizeInBytes int64
	// TDEThumbprint is the certificate of a TDE database's encryption key
	// (ThumbprintText); "" without TDE.
	TDEThumbprint string
}

// HeaderOnly runs a RESTORE HEADERONLY statement (built by internal/tsql)
// and reads its rows by column name, so servers that add columns (every
// version does) still scan.
func (db *DB) HeaderOnly(ctx context.Context, statement string) ([]BackupHeader, error) {
	var out []BackupHeader
	err := db.scan(ctx, "RESTORE HEADERONLY", statement, nil, func(r row) {
		out = append(out, BackupHeader{
			BackupName: r.str("BackupName"), BackupType: r.int("BackupType"), Position: r.int("Position"),
			ServerName: r.str("ServerName"), DatabaseName: r.str("DatabaseName"),
			BackupSize: r.int("BackupSize"), CompressedBackupSize: r.int("CompressedBackupSize"),
			FirstLSN: r.str("FirstLSN"), LastLSN: r.str("LastLSN"), CheckpointLSN: r.str("CheckpointLSN"),
			DatabaseBackupLSN: r.str("DatabaseBackupLSN"),
			BackupStartDate:   r.time("BackupStartDate"), BackupFinishDate: r.time("BackupFinishDate"),
			Compressed: r.bool("Compressed"), HasBackupChecksums: r.bool("HasBackupChecksums"),
			IsDamaged: r.bool("IsDamaged"), IsCopyOnly: r.bool("IsCopyOnly"),
			BackupSetGUID: r.guid("BackupSetGUID"), FamilyGUID: r.guid("FamilyGUID"),
			DifferentialBaseGUID: r.guid("DifferentialBaseGUID"), DifferentialBaseLSN: r.str("DifferentialBaseLSN"),
			SoftwareVersion: softwareVersion(r), Containment: r.int("Containment"),
			CompressionAlgorithm: r.str("CompressionAlgorithm"),
			Fork:                 RecoveryFork{First: r.guid("FirstRecoveryForkID"), Last: r.guid("RecoveryForkID"), Point: r.str("ForkPointLSN")},
		})
		h := &out[len(out)-1]
		if tp := thumbprint(r, "EncryptorThumbprint"); tp != "" && !strings.EqualFold(r.str("KeyAlgorithm"), "NO_Encryption") {
			h.KeyAlgorithm, h.EncryptorThumbprint, h.EncryptorType = strings.ToUpper(r.str("KeyAlgorithm")), tp, strings.ToUpper(r.str("EncryptorType"))
		}
	})
	return out, err
}

// softwareVersion is HEADERONLY's SoftwareVersionMajor.Minor.Build, "" when
// the row has none.
func softwareVersion(r row) string {
	return buildOf(r, "SoftwareVersionMajor", "SoftwareVersionMinor", "SoftwareVersionBuild")
}

// buildOf is the build "major.minor.build" of the row's three columns, ""
// when the major one is missing or NULL.
func buildOf(r row, major, minor, build string) string {
	if r.get(major) == nil {
		return ""
	}
	return fmt.Sprintf("%d.%d.%d", r.int(major), r.int(minor), r.int(build))
}

// FileListOnly runs a RESTORE FILELISTONLY statement and reads its rows by
// column name.
func (db *DB) FileListOnly(ctx context.Context, statement string) ([]FileListEntry, error) {
	var out []FileListEntry
	err := db.scan(ctx, "RESTORE FILELISTONLY", statement, nil, func(r row) {
		out = append(out, FileListEntry{
			LogicalName: r.str("LogicalName"), PhysicalName: r.str("PhysicalName"), Type: r.str("Type"),
			FileGroupName: r.str("FileGroupName"), Size: r.int("Size"), FileID: r.int("FileID"),
			BackupSizeInBytes: r.int("BackupSizeInBytes"), TDEThumbprint: thumbprint(r, "TDEThumbprint"),
		})
	})
	return out, err
}

// Request is a statement running on the instance (sys.dm_exec_requests).
type Request struct {
	SessionID  int64
	Command    string // "BACKUP DATABASE", "RESTORE DATABASE", "DBCC TABLE CHECK", ...
	DatabaseID int64
	Percent    float64
	StartTime  time.Time
	Text       string // the statement's text, when the query returns it
	// Login is the session's original login, when the query returns it
	// (tsql.RunningStatements); Own says it is the querying session's.
	Login string
	Own   bool
}

// Requests runs a sys.dm_exec_requests query (tsql.InFlightRequests) and
// reads the rows by column name.
func (db *DB) Requests(ctx context.Context, query string, args ...any) ([]Request, error) {
	var out []Request
	err := db.scan(ctx, "find running requests", query, args, func(r row) {
		login := r.str("login_name")
		out = append(out, Request{
			SessionID: r.int("session_id"), Command: strings.TrimSpace(r.str("command")),
			DatabaseID: r.int("database_id"), Percent: r.float("percent_complete"),
			StartTime: r.time("start_time"), Text: r.str("text"),
			Login: login, Own: login != "" && login == r.str("own_login"),
		})
	})
	return out, err
}

// WaitRequest polls the requests query until sessionID no longer appears
// (its statement finished or died), calling onPercent after every poll.
// It cannot tell success from failure: the caller checks the outcome
// (HEADERONLY for a backup, restorehistory for a restore).
func (db *DB) WaitRequest(ctx context.Context, sessionID int64, every time.Duration, onPercent func(float64),
	query string, args ...any) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		reqs, err := db.Requests(ctx, query, args...)
		if err != nil {
			return err
		}
		running := false
		for _, r := range reqs {
			if r.SessionID == sessionID {
				running = true
				if onPercent != nil {
					onPercent(r.Percent)
				}
			}
		}
		if !running {
			return nil
		}
		select {
		case <-ctx.Done():
			return Classify(db.Target, "wait for session "+strconv.FormatInt(sessionID, 10), ctx.Err())
		case <-t.C:
		}
	}
}

// RestoreRecord is a msdb.dbo.restorehistory row.
type RestoreRecord struct {
	ID          int64
	Database    string
	RestoreDate time.Time
	Type        string // D database, L log, ...
}

// LastRestore runs a restorehistory query (tsql.LastRestore) and returns its
// first row, or nil when there is none.
func (db *DB) LastRestore(ctx context.Context, query string, args ...any) (*RestoreRecord, error) {
	var rec *RestoreRecord
	err := db.scan(ctx, "read msdb.dbo.restorehistory", query, args, func(r row) {
		if rec == nil {
			rec = &RestoreRecord{ID: r.int("restore_history_id"), Database: r.str("destination_database_name"),
				RestoreDate: r.time("restore_date"), Type: r.str("restore_type")}
		}
	})
	return rec, err
}

// RestoreProof is the newest full restore into a database with the backup
// set it came from (tsql.RestoreProof).
type RestoreProof struct {
	HistoryID int64
	// RestoreDate is msdb's restore_date: the start of the restore, in the
	// server's local time (datetime has no zone; the driver labels it UTC).
	RestoreDate time.Time
	// BackupSetGUID is backupset.backup_set_uuid as SQL Server prints it
	// (upper case), the form RESTORE HEADERONLY's BackupSetGUID has here.
	BackupSetGUID string
	// BackupSetName is the BACKUP's NAME = ("" when it had none).
	BackupSetName string
}

// LastRestoreProof runs a restore proof query (tsql.RestoreProof) and returns
// its first row, or nil when the database was never restored.
func (db *DB) LastRestoreProof(ctx context.Context, query string, args ...any) (*RestoreProof, error) {
	var p *RestoreProof
	err := db.scan(ctx, "read msdb restore history", query, args, func(r row) {
		if p == nil {
			p = &RestoreProof{HistoryID: r.int("restore_history_id"), RestoreDate: r.time("restore_date"),
				BackupSetGUID: r.guid("backup_set_uuid"), BackupSetName: r.str("name")}
		}
	})
	return p, err
}

// NewestRestore runs tsql.NewestRestore: the id of msdb's newest
// restore-history row, 0 when it has none.
func (db *DB) NewestRestore(ctx context.Context, query string) (int64, error) {
	var id int64
	err := db.scan(ctx, "read msdb restore history", query, nil, func(r row) { id = r.int("newest") })
	return id, err
}

// DatabaseState is a database's row of sys.databases (tsql.DatabaseState,
// or tsql.CopyState with the columns after Created).
type DatabaseState struct {
	Name  string
	State string // state_desc: ONLINE, RESTORING, RECOVERING, ...
	// Created is create_date: for a restored database, when the RESTORE
	// created it (server local time, labelled UTC like RestoreDate).
	Created time.Time
	ID      int64 // database_id
	// OwnerSID is owner_sid and LoginSID the session's SUSER_SID(), as
	// 0x... hex ("" when not read).
	OwnerSID, LoginSID string
	UserAccess         string    // user_access_desc: MULTI_USER, SINGLE_USER, RESTRICTED_USER
	Now                time.Time // the server's GETDATE() as it read the row
}

// DatabaseState runs a database state query (tsql.DatabaseState) and returns
// the row, or nil when there is no such database.
func (db *DB) DatabaseState(ctx context.Context, query string, args ...any) (*DatabaseState, error) {
	var s *DatabaseState
	err := db.scan(ctx, "read sys.databases", query, args, func(r row) {
		if s == nil {
			s = &DatabaseState{Name: r.str("name"), State: strings.TrimSpace(r.str("state_desc")), Created: r.time("create_date"),
				ID: r.int("database_id"), OwnerSID: r.hex("owner_sid"), LoginSID: r.hex("login_sid"),
				UserAccess: strings.TrimSpace(r.str("user_access_desc")), Now: r.time("server_now")}
		}
	})
	return s, err
}

// DatabaseIDs runs tsql.AllDatabaseIDs: every database's id and the
// server's GETDATE().
func (db *DB) DatabaseIDs(ctx context.Context, query string) (ids []int64, now time.Time, err error) {
	err = db.scan(ctx, "read sys.databases", query, nil, func(r row) {
		ids = append(ids, r.int("database_id"))
		now = r.time("server_now")
	})
	return ids, now, err
}

// Session is a row of sys.dm_exec_sessions (tsql.SessionsIn).
type Session struct {
	ID                   int64
	Login, Host, Program string
}

// Sessions runs a session query (tsql.SessionsIn).
func (db *DB) Sessions(ctx context.Context, query string, args ...any) ([]Session, error) {
	var out []Session
	err := db.scan(ctx, "read sys.dm_exec_sessions", query, args, func(r row) {
		out = append(out, Session{ID: r.int("session_id"), Login: r.str("login_name"), Host: r.str("host_name"), Program: r.str("program_name")})
	})
	return out, err
}

// LastGoodCheckDB runs a tsql.LastGoodCheckDB query: when the database's
// last clean DBCC CHECKDB ended and the server's GETDATE(), both datetime
// as the server keeps them (wall clocks, labelled UTC by the driver). ok is
// false when the server has no value (no such database).
func (db *DB) LastGoodCheckDB(ctx context.Context, query string, args ...any) (lastGood, now time.Time, ok bool, err error) {
	err = db.scan(ctx, "read LastGoodCheckDbTime", query, args, func(r row) {
		if !ok {
			lastGood, now = r.time("last_good"), r.time("server_now")
			ok = !lastGood.IsZero() && !now.IsZero()
		}
	})
	return lastGood, now, ok, err
}

// QueryValue runs a query and returns the first column of its first row
// (nil when there is no row), for sanity checks and small lookups.
func (db *DB) QueryValue(ctx context.Context, op, query string, args ...any) (any, bool, error) {
	return queryValue(ctx, db.DB, db.Target, op, query, args)
}

// QueryValueOn is QueryValue on a pinned connection (see DB.Conn): the
// statements before it on c (EXECUTE AS) set the context it runs in.
func QueryValueOn(ctx context.Context, c *sql.Conn, t Target, op, query string, args ...any) (any, bool, error) {
	return queryValue(ctx, c, t, op, query, args)
}

func queryValue(ctx context.Context, q queryer, t Target, op, query string, args []any) (any, bool, error) {
	var v any
	found := false
	err := scanOn(ctx, q, t, op, query, args, func(r row) {
		if !found && len(r.vals) > 0 {
			v, found = normalize(r.vals[0]), true
		}
	})
	return v, found, err
}

// row is one scanned row, read by column name.
type row struct {
	idx  map[string]int
	vals []any
}

func (db *DB) scan(ctx context.Context, op, query string, args []any, fn func(row)) error {
	return scanOn(ctx, db.DB, db.Target, op, query, args, fn)
}

func scanOn(ctx context.Context, q queryer, t Target, op, query string, args []any, fn func(row)) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return Classify(t, op, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return Classify(t, op, err)
	}
	idx := make(map[string]int, len(cols))
	for i, c := range cols {
		idx[strings.ToLower(c)] = i
	}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return Classify(t, op, err)
		}
		fn(row{idx: idx, vals: vals})
	}
	if err := rows.Err(); err != nil {
		return Classify(t, op, err)
	}
	return nil
}

func (r row) get(name string) any {
	i, ok := r.idx[strings.ToLower(name)]
	if !ok {
		return nil
	}
	return r.vals[i]
}

func (r row) str(name string) string {
	switch v := r.get(name).(type) {
	case nil:
		return ""
	case string:
		return v
	case []byte:
		return string(v)
	case time.Time:
		return v.Format(time.RFC3339Nano)
	default:
		return fmt.Sprint(v)
	}
}

func (r row) int(name string) int64 {
	switch v := r.get(name).(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	case float64:
		return int64(v)
	case bool:
		if v {
			return 1
		}
		return 0
	case []byte, string:
		// numeric/decimal arrive as text; values above int64 are not sizes.
		s := strings.TrimSpace(r.str(name))
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
		if f, ok := new(big.Float).SetString(s); ok {
			n, _ := f.Int64()
			return n
		}
	}
	return 0
}

func (r row) float(name string) float64 {
	switch v := r.get(name).(type) {
	case float64:
		return v
	case float32:
		return float64(v)
	case int64:
		return float64(v)
	case []byte, string:
		f, _ := strconv.ParseFloat(strings.TrimSpace(r.str(name)), 64)
		return f
	}
	return 0
}

func (r row) bool(name string) bool {
	switch v := r.get(name).(type) {
	case bool:
		return v
	case int64:
		return v != 0
	case []byte, string:
		s := strings.TrimSpace(r.str(name))
		return s == "1" || strings.EqualFold(s, "true")
	}
	return false
}

func (r row) time(name string) time.Time {
	if v, ok := r.get(name).(time.Time); ok {
		return v
	}
	return time.Time{}
}

// hex reads a varbinary column as 0x... hex ("" for NULL or none).
func (r row) hex(name string) string {
	b, ok := r.get(name).([]byte)
	if !ok || b == nil {
		return ""
	}
	return "0x" + strings.ToUpper(hex.EncodeToString(b))
}

// thumbprint reads a varbinary thumbprint column as ThumbprintText.
func thumbprint(r row, name string) string {
	b, _ := r.get(name).([]byte)
	return ThumbprintText(b)
}

// guid formats a uniqueidentifier (16 bytes in SQL Server's mixed-endian
// order) as SQL Server prints it.
func (r row) guid(name string) string {
	switch v := r.get(name).(type) {
	case []byte:
		if len(v) == 16 {
			var u mssqldb.UniqueIdentifier
			if err := u.Scan(v); err == nil {
				return u.String()
			}
		}
		return string(v)
	case string:
		return strings.ToUpper(v)
	}
	return ""
}

// normalize turns driver values into plain Go values: numeric text into
// int64 or float64 where exact, bytes into strings.
func normalize(v any) any {
	if b, ok := v.([]byte); ok {
		s := string(b)
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f
		}
		return s
	}
	return v
}

// Marker tells one of this product's long statements apart in
// sys.dm_exec_sql_text, which gives a request's batch as the client sent
// it: each long statement goes as a batch of its own, so the batch starts
// with the statement. A batch that merely contains its text (a DBA's script
// that quotes it, another tool's statement with more in front) is not it.
type Marker struct {
	// Prefix starts the batch: the statement, or its start up to what may
	// differ between attempts (the stripe count, the options).
	Prefix string
	// Whole: the batch is exactly Prefix.
	Whole bool
	// Tag is text the rest of the batch holds ("" for none), where the
	// start alone does not tell one run's statement from another's (a
	// calibration's NAME =).
	Tag string
}

// Matches reports whether a batch's text is the statement m identifies.
func (m Marker) Matches(text string) bool {
	if m.Prefix == "" || !strings.HasPrefix(text, m.Prefix) {
		return false
	}
	rest := text[len(m.Prefix):]
	if m.Whole && rest != "" {
		return false
	}
	return m.Tag == "" || strings.Contains(rest, m.Tag)
}

// Key names the statement in this process (DB.Start, Attach).
func (m Marker) Key() string { return m.Prefix + "\x00" + m.Tag }

// Find returns the first request that is the statement m identifies and
// runs in a session of the querying session's own login (Request.Own), or
// nil: a DBA's batch, or the same text sent by another login, is never
// attached to nor stopped.
func Find(reqs []Request, m Marker) *Request {
	for i := range reqs {
		if reqs[i].Own && m.Matches(reqs[i].Text) {
			return &reqs[i]
		}
	}
	return nil
}

// CanSeeOtherSessions runs a permission query (tsql.CanSeeOtherSessions):
// whether the login sees other sessions in sys.dm_exec_requests. known is
// false when the server could not say.
func (db *DB) CanSeeOtherSessions(ctx context.Context, query string) (see, known bool, err error) {
	err = db.scan(ctx, "check VIEW SERVER STATE", query, nil, func(r row) {
		for _, c := range []string{"vss", "vsps"} {
			if v := r.get(c); v != nil {
				known = true
				if r.int(c) == 1 {
					see = true
				}
			}
		}
	})
	return see, known, err
}
