package sqlsim

import "time"

// serverTime is t on the server's wall clock (Config.TimeZone). SQL Server
// reports datetime values without a zone in its local time: GETDATE, the
// msdb history (backupset.backup_start_date "Date and time the backup
// operation started", restorehistory.restore_date), sys.databases.create_date,
// sys.dm_exec_requests.start_time and RESTORE HEADERONLY's BackupStartDate
// and BackupFinishDate
// (https://learn.microsoft.com/en-us/sql/t-sql/statements/restore-statements-headeronly-transact-sql).
// A client in another zone must read them in the server's zone.
func (in *Instance) serverTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	loc := in.cfg.TimeZone
	if loc == nil {
		loc = time.UTC
	}
	return t.In(loc)
}
