package activities

import (
	"context"
	"fmt"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// SQL Server reports every date (RESTORE HEADERONLY's, msdb's restore_date,
// create_date) as a datetime on its own wall clock, without a zone, which
// the driver decodes labelled UTC. A date the product compares across
// servers or ages against the worker's clock is made an instant with the
// reporting server's offset from UTC, read right after the date (see
// catalog.Header).

// utcOffsetMinutes is a server's offset from UTC (its local time minus
// UTC) from its GETUTCDATE() and GETDATE() read in one statement: whole
// minutes, as time zones are.
func utcOffsetMinutes(utcNow, localNow time.Time) int {
	return int(localNow.Sub(utcNow).Round(time.Minute) / time.Minute)
}

// serverOffset reads the server's offset from UTC now (tsql.ServerClock).
func serverOffset(ctx context.Context, sqlDB *mssql.DB) (int, error) {
	var utcNow, localNow time.Time
	if err := sqlDB.QueryRowContext(ctx, tsql.ServerClock).Scan(&utcNow, &localNow); err != nil {
		return 0, sqlError(mssql.Classify(sqlDB.Target, "read the server's offset from UTC", err))
	}
	off := utcOffsetMinutes(utcNow, localNow)
	if off < -catalog.MaxUTCOffsetMinutes || off > catalog.MaxUTCOffsetMinutes {
		return 0, nonRetryable(ErrInvalidConfig, fmt.Errorf(
			"%s reports GETDATE() %s and GETUTCDATE() %s, %d minutes apart: beyond any time zone; correct the server's time zone setting",
			sqlDB.Target, localNow.Format(time.DateTime), utcNow.Format(time.DateTime), off))
	}
	return off, nil
}

// backupOffset is the source's offset from UTC when backup set guid ran,
// which its dates (RESTORE HEADERONLY's, msdb's) are on: msdb records it
// beside them (backupset.time_zone, "the time zone information at the
// time the backup operation started", backupset (Transact-SQL),
// https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/backupset-transact-sql).
// The server's offset now is another once it restarted in another zone
// (a step that records a backup an earlier attempt took): the backup's
// instants would be off by the difference. Only when msdb does not tell
// (the set's history cleaned, msdb restored, no SELECT on
// msdb.dbo.backupset) is the offset now taken.
func backupOffset(ctx context.Context, sqlDB *mssql.DB, guid string) (int, error) {
	if q, args, err := tsql.BackupSetByGUID(guid); err == nil {
		if s, found, err := sqlDB.BackupSet(ctx, q, args...); err == nil && found {
			if off, ok := s.UTCOffsetMinutes(); ok {
				return off, nil
			}
		}
	}
	return serverOffset(ctx, sqlDB)
}
