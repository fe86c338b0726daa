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
//
// A datetime is a wall clock, not an instant: what SQL Server stored (a
// backup's media header, an msdb row, a database's create_date) keeps the
// wall clock of the moment it was written when the server's zone changes
// afterwards (DST, a VM moved to another region; backupset (Transact-SQL)
// records time_zone beside each row for that reason,
// https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/backupset-transact-sql).
// So the emulator stamps such values with serverTime when it writes them
// and returns them as stored (their own zone); only values of the moment
// (GETDATE, a running request's start_time) take the current zone.
func (in *Instance) serverTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	loc := in.cfg.TimeZone
	if loc == nil {
		loc = time.UTC
	}
	return t.Add(time.Duration(in.clockAhead.Load())).In(loc)
}

// StampCreateLate makes the next RESTORE DATABASE create its database d
// after the restore began, as a RESTORE does that first reads the headers
// of many stripes and zeroes a large log without instant file
// initialization: restorehistory.restore_date keeps the start, while
// sys.databases.create_date, GETDATE() and every later time of the instance
// are d later (its clock moves d ahead at that point and stays there).
// Whether SQL Server stamps create_date when a RESTORE begins or once the
// files exist is not documented (sys.databases: "Date the database was
// created or renamed"); this is the late end of what it may do.
func (in *Instance) StampCreateLate(d time.Duration) {
	in.mu.Lock()
	in.faults.createLate = d
	in.mu.Unlock()
}

// wallClock is t's date and time of day as a datetime holds them, without
// its zone (labelled UTC).
func wallClock(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// wallLayout writes a datetime without a zone: the wall clock of the server
// that wrote it, as SQL Server stores datetime values. The fraction is
// finer than datetime's 1/300 s, so that it rounds on the wire (tds) as
// GETDATE does.
const wallLayout = "2006-01-02T15:04:05.0000000"

// wallText is t on the server's wall clock as zone-less text (wallLayout).
func (in *Instance) wallText(t time.Time) string {
	return in.serverTime(t).Format(wallLayout)
}

// parseWallClock reads wall-clock text (wallLayout) as a time whose fields
// are that wall clock: a datetime carries no zone, so it is kept in UTC and
// goes out over TDS as it was written, whichever server reads it.
func parseWallClock(s string) (time.Time, bool) {
	t, err := time.ParseInLocation(wallLayout, s, time.UTC)
	return t, err == nil
}
