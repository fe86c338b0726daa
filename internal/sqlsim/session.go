package sqlsim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// session serves one connection.
type session struct {
	in      *Instance
	login   tds.Login
	id      uint16
	loginDB string
	// connected is when the login succeeded (connect_time, login_time).
	connected time.Time

	mu sync.Mutex
	db string
	// lang is the session language (SET LANGUAGE), loginLang the one it
	// had after login (lang.go).
	lang, loginLang language
	// contexts is the EXECUTE AS stack of the session (security.go): the
	// last one is the current security context until REVERT.
	contexts []*Login
}

func (s *session) Database() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db
}

func (s *session) setDatabase(db string) {
	s.mu.Lock()
	s.db = db
	s.mu.Unlock()
}

func (s *session) Reset() {
	s.setDatabase(s.loginDB)
	s.setLanguage(s.loginLang)
	// sp_reset_connection reverts the execution context to the login's
	// ("EXECUTE AS (Transact-SQL)": a pooled connection is reset).
	s.mu.Lock()
	s.contexts = nil
	s.mu.Unlock()
}

func (s *session) Close() {
	s.in.mu.Lock()
	delete(s.in.sessions, s.id)
	s.in.mu.Unlock()
}

// request is a running statement, visible in sys.dm_exec_requests.
type request struct {
	sessionID int
	id        int64
	start     time.Time
	text      string
	cancel    context.CancelFunc

	// guarded by Instance.mu
	command  string
	dbID     int
	percent  float64
	progress bool   // percent_complete is meaningful
	waitType string // sys.dm_exec_requests.wait_type ("WAITFOR"), "" when running
	// target is the database a running RESTORE DATABASE restores: held
	// exclusively until it ends (dbInUseLocked), whatever database_id says.
	target string

	// killed is set when KILL ended its session.
	killed atomic.Bool
}

// StatementRecord is one statement the instance ran or is running, for
// tests that assert what ran how many times.
type StatementRecord struct {
	Session  int
	Kind     string // "BACKUP DATABASE", "RESTORE DATABASE", "RESTORE VERIFYONLY", "DBCC CHECKDB", "SELECT", ...
	Database string // the database the statement is about (or the session's)
	SQL      string
	Start    time.Time
	End      time.Time // zero while it runs
	// Outcome is "running", "ok", "error <number>", "cancelled" (the client
	// cancelled), "dropped" (its client was gone at its next write: a
	// vanished client, DropConnectionAt, DropConnections), "killed" (KILL
	// <session>) or "crashed".
	Outcome string
	Error   error
	// Rows is how many result rows the statement sent to its client
	// (what a test of what a step reads counts).
	Rows int64
}

// Statements returns every statement started since the instance was
// created, in start order; a running one has Outcome "running".
func (in *Instance) Statements() []StatementRecord {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]StatementRecord, len(in.stmts))
	for i, r := range in.stmts {
		out[i] = *r
	}
	return out
}

// RestoreRecord is one row of msdb.dbo.restorehistory with the backup set
// it restored, for tests that check what was restored when.
type RestoreRecord struct {
	ID       int64
	Database string // destination_database_name
	// Date is restore_date as an instant (the restore's start; SQL Server
	// shows it on the server's wall clock of then).
	Date time.Time
	// BackupSetGUID is msdb.dbo.backupset.backup_set_uuid as text, lower
	// case (as a client's uniqueidentifier prints it).
	BackupSetGUID string
	User          string
}

// RestoreHistory returns msdb's restore history, oldest first; it survives
// restarts of the instance (it is in DataDir), unlike Statements.
func (in *Instance) RestoreHistory() []RestoreRecord {
	in.mu.Lock()
	defer in.mu.Unlock()
	sets := map[int64]string{}
	for _, b := range in.cat.BackupSets {
		sets[b.ID] = guid(b.GUID).String()
	}
	out := make([]RestoreRecord, 0, len(in.cat.RestoreHistory))
	for _, r := range in.cat.RestoreHistory {
		out = append(out, RestoreRecord{ID: r.ID, Database: r.Database, Date: r.Date, BackupSetGUID: sets[r.BackupSetID], User: r.User})
	}
	return out
}

const maxStatementLog = 100000

// startRecord logs a statement as running and returns its record.
func (in *Instance) startRecord(r StatementRecord) *StatementRecord {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.stmts) >= maxStatementLog {
		in.stmts = append([]*StatementRecord(nil), in.stmts[len(in.stmts)/2:]...)
	}
	r.Outcome = "running"
	rec := &r
	in.stmts = append(in.stmts, rec)
	return rec
}

