package tsql

import (
	"fmt"
	"strings"
)

// CheckDBOption is one WITH option of DBCC CHECKDB.
type CheckDBOption string

// DBCC CHECKDB options (DBCC CHECKDB (Transact-SQL)).
const (
	NoInfoMsgs            CheckDBOption = "NO_INFOMSGS"
	AllErrorMsgs          CheckDBOption = "ALL_ERRORMSGS"
	ExtendedLogicalChecks CheckDBOption = "EXTENDED_LOGICAL_CHECKS"
	DataPurity            CheckDBOption = "DATA_PURITY"
	PhysicalOnly          CheckDBOption = "PHYSICAL_ONLY"
	TabLock               CheckDBOption = "TABLOCK"
)

// VerifyCheckDBOptions are the options of the verification step: the seed's
// NO_INFOMSGS, EXTENDED_LOGICAL_CHECKS, DATA_PURITY plus ALL_ERRORMSGS so a
// failure reports every corrupt page, not the first 200 messages.
func VerifyCheckDBOptions() []CheckDBOption {
	return []CheckDBOption{NoInfoMsgs, AllErrorMsgs, ExtendedLogicalChecks, DataPurity}
}

// VerifyCheckDB builds the verification step's DBCC CHECKDB of the copy db
// of set seq: CheckDB with VerifyCheckDBOptions, then a comment naming the
// set (BackupSetName). sys.dm_exec_sql_text returns the batch with it, so
// the step tells its own CHECKDB from any other of the copy (a DBA's, an
// earlier set's).
func VerifyCheckDB(db string, seq int64) (string, error) {
	stmt, err := CheckDB(db)
	if err != nil {
		return "", err
	}
	return stmt + " /* " + BackupSetName(seq) + " */", nil
}

// CheckDB builds DBCC CHECKDB([db]) WITH <options> (seed 000, "Running DBCC
// CHECKDB"). With no options it uses VerifyCheckDBOptions.
func CheckDB(db string, opts ...CheckDBOption) (string, error) {
	q, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("DBCC CHECKDB: %w", err)
	}
	if len(opts) == 0 {
		opts = VerifyCheckDBOptions()
	}
	seen := map[CheckDBOption]bool{}
	parts := make([]string, 0, len(opts))
	for _, o := range opts {
		switch o {
		case NoInfoMsgs, AllErrorMsgs, ExtendedLogicalChecks, DataPurity, PhysicalOnly, TabLock:
		default:
			return "", fmt.Errorf("DBCC CHECKDB %s: %w: unknown option %q", q, ErrInvalidOption, o)
		}
		if !seen[o] {
			seen[o] = true
			parts = append(parts, string(o))
		}
	}
	if seen[PhysicalOnly] && (seen[DataPurity] || seen[ExtendedLogicalChecks]) {
		return "", fmt.Errorf("DBCC CHECKDB %s: %w: PHYSICAL_ONLY cannot be combined with DATA_PURITY or EXTENDED_LOGICAL_CHECKS; drop one of them", q, ErrInvalidOption)
	}
	return "DBCC CHECKDB(" + q + ") WITH " + strings.Join(parts, ", "), nil
}

// DropDatabase builds one idempotent batch that drops db if it exists,
// first forcing other sessions out of an ONLINE one (SET SINGLE_USER WITH
// ROLLBACK IMMEDIATE) so a forgotten connection cannot keep the
// verification copy alive. A RESTORING database (a RESTORE cut short) has
// no sessions and cannot be altered, only dropped: the ALTER is not sent
// to it ("ALTER DATABASE is not permitted while a database is in the
// Restoring state"; DATABASEPROPERTYEX 'Status',
// https://learn.microsoft.com/en-us/sql/t-sql/functions/databasepropertyex-transact-sql).
// Safe to run again after a retry: a database that is already gone is not
// an error.
func DropDatabase(db string) (string, error) {
	q, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("DROP DATABASE: %w", err)
	}
	return "IF DB_ID(" + QuoteString(db) + ") IS NOT NULL\nBEGIN\n" +
		"    IF DATABASEPROPERTYEX(" + QuoteString(db) + ", 'Status') = N'ONLINE'\n" +
		"        ALTER DATABASE " + q + " SET SINGLE_USER WITH ROLLBACK IMMEDIATE;\n" +
		"    DROP DATABASE " + q + ";\nEND", nil
}

