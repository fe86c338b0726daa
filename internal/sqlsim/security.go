package sqlsim

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Database principals and security contexts: CREATE USER ... WITHOUT
// LOGIN, DROP USER, ALTER ROLE ... ADD/DROP MEMBER, GRANT EXECUTE ON an
// object, EXECUTE AS USER and REVERT, ALTER AUTHORIZATION ON DATABASE,
// xp_cmdshell, sys.sql_logins and the SIDs that tie a database's owner
// (dbo) to a login.
//
// What a database principal's context may do follows "Extending Database
// Impersonation by Using EXECUTE AS"
// (https://learn.microsoft.com/en-us/previous-versions/sql/sql-server-2008-r2/ms188304(v=sql.105)):
// impersonation through EXECUTE AS USER, or inside a module through its
// EXECUTE AS clause, is restricted to the database. Only when the database
// is TRUSTWORTHY and its owner (the authenticator) holds AUTHENTICATE
// SERVER (sysadmin here) does the context reach beyond it. A restored
// database is never TRUSTWORTHY ("TRUSTWORTHY database property":
// TRUSTWORTHY is set to OFF when a database is attached or restored;
// https://learn.microsoft.com/en-us/sql/relational-databases/security/trustworthy-database-property).

// dbUserDef is a user of a database that has no login (CREATE USER ...
// WITHOUT LOGIN), kept in the database's metadata so that a backup
// carries it.
type dbUserDef struct {
	Name          string   `json:"name"`
	DefaultSchema string   `json:"default_schema,omitempty"`
	Roles         []string `json:"roles,omitempty"`   // fixed database roles, lower case
	Execute       []string `json:"execute,omitempty"` // objects granted EXECUTE: "schema.name", lower case
}

// reservedPrincipals are the names every database has.
var reservedPrincipals = []string{"dbo", "guest", "sys", "information_schema", "public", "db_owner", "db_accessadmin",
	"db_securityadmin", "db_ddladmin", "db_backupoperator", "db_datareader", "db_datawriter", "db_denydatareader",
	"db_denydatawriter"}

// fixedDBRoles are the roles ALTER ROLE ... ADD MEMBER accepts here.
var fixedDBRoles = []string{"db_owner", "db_ddladmin", "db_backupoperator", "db_datareader", "db_datawriter",
	"db_denydatareader", "db_denydatawriter"}

// LoginSID is the SID of login name on this instance (see Login.SID).
func (in *Instance) LoginSID(name string) ([]byte, bool) {
	l := in.principal(name)
	if l == nil {
		return nil, false
	}
	return in.loginSID(l), true
}

func (in *Instance) loginSID(l *Login) []byte {
	switch {
	case len(l.SID) > 0:
		return slices.Clone(l.SID)
	case strings.EqualFold(l.Name, "sa"):
		return []byte{0x01}
	}
	seed := "windows\x00" + strings.ToLower(l.Name)
	if !l.Windows {
		// CREATE LOGIN without SID = makes a new one: another instance's
		// login of the same name has another SID.
		seed = in.cfg.Name + "\x00" + in.cfg.DataDir + "\x00" + strings.ToLower(l.Name)
	}
	sum := sha256.Sum256([]byte(seed))
	return sum[:16]
}

// loginBySID is the login whose SID is sid, nil when none.
func (in *Instance) loginBySID(sid []byte) *Login {
	in.mu.Lock()
	logins := make([]*Login, 0, len(in.logins))
	for _, l := range in.logins {
		logins = append(logins, l)
	}
	in.mu.Unlock()
	for _, l := range logins {
		if string(in.loginSID(l)) == string(sid) {
			return l
		}
	}
	return nil
}

// dboSID is the SID a database records for its owner (dbo), sa's when it
// records none.
func dboSID(md *metadata) []byte {
	if b, err := hex.DecodeString(md.DboSID); err == nil && len(b) > 0 {
		return b
	}
	return []byte{0x01}
}

// withoutLoginName is how SQL Server names the server principal of a
// user without login: its SID, S-1-9-3-...
func withoutLoginName(db, user string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(db) + "\x00" + strings.ToLower(user)))
	var parts []string
	for i := 0; i < 16; i += 4 {
		parts = append(parts, fmt.Sprint(binary.LittleEndian.Uint32(sum[i:])))
	}
	return "S-1-9-3-" + strings.Join(parts, "-")
}

