package activities

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/metrics"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// CheckDB runs DBCC CHECKDB ... WITH NO_INFOMSGS, ALL_ERRORMSGS,
// EXTENDED_LOGICAL_CHECKS, DATA_PURITY on the restored copy. Any error is a
// corrupt backup (CheckDBFailed, with every message). A lost instance or a
// vanished copy is SQLHostUnreachable: the workflow restores again.
//
// Before and after the CHECKDB the copy is proven to be the one restored
// from this set (msdb: same restore, this set's backup set GUID), so a
// CHECKDB that ran on another cycle's restore never counts (RestoreMismatch);
// on success the proof goes into the manifest (catalog.Proof).
func (a *Activities) CheckDB(ctx context.Context, in VerifyInput) (StepOutput, error) {
	db, srv, inst, verifyDB, err := a.verifyTarget(in)
	if err != nil {
		return StepOutput{}, err
	}
	stmt, err := tsql.CheckDB(verifyDB)
	if err != nil {
		return StepOutput{}, nonRetryable(ErrInvalidConfig, err)
	}
	m, want, err := a.setToProve(ctx, srv, db, in.Sequence)
	if err != nil {
		return StepOutput{}, err
	}
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		return StepOutput{}, err
	}
	defer sqlDB.Close()
	rep := a.newReporter(ctx, StepCheckDB, in.Sequence)
	var started atomic.Bool // this attempt sent its CHECKDB (heartbeats say so)
	stop := rep.every(a.Cycle.poll(), nil, func(p float64, b int64) any {
		return CheckDBHeartbeat{StepProgress: StepProgress{Step: StepCheckDB, Sequence: in.Sequence, Percent: p, Bytes: b},
			Started: started.Load() || checkDBStarted(ctx)}
	})
	defer stop()
	start := time.Now()
	before, err := proveRestored(ctx, sqlDB, inst.Name, db, in.Sequence, verifyDB, want, createWindow(m))
	if err != nil {
		return StepOutput{}, err
	}
	marker, err := tsql.CheckDBMarker(verifyDB)
	if err != nil {
		return StepOutput{}, nonRetryable(ErrInvalidConfig, err)
	}
	ls := &longStatement{db: sqlDB, op: "DBCC CHECKDB", command: tsql.CommandCheckDB, text: stmt, marker: marker,
		log: a.loggerFor(ctx).With(zap.String("db", db.Name), zap.Int64("seq", in.Sequence), zap.String("step", StepCheckDB))}
	err = a.checkDB(ctx, ls, verifyDB, before.RestoreDate, rep, &started)
	// Gone, or still RESTORING (927): restore again.
	if errors.Is(err, mssql.ErrDatabaseNotFound) || errors.Is(err, mssql.ErrDatabaseUnavailable) {
		return StepOutput{}, retryable(ErrSQLHostUnreachable, fmt.Errorf("restored copy %s is gone from %s: restore it again: %w", verifyDB, inst.Name, err))
	}
	if err != nil {
		if ctx.Err() != nil {
			return StepOutput{}, err
		}
		return StepOutput{}, sqlError(err)
	}
	proof, err := stillRestored(ctx, sqlDB, inst.Name, db, in.Sequence, verifyDB, want, createWindow(m), before, "CHECKDB")
	if err != nil {
		return StepOutput{}, err
	}
	offset, err := serverOffset(ctx, sqlDB) // restore_date is this server's wall clock
	if err != nil {
		return StepOutput{}, err
	}
	out := StepOutput{VerifyDatabase: verifyDB, Duration: time.Since(start)}
	now := a.Cycle.now()
	if _, err := a.updateManifest(ctx, db, in.Sequence, holders(m, srv.Name), []string{srv.Name}, func(m *catalog.Manifest) error {
		if m == nil {
			return storageError(srv.Name, fmt.Errorf("manifest of seq %d missing: %w", in.Sequence, storage.ErrNotFound))
		}
		_ = m.SetTiming(catalog.StepCheckDB, now.Add(-out.Duration), now)
		if err := advanceOrKeep(m, catalog.StateChecked, now); err != nil {
			return err
		}
		m.Proof = proofRecord(inst.Name, verifyDB, proof, offset, now)
		return nil
	}); err != nil {
		return StepOutput{}, err
	}
	a.recorder().StepDone(metrics.StepCheckDB, db.Instance, db.Name, srv.Name, 0, out.Duration)
	return out, nil
}

