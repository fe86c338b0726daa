package tsql

import "fmt"

// The queries of a restore to a new home (the Recover workflow): where the
// target instance puts a database's files by default, and which log and
// differential backups msdb says were restored into the database since
// its full.

// DefaultPaths is the query for the target instance's default data and log
// directories: one row (data_path, log_path nvarchar(512), NULL when
// unknown): SERVERPROPERTY('InstanceDefaultDataPath') and
// ('InstanceDefaultLogPath'), "Name of the default path to the instance
// data files" / "log files", SQL Server 2012 and later ("SERVERPROPERTY
// (Transact-SQL)",
// https://learn.microsoft.com/sql/t-sql/functions/serverproperty-transact-sql).
const DefaultPaths = "SELECT CAST(SERVERPROPERTY(N'InstanceDefaultDataPath') AS nvarchar(512)) AS data_path, " +
	"CAST(SERVERPROPERTY(N'InstanceDefaultLogPath') AS nvarchar(512)) AS log_path"

// Restore types of msdb.dbo.restorehistory.restore_type: "D = Database,
// F = File, G = Filegroup, I = Differential, L = Log, V = Verifyonly"
// ("restorehistory (Transact-SQL)",
// https://learn.microsoft.com/sql/relational-databases/system-tables/restorehistory-transact-sql).
const (
	RestoreTypeLog          = "L"
	RestoreTypeDifferential = "I"
)

// RestoredBackups returns the query for the backups of restore type typ
// (RestoreTypeLog, RestoreTypeDifferential) restored into db after
// restore-history row `after` (the full restore that started the
// sequence), oldest first: rows (restore_history_id int, backup_set_uuid
// uniqueidentifier, first_lsn, last_lsn numeric(25,0), stop_at datetime).
// A RESTORE LOG or RESTORE DATABASE of a differential writes a
// restorehistory row of its type and the backup set's row of
// msdb.dbo.backupset on the instance that restores ("restorehistory
// (Transact-SQL)"; "backupset (Transact-SQL)"); one cut short writes none.
func RestoredBackups(db string, after int64, typ string) (string, []any, error) {
	return restoredBackups(db, after, typ, "", false)
}

// RestoredBackup is RestoredBackups for the one backup set whose
// backup_set_uuid is guid: its restores of type typ into db after
// restore-history row `after`, the same columns. A step of a long restore
// sequence asks for its own backup alone, so that what it reads does not
// grow with the backups restored before it.
func RestoredBackup(db string, after int64, typ, guid string) (string, []any, error) {
	return restoredBackups(db, after, typ, guid, true)
}

func restoredBackups(db string, after int64, typ, guid string, one bool) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("restored backups lookup: %w", err)
	}
	if typ != RestoreTypeLog && typ != RestoreTypeDifferential {
		return "", nil, fmt.Errorf("restored backups lookup: %w: restore type %q (want %s or %s)", ErrInvalidOption, typ, RestoreTypeLog, RestoreTypeDifferential)
	}
	q := "SELECT rh.restore_history_id, bs.backup_set_uuid, bs.first_lsn, bs.last_lsn, rh.stop_at " +
		"FROM msdb.dbo.restorehistory AS rh JOIN msdb.dbo.backupset AS bs ON bs.backup_set_id = rh.backup_set_id " +
		"WHERE rh.destination_database_name = @p1 AND rh.restore_type = @p3 AND rh.restore_history_id > @p2 "
	args := []any{db, after, typ}
	if one {
		if guid == "" {
			return "", nil, fmt.Errorf("restored backups lookup: %w: no backup set GUID given", ErrInvalidOption)
		}
		q += "AND bs.backup_set_uuid = @p4 "
		args = append(args, guid)
	}
	return q + "ORDER BY rh.restore_history_id", args, nil
}
