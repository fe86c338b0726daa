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

// wallLayout writes a datetime without a zone: the wall clock of the server
// that wrote it, as SQL Server stores datetime values. The fraction is
// finer than datetime's 1/300 s, so that it rounds on the wire (tds) as
// GETDATE does.
const wallLayout = "2006-01-02T15:04:05.0000000"

// wallClock is t on the server's wall clock as zone-less text (wallLayout).
func (in *Instance) wallClock(t time.Time) string {
	return in.serverTime(t).Format(wallLayout)
}

// parseWallClock reads wall-clock text (wallLayout) as a time whose fields
// are that wall clock: a datetime carries no zone, so it is kept in UTC and
// goes out over TDS as it was written, whichever server reads it.
func parseWallClock(s string) (time.Time, bool) {
	t, err := time.ParseInLocation(wallLayout, s, time.UTC)
	return t, err == nil
}