// impersonated is the security context statements run under when it is
// not the session's login: a module's EXECUTE AS, else the session's last
// EXECUTE AS.
func (x *execCtx) impersonated() *Login {
	if x.module != nil {
		return x.module
	}
	x.s.mu.Lock()
	defer x.s.mu.Unlock()
	if n := len(x.s.contexts); n > 0 {
		return x.s.contexts[n-1]
	}
	return nil
}

// trusted reports whether impersonation inside d may leave it: d is
// TRUSTWORTHY and its owner's login holds AUTHENTICATE SERVER.
func (in *Instance) trusted(d *database, owner *Login) bool {
	in.mu.Lock()
	tw := d.Trustworthy
	in.mu.Unlock()
	return tw && owner != nil && (owner.Sysadmin || owner.hasServer("CONTROL SERVER"))
}

// userContext is the security context of database user name in d, nil
// when d has no such user (or its dbo has no login on this instance: an
// orphaned owner cannot be impersonated, MSSQLSERVER_15517).
func (in *Instance) userContext(d *database, name string) (*Login, error) {
	md, err := in.readMetadata(d)
	if err != nil {
		return nil, err
	}
	owner := in.loginBySID(dboSID(md))
	sandbox := d.Name
	if in.trusted(d, owner) {
		sandbox = ""
	}
	key := strings.ToLower(d.Name)
	if strings.EqualFold(name, "dbo") {
		if owner == nil {
			return nil, nil
		}
		if sandbox == "" {
			return owner, nil // a trusted database's owner acts as its login
		}
		return &Login{Name: owner.Name, dbPrincipal: true, user: "dbo", sandbox: sandbox,
			Databases: map[string][]string{key: {"db_owner"}}}, nil
	}
	for _, u := range md.Users {
		if strings.EqualFold(u.Name, name) {
			perms := slices.Clone(u.Roles)
			for _, o := range u.Execute {
				perms = append(perms, "execute on "+o)
			}
			return &Login{Name: withoutLoginName(d.Name, u.Name), dbPrincipal: true, user: u.Name, sandbox: sandbox,
				Databases: map[string][]string{key: perms}}, nil
		}
	}
	if l := in.principal(name); l != nil && !l.Sysadmin {
		if perms, ok := l.Databases[key]; ok {
			return &Login{Name: l.Name, dbPrincipal: true, user: l.Name, sandbox: d.Name,
				Databases: map[string][]string{key: slices.Clone(perms)}}, nil
		}
	}
	return nil, nil
}

// errCannotImpersonate is 15517 (class 16).
func errCannotImpersonate(name string) *tds.Error {
	return sqlErr(15517, 16, "Cannot execute as the database principal because the principal \"%s\" does not exist, this type of principal cannot be impersonated, or you do not have permission.", name)
}

// errNoPermission is 15247 (class 16).
func errNoPermission() *tds.Error {
	return sqlErr(15247, 16, "User does not have permission to perform this action.")
}

// executeAsStmt is EXECUTE AS USER = 'name'; revertStmt is REVERT.
type (
	executeAsStmt struct{ user expr }
	revertStmt    struct{}
)

// executeAs switches the session to a user of the current database: it
// needs IMPERSONATE on the user, which db_owner holds
// (https://learn.microsoft.com/en-us/sql/t-sql/statements/execute-as-transact-sql#permissions);
// the context lasts until REVERT or the session is reset.
func (x *execCtx) executeAs(n *executeAsStmt) error {
	v, err := (&env{x: x}).eval(n.user)
	if err != nil {
		return err
	}
	name := toString(v)
	d := x.currentDB()
	if !x.in.isDBOwner(x.sessionLogin(), d) || d.system {
		return errCannotImpersonate(name)
	}
	c, err := x.in.userContext(d, name)
	if err != nil {
		return err
	}
	if c == nil {
		return errCannotImpersonate(name)
	}
	x.s.mu.Lock()
	x.s.contexts = append(x.s.contexts, c)
	x.s.mu.Unlock()
	return nil
}

