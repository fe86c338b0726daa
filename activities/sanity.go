package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
)

// SanityChecks runs the database's configured queries against the restored
// copy and compares the first value of each with its expectation. The copy
// is proven to be this set's restore before the queries run and after
// (RestoreMismatch otherwise), and the activity heartbeats all along: a
// query on a cold multi-terabyte copy runs for minutes, longer than the
// heartbeat timeout.
func (a *Activities) SanityChecks(ctx context.Context, in VerifyInput) (StepOutput, error) {
	db, srv, inst, verifyDB, err := a.verifyTarget(in)
	if err != nil {
		return StepOutput{}, err
	}
	start := time.Now()
	if len(db.SanityChecks) == 0 {
		return StepOutput{VerifyDatabase: verifyDB}, nil
	}
	m, want, err := a.setToProve(ctx, srv, db, in.Sequence)
	if err != nil {
		return StepOutput{}, err
	}
	sqlDB, err := a.Cycle.openSQL(ctx, inst, verifyDB)
	if err != nil {
		return StepOutput{}, err
	}
	defer sqlDB.Close()
	rep := a.newReporter(ctx, StepSanity, in.Sequence)
	stop := rep.every(a.Cycle.poll(), nil, nil)
	defer stop()
	before, err := proveRestored(ctx, sqlDB, inst.Name, db, in.Sequence, verifyDB, want, m)
	if err != nil {
		return StepOutput{}, err
	}
	// proven checks that the queries ran on this set's copy: a failed check
	// is evidence about the content only then, and so is a passed one.
	proven := func() error {
		_, err := stillRestored(ctx, sqlDB, inst.Name, db, in.Sequence, verifyDB, want, m, before, "the sanity checks")
		return err
	}
	for i, c := range db.SanityChecks {
		v, found, err := sqlDB.QueryValue(ctx, "sanity check "+c.Name, c.Query)
		if err != nil {
			var f *mssql.Failure
			if errors.As(err, &f) && f.Kind == mssql.ErrStatement {
				if perr := proven(); perr != nil {
					return StepOutput{}, perr
				}
				return StepOutput{}, nonRetryable(ErrSanityCheckFailed, fmt.Errorf("sanity check %q on %s: query %q failed: %w", c.Name, verifyDB, c.Query, err))
			}
			return StepOutput{}, sqlError(err)
		}
		if msg := sanityMismatchAt(c, v, found, m, in.SourceUTCOffsetMinutes, time.Now()); msg != "" {
			if perr := proven(); perr != nil {
				return StepOutput{}, perr
			}
			return StepOutput{}, nonRetryable(ErrSanityCheckFailed, fmt.Errorf("sanity check %q on %s (seq %d): query %q %s",
				c.Name, verifyDB, in.Sequence, c.Query, msg))
		}
		rep.setPercent(float64(100 * (i + 1) / len(db.SanityChecks)))
	}
	if err := proven(); err != nil {
		return StepOutput{}, err
	}
	return StepOutput{VerifyDatabase: verifyDB, Duration: time.Since(start), Checks: len(db.SanityChecks)}, nil
}

// sanityMismatch returns why a sanity value fails its expectation, or "",
// with the source server's time zone unknown.
func sanityMismatch(c config.SanityCheck, v any, found bool, m *catalog.Manifest) string {
	return sanityMismatchAt(c, v, found, m, nil, time.Now())
}

// sanityMismatchAt is sanityMismatch for a source server offsetMinutes
// ahead of UTC (nil: unknown), now being the worker's clock.
func sanityMismatchAt(c config.SanityCheck, v any, found bool, m *catalog.Manifest, offsetMinutes *int, now time.Time) string {
	if !found {
		return "returned no row"
	}
	switch c.Expect {
	case config.ExpectEquals:
		if got := sanityText(v); got != c.Equals {
			return fmt.Sprintf("returned %q, want %q", got, c.Equals)
		}
	case config.ExpectAtLeast:
		n, ok := v.(int64)
		if f, isF := v.(float64); isF {
			n, ok = int64(f), true
		}
		if !ok || n < c.AtLeast {
			return fmt.Sprintf("returned %v, want at least %d", v, c.AtLeast)
		}
	case config.ExpectMaxAge:
		t, ok := v.(time.Time)
		if !ok {
			return fmt.Sprintf("returned %v (%T), want a date/time no older than %s", v, v, c.MaxAge)
		}
		// max_age is measured from the backup's finish, which RESTORE
		// HEADERONLY gives in the source server's local time (the manifest
		// records its instant); without it (an old manifest) from now.
		// The value is the source's local time too: the plan's offset (read
		// before the backup) converts it, else the manifest's.
		ref := now
		var h *catalog.Header
		if m != nil {
			h = m.Header
		}
		if h != nil && !h.BackupFinish.IsZero() {
			if offsetMinutes == nil {
				offsetMinutes = h.UTCOffsetMinutes
			}
			ref = serverInstant(h.BackupFinish, offsetMinutes)
			if !h.BackupFinishUTC.IsZero() {
				ref = h.BackupFinishUTC
			}
		}
		if age := ref.Sub(serverInstant(t, offsetMinutes)); age > c.MaxAge {
			return fmt.Sprintf("returned %s, %s older than the backup, want at most %s", t.Format(time.RFC3339), age.Round(time.Second), c.MaxAge)
		}
	default:
		return fmt.Sprintf("has no expectation (%q)", c.Expect)
	}
	return ""
}

// serverInstant reads a date/time value of the source server: datetime,
// datetime2 and smalldatetime carry no zone and hold the server's local
// wall clock (what GETDATE() returns; backupset (Transact-SQL) records
// backup dates in local time, its time_zone column being the difference to
// UTC), which go-mssqldb decodes as if it were UTC; offsetMinutes makes it
// an instant. A datetimeoffset value (decoded with its own zone) is an
// instant already. With the offset unknown the wall clock is taken as is:
// values and backup dates of one server still compare correctly.
func serverInstant(t time.Time, offsetMinutes *int) time.Time {
	if offsetMinutes == nil || t.Location() != time.UTC {
		return t
	}
	return t.Add(-time.Duration(*offsetMinutes) * time.Minute)
}

func sanityText(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case bool:
		if x {
			return "1"
		}
		return "0"
	case time.Time:
		return x.Format(time.RFC3339)
	}
	return fmt.Sprint(v)
}
