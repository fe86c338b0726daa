package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// AllocateSequence returns a new, never used, backup sequence number: the
// seed's DBBackup.Sequence table in the database (created if absent), or the
// UTC time of the call.
func (a *Activities) AllocateSequence(ctx context.Context, in SequenceInput) (int64, error) {
	d := &a.Cycle
	db, err := d.database(in.Instance, in.Database)
	if err != nil {
		return 0, err
	}
	if db.Sequence == config.SequenceUTC {
		n, err := utcSequence(d.now())
		return n, err
	}
	inst, err := d.instance(db.Instance)
	if err != nil {
		return 0, err
	}
	setup, err := tsql.SequenceSetup(db.Name)
	if err != nil {
		return 0, nonRetryable(ErrInvalidConfig, err)
	}
	next, err := tsql.SequenceNext(db.Name)
	if err != nil {
		return 0, nonRetryable(ErrInvalidConfig, err)
	}
	sqlDB, err := d.openSQL(ctx, inst, "master")
	if err != nil {
		return 0, err
	}
	defer sqlDB.Close()
	for _, stmt := range setup {
		if _, err := sqlDB.Run(ctx, "create the backup sequence table", stmt, nil); err != nil {
			return 0, sqlError(err)
		}
	}
	v, ok, err := sqlDB.QueryValue(ctx, "allocate a backup sequence number", next)
	if err != nil {
		return 0, sqlError(err)
	}
	n, isInt := v.(int64)
	if !ok || !isInt || n <= 0 {
		return 0, temporal.NewApplicationError(fmt.Sprintf("sequence table of %s returned %v, want a positive number", db.ID(), v), "SQLError")
	}
	a.loggerFor(ctx).Info("sequence allocated", zap.String("db", db.Name), zap.Int64("seq", n))
	return n, nil
}

// utcSequence is yyyymmddhhmmss of t in UTC.
func utcSequence(t time.Time) (int64, error) {
	var n int64
	_, err := fmt.Sscan(t.UTC().Format("20060102150405"), &n)
	return n, err
}
