package tsql

import (
	"fmt"
	"strings"
	"time"
)

// BackupLogOptions describe one BACKUP LOG of the product's chain. There is
// no COPY_ONLY: a copy-only log backup "has no effect on the log chain"
// and does not truncate the log ("Copy-only backups",
// https://learn.microsoft.com/sql/relational-databases/backup-restore/copy-only-backups-sql-server),
// so the product's own chain is never made of them.
type BackupLogOptions struct {
	Database string   // source database name (unquoted)
	Disks    []string // one DISK = per file, in order (LogStripe names)
	// Chain and Number name the backup (NAME = BackupLogName), so msdb and
	// RESTORE HEADERONLY tell it from other tools' log backups.
	Chain, Number int64
	// Compression: nil leaves the server default, true COMPRESSION, false
	// NO_COMPRESSION.
	Compression     *bool
	Stats           int // STATS = n; 0 omits
	BufferCount     int // BUFFERCOUNT; 0 omits
	MaxTransferSize int // MAXTRANSFERSIZE in bytes; 0 omits
	// NoRecovery makes it the tail-log backup before a restore over the
	// database: NORECOVERY "backs up the tail of the log and leaves the
	// database in the RESTORING state" (BACKUP (Transact-SQL); "Tail-Log
	// Backups (SQL Server)").
	NoRecovery bool
	// Encryption, when set, encrypts the log backup (ENCRYPTION (...)).
	Encryption *BackupEncryption
}

// BackupLog builds
//
//	BACKUP LOG [db] TO DISK = N'...', ... WITH CHECKSUM, FORMAT, INIT,
//	COMPRESSION, BUFFERCOUNT = n, MAXTRANSFERSIZE = n, NAME = N'backupcycle log ...', STATS = n
//
// CHECKSUM always ("BACKUP (Transact-SQL)": it verifies page checksums and
// writes a backup checksum that RESTORE ... WITH CHECKSUM checks). FORMAT
// and INIT: the files are new (names no run held before), and a file left
// by an attempt that failed is written over rather than appended to. The
// text starts with LogBackupMarker, by which a retried step finds it in
// sys.dm_exec_requests.
func BackupLog(o BackupLogOptions) (string, error) {
	db, err := QuoteIdent(o.Database)
	if err != nil {
		return "", fmt.Errorf("BACKUP LOG: %w", err)
	}
	if o.Chain < 1 || o.Chain > MaxChainID || o.Number < 1 || o.Number > MaxLogNumber {
		return "", fmt.Errorf("BACKUP LOG %s: %w: chain %d log %d: chains are 1..%d, logs 1..%d", db, ErrInvalidOption, o.Chain, o.Number, MaxChainID, MaxLogNumber)
	}
	disks, err := diskList(o.Disks)
	if err != nil {
		return "", fmt.Errorf("BACKUP LOG %s: %w", db, err)
	}
	if err := CheckTuning(o.BufferCount, o.MaxTransferSize, 0); err != nil {
		return "", fmt.Errorf("BACKUP LOG %s: %w", db, err)
	}
	if err := checkStats(o.Stats); err != nil {
		return "", fmt.Errorf("BACKUP LOG %s: %w", db, err)
	}
	with := []string{"CHECKSUM", "FORMAT", "INIT"}
	if o.Encryption != nil {
		c, err := o.Encryption.clause()
		if err != nil {
			return "", fmt.Errorf("BACKUP LOG %s: %w", db, err)
		}
		with = append(with, c)
	}
	if o.Compression != nil {
		if *o.Compression {
			with = append(with, "COMPRESSION")
		} else {
			with = append(with, "NO_COMPRESSION")
		}
	}
	if o.BufferCount > 0 {
		with = append(with, fmt.Sprintf("BUFFERCOUNT = %d", o.BufferCount))
	}
	if o.MaxTransferSize > 0 {
		with = append(with, fmt.Sprintf("MAXTRANSFERSIZE = %d", o.MaxTransferSize))
	}
	if o.NoRecovery {
		with = append(with, "NORECOVERY")
	}
	with = append(with, "NAME = "+QuoteString(BackupLogName(o.Chain, o.Number)))
	if o.Stats > 0 {
		with = append(with, fmt.Sprintf("STATS = %d", o.Stats))
	}
	return "BACKUP LOG " + db + " TO " + disks + " WITH " + strings.Join(with, ", "), nil
}

// CommandBackupLog and CommandRestoreLog are sys.dm_exec_requests.command
// of a running BACKUP LOG and RESTORE LOG.
const (
	CommandBackupLog  = "BACKUP LOG"
	CommandRestoreLog = "RESTORE LOG"
)

