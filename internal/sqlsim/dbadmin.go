package sqlsim

import (
	"slices"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// DROP DATABASE and ALTER DATABASE, and who uses a database.

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
		if r.target != "" && in.sameName(r.target, d.Name) && r.sessionID != int(self.id) {
			return true
		}
	}
	for _, s := range in.sessions {
		if s != self && in.sameName(s.Database(), d.Name) {
			return true
		}
	}
	return false
}

// restoringLocked reports another session's RESTORE into name, a database
// that does not exist yet (its first RESTORE creates it).
func (in *Instance) restoringLocked(name string, self *session) bool {
	for r := range in.requests {
		if r.target != "" && in.sameName(r.target, name) && r.sessionID != int(self.id) {
			return true
		}
	}
	return false
}

// alterDatabase handles SET SINGLE_USER/MULTI_USER/RESTRICTED_USER and
// READ_ONLY/READ_WRITE [WITH ROLLBACK IMMEDIATE]: other sessions' requests
// against the database are cancelled, and the connections of the sessions
// in it are closed, as KILL closes them: "If other users are connected to
// the database at the time that you set the database to single-user mode,
// their connections to the database will be closed without warning" ("Set
// a database to single-user mode",
// https://learn.microsoft.com/en-us/sql/relational-databases/databases/set-a-database-to-single-user-mode).
// READ_ONLY and READ_WRITE need exclusive access: without ROLLBACK, another
// session in the database fails the statement with 5070
// (https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-database-transact-sql-set-options#database_update).
// On a RESTORING database the statement fails with 5052 and 5069; SQL
// Server's exact answer there (the number, and whether the rest of the
// batch runs) is not documented.
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
	switch n.option {
	case "TRUSTWORTHY":
		return x.setTrustworthy(d, n.value == "ON")
	case "RECOVERY":
		x.in.mu.Lock()
		defer x.in.mu.Unlock()
		if d.State == "RESTORING" || d.Standby {
			return tds.Errors{sqlErr(5052, 16, "ALTER DATABASE is not permitted while a database is in the Restoring state."), failed}
		}
		m, _ := checkRecoveryModel(n.value)
		x.in.setRecoveryModelLocked(d, m)
		return x.in.saveCatalog()
	case "PAGE_VERIFY":
		if x.in.restoring(d) {
			return tds.Errors{sqlErr(5052, 16, "ALTER DATABASE is not permitted while a database is in the Restoring state."), failed}
		}
		return x.in.updateMetadata(d, func(md *metadata) error {
			md.PageVerify = n.value
			if n.value == "CHECKSUM" {
				md.PageVerify = ""
			}
			return nil
		})
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
	var closed []uint16
	if exclusive {
		for _, s := range x.in.sessions {
			if s != x.s && x.in.sameName(s.Database(), d.Name) {
				closed = append(closed, s.id)
				// Out of the database at once, whenever its connection
				// is seen closed.
				s.setDatabase("master")
			}
		}
		for r := range x.in.requests {
			if r.dbID == d.ID && r.sessionID != int(x.s.id) || slices.Contains(closed, uint16(r.sessionID)) {
				if slices.Contains(closed, uint16(r.sessionID)) {
					r.killed.Store(true)
				}
				r.cancel()
				rolledBack = true
			}
		}
		rolledBack = rolledBack || len(closed) > 0
	}
	srv := x.in.srv
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
	if srv != nil {
		for _, id := range closed {
			srv.DropConnection(id)
		}
	}
	if err != nil {
		return err
	}
	if n.option == "READ_ONLY" || n.option == "READ_WRITE" {
		// READ_ONLY is an option of the database itself: its backups carry
		// it (ALTER DATABASE SET Options, database_update).
		if err := x.in.updateMetadata(d, func(md *metadata) error { md.ReadOnly = n.option == "READ_ONLY"; return nil }); err != nil {
			return err
		}
	}
	if n.option == "SINGLE_USER" || rolledBack {
		return x.w.Info(5060, 10, "Nonqualified transactions are being rolled back. Estimated rollback completion: 100%.")
	}
	return nil
}

// setTrustworthy is ALTER DATABASE ... SET TRUSTWORTHY ON|OFF, which needs
// CONTROL SERVER or sysadmin ("TRUSTWORTHY database property",
// https://learn.microsoft.com/en-us/sql/relational-databases/security/trustworthy-database-property).
func (x *execCtx) setTrustworthy(d *database, on bool) error {
	if l := x.sessionLogin(); !l.Sysadmin && !l.hasServer("CONTROL SERVER") {
		return tds.Errors{errNoPermission(), sqlErr(5069, 16, "ALTER DATABASE statement failed.")}
	}
	x.in.mu.Lock()
	defer x.in.mu.Unlock()
	d.Trustworthy = on
	return x.in.saveCatalog()
}