// finishRecord sets the end and outcome of a logged statement.
func (in *Instance) finishRecord(rec *StatementRecord, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	rec.End, rec.Outcome, rec.Error = time.Now(), outcome(err), err
}

func (in *Instance) record(r StatementRecord) {
	in.finishRecord(in.startRecord(r), r.Error)
}

// execCtx is the state of one request while its statements run.
type execCtx struct {
	ctx  context.Context
	in   *Instance
	s    *session
	w    tds.ResultWriter
	req  *request
	vars map[string]*variable
	rows int64 // @@ROWCOUNT
	sent int64 // result rows sent to the client
	// crashed is the crash channel of the instance incarnation this
	// request runs in (a restart installs a new one).
	crashed chan struct{}
	// client is the request's context on the connection (cancelled by an
	// attention or when the connection ends); ctx outlives a vanished
	// client, see Exec.
	client context.Context
	// held are info messages waiting for the end of the statement (see
	// info).
	held []heldMsg
	// Inside a user-defined function (modules.go): module is its EXECUTE
	// AS context (nil: the caller's), chain the database whose objects it
	// reads through its ownership chain, quiet keeps its statements out of
	// the statement log and its rows away from the client.
	module *Login
	chain  string
	quiet  bool
}

func (x *execCtx) isCrashed() bool {
	select {
	case <-x.crashed:
		return true
	default:
		return false
	}
}

var reqSeq struct {
	sync.Mutex
	n int64
}

// Exec implements tds.Session.
func (s *session) Exec(client context.Context, r tds.Request, w tds.ResultWriter) error {
	in := s.in
	if in.isCrashed() {
		return tds.ErrKillConnection
	}
	// A statement outlives the connection it came on: SQL Server stops a
	// request for an attention, KILL or a crash, but a client that vanished
	// without an attention is noticed only when a write to it fails (see
	// clientGone); until then the statement runs on.
	ctx, cancel := context.WithCancel(context.WithoutCancel(client))
	defer cancel()
	in.mu.Lock()
	crashed := in.crashed
	in.mu.Unlock()

	reqSeq.Lock()
	reqSeq.n++
	id := reqSeq.n
	reqSeq.Unlock()
	stmts, err := parse(r.SQL)
	// The request shows its statement's command from its start, as SQL
	// Server's does: a poll between the batch's arrival and the statement's
	// own first phase must not see a BACKUP, RESTORE or DBCC CHECKDB as a
	// SELECT ("sys.dm_exec_requests": command "identifies the current type
	// of command that is being processed",
	// https://learn.microsoft.com/sql/relational-databases/system-dynamic-management-views/sys-dm-exec-requests-transact-sql).
	req := &request{sessionID: int(s.id), id: id, start: time.Now(), text: r.SQL, cancel: cancel, command: startCommand(stmts)}
	if d := in.lookupDB(s.Database()); d != nil {
		req.dbID = d.ID
	}
	in.mu.Lock()
	in.requests[req] = struct{}{}
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		delete(in.requests, req)
		in.mu.Unlock()
	}()
	go func() {
		select {
		case <-crashed:
			cancel()
		case <-client.Done():
			if !errors.Is(context.Cause(client), tds.ErrConnectionClosed) || req.killed.Load() {
				cancel() // an attention, or a fault that stops the statement where it is
				return
			}
			select {
			case <-crashed:
				cancel()
			case <-ctx.Done():
			}
		case <-ctx.Done():
		}
	}()

	x := &execCtx{ctx: ctx, in: in, s: s, w: w, req: req, vars: map[string]*variable{}, crashed: crashed, client: client}
	decl := parseDeclarations(r.Declarations)
	for _, p := range r.Params {
		col := decl[strings.ToLower(p.Name)]
		x.vars[strings.ToLower(p.Name)] = &variable{v: col.assign(normValue(p.Value)), col: col}
	}
	if in.crashOnDue(r.SQL) {
		in.crashNow()
		return tds.ErrKillConnection // a dead host sends no reply
	}
	if fe := in.queryFault(r.SQL); fe != nil && err == nil {
		err = fe
	}
	if err != nil {
		in.record(StatementRecord{Session: int(s.id), Kind: "PARSE", Database: s.Database(), SQL: r.SQL, Start: req.start, End: time.Now(), Outcome: outcome(err), Error: err})
		return err
	}
	if err := x.runList(stmts); err != nil {
		if x.isCrashed() {
			return tds.ErrKillConnection
		}
		if ctx.Err() != nil && !isSQLError(err) {
			return ctx.Err()
		}
		return err
	}
	if x.isCrashed() {
		return tds.ErrKillConnection // a dead host sends no reply
	}
	return nil
}