// revert ends the last EXECUTE AS of the session; without one it does
// nothing.
func (x *execCtx) revert() error {
	x.s.mu.Lock()
	defer x.s.mu.Unlock()
	if n := len(x.s.contexts); n > 0 {
		x.s.contexts = x.s.contexts[:n-1]
	}
	return nil
}

type (
	createUserStmt struct{ name, schema string }
	dropUserStmt   struct {
		name     string
		ifExists bool
	}
	alterRoleStmt struct {
		role, member string
		add          bool
	}
	grantStmt struct {
		perms     []string // upper case
		object    objName
		principal string
	}
	alterAuthStmt struct{ db, login string }
)

// mayAlterUsers: CREATE USER, DROP USER, ALTER ROLE and GRANT need ALTER
// ANY USER / CONTROL, which db_owner holds
// (https://learn.microsoft.com/en-us/sql/t-sql/statements/create-user-transact-sql#permissions).
func (x *execCtx) mayAlterUsers(d *database) bool {
	return !d.system && x.in.isDBOwner(x.sessionLogin(), d)
}

// principalExists reports a database principal name in d: a reserved one,
// a user of md, or the user of a login with access to d.
func (x *execCtx) principalExists(d *database, md *metadata, name string) bool {
	if slices.Contains(reservedPrincipals, strings.ToLower(name)) {
		return true
	}
	if findUser(md, name) != nil {
		return true
	}
	l := x.in.principal(name)
	if l == nil {
		return false
	}
	_, ok := l.Databases[strings.ToLower(d.Name)]
	return ok
}

func findUser(md *metadata, name string) *dbUserDef {
	for _, u := range md.Users {
		if strings.EqualFold(u.Name, name) {
			return u
		}
	}
	return nil
}

func (x *execCtx) createUser(n *createUserStmt) error {
	d := x.currentDB()
	if !x.mayAlterUsers(d) {
		return errNoPermission()
	}
	if x.in.readOnly(d) {
		return errReadOnly(d.Name)
	}
	return x.in.updateMetadata(d, func(md *metadata) error {
		if x.principalExists(d, md, n.name) {
			return sqlErr(15023, 16, "User, group, or role '%s' already exists in the current database.", n.name)
		}
		md.Users = append(md.Users, &dbUserDef{Name: n.name, DefaultSchema: n.schema})
		return nil
	})
}

func (x *execCtx) dropUser(n *dropUserStmt) error {
	d := x.currentDB()
	gone := sqlErr(15151, 16, "Cannot drop the user '%s', because it does not exist or you do not have permission.", n.name)
	if !x.mayAlterUsers(d) {
		return gone
	}
	if x.in.readOnly(d) {
		return errReadOnly(d.Name)
	}
	return x.in.updateMetadata(d, func(md *metadata) error {
		for i, u := range md.Users {
			if strings.EqualFold(u.Name, n.name) {
				md.Users = append(md.Users[:i], md.Users[i+1:]...)
				return nil
			}
		}
		if n.ifExists {
			return nil
		}
		return gone
	})
}

func (x *execCtx) alterRole(n *alterRoleStmt) error {
	d := x.currentDB()
	role := strings.ToLower(n.role)
	if !x.mayAlterUsers(d) || !slices.Contains(fixedDBRoles, role) {
		return sqlErr(15151, 16, "Cannot alter the role '%s', because it does not exist or you do not have permission.", n.role)
	}
	return x.in.updateMetadata(d, func(md *metadata) error {
		u := findUser(md, n.member)
		if u == nil {
			what := "add"
			if !n.add {
				what = "drop"
			}
			return sqlErr(15151, 16, "Cannot %s the principal '%s', because it does not exist or you do not have permission.", what, n.member)
		}
		u.Roles = slices.DeleteFunc(u.Roles, func(r string) bool { return r == role })
		if n.add {
			u.Roles = append(u.Roles, role)
		}
		return nil
	})
}

