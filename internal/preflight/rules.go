package preflight

import (
	"fmt"
	"strings"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// What each step needs, and why (Microsoft Learn, Transact-SQL reference,
// section "Permissions" of each statement):
//   - BACKUP DATABASE: sysadmin, db_owner or db_backupoperator
//     (https://learn.microsoft.com/en-us/sql/t-sql/statements/backup-transact-sql#permissions).
//   - RESTORE HEADERONLY / FILELISTONLY / VERIFYONLY: CREATE DATABASE
//     ("RESTORE Statements - HEADERONLY (Transact-SQL)", Permissions:
//     "Obtaining information about a backup set or backup device requires
//     CREATE DATABASE permission"), implied by CREATE ANY DATABASE.
//   - RESTORE DATABASE: CREATE DATABASE when the database does not exist;
//     over an existing one sysadmin, dbcreator or its owner
//     (https://learn.microsoft.com/en-us/sql/t-sql/statements/restore-statements-transact-sql#permissions).
//     The login that restores a database it creates becomes its owner, so
//     it is dbo there: DBCC CHECKDB (sysadmin or db_owner,
//     https://learn.microsoft.com/en-us/sql/t-sql/database-console-commands/dbcc-checkdb-transact-sql#permissions)
//     and the sanity queries need nothing more, nor do RESTORE ... REPLACE
//     over that copy (its owner) and DROP DATABASE of it (CONTROL on the
//     database, ALTER ANY DATABASE or db_owner,
//     https://learn.microsoft.com/en-us/sql/t-sql/statements/drop-database-transact-sql#permissions):
//     ALTER ANY DATABASE is not needed.
//   - sequence: catalog reads the source's msdb.dbo.backupset for the
//     numbers of earlier sets (a floor when the backup servers lost theirs).
//   - sys.dm_exec_requests shows other sessions' requests (the cycle's own
//     statement after a worker restart) only with VIEW SERVER STATE; on
//     SQL Server 2022 (16.x) VIEW SERVER PERFORMANCE STATE
//     (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-exec-requests-transact-sql#permissions).
//   - KILL: ALTER ANY CONNECTION
//     (https://learn.microsoft.com/en-us/sql/t-sql/language-elements/kill-transact-sql#permissions).
//   - The restore proof reads msdb.dbo.restorehistory and msdb.dbo.backupset:
//     checked by reading them, which fails with error 229 without SELECT.
//   - Backup compression: not in Express and Web ("Editions and supported
//     features of SQL Server 2022").

// serverFacts is what an instance says about the session's login.
type serverFacts struct {
	Login                             string
	Sysadmin, DBCreator, ProcessAdmin bool
	// SecurityAdmin, ServerAdmin: members of these fixed server roles,
	// which no role of the product needs (privilege.go).
	SecurityAdmin, ServerAdmin bool
	Major                      int          // ProductMajorVersion: 13 = 2016 ... 16 = 2022
	Version                    plan.Version // ProductVersion: the build
	EngineEdition              int          // tsql.EngineEdition*
	Edition                    string       // "Enterprise Edition (64-bit)", ...
	// Perms are the server permissions asked, by name (HAS_PERMS_BY_NAME = 1).
	Perms map[string]bool
	// MasterCreateDB: CREATE DATABASE granted in master, the narrower form
	// of CREATE ANY DATABASE that RESTORE and RESTORE HEADERONLY accept.
	MasterCreateDB bool
}

// serverPerms are the server permissions to ask an instance of that major
// version about.
func serverPerms(major int) []string {
	p := []string{tsql.PermCreateAnyDatabase, tsql.PermAlterAnyDatabase, tsql.PermViewServerState, tsql.PermAlterAnyConnection,
		tsql.PermControlServer, tsql.PermAlterAnyLogin}
	if major >= 16 {
		p = append(p, tsql.PermViewServerPerformanceState)
	}
	return p
}

// product names the server for the login row.
func (f serverFacts) product() string {
	names := map[int]string{13: "2016", 14: "2017", 15: "2019", 16: "2022"}
	v := names[f.Major]
	if v == "" {
		v = fmt.Sprintf("major version %d", f.Major)
	}
	s := "SQL Server " + v
	if f.Edition != "" {
		s += ", " + f.Edition
	}
	return s
}

func (f serverFacts) held(perm string) bool {
	if f.Sysadmin || f.Perms[perm] {
		return true
	}
	switch perm {
	case tsql.PermCreateAnyDatabase:
		// dbcreator may create, alter, drop and restore any database
		// ("Server-level roles"); HAS_PERMS_BY_NAME may not list it.
		return f.DBCreator || f.MasterCreateDB
	case tsql.PermAlterAnyDatabase:
		return f.DBCreator
	case tsql.PermAlterAnyConnection:
		return f.ProcessAdmin
	}
	return false
}

// how says why a held permission holds.
func (f serverFacts) how(perm string) string {
	switch {
	case f.Sysadmin:
		return "held: " + f.Login + " is sysadmin"
	case f.Perms[perm]:
		return "held"
	case perm == tsql.PermCreateAnyDatabase && f.MasterCreateDB && !f.DBCreator:
		return "held as CREATE DATABASE in master"
	case f.DBCreator:
		return "held through dbcreator"
	case f.ProcessAdmin:
		return "held through processadmin"
	}
	return "held"
}

// viewStatePerm is the permission that shows other sessions' requests on
// this version.
func (f serverFacts) viewStatePerm() string {
	if f.Major >= 16 {
		return tsql.PermViewServerPerformanceState
	}
	return tsql.PermViewServerState
}

func (f serverFacts) viewStateHeld() bool {
	return f.held(tsql.PermViewServerState) || (f.Major >= 16 && f.held(tsql.PermViewServerPerformanceState))
}

// serverCheck is a check of one server permission.
func serverCheck(inst string, f serverFacts, perm, why string, missing Status) Check {
	c := Check{Kind: KindInstance, Instance: inst, Name: perm, For: why}
	if f.held(perm) {
		c.Status, c.Detail = OK, f.how(perm)
		return c
	}
	c.Status, c.Detail = missing, f.Login+" does not hold "+perm
	c.Fix, _ = tsql.GrantServerPermission(perm, f.Login)
	return c
}

func viewStateCheck(inst string, f serverFacts, why string) Check {
	perm := f.viewStatePerm()
	c := Check{Kind: KindInstance, Instance: inst, Name: perm, For: why}
	if f.viewStateHeld() {
		c.Status, c.Detail = OK, f.how(perm)
		return c
	}
	c.Status = Missing
	c.Detail = f.Login + " sees only its own session in sys.dm_exec_requests: after a worker restart the cycle cannot find its running statement"
	c.Fix, _ = tsql.GrantServerPermission(perm, f.Login)
	return c
}

// sourceInstanceChecks are the server-level needs of a source instance.
func sourceInstanceChecks(inst string, f serverFacts) []Check {
	return []Check{
		serverCheck(inst, f, tsql.PermCreateAnyDatabase, "source: RESTORE HEADERONLY recognises a BACKUP that finished while no worker watched", Missing),
		viewStateCheck(inst, f, "source: re-attach to a running BACKUP"),
		serverCheck(inst, f, tsql.PermAlterAnyConnection, "optional: a cancelled or failed cycle stops the statement it left running (KILL)", Warn),
	}
}

// verifyInstanceChecks are the needs of a verification instance.
func verifyInstanceChecks(inst string, f serverFacts, msdb msdbFacts) []Check {
	cs := []Check{
		serverCheck(inst, f, tsql.PermCreateAnyDatabase,
			"verification: RESTORE of the copy (then REPLACE and DROP of it as its owner), RESTORE FILELISTONLY/HEADERONLY", Missing),
		viewStateCheck(inst, f, "verification: re-attach to a running RESTORE or DBCC CHECKDB"),
		serverCheck(inst, f, tsql.PermAlterAnyConnection, "optional: a cancelled or failed cycle stops the statement it left running (KILL)", Warn),
	}
	for _, t := range []struct {
		table string
		held  bool
	}{{"restorehistory", msdb.RestoreHistory}, {"backupset", msdb.BackupSet}} {
		c := Check{Kind: KindInstance, Instance: inst, Name: "SELECT msdb.dbo." + t.table,
			For: "verification: restore proof (the copy was restored from this very set)"}
		switch {
		case f.Sysadmin || t.held:
			c.Status, c.Detail = OK, "held"
		default:
			c.Status, c.Detail = Missing, f.Login+" cannot read msdb.dbo."+t.table
			// msdb admits every login through guest, but a GRANT needs the
			// login's own user there.
			c.Fix, _ = tsql.GrantObjectPermissions("msdb", "dbo", t.table, []string{tsql.PermSelect}, f.Login, true)
		}
		cs = append(cs, c)
	}
	c := Check{Kind: KindInstance, Instance: inst, Name: "DBCC CHECKDB, sanity queries", For: "verification: check the restored copy"}
	switch {
	case f.Sysadmin:
		c.Status, c.Detail = OK, "held: "+f.Login+" is sysadmin"
	case f.held(tsql.PermCreateAnyDatabase):
		c.Status, c.Detail = OK, "held: "+f.Login+" restores the copy, so it owns it and is db_owner there"
	default:
		c.Status = Missing
		c.Detail = "db_owner of the restored copy comes with restoring it, which needs CREATE ANY DATABASE"
		c.Fix, _ = tsql.GrantServerPermission(tsql.PermCreateAnyDatabase, f.Login)
	}
	return append(cs, c)
}

// backupHistoryCheck is the need of a source instance whose databases use
// sequence: catalog: it reads their earlier sets' names in
// msdb.dbo.backupset. Without SELECT the cycle still runs, on the backup
// servers' numbers alone, so it is a warning.
func backupHistoryCheck(inst string, f serverFacts, msdb msdbFacts) Check {
	c := Check{Kind: KindInstance, Instance: inst, Name: "SELECT msdb.dbo.backupset",
		For: "source: sequence: catalog reads the backup history (numbers go on when the backup servers lost their sets)"}
	if f.Sysadmin || msdb.BackupSet {
		c.Status, c.Detail = OK, "held"
		return c
	}
	c.Status = Warn
	c.Detail = f.Login + " cannot read msdb.dbo.backupset: sequence numbers rest on the backup servers alone"
	c.Fix, _ = tsql.GrantObjectPermissions("msdb", "dbo", "backupset", []string{tsql.PermSelect}, f.Login, true)
	return c
}

// msdbFacts is what the login may read in msdb.
type msdbFacts struct {
	RestoreHistory, BackupSet bool
}

// databaseFacts is what the source instance says about one database.
type databaseFacts struct {
	State string // sys.databases.state_desc; "" when the database is not there
	// Database permissions of the login (HAS_PERMS_BY_NAME = 1). Control
	// is what db_owner and the database's owner hold: more than BACKUP
	// needs (privilege.go).
	Connect, Backup, Alter, Control bool
	// The sequence table: whether the login sees it, and may read and
	// update it.
	SeqExists, SeqSelect, SeqUpdate bool
	// SizeBytes is data + log from sys.master_files; -1 unknown.
	SizeBytes int64
	// PageVerify is sys.databases.page_verify_option_desc ("" unknown).
	PageVerify string
	// RecoveryModel is sys.databases.recovery_model_desc, read for a
	// database with log_backup ("" unknown: RecoveryErr says why).
	RecoveryModel string
	RecoveryErr   error
}

// databaseChecks are the needs of one source database.
func databaseChecks(db *config.Database, sf serverFacts, f databaseFacts) []Check {
	base := Check{Kind: KindDatabase, Instance: db.Instance, Database: db.Name}
	var cs []Check
	avail := base
	avail.Name, avail.For = "database available", "source: BACKUP DATABASE"
	switch f.State {
	case "ONLINE":
		avail.Status, avail.Detail = OK, "ONLINE"
	case "":
		avail.Status = Missing
		avail.Detail = fmt.Sprintf("no database %q on %s (names are exact)", db.Name, db.Instance)
		avail.Fix = "fix the name under databases: in the config, or create/restore the database"
	default:
		avail.Status = Missing
		avail.Detail = "the database is " + f.State + ": BACKUP DATABASE needs it ONLINE"
		avail.Fix = "bring the database online (ALTER DATABASE ... SET ONLINE, or finish its restore)"
	}
	cs = append(cs, avail)
	if avail.Status != OK {
		avail.Detail += "; the other checks of this database did not run"
		return []Check{avail}
	}

	backup := base
	backup.Name, backup.For = tsql.PermBackupDatabase, "source: the nightly BACKUP"
	switch {
	case sf.Sysadmin:
		backup.Status, backup.Detail = OK, "held: "+sf.Login+" is sysadmin"
	case f.Backup:
		backup.Status, backup.Detail = OK, "held"
	default:
		backup.Status, backup.Detail = Missing, sf.Login+" may not back up "+db.Name
		if !f.Connect {
			backup.Detail += " (it has no user in the database)"
		}
		backup.Fix, _ = tsql.AddDatabaseRoleMember(db.Name, tsql.RoleDBBackupOperator, sf.Login, !f.Connect)
	}
	cs = append(cs, backup)

	if db.Sequence == config.SequenceTable {
		cs = append(cs, sequenceCheck(base, db, sf, f))
	}
	if c, ok := compressionCheck(base, db, sf); ok {
		cs = append(cs, c)
	}
	if f.PageVerify != "" {
		cs = append(cs, pageVerifyCheck(base, db, f.PageVerify))
	}
	if db.LogBackups() {
		cs = append(cs, recoveryModelCheck(base, db, sf, f))
	}
	size := base
	size.Name, size.For = "size", "free space on the backup servers"
	if f.SizeBytes >= 0 {
		size.Status, size.Detail = OK, plan.FormatBytes(f.SizeBytes)+" in data and log files (sys.master_files)"
	} else {
		size.Status = Warn
		size.Detail = "unknown: sys.master_files shows no file of " + db.Name + " to " + sf.Login +
			" (it needs CREATE ANY DATABASE, ALTER ANY DATABASE or VIEW ANY DEFINITION)"
		size.Fix, _ = tsql.GrantServerPermission(tsql.PermCreateAnyDatabase, sf.Login)
	}
	return append(cs, size)
}

func sequenceCheck(base Check, db *config.Database, sf serverFacts, f databaseFacts) Check {
	c := base
	c.Name, c.For = "sequence table", "sequence: table (DBBackup.Sequence in the source database)"
	switch {
	case sf.Sysadmin:
		c.Status, c.Detail = OK, "held: "+sf.Login+" is sysadmin"
		return c
	case f.SeqExists && f.SeqSelect && f.SeqUpdate:
		c.Status, c.Detail = OK, "SELECT and UPDATE on [DBBackup].[Sequence] held"
		return c
	case !f.SeqExists && f.Alter:
		c.Status, c.Detail = OK, "absent: the first cycle creates it ("+sf.Login+" holds ALTER on the database)"
		return c
	}
	c.Status = Missing
	var lacks []string
	if !f.SeqSelect {
		lacks = append(lacks, tsql.PermSelect)
	}
	if !f.SeqUpdate {
		lacks = append(lacks, tsql.PermUpdate)
	}
	c.Detail = sf.Login + " lacks " + strings.Join(lacks, " and ") + " on [DBBackup].[Sequence]"
	if !f.SeqExists {
		c.Detail = "the table does not exist or " + sf.Login + " cannot see it, and " + sf.Login + " may not create it"
	}
	grant, _ := tsql.GrantObjectPermissions(db.Name, tsql.SequenceSchema, tsql.SequenceTable,
		[]string{tsql.PermSelect, tsql.PermUpdate}, sf.Login, !f.Connect)
	var fix []string
	if !f.SeqExists {
		// Creating the table once as an administrator keeps the cycle's
		// login to SELECT and UPDATE; the statements are idempotent.
		setup, _ := tsql.SequenceSetup(db.Name)
		for _, s := range setup {
			fix = append(fix, s+";")
		}
	}
	c.Fix = strings.Join(append(fix, grant), "\n")
	return c
}

// compressionRefused: Express and Web have no backup compression.
func compressionRefused(sf serverFacts) bool {
	return sf.EngineEdition == tsql.EngineEditionExpress || strings.Contains(strings.ToLower(sf.Edition), "web")
}

func compressionCheck(base Check, db *config.Database, sf serverFacts) (Check, bool) {
	if !db.Compression {
		return Check{}, false
	}
	c := base
	c.Name, c.For = "backup compression", "compression: true"
	if !compressionRefused(sf) {
		c.Status, c.Detail = OK, "supported by "+sf.product()
		return c, true
	}
	c.Status = Warn
	c.Detail = sf.product() + " has no backup compression: the BACKUP runs without it, and the sets are as large as the data"
	c.Fix = "set compression: false for " + db.ID() + " in the config"
	return c, true
}

// configChecks are the configuration's warnings (config.Config.Warnings),
// each a WARN row named by its key.
func configChecks(cfg *config.Config) []Check {
	var cs []Check
	for _, w := range cfg.Warnings {
		c := Check{Kind: KindConfig, Name: w.Path, Status: Warn, Detail: w.Error(), For: "every cycle"}
		if strings.HasSuffix(w.Path, "heartbeat_timeout") {
			c.Fix = "set heartbeat_timeout: 4m (3m to 5m), or leave it out"
		}
		cs = append(cs, c)
	}
	cs = append(cs, manifestKeysCheck(cfg))
	if cfg.Evidence.Enabled() {
		cs = append(cs, evidenceCheck(cfg))
	}
	return cs
}

// evidenceCheck says whether the workers can sign evidence records: the
// key read from its reference, its public key listed.
func evidenceCheck(cfg *config.Config) Check {
	c := Check{Kind: KindConfig, Name: "evidence", For: "the evidence ledger: every verified set, log proof and drill is recorded"}
	e := cfg.Evidence
	if !e.Signs() {
		c.Status = Warn
		c.Detail = "evidence: has public_keys but no signing_key_env or signing_key_file: this configuration verifies the ledger, a worker using it records nothing"
		c.Fix = "give the workers' configuration the signing key (README \"Evidence ledger\")"
		return c
	}
	k, err := e.SigningKey()
	if err != nil {
		c.Status, c.Detail = Missing, err.Error()
		c.Fix = "give every worker the evidence signing key (`starter evidence keygen --out FILE` makes one) and list its public key in evidence.public_keys"
		return c
	}
	c.Status, c.Detail = OK, fmt.Sprintf("Ed25519 key %s signs; %d public key(s) verify", k.ID(), len(e.PublicKeys))
	return c
}

// manifestKeysCheck says whether the manifests the workers write are
// signed, and whether the keys can be read from here: the worker signs
// with them and status and the plan read manifests with them.
func manifestKeysCheck(cfg *config.Config) Check {
	c := Check{Kind: KindConfig, Name: "manifest_keys",
		For: "manifests count only when a worker signed them: retention, status, metrics, the plan, ownership"}
	keys, err := cfg.ManifestKeyRing()
	switch {
	case err != nil:
		c.Status, c.Detail = Missing, err.Error()
		c.Fix = "give every worker (and this command) the manifest keys: the variable or file each key_env / key_file names, " +
			fmt.Sprintf("each holding at least %d random bytes (openssl rand -base64 48)", catalog.MinKeyBytes)
	case keys == nil:
		c.Status = Warn
		c.Detail = "no manifest_keys: manifests and sequence files are neither signed nor authenticated, so anyone who can write a " +
			"backup share can plant one that makes a database look verified (silencing its RPO alert), moves the rotation, " +
			"shortens the timeouts or makes retention delete the real newest verified set"
		c.Fix = "add manifest_keys with one key (id, key_env or key_file) given to every worker; sets written before stay readable, " +
			"shown as unauthenticated (README \"Authenticated manifests\")"
	default:
		c.Status = OK
		c.Detail = fmt.Sprintf("HMAC-SHA256: key %s signs", keys.Current())
		if ids := keys.IDs(); len(ids) > 1 {
			c.Detail += fmt.Sprintf(", %s still verify", strings.Join(ids[1:], ", "))
		}
	}
	return c
}

// pageVerifyCheck warns of a database whose pages carry no checksum
// (PAGE_VERIFY TORN_PAGE_DETECTION or NONE, common after an upgrade from
// SQL Server 2000): BACKUP WITH CHECKSUM verifies only pages that carry
// one ("BACKUP (Transact-SQL)", CHECKSUM), so damage in the source reaches
// the sets unseen until CHECKDB of a restored copy.
func pageVerifyCheck(base Check, db *config.Database, pv string) Check {
	c := base
	c.Name, c.For = "page_verify", "source: BACKUP WITH CHECKSUM verifies every page"
	if strings.EqualFold(pv, "CHECKSUM") {
		c.Status, c.Detail = OK, "CHECKSUM"
		return c
	}
	c.Status = Warn
	c.Detail = "PAGE_VERIFY is " + pv + ": the pages carry no checksum, so BACKUP WITH CHECKSUM cannot verify them " +
		"and damage in the database reaches the sets unseen until CHECKDB of a restored copy"
	fix, _ := tsql.PageVerifyChecksum(db.Name)
	c.Fix = fix + "; -- pages get a checksum as they are next written"
	return c
}

// jobStep is one SQL Server Agent job step of an instance.
type jobStep struct {
	Job, Step, Command string
}

// maintenanceJobsCheck is the verification instance's check that its own
// maintenance and backup jobs (Ola Hallengren's USER_DATABASES,
// ALL_DATABASES) leave the restored copies alone: they are no production
// databases, and a full or log backup, an index rebuild or a CHECKDB of a
// multi-terabyte copy the product drops again is load and noise.
// patterns are the copies' names as LIKE patterns (verify_name).
// readable false: msdb's job tables could not be read, so the check says
// what to look at instead.
func maintenanceJobsCheck(inst, login string, patterns []string, steps []jobStep, readable bool) Check {
	c := Check{Kind: KindInstance, Instance: inst, Name: "maintenance jobs", For: "verification: the restored copies are left to backupcycle"}
	excl := make([]string, len(patterns))
	for i, p := range patterns {
		excl[i] = "-" + p
	}
	if !readable {
		c.Status = OK
		c.Detail = fmt.Sprintf("not checked: %s cannot read msdb.dbo.sysjobsteps; make sure maintenance plans and jobs on %s that run on "+
			"USER_DATABASES or ALL_DATABASES exclude the restored copies (%s)", login, inst, strings.Join(patterns, ", "))
		return c
	}
	var found []string
	for _, s := range steps {
		if all, _ := tsql.SelectsAllDatabases(s.Command, patterns); all {
			found = append(found, fmt.Sprintf("%s (step %s)", s.Job, s.Step))
		}
	}
	if len(found) == 0 {
		c.Status, c.Detail = OK, "no SQL Server Agent job step selects every user database without excluding the copies"
		return c
	}
	c.Status = Warn
	c.Detail = fmt.Sprintf("SQL Server Agent job steps run on every user database, the restored copies too: %s", strings.Join(found, "; "))
	c.Fix = fmt.Sprintf("exclude the copies: add %s to their @Databases (Ola Hallengren's syntax), or leave them out of the maintenance plan",
		strings.Join(excl, ", "))
	return c
}

// recoveryModelCheck: log_backup needs the FULL recovery model. SIMPLE has
// no log backups (BACKUP LOG fails with 4208); BULK_LOGGED takes them, but
// "if a log backup taken under the bulk-logged recovery model contains
// bulk-logged changes, point-in-time recovery is not allowed", and changes
// since the last log backup may have to be redone ("Recovery models (SQL
// Server)",
// https://learn.microsoft.com/sql/relational-databases/backup-restore/recovery-models-sql-server;
// "Restore under the bulk-logged recovery model").
func recoveryModelCheck(base Check, db *config.Database, sf serverFacts, f databaseFacts) Check {
	c := base
	c.Name, c.For = "recovery model", "log_backup: BACKUP LOG every "+db.LogBackup.Every.String()
	fix, _ := tsql.SimpleRecoveryFix(db.Name)
	switch f.RecoveryModel {
	case "FULL":
		c.Status, c.Detail = OK, "FULL"
	case "SIMPLE":
		c.Status = Missing
		c.Detail = db.Name + " is in the SIMPLE recovery model, which has no log backups (BACKUP LOG fails with 4208)"
		c.Fix = fix + "; then the next full backup starts the log chain (or remove log_backup from " + db.Name + ")"
	case "BULK_LOGGED":
		c.Status = Warn
		c.Detail = db.Name + " is in the BULK_LOGGED recovery model: a log backup that holds bulk-logged changes cannot be restored to a point inside it (STOPAT), only to its end"
		c.Fix = fix + " (switch to BULK_LOGGED only around bulk operations, as Microsoft Learn advises)"
	case "":
		c.Status = Warn
		c.Detail = "unknown: " + sf.Login + " could not read it"
		if f.RecoveryErr != nil {
			c.Detail += " (" + f.RecoveryErr.Error() + ")"
		}
		c.Detail += "; log backups need FULL"
		c.Fix = "check that " + db.Name + " is in the FULL recovery model (SELECT recovery_model_desc FROM sys.databases), or grant " + sf.Login + " VIEW ANY DATABASE"
	default:
		c.Status, c.Detail = Warn, "recovery model "+f.RecoveryModel+" is unknown to this build; log backups need FULL"
		c.Fix = fix
	}
	return c
}
