package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/metrics"
)

// How a cycle waits, fails and is cancelled: backoff between rounds, sets
// marked failed on evidence, the cancel path's cleanup.

// wait sleeps for the next backoff interval with step shown, or returns the
// cause once the total wait is used up.
func (c *cycle) wait(ctx workflow.Context, b *backoff, step string, cause error) error {
	d, ok := b.next()
	if !ok {
		return cause
	}
	c.step(ctx, step)
	c.log(ctx).Warn("waiting before trying again", "wait", d, "error", cause)
	return workflow.Sleep(ctx, d)
}

// markFailed marks the current set failed on servers on evidence about its
// content, in a disconnected context so that it runs even when the workflow
// is being cancelled. Its own failure is logged: the set is already not
// verified, and retention removes files without a verified manifest.
func (c *cycle) markFailed(ctx workflow.Context, step string, cause error, servers []string, evidence catalog.Evidence) {
	if c.seq == 0 {
		return
	}
	reason := cause.Error()
	var appErr *temporal.ApplicationError
	if errors.As(cause, &appErr) {
		reason = appErr.Message()
		var bf activities.BackupFailure
		if appErr.HasDetails() && appErr.Details(&bf) == nil && bf.Started {
			reason = fmt.Sprintf("%s (at %.0f %%)", reason, bf.Percent)
		}
	}
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	err := workflow.ExecuteActivity(withOptions(dctx, workflow.ActivityOptions{
		StartToCloseTimeout:    5 * time.Minute,
		ScheduleToCloseTimeout: shortDeadline / 2,
		HeartbeatTimeout:       c.hb,
		RetryPolicy:            retry(2*time.Second, 3),
		Summary:                fmt.Sprintf("mark %s seq %d failed", c.in.Database, c.seq),
	}), a.MarkFailed, activities.MarkInput{
		Database: c.in.Database, Instance: c.instance, Entry: c.entry, Sequence: c.seq, Servers: servers, Timings: c.progress.Timings,
		Step: step, ErrorType: errorType(cause), Reason: reason, Evidence: string(evidence),
	}).Get(dctx, nil)
	if err != nil {
		c.log(ctx).Error("set not marked failed", "error", err)
	}
	c.progress.Failed = append(c.progress.Failed, c.seq)
}

// end finishes a cycle that stopped before its set was verified: cancelled
// or failed.
func (c *cycle) end(ctx workflow.Context, err error) error {
	if cancelled(ctx, err) {
		return c.cancel(ctx)
	}
	return c.fail(ctx, err)
}

// cancel cleans up after a cancel request (Web UI, client): the
// verification database this run restored is dropped, the unverified
// set's files are removed and its manifest records "cancelled"; every
// earlier set is left as it is. The workflow then ends Canceled.
func (c *cycle) cancel(ctx workflow.Context) error {
	step := c.progress.Step
	dctx, done := workflow.NewDisconnectedContext(ctx)
	defer done()
	opts := workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Minute, ScheduleToCloseTimeout: shortDeadline,
		HeartbeatTimeout: c.hb, RetryPolicy: retry(2*time.Second, 5)}
	if c.seq != 0 && !c.verified {
		// A statement an earlier attempt left running (the cancel came
		// while no attempt ran) is stopped before its copy is dropped and
		// its files removed.
		if c.changed(dctx, "stop-statements-on-cancel") {
			stop := activities.StopInput{Database: c.in.Database, Instance: c.instance, Entry: c.entry, Sequence: c.seq, Server: c.server,
				Replica: c.replica, Base: c.base}
			if c.restoreStarted {
				stop.Remote = c.remoteOf()
			}
			var stopped activities.StopOutput
			if err := workflow.ExecuteActivity(withOptions(dctx, opts), a.StopStatements, stop).Get(dctx, &stopped); err != nil {
				c.log(ctx).Error("statements of the cancelled set not stopped", "error", err)
			} else if len(stopped.Left) > 0 {
				c.log(ctx).Warn("statements of the cancelled set still running (KILL needs ALTER ANY CONNECTION)", "left", stopped.Left)
			}
		}
		if c.restoreStarted {
			verify := activities.VerifyInput{Database: c.in.Database, Instance: c.instance, Entry: c.entry, Sequence: c.seq, Server: c.remoteOf(),
				OwnRestore: true}
			if err := workflow.ExecuteActivity(withOptions(dctx, opts), a.DropVerifyDB, verify).Get(dctx, nil); err != nil {
				c.log(ctx).Error("verification database not dropped after cancel", "error", err)
			}
		}
		servers := c.holders
		if len(servers) == 0 && c.server != "" {
			servers = []string{c.server}
		}
		if err := workflow.ExecuteActivity(withOptions(dctx, opts), a.MarkCancelled, activities.MarkInput{
			Database: c.in.Database, Instance: c.instance, Entry: c.entry, Sequence: c.seq, Servers: servers, Step: step,
			Reason: "cycle cancelled at step " + step,
		}).Get(dctx, nil); err != nil {
			c.log(ctx).Error("set not marked cancelled", "error", err)
		}
	}
	c.progress.Error = "cancelled at step " + step
	c.progress.Step = activities.StepCancelled
	c.set(dctx, AttrStep.ValueSet(activities.StepCancelled))
	c.outcome(dctx, OutcomeCancelled)
	metrics.CycleEnded(workflow.GetMetricsHandler(dctx), metrics.OutcomeCancelled, "")
	c.log(ctx).Warn("backup cycle cancelled", "cancelled_step", step)
	return temporal.NewCanceledError(fmt.Sprintf("backup cycle of %s cancelled at step %s", c.in.Database, step))
}

