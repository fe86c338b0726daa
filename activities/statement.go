package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// ErrStatementLeftRunning: the attempt ended (worker stopping, heartbeat
// timeout, Temporal unreachable) while its BACKUP, RESTORE or CHECKDB runs
// on: the statement was left running on SQL Server and the next attempt
// re-attaches to it. Retryable.
const ErrStatementLeftRunning = "StatementLeftRunning"

// longStatement is one BACKUP, RESTORE or DBCC CHECKDB a step runs. It is
// sent without STATS and outlives the attempt that sent it: SQL Server stops
// a statement whose client vanished only when it next writes to it, so a
// statement that writes nothing until its end survives a worker restart, and
// the retry finds it (in this process, else in sys.dm_exec_requests by its
// text) instead of running it twice.
type longStatement struct {
	db      *mssql.DB
	op      string // "BACKUP DATABASE", mssql.OpCheckDB: its errors are classified by it
	command string // its sys.dm_exec_requests.command (a LIKE pattern)
	text    string // the statement
	// marker identifies the statement in sys.dm_exec_sql_text: the batch
	// starts with what only this statement has (its database and first
	// file; a CHECKDB's whole text, which names its set), and runs as this
	// login (mssql.Find).
	marker mssql.Marker
	log    *zap.Logger
}

// running is a statement found on the instance.
type running struct {
	local   *mssql.Statement // sent by this process
	session int64            // else: its session, seen in sys.dm_exec_requests
	// blind: the login cannot see other sessions (no VIEW SERVER STATE), so
	// "not found" says nothing.
	blind bool
}

// find looks for the statement still running or finished unseen: in this
// process first, then on the instance.
func (ls *longStatement) find(ctx context.Context) (running, error) {
	if s := mssql.Attach(ls.db.Target, ls.marker.Key()); s != nil {
		return running{local: s}, nil
	}
	return ls.findOnInstance(ctx)
}

// findOnInstance looks for the statement in sys.dm_exec_requests.
func (ls *longStatement) findOnInstance(ctx context.Context) (running, error) {
	q, args, err := tsql.RunningStatements(ls.command)
	if err != nil {
		return running{}, nonRetryable(ErrInvalidConfig, err)
	}
	reqs, err := ls.db.Requests(ctx, q, args...)
	if err != nil {
		return running{}, sqlError(err)
	}
	if r := mssql.Find(reqs, ls.marker); r != nil {
		return running{session: r.SessionID}, nil
	}
	see, known, err := ls.db.CanSeeOtherSessions(ctx, tsql.CanSeeOtherSessions())
	return running{blind: err == nil && known && !see}, nil
}

// start sends the statement (or attaches to the same one still running in
// this process). An attempt whose context has ended sends nothing: its
// heartbeat learned that it timed out (a worker frozen past its heartbeat
// timeout and thawed), or the workflow cancelled it, and its retry may be
// running the same step: a stale RESTORE ... REPLACE would replace the copy
// the retry restored and is about to check.
func (ls *longStatement) start(ctx context.Context) (*mssql.Statement, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s not sent: the attempt ended before it (%w)", ls.op, err)
	}
	s, started, err := ls.db.Start(ls.marker.Key(), ls.op, ls.text, nil)
	if err != nil {
		return nil, sqlError(err)
	}
	if !started {
		ls.log.Info("attaching to the statement this worker already runs", zap.String("statement", ls.op))
	}
	return s, nil
}