// errConnectionDropped ends a statement whose client was gone at its next
// write,
// errSessionKilled one whose session KILL ended.
var (
	errConnectionDropped = fmt.Errorf("sqlsim: connection dropped (fault injection): %w", context.Canceled)
	errSessionKilled     = fmt.Errorf("sqlsim: session killed (KILL): %w", context.Canceled)
)

func isSQLError(err error) bool {
	var e *tds.Error
	var es tds.Errors
	return errors.As(err, &e) || errors.As(err, &es)
}

func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var e *tds.Error
	var es tds.Errors
	switch {
	case errors.As(err, &es) && len(es) > 0:
		return "error " + itoa(int64(es[len(es)-1].Number))
	case errors.As(err, &e):
		return "error " + itoa(int64(e.Number))
	case errors.Is(err, tds.ErrKillConnection):
		return "crashed"
	case errors.Is(err, errConnectionDropped):
		return "dropped"
	case errors.Is(err, errSessionKilled):
		return "killed"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	}
	return "error: " + err.Error()
}

func itoa(n int64) string {
	const digits = "0123456789"
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = digits[n%10]
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

func (x *execCtx) currentDB() *database {
	if d := x.in.lookupDB(x.s.Database()); d != nil {
		return d
	}
	return systemDatabases[0]
}

func (x *execCtx) sysVar(name string) (any, error) {
	switch name {
	case "@@VERSION":
		return x.in.version(), nil
	case "@@SPID":
		return int64(x.s.id), nil
	case "@@SERVERNAME":
		return x.in.cfg.Name, nil
	case "@@SERVICENAME":
		return "MSSQLSERVER", nil
	case "@@ROWCOUNT":
		return x.rows, nil
	case "@@ERROR", "@@TRANCOUNT":
		return int64(0), nil
	case "@@LANGUAGE":
		return x.s.Language(), nil
	case "@@LANGID":
		return x.s.language().langid, nil
	}
	return nil, errNotSupported(name)
}

// startCommand is the command a batch's request shows before its
// statement sets its own: that of its first BACKUP, RESTORE or DBCC
// CHECKDB (the first phase), else SELECT.
func startCommand(stmts []stmt) string {
	for _, st := range stmts {
		switch n := st.(type) {
		case *backupStmt:
			return backupCommand(n)
		case *restoreStmt:
			if n.kind == "LOG" || n.kind == "DATABASE" {
				return "RESTORE " + n.kind
			}
			return "SELECT"
		case *dbccStmt:
			return PhaseAllocCheck
		}
	}
	return "SELECT"
}

// backupCommand is a BACKUP's command: BACKUP LOG or BACKUP DATABASE.
func backupCommand(n *backupStmt) string {
	if n.log {
		return "BACKUP LOG"
	}
	return "BACKUP DATABASE"
}

// setCommand publishes what the request does in sys.dm_exec_requests.
func (x *execCtx) setCommand(cmd string, dbID int, progress bool) {
	x.in.mu.Lock()
	x.req.command, x.req.dbID, x.req.progress, x.req.percent = cmd, dbID, progress, 0
	x.in.mu.Unlock()
}

func (x *execCtx) setPercent(p float64) {
	x.in.mu.Lock()
	x.req.percent = p
	x.in.mu.Unlock()
}

// run executes one statement and records it in the statement log.
func (x *execCtx) run(st stmt) error {
	kind, dbName := x.describe(st)
	var rec *StatementRecord
	switch st.(type) {
	case *blockStmt, *ifStmt: // their statements are logged one by one
	default:
		if x.quiet {
			break
		}
		rec = x.in.startRecord(StatementRecord{Session: int(x.s.id), Kind: kind, Database: dbName, SQL: x.req.text, Start: time.Now()})
	}
	sent := x.sent
	err := x.exec(st)
	// Held messages go out at the end of the statement, before its errors.
	// A statement that finished and then found its client gone is still
	// "ok": only its reply is lost.
	var werr error
	if rec != nil && !x.isCrashed() {
		werr = x.flushHeld()
	}
	switch {
	case err != nil && x.isCrashed():
		err = tds.ErrKillConnection
	case err != nil && x.req.killed.Load() && !isSQLError(err):
		err = errSessionKilled
	case err != nil && x.clientGone() && !isSQLError(err):
		err = errConnectionDropped
	}
	if rec != nil {
		x.in.mu.Lock()
		rec.Rows = x.sent - sent
		x.in.mu.Unlock()
		x.in.finishRecord(rec, err)
	}
	if err == nil && werr != nil {
		return werr
	}
	if err != nil {
		x.in.log.Debug("statement failed", zap.String("kind", kind), zap.String("db", dbName), zap.Error(err))
	}
	return err
}

// describe names a statement for the statement log.
func (x *execCtx) describe(st stmt) (string, string) {
	name := func(e expr) string {
		v, err := (&env{x: x}).eval(e)
		if err != nil {
			return ""
		}
		return toString(v)
	}
	db := x.s.Database()
	switch n := st.(type) {
	case *selectStmt:
		return "SELECT", db
	case *backupStmt:
		return backupCommand(n), name(n.db)
	case *restoreStmt:
		if n.kind == "LOG" || n.kind == "DATABASE" {
			return "RESTORE " + n.kind, name(n.db)
		}
		return "RESTORE " + n.kind, ""
	case *dbccStmt:
		if n.db != nil {
			db = name(n.db)
		}
		return "DBCC CHECKDB", db
	case *dropDBStmt:
		if len(n.names) > 0 {
			db = name(n.names[0])
		}
		return "DROP DATABASE", db
	case *alterDBStmt:
		return "ALTER DATABASE", name(n.db)
	case *createSchemaStmt:
		return "CREATE SCHEMA", db
	case *createTableStmt:
		return "CREATE TABLE", x.objDB(n.name)
	case *createDBStmt:
		return "CREATE DATABASE", name(n.db)
	case *createViewStmt:
		return "CREATE VIEW", db
	case *createIndexStmt:
		return "CREATE INDEX", x.objDB(n.on)
	case *alterTableStmt:
		return "ALTER TABLE", x.objDB(n.name)
	case *insertStmt:
		return "INSERT", x.objDB(n.name)
	case *updateStmt:
		return "UPDATE", x.objDB(n.name)
	case *useStmt:
		return "USE", name(n.db)
	case *execStmt:
		if n.db != "" {
			db = n.db
		}
		return "EXECUTE", db
	case *declareStmt:
		return "DECLARE", db
	case *setVarStmt, *setOptionStmt:
		return "SET", db
	case *ifStmt:
		return "IF", db
	case *blockStmt:
		return "BEGIN", db
	case *printStmt:
		return "PRINT", db
	case *raiseStmt:
		return "RAISERROR", db
	case *throwStmt:
		return "THROW", db
	case *waitforStmt:
		return "WAITFOR", db
	case *killStmt:
		return "KILL", db
	case *createUserStmt:
		return "CREATE USER", db
	case *dropUserStmt:
		return "DROP USER", db
	case *alterRoleStmt:
		return "ALTER ROLE", db
	case *grantStmt:
		return "GRANT", db
	case *alterAuthStmt:
		return "ALTER AUTHORIZATION", n.db
	case *executeAsStmt:
		return "EXECUTE AS", db
	case *revertStmt:
		return "REVERT", db
	case *xpCmdShellStmt:
		return "EXECUTE", db
	case *createFunctionStmt:
		return "CREATE FUNCTION", db
	case *returnStmt:
		return "RETURN", db
	}
	return "UNKNOWN", db
}

func (x *execCtx) objDB(o objName) string {
	if len(o.parts) >= 3 && o.parts[len(o.parts)-3] != "" {
		return o.parts[len(o.parts)-3]
	}
	return x.s.Database()
}

func (x *execCtx) exec(st stmt) error {
	if err := x.ctx.Err(); err != nil {
		return err
	}
	switch n := st.(type) {
	case *selectStmt:
		return x.execSelect(n)
	case *ifStmt:
		v, err := (&env{x: x}).eval(n.cond)
		if err != nil {
			return err
		}
		if truthy(v) {
			return x.run(n.then)
		}
		if n.els != nil {
			return x.run(n.els)
		}
		return nil
	case *blockStmt:
		return x.runList(n.list)
	case *execStmt:
		return x.execSQL(n)
	case *useStmt:
		v, err := (&env{x: x}).eval(n.db)
		if err != nil {
			return err
		}
		d := x.in.lookupDB(toString(v))
		if d == nil {
			return errNoDatabase(toString(v))
		}
		if err := x.mayUse(d); err != nil {
			return err
		}
		x.s.setDatabase(d.Name)
		x.info(5701, 0, "Changed database context to '"+d.Name+"'.")
		return nil
	case *declareStmt:
		for i, name := range n.names {
			var v any
			if n.inits[i] != nil {
				var err error
				if v, err = (&env{x: x}).eval(n.inits[i]); err != nil {
					return err
				}
			}
			col := declaredColumn(n.types[i])
			x.vars[strings.ToLower(name)] = &variable{v: col.assign(v), col: col}
		}
		return nil
	case *setVarStmt:
		vr, ok := x.vars[strings.ToLower(n.name)]
		if !ok {
			return errMustDeclare(n.name)
		}
		v, err := (&env{x: x}).eval(n.e)
		if err != nil {
			return err
		}
		vr.v = vr.col.assign(v)
		return nil
	case *setOptionStmt:
		if n.option == "LANGUAGE" {
			return x.setLanguage(n.value)
		}
		return nil
	case *printStmt:
		v, err := (&env{x: x}).eval(n.e)
		if err != nil {
			return err
		}
		x.info(0, 0, toString(v)) // PRINT waits in the output buffer like other messages
		return nil
	case *raiseStmt:
		return x.raise(n)
	case *throwStmt:
		return x.throw(n)
	case *createSchemaStmt:
		return x.createSchema(n)
	case *createTableStmt:
		return x.createTable(n)
	case *createDBStmt:
		return x.createDatabase(n)
	case *createViewStmt:
		return x.createView(n)
	case *createIndexStmt:
		return x.createIndex(n)
	case *alterTableStmt:
		return x.alterTable(n)
	case *insertStmt:
		return x.insert(n)
	case *updateStmt:
		return x.update(n)
	case *backupStmt:
		return x.backup(n)
	case *restoreStmt:
		return x.restore(n)
	case *dbccStmt:
		return x.checkDB(n)
	case *waitforStmt:
		return x.waitfor(n)
	case *killStmt:
		return x.kill(n)
	case *dropDBStmt:
		return x.dropDatabase(n)
	case *alterDBStmt:
		return x.alterDatabase(n)
	case *createUserStmt:
		return x.createUser(n)
	case *dropUserStmt:
		return x.dropUser(n)
	case *alterRoleStmt:
		return x.alterRole(n)
	case *grantStmt:
		return x.grant(n)
	case *alterAuthStmt:
		return x.alterAuthorization(n)
	case *executeAsStmt:
		return x.executeAs(n)
	case *revertStmt:
		return x.revert()
	case *xpCmdShellStmt:
		return x.xpCmdShell(n)
	case *createFunctionStmt:
		return x.createFunction(n)
	case *returnStmt:
		return x.returnFrom(n)
	}
	return errNotSupported("this statement")
}

// execSQL runs EXEC [db].sys.sp_executesql N'...' in database db.
func (x *execCtx) execSQL(n *execStmt) error {
	v, err := (&env{x: x}).eval(n.sql)
	if err != nil {
		return err
	}
	stmts, err := parse(toString(v))
	if err != nil {
		return err
	}
	prev := x.s.Database()
	if n.db != "" {
		d := x.in.lookupDB(n.db)
		if d == nil {
			return errNoDatabase(n.db)
		}
		if err := x.mayUse(d); err != nil {
			return err
		}
		x.s.setDatabase(d.Name)
		defer x.s.setDatabase(prev)
	}
	return x.runList(stmts)
}

func (x *execCtx) execSelect(q *selectStmt) error {
	rel, err := x.runSelect(q)
	if err != nil {
		return err
	}
	return x.sendRelation(rel)
}

func (x *execCtx) sendRelation(rel *relation) error {
	cols := make([]tds.Column, len(rel.cols))
	for i, c := range rel.cols {
		cols[i] = c.col
		cols[i].Nullable = true
	}
	if err := x.w.Columns(cols); err != nil {
		return err
	}
	for _, r := range rel.rows {
		vals := make([]any, len(r))
		for i, v := range r {
			vals[i] = outValue(v, cols[i])
		}
		if err := x.w.Row(vals...); err != nil {
			return err
		}
	}
	x.rows = int64(len(rel.rows))
	x.sent += x.rows
	return x.w.StatementDone(tds.CmdSelect, int64(len(rel.rows)), true)
}

// outValue converts an engine value to what the ResultWriter expects for
// the column type.
func outValue(v any, c tds.Column) any {
	v = normValue(v)
	if v == nil {
		return nil
	}
	switch c.Type {
	case tds.TypeInt, tds.TypeBigInt, tds.TypeSmallInt, tds.TypeTinyInt:
		switch t := v.(type) {
		case bool:
			return b2i(t)
		case float64:
			return int64(t)
		case string:
			n, _ := castTo(t, "bigint")
			return n
		}
	case tds.TypeNVarChar, tds.TypeChar:
		if _, ok := v.(string); !ok {
			return toString(v)
		}
	case tds.TypeFloat, tds.TypeReal:
		if f, ok := toFloat(v); ok {
			return f
		}
	case tds.TypeBit:
		if n, ok := v.(int64); ok {
			return n != 0
		}
	}
	return v
}