// remoteOf is the server the current set is verified from: the last holder.
func (c *cycle) remoteOf() string {
	if len(c.holders) > 1 {
		return c.holders[len(c.holders)-1]
	}
	return c.server
}

// fail ends the cycle with the outcome `failed` and an error of a stable
// type. The set is marked failed only on evidence about its content (a
// BACKUP that did not complete, corrupt media, CHECKDB errors, a sanity
// mismatch): an outage, a timeout or a deadline leaves it in its last proven
// state (written, copied, restored, checked), for a later cycle or
// `starter resume` to finish.
func (c *cycle) fail(ctx workflow.Context, err error) error {
	step := c.progress.Step
	typ := errorType(err)
	evidence := activities.Evidence(typ)
	left := c.stopFailedStep(ctx, step, typ)
	// The BACKUP itself reported a failure: the set is incomplete. A timeout
	// (no type) proves nothing: the statement may have completed unseen.
	if evidence == "" && c.seq != 0 && !c.backedUp && step == activities.StepBackup && typ != "" && !slices.Contains(notAgainstSet, typ) &&
		!(slices.Contains(unconfirmedNotAgainstSet, typ) && workflow.GetVersion(ctx, versionUnconfirmed, workflow.DefaultVersion, 1) == 1) {
		evidence = catalog.EvidenceBackupIncomplete
	}
	alreadyMarked := len(c.progress.Failed) > 0 && c.progress.Failed[len(c.progress.Failed)-1] == c.seq
	if evidence != "" && !alreadyMarked {
		servers := c.holders
		if len(servers) == 0 && c.server != "" {
			servers = []string{c.server}
		}
		c.markFailed(ctx, step, err, servers, evidence)
	} else if c.seq != 0 && !alreadyMarked {
		c.log(ctx).Warn("set left in its last proven state: the failure says nothing about its content", "type", typ)
	}
	// A RESTORE of this run that failed leaves the copy RESTORING: useless,
	// and in the way of every later cycle (only a copy backupcycle restored
	// may be replaced, and a RESTORING one has no restore to show). Drop it
	// while this run knows it sent that RESTORE. A restore refused before it
	// started (the name is someone else's) or of another set is left alone.
	if c.restoreStarted && step == activities.StepRestore && typ != activities.ErrVerifyDatabaseInUse &&
		typ != activities.ErrRestoreMismatch && c.changed(ctx, "drop-failed-restore") {
		verify := activities.VerifyInput{Database: c.in.Database, Instance: c.instance, Entry: c.entry, Sequence: c.seq, Server: c.remoteOf(),
			OwnRestore: true}
		if derr := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 10 * time.Minute, ScheduleToCloseTimeout: shortDeadline / 2, HeartbeatTimeout: c.hb,
			RetryPolicy: retry(5*time.Second, 5),
			Summary:     fmt.Sprintf("drop the verification copy of %s seq %d", verify.Database, verify.Sequence),
		}), a.DropVerifyDB, verify).Get(ctx, nil); derr != nil {
			c.log(ctx).Error("copy of the failed restore not dropped: the next cycle may refuse to replace it", "error", derr)
		}
	}
	stillRuns := ""
	if len(left) > 0 {
		stillRuns = "; left running on SQL Server: " + strings.Join(left, "; ")
	}
	c.progress.Error = err.Error() + stillRuns
	c.progress.Step = activities.StepFailed
	// BackupStep keeps the step that failed (BackupOutcome says failed),
	// so the Web UI and `starter status` can filter failures by step.
	c.set(ctx, AttrStep.ValueSet(step))
	c.outcome(ctx, OutcomeFailed)
	metrics.CycleEnded(workflow.GetMetricsHandler(ctx), metrics.OutcomeFailed, typ)
	c.log(ctx).Error("backup cycle failed", "failed_step", step, "type", typ, "error", err)

	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && typ != "" {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("backup cycle of %s failed at step %s: %s%s", c.in.Database, step, appErr.Message(), stillRuns), typ, err)
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("backup cycle of %s failed at step %s: %v%s", c.in.Database, step, err, stillRuns), "CycleFailed", err)
}