// SetSingleUser builds ALTER DATABASE [db] SET SINGLE_USER WITH ROLLBACK
// IMMEDIATE: the other sessions in db are rolled back and their
// connections closed ("If other users are connected to the database at the
// time that you set the database to single-user mode, their connections to
// the database will be closed without warning", "Set a database to
// single-user mode",
// https://learn.microsoft.com/en-us/sql/relational-databases/databases/set-a-database-to-single-user-mode),
// so that a RESTORE ... REPLACE gets the exclusive access it needs (3101
// otherwise).
func SetSingleUser(db string) (string, error) {
	q, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("ALTER DATABASE SET SINGLE_USER: %w", err)
	}
	return "ALTER DATABASE " + q + " SET SINGLE_USER WITH ROLLBACK IMMEDIATE", nil
}

// SetMultiUser builds ALTER DATABASE [db] SET MULTI_USER: every user with
// the right to connect may ("ALTER DATABASE SET Options", <db_user_access_option>,
// https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-database-transact-sql-set-options).
func SetMultiUser(db string) (string, error) {
	q, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("ALTER DATABASE SET MULTI_USER: %w", err)
	}
	return "ALTER DATABASE " + q + " SET MULTI_USER", nil
}

// SessionsIn returns the query for the other sessions whose database is db:
// rows (session_id smallint, login_name, host_name, program_name nvarchar)
// of sys.dm_exec_sessions. A login sees the other sessions only with VIEW
// SERVER STATE
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-exec-sessions-transact-sql#permissions).
func SessionsIn(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("session lookup: %w", err)
	}
	return "SELECT session_id, login_name, host_name, program_name FROM sys.dm_exec_sessions " +
		"WHERE database_id = DB_ID(@p1) AND session_id <> @@SPID ORDER BY session_id", []any{db}, nil
}

// DatabaseExists returns the query for a database's id: one row
// (database_id int) if it exists, no row otherwise.
func DatabaseExists(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("database lookup: %w", err)
	}
	return "SELECT database_id FROM sys.databases WHERE name = @p1", []any{db}, nil
}

// Command values of sys.dm_exec_requests for the long operations of a cycle,
// as LIKE patterns. A DBCC CHECKDB reports the phase it is in ("the
// command column reports the current phase", "Progress Reporting for DBCC
// Commands" in "DBCC (Transact-SQL)",
// https://learn.microsoft.com/sql/t-sql/database-console-commands/dbcc-transact-sql):
// DBCC ALLOC CHECK, SYS CHECK, TABLE CHECK, SSB CHECK, CHECKCATALOG, IVIEW
// CHECK; CommandCheckDB covers them all, and its text tells which DBCC it is.
const (
	CommandBackupDatabase  = "BACKUP DATABASE"
	CommandRestoreDatabase = "RESTORE DATABASE"
	CommandCheckDB         = "DBCC %"
)

// InFlightRequests returns the query that finds long operations still running
// for a database. Columns: session_id int, command nvarchar,
// percent_complete real, database_id int, estimated_completion_time bigint
// (ms), start_time datetime. commands (LIKE patterns) default to BACKUP
// DATABASE, RESTORE DATABASE and every DBCC.
//
// database_id is the database the request works on as SQL Server reports it:
// the database being backed up for BACKUP; for a RESTORE the target only has
// an id once SQL Server has created it. With db == "" the query is not
// filtered by database (every request running one of the commands), for
// callers that match on the command and their own start time instead.
func InFlightRequests(db string, commands ...string) (string, []any, error) {
	if len(commands) == 0 {
		commands = []string{CommandBackupDatabase, CommandRestoreDatabase, CommandCheckDB}
	}
	var args []any
	where := ""
	if db != "" {
		if err := CheckIdent(db); err != nil {
			return "", nil, fmt.Errorf("in-flight request lookup: %w", err)
		}
		args = append(args, db)
		where = "database_id = DB_ID(@p1) AND "
	}
	ph := make([]string, len(commands))
	for i, c := range commands {
		if c == "" {
			return "", nil, fmt.Errorf("in-flight request lookup: empty command name")
		}
		args = append(args, c)
		ph[i] = fmt.Sprintf("@p%d", len(args))
	}
	return "SELECT session_id, command, percent_complete, database_id, estimated_completion_time, start_time " +
		"FROM sys.dm_exec_requests WHERE " + where + "(" + commandsLike("command", ph) + ") " +
		"ORDER BY start_time", args, nil
}

