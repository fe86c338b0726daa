package tsql

import "fmt"

// PageBytes is the size of the 8-KB pages sys.master_files.size counts.
const PageBytes = 8192

// File types of sys.master_files.type
// (https://learn.microsoft.com/sql/relational-databases/system-catalog-views/sys-master-files-transact-sql).
const (
	FileTypeRows = 0
	FileTypeLog  = 1
)

// DatabaseFiles returns the query for the allocated size of each file of
// db: one row per file (type int: 0 rows, 1 log, 2 FILESTREAM, 4 full-text;
// pages bigint: 8-KB pages). sys.master_files shows a database's rows only
// to logins with CREATE DATABASE, ALTER ANY DATABASE or VIEW ANY DEFINITION
// (same page, "Permissions"): no row means "not visible", not "no files";
// then DatabaseFilesInDatabase, which any user of the database may read.
func DatabaseFiles(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("database size lookup: %w", err)
	}
	return "SELECT type, CAST(size AS bigint) AS pages FROM sys.master_files WHERE database_id = DB_ID(@p1)", []any{db}, nil
}

// DatabaseFilesInDatabase is DatabaseFiles through [db].sys.database_files,
// visible to every user of the database (membership in the public role,
// https://learn.microsoft.com/sql/relational-databases/system-catalog-views/sys-database-files-transact-sql).
func DatabaseFilesInDatabase(db string) (string, error) {
	from, err := QualifiedName(db, "sys", "database_files")
	if err != nil {
		return "", fmt.Errorf("database size lookup: %w", err)
	}
	return "SELECT type, CAST(size AS bigint) AS pages FROM " + from, nil
}

// SourceFacts returns the query for what a cycle's plan needs to know about
// the source instance and database db, in one row:
//
//   - engine_edition int: SERVERPROPERTY('EngineEdition'), 2 Standard (also
//     Web and Business Intelligence), 3 Enterprise (also Developer and
//     Evaluation), 4 Express
//     (https://learn.microsoft.com/sql/t-sql/functions/serverproperty-transact-sql);
//   - edition nvarchar: SERVERPROPERTY('Edition'), which tells Web from
//     Standard ("Web Edition (64-bit)");
//   - updateability nvarchar: DATABASEPROPERTYEX(db, 'Updateability'),
//     READ_ONLY for a read-only database and for the database of a
//     readable availability-group secondary, READ_WRITE otherwise, NULL when
//     the database is not there or not visible
//     (https://learn.microsoft.com/sql/t-sql/functions/databasepropertyex-transact-sql);
//   - utc_now and local_now datetime: GETUTCDATE() and GETDATE(), whose
//     difference is the server's offset from UTC. datetime columns,
//     RESTORE HEADERONLY's BackupStartDate/BackupFinishDate and msdb's
//     backup dates are in that local time (backupset (Transact-SQL): its
//     time_zone column is the "difference between local time (where the
//     backup operation is taking place) and UTC"). Both functions are valid
//     on every version the product supports; SYSDATETIMEOFFSET() would
//     give the offset directly;
//   - product_version nvarchar: the build (ProductVersionColumn).
func SourceFacts(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("source lookup: %w", err)
	}
	return "SELECT CAST(SERVERPROPERTY('EngineEdition') AS int) AS engine_edition, " +
		"CAST(SERVERPROPERTY('Edition') AS nvarchar(128)) AS edition, " +
		"CAST(DATABASEPROPERTYEX(@p1, 'Updateability') AS nvarchar(128)) AS updateability, " +
		"GETUTCDATE() AS utc_now, GETDATE() AS local_now, " + ProductVersionColumn, []any{db}, nil
}

// ServerClock is the query for a server's offset from UTC, in one row:
// utc_now and local_now datetime, GETUTCDATE() and GETDATE(). GETUTCDATE
// "is derived from the current local time and the time zone setting in the
// operating system" (GETUTCDATE (Transact-SQL)), so their difference,
// rounded to the minute, is the offset of the wall clock the server reports
// every datetime in (RESTORE HEADERONLY's dates, msdb's restore_date,
// sys.databases.create_date). Valid on every version the product supports;
// SourceFacts reads the same two columns.
const ServerClock = "SELECT GETUTCDATE() AS utc_now, GETDATE() AS local_now"

// AllDataFiles is the query for the allocated size of the data (ROWS)
// files of every database: database_id int, pages bigint (8-KB pages), one
// row per file. The fleet orders its cycles by it (largest first). Like
// DatabaseFiles it shows rows only to logins with CREATE DATABASE, ALTER ANY
// DATABASE or VIEW ANY DEFINITION; without them it returns no rows and the
// sizes are unknown.
const AllDataFiles = "SELECT database_id, CAST(size AS bigint) AS pages FROM sys.master_files WHERE type = 0"
