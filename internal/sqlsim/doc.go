// Package sqlsim is the SQL Server emulator's engine: an Instance serves the
// T-SQL the product sends over real TDS (package tds) from databases that
// are real files. It is a test double with honest semantics for the tests
// and `worker --dev`; production talks to SQL Server 2016+.
//
// # Storage
//
// A database is a primary data file (.mdf, file_id 1), a log (.ldf,
// file_id 2) and secondary data files (.ndf, file_id 3..), all made of 8 KiB
// pages. Every page has a 96-byte header (page id, file id, type, owning
// object id, LSN) and a CRC-32C over the whole page. Data pages hold
// row-like text (about 2.8x with deflate); pages 1-8 of the primary file
// hold the metadata: schemas, generated tables (row count, column maxima,
// their page extents) and user tables created by CREATE TABLE (rows
// included). A restored copy therefore answers COUNT_BIG(*) like its
// source. The instance catalog (databases, msdb history) is catalog.json
// in Config.DataDir, so state survives Stop/Start and crashes.
//
// # Statements
//
// Keywords are case-insensitive; identifiers may be [bracketed] (]] escapes)
// or "quoted"; strings are '...' or N'...' (a doubled quote stands for one); sp_executesql
// parameters (@p1, @name) are variables, never pasted into text. Supported:
//
//	SELECT @@VERSION | @@SPID | @@SERVERNAME, SELECT SERVERPROPERTY('ProductVersion'|'Edition'|
//	    'MachineName'|'ServerName'|'EngineEdition'|...), select 1;
//	SELECT [TOP (n)] <expressions | * | t.*> [FROM <source> [alias] [CROSS APPLY sys.dm_exec_sql_text(x.sql_handle) [AS] t]
//	    {[INNER] JOIN | LEFT [OUTER] JOIN <source> [alias] ON <condition> | CROSS JOIN <source> [alias]} ...]
//	    [WHERE ...] [ORDER BY ...]   -- no RIGHT/FULL/comma joins, no GROUP BY; aggregates COUNT/COUNT_BIG/MAX/MIN/SUM
//	    sources: sys.databases, [db.]sys.database_files, sys.master_files, [db.]sys.schemas, [db.]sys.tables,
//	    sys.dm_exec_requests (session_id, request_id, start_time, status, command, sql_handle,
//	    database_id, percent_complete, estimated_completion_time, total_elapsed_time),
//	    msdb.dbo.restorehistory (restore_date: the start of the RESTORE), msdb.dbo.backupset (name and
//	    description: the BACKUP's NAME = and DESCRIPTION =; family_guid), and [db].[schema].[table] user tables;
//	    sys.databases.create_date is when the database was created: by CreateDatabase or by the RESTORE
//	    that (re)created it; state_desc RESTORING while a RESTORE runs into it or after one was cut short
//	    functions: DB_ID, DB_NAME, OBJECT_ID, SCHEMA_ID, SERVERPROPERTY, DATABASEPROPERTYEX (Status,
//	    UserAccess, Recovery), GETDATE, GETUTCDATE,
//	    SYSDATETIME, ISNULL, COALESCE, LEN, UPPER, LOWER, LTRIM, RTRIM, QUOTENAME, LEFT, RIGHT, CAST
//	    predicates: = <> < > <= >=, AND/OR/NOT, IS [NOT] NULL, [NOT] IN (list), [NOT] LIKE, [NOT] EXISTS (SELECT ...)
//	Generated tables (dbo.Orders, dbo.Customers, ...) answer only COUNT(*), COUNT_BIG(*), MAX(col) and
//	    MIN(col) without WHERE: SELECT COUNT_BIG(*) FROM [db].[dbo].[Orders], SELECT MAX([OrderDate]) FROM ...
//	IF <condition> <statement> [ELSE <statement>]; BEGIN ... END; DECLARE @v type [= x]; SET @v = x;
//	    SET NOCOUNT/XACT_ABORT/... ON|OFF (ignored); PRINT; USE [db]
//	WAITFOR DELAY 'hh:mm[:ss[.fff]]' | @v; WAITFOR TIME ...   (the batch waits; an attention or a dropped
//	    connection ends it and the rest of the batch does not run; sys.dm_exec_requests shows
//	    command and wait_type WAITFOR; a bad time string is 148)
//	KILL <session_id> | @v   (closes that session's connection, its running statement ends; 6104 own
//	    session, 6106 none)
//	EXEC [db].sys.sp_executesql N'...'   (runs the text in database db)
//	CREATE SCHEMA s; CREATE TABLE [db].[s].[t] (col int|bigint|nvarchar(n)|datetime2|bit [NOT] NULL, ...,
//	    CONSTRAINT pk PRIMARY KEY [CLUSTERED] (col [ASC]), CONSTRAINT ck CHECK (expr))
//	ALTER TABLE t WITH CHECK ADD CONSTRAINT ck CHECK (expr); ALTER TABLE t CHECK CONSTRAINT ck
//	INSERT [INTO] t [(cols)] VALUES (...), (...)
//	UPDATE [db].[s].[t] SET col = expr [, @v = col = expr] [OUTPUT inserted.col, deleted.col] [WHERE ...]
//	    (atomic: the read-modify-write holds the database's metadata lock, so
//	    `UPDATE [db].[DBBackup].[Sequence] SET Number = Number + 1 OUTPUT inserted.Number WHERE ID = 1`
//	    never hands out a number twice; the seed's `SET @n = Number = Number + 1` form works too)
//	BACKUP DATABASE [db] TO DISK = '...' [, DISK = ...] [WITH CHECKSUM, INIT, FORMAT, COMPRESSION,
//	    NO_COMPRESSION, COPY_ONLY, STATS [= n], BUFFERCOUNT = n, MAXTRANSFERSIZE = n, BLOCKSIZE = n,
//	    NAME = '...', DESCRIPTION = '...']; TO DISK = 'NUL' reads everything and writes nothing
//	RESTORE FILELISTONLY | HEADERONLY | VERIFYONLY FROM DISK = ... [WITH CHECKSUM, FILE = 1]
//	RESTORE DATABASE [x] FROM DISK = ... WITH MOVE 'logical' TO 'path', ..., CHECKSUM, REPLACE, RECOVERY, STATS [= n]
//	DBCC CHECKDB[([db])] [WITH NO_INFOMSGS, ALL_ERRORMSGS, EXTENDED_LOGICAL_CHECKS, DATA_PURITY, PHYSICAL_ONLY]
//	DROP DATABASE [IF EXISTS] [x]; ALTER DATABASE [x] SET SINGLE_USER|MULTI_USER [WITH ROLLBACK IMMEDIATE]
//
// Anything else fails like SQL Server would: 102 "Incorrect syntax near
// ...", 2812 for an unknown procedure name, 208/207 for unknown objects or
// columns, 195 for unknown functions, and 40515 "'<statement>' is not
// supported by the SQL Server emulator" for valid T-SQL outside this list.
//
// # Paths
//
// Config.Shares maps prefixes as SQL Server sees them (`\\bak01\backup`, or
// a drive such as `R:\restore`) to local directories, case-insensitively,
// with \ or /. Absolute local paths are used as they are; a bare file name
// goes to <DataDir>/backup. An unknown UNC host answers OS error 53, a
// missing directory OS error 3.
//
// # Backup media
//
// Each stripe file starts with a media header (media set, family i of n,
// backup set GUID, database, files, LSNs, options), then blocks of
// MAXTRANSFERSIZE bytes of pages, dealt to the stripes round-robin (block k
// to stripe k mod n), each with a 32-byte header (sequence, lengths, first
// page, CRC-32C of the payload, CRC of the header) and the payload raw or
// deflate-compressed (COMPRESSION); the trailer written last (block counts,
// sizes, finish time) marks the stripe complete. RESTORE checks every block
// CRC, and with CHECKSUM (or a backup taken WITH CHECKSUM) every page
// checksum and page id. A stripe without a trailer (crash, cancel, full
// share) is refused.
//
// # Errors (number, class) the product sees
//
//	18456 (14) login failed; 4060 (11) cannot open the login database
//	911 (16) + 3013 BACKUP of an unknown database; 3201 (16) + 3013 a device path that cannot be reached
//	    (OS error 53 unknown/unreachable share, 3 missing directory, 2 missing file on RESTORE)
//	3202 (16) + 3013 "Write on ... failed: 112(There is not enough space on the disk.)" (share quota)
//	701 (17) + 3013 BUFFERCOUNT x MAXTRANSFERSIZE above Config.MemoryBudget (seed 004)
//	3043 (16) + 3013 BACKUP WITH CHECKSUM met a page whose checksum is wrong
//	BACKUP without INIT/FORMAT onto an existing file: 40515 + 3013. SQL Server would append a second
//	    backup set to the media; the emulator keeps one set per media set and refuses instead of
//	    overwriting (the product always sends INIT, FORMAT).
//	3132 (16) + 3013 "The media set has N media families but only M are provided. All members must be provided."
//	3231 (16) + 3013 a stripe from another media set or more stripes than the set has;
//	    3227 + 3013 the same family given twice
//	3241 (16) + 3013 "The media family on device '...' is incorrectly formed." (no trailer: half-written;
//	    damaged media header or trailer)
//	3183 (16) + 3013 "RESTORE detected an error on page (F:P) in database "x" as read from the backup set."
//	    (any damaged block or page)
//	5133 + 3156 + 3119 + 3013 MOVE target directory missing; 1834 a target used by another database;
//	    5170 target file exists without REPLACE; 3234 MOVE of an unknown logical file;
//	    without REPLACE over an existing database: 3154 + 3013 when its family GUID differs from the
//	    backup's (another database, whatever the names), 3159 + 3013 (tail of the log) for an online one
//	    of the same family; 3101 + 3013 when another session uses the target
//	927 (14) the database is RESTORING (a RESTORE was cut short: only RESTORE ... REPLACE or DROP apply)
//	CHECKDB damage: 8928 + 8939 (16) per page naming object and page (F:P), then 8989 (16)
//	    "CHECKDB found 0 allocation errors and N consistency errors in database 'x'."; clean with
//	    NO_INFOMSGS: no message at all
//	3701 (11) DROP of an unknown database; 3702 (16) in use; 5011 + 5069 ALTER DATABASE of an unknown one;
//	    5052 + 5069 ALTER DATABASE of a RESTORING one (DROP DATABASE works on it)
//
// Messages: 3211 "N percent processed." at every STATS step, flushed while
// the statement runs; 4035 "Processed N pages for database 'x', file 'y' on
// file 1." per file; 3014 "BACKUP DATABASE|RESTORE DATABASE successfully
// processed N pages in X seconds (Y MB/sec)."; 3262 "The backup set on file
// 1 is valid."; 5701 on USE.
//
// sys.dm_exec_requests shows every running request, with command
// 'BACKUP DATABASE', 'RESTORE DATABASE', 'RESTORE VERIFYONLY' or
// 'DBCC TABLE CHECK' (as SQL Server), database_id (for RESTORE the target,
// which exists in state RESTORING from the start of the copy), a real
// percent_complete and estimated_completion_time, and sql_handle for
// CROSS APPLY sys.dm_exec_sql_text(r.sql_handle) t (t.text is the batch).
//
// # Faults
//
// Crash (and CrashAt(op, percent) for the next BACKUP/RESTORE/DBCC) drops
// every connection without a reply and refuses new ones; the operation
// stops where it is. Start (or Restart) brings the instance back from its
// files. DropConnectionAt(op, percent) drops only the connection running
// the next such operation (the server keeps running; the operation stops as
// SQL Server stops the request of a vanished client: stripes without a
// trailer, a RESTORING database); DropConnections cuts every open
// connection now; RefuseConnections(n) fails the next n connection
// attempts; Disarm removes armed CrashAt/DropConnectionAt faults.
// RestoreDatabase runs a RESTORE on the instance itself (e.g. rolling a
// source database back to an older backup). CorruptPage damages a database page, FlipByte any file (a stripe),
// SetThrottle paces every backup/restore stream (and CHECKDB's reads),
// SetShareThrottle all streams to one share (its NIC), SetShareUnreachable
// and SetShareQuota emulate a dead or full backup server. Statements lists
// every statement started (kind, database, times, outcome; "running" until
// it ends, then "ok", "error <n>", "cancelled", "dropped" or "crashed") for
// assertions.
package sqlsim