// LogBackupMarker is the start of the BACKUP LOG that writes to firstDisk:
// with the log backup's own file names it is unique to it.
func LogBackupMarker(db, firstDisk string) (string, error) {
	m, err := BackupMarker(db, firstDisk)
	if err != nil {
		return "", err
	}
	return "BACKUP LOG" + strings.TrimPrefix(m, "BACKUP DATABASE"), nil
}

// LogRecovery is how a RESTORE LOG (or the seeding RESTORE DATABASE) leaves
// the copy.
type LogRecovery int

const (
	// LogNoRecovery: RESTORING, ready for the next log.
	LogNoRecovery LogRecovery = iota
	// LogStandby: read-only between restores, its undo kept in the standby
	// file ("RESTORE Statements - Arguments", STANDBY: "the undo file is
	// automatically deleted by the next RESTORE operation"; deleting it by
	// hand means the database "must be re-restored").
	LogStandby
	// LogRecovery: recovered, online; no more logs can be applied.
	LogRecover
)

// RestoreLogOptions describe one RESTORE LOG.
type RestoreLogOptions struct {
	Database string   // the copy (unquoted)
	Disks    []string // every file of the log backup
	Recovery LogRecovery
	// StandbyFile is the undo file of LogStandby, as the verification
	// instance sees it.
	StandbyFile string
	// StopAt restores only what was logged before it (STOPAT), on the
	// wall clock of the server that wrote the log (see StopAtLiteral);
	// zero omits it. "In every RESTORE
	// LOG statement of the restore sequence, you must specify your target
	// time ... in an identical STOPAT ... clause" ("RESTORE Statements -
	// Arguments", https://learn.microsoft.com/sql/t-sql/statements/restore-statements-arguments-transact-sql).
	StopAt   time.Time
	Checksum bool // CHECKSUM: verify the backup checksum
	Stats    int
}

// RestoreLog builds
//
//	RESTORE LOG [db] FROM DISK = N'...', ... WITH CHECKSUM,
//	{NORECOVERY | STANDBY = N'...' | RECOVERY}, STOPAT = N'2025-03-01T02:03:04.567', STATS = n
func RestoreLog(o RestoreLogOptions) (string, error) {
	db, err := QuoteIdent(o.Database)
	if err != nil {
		return "", fmt.Errorf("RESTORE LOG: %w", err)
	}
	from, err := diskList(o.Disks)
	if err != nil {
		return "", fmt.Errorf("RESTORE LOG %s: %w", db, err)
	}
	if err := checkStats(o.Stats); err != nil {
		return "", fmt.Errorf("RESTORE LOG %s: %w", db, err)
	}
	var with []string
	if o.Checksum {
		with = append(with, "CHECKSUM")
	}
	rec, err := recoveryClause(o.Recovery, o.StandbyFile)
	if err != nil {
		return "", fmt.Errorf("RESTORE LOG %s: %w", db, err)
	}
	with = append(with, rec)
	if !o.StopAt.IsZero() {
		with = append(with, "STOPAT = "+StopAtLiteral(o.StopAt))
	}
	if o.Stats > 0 {
		with = append(with, fmt.Sprintf("STATS = %d", o.Stats))
	}
	return "RESTORE LOG " + db + " FROM " + from + " WITH " + strings.Join(with, ", "), nil
}

// recoveryClause is NORECOVERY, STANDBY = N'file' or RECOVERY.
func recoveryClause(r LogRecovery, standby string) (string, error) {
	switch r {
	case LogNoRecovery:
		if standby != "" {
			return "", fmt.Errorf("%w: a standby file is given without STANDBY", ErrInvalidOption)
		}
		return "NORECOVERY", nil
	case LogStandby:
		if strings.TrimSpace(standby) == "" {
			return "", fmt.Errorf("%w: STANDBY needs the undo file's path on the verification instance", ErrInvalidOption)
		}
		lit, err := Literal(standby)
		if err != nil {
			return "", fmt.Errorf("STANDBY file: %w", err)
		}
		return "STANDBY = " + lit, nil
	case LogRecover:
		if standby != "" {
			return "", fmt.Errorf("%w: a standby file is given with RECOVERY", ErrInvalidOption)
		}
		return "RECOVERY", nil
	}
	return "", fmt.Errorf("%w: unknown recovery %d", ErrInvalidOption, r)
}