// checkDB runs the CHECKDB, or follows the one an earlier attempt left
// running. A CHECKDB this process sent gives its outcome; one only seen on
// the instance does not (its messages went to a connection that is gone):
// after it ends, the check runs again.
func (a *Activities) checkDB(ctx context.Context, ls *longStatement, verifyDB string, restoredAt time.Time, rep *reporter,
	started *atomic.Bool) error {
	if isRetry(ctx) {
		found, err := ls.find(ctx)
		if err != nil {
			return err
		}
		switch {
		case found.local != nil:
			ls.log.Info("re-attaching to the CHECKDB this worker still runs")
			_, err := a.wait(ctx, ls, found, rep)
			return checkDBEndedUnseen(ctx, ls, verifyDB, restoredAt, err)
		case found.session > 0:
			ls.log.Info("waiting for the CHECKDB an earlier attempt left running", zap.Int64("session", found.session))
			if _, err := a.wait(ctx, ls, found, rep); err != nil {
				return err
			}
		}
		// An earlier attempt's CHECKDB (waited for above, or ended while
		// no worker watched) sent its messages to a connection that is
		// gone; a clean end is recorded in the database
		// (LastGoodCheckDbTime). One at or after this copy's restore is
		// a clean CHECKDB of this copy (a restored database carries its
		// source's value, older than the backup): it is not run again.
		// Else (errors, or no record) it runs again to read them.
		if clean, err := cleanSince(ctx, ls, verifyDB, restoredAt); err == nil && clean {
			ls.log.Info("a CHECKDB of this copy already ended clean: not running it again")
			return nil
		}
		if found.blind && checkDBStarted(ctx) {
			// An earlier attempt sent a CHECKDB of this copy that this
			// login cannot see: it may still run; no second one.
			return blindError(ls, nil)
		}
	}
	s, err := ls.start()
	if err != nil {
		return err
	}
	started.Store(true)
	_, err = a.wait(ctx, ls, running{local: s}, rep)
	return checkDBEndedUnseen(ctx, ls, verifyDB, restoredAt, err)
}

// checkDBEndedUnseen passes err on, except for a CHECKDB that outlived its
// lost connection (see followLost) and ended clean: its messages are lost,
// but a clean end is recorded in the database (LastGoodCheckDbTime).
func checkDBEndedUnseen(ctx context.Context, ls *longStatement, verifyDB string, restoredAt time.Time, err error) error {
	if !isEndedUnseen(err) {
		return err
	}
	if clean, cerr := cleanSince(ctx, ls, verifyDB, restoredAt); cerr == nil && clean {
		ls.log.Info("the CHECKDB that outlived its connection ended clean")
		return nil
	}
	return err
}

// CheckDBHeartbeat is what CheckDB records in its heartbeats: Started once
// an attempt has sent its CHECKDB (which may outlive the attempt).
type CheckDBHeartbeat struct {
	StepProgress
	Started bool `json:"started,omitempty"`
}

// checkDBStarted reports an earlier attempt of this activity that sent its
// CHECKDB.
func checkDBStarted(ctx context.Context) bool {
	if !activity.IsActivity(ctx) || !activity.HasHeartbeatDetails(ctx) {
		return false
	}
	var hb CheckDBHeartbeat
	return activity.GetHeartbeatDetails(ctx, &hb) == nil && hb.Started
}

// cleanSince reports whether the database's last clean CHECKDB ended at or
// after start (both the server's local time).
func cleanSince(ctx context.Context, ls *longStatement, verifyDB string, start time.Time) (bool, error) {
	if start.IsZero() {
		return false, nil
	}
	q, args, err := tsql.LastGoodCheckDB(verifyDB)
	if err != nil {
		return false, err
	}
	v, ok, err := ls.db.QueryValue(ctx, "read LastGoodCheckDbTime", q, args...)
	if err != nil || !ok {
		return false, err
	}
	t, isTime := v.(time.Time)
	return isTime && !t.Before(start), nil
}
