package sqlsim

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// The permission model: which login may run what, checked where SQL Server
// checks it, with SQL Server's errors. Logins of Config.Logins are
// sysadmin; Config.Principals (and SetLogin) have exactly what they list.

// Login is a SQL login with its permissions.
type Login struct {
	Name, Password string
	// Windows makes it a Windows login (CREATE LOGIN [DOMAIN\user] FROM
	// WINDOWS): Name is DOMAIN\user, it logs in only through integrated
	// authentication (NTLM), and Password is the domain account's, which
	// the emulator checks as its domain controller would. SQL Server
	// authentication with its name fails (18456).
	Windows bool
	// Sysadmin makes the login a member of the sysadmin fixed server role:
	// every permission, and dbo in every database.
	Sysadmin bool
	// Server-level permissions: "VIEW SERVER STATE", "VIEW SERVER
	// PERFORMANCE STATE", "CREATE ANY DATABASE", "ALTER ANY DATABASE",
	// "ALTER ANY CONNECTION", "ALTER ANY LOGIN", "CONTROL SERVER"; fixed
	// server roles "dbcreator" (= CREATE ANY DATABASE + ALTER ANY
	// DATABASE), "processadmin" (= ALTER ANY CONNECTION), "securityadmin"
	// (= ALTER ANY LOGIN) and "serveradmin" (= VIEW SERVER STATE, ALTER
	// SERVER STATE), each reported by IS_SRVROLEMEMBER.
	Server []string
	// Databases maps a database name to the permissions of the login's user
	// there: "BACKUP DATABASE", "SELECT", "UPDATE", "INSERT", "CONNECT",
	// "ALTER", "CONTROL" or roles "db_owner", "db_backupoperator" (= BACKUP
	// DATABASE), "db_datareader" (= SELECT), "db_datawriter" (= INSERT,
	// UPDATE, DELETE), "db_ddladmin". A database listed (even with no
	// permission) has a user for the login, so the login can connect to it;
	// a database not listed: no access (master, tempdb and msdb admit
	// everyone through their guest user). The "msdb" entry governs reads of
	// msdb.dbo.backupset and restorehistory ("SELECT").
	Databases map[string][]string
	// DefaultDatabase is where a connection that names no database lands;
	// "" is master.
	DefaultDatabase string
	// DefaultLanguage is the session language after login: "" or
	// "us_english", "Deutsch", "Français". It translates the messages the
	// product reads (see SET LANGUAGE).
	DefaultLanguage string
	// SID is the login's security identifier; nil gives the one SQL Server
	// would: 0x01 for sa, one derived from the account for a Windows login
	// (the domain's, the same on every instance), and for any other SQL
	// login one of its own per instance (CREATE LOGIN without SID =
	// generates a new one), so that a database restored on another
	// instance meets its owner's SID there only when the login was created
	// WITH SID = (see LoginSID).
	SID []byte

	// dbPrincipal marks the security context of a database principal
	// (EXECUTE AS USER, a module's EXECUTE AS OWNER): Name is the server
	// principal SQL Server names in messages, user the database user,
	// sandbox the database the context is confined to ("" when trusted:
	// see impersonate).
	dbPrincipal   bool
	user, sandbox string
}

// SetLogin adds or replaces (by name, case-insensitively) a login at run
// time. Sessions already open keep their language and database; their
// permissions follow the new definition at once, as a GRANT or REVOKE does
// on SQL Server.
func (in *Instance) SetLogin(l Login) error {
	if l.Name == "" {
		return fmt.Errorf("sqlsim: SetLogin: the login name is empty")
	}
	if _, ok := languageByName(l.DefaultLanguage); !ok {
		return fmt.Errorf("sqlsim: SetLogin %q: default language %q is unknown; use us_english, Deutsch or Français", l.Name, l.DefaultLanguage)
	}
	c := cloneLogin(l)
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.logins == nil {
		in.logins = map[string]*Login{}
	}
	in.logins[strings.ToLower(l.Name)] = c
	return nil
}

