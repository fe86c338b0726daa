package workflows

import (
	"fmt"
	"hash/fnv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/logs"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// LogChain is one long-running workflow per database with log_backup: an
// entity loop on a durable timer aligned to log_backup.every (plus a phase
// of its own per database, so that a fleet's log backups do not all start
// at :00), one BackupLog activity per tick, and a copy lane (a coroutine)
// that copies finished log backups to the remote site without delaying the
// next backup. Every ticksPerRun ticks, or when Temporal suggests it, the
// run continues as new carrying only the chain id and its cursor; the new
// run reads the configuration again (LogPlan), and every activity
// re-derives the rest from it and from the chain record.

// LogChainName is the workflow type; LogChainQuery returns LogChainStatus.
const (
	LogChainName  = "LogChain"
	LogChainQuery = "logchain"
)

// Log chain states, as in LogChainStatus.State.
const (
	ChainStarting = "starting"
	ChainOK       = "ok"
	// ChainDegraded: the last log backup or copy failed; the next tick
	// tries again.
	ChainDegraded = "degraded"
	// ChainBroken: the chain ended (LogChainStatus.Break); a full backup
	// starts the next one.
	ChainBroken = "broken"
	// ChainOff: the database has no log_backup in the configuration any
	// more; the workflow ended.
	ChainOff = "off"
)

const (
	// defaultTicksPerRun: about 17 history events a tick (timer, two
	// activities, their workflow tasks), so a run stays near a thousand
	// events, a quarter of Temporal's continue-as-new suggestion.
	defaultTicksPerRun = 60
	maxTicksPerRun     = 1000
	// fullRequestEvery bounds how often a broken chain starts a cycle for
	// the full that begins the next chain, when the last one ended without
	// starting it.
	fullRequestEvery = time.Hour
)

// la is only used to name the log chain's activity methods.
var la *logs.Activities

// LogChainWorkflowID is the id of the database's log chain workflow:
// logchain/<instance>/<database>, characters outside [A-Za-z0-9._] escaped
// as CycleWorkflowID does. One id per database lets Temporal keep one chain
// per database, whoever starts it.
func LogChainWorkflowID(instance, database string) string {
	return pathID("logchain", instance, database)
}

// LogChainInput starts (or continues) a database's chain. Database and
// Instance are configuration keys; Chain and Last are the cursor a run
// hands to its continuation (a hint: the chain record decides).
type LogChainInput struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	Chain    int64  `json:"chain,omitempty"`
	Last     int64  `json:"last,omitempty"`
	// TicksPerRun: log backups per run before it continues as new
	// (default 60, at most 1000).
	TicksPerRun int `json:"ticks_per_run,omitempty"`
}

// LogChainStatus is what the `logchain` query returns (and the Web UI's
// current details show).
type LogChainStatus struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	State    string `json:"state"`
	Chain    int64  `json:"chain,omitempty"`
	// LastLog is the newest log backup of the chain, LastLogStart and
	// LastLogFinish its instants, LastLSN where it ends.
	LastLog       int64     `json:"last_log,omitempty"`
	LastLogStart  time.Time `json:"last_log_start,omitzero"`
	LastLogFinish time.Time `json:"last_log_finish,omitzero"`
	LastLSN       string    `json:"last_lsn,omitempty"`
	// Lag is how old the newest log backup's start was at the last tick:
	// what a failure of the source then would have lost at most.
	Lag time.Duration `json:"lag"`
	// CopiedThrough is the newest log backup copied to CopyTo with every
	// earlier one.
	CopiedThrough int64         `json:"copied_through,omitempty"`
	Server        string        `json:"server,omitempty"`
	CopyTo        string        `json:"copy_to,omitempty"`
	Every         time.Duration `json:"every"`
	NextTick      time.Time     `json:"next_tick,omitzero"`
	// Ticks counts this run's ticks; Runs the runs of the chain's workflow
	// so far (continue-as-new).
	Ticks     int               `json:"ticks"`
	Break     *logs.Break       `json:"break,omitempty"`
	Foreign   []logs.ForeignLog `json:"foreign,omitempty"`
	LastError string            `json:"last_error,omitempty"`
	CopyError string            `json:"copy_error,omitempty"`
	// FullRequested is the cycle started for the full backup that begins
	// the next chain, and when.
	FullRequested   string    `json:"full_requested,omitempty"`
	FullRequestedAt time.Time `json:"full_requested_at,omitzero"`
	// Proof is where the log proof stands, as the proof workflow last
	// said (LogChainProofSignal); ProofLag is how far behind the present
	// the standby copy was at the last tick.
	Proof    *ProofProgress `json:"proof,omitempty"`
	ProofLag time.Duration  `json:"proof_lag"`
}

