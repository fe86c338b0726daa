package mssql

import (
	"context"
	"time"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// DefaultPaths reads the instance's default data and log directories
// (tsql.DefaultPaths); "" for one the instance does not report.
func (db *DB) DefaultPaths(ctx context.Context) (data, log string, err error) {
	err = db.scan(ctx, "read the default data and log paths", tsql.DefaultPaths, nil, func(r row) {
		data, log = r.str("data_path"), r.str("log_path")
	})
	return data, log, err
}

// RestoredLog is a log backup msdb says was restored into a database
// (tsql.RestoredLogs).
type RestoredLog struct {
	HistoryID         int64
	BackupSetGUID     string // upper case, as SQL Server prints it
	FirstLSN, LastLSN string // decimal digits
	// StopAt is the RESTORE LOG's STOPAT (server local time, labelled
	// UTC); zero without one.
	StopAt time.Time
}

// RestoredLogs runs a restored logs query and returns its rows in order.
func (db *DB) RestoredLogs(ctx context.Context, query string, args ...any) ([]RestoredLog, error) {
	var out []RestoredLog
	err := db.scan(ctx, "read msdb restore history", query, args, func(r row) {
		out = append(out, RestoredLog{HistoryID: r.int("restore_history_id"), BackupSetGUID: r.guid("backup_set_uuid"),
			FirstLSN: r.str("first_lsn"), LastLSN: r.str("last_lsn"), StopAt: r.time("stop_at")})
	})
	return out, err
}
