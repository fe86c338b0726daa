package preflight

import (
	"context"
	"fmt"
	"strings"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/smb"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Least privilege: what a credential can do beyond what the product needs,
// each a warning that names it and how to drop it (README "Credentials and
// what they may do"). No role of the product needs more than CREATE ANY
// DATABASE, VIEW SERVER (PERFORMANCE/SECURITY) STATE, ALTER ANY
// CONNECTION, VIEW ANY DEFINITION at the server, db_backupoperator in a
// source database and SELECT on two msdb tables; what lies beyond, and why
// it matters (Microsoft Learn, "Server-level roles",
// https://learn.microsoft.com/en-us/sql/relational-databases/security/authentication-access/server-level-roles;
// "Permissions (Database Engine)"):
//   - sysadmin: any activity on the instance, dbo in every database.
//   - CONTROL SERVER: every server permission (without being sysadmin:
//     IS_SRVROLEMEMBER('sysadmin') is 0 for it).
//   - securityadmin, ALTER ANY LOGIN: manage logins and grant server
//     permissions, "should be treated as equivalent to the sysadmin role".
//   - serveradmin: change server-wide configuration and shut the server
//     down.
//   - dbcreator: create, alter, drop and restore any database; RESTORE
//     over an existing database needs sysadmin, dbcreator or its owner
//     ("RESTORE Statements (Transact-SQL)", Permissions), so dbcreator may
//     restore over the sources. The product restores only databases its
//     login creates and so owns.
//   - ALTER ANY DATABASE: DROP DATABASE of any database ("DROP DATABASE
//     (Transact-SQL)", Permissions: CONTROL on it, ALTER ANY DATABASE or
//     db_owner).
//   - CONTROL of a source database (db_owner holds it, "Database-level
//     roles"; so does the owner, dbo there): drop it,
//     change its data, and as its owner RESTORE over it; BACKUP needs
//     db_backupoperator only ("BACKUP (Transact-SQL)", Permissions).
//   - ALTER of a source database: only sequence: table needs it, and only
//     until the first cycle created DBBackup.Sequence.

// neededOnServer is what the product's SQL roles need at the server, for
// the warnings' text.
const neededOnServer = "the product needs CREATE ANY DATABASE, VIEW SERVER STATE (2022: VIEW SERVER PERFORMANCE STATE), " +
	"optionally ALTER ANY CONNECTION and VIEW ANY DEFINITION"

// privilegeChecks are the instance's least-privilege rows: one OK row when
// the login holds nothing beyond its needs, else one WARN per excess.
func privilegeChecks(inst string, f serverFacts) []Check {
	row := func(name, detail, fix string) Check {
		return Check{Kind: KindInstance, Instance: inst, Name: "least privilege: " + name, Status: Warn,
			For: "a stolen password does no more than the product needs", Detail: f.Login + " " + detail, Fix: fix}
	}
	drop := func(role string) string {
		s, _ := tsql.DropServerRoleMember(role, f.Login)
		return s
	}
	revoke := func(perm string) string {
		s, _ := tsql.RevokeServerPermission(perm, f.Login)
		return s
	}
	grantCreate, _ := tsql.GrantServerPermission(tsql.PermCreateAnyDatabase, f.Login)
	var cs []Check
	switch {
	case f.Sysadmin:
		fix := drop(tsql.RoleSysadmin) + " -- then the grants of README \"Credentials and what they may do\" (deploy/sql/login.sql)"
		if strings.EqualFold(f.Login, "sa") {
			fix = "give the worker a login of its own with the grants of README \"Credentials and what they may do\" (deploy/sql/), never sa"
		}
		return []Check{row(tsql.RoleSysadmin, "is sysadmin: it may do anything on "+inst+" (read, change, drop or restore over "+
			"every database, change every login); "+neededOnServer, fix)}
	case f.Perms[tsql.PermControlServer]:
		return []Check{row(tsql.PermControlServer, "holds CONTROL SERVER: every server permission, so every database; "+neededOnServer,
			revoke(tsql.PermControlServer))}
	}
	if f.SecurityAdmin || f.Perms[tsql.PermAlterAnyLogin] {
		name, fix := tsql.PermAlterAnyLogin, revoke(tsql.PermAlterAnyLogin)
		if f.SecurityAdmin {
			name, fix = tsql.RoleSecurityAdmin, drop(tsql.RoleSecurityAdmin)
		}
		cs = append(cs, row(name, "may manage logins and grant server permissions (Microsoft Learn: securityadmin is to be treated "+
			"as equivalent to sysadmin); "+neededOnServer, fix))
	}
	if f.ServerAdmin {
		cs = append(cs, row(tsql.RoleServerAdmin, "may change server-wide configuration and shut "+inst+" down; "+neededOnServer,
			drop(tsql.RoleServerAdmin)))
	}
	switch {
	case f.DBCreator:
		cs = append(cs, row(tsql.RoleDBCreator, "may alter, drop and RESTORE over any database on "+inst+", not only those it created; "+
			"the product restores only databases its login creates, and so owns, which CREATE ANY DATABASE allows",
			drop(tsql.RoleDBCreator)+" "+grantCreate))
	case f.Perms[tsql.PermAlterAnyDatabase]:
		cs = append(cs, row(tsql.PermAlterAnyDatabase, "may alter and DROP any database on "+inst+"; the product drops only the "+
			"copies it restored, which it owns, so CREATE ANY DATABASE is enough", revoke(tsql.PermAlterAnyDatabase)+" "+grantCreate))
	}
	if len(cs) == 0 {
		cs = append(cs, Check{Kind: KindInstance, Instance: inst, Name: "least privilege", Status: OK,
			For:    "a stolen password does no more than the product needs",
			Detail: f.Login + " is no sysadmin, securityadmin, serveradmin or dbcreator, and holds neither CONTROL SERVER, ALTER ANY LOGIN nor ALTER ANY DATABASE"})
	}
	return cs
}

// databasePrivilegeCheck is a source database's least-privilege row; none
// for a sysadmin or CONTROL SERVER login, whose instance row says more.
func databasePrivilegeCheck(db *config.Database, sf serverFacts, f databaseFacts) (Check, bool) {
	if sf.Sysadmin || sf.Perms[tsql.PermControlServer] || f.State != "ONLINE" {
		return Check{}, false
	}
	c := Check{Kind: KindDatabase, Instance: db.Instance, Database: db.Name, Name: "least privilege",
		For: "source: BACKUP needs db_backupoperator only"}
	// ALTER creates the sequence table the first time; once it exists,
	// SELECT and UPDATE on it are enough.
	alterNeeded := db.Sequence == config.SequenceTable && !f.SeqExists
	qdb, _ := tsql.QuoteIdent(db.Name)
	ql, _ := tsql.QuoteIdent(sf.Login)
	switch {
	case f.Control:
		c.Status = Warn
		c.Detail = sf.Login + " holds CONTROL of " + db.Name + " (db_owner, or it owns the database): it may drop it, change its data " +
			"and, as its owner, RESTORE over it"
		drop, _ := tsql.DropDatabaseRoleMember(db.Name, tsql.RoleDBOwner, sf.Login)
		add, _ := tsql.AddDatabaseRoleMember(db.Name, tsql.RoleDBBackupOperator, sf.Login, false)
		c.Fix = drop + " " + add + " -- and when " + sf.Login + " owns it: ALTER AUTHORIZATION ON DATABASE::" + qdb + " TO [another login];"
	case f.Alter && !alterNeeded && !sf.held(tsql.PermAlterAnyDatabase): // else the instance's row says it
		c.Status = Warn
		c.Detail = sf.Login + " holds ALTER on " + db.Name + ", which the product needs only to create DBBackup.Sequence once (sequence: table)"
		c.Fix = "USE " + qdb + "; REVOKE ALTER ON DATABASE::" + qdb + " FROM " + ql + ";"
	default:
		c.Status, c.Detail = OK, sf.Login+" holds neither CONTROL (db_owner, ownership) nor ALTER it does not need on "+db.Name
	}
	return c, true
}

// sharePrivilegeCheck is a share's least-privilege row, from the owners of
// the probe file the worker's account just created and of the location's
// directory (smb.Storage.Privileges); none for storage other than SMB.
func sharePrivilegeCheck(ctx context.Context, st storage.Storage, c Check, srv *config.BackupServer, probe string) (Check, bool) {
	sh, ok := st.(interface {
		Privileges(ctx context.Context, probe string) (smb.Privileges, error)
	})
	if !ok {
		return c, false
	}
	user := "the SMB user"
	if srv.SMB != nil && srv.SMB.User != "" {
		user = "the SMB user " + srv.SMB.User
	}
	p, err := sh.Privileges(ctx, probe)
	switch {
	case err != nil:
		c.Status, c.Detail = OK, "not checked: the owners could not be read: "+err.Error()
	case p.Admin != "":
		c.Name += ": administrator"
		c.Status = Warn
		c.Detail = fmt.Sprintf("files %s creates are owned by %s (%s): it is an administrator of the server, or the share maps it to one "+
			"(Samba's admin users), so it may change every file's ACL and owner there", user, p.Admin, p.Self)
		c.Fix = "use an account that is no administrator, with modify on " + srv.Location + " and nothing else (on Samba: leave it out of admin users)"
	case p.OwnsDir():
		c.Name += ": owner of the directory"
		c.Status = Warn
		c.Detail = fmt.Sprintf("%s (%s) owns the directory of %s, so it may change its ACL: shut the verification instance out, or open the sets to everyone",
			user, p.Self, srv.Location)
		c.Fix = "give the directory to an administrator (Windows: Administrators; Samba: chown root) and grant " + user +
			" modify on it (Samba: write through its group, chmod 2775)"
	default:
		c.Status = OK
		c.Detail = fmt.Sprintf("%s (%s) is no administrator and does not own the directory (owner %s)", user, p.Self, p.DirOwner)
	}
	return c, true
}