// logChain is one run's state.
type logChain struct {
	in   LogChainInput
	plan logs.LogPlan
	st   LogChainStatus
	// copyDue: a log backup is written and not known copied; copying: a
	// CopyLogs runs; stopping: the run continues as new after the copy in
	// flight.
	copyDue, copying, stopping bool
	// fullStarting: a cycle start is under way (not yet acknowledged);
	// fullRunning: the started cycle has not ended.
	fullStarting, fullRunning bool
	// proofStarting, scratchStarting: the start of the proof workflows
	// is under way.
	proofStarting, scratchStarting bool
}

// LogChain runs the database's log chain (see the top of this file).
func LogChain(ctx workflow.Context, in LogChainInput) (LogChainStatus, error) {
	lc := &logChain{in: in, st: LogChainStatus{Database: in.Database, Instance: in.Instance, State: ChainStarting,
		Chain: in.Chain, LastLog: in.Last}}
	if err := workflow.SetQueryHandler(ctx, LogChainQuery, func() (LogChainStatus, error) { return lc.st, nil }); err != nil {
		return lc.st, err
	}
	if in.Database == "" || in.Instance == "" {
		return lc.st, temporal.NewNonRetryableApplicationError(
			`LogChain input names no database or instance: pass the configuration keys, e.g. {"database":"Sales","instance":"sql01"}`,
			activities.ErrInvalidConfig, nil)
	}
	ticks := in.TicksPerRun
	if ticks == 0 {
		ticks = defaultTicksPerRun
	}
	if ticks < 1 || ticks > maxTicksPerRun {
		return lc.st, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"LogChain ticks_per_run %d: use 1 to %d, or leave it out (%d)", ticks, maxTicksPerRun, defaultTicksPerRun),
			activities.ErrInvalidConfig, nil)
	}
	if id, want := workflow.GetInfo(ctx).WorkflowExecution.ID, LogChainWorkflowID(in.Instance, in.Database); id != want {
		// One chain per database: only the canonical id holds it.
		return lc.st, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"the log chain of %s/%s runs under workflow id %s, not %s: start it with `starter logs start` or under that id",
			in.Instance, in.Database, want, id), activities.ErrInvalidConfig, nil)
	}

	// The configuration in force, read again by every run.
	err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: 10 * time.Minute,
		RetryPolicy:            retry(5*time.Second, 10),
		Summary:                "log plan " + tsql.Printable(in.Database),
	}), la.LogPlan, logs.LogPlanInput{Database: in.Database, Instance: in.Instance}).Get(ctx, &lc.plan)
	if err != nil {
		lc.st.LastError = err.Error()
		lc.details(ctx)
		return lc.st, err
	}
	if !lc.plan.Enabled {
		lc.st.State = ChainOff
		lc.details(ctx)
		workflow.GetLogger(ctx).Info("log backups are off for the database: the log chain workflow ends", "db", in.Database,
			"instance", in.Instance)
		return lc.st, nil
	}
	lc.st.Every, lc.st.Server, lc.st.CopyTo = lc.plan.Every, lc.plan.Server, lc.plan.CopyTo

	lc.startLogProof(ctx)
	lc.startScratchProof(ctx)
	workflow.Go(ctx, lc.copyLane)
	workflow.Go(ctx, lc.proofProgress)
	for lc.st.Ticks < ticks {
		now := workflow.Now(ctx)
		next := nextTick(now, lc.st.Every, phaseOf(in.Instance, in.Database, lc.st.Every))
		lc.st.NextTick = next
		lc.details(ctx)
		if err := workflow.Sleep(ctx, next.Sub(now)); err != nil {
			return lc.st, err // cancelled
		}
		lc.st.Ticks++
		if err := lc.tick(ctx); err != nil {
			return lc.st, err
		}
		if lc.st.Every <= 0 {
			lc.st.State = ChainOff
			lc.details(ctx)
			return lc.st, lc.drain(ctx)
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			break
		}
	}
	if err := lc.drain(ctx); err != nil {
		return lc.st, err
	}
	return lc.st, workflow.NewContinueAsNewError(ctx, LogChainName, LogChainInput{
		Database: in.Database, Instance: in.Instance, Chain: lc.st.Chain, Last: lc.st.LastLog, TicksPerRun: in.TicksPerRun})
}