// LastRestore returns the query for the newest full-database restore into
// db: one row (restore_history_id int, restore_date datetime,
// destination_database_name nvarchar, restore_type char(1)) or none. Compare
// restore_history_id before and after a RESTORE to confirm it happened
// (seed 000, "Automate the Process").
func LastRestore(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("restore history lookup: %w", err)
	}
	return "SELECT TOP (1) restore_history_id, restore_date, destination_database_name, restore_type " +
		"FROM msdb.dbo.restorehistory WHERE destination_database_name = @p1 AND restore_type = 'D' " +
		"ORDER BY restore_history_id DESC", []any{db}, nil
}

// The backup sequence table of seed 000 ("Handing Database Server Failure
// During Backup"): [db].[DBBackup].[Sequence] with one row (ID = 1).
const (
	SequenceSchema = "DBBackup"
	SequenceTable  = "Sequence"
)

// SequenceSetup returns the statements that create the sequence table if it
// is absent, in order; each is idempotent and names the database explicitly
// (no USE), so they can run on any connection of the instance and be retried.
// The row starts at Number = 0, so the first allocated sequence is 1 (the
// seed inserts 1 and increments before use, starting at 2).
func SequenceSetup(db string) ([]string, error) {
	qdb, err := QuoteIdent(db)
	if err != nil {
		return nil, fmt.Errorf("sequence table setup: %w", err)
	}
	table := qdb + ".[" + SequenceSchema + "].[" + SequenceTable + "]"
	return []string{
		"IF NOT EXISTS (SELECT 1 FROM " + qdb + ".sys.schemas WHERE name = N'" + SequenceSchema + "') " +
			"EXEC " + qdb + ".sys.sp_executesql N'CREATE SCHEMA [" + SequenceSchema + "]'",
		"IF OBJECT_ID(" + QuoteString(table) + ", N'U') IS NULL " +
			"CREATE TABLE " + table + " (Number int NOT NULL, ID int NOT NULL, " +
			"CONSTRAINT PK_Seq PRIMARY KEY CLUSTERED (ID ASC), CONSTRAINT CK_Seq CHECK (ID = 1))",
		"IF NOT EXISTS (SELECT 1 FROM " + table + " WHERE ID = 1) " +
			"INSERT INTO " + table + " (Number, ID) VALUES (0, 1)",
	}, nil
}

// SequenceNext returns the atomic increment that allocates the next backup
// sequence number: one row, one int column (Number). A single UPDATE with
// OUTPUT cannot hand the same number to two callers.
func SequenceNext(db string) (string, error) {
	qdb, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("sequence allocation: %w", err)
	}
	return "UPDATE " + qdb + ".[" + SequenceSchema + "].[" + SequenceTable + "] " +
		"SET Number = Number + 1 OUTPUT inserted.Number WHERE ID = 1", nil
}

// SequenceRaise returns the statement that moves the sequence table up to
// @p1 when it is below it, returning the new number (one row) or no row
// when the table is already at or past @p1. AllocateSequence uses it after
// the database was restored from an older backup: the numbers between are
// used by sets on the backup servers and must never be handed out again.
func SequenceRaise(db string) (string, error) {
	qdb, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("sequence raise: %w", err)
	}
	return "UPDATE " + qdb + ".[" + SequenceSchema + "].[" + SequenceTable + "] " +
		"SET Number = @p1 OUTPUT inserted.Number WHERE ID = 1 AND Number < @p1", nil
}