// StopAtLiteral renders a STOPAT time as an ISO 8601 literal
// ('yyyy-mm-ddThh:mm:ss.mmm', which SQL Server reads the same under every
// language and DATEFORMAT setting: "Date and time styles", CAST and
// CONVERT (Transact-SQL), style 126), its wall-clock fields as given: pass
// the time on the clock of the server that wrote the log (the source's
// offset applied), which is what backupset dates and STOPAT are read on.
// datetime is precise to 3.33 ms; the literal keeps milliseconds.
func StopAtLiteral(t time.Time) string {
	return QuoteString(t.Format("2006-01-02T15:04:05.000"))
}

// RecoverDatabase builds RESTORE DATABASE [db] WITH RECOVERY: the end of a
// restore sequence left RESTORING ("If the FROM clause is omitted ...
// NORECOVERY, RECOVERY, or STANDBY must be specified", RESTORE Statements -
// Arguments).
func RecoverDatabase(db string) (string, error) {
	q, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("RESTORE DATABASE WITH RECOVERY: %w", err)
	}
	return "RESTORE DATABASE " + q + " WITH RECOVERY", nil
}

// RecoveryModel returns the query for what the log backups of db need to
// know of it: one row (recovery_model_desc nvarchar: FULL, BULK_LOGGED,
// SIMPLE; state_desc; last_log_backup_lsn numeric(25,0), NULL when "a
// transaction log back up cannot be performed because either the database
// is in SIMPLE recovery or there is no current database backup", else "the
// starting log sequence number of the next log backup"
// (sys.database_recovery_status,
// https://learn.microsoft.com/sql/relational-databases/system-catalog-views/sys-database-recovery-status-transact-sql;
// sys.databases,
// https://learn.microsoft.com/sql/relational-databases/system-catalog-views/sys-databases-transact-sql))
// or none when the database is not there. A database in SIMPLE is fixed by
// SimpleRecoveryFix.
func RecoveryModel(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("recovery model lookup: %w", err)
	}
	return "SELECT d.recovery_model_desc, d.state_desc, rs.last_log_backup_lsn FROM sys.databases AS d " +
		"LEFT JOIN sys.database_recovery_status AS rs ON rs.database_id = d.database_id WHERE d.name = @p1", []any{db}, nil
}

// SimpleRecoveryFix is the statement a DBA runs so that db can have log
// backups (the next full backup then starts the chain: "View or change the
// recovery model of a database",
// https://learn.microsoft.com/sql/relational-databases/backup-restore/view-or-change-the-recovery-model-of-a-database-sql-server).
// It is shown to people, never run by the product on their databases
// (`starter conformance` runs it on the scratch database it created).
func SimpleRecoveryFix(db string) (string, error) {
	q, err := QuoteIdent(db)
	if err != nil {
		return "", err
	}
	return "ALTER DATABASE " + q + " SET RECOVERY FULL", nil
}

// LogBackupsAfter returns the query for the log backups of db that msdb
// recorded ending after LSN after: one row per file (rows of one backup
// share backup_set_id), in order (backup_set_id int, backup_set_uuid
// uniqueidentifier, name nvarchar(128) — the BACKUP's NAME, which tells the
// product's own (ParseBackupLogName) from another tool's, description
// nvarchar(255), user_name nvarchar(128), server_name nvarchar(128),
// first_lsn, last_lsn, database_backup_lsn numeric(25,0), backup_start_date,
// backup_finish_date datetime (the server's local time), time_zone smallint
// (15-minute units, 127 unknown), is_copy_only bit, family_sequence_number
// tinyint, physical_device_name nvarchar(260), device_type tinyint (2 disk,
// 9 URL, 7 virtual device), first_recovery_fork_guid,
// last_recovery_fork_guid uniqueidentifier and fork_point_lsn
// numeric(25,0), NULL unless the two differ: the recovery path the backup
// is on; software_major_version, software_minor_version tinyint and
// software_build_version smallint: the build that wrote it) ("backupset
// (Transact-SQL)", "backupmediafamily (Transact-SQL)").
// Copy-only log backups are listed too (the caller skips them: they leave
// the chain alone); so are those of other recovery paths, which share LSNs
// with the chain's (logchain.Fork).
func LogBackupsAfter(db, after string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("log backup history lookup: %w", err)
	}
	if !lsnDigits(after) {
		return "", nil, fmt.Errorf("log backup history lookup: %w: %q is not an LSN (decimal digits, numeric(25,0))", ErrInvalidOption, after)
	}
	return "SELECT bs.backup_set_id, bs.backup_set_uuid, bs.name, bs.description, bs.user_name, bs.server_name, " +
		"bs.first_lsn, bs.last_lsn, bs.database_backup_lsn, bs.backup_start_date, bs.backup_finish_date, bs.time_zone, " +
		"bs.is_copy_only, bs.first_recovery_fork_guid, bs.last_recovery_fork_guid, bs.fork_point_lsn, " +
		"bs.software_major_version, bs.software_minor_version, bs.software_build_version, " +
		"mf.family_sequence_number, mf.physical_device_name, mf.device_type " +
		"FROM msdb.dbo.backupset AS bs JOIN msdb.dbo.backupmediafamily AS mf ON mf.media_set_id = bs.media_set_id " +
		"WHERE bs.database_name = @p1 AND bs.type = 'L' AND bs.last_lsn > CAST(@p2 AS numeric(25,0)) " +
		"ORDER BY bs.first_lsn, bs.backup_set_id, mf.family_sequence_number", []any{db, after}, nil
}