// wait follows a statement until it ends, reporting its percent_complete
// every poll. For a statement of this process it returns its outcome; for
// one seen on the instance only that it is gone (the caller checks what it
// left: RESTORE HEADERONLY, msdb). When ctx ends first the statement is
// stopped only if the workflow asked to cancel; otherwise it is left
// running and wait returns ErrStatementLeftRunning.
func (a *Activities) wait(ctx context.Context, ls *longStatement, r running, rep *reporter) (mssql.Result, error) {
	q, args, err := tsql.RunningStatements(ls.command)
	if err != nil {
		return mssql.Result{Percent: -1}, nonRetryable(ErrInvalidConfig, err)
	}
	poll := a.Cycle.poll()
	t := time.NewTicker(poll)
	defer t.Stop()
	var done <-chan struct{}
	if r.local != nil {
		done = r.local.Done()
	}
	for {
		// Progress (no STATS messages): percent_complete of the request.
		reqs, err := ls.db.Requests(ctx, q, args...)
		switch {
		case err == nil:
			if req := mssql.Find(reqs, ls.marker); req != nil {
				if r.session == 0 || req.SessionID == r.session {
					rep.setPercent(req.Percent)
				}
			} else if r.local == nil {
				return mssql.Result{Percent: -1}, nil // gone: it ended
			}
		case ctx.Err() != nil:
		case r.local == nil:
			return mssql.Result{Percent: -1}, sqlError(err)
		}
		select {
		case <-done:
			res, err := r.local.Wait(ctx)
			if connectionLost(ctx, err) {
				return res, a.followLost(ctx, ls, rep, err)
			}
			return res, err
		case <-ctx.Done():
			return mssql.Result{Percent: -1}, a.leave(ctx, ls, r)
		case <-t.C:
		}
	}
}

// connectionLost reports a statement of this process that ended because
// its connection broke (no SQL Server error: a severity >= 20 error, which
// ends the statement with its session, carries its number), while the
// attempt itself goes on.
func connectionLost(ctx context.Context, err error) bool {
	var f *mssql.Failure
	return ctx.Err() == nil && errors.As(err, &f) && errors.Is(f.Kind, mssql.ErrUnreachable) && len(f.Errors) == 0
}

// endedUnseen is the end of a statement whose connection broke while
// SQL Server ran it on (a client that vanished is noticed only at the next
// write, and these statements write nothing until their end): the statement
// has ended since, and only what it left (RESTORE HEADERONLY, msdb,
// LastGoodCheckDbTime) tells whether it completed. It wraps the lost
// connection's error, so a caller that cannot tell classifies that.
type endedUnseen struct{ lost error }

func (e *endedUnseen) Error() string {
	return "the statement ended on the instance after its connection was lost: " + e.lost.Error()
}
func (e *endedUnseen) Unwrap() error { return e.lost }

// isEndedUnseen reports an endedUnseen error.
func isEndedUnseen(err error) bool {
	var e *endedUnseen
	return errors.As(err, &e)
}

// lostWindow bounds how long followLost tries to reach the instance again
// before the lost connection counts as an unreachable host.
func (a *Activities) lostWindow() time.Duration {
	return min(30*time.Second, 15*a.Cycle.poll())
}

// followLost handles the statement's own connection breaking (lost): SQL
// Server notices a vanished client only when it next writes to it, so the
// statement may run on. It reconnects, looks for the statement on the
// instance and waits for it to end (endedUnseen: the caller reads what it
// left), so that no second BACKUP, RESTORE or CHECKDB is sent over one still
// running. lost is returned as it is when the instance cannot be reached
// again within lostWindow (the host is away), and an error naming the
// missing grant when the login cannot see other sessions (it cannot tell
// whether the statement still runs).
func (a *Activities) followLost(ctx context.Context, ls *longStatement, rep *reporter, lost error) error {
	ls.log.Warn(ls.op+": its connection was lost; looking for it on the instance, where it may still run", zap.Error(lost))
	deadline := time.Now().Add(a.lostWindow())
	for {
		found, err := ls.findOnInstance(ctx)
		switch {
		case err == nil && found.session > 0:
			ls.log.Info("re-attaching to the statement that outlived its connection", zap.String("statement", ls.op),
				zap.Int64("session", found.session))
			if _, err := a.wait(ctx, ls, found, rep); err != nil {
				return err
			}
			return &endedUnseen{lost: lost}
		case err == nil && found.blind:
			return blindError(ls, lost)
		case err == nil:
			return &endedUnseen{lost: lost}
		case ctx.Err() != nil:
			return lost
		}
		if time.Now().After(deadline) {
			return lost
		}
		select {
		case <-ctx.Done():
			return lost
		case <-time.After(a.Cycle.poll()):
		}
	}
}