// RestoreProof returns the query for the newest full-database restore into
// db together with the backup set it came from: one row
// (restore_history_id int, restore_date datetime, backup_set_uuid
// uniqueidentifier, name nvarchar — the BACKUP's NAME =) or none. The backup
// set GUID proves which backup the database was restored from: a copy
// restored from another set (another cycle's, another run's) never passes for
// this one's (invariant I2 of the README's guarantees). msdb.dbo.restorehistory and
// msdb.dbo.backupset are documented system tables
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/restorehistory-transact-sql,
// .../backupset-transact-sql); RESTORE writes the backupset row of a set
// taken on another instance from the media header, NAME included.
func RestoreProof(db string) (string, []any, error) {
	return restoreProofOfType(db, "D")
}

// DifferentialRestoreProof is RestoreProof for the newest differential
// restored into db (restore_type 'I', "restorehistory (Transact-SQL)"):
// the copy a differential set is proven on holds its base's restore
// ('D') and this one after it.
func DifferentialRestoreProof(db string) (string, []any, error) {
	return restoreProofOfType(db, "I")
}

func restoreProofOfType(db, typ string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("restore proof lookup: %w", err)
	}
	return "SELECT TOP (1) rh.restore_history_id, rh.restore_date, bs.backup_set_uuid, bs.name " +
		"FROM msdb.dbo.restorehistory AS rh JOIN msdb.dbo.backupset AS bs ON bs.backup_set_id = rh.backup_set_id " +
		"WHERE rh.destination_database_name = @p1 AND rh.restore_type = '" + typ + "' " +
		"ORDER BY rh.restore_history_id DESC", []any{db}, nil
}

// DatabaseState returns the query for a database's state: one row (name
// sysname, state_desc nvarchar — ONLINE, RESTORING, ..., create_date
// datetime) or none. A RESTORE creates the database anew, so create_date of
// a restored database is when that RESTORE created it (sys.databases:
// "Date the database was created or renamed").
func DatabaseState(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("database state lookup: %w", err)
	}
	return "SELECT name, state_desc, create_date FROM sys.databases WHERE name = @p1", []any{db}, nil
}

// CopyState returns the query for what a verification instance says about
// a copy db before anything destructive is done to it: one row (name,
// database_id int, state_desc, create_date datetime, owner_sid
// varbinary(85), user_access_desc, login_sid varbinary(85) = SUSER_SID(),
// server_now datetime = GETDATE()) or none. owner_sid is "SID
// (Security-Identifier) of the external owner of the database" (sys.databases,
// https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-databases-transact-sql):
// the login whose RESTORE created it; SUSER_SID() is this session's login
// (https://learn.microsoft.com/en-us/sql/t-sql/functions/suser-sid-transact-sql).
func CopyState(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("database state lookup: %w", err)
	}
	return "SELECT name, database_id, state_desc, create_date, owner_sid, user_access_desc, SUSER_SID() AS login_sid, " +
		"GETDATE() AS server_now FROM sys.databases WHERE name = @p1", []any{db}, nil
}

// AllDatabaseIDs is the query for the id of every database with the
// instance's GETDATE(): rows (database_id int, server_now datetime).
const AllDatabaseIDs = "SELECT database_id, GETDATE() AS server_now FROM sys.databases"

// NewestRestore is the query for the id of msdb's newest restore-history
// row: one row (newest int, NULL when msdb has none). restore_history_id is
// an identity column ("Unique identification number that identifies each
// restore operation. Identity, primary key.", restorehistory
// (Transact-SQL),
// https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/restorehistory-transact-sql),
// and an identity column generates each new value from the current one and
// its increment and never reuses one ("IDENTITY (Property)",
// https://learn.microsoft.com/en-us/sql/t-sql/statements/create-table-transact-sql-identity-property):
// every restore msdb records later has a higher id, whatever the server's
// wall clock did meanwhile. restore_date cannot tell that: it is a
// datetime on the server's local clock of then, never re-expressed when
// the time zone changes or daylight saving time ends.
const NewestRestore = "SELECT MAX(restore_history_id) AS newest FROM msdb.dbo.restorehistory"