func cloneLogin(l Login) *Login {
	c := l
	c.SID = slices.Clone(l.SID)
	c.Server = slices.Clone(l.Server)
	c.Databases = map[string][]string{}
	for db, ps := range l.Databases {
		c.Databases[strings.ToLower(db)] = slices.Clone(ps)
	}
	return &c
}

// initLogins builds the login table from Config; in.mu need not be held
// (called by New).
func (in *Instance) initLogins() error {
	in.logins = map[string]*Login{}
	for name, pw := range in.cfg.Logins {
		in.logins[strings.ToLower(name)] = &Login{Name: name, Password: pw, Sysadmin: true}
	}
	for _, p := range in.cfg.Principals {
		if p.Name == "" {
			return fmt.Errorf("sqlsim: Config.Principals has a login without a name")
		}
		if _, ok := languageByName(p.DefaultLanguage); !ok {
			return fmt.Errorf("sqlsim: login %q: default language %q is unknown; use us_english, Deutsch or Français", p.Name, p.DefaultLanguage)
		}
		in.logins[strings.ToLower(p.Name)] = cloneLogin(p)
	}
	return nil
}

// principal returns the login named name (nil if none). The result is
// shared: callers must not modify it (SetLogin replaces, never mutates).
// WindowsPassword implements tds.WindowsAccounts: the password of the
// Windows login named DOMAIN\user, as the domain knows it.
func (in *Instance) WindowsPassword(login string) (string, bool) {
	p := in.principal(login)
	if p == nil || !p.Windows {
		return "", false
	}
	return p.Password, true
}