// stopFailedStep stops what a failed BACKUP, RESTORE or CHECKDB step of
// the current set left running on SQL Server: its last attempt timed out
// (or the attempts ran out) and left the statement for a next attempt that
// never comes, and it would meet the next night's cycle (a second BACKUP of
// the database, a RESTORE over a copy CHECKDB still reads). It returns what
// could not be stopped, each with its fix (KILL needs ALTER ANY
// CONNECTION). Other steps run nothing that outlives them, and an instance
// the step could not reach (SQLHostUnreachable) cannot be asked either.
func (c *cycle) stopFailedStep(ctx workflow.Context, step, typ string) []string {
	if c.seq == 0 || c.verified || typ == activities.ErrSQLHostUnreachable {
		return nil
	}
	stop := activities.StopInput{Database: c.in.Database, Instance: c.instance, Sequence: c.seq, Replica: c.replica, Base: c.base}
	switch step {
	case activities.StepBackup:
		stop.Server = c.server
	case activities.StepRestore, activities.StepCheckDB:
		stop.Remote = c.remoteOf()
	default:
		return nil
	}
	if stop.Server == "" && stop.Remote == "" ||
		!c.changed(ctx, "stop-statements-on-fail") {
		return nil
	}
	var stopped activities.StopOutput
	if err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute, ScheduleToCloseTimeout: shortDeadline / 2, HeartbeatTimeout: c.hb,
		RetryPolicy: retry(2*time.Second, 3),
		Summary:     fmt.Sprintf("stop what step %s of %s seq %d left running", step, c.in.Database, c.seq),
	}), a.StopStatements, stop).Get(ctx, &stopped); err != nil {
		c.log(ctx).Error("statements of the failed step not stopped: they may still run", "error", err)
		return nil
	}
	if len(stopped.Stopped) > 0 {
		c.log(ctx).Warn("stopped what the failed step left running", "stopped", stopped.Stopped)
	}
	if len(stopped.Left) > 0 {
		c.log(ctx).Warn("statements of the failed step still running on SQL Server", "left", stopped.Left)
	}
	return stopped.Left
}

// cancelled reports whether err is (or follows from) a cancel request.
func cancelled(ctx workflow.Context, err error) bool {
	return ctx.Err() != nil || temporal.IsCanceledError(err)
}

func (c *cycle) log(ctx workflow.Context) log.Logger {
	return log.With(workflow.GetLogger(ctx), "db", c.in.Database, "seq", c.seq, "step", c.progress.Step, "server", c.server)
}