// tick takes one log backup. Its failure degrades the chain until the next
// tick; only a cancel ends the run.
func (lc *logChain) tick(ctx workflow.Context) error {
	var out logs.BackupLogOutput
	err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		// A BACKUP LOG of a minute's log takes seconds; one after a long
		// outage may take minutes. Every attempt together is bounded so
		// that a failing one does not hold the chain for long: the next
		// tick's log backup takes what this one would have.
		StartToCloseTimeout:    30 * time.Minute,
		ScheduleToCloseTimeout: 30 * time.Minute,
		HeartbeatTimeout:       time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 5 * time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			MaximumAttempts: 10, NonRetryableErrorTypes: activities.NonRetryableErrorTypes},
		Summary: fmt.Sprintf("log backup of %s", tsql.Printable(lc.in.Database)),
	}), la.BackupLog, logs.BackupLogInput{Database: lc.in.Database, Instance: lc.in.Instance, Chain: lc.st.Chain}).Get(ctx, &out)
	now := workflow.Now(ctx)
	if err != nil {
		if cancelled(ctx, err) {
			return err
		}
		lc.st.State, lc.st.LastError = ChainDegraded, err.Error()
		workflow.GetLogger(ctx).Warn("log backup failed: the next tick tries again", "db", lc.in.Database, "error", err)
		lc.refreshLag(now)
		lc.copyDue = lc.copyDue || lc.st.CopiedThrough < lc.st.LastLog
		return nil
	}
	lc.st.LastError = ""
	lc.st.Every = out.Every // as configured now: the next timer follows a change

	if out.Chain != 0 && out.Chain != lc.st.Chain {
		lc.st.Chain, lc.st.CopiedThrough = out.Chain, 0
	}
	lc.st.Foreign = out.Foreign
	if out.Server != "" {
		lc.st.Server = out.Server
	}
	if out.Number > 0 {
		lc.st.LastLog, lc.st.LastLSN = out.Number, out.LastLSN
		lc.st.LastLogStart, lc.st.LastLogFinish = out.Start, out.Finish
		lc.copyDue = true
	}
	lc.st.Break = out.Break
	switch {
	case out.NeedFull:
		lc.st.State = ChainBroken
		lc.requestFull(ctx)
	default:
		lc.st.State = ChainOK
		if lc.st.CopyError != "" {
			lc.st.State = ChainDegraded
		}
	}
	lc.refreshLag(now)
	lc.copyDue = lc.copyDue || lc.st.Chain > 0 && lc.st.CopiedThrough < lc.st.LastLog
	return nil
}

func (lc *logChain) refreshLag(now time.Time) {
	if !lc.st.LastLogStart.IsZero() {
		lc.st.Lag = now.Sub(lc.st.LastLogStart)
	}
	if p := lc.st.Proof; p != nil && !p.ThroughStart.IsZero() {
		lc.st.ProofLag = now.Sub(p.ThroughStart)
	}
}