// WindowsDomain implements tds.WindowsAccounts: the domain of the first
// Windows login, else WORKGROUP.
func (in *Instance) WindowsDomain() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, p := range in.logins {
		if dom, _, ok := strings.Cut(p.Name, `\`); ok && p.Windows {
			return dom
		}
	}
	return "WORKGROUP"
}

func (in *Instance) principal(name string) *Login {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.logins[strings.ToLower(name)]
}

// loginName is the name of the login a client logged in as, as defined on
// the server, whatever case the client typed it in (SUSER_SNAME,
// ORIGINAL_LOGIN, sys.dm_exec_sessions.original_login_name).
func (in *Instance) loginName(user string) string {
	if l := in.principal(user); l != nil {
		return l.Name
	}
	return user
}

// Server permissions and what implies them (Microsoft Learn, "Permissions
// (Database Engine)": CONTROL SERVER covers every server permission, ALTER
// ANY DATABASE covers CREATE ANY DATABASE, VIEW SERVER STATE covers VIEW
// SERVER PERFORMANCE STATE;
// https://learn.microsoft.com/en-us/sql/relational-databases/security/permissions-database-engine).
// Fixed server roles and what they grant ("Server-level roles",
// https://learn.microsoft.com/en-us/sql/relational-databases/security/authentication-access/server-level-roles;
// "Permissions of Fixed Server Roles": serveradmin is granted ALTER ANY
// ENDPOINT, ALTER RESOURCES, ALTER SERVER STATE, ALTER SETTINGS, SHUTDOWN
// and VIEW SERVER STATE).
var serverImplied = map[string][]string{
	"create any database":            {"alter any database", "dbcreator"},
	"alter any database":             {"dbcreator"},
	"view server performance state":  {"view server state", "serveradmin"},
	"view server state":              {"serveradmin"},
	"alter any connection":           {"processadmin"},
	"control server":                 {},
	"dbcreator":                      {},
	"processadmin":                   {},
	"serveradmin":                    {},
	"view any database":              {"public"},
	"alter server state":             {"processadmin", "serveradmin"},
	"view server security state":     {"view server state", "serveradmin"},
	"connect sql":                    {"public"},
	"view any definition":            {},
	"alter any login":                {"securityadmin"},
	"securityadmin":                  {},
	"public":                         {},
	"create database (server scope)": {},
}

// hasServer reports whether l holds the server permission or role perm.
func (l *Login) hasServer(perm string) bool {
	if l == nil {
		return false
	}
	perm = strings.ToLower(strings.TrimSpace(perm))
	if l.Sysadmin || perm == "public" || perm == "connect sql" || perm == "view any database" {
		return true
	}
	if perm == "sysadmin" {
		return false
	}
	held := map[string]bool{}
	for _, p := range l.Server {
		held[strings.ToLower(strings.TrimSpace(p))] = true
	}
	if held["control server"] || held[perm] {
		return true
	}
	for _, via := range serverImplied[perm] {
		if held[via] {
			return true
		}
	}
	return false
}

// canSeeAllRequests: sys.dm_exec_requests shows other sessions only with
// VIEW SERVER STATE, on SQL Server 2022 VIEW SERVER PERFORMANCE STATE
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-exec-requests-transact-sql#permissions).
func (in *Instance) canSeeAllRequests(l *Login) bool {
	if in.cfg.MajorVersion >= 16 {
		return l.hasServer("VIEW SERVER PERFORMANCE STATE")
	}
	return l.hasServer("VIEW SERVER STATE")
}

// Database roles and the permissions they grant ("Database-level roles",
// https://learn.microsoft.com/en-us/sql/relational-databases/security/authentication-access/database-level-roles).
var dbRoleGrants = map[string][]string{
	"db_backupoperator": {"backup database", "backup log", "checkpoint"},
	"db_datareader":     {"select"},
	"db_datawriter":     {"insert", "update", "delete"},
	"db_ddladmin":       {"create table", "create schema", "alter any schema"},
}

// dbUser reports whether l has a user in database db (so may connect to
// it). The guest user of master, tempdb and msdb admits every login
// (https://learn.microsoft.com/en-us/sql/relational-databases/policy-based-management/guest-permissions-on-user-databases).
func (in *Instance) dbUser(l *Login, d *database) bool {
	if l == nil {
		return false
	}
	if l.dbPrincipal && l.sandbox != "" {
		// A database principal's context reaches no other database, not
		// even through guest ("Extending Database Impersonation by Using
		// EXECUTE AS": the scope of impersonation is restricted to the
		// database).
		return strings.EqualFold(d.Name, l.sandbox)
	}
	if l.Sysadmin || l.hasServer("CONTROL SERVER") || in.isOwner(l, d) {
		return true
	}
	if d.system && d.Name != "model" {
		return true
	}
	_, ok := l.Databases[strings.ToLower(d.Name)]
	return ok
}

// isOwner reports whether l owns d (it created d by RESTORE): the owner is
// dbo there, with every database permission.
func (in *Instance) isOwner(l *Login, d *database) bool {
	in.mu.Lock()
	owner := d.Owner
	in.mu.Unlock()
	return l != nil && !l.dbPrincipal && owner != "" && strings.EqualFold(owner, l.Name)
}

// isDBOwner: sysadmin, the database's owner, or a member of db_owner (or
// CONTROL on the database).
func (in *Instance) isDBOwner(l *Login, d *database) bool {
	if l == nil {
		return false
	}
	if l.Sysadmin || l.hasServer("CONTROL SERVER") || in.isOwner(l, d) {
		return true
	}
	for _, p := range l.Databases[strings.ToLower(d.Name)] {
		switch strings.ToLower(strings.TrimSpace(p)) {
		case "db_owner", "control":
			return true
		}
	}
	return false
}

// hasDB reports whether l holds the database permission perm in d.
func (in *Instance) hasDB(l *Login, d *database, perm string) bool {
	perm = strings.ToLower(strings.TrimSpace(perm))
	if in.isDBOwner(l, d) {
		return true
	}
	if !in.dbUser(l, d) {
		return false
	}
	switch perm {
	case "connect":
		return true
	case "create database":
		// CREATE DATABASE is a permission in master, implied by the server's
		// CREATE ANY DATABASE.
		return strings.EqualFold(d.Name, "master") && l.hasServer("CREATE ANY DATABASE")
	case "alter":
		if l.hasServer("ALTER ANY DATABASE") {
			return true
		}
	}
	for _, p := range l.Databases[strings.ToLower(d.Name)] {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == perm || slices.Contains(dbRoleGrants[p], perm) {
			return true
		}
	}
	return false
}

// sessionLogin is the login of the session running x; statements the
// instance runs itself (RestoreDatabase) are sysadmin.
func (x *execCtx) sessionLogin() *Login {
	if l := x.impersonated(); l != nil {
		return l
	}
	if x.s.id == 0 { // the instance's own session (RestoreDatabase)
		return &Login{Name: x.s.login.User, Sysadmin: true}
	}
	if l := x.in.principal(x.s.login.User); l != nil {
		return l
	}
	return &Login{Name: x.s.login.User, Sysadmin: true}
}

// errPermDenied is 262, "... permission denied in database '...'." (class 14).
func errPermDenied(perm, db string) *tds.Error {
	return sqlErr(262, 14, "%s permission denied in database '%s'.", perm, db)
}

// errObjectDenied is 229, "The SELECT permission was denied on the object ...".
func errObjectDenied(perm, object, db, schema string) *tds.Error {
	return sqlErr(229, 14, "The %s permission was denied on the object '%s', database '%s', schema '%s'.", perm, object, db, schema)
}

// errNoDBAccess is 916: the login has no user in the database.
func errNoDBAccess(login, db string) *tds.Error {
	return sqlErr(916, 14, "The server principal \"%s\" is not able to access the database \"%s\" under the current security context.", login, db)
}

// mayBackup: BACKUP DATABASE needs the BACKUP DATABASE permission in the
// database (db_backupoperator, db_owner, sysadmin), else 262 + 3013
// (https://learn.microsoft.com/en-us/sql/t-sql/statements/backup-transact-sql#permissions).
func (x *execCtx) mayBackup(d *database) error {
	if x.in.offline(d) {
		return opError("BACKUP DATABASE", errOffline(d.Name))
	}
	if x.in.hasDB(x.sessionLogin(), d, "BACKUP DATABASE") {
		return nil
	}
	return opError("BACKUP DATABASE", errPermDenied("BACKUP DATABASE", d.Name))
}

// mayRestore checks a RESTORE before it opens any device
// (https://learn.microsoft.com/en-us/sql/t-sql/statements/restore-statements-transact-sql#permissions):
// HEADERONLY, FILELISTONLY, LABELONLY and VERIFYONLY need CREATE DATABASE
// (since SQL Server 2008: "they reveal information about the content of
// the backup files",
// https://learn.microsoft.com/en-us/sql/t-sql/statements/restore-statements-for-restoring-recovering-and-managing-backups-transact-sql);
// RESTORE DATABASE of a database that does not exist needs CREATE
// DATABASE; over an existing one only sysadmin, dbcreator and the
// database's owner may restore (db_owner membership does not count: it
// cannot be read from a database being restored): else 3110.
func (x *execCtx) mayRestore(s *restoreStmt, op string) error {
	l := x.sessionLogin()
	canCreate := l.hasServer("CREATE ANY DATABASE")
	denied := opError(op, errPermDenied("CREATE DATABASE", "master"))
	if s.kind != "DATABASE" && s.kind != "LOG" {
		if canCreate {
			return nil
		}
		return denied
	}
	v, err := (&env{x: x}).eval(s.db)
	if err != nil {
		return err
	}
	d := x.in.lookupDB(toString(v))
	if d == nil {
		if canCreate {
			return nil
		}
		return denied
	}
	if l.Sysadmin || l.hasServer("CONTROL SERVER") || l.hasServer("dbcreator") || x.in.isOwner(l, d) {
		return nil
	}
	return opError(op, sqlErr(3110, 14, "User does not have permission to RESTORE database '%s'.", d.Name))
}

// restoredOwner is the owner of a database a RESTORE (re)creates: an
// existing database keeps its owner, a new one is owned by the login that
// restored it, sysadmin or not ("Your login information Security
// Identifier (SID) is automatically saved when you create a database ... as
// the database owner in the corresponding database row in the sys.databases
// table", MSSQLSERVER_15517,
// https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/mssqlserver-15517-database-engine-error).
// Whether RESTORE ... REPLACE keeps the replaced database's owner is not
// documented; the emulator keeps it. in.mu is held by the caller.
func (x *execCtx) restoredOwner(existing *database) string {
	if existing != nil {
		return existing.Owner
	}
	if l := x.in.logins[strings.ToLower(x.s.login.User)]; l != nil && !strings.EqualFold(l.Name, "sa") {
		return l.Name
	}
	return "" // sa
}

// saSID is the SID of the sa login: 0x01 ("sa ... SID 0x01", "Server-level
// roles" and sys.server_principals on Microsoft Learn).
var saSID = []byte{0x01}

// loginSIDByName is the SID of the login named name (loginSID): 0x01 for
// sa; nil for a name that is no login of the instance (SUSER_SID: "Returns
// NULL" when the login is not found, https://learn.microsoft.com/en-us/sql/t-sql/functions/suser-sid-transact-sql).
func (in *Instance) loginSIDByName(name string) []byte {
	if name == "" || strings.EqualFold(name, "sa") {
		return saSID
	}
	l := in.principal(name)
	if l == nil {
		return nil
	}
	return in.loginSID(l)
}

// mayCheckDB: DBCC CHECKDB needs sysadmin or db_owner (the owner counts)
// (https://learn.microsoft.com/en-us/sql/t-sql/database-console-commands/dbcc-checkdb-transact-sql#permissions);
// else 7983 "User '...' does not have permission to run DBCC checkdb for
// database '...'." (class 14,
// https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-7000-to-7999),
// or 916 when the login has no user there.
func (x *execCtx) mayCheckDB(d *database) error {
	if x.in.offline(d) {
		return errOffline(d.Name)
	}
	l := x.sessionLogin()
	if x.in.isDBOwner(l, d) {
		return nil
	}
	if !x.in.dbUser(l, d) {
		return errNoDBAccess(l.Name, d.Name)
	}
	user := l.Name
	if d.system {
		user = "guest"
	}
	return sqlErr(7983, 14, "User '%s' does not have permission to run DBCC checkdb for database '%s'.", user, d.Name)
}

// mayDrop: DROP DATABASE needs CONTROL on the database, ALTER ANY DATABASE
// or db_owner membership
// (https://learn.microsoft.com/en-us/sql/t-sql/statements/drop-database-transact-sql#permissions);
// SQL Server answers a denied DROP like a missing database: 3701.
func (x *execCtx) mayDrop(d *database) error {
	l := x.sessionLogin()
	if x.in.isDBOwner(l, d) || l.hasServer("ALTER ANY DATABASE") {
		return nil
	}
	return sqlErr(3701, 14, "Cannot drop the database '%s', because it does not exist or you do not have permission.", d.Name)
}

// mayAlterDB: ALTER DATABASE needs ALTER on the database (db_owner, ALTER
// ANY DATABASE) (https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-database-transact-sql-set-options#permissions).
func (x *execCtx) mayAlterDB(d *database) bool {
	return x.in.hasDB(x.sessionLogin(), d, "ALTER")
}

// mayKill: KILL needs ALTER ANY CONNECTION (sysadmin, processadmin), else
// 6102 (https://learn.microsoft.com/en-us/sql/t-sql/language-elements/kill-transact-sql#permissions).
func (x *execCtx) mayKill() error {
	if x.sessionLogin().hasServer("ALTER ANY CONNECTION") {
		return nil
	}
	return sqlErr(6102, 14, "User does not have permission to use the KILL statement.")
}

// mayUse: USE (and EXEC db.sys.sp_executesql) needs a user in the
// database, else 916.
func (x *execCtx) mayUse(d *database) error {
	if x.in.restoring(d) {
		return errRestoring(d.Name)
	}
	if x.in.offline(d) {
		return errOffline(d.Name)
	}
	if e := x.in.agAccess(d); e != nil {
		return e
	}
	l := x.sessionLogin()
	if x.in.dbUser(l, d) {
		return nil
	}
	return errNoDBAccess(l.Name, d.Name)
}

// mayTable checks an object permission (SELECT, UPDATE, INSERT) on a user
// table: 916 without a user in the database, 229 without the permission
// (https://learn.microsoft.com/en-us/sql/relational-databases/security/permissions-database-engine).
func (x *execCtx) mayTable(d *database, schema, table, perm string) error {
	if x.chain != "" && strings.EqualFold(x.chain, d.Name) {
		// Inside a module of d: the module and d's tables have one owner
		// (dbo), so SQL Server checks no permission on them ("Ownership
		// Chains", https://learn.microsoft.com/en-us/sql/relational-databases/security/ownership-chains).
		return nil
	}
	l := x.sessionLogin()
	if !x.in.dbUser(l, d) {
		return errNoDBAccess(l.Name, d.Name)
	}
	if x.in.hasDB(l, d, perm) {
		return nil
	}
	return errObjectDenied(perm, table, d.Name, schema)
}

// mayDDL: CREATE SCHEMA/TABLE and ALTER TABLE need db_owner or db_ddladmin
// here (SQL Server's finer CREATE TABLE + ALTER ON SCHEMA grants are not
// modelled): else 262.
func (x *execCtx) mayDDL(d *database, what string) error {
	l := x.sessionLogin()
	if !x.in.dbUser(l, d) {
		return errNoDBAccess(l.Name, d.Name)
	}
	if x.in.hasDB(l, d, "create table") {
		return nil
	}
	return errPermDenied(what, d.Name)
}

// mayReadMsdb: the backup history tables of msdb
// (https://learn.microsoft.com/en-us/sql/relational-databases/backup-restore/backup-history-and-header-information-sql-server)
// are modelled as not readable by public: reading them needs SELECT in
// msdb (db_datareader there), else 229.
func (x *execCtx) mayReadMsdb(table string) error {
	l := x.sessionLogin()
	msdb := x.in.lookupDB("msdb")
	if x.in.isDBOwner(l, msdb) {
		return nil
	}
	for _, p := range l.Databases["msdb"] {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == "select" || p == "db_datareader" {
			return nil
		}
	}
	return errObjectDenied("SELECT", table, "msdb", "dbo")
}

// errReadOnly is 3906: a write to a READ_ONLY database.
func errReadOnly(db string) *tds.Error {
	return sqlErr(3906, 16, "Failed to update database \"%s\" because the database is read-only.", db)
}

// readOnly reports whether d is READ_ONLY, in STANDBY ("Database is
// read-only for restore log", sys.databases is_in_standby), or a secondary
// database of an availability group (ag.go).
func (in *Instance) readOnly(d *database) bool {
	in.mu.Lock()
	ro := d.ReadOnly || d.Standby
	in.mu.Unlock()
	return ro || in.secondary(d)
}

// mayWrite checks DDL in d: not READ_ONLY (3906), and db_owner/db_ddladmin.
func (x *execCtx) mayWrite(d *database, what string) error {
	if x.in.readOnly(d) {
		return errReadOnly(d.Name)
	}
	return x.mayDDL(d, what)
}

// mayUpdate: UPDATE needs UPDATE on the table, and SELECT too when it
// reads the table (a WHERE clause, a SET expression naming a column, an
// OUTPUT clause)
// (https://learn.microsoft.com/en-us/sql/t-sql/queries/update-transact-sql#permissions).
// The product's sequence increment `SET Number = Number + 1 OUTPUT
// inserted.Number WHERE ID = 1` needs both.
func (x *execCtx) mayUpdate(d *database, t *tableDef, n *updateStmt) error {
	if err := x.mayTable(d, t.Schema, t.Name, "UPDATE"); err != nil {
		return err
	}
	reads := n.where != nil || len(n.output) > 0
	for _, s := range n.sets {
		reads = reads || refsColumn(s.e)
	}
	if reads {
		return x.mayTable(d, t.Schema, t.Name, "SELECT")
	}
	return nil
}

// refsColumn reports whether e names a column.
func refsColumn(e expr) bool {
	switch n := e.(type) {
	case *colExpr:
		return true
	case *funcExpr:
		for _, a := range n.args {
			if refsColumn(a) {
				return true
			}
		}
	case *binExpr:
		return refsColumn(n.l) || refsColumn(n.r)
	case *unaryExpr:
		return refsColumn(n.e)
	case *castExpr:
		return refsColumn(n.e)
	case *isNullExpr:
		return refsColumn(n.e)
	case *inExpr:
		if refsColumn(n.e) {
			return true
		}
		for _, a := range n.list {
			if refsColumn(a) {
				return true
			}
		}
	case *likeExpr:
		return refsColumn(n.e) || refsColumn(n.pattern)
	}
	return false
}

// Permission names HAS_PERMS_BY_NAME knows per securable class; another
// name answers NULL, as SQL Server answers an invalid permission
// (https://learn.microsoft.com/en-us/sql/t-sql/functions/has-perms-by-name-transact-sql).
var (
	serverPermNames = []string{"view server state", "view server performance state", "view server security state",
		"create any database", "alter any database", "alter any connection", "alter server state", "control server",
		"connect sql", "view any database", "view any definition", "alter any login", "any"}
	databasePermNames = []string{"connect", "backup database", "backup log", "select", "insert", "update", "delete",
		"alter", "control", "create table", "create schema", "create database", "view database state",
		"view definition", "checkpoint", "execute", "any"}
	objectPermNames = []string{"select", "insert", "update", "delete", "alter", "control", "references",
		"view definition", "any"}
)

// hasPermsByName answers HAS_PERMS_BY_NAME(securable, class, permission):
// 1 or 0, NULL for an unknown class, permission or securable.
func (x *execCtx) hasPermsByName(securable, class, perm any) (any, error) {
	if perm == nil {
		return nil, nil
	}
	l := x.sessionLogin()
	p := strings.ToLower(strings.TrimSpace(toString(perm)))
	cls := "server"
	if class != nil {
		cls = strings.ToLower(strings.TrimSpace(toString(class)))
	}
	switch cls {
	case "server":
		if securable != nil || !slices.Contains(serverPermNames, p) {
			return nil, nil
		}
		return b2i(p == "any" || l.hasServer(p)), nil
	case "database":
		if !slices.Contains(databasePermNames, p) {
			return nil, nil
		}
		d := x.currentDB()
		if securable != nil {
			if d = x.in.lookupDB(toString(securable)); d == nil {
				return nil, nil
			}
		}
		if p == "any" || p == "connect" {
			return b2i(x.in.dbUser(l, d)), nil
		}
		if p == "create database" && !strings.EqualFold(d.Name, "master") {
			return nil, nil
		}
		return b2i(x.in.hasDB(l, d, p)), nil
	case "object":
		if securable == nil || !slices.Contains(objectPermNames, p) {
			return nil, nil
		}
		id, err := x.objectID(toString(securable))
		if err != nil || id == nil {
			return nil, err
		}
		toks, err := lex(toString(securable))
		if err != nil {
			return nil, nil
		}
		o, err := (&parser{toks: toks, sql: toString(securable)}).objName()
		if err != nil {
			return nil, nil
		}
		dbName, _, _, err := x.resolveName(o)
		if err != nil {
			return nil, nil
		}
		d := x.in.lookupDB(dbName)
		if d == nil {
			return nil, nil
		}
		if p == "any" {
			return b2i(x.in.dbUser(l, d)), nil
		}
		return b2i(x.in.dbUser(l, d) && x.in.hasDB(l, d, p)), nil
	}
	return nil, nil
}

// serverRoles are the fixed server roles IS_SRVROLEMEMBER knows
// (https://learn.microsoft.com/en-us/sql/t-sql/functions/is-srvrolemember-transact-sql).
var serverRoles = []string{"sysadmin", "serveradmin", "dbcreator", "setupadmin", "bulkadmin", "securityadmin",
	"diskadmin", "public", "processadmin"}

// isSrvRoleMember answers IS_SRVROLEMEMBER(role [, login]): 1 or 0, NULL
// for an unknown role or login. Membership is explicit: a sysadmin is not
// reported as a member of dbcreator.
func (x *execCtx) isSrvRoleMember(role, login any) any {
	if role == nil {
		return nil
	}
	r := strings.ToLower(strings.TrimSpace(toString(role)))
	if !slices.Contains(serverRoles, r) {
		return nil
	}
	l := x.sessionLogin()
	if login != nil {
		if l = x.in.principal(toString(login)); l == nil {
			return nil
		}
	}
	switch r {
	case "public":
		return int64(1)
	case "sysadmin":
		return b2i(l.Sysadmin)
	}
	for _, s := range l.Server {
		if strings.EqualFold(strings.TrimSpace(s), r) {
			return int64(1)
		}
	}
	return int64(0)
}

// isMember answers IS_MEMBER(role) for the fixed database roles in the
// current database: 1 or 0, NULL for an unknown role.
func (x *execCtx) isMember(role any) any {
	if role == nil {
		return nil
	}
	r := strings.ToLower(strings.TrimSpace(toString(role)))
	d := x.currentDB()
	l := x.sessionLogin()
	switch r {
	case "public":
		return b2i(x.in.dbUser(l, d))
	case "db_owner":
		return b2i(x.in.isDBOwner(l, d))
	case "db_backupoperator", "db_datareader", "db_datawriter", "db_ddladmin", "db_accessadmin",
		"db_securityadmin", "db_denydatareader", "db_denydatawriter":
		if x.in.isDBOwner(l, d) && !strings.HasPrefix(r, "db_deny") && (l.Sysadmin || x.in.isOwner(l, d)) {
			return int64(1) // dbo is a member of every fixed role but the deny ones
		}
		for _, p := range l.Databases[strings.ToLower(d.Name)] {
			if strings.EqualFold(strings.TrimSpace(p), r) {
				return int64(1)
			}
		}
		return int64(0)
	}
	return nil
}

// errOffline is 942: the database is OFFLINE (ALTER DATABASE ... SET OFFLINE).
func errOffline(db string) *tds.Error {
	return sqlErr(942, 14, "Database '%s' cannot be opened because it is offline.", db)
}

// offline reports whether d is OFFLINE.
func (in *Instance) offline(d *database) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return d.State == "OFFLINE"
}

// seesAllFiles: sys.master_files rows need CREATE DATABASE, ALTER ANY
// DATABASE or VIEW ANY DEFINITION.
func (in *Instance) seesAllFiles(l *Login) bool {
	return l.hasServer("CREATE ANY DATABASE") || l.hasServer("ALTER ANY DATABASE") || l.hasServer("VIEW ANY DEFINITION")
}

// ownerSID is sys.databases.owner_sid of d: its owner's SID, sa's for a
// database without one (the system databases, CreateDatabase's). An owner
// whose login was dropped keeps the SID it had.
func (in *Instance) ownerSID(d *database) []byte {
	if d.Owner == "" {
		return saSID
	}
	if sid := in.loginSIDByName(d.Owner); sid != nil {
		return sid
	}
	sum := sha256.Sum256([]byte(strings.ToLower(d.Owner)))
	return sum[:16]
}