// BackupSetFork returns the query for the recovery path of the backup set
// msdb knows by backup_set_uuid: one row (first_recovery_fork_guid,
// last_recovery_fork_guid uniqueidentifier, fork_point_lsn numeric(25,0),
// NULL unless the two differ; "backupset (Transact-SQL)"), none when msdb
// has no row for it (its history deleted, or the set taken elsewhere).
func BackupSetFork(backupSetGUID string) (string, []any, error) {
	if !guidText(backupSetGUID) {
		return "", nil, fmt.Errorf("backup set lookup: %w: %q is not a uniqueidentifier", ErrInvalidOption, backupSetGUID)
	}
	return "SELECT bs.first_recovery_fork_guid, bs.last_recovery_fork_guid, bs.fork_point_lsn FROM msdb.dbo.backupset AS bs " +
		"WHERE bs.backup_set_uuid = @p1", []any{backupSetGUID}, nil
}

// BackupSetByGUID returns the query for what msdb knows of the backup set
// backup_set_uuid: rows (type char(1): D database, I differential, L log;
// is_copy_only bit, backup_finish_date datetime, time_zone smallint
// (15-minute units, 127 unknown), user_name nvarchar,
// physical_device_name nvarchar, one row per media family), none when msdb
// has no row for it ("backupset (Transact-SQL)", "backupmediafamily
// (Transact-SQL)"). It names the full backup a differential's header gives
// as its base (DifferentialBaseGUID) when that is none of the product's.
func BackupSetByGUID(backupSetGUID string) (string, []any, error) {
	if !guidText(backupSetGUID) {
		return "", nil, fmt.Errorf("backup set lookup: %w: %q is not a uniqueidentifier", ErrInvalidOption, backupSetGUID)
	}
	return "SELECT bs.type, bs.is_copy_only, bs.backup_finish_date, bs.time_zone, bs.user_name, mf.physical_device_name " +
		"FROM msdb.dbo.backupset AS bs JOIN msdb.dbo.backupmediafamily AS mf ON mf.media_set_id = bs.media_set_id " +
		"WHERE bs.backup_set_uuid = @p1 ORDER BY mf.family_sequence_number", []any{backupSetGUID}, nil
}

// guidText reports whether s is a uniqueidentifier's character form,
// 8-4-4-4-12 hexadecimal digits.
func guidText(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
			return false
		}
	}
	return true
}

func lsnDigits(s string) bool {
	if len(s) == 0 || len(s) > 25 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// RestoringState returns the query for where a copy that takes logs stands:
// one row (state_desc nvarchar — RESTORING for NORECOVERY; is_in_standby
// bit, "Database is read-only for restore log"; redo_start_lsn
// numeric(25,0) of the primary data file, the LSN "from which roll forward
// continues", NULL when "the file must be restored from a full backup";
// redo_start_fork_guid uniqueidentifier) or none when the copy is not
// there (sys.databases; sys.master_files,
// https://learn.microsoft.com/sql/relational-databases/system-catalog-views/sys-master-files-transact-sql:
// for a database that is offline or restoring "you must use
// sys.master_files"). The log to apply next is the one that contains
// redo_start_lsn (logchain.Chain.NextToApply).
func RestoringState(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("restoring state lookup: %w", err)
	}
	return "SELECT d.state_desc, d.is_in_standby, mf.redo_start_lsn, mf.redo_start_fork_guid FROM sys.databases AS d " +
		"JOIN sys.master_files AS mf ON mf.database_id = d.database_id AND mf.file_id = 1 WHERE d.name = @p1", []any{db}, nil
}