// grant handles GRANT EXECUTE ON [OBJECT::]schema.function TO user, the
// one grant the sanity checks of a restored copy need beyond db_datareader.
func (x *execCtx) grant(n *grantStmt) error {
	for _, p := range n.perms {
		if p != "EXECUTE" {
			return errNotSupported("GRANT " + p)
		}
	}
	d := x.currentDB()
	if !x.mayAlterUsers(d) {
		return sqlErr(15151, 16, "Cannot find the object '%s', because it does not exist or you do not have permission.", n.object.last())
	}
	dbName, schema, name, err := x.resolveName(n.object)
	if err != nil {
		return err
	}
	if !strings.EqualFold(dbName, d.Name) {
		return sqlErr(4604, 16, "There is no such user or group '%s' or you do not have permission.", n.principal)
	}
	if schema == "" {
		schema = "dbo"
	}
	return x.in.updateMetadata(d, func(md *metadata) error {
		f := findFunction(md, schema, name)
		if f == nil {
			return sqlErr(15151, 16, "Cannot find the object '%s', because it does not exist or you do not have permission.", name)
		}
		u := findUser(md, n.principal)
		if u == nil {
			return sqlErr(15151, 16, "Cannot find the user '%s', because it does not exist or you do not have permission.", n.principal)
		}
		key := strings.ToLower(f.Schema + "." + f.Name)
		if !slices.Contains(u.Execute, key) {
			u.Execute = append(u.Execute, key)
		}
		return nil
	})
}

// alterAuthorization is ALTER AUTHORIZATION ON DATABASE::[db] TO [login]:
// the login becomes the database's owner, dbo in it (sysadmin here;
// https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-authorization-transact-sql).
func (x *execCtx) alterAuthorization(n *alterAuthStmt) error {
	l := x.sessionLogin()
	if !l.Sysadmin && !l.hasServer("CONTROL SERVER") {
		return sqlErr(15151, 16, "Cannot find the database '%s', because it does not exist or you do not have permission.", n.db)
	}
	d := x.in.lookupDB(n.db)
	if d == nil || d.system {
		return sqlErr(15151, 16, "Cannot find the database '%s', because it does not exist or you do not have permission.", n.db)
	}
	owner := x.in.principal(n.login)
	if owner == nil {
		return sqlErr(15151, 16, "Cannot find the principal '%s', because it does not exist or you do not have permission.", n.login)
	}
	if err := x.in.updateMetadata(d, func(md *metadata) error {
		md.DboSID = hex.EncodeToString(x.in.loginSID(owner))
		return nil
	}); err != nil {
		return err
	}
	x.in.mu.Lock()
	defer x.in.mu.Unlock()
	d.Owner = owner.Name
	if strings.EqualFold(owner.Name, "sa") {
		d.Owner = ""
	}
	return x.in.saveCatalog()
}

// databasePrincipalID answers DATABASE_PRINCIPAL_ID('name') in the current
// database: dbo 1, guest 2, INFORMATION_SCHEMA 3, sys 4, users from 5 and
// the fixed roles from 16384, NULL for no such principal
// (https://learn.microsoft.com/en-us/sql/t-sql/functions/database-principal-id-transact-sql).
func (x *execCtx) databasePrincipalID(name string) (any, error) {
	d := x.currentDB()
	switch strings.ToLower(name) {
	case "dbo":
		return int64(1), nil
	case "guest":
		return int64(2), nil
	case "information_schema":
		return int64(3), nil
	case "sys":
		return int64(4), nil
	case "public":
		return int64(0), nil
	}
	if i := slices.Index(fixedDBRoles, strings.ToLower(name)); i >= 0 {
		return int64(16384 + i), nil
	}
	md, err := x.in.readMetadata(d)
	if err != nil {
		return nil, err
	}
	for i, u := range md.Users {
		if strings.EqualFold(u.Name, name) {
			return int64(5 + i), nil
		}
	}
	return nil, nil
}

// xpCmdShellStmt is EXEC [master.][sys.]xp_cmdshell 'command' [, NO_OUTPUT].
type xpCmdShellStmt struct {
	db       string // the database the name was qualified with, "" for none
	command  expr
	noOutput bool
}

// XPCmdShellRun is one xp_cmdshell that ran: who ran it and the command.
// The emulator runs nothing; it records.
type XPCmdShellRun struct {
	Login, Command string
}

// XPCmdShellRuns are the xp_cmdshell calls that were allowed to run.
func (in *Instance) XPCmdShellRuns() []XPCmdShellRun {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.xpRuns)
}

// SetXPCmdShell turns the 'xp_cmdshell' server option on or off
// (sp_configure; off by default).
func (in *Instance) SetXPCmdShell(on bool) {
	in.mu.Lock()
	in.xpCmdShell = on
	in.mu.Unlock()
}

