package tsql

import (
	"fmt"
	"strings"
)

// The permission checks of `starter preflight` and the statements that grant
// what is missing. Every question is asked with HAS_PERMS_BY_NAME,
// IS_SRVROLEMEMBER and SERVERPROPERTY, which any login may call about itself
// (Microsoft Learn, "HAS_PERMS_BY_NAME (Transact-SQL)": 1 held, 0 not held,
// NULL when the securable or the permission name is not valid).

// Permission names the cycle needs (server level, then database and object
// level), as HAS_PERMS_BY_NAME and GRANT spell them.
const (
	PermViewServerState            = "VIEW SERVER STATE"
	PermViewServerPerformanceState = "VIEW SERVER PERFORMANCE STATE" // SQL Server 2022 (16.x) and later
	PermViewServerSecurityState    = "VIEW SERVER SECURITY STATE"    // SQL Server 2022 (16.x) and later
	PermViewAnyDefinition          = "VIEW ANY DEFINITION"
	PermCreateAnyDatabase          = "CREATE ANY DATABASE"
	PermAlterAnyDatabase           = "ALTER ANY DATABASE"
	PermAlterAnyConnection         = "ALTER ANY CONNECTION"
	PermCreateDatabase             = "CREATE DATABASE" // in master; implied by CREATE ANY DATABASE
	PermConnect                    = "CONNECT"
	PermBackupDatabase             = "BACKUP DATABASE"
	PermAlter                      = "ALTER"
	PermSelect                     = "SELECT"
	PermUpdate                     = "UPDATE"
	// More than any role of the product needs: preflight warns of them
	// (Privileges).
	PermControlServer = "CONTROL SERVER"
	PermAlterAnyLogin = "ALTER ANY LOGIN"
	PermControl       = "CONTROL" // on a database: what db_owner and its owner hold
)

// Securable classes of HAS_PERMS_BY_NAME.
const (
	ClassServer   = "" // NULL: the server itself
	ClassDatabase = "DATABASE"
	ClassObject   = "OBJECT"
)

// Fixed server roles ServerFacts reports membership of.
const (
	RoleSysadmin     = "sysadmin"
	RoleDBCreator    = "dbcreator"
	RoleProcessAdmin = "processadmin"
	// More than the product needs (Privileges).
	RoleSecurityAdmin = "securityadmin"
	RoleServerAdmin   = "serveradmin"
)

// Fixed database roles a fix may add the login's user to.
const (
	RoleDBBackupOperator = "db_backupoperator"
	RoleDBOwner          = "db_owner"
)

// Engine editions (SERVERPROPERTY('EngineEdition'), Microsoft Learn
// "SERVERPROPERTY (Transact-SQL)": 2 = Standard, also for Web and Business
// Intelligence; 3 = Enterprise, also Developer and Evaluation; 4 = Express).
const (
	EngineEditionStandard   = 2
	EngineEditionEnterprise = 3
	EngineEditionExpress    = 4
)

// ServerFacts returns the query for who the session is and what the server
// is: one row (login_name nvarchar, is_sysadmin int, is_dbcreator int,
// is_processadmin int, major_version int, engine_edition int, edition
// nvarchar, product_version nvarchar: the build, e.g. 16.0.4135.4).
// SERVERPROPERTY returns sql_variant; the casts give the driver plain types.
func ServerFacts() string {
	return "SELECT SUSER_SNAME() AS login_name, " +
		"IS_SRVROLEMEMBER(N'" + RoleSysadmin + "') AS is_sysadmin, " +
		"IS_SRVROLEMEMBER(N'" + RoleDBCreator + "') AS is_dbcreator, " +
		"IS_SRVROLEMEMBER(N'" + RoleProcessAdmin + "') AS is_processadmin, " +
		"CAST(SERVERPROPERTY(N'ProductMajorVersion') AS int) AS major_version, " +
		"CAST(SERVERPROPERTY(N'EngineEdition') AS int) AS engine_edition, " +
		"CAST(SERVERPROPERTY(N'Edition') AS nvarchar(128)) AS edition, " +
		ProductVersionColumn
}

// PermCheck is one HAS_PERMS_BY_NAME question about the session's login.
type PermCheck struct {
	// Securable is the database name (ClassDatabase) or the object's
	// one- to three-part name (ClassObject, e.g. [Sales].[DBBackup].[Sequence]);
	// empty for ClassServer.
	Securable  string
	Class      string // ClassServer, ClassDatabase or ClassObject
	Permission string // one of the Perm* names
}

