// Package sqlsim is the SQL Server emulator's engine: an Instance serves the
// T-SQL the product sends over real TDS (package tds) from databases that
// are real files. It is a test double with honest semantics for the tests
// and the dev stack (make demo); production talks to SQL Server 2016+.
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
//	SELECT @@VERSION | @@SPID | @@SERVERNAME | @@LANGUAGE | @@LANGID, SELECT SERVERPROPERTY('ProductVersion'|
//	    'ProductMajorVersion'|'Edition'|'MachineName'|'ServerName'|'EngineEdition'|'InstanceDefaultDataPath'|
//	    'InstanceDefaultLogPath'|...), select 1;
//	SELECT [TOP (n)] <expressions | * | t.*> [FROM <source> [alias] [CROSS APPLY sys.dm_exec_sql_text(x.sql_handle) [AS] t
//	    | CROSS APPLY sys.dm_os_volume_stats(f.database_id, f.file_id) [AS] v]
//	    {[INNER] JOIN | LEFT [OUTER] JOIN <source> [alias] ON <condition> | CROSS JOIN <source> [alias]} ...]
//	    [WHERE ...] [ORDER BY ...]   -- no RIGHT/FULL/comma joins, no GROUP BY; aggregates COUNT/COUNT_BIG/MAX/MIN/SUM
//	    sources: sys.databases, [db.]sys.database_files, sys.master_files, [db.]sys.schemas, [db.]sys.tables,
//	    sys.dm_exec_requests (session_id, request_id, start_time, status, command, sql_handle,
//	    database_id, percent_complete, estimated_completion_time, total_elapsed_time),
//	    sys.dm_exec_sessions (session_id, login_time, host_name, program_name, login_name, status,
//	    database_id, language, is_user_process, original_login_name; others' sessions with VIEW SERVER STATE),
//	    sys.dm_exec_connections (encrypt_option, auth_scheme SQL|NTLM, protocol_version, net_packet_size,
//	    client/local address and port; VIEW SERVER STATE, else 300 and 297),
//	    [master.]sys.certificates (name, certificate_id, thumbprint, subject, start_date, expiry_date,
//	    pvt_key_last_backup_date; rows only with VIEW ANY DEFINITION), [master.]sys.asymmetric_keys (name,
//	    thumbprint, pvt_key_encryption_type, provider_type, cryptographic_provider_guid; the same
//	    visibility), sys.dm_database_encryption_keys
//	    (database_id, encryption_state, encryptor_thumbprint, encryptor_type; VIEW SERVER STATE, on
//	    MajorVersion 16 VIEW SERVER SECURITY STATE, else 300 and 297), sys.databases.is_encrypted,
//	    sys.dm_os_host_info (host_platform Windows|Linux, 2017+), sys.configurations (the options of
//	    configOptions), sys.dm_server_accelerator_status (QAT, 2022+), sys.dm_os_volume_stats
//	    (volume_mount_point, NULL on Linux; total_bytes and available_bytes: a share's quota, else the file
//	    system), sys.dm_os_file_exists(path) (2017+); sys.databases.containment/containment_desc,
//	    sys.master_files.type 2 FILESTREAM and size = the allocated size (data + FreeSize),
//	    msdb.dbo.restorehistory (restore_date: the start of the RESTORE), msdb.dbo.backupset (name and
//	    description: the BACKUP's NAME = and DESCRIPTION =; family_guid; time_zone), and [db].[schema].[table] user tables;
//	    sys.databases.create_date is when the database was created: by CreateDatabase or by the RESTORE
//	    that (re)created it; state_desc RESTORING while a RESTORE runs into it or after one was cut short
//	    sys.databases.is_read_only; state_desc OFFLINE after ALTER DATABASE ... SET OFFLINE;
//	    sys.databases.owner_sid (the login whose RESTORE created the database, 0x01 for sa; database_id:
//	    the lowest free one, as dropped databases' ids are handed out again)
//	    availability groups (ag.go): sys.databases.replica_id and group_database_id, sys.availability_groups,
//	    sys.availability_replicas (rows with VIEW ANY DEFINITION), sys.dm_hadr_database_replica_states
//	    (VIEW SERVER STATE, else 300 and 297)
//	    functions: sys.fn_hadr_backup_is_preferred_replica, sys.fn_hadr_is_primary_replica,
//	    DB_ID, DB_NAME, OBJECT_ID, SCHEMA_ID, SERVERPROPERTY, DATABASEPROPERTYEX (Status,
//	    UserAccess, Recovery, Updateability, LastGoodCheckDbTime), HAS_PERMS_BY_NAME, IS_SRVROLEMEMBER, IS_MEMBER,
//	    SUSER_SNAME, SUSER_SID, ORIGINAL_LOGIN, GETDATE, GETUTCDATE,
//	    SYSDATETIME, ISNULL, COALESCE, LEN, UPPER, LOWER, LTRIM, RTRIM, QUOTENAME, LEFT, RIGHT, CAST
//	    predicates: = <> < > <= >=, AND/OR/NOT, IS [NOT] NULL, [NOT] IN (list), [NOT] LIKE, [NOT] EXISTS (SELECT ...)
//	Generated tables (dbo.Orders, dbo.Customers, ...) answer only COUNT(*), COUNT_BIG(*), MAX(col) and
//	    MIN(col) without WHERE: SELECT COUNT_BIG(*) FROM [db].[dbo].[Orders], SELECT MAX([OrderDate]) FROM ...
//	IF <condition> <statement> [ELSE <statement>]; BEGIN ... END; DECLARE @v type [= x]; SET @v = x
//	    (variables and sp_executesql parameters keep their declared type: SELECT @v returns it);
//	    SET NOCOUNT/XACT_ABORT/... ON|OFF (ignored); SET LANGUAGE us_english|Deutsch|Français; PRINT; USE [db]
//	WAITFOR DELAY 'hh:mm[:ss[.fff]]' | @v; WAITFOR TIME ...   (the batch waits; an attention or a dropped
//	    connection ends it and the rest of the batch does not run; sys.dm_exec_requests shows
//	    command and wait_type WAITFOR; a bad time string is 148)
//	KILL <session_id> | @v   (closes that session's connection, its running statement ends; 6104 own
//	    session, 6106 none)
//	RAISERROR (N'text %s %d', severity, state [, args]) [WITH LOG|NOWAIT|SETERROR]   (error 50000; up to 10 an
//	    informational message, 10 sent as 0; 11-18 end only the statement; above 18 sysadmin WITH LOG, else
//	    2754; a message number has no sys.messages text: 18054's wording, 2732 below 13000)
//	THROW number, N'text', state   (severity 16, ends the batch; 35100/35101 out of range; bare THROW is 10704)
//	EXEC [db].sys.sp_executesql N'...'   (runs the text in database db)
//	CREATE SCHEMA s; CREATE TABLE [db].[s].[t] (col int|bigint|nvarchar(n)|datetime2|bit [NOT] NULL, ...,
//	    CONSTRAINT pk PRIMARY KEY [CLUSTERED] (col [ASC]), CONSTRAINT ck CHECK (expr))
//	ALTER TABLE t WITH CHECK ADD CONSTRAINT ck CHECK (expr); ALTER TABLE t CHECK CONSTRAINT ck
//	INSERT [INTO] t [(cols)] VALUES (...), (...) | SELECT ...   (the SELECT reads the table as it was before)
//	CREATE DATABASE name   (empty, the size of model: 8 MB of data, 8 MB of log, a few MB of it used; owned by
//	    its creator; CREATE DATABASE in master, else 262; a name in use 1801; file specifications and options
//	    are not emulated)
//	CREATE VIEW [schema.]name [WITH SCHEMABINDING] AS SELECT ...   (first statement of its batch, else 111; no
//	    database prefix, 166; schema bound: two-part names, 4512, no *, 1054; kept, not evaluated: SELECT
//	    from a view is 208)
//	CREATE [UNIQUE] [CLUSTERED|NONCLUSTERED] INDEX ix ON [db].[schema].[view] (col, ...)   (views only: schema
//	    bound, 1939; the first unique clustered, 1940/1941; uniqueness not checked against the rows)
//	UPDATE [db].[s].[t] SET col = expr [, @v = col = expr] [OUTPUT inserted.col, deleted.col] [WHERE ...]
//	    (atomic: the read-modify-write holds the database's metadata lock, so
//	    `UPDATE [db].[DBBackup].[Sequence] SET Number = Number + 1 OUTPUT inserted.Number WHERE ID = 1`
//	    never hands out a number twice; the seed's `SET @n = Number = Number + 1` form works too)
//	BACKUP DATABASE [db] TO DISK = '...' [, DISK = ...] [WITH CHECKSUM, INIT, FORMAT, COMPRESSION,
//	    NO_COMPRESSION, COPY_ONLY, STATS [= n], BUFFERCOUNT = n, MAXTRANSFERSIZE = n, BLOCKSIZE = n,
//	    NAME = '...', DESCRIPTION = '...']; TO DISK = 'NUL' reads everything and writes nothing;
//	    not compressed unless WITH COMPRESSION, which Config.Edition Express and Web refuse (1844 + 3013)
//	RESTORE FILELISTONLY | HEADERONLY | VERIFYONLY FROM DISK = ... [WITH CHECKSUM, FILE = 1]
//	RESTORE DATABASE [x] FROM DISK = ... WITH MOVE 'logical' TO 'path', ..., CHECKSUM, REPLACE, RECOVERY | NORECOVERY
//	    | STANDBY = 'undo file', STOPAT = 'time', BUFFERCOUNT = n, MAXTRANSFERSIZE = n, STATS [= n]
//	    (NORECOVERY leaves the database RESTORING: only DROP,
//	    another RESTORE or RESTORE LOG apply; STANDBY leaves it ONLINE, read-only, is_in_standby 1)
//	BACKUP LOG [db] TO DISK = ... [, DISK = ...] [WITH the BACKUP DATABASE options]   (logchain.go: 4214 before
//	    the first conventional full backup or after SIMPLE -> FULL, 4208 under SIMPLE, 4212 for master; a
//	    COPY_ONLY log leaves the chain alone; msdb.dbo.backupset type L with first_lsn, last_lsn,
//	    checkpoint_lsn, database_backup_lsn, user_name, begins_log_chain; backupmediafamily;
//	    WITH NORECOVERY is a tail-log backup: 3101 + 3013 while another session is in the database, then
//	    the database is RESTORING, and later BACKUPs and uses of it fail with 927)
//	RESTORE LOG [x] FROM DISK = ... WITH RECOVERY | NORECOVERY | STANDBY = '...', STOPAT = 'time' |
//	    STOPATMARK = 'lsn:n', STATS   (restorelog.go: 4305 gap or a log after the one in which STOPAT was
//	    reached, 4326 applied already, 3117 recovered, 4335 STOPAT before the point reached, 4322 STOPAT
//	    past the log's end; restorehistory type L)
//	RESTORE DATABASE [x] WITH RECOVERY   (ends a restore sequence; 3153 on a recovered database)
//	ALTER DATABASE [x] SET RECOVERY FULL | BULK_LOGGED | SIMPLE   (sys.databases.recovery_model[_desc],
//	    sys.database_recovery_status.last_log_backup_lsn, sys.master_files.redo_start_lsn)
//	DBCC CHECKDB[([db])] [WITH NO_INFOMSGS, ALL_ERRORMSGS, EXTENDED_LOGICAL_CHECKS, DATA_PURITY, PHYSICAL_ONLY]
//	    (WITH options that exclude each other or repeat: 3031 for BACKUP/RESTORE, e.g. COMPRESSION with
//	    NO_COMPRESSION, CHECKSUM with NO_CHECKSUM; 2559 for DBCC, PHYSICAL_ONLY with DATA_PURITY)
//	DROP DATABASE [IF EXISTS] [x]; ALTER DATABASE [x] SET SINGLE_USER|MULTI_USER|READ_ONLY|READ_WRITE|
//	    OFFLINE|ONLINE [WITH ROLLBACK IMMEDIATE]   (READ_ONLY, READ_WRITE and OFFLINE need the database to
//	    themselves: another session in it is 5070 + 5069 unless WITH ROLLBACK; a READ_ONLY database refuses
//	    writes with 3906 and still backs up; the connections of the other sessions in the database are
//	    closed, as KILL closes them; a RESTORE gives the copy the user access its source had at BACKUP);
//	    SET TRUSTWORTHY ON|OFF (sysadmin, else 15247 + 5069; a RESTORE
//	    leaves it OFF), SET PAGE_VERIFY CHECKSUM|TORN_PAGE_DETECTION|NONE
//	RESTORE DATABASE ... WITH NEW_BROKER | ENABLE_BROKER | ERROR_BROKER_CONVERSATIONS   (sys.databases
//	    .service_broker_guid and is_broker_enabled: without one the copy keeps its source's GUID, delivery off)
//	CREATE USER [u] WITHOUT LOGIN [WITH DEFAULT_SCHEMA = [s]]; DROP USER [IF EXISTS] [u];
//	    ALTER ROLE [db_datareader|...] ADD|DROP MEMBER [u]; GRANT EXECUTE ON [OBJECT::][s].[f] TO [u]
//	    (db_owner; 15023, 15151, 15247); DATABASE_PRINCIPAL_ID('u')
//	EXECUTE AS USER = 'u'; REVERT   (IMPERSONATE: db_owner, else 15517; the context lasts across batches until
//	    REVERT or a connection reset, and is confined to the database: another database is 916 naming the
//	    user's SID S-1-9-3-..., server permissions none, unless the database is TRUSTWORTHY and its owner
//	    sysadmin); USER_NAME() and SUSER_SNAME() follow it
//	CREATE FUNCTION [s].[f]() RETURNS type [WITH EXECUTE AS OWNER|CALLER] AS BEGIN DECLARE/SET/IF/
//	    EXEC xp_cmdshell .../RETURN expr END, called as s.f(): EXECUTE on it (db_owner or a GRANT, else 229),
//	    its body reads its database's tables through the ownership chain; EXECUTE AS OWNER runs it as dbo,
//	    whose login is the one with the SID the database records for its owner (15517 when none: a copy
//	    restored where its owner's login does not exist with that SID; Login.SID)
//	EXEC [master..]xp_cmdshell 'cmd' [, NO_OUTPUT]   (sysadmin, else 229 on mssqlsystemresource; 15281 unless
//	    SetXPCmdShell; never runs anything, XPCmdShellRuns records it); ALTER AUTHORIZATION ON DATABASE::[x] TO [l]
//	sys.sql_logins (own row and sa's; all with ALTER ANY LOGIN; password_hash with CONTROL SERVER),
//	    msdb.dbo.sysjobs and sysjobsteps (AddAgentJob; SELECT in msdb)
//
// Anything else fails like SQL Server would: 102 "Incorrect syntax near
// ...", 2812 for an unknown procedure name, 208/207 for unknown objects or
// columns, 195 for unknown functions, and 40515 "'<statement>' is not
// supported by the SQL Server emulator" for valid T-SQL outside this list.
// An identifier longer than 128 characters is 103 "The identifier that
// starts with '...' is too long. Maximum length is 128." (a database or
// MOVE logical name given as a value: 103 + 3013); CreateDatabase refuses a
// name whose generated logical file names (<name>_log) would pass 128.
//
// Batches: a syntax error (102, 103, ...) runs nothing; an error of
// severity 16 or less ends only its statement and the batch goes on
// (`SELECT 1/0; SELECT 2` answers 8134, then 2; a failed BACKUP does not stop
// the statements after it); name-resolution (207, 208, 4104), conversion
// (245, 8114), other class-15 errors and 40515 abort the batch where they
// occur.
//
// # Paths
//
// Config.Shares maps prefixes as SQL Server sees them (`\\bak01\backup`, or
// a drive such as `R:\restore`) to local directories, case-insensitively,
// with \ or /. File names under a UNC or drive prefix match
// case-insensitively too, as on a Windows file server (a BACKUP to x.bak
// opens an existing X.bak); under a /path prefix (SQL Server on Linux)
// exactly. Absolute local paths are used as they are; a bare file name
// goes to <DataDir>/backup.
//
// # Collation
//
// Config.Collation is the server collation (default
// SQL_Latin1_General_CP1_CI_AS). Database names (USE, DB_ID, DB_NAME,
// BACKUP and RESTORE targets, DATABASEPROPERTYEX, three-part names) and
// string comparisons (=, IN, ORDER BY, MIN/MAX) follow it: case-insensitive
// for _CI_AS, case-sensitive for _CS_AS, code point order for _BIN/_BIN2;
// trailing spaces never count. Under a case-sensitive collation two
// databases may differ only in case. An unknown (or unreachable) UNC host answers OS
// error 53, a share the host of a mapped share does not have OS error 67,
// a missing directory OS error 3.
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
// # Versions and TDE
//
// Config.MajorVersion and ProductVersion (a known build) are what the media
// record as their writer (HEADERONLY SoftwareVersionMajor/Minor/Build,
// DatabaseVersion, CompatibilityLevel; the 2022 columns LastValidRestoreTime,
// TimeZone and CompressionAlgorithm only on 16). A backup of a newer major
// version is refused: 3241 + 3013 by HEADERONLY and FILELISTONLY, 3169 + 3013
// by RESTORE DATABASE. CreateCertificate, ExportCertificate (BACKUP
// CERTIFICATE ... WITH PRIVATE KEY), ImportCertificate (CREATE CERTIFICATE
// ... FROM FILE) and EnableTDE give master certificates and TDE databases:
// their backups carry the thumbprint (FILELISTONLY TDEThumbprint), and every
// RESTORE form on an instance without the certificate is 33111 (state 3) +
// 3013. A TDE database's default MAXTRANSFERSIZE is 64 KiB, at which
// COMPRESSION leaves its pages uncompressed (2016, 2017; 2019 raises it to
// 128 KiB); 2019 CU16 writes compressed TDE backups in the format of
// KB5014298, which RESTORE DATABASE on 2019 CU15 answers with 3013 and 9004
// (severity 21) while the session stays open, leaving the copy RESTORING.
//
// BACKUP ... WITH ENCRYPTION (ALGORITHM = AES_128 | AES_192 | AES_256 |
// TRIPLE_DES_3KEY, SERVER CERTIFICATE = name) really encrypts the set's
// blocks (backupenc.go) with a key sealed by the certificate's private key
// (Certificate.PrivateKey, which ExportCertificate carries to
// ImportCertificate): msdb.dbo.backupset and HEADERONLY give key_algorithm,
// encryptor_thumbprint and encryptor_type; HEADERONLY reads without the
// certificate, FILELISTONLY, VERIFYONLY and RESTORE answer 33111 + 3013. A
// certificate missing or not visible to the login (VIEW ANY DEFINITION) is
// 15151 + 3013, an expired one 3096 + 3013; one never exported warns 33091.
// SERVER ASYMMETRIC KEY = name encrypts the same way with an asymmetric key
// of an EKM provider (CreateAsymmetricKey; OpenAsymmetricKey opens the same
// provider key on another instance; master.sys.asymmetric_keys lists them):
// without it RESTORE answers 33111 state 4 "Cannot find server asymmetric
// key with thumbprint"; a key not of a provider is refused (40515 + 3013).
//
// # Errors (number, class) the product sees
//
//	18456 (14) login failed; a requested database that is missing, RESTORING, OFFLINE or has no user for
//	    the login: 4060 (11) + 18456; the same for the login's default database: 4064 (11) + 18456
//	262 (14) "<PERM> permission denied in database 'x'." (+ 3013 for BACKUP/RESTORE), 229 (14) "The
//	    SELECT|UPDATE|INSERT permission was denied on the object ...", 916 (14) no user in the database,
//	    3110 (14) + 3013 RESTORE over a database the login may not restore, 7983 (14) DBCC CHECKDB without
//	    db_owner, 6102 (14) KILL without ALTER ANY CONNECTION, 3701 DROP without permission (see Logins)
//	942 (14) the database is OFFLINE; 3906 (16) a write to a READ_ONLY database; 2154 unknown language
//	911 (16) + 3013 BACKUP of an unknown database; 3201 (16) + 3013 a device path that cannot be reached
//	    (OS error 53 unknown/unreachable host, 67 unknown share on a known host, 3 missing directory, 2 missing file on RESTORE,
//	    32 the file is held by a running BACKUP (a second BACKUP to it, or a RESTORE from it), 59/64 see
//	    SetShareNetworkError)
//	3202 (16) + 3013 "Write on ... failed: 112(There is not enough space on the disk.)" (share quota),
//	    "... 64(The specified network name is no longer available.)" (share lost mid-write), "... 59(An
//	    unexpected network error occurred.)"
//	3203 (16) + 3013 "Read on ... failed: 38(Reached the end of the file.)" a stripe cut short (its bytes end
//	    inside a block, the media header or the trailer), "... 64(...)" share lost mid-read; 3254 an empty file
//	3250 (16) + 3013 an option value out of range (MAXTRANSFERSIZE, BLOCKSIZE, BUFFERCOUNT, STATS)
//	701 (17) + 3013 BUFFERCOUNT x MAXTRANSFERSIZE above Config.MemoryBudget (seed 004)
//	3043 (16) + 3013 BACKUP WITH CHECKSUM met a page whose checksum is wrong; 3203 (16) + 3013 "Read on
//	    "<data file>" failed: 23(...)" (or 1117) when SetDataFileReadError makes a data file unreadable
//	BACKUP without INIT/FORMAT onto an existing file: 40515 + 3013. SQL Server would append a second
//	    backup set to the media; the emulator keeps one set per media set and refuses instead of
//	    overwriting (the product always sends INIT, FORMAT).
//	3132 (16) + 3013 "The media set has N media families but only M are provided. All members must be provided."
//	3231 (16) + 3013 a stripe from another media set or more stripes than the set has;
//	    3227 + 3013 the same family given twice
//	3241 (16) + 3013 "The media family on device '...' is incorrectly formed." (whole blocks but no trailer:
//	    a BACKUP that stopped; damaged media header or trailer; a QAT_DEFLATE set where the Intel QAT
//	    accelerator is not loaded)
//	What the verification instance cannot host (RESTORE DATABASE): 5591 (16) + 3013 a FILESTREAM container
//	    with "filestream access level" 0 or on Linux; 12824 (16) + 3013 a contained database with "contained
//	    database authentication" 0; 1827 (16) + 3013 more than 10 GB of data files on Express; 3257 (16) +
//	    3119 + 3013 more than the free space of a volume (a share's quota, SetShareQuota), checked before
//	    anything is written; 3634 (16) + 3013 "... '112(There is not enough space on the disk.)' ..." when
//	    the space went to someone else meanwhile; 5133 + 3156 + 3119 + 3013 a directory that does not exist
//	    (operating system error 3; on Linux 2, as for every missing path there, and a UNC path is read as
//	    the local path //host/share/...)
//	3183 (16) + 3013 "RESTORE detected an error on page (F:P) in database "x" as read from the backup set."
//	    (any damaged block or page)
//	5133 + 3156 + 3119 + 3013 MOVE target directory missing; 1834 a target used by another database;
//	    5170 target file exists without REPLACE; 3234 MOVE of an unknown logical file;
//	    without REPLACE over an existing database: 3154 + 3013 when its family GUID differs from the
//	    backup's (another database, whatever the names), 3159 + 3013 (tail of the log) for an online one
//	    of the same family; 3101 + 3013 when another session uses the target (a request in it, or
//	    another RESTORE still restoring it)
//	927 (14) the database is RESTORING (a RESTORE was cut short: only RESTORE ... REPLACE or DROP apply)
//	CHECKDB damage: 8928 + 8939 (16) per page naming object and page (F:P), then 8989 (16)
//	    "CHECKDB found 0 allocation errors and N consistency errors in database 'x'."; clean with
//	    NO_INFOMSGS: no message at all. CheckDBError: a system table pre-check (7984-7988, 16) ends it at
//	    once with that error alone; 2537 (16) is counted in the 8989; 211 (23) ends it, its session kept
//	3059 (16) + 3013 a full backup without COPY_ONLY on an availability group's secondary; 976 (14) a query,
//	    USE or login into a secondary database that allows no connections, and (+ 3013) a BACKUP of a secondary
//	    that does not synchronize (ag.go)
//	3701 (11) DROP of an unknown database; 3702 (16) in use; 5011 + 5069 ALTER DATABASE of an unknown one;
//	    5052 + 5069 ALTER DATABASE of a RESTORING one (DROP DATABASE works on it)
//
// Messages: 3211 "N percent processed." at every STATS step, flushed while
// the statement runs; 4035 "Processed N pages for database 'x', file 'y' on
// file 1." per file; 3014 "BACKUP DATABASE|RESTORE DATABASE successfully
// processed N pages in X seconds (Y MB/sec)."; 3262 "The backup set on file
// 1 is valid."; 5701 on USE. Every message but 3211 waits in the output
// buffer until its statement ends. A RESTORE DATABASE is silent before its
// first percent (it zeroes its files: all of them, or only the log with
// SetInstantFileInit) and between 100 percent and 3014 (recovery reads the
// log), each phase in proportion to its bytes at the SetThrottle rate.
//
// Dates (HEADERONLY BackupStartDate/BackupFinishDate, msdb backupset and
// restorehistory, sys.databases.create_date, dm_exec_requests.start_time)
// are datetime on the wall clock of Config.TimeZone, as SQL Server reports
// server-local time without a zone. Stored ones keep the wall clock they
// were written with: an instance restarted with another TimeZone (DST, a
// VM moved) reports its older backups and history as they were recorded.
// DATABASEPROPERTYEX 'LastGoodCheckDbTime' is the wall clock of the server
// whose clean CHECKDB set it: BACKUP writes it into the media and RESTORE
// gives it to the copy, so a copy restored in another zone reports its
// source's value until a CHECKDB of it ends clean.
//
// sys.dm_exec_requests shows every running request to a login with VIEW
// SERVER STATE (on MajorVersion 16 VIEW SERVER PERFORMANCE STATE is
// enough), to any other login only its own session's, with command
// 'BACKUP DATABASE', 'RESTORE DATABASE', 'RESTORE VERIFYONLY' or, for a
// DBCC CHECKDB, the phase it is in: 'DBCC ALLOC CHECK', 'DBCC SYS CHECK',
// 'DBCC TABLE CHECK' (its page scan, with percent_complete), 'DBCC SSB
// CHECK', 'DBCC CHECKCATALOG', 'DBCC IVIEW CHECK' (as SQL Server;
// HoldCheckDB holds it in one), database_id (the session's database
// for a RESTORE, not its target; the target exists in state RESTORING from
// the start of the copy), a real
// percent_complete (0 while a RESTORE initialises its files, 100 during its
// recovery) and estimated_completion_time, and sql_handle for
// CROSS APPLY sys.dm_exec_sql_text(r.sql_handle) t (t.text is the batch).
// One data backup of a database runs at a time: a second BACKUP DATABASE
// of it (to other files) waits, wait_type LCK_M_U, until the first ends
// (files the first holds are 3201 with OS error 32 at once).
//
// # Logins, permissions, languages, versions and TLS
//
// Config.Logins are sysadmin; Config.Principals (and SetLogin at run time)
// have exactly the permissions they list (see Login), checked where SQL
// Server checks them: BACKUP needs BACKUP DATABASE in the database
// (db_backupoperator); RESTORE HEADERONLY/FILELISTONLY/VERIFYONLY and a
// RESTORE creating a database need CREATE ANY DATABASE (dbcreator), the
// restorer owns what it created; a RESTORE over an existing database needs
// sysadmin, dbcreator or ownership (db_owner does not count); DBCC CHECKDB
// needs db_owner or ownership; DROP DATABASE ALTER ANY DATABASE, db_owner
// or ownership; KILL ALTER ANY CONNECTION (processadmin); USE and user
// tables need a user in the database (master, tempdb, msdb admit all) and
// SELECT/INSERT/UPDATE (an UPDATE that reads the table, as the sequence
// increment does, needs SELECT too); msdb's backupset and restorehistory
// need SELECT in msdb; ALTER DATABASE needs ALTER (db_owner, ALTER ANY
// DATABASE); sys.master_files shows rows only to CREATE ANY DATABASE, ALTER
// ANY DATABASE or VIEW ANY DEFINITION, [db].sys.database_files to every
// user of db. A session's language is its login's DefaultLanguage (or the
// one LOGIN7 asks for) until SET LANGUAGE; messages 3211, 3014, 4035, 3013,
// 3201, 3202, 3203, 18456, 4060, 4064, 5701 and 5703 are sent in it
// (Deutsch, Français; numbers unchanged; a connection reset returns to the
// login's language). Config.Edition and MajorVersion set SERVERPROPERTY,
// @@VERSION and the PRELOGIN version. Config.TLS "on" requires encryption
// (TDS 7.x: ENCRYPT_ON/REQ, TLS 1.2 inside PRELOGIN, a client with
// encrypt=disable is refused), "strict" requires TDS 8.0 (TLS first, ALPN
// tds/8.0); the certificate is generated by New (ECDSA, SAN 127.0.0.1, ::1,
// localhost, the server name), see CertificatePEM and DSN. A Login with
// Windows (DOMAIN\user) logs in only through integrated authentication:
// the instance runs NTLM itself (tds/ntlm.go), accepting an NTLMv2 response
// to its challenge made with the password the Login holds, as the domain
// controller would; a wrong password or an unknown account is 18452, and
// NTLMv1 answers are refused.
//
// # Faults
//
// Crash (and CrashAt(op, percent) for the next BACKUP/RESTORE/DBCC) drops
// every connection without a reply and refuses new ones; the operation
// stops where it is. Start (or Restart) brings the instance back from its
// files. DropConnectionAt(op, percent) closes only the connection running
// the next such operation (the server keeps running, LostConnections counts
// it); DropConnections closes every open connection now. Both are a network
// failure, which stops nothing on the server by itself: the statement
// follows the rule of a vanished client below. RefuseConnections(n) fails
// the next n connection attempts; Disarm removes armed
// CrashAt/DropConnectionAt faults.
// FatalErrorAt(op, percent, number, class) fails the next operation with an
// error of severity 20-25 and closes its connection after sending it, as
// SQL Server ends the session (the client keeps what it received before);
// DisarmFatalError removes it.
//
// A client that goes away without an attention (its TCP connection closed
// or lost: a killed worker process; DisconnectClient(spid) does it from the
// server side) does not stop its statement: it runs on, visible in
// sys.dm_exec_requests, until it next writes to the client. With STATS that
// is its next 3211, where it stops and is rolled back (stripes without a
// trailer, a RESTORING database; Outcome "dropped"); without, it completes (msdb history written, Outcome "ok")
// and only the reply is lost. An attention (the client cancelling), KILL,
// Crash and Stop end it at once.
// RestoreDatabase runs a RESTORE on the instance itself (e.g. rolling a
// source database back to an older backup). CorruptPage damages a database page, FlipByte any file (a stripe),
// SetThrottle paces every backup/restore stream (and CHECKDB's reads),
// SetShareThrottle all streams to one share (its NIC), SetShareUnreachable
// (also in the middle of a transfer), SetShareNetworkError (59 or 64) and
// SetShareQuota emulate a dead, flaky or full backup server; SetTempdbFull
// makes DBCC CHECKDB stop before checking (1105 + 8921, tempdb out of
// space), CheckDBError makes the next one raise 7984-7988, 2537 or 211,
// HoldCheckDB holds CHECKDBs in a phase, StampCreateLate makes the next
// RESTORE create its database minutes after its restore_date; SetDataFileReadError makes a data
// file unreadable (3203 with OS error 23 or 1117 on BACKUP); FailQueries
// answers batches containing a text with an error of a state the emulator
// does not model (6263, CLR off). Statements lists
// every statement started (kind, database, times, outcome; "running" until
// it ends, then "ok", "error <n>", "cancelled", "dropped" or "crashed") for
// assertions.
package sqlsim