// xpCmdShell runs xp_cmdshell's checks: a database principal's context
// does not reach master (916), only sysadmin may execute it (229 on
// mssqlsystemresource's sys.xp_cmdshell,
// https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/xp-cmdshell-transact-sql#permissions),
// and the server option must be on (15281).
func (x *execCtx) xpCmdShell(n *xpCmdShellStmt) error {
	l := x.sessionLogin()
	if n.db != "" {
		d := x.in.lookupDB(n.db)
		if d == nil {
			return sqlErr(2812, 16, "Could not find stored procedure '%s.sys.xp_cmdshell'.", n.db)
		}
		if !x.in.dbUser(l, d) {
			return errNoDBAccess(l.Name, d.Name)
		}
	}
	if !l.Sysadmin {
		return errObjectDenied("EXECUTE", "xp_cmdshell", "mssqlsystemresource", "sys")
	}
	x.in.mu.Lock()
	on := x.in.xpCmdShell
	x.in.mu.Unlock()
	if !on {
		return sqlErr(15281, 16, "SQL Server blocked access to procedure 'sys.xp_cmdshell' of component 'xp_cmdshell' because this component is turned off as part of the security configuration for this server. A system administrator can enable the use of 'xp_cmdshell' by using sp_configure. For more information about enabling 'xp_cmdshell', search for 'xp_cmdshell' in SQL Server Books Online.")
	}
	v, err := (&env{x: x}).eval(n.command)
	if err != nil {
		return err
	}
	x.in.mu.Lock()
	x.in.xpRuns = append(x.in.xpRuns, XPCmdShellRun{Login: l.Name, Command: toString(v)})
	x.in.mu.Unlock()
	if n.noOutput || x.quiet {
		return nil
	}
	return x.sendRelation(&relation{cols: []relCol{col("", "output", tds.TypeNVarChar, 255)}, rows: [][]any{{nil}}})
}

// sqlLogins is sys.sql_logins: every login sees its own row and sa's;
// ALTER ANY LOGIN (or CONTROL SERVER) sees all, and only CONTROL SERVER
// sees password_hash
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-sql-logins-transact-sql#permissions).
// A database principal's context has no login: it sees sa's row alone.
func (x *execCtx) sqlLogins(qual string) *relation {
	rel := &relation{cols: []relCol{col(qual, "name", tds.TypeNVarChar, 128), col(qual, "principal_id", tds.TypeInt, 0),
		col(qual, "sid", tds.TypeVarBinary, 85), col(qual, "type", tds.TypeChar, 1), col(qual, "type_desc", tds.TypeNVarChar, 60),
		col(qual, "is_disabled", tds.TypeBit, 0), col(qual, "password_hash", tds.TypeVarBinary, 256)}}
	me := x.sessionLogin()
	all := me.Sysadmin || me.hasServer("ALTER ANY LOGIN") || me.hasServer("CONTROL SERVER")
	hashes := me.Sysadmin || me.hasServer("CONTROL SERVER")
	x.in.mu.Lock()
	var logins []*Login
	for _, l := range x.in.logins {
		if !l.Windows {
			logins = append(logins, l)
		}
	}
	x.in.mu.Unlock()
	sort.Slice(logins, func(i, j int) bool { return strings.ToLower(logins[i].Name) < strings.ToLower(logins[j].Name) })
	hasSA := false
	for i, l := range logins {
		sa := strings.EqualFold(l.Name, "sa")
		hasSA = hasSA || sa
		if !all && !sa && (me.dbPrincipal || !strings.EqualFold(l.Name, me.Name)) {
			continue
		}
		var hash any
		if hashes {
			sum := sha256.Sum256([]byte(l.Name + "\x00" + l.Password))
			hash = append([]byte{0x02, 0x00}, sum[:]...)
		}
		id := int64(256 + i)
		if sa {
			id = 1
		}
		rel.rows = append(rel.rows, []any{l.Name, id, x.in.loginSID(l), "S", "SQL_LOGIN", false, hash})
	}
	if !hasSA { // sa always exists; here it has no password to log in with
		rel.rows = append(rel.rows, []any{"sa", int64(1), []byte{0x01}, "S", "SQL_LOGIN", true, nil})
	}
	return rel
}
