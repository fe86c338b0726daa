package mssql

import (
	"context"
	"strings"
	"time"
)

// RecoveryStatus is what tsql.RecoveryModel reads of a database.
type RecoveryStatus struct {
	Found bool   // the database is on the instance
	Model string // recovery_model_desc: FULL, BULK_LOGGED, SIMPLE
	State string // state_desc
	// LastLogBackupLSN is where the next log backup starts; "" (NULL)
	// when no log backup can be taken: SIMPLE, or no full backup yet.
	LastLogBackupLSN string
}

// RecoveryStatus runs a tsql.RecoveryModel query.
func (db *DB) RecoveryStatus(ctx context.Context, query string, args ...any) (RecoveryStatus, error) {
	var out RecoveryStatus
	err := db.scan(ctx, "recovery model", query, args, func(r row) {
		out = RecoveryStatus{Found: true, Model: r.str("recovery_model_desc"), State: r.str("state_desc"),
			LastLogBackupLSN: r.str("last_log_backup_lsn")}
	})
	return out, err
}

// LogBackupRow is one file of a log backup msdb recorded
// (tsql.LogBackupsAfter).
type LogBackupRow struct {
	SetID       int64
	GUID        string
	Name        string
	Description string
	User        string
	Server      string
	FirstLSN    string
	LastLSN     string
	Start       time.Time // the server's wall clock, labelled UTC
	Finish      time.Time
	TimeZone    int64 // 15-minute units; 127 unknown
	CopyOnly    bool
	Fork        RecoveryFork
	Family      int64
	Path        string
	DeviceType  int64
	// SoftwareVersion is the build that wrote it, major.minor.build
	// (software_major_version, software_minor_version,
	// software_build_version); "" when msdb holds NULL.
	SoftwareVersion string
}

// UTCOffsetMinutes is the offset from UTC the backup's dates are on:
// time_zone, "in 15-minute intervals using the time zone information at
// the time the backup operation started" (backupset (Transact-SQL),
// https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/backupset-transact-sql);
// false when msdb does not know it (127) or holds a value outside -48..48.
func (r LogBackupRow) UTCOffsetMinutes() (int, bool) {
	if r.TimeZone < -48 || r.TimeZone > 48 {
		return 0, false
	}
	return int(r.TimeZone) * 15, true
}

// LogBackupHistory runs a tsql.LogBackupsAfter query.
func (db *DB) LogBackupHistory(ctx context.Context, query string, args ...any) ([]LogBackupRow, error) {
	var out []LogBackupRow
	err := db.scan(ctx, "log backup history", query, args, func(r row) {
		out = append(out, LogBackupRow{SetID: r.int("backup_set_id"), GUID: r.guid("backup_set_uuid"), Name: r.str("name"),
			Description: r.str("description"), User: r.str("user_name"), Server: r.str("server_name"),
			FirstLSN: r.str("first_lsn"), LastLSN: r.str("last_lsn"), Start: r.time("backup_start_date"),
			Finish: r.time("backup_finish_date"), TimeZone: timeZone(r), CopyOnly: r.bool("is_copy_only"), Fork: recoveryFork(r),
			Family: r.int("family_sequence_number"), Path: r.str("physical_device_name"), DeviceType: r.int("device_type"),
			SoftwareVersion: buildOf(r, "software_major_version", "software_minor_version", "software_build_version")})
	})
	return out, err
}

// RecoveryFork is the recovery path a backup set is on: msdb's
// first_recovery_fork_guid, last_recovery_fork_guid and fork_point_lsn
// ("" for NULL), as RESTORE HEADERONLY's FirstRecoveryForkID,
// RecoveryForkID and ForkPointLSN.
type RecoveryFork struct {
	First, Last, Point string
}

func recoveryFork(r row) RecoveryFork {
	return RecoveryFork{First: r.guid("first_recovery_fork_guid"), Last: r.guid("last_recovery_fork_guid"), Point: r.str("fork_point_lsn")}
}

// BackupSetFork runs a tsql.BackupSetFork query: found is false when msdb
// has no row for the set.
func (db *DB) BackupSetFork(ctx context.Context, query string, args ...any) (f RecoveryFork, found bool, err error) {
	err = db.scan(ctx, "backup set recovery fork", query, args, func(r row) {
		f, found = recoveryFork(r), true
	})
	return f, found, err
}

// BackupSetInfo is what msdb knows of one backup set (tsql.BackupSetByGUID).
type BackupSetInfo struct {
	Type     string // D database, I differential, L log
	CopyOnly bool
	// Finish is backup_finish_date: the source's wall clock, labelled UTC.
	Finish time.Time
	// TimeZone is backupset.time_zone: the offset from UTC of that clock
	// when the backup ran, in 15-minute units (127 unknown).
	TimeZone int64
	User     string
	Devices  []string // physical_device_name of each media family
}

// UTCOffsetMinutes is the set's time_zone in minutes, false when unknown.
func (s BackupSetInfo) UTCOffsetMinutes() (int, bool) {
	return LogBackupRow{TimeZone: s.TimeZone}.UTCOffsetMinutes()
}

// BackupSet runs a tsql.BackupSetByGUID query: found is false when msdb has
// no row for the set.
func (db *DB) BackupSet(ctx context.Context, query string, args ...any) (s BackupSetInfo, found bool, err error) {
	err = db.scan(ctx, "read msdb.dbo.backupset", query, args, func(r row) {
		if !found {
			s = BackupSetInfo{Type: strings.TrimSpace(r.str("type")), CopyOnly: r.bool("is_copy_only"), Finish: r.time("backup_finish_date"),
				TimeZone: timeZone(r), User: r.str("user_name")}
			found = true
		}
		if d := r.str("physical_device_name"); d != "" {
			s.Devices = append(s.Devices, d)
		}
	})
	return s, found, err
}

// timeZone is backupset.time_zone, 127 (unknown) when NULL: a NULL is no
// offset of zero ("backupset (Transact-SQL)": 127 = unknown).
func timeZone(r row) int64 {
	if r.get("time_zone") == nil {
		return 127
	}
	return r.int("time_zone")
}