// blindError: an earlier statement of this step may still run on the
// instance, and the login cannot see other sessions to find it. Starting a
// second one over it would fail on a real server (BACKUP: 3201 with
// operating system error 32; RESTORE: 3101) or run twice (CHECKDB), so the
// step waits and tries again; the error names the missing grant. BACKUP:
// BackupDeviceInUse (the workflow waits and backs up the same set again);
// RESTORE, CHECKDB: StatementMayStillRun, retried by the activity. cause
// may be nil.
func blindError(ls *longStatement, cause error) error {
	typ := ErrStatementMayStillRun
	if ls.command == tsql.CommandBackupDatabase {
		typ = ErrBackupDeviceInUse
	}
	msg := fmt.Sprintf("%s on %s: an earlier %s of this step may still run, and login %q cannot see other sessions to wait for it: "+
		"grant VIEW SERVER STATE (on SQL Server 2022 VIEW SERVER PERFORMANCE STATE) to the login (`starter preflight` checks it); "+
		"the step waits and tries again rather than start a second one", ls.op, ls.db.Target, ls.op, ls.db.Target.User)
	if cause == nil {
		return retryable(typ, errors.New(msg))
	}
	return retryable(typ, fmt.Errorf("%s: %w", msg, cause))
}

// leave ends an attempt whose context ended while its statement runs. A
// cancel request of the workflow stops the statement (an attention from this
// process, else KILL of its session, which needs ALTER ANY CONNECTION); any
// other end (worker stop, heartbeat timeout while Temporal was away, start-
// to-close) leaves it running for the next attempt. When there is none (the
// step's deadline passed), the failing cycle stops it (StopStatements).
func (a *Activities) leave(ctx context.Context, ls *longStatement, r running) error {
	cause := context.Cause(ctx)
	if temporal.IsCanceledError(cause) {
		switch {
		case r.local != nil:
			if !r.local.Stop(time.Minute) {
				ls.log.Warn("cancelled statement still running after a minute", zap.String("statement", ls.op))
			}
		case r.session > 0:
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := kill(kctx, ls.db, r.session); err != nil {
				ls.log.Warn("cannot stop the cancelled statement: it runs to its end", zap.String("statement", ls.op),
					zap.Int64("session", r.session), zap.String("fix", killFix(ls.db.Target.User, err)), zap.Error(err))
			}
		}
		return ctx.Err()
	}
	why := "the attempt ended"
	switch {
	case errors.Is(cause, worker.ErrWorkerShutdown) || workerStopping(ctx):
		why = "the worker is stopping"
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		why = "the attempt's timeout passed"
	case cause != nil && !errors.Is(cause, context.Canceled):
		why = "Temporal ended the attempt (" + cause.Error() + ")"
	}
	ls.log.Warn(ls.op+" left running on the SQL instance: the next attempt re-attaches to it", zap.String("reason", why))
	return retryable(ErrStatementLeftRunning, fmt.Errorf("%s on %s left running: %s; the next attempt re-attaches to it",
		ls.op, ls.db.Target, why))
}

// workerStopping reports a worker stop under way (deploy, SIGTERM).
func workerStopping(ctx context.Context) bool {
	if !activity.IsActivity(ctx) {
		return false
	}
	select {
	case <-activity.GetWorkerStopChannel(ctx):
		return true
	default:
		return false
	}
}

// kill ends session's request with KILL (SQL Server rolls it back); it
// needs ALTER ANY CONNECTION.
func kill(ctx context.Context, db *mssql.DB, session int64) error {
	stmt, err := tsql.Kill(session)
	if err != nil {
		return nonRetryable(ErrInvalidConfig, err)
	}
	_, err = db.Run(ctx, "KILL", stmt, nil)
	return err
}
