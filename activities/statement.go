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
	op      string // "BACKUP DATABASE", for messages
	command string // its sys.dm_exec_requests.command
	text    string // the statement
	// marker is the start of text that only this statement has (its
	// database and first file); it identifies it in sys.dm_exec_sql_text.
	marker string
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
	if s := mssql.Attach(ls.db.Target, ls.marker); s != nil {
		return running{local: s}, nil
	}
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
// this process).
func (ls *longStatement) start() (*mssql.Statement, error) {
	s, started, err := ls.db.Start(ls.marker, ls.op, ls.text, nil)
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
			return r.local.Wait(ctx)
		case <-ctx.Done():
			return mssql.Result{Percent: -1}, a.leave(ctx, ls, r)
		case <-t.C:
		}
	}
}

// leave ends an attempt whose context ended while its statement runs. A
// cancel request of the workflow stops the statement (an attention from this
// process, else KILL of its session, which needs ALTER ANY CONNECTION); any
// other end (worker stop, heartbeat timeout while Temporal was away, start-
// to-close) leaves it running for the next attempt.
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
				ls.log.Warn("cannot stop the cancelled statement: it runs to its end (KILL needs ALTER ANY CONNECTION)",
					zap.String("statement", ls.op), zap.Int64("session", r.session), zap.Error(err))
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