// copyLane copies the chain's written log backups whenever a tick left
// some, one CopyLogs at a time, beside the ticks: a slow remote site never
// delays the next log backup. A failed copy is tried again after the next
// tick (CopyLogs is idempotent: it copies what the record says is not yet
// copied).
func (lc *logChain) copyLane(ctx workflow.Context) {
	for {
		if err := workflow.Await(ctx, func() bool { return lc.copyDue || lc.stopping }); err != nil {
			return // cancelled
		}
		if !lc.copyDue {
			return
		}
		lc.copyDue, lc.copying = false, true
		var out logs.CopyLogsOutput
		err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout:    30 * time.Minute,
			ScheduleToCloseTimeout: time.Hour,
			HeartbeatTimeout:       time.Minute,
			TaskQueue:              lc.plan.CopyQueue,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: 5 * time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
				MaximumAttempts: 5, NonRetryableErrorTypes: activities.NonRetryableErrorTypes},
			Summary: fmt.Sprintf("copy log backups of %s to %s", tsql.Printable(lc.in.Database), lc.plan.CopyTo),
		}), la.CopyLogs, logs.CopyLogsInput{Database: lc.in.Database, Instance: lc.in.Instance, Chain: lc.st.Chain}).Get(ctx, &out)
		lc.copying = false
		switch {
		case err != nil && cancelled(ctx, err):
			return
		case err != nil:
			lc.st.CopyError = err.Error()
			if lc.st.State == ChainOK {
				lc.st.State = ChainDegraded
			}
			workflow.GetLogger(ctx).Warn("log backups not copied: the next tick tries again", "db", lc.in.Database, "error", err)
		default:
			lc.st.CopyError = ""
			if out.Chain == lc.st.Chain {
				lc.st.CopiedThrough = max(lc.st.CopiedThrough, out.Through)
			}
			if out.To != "" {
				lc.st.CopyTo = out.To
			}
			if lc.st.State == ChainDegraded && lc.st.LastError == "" {
				lc.st.State = ChainOK
			}
			if len(out.Copied) > 0 {
				lc.proofCopied(ctx)
			}
		}
		lc.details(ctx)
	}
}

// drain ends the run's work before it continues as new: the copy lane
// runs the copy the last tick made due and finishes its copy in flight,
// and a cycle start under way is acknowledged (activities and child
// starts left behind would be lost: an activity scheduled in the task
// that continues as new is dropped with the run).
func (lc *logChain) drain(ctx workflow.Context) error {
	lc.stopping = true
	// Runs before this version continued as new past a copy made due by
	// their last tick.
	whole := workflow.GetVersion(ctx, "logchain-drain-due-copy", workflow.DefaultVersion, 1) >= 1
	return workflow.Await(ctx, func() bool {
		return (!whole || !lc.copyDue) && !lc.copying && !lc.fullStarting && !lc.proofStarting && !lc.scratchStarting
	})
}

