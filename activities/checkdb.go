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
// EXTENDED_LOGICAL_CHECKS, DATA_PURITY on the restored copy (the statement
// names its set: tsql.VerifyCheckDB). Every error it raises is evidence
// against the set (CheckDBFailed, with every message), except those that
// say it could not run (tempdb, its internal snapshot, memory:
// CheckDBCouldNotRun, retried) or that concern the environment
// (mssql.OpCheckDB). A lost instance or a vanished copy is
// SQLHostUnreachable: the workflow restores again.
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
	stmt, err := tsql.VerifyCheckDB(verifyDB, in.Sequence)
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
	ls := &longStatement{db: sqlDB, op: mssql.OpCheckDB, command: tsql.CommandCheckDB, text: stmt,
		marker: mssql.Marker{Prefix: stmt, Whole: true},
		log:    a.loggerFor(ctx).With(zap.String("db", db.Name), zap.Int64("seq", in.Sequence), zap.String("step", StepCheckDB))}
	// The baseline is the one Restore recorded with this restore in the
	// manifest; a restore recorded without one (an older build) gets one
	// read now, and a CHECKDB that ended unseen before it runs again.
	// Heartbeats are never trusted for it: anyone polling the task queue
	// can forge them.
	earlier := checkDBHeartbeat(ctx)
	base := recordedBaseline(m, inst.Name, verifyDB, copyGUID(m, want))
	if base == nil {
		if base, err = checkDBBaseline(ctx, ls, verifyDB); err != nil {
			return StepOutput{}, sqlError(err)
		}
	}
	rep := a.newReporter(ctx, StepCheckDB, in.Sequence)
	var started atomic.Bool // this attempt sent its CHECKDB (heartbeats say so)
	stop := rep.every(a.Cycle.poll(), nil, func(p float64, b int64) any {
		return CheckDBHeartbeat{StepProgress: StepProgress{Step: StepCheckDB, Sequence: in.Sequence, Percent: p, Bytes: b},
			Started: started.Load() || earlier.Started}
	})
	defer stop()
	start := time.Now()
	before, err := proveRestored(ctx, sqlDB, inst.Name, db, in.Sequence, verifyDB, want, m)
	if err != nil {
		return StepOutput{}, err
	}
	err = a.checkDB(ctx, ls, verifyDB, base, earlier.Started, rep, &started)
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
	proof, err := stillRestored(ctx, sqlDB, inst.Name, db, in.Sequence, verifyDB, want, m, before, "CHECKDB")
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
// running. A CHECKDB this process sent and saw to its end gives its
// outcome. One that ended unseen (sent by an earlier attempt, or whose
// connection was lost) gives none: its messages went to a connection that
// is gone. Only a clean end recorded in the copy since base (see
// cleanSince) counts for it; otherwise CHECKDB runs again (a retry of an
// earlier attempt's; an error for one whose connection was lost), never
// inferring a clean copy it cannot show. earlierStarted: an earlier
// attempt sent one.
func (a *Activities) checkDB(ctx context.Context, ls *longStatement, verifyDB string, base *CheckDBBaseline, earlierStarted bool,
	rep *reporter, started *atomic.Bool) error {
	if isRetry(ctx) {
		found, err := ls.find(ctx)
		if err != nil {
			return err
		}
		switch {
		case found.local != nil:
			ls.log.Info("re-attaching to the CHECKDB this worker still runs")
			_, err := a.wait(ctx, ls, found, rep)
			return checkDBEndedUnseen(ctx, ls, verifyDB, base, err)
		case found.session > 0:
			ls.log.Info("waiting for the CHECKDB an earlier attempt left running", zap.Int64("session", found.session))
			if _, err := a.wait(ctx, ls, found, rep); err != nil {
				return err
			}
		}
		if cleanSince(ctx, ls, verifyDB, base) {
			ls.log.Info("a CHECKDB of this copy ended clean after this step first sent one: not running it again")
			return nil
		}
		if found.blind && earlierStarted {
			// An earlier attempt sent a CHECKDB of this copy that this
			// login cannot see: it may still run; no second one.
			return blindError(ls, nil)
		}
	}
	s, err := ls.start(ctx)
	if err != nil {
		return err
	}
	started.Store(true)
	_, err = a.wait(ctx, ls, running{local: s}, rep)
	return checkDBEndedUnseen(ctx, ls, verifyDB, base, err)
}

// checkDBEndedUnseen passes err on, except for a CHECKDB that outlived its
// lost connection (see followLost) and ended clean since base. One without
// a clean end to show stays an error: it found something, or the instance
// restarted under it (the copy is then restored again), and its messages
// are lost; the step runs CHECKDB again rather than guess.
func checkDBEndedUnseen(ctx context.Context, ls *longStatement, verifyDB string, base *CheckDBBaseline, err error) error {
	if !isEndedUnseen(err) {
		return err
	}
	if cleanSince(ctx, ls, verifyDB, base) {
		ls.log.Info("the CHECKDB that outlived its connection ended clean")
		return nil
	}
	return err
}

// CheckDBHeartbeat is what CheckDB records in its heartbeats: Started once
// an attempt has sent its CHECKDB (which may outlive the attempt). It is a
// hint: a forged Started only makes a login that cannot see other sessions
// wait (StatementMayStillRun) or send a second CHECKDB, never counts a
// CHECKDB as clean.
type CheckDBHeartbeat struct {
	StepProgress
	Started bool `json:"started,omitempty"`
}

// CheckDBBaseline is what a copy said before any CHECKDB of it
// (catalog.CheckDBBaseline).
type CheckDBBaseline = catalog.CheckDBBaseline

// recordedBaseline is the CHECKDB baseline Restore recorded with the
// confirmed restore of this set into verifyDB on instance, or nil.
func recordedBaseline(m *catalog.Manifest, instance, verifyDB, guid string) *CheckDBBaseline {
	v := m.VerifyCopy
	if !v.On(instance, verifyDB) || !v.Confirmed() || !sameGUID(v.BackupSetGUID, guid) {
		return nil
	}
	return v.CheckDBBaseline
}

// checkDBHeartbeat is what an earlier attempt of this activity recorded.
func checkDBHeartbeat(ctx context.Context) CheckDBHeartbeat {
	var hb CheckDBHeartbeat
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		if err := activity.GetHeartbeatDetails(ctx, &hb); err != nil {
			return CheckDBHeartbeat{}
		}
	}
	return hb
}

// checkDBBaseline reads the copy's LastGoodCheckDbTime and the server's
// clock; nil when the server has no value (the copy is gone: the proof
// that follows says so).
func checkDBBaseline(ctx context.Context, ls *longStatement, verifyDB string) (*CheckDBBaseline, error) {
	q, args, err := tsql.LastGoodCheckDB(verifyDB)
	if err != nil {
		return nil, err
	}
	lastGood, now, ok, err := ls.db.LastGoodCheckDB(ctx, q, args...)
	if err != nil || !ok {
		return nil, err
	}
	return &CheckDBBaseline{LastGood: lastGood, At: now}, nil
}

// cleanSince reports a clean end of a CHECKDB of the copy since base (see
// CheckDBBaseline.CleanSince). Unsure (no baseline, a failed read) is not
// clean.
func cleanSince(ctx context.Context, ls *longStatement, verifyDB string, base *CheckDBBaseline) bool {
	if base == nil {
		return false
	}
	now, err := checkDBBaseline(ctx, ls, verifyDB)
	if err != nil || now == nil {
		return false
	}
	return base.CleanSince(now.LastGood)
}