// HasPerms returns one query that answers every check: one row, one int
// column per check, in order (1 held, 0 not held, NULL when the securable
// does not exist or is not visible). Securables travel as parameters;
// classes and permission names are this package's constants.
func HasPerms(checks ...PermCheck) (string, []any, error) {
	if len(checks) == 0 {
		return "", nil, fmt.Errorf("permission check: no permission to check")
	}
	var args []any
	cols := make([]string, len(checks))
	for i, c := range checks {
		if !knownPermission(c.Permission) {
			return "", nil, fmt.Errorf("permission check: %w: unknown permission %q", ErrInvalidOption, c.Permission)
		}
		switch c.Class {
		case ClassServer:
			if c.Securable != "" {
				return "", nil, fmt.Errorf("permission check %s: a server permission has no securable (got %q)", c.Permission, c.Securable)
			}
			cols[i] = "HAS_PERMS_BY_NAME(NULL, NULL, " + QuoteString(c.Permission) + ")"
			continue
		case ClassDatabase, ClassObject:
		default:
			return "", nil, fmt.Errorf("permission check %s: %w: unknown securable class %q", c.Permission, ErrInvalidOption, c.Class)
		}
		if _, err := Literal(c.Securable); err != nil || c.Securable == "" {
			return "", nil, fmt.Errorf("permission check %s on %q: %w", c.Permission, c.Securable, ErrInvalidIdent)
		}
		args = append(args, c.Securable)
		cols[i] = fmt.Sprintf("HAS_PERMS_BY_NAME(@p%d, %s, %s)", len(args), QuoteString(c.Class), QuoteString(c.Permission))
	}
	return "SELECT " + strings.Join(cols, ", "), args, nil
}

func knownPermission(p string) bool {
	switch p {
	case PermViewServerState, PermViewServerPerformanceState, PermViewServerSecurityState, PermViewAnyDefinition,
		PermCreateAnyDatabase, PermAlterAnyDatabase, PermAlterAnyConnection, PermCreateDatabase, PermConnect, PermBackupDatabase, PermAlter, PermSelect, PermUpdate,
		PermControlServer, PermAlterAnyLogin, PermControl:
		return true
	}
	return false
}

// SequenceObject is the three-part name of a database's sequence table,
// [db].[DBBackup].[Sequence], as HAS_PERMS_BY_NAME and OBJECT_ID take it.
func SequenceObject(db string) (string, error) {
	return QualifiedName(db, SequenceSchema, SequenceTable)
}

// ObjectExists returns the query for a user table's id: one row, one int
// column, NULL when the table does not exist or the login cannot see it
// (metadata visibility follows permissions).
func ObjectExists(object string) (string, []any, error) {
	if _, err := Literal(object); err != nil || object == "" {
		return "", nil, fmt.Errorf("object lookup %q: %w", object, ErrInvalidIdent)
	}
	return "SELECT OBJECT_ID(@p1, N'U')", []any{object}, nil
}

// ReadProbe returns a read of a table that returns no row: it fails with
// error 229 exactly when the login may not SELECT from the table, and
// otherwise costs nothing. parts name the table ("msdb", "dbo",
// "restorehistory").
func ReadProbe(parts ...string) (string, error) {
	q, err := QualifiedName(parts...)
	if err != nil {
		return "", fmt.Errorf("read probe: %w", err)
	}
	return "SELECT TOP (0) * FROM " + q, nil
}

// GrantServerPermission is the fix for a missing server permission:
// GRANT <perm> TO [login];
func GrantServerPermission(perm, login string) (string, error) {
	if !knownPermission(perm) {
		return "", fmt.Errorf("grant: %w: unknown permission %q", ErrInvalidOption, perm)
	}
	ql, err := QuoteIdent(login)
	if err != nil {
		return "", fmt.Errorf("grant %s: login: %w", perm, err)
	}
	return "GRANT " + perm + " TO " + ql + ";", nil
}

// AddDatabaseRoleMember is the fix for a missing database role:
// USE [db]; [IF ... CREATE USER [login] FOR LOGIN [login];] ALTER ROLE [role] ADD MEMBER [login];
// createUser adds the user a login without one in the database needs first
// (named like the login), created only when no such user exists.
func AddDatabaseRoleMember(db, role, login string, createUser bool) (string, error) {
	qdb, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("add role member: database: %w", err)
	}
	qr, err := QuoteIdent(role)
	if err != nil {
		return "", fmt.Errorf("add role member: role: %w", err)
	}
	ql, err := QuoteIdent(login)
	if err != nil {
		return "", fmt.Errorf("add role member: login: %w", err)
	}
	return "USE " + qdb + "; " + createUserIfAbsent(login, ql, createUser) + "ALTER ROLE " + qr + " ADD MEMBER " + ql + ";", nil
}