// requestFull starts a BackupCycle for the full backup that begins the
// next chain: a child under the database's cycle id, abandoned (it outlives
// this run's continue-as-new and is not cancelled with it). One cycle per
// database runs at a time, so when one already runs its full serves; a
// cycle that ended without one is started again at most every
// fullRequestEvery.
func (lc *logChain) requestFull(ctx workflow.Context) {
	now := workflow.Now(ctx)
	if lc.fullStarting || lc.fullRunning || !lc.st.FullRequestedAt.IsZero() && now.Sub(lc.st.FullRequestedAt) < fullRequestEvery {
		return
	}
	id := CycleWorkflowID(lc.in.Instance, lc.in.Database)
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		StaticSummary:         CycleSummary(lc.in.Instance, lc.in.Database, "", "") + " (full backup for a new log chain)",
		TypedSearchAttributes: temporal.NewSearchAttributes(AttrDatabase.ValueSet(lc.in.Database), AttrInstance.ValueSet(lc.in.Instance)),
	})
	child := workflow.ExecuteChildWorkflow(cctx, BackupCycleName, CycleInput{Database: lc.in.Database, Instance: lc.in.Instance})
	lc.fullStarting = true
	lc.st.FullRequested, lc.st.FullRequestedAt = id, now
	workflow.Go(ctx, func(g workflow.Context) {
		var exec workflow.Execution
		err := child.GetChildWorkflowExecution().Get(g, &exec)
		lc.fullStarting = false
		switch {
		case temporal.IsWorkflowExecutionAlreadyStartedError(err):
			// A cycle of the database runs: its full starts the chain.
			workflow.GetLogger(ctx).Info("a cycle of the database already runs: its full backup starts the next log chain", "db", lc.in.Database)
			return
		case err != nil:
			lc.st.LastError = "full backup for a new log chain not started: " + err.Error()
			return
		}
		lc.fullRunning = true
		_ = child.Get(g, nil)
		lc.fullRunning = false
	})
}

// phaseOf is the database's offset within each period of every: fixed per
// (instance, database), so a fleet's log backups spread over the period.
// Whole seconds.
func phaseOf(instance, database string, every time.Duration) time.Duration {
	secs := int64(every / time.Second)
	if secs <= 1 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(instance + "\x00" + database))
	return time.Duration(h.Sum64()%uint64(secs)) * time.Second
}

// nextTick is the first instant after now that lies phase past a multiple
// of every (counted from the Unix epoch, UTC): ticks missed while a backup
// ran long are skipped, not caught up.
func nextTick(now time.Time, every, phase time.Duration) time.Time {
	if every <= 0 {
		every = time.Minute
	}
	base := now.Add(-phase).Truncate(every).Add(phase)
	for !base.After(now) {
		base = base.Add(every)
	}
	return base
}

// details shows the chain in the Web UI ("Current details"), in Markdown.
func (lc *logChain) details(ctx workflow.Context) {
	s := lc.st
	out := fmt.Sprintf("**%s** on **%s** · log chain **%s**", tsql.Printable(s.Database), s.Instance, s.State)
	if s.Chain > 0 {
		out += fmt.Sprintf(" · chain **%d**", s.Chain)
	}
	out += "\n\n"
	if s.LastLog > 0 {
		out += fmt.Sprintf("last log **%d** (to LSN %s) started %s · lag %s · copied through %d to %s\n\n", s.LastLog, s.LastLSN,
			s.LastLogStart.UTC().Format(time.RFC3339), s.Lag.Round(time.Second), s.CopiedThrough, s.CopyTo)
	}
	if !s.NextTick.IsZero() {
		out += fmt.Sprintf("every %s · next %s · tick %d of this run\n", s.Every, s.NextTick.UTC().Format(time.RFC3339), s.Ticks)
	}
	if s.Break != nil {
		out += fmt.Sprintf("\n**broken:** %s: %s\n", s.Break.Reason, s.Break.Detail)
	}
	for _, f := range s.Foreign {
		out += fmt.Sprintf("\nforeign log backup: %s (%s, %s)\n", f.Path, f.Tool, f.Start.UTC().Format(time.RFC3339))
	}
	if p := s.Proof; p != nil {
		out += fmt.Sprintf("\nproof **%s**: through log %d · lag %s", p.Mode, p.Through, s.ProofLag.Round(time.Second))
		if p.Standby != "" {
			out += fmt.Sprintf(" · standby %s on %s", tsql.Printable(p.Standby), p.VerifyInstance)
		}
		if p.Error != "" {
			out += " · **error:** " + p.Error
		}
		out += "\n"
	}
	if s.LastError != "" {
		out += "\n**error:** " + s.LastError + "\n"
	}
	if s.CopyError != "" {
		out += "\n**copy error:** " + s.CopyError + "\n"
	}
	workflow.SetCurrentDetails(ctx, out)
}