// GrantObjectPermissions is the fix for missing object permissions:
// USE [db]; [IF ... CREATE USER ...;] GRANT p1, p2 ON [schema].[object] TO [login];
func GrantObjectPermissions(db, schema, object string, perms []string, login string, createUser bool) (string, error) {
	if len(perms) == 0 {
		return "", fmt.Errorf("grant on %s.%s: no permission given", schema, object)
	}
	for _, p := range perms {
		if p != PermSelect && p != PermUpdate {
			return "", fmt.Errorf("grant on %s.%s: %w: %q is not an object permission the cycle needs", schema, object, ErrInvalidOption, p)
		}
	}
	qdb, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("grant: database: %w", err)
	}
	qo, err := QualifiedName(schema, object)
	if err != nil {
		return "", fmt.Errorf("grant: object: %w", err)
	}
	ql, err := QuoteIdent(login)
	if err != nil {
		return "", fmt.Errorf("grant: login: %w", err)
	}
	return "USE " + qdb + "; " + createUserIfAbsent(login, ql, createUser) + "GRANT " + strings.Join(perms, ", ") + " ON " + qo + " TO " + ql + ";", nil
}

// ServerRoles returns the query for the session's membership of each fixed
// server role: one row, one int column per role (1, 0; NULL for a name
// that is no fixed server role), in order ("IS_SRVROLEMEMBER
// (Transact-SQL)"). Roles are this package's Role* constants.
func ServerRoles(roles ...string) (string, error) {
	if len(roles) == 0 {
		return "", fmt.Errorf("server roles: no role given")
	}
	cols := make([]string, len(roles))
	for i, r := range roles {
		switch r {
		case RoleSysadmin, RoleDBCreator, RoleProcessAdmin, RoleSecurityAdmin, RoleServerAdmin:
		default:
			return "", fmt.Errorf("server roles: %w: %q", ErrInvalidOption, r)
		}
		cols[i] = "IS_SRVROLEMEMBER(" + QuoteString(r) + ")"
	}
	return "SELECT " + strings.Join(cols, ", "), nil
}

// RevokeServerPermission takes back a server permission the login holds
// beyond its needs: REVOKE <perm> FROM [login];
func RevokeServerPermission(perm, login string) (string, error) {
	if !knownPermission(perm) {
		return "", fmt.Errorf("revoke: %w: unknown permission %q", ErrInvalidOption, perm)
	}
	ql, err := QuoteIdent(login)
	if err != nil {
		return "", fmt.Errorf("revoke %s: login: %w", perm, err)
	}
	return "REVOKE " + perm + " FROM " + ql + ";", nil
}

// DropServerRoleMember takes the login out of a fixed server role:
// ALTER SERVER ROLE [role] DROP MEMBER [login];
func DropServerRoleMember(role, login string) (string, error) {
	qr, err := QuoteIdent(role)
	if err != nil {
		return "", fmt.Errorf("drop server role member: role: %w", err)
	}
	ql, err := QuoteIdent(login)
	if err != nil {
		return "", fmt.Errorf("drop server role member: login: %w", err)
	}
	return "ALTER SERVER ROLE " + qr + " DROP MEMBER " + ql + ";", nil
}

// DropDatabaseRoleMember takes the login's user (named like the login) out
// of a database role: USE [db]; ALTER ROLE [role] DROP MEMBER [login];
func DropDatabaseRoleMember(db, role, login string) (string, error) {
	qdb, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("drop role member: database: %w", err)
	}
	qr, err := QuoteIdent(role)
	if err != nil {
		return "", fmt.Errorf("drop role member: role: %w", err)
	}
	ql, err := QuoteIdent(login)
	if err != nil {
		return "", fmt.Errorf("drop role member: login: %w", err)
	}
	return "USE " + qdb + "; ALTER ROLE " + qr + " DROP MEMBER " + ql + ";", nil
}

// createUserIfAbsent creates the login's user in the current database when
// there is none by that name. A GRANT names a database user, not a login, so
// a login that reaches a database only through its guest user (msdb admits
// everyone so) still needs one.
func createUserIfAbsent(login, quoted string, create bool) string {
	if !create {
		return ""
	}
	return "IF DATABASE_PRINCIPAL_ID(" + QuoteString(login) + ") IS NULL CREATE USER " + quoted + " FOR LOGIN " + quoted + "; "
}
