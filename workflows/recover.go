package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/logs"
	"github.com/backupcycle/backupcycle/activities/recover"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Recover restores a database to a point in time, or to the newest point
// its backups reach, on an instance of the operator's choice: the plan
// (the newest verified full before the point and the log backups that
// reach it, from every backup server it can read, and every check that
// would make the restore fail late), the full, each log backup in order,
// then RECOVERY. Each step is an activity that finds what an earlier
// attempt left (package activities/recover): a worker, target or Temporal
// crash anywhere resumes without restoring anything twice. Its progress
// (step, log n of m, the full's percent, an ETA from the measured rates)
// is the `recover` query and the Web UI's current details; its result the
// measured time to recover and the recovery point reached. Before a step
// has a measured rate, the ETA is the plan's prediction of it
// (recover.Predict: the rates the database's sets and its newest drill
// measured).

// Recover names: the workflow type and its query.
const (
	RecoverName  = "Recover"
	RecoverQuery = "recover"
)

// RecoverInput is a recover's request (the Web UI's JSON input: see the
// README, "The bad night").
type RecoverInput = recover.Request

// ra is only used to name the recover's activity methods.
var ra *recover.Activities

// Recover outcomes.
const (
	RecoverRunning   = "running"
	RecoverRecovered = "recovered" // online at the recovery point
	RecoverRestoring = "restoring" // left RESTORING (norecovery)
	RecoverFailed    = "failed"
)

// RecoverWorkflowID is the id of a recover into database name on target
// instance: recover/<instance>/<name>, escaped as LogChainWorkflowID is.
// One id per target database: Temporal runs one recover into it at a
// time.
func RecoverWorkflowID(instance, name string) string { return pathID("recover", instance, name) }

// RecoverTimes are the measured times of a recover's steps.
type RecoverTimes struct {
	Plan   time.Duration `json:"plan"`
	Full   time.Duration `json:"full"`
	Diff   time.Duration `json:"diff,omitempty"`
	Logs   time.Duration `json:"logs"`
	Finish time.Duration `json:"finish"`
	// Total is from the start of the workflow to its end: the measured
	// time to recover.
	Total time.Duration `json:"total"`
}

// RecoverStatus is what the `recover` query returns, the Web UI's current
// details show and the workflow returns at its end.
type RecoverStatus struct {
	Database string `json:"database"`
	Instance string `json:"instance,omitempty"`
	Target   string `json:"target"`
	Name     string `json:"name"`
	// Point is what was asked: "latest" or an instant.
	Point   string `json:"point"`
	Step    string `json:"step"`
	Outcome string `json:"outcome"`
	// Sequence is the full restored (FullGUID its backup set GUID),
	// FullServer where it was read;
	// FullPercent the RESTORE's progress. Servers are every backup server
	// a file was read from.
	Sequence    int64    `json:"sequence,omitempty"`
	FullGUID    string   `json:"full_guid,omitempty"`
	FullServer  string   `json:"full_server,omitempty"`
	FullPercent float64  `json:"full_percent,omitempty"`
	Servers     []string `json:"servers,omitempty"`
	// LogsDone of LogsTotal log backups restored (FirstLog to LastLog of
	// Chain); CurrentLog is being restored now.
	Chain      int64 `json:"chain,omitempty"`
	FirstLog   int64 `json:"first_log,omitempty"`
	LastLog    int64 `json:"last_log,omitempty"`
	LogsTotal  int   `json:"logs_total"`
	LogsDone   int   `json:"logs_done"`
	CurrentLog int64 `json:"current_log,omitempty"`
	// BytesTotal are the backup files the plan reads, BytesDone those
	// restored so far; LogBytes those of the logs restored, LogFastest
	// the shortest time one of them took (from the end of the one before;
	// logs an earlier attempt restored not counted): what a drill
	// records for the next prediction's per-log cost.
	BytesTotal int64         `json:"bytes_total"`
	BytesDone  int64         `json:"bytes_done"`
	LogBytes   int64         `json:"log_bytes,omitempty"`
	LogFastest time.Duration `json:"log_fastest,omitempty"`
	// ETA is the time left, from the rates measured so far (the full's
	// percent and bytes per second, then the logs' mean time each), and
	// from Predicted where nothing is measured yet.
	ETA   time.Duration `json:"eta"`
	Times RecoverTimes  `json:"times"`
	// Predicted is each step's time as the plan predicted it before the
	// restore (nil: a plan made before recovers predicted).
	Predicted *catalog.RecoveryPrediction `json:"predicted,omitempty"`
	// StopAt is the STOPAT instant (zero for the latest);
	// RecoveryPoint the newest instant every commit before which the
	// restore holds, RecoveryPointBound the instant no commit after which
	// it holds (the same for an instant; for the latest, the last backup's
	// start and finish), and RecoveryPointFrom how it is known.
	StopAt             time.Time `json:"stop_at,omitzero"`
	RecoveryPoint      time.Time `json:"recovery_point,omitzero"`
	RecoveryPointBound time.Time `json:"recovery_point_bound,omitzero"`
	RecoveryPointFrom  string    `json:"recovery_point_from,omitempty"`
	// TailLog is the number in the chain of the tail-log backup this
	// recover took (0: none).
	TailLog int64 `json:"tail_log,omitempty"`
	// StoppedAt is the log in which STOPAT was reached (later logs were
	// not needed).
	StoppedAt int64 `json:"stopped_at,omitempty"`
	// Skipped and Reattached count the steps an earlier attempt had done
	// (not restored again) or left running (waited for).
	Skipped    int `json:"skipped,omitempty"`
	Reattached int `json:"reattached,omitempty"`
	// LogsRestored is how many log backups msdb says were restored into
	// the database since its full (each once).
	LogsRestored int       `json:"logs_restored,omitempty"`
	State        string    `json:"state,omitempty"`
	DataDir      string    `json:"data_dir,omitempty"`
	LogDir       string    `json:"log_dir,omitempty"`
	Replaces     string    `json:"replaces,omitempty"`
	Unreachable  []string  `json:"unreachable,omitempty"`
	Warnings     []string  `json:"warnings,omitempty"`
	LastError    string    `json:"last_error,omitempty"`
	Waiting      string    `json:"waiting,omitempty"` // what a step waits for (a backup server), and why
	Started      time.Time `json:"started"`
}

// recoverRun is one run's state.
type recoverRun struct {
	st        RecoverStatus
	wait      bool // a step that cannot reach its backup server waits for it (exec)
	stepBegan time.Time
	fullBytes int64
	diffBytes int64
	logBytes  int64 // of the logs done
}

// Recover runs one recover (see the top of this file).
func Recover(ctx workflow.Context, in RecoverInput) (RecoverStatus, error) {
	r := &recoverRun{st: RecoverStatus{Database: in.Database, Instance: in.Instance, Target: in.ToInstance, Name: in.Name(),
		Point: pointText(in), Step: recover.StepPlan, Outcome: RecoverRunning, Started: workflow.Now(ctx)}}
	if err := workflow.SetQueryHandler(ctx, RecoverQuery, func() (RecoverStatus, error) { return r.st, nil }); err != nil {
		return r.st, err
	}
	workflow.Go(ctx, r.progress)
	if err := in.Check(); err != nil {
		return r.fail(ctx, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrInvalidConfig, nil))
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrDatabase.ValueSet(in.Database), AttrOutcome.ValueSet(RecoverRunning))
	r.step(ctx, recover.StepPlan)
	// A step that cannot reach its backup server waits for it at a short
	// pace, saying so in the status; only runs started with it get the
	// commands of that wait.
	r.wait = workflow.GetVersion(ctx, "recover-server-wait", workflow.DefaultVersion, 1) == 1

	planOpts := workflow.ActivityOptions{
		// Reading the servers of a site that is gone takes its timeouts;
		// none readable is retried (NoBackupServerReachable) a while.
		StartToCloseTimeout: 15 * time.Minute, ScheduleToCloseTimeout: time.Hour, HeartbeatTimeout: time.Minute,
		RetryPolicy: retry(10*time.Second, 10), Summary: "plan the recover of " + tsql.Printable(in.Database),
	}
	var p recover.Plan
	err := r.exec(ctx, planOpts, ra.PlanRecover, recover.PlanInput{Request: in}, &p)
	if err != nil {
		return r.fail(ctx, err)
	}
	if in.TailLog {
		// Everything checked, the tail of the source's log is backed up
		// (leaving it RESTORING) and the plan made again to end with it.
		// Only a run asked for a tail gets these commands.
		r.planned(ctx, p)
		r.step(ctx, recover.StepTailLog)
		tail, err := r.tailLog(ctx, p)
		if err != nil {
			return r.fail(ctx, err)
		}
		r.st.TailLog = tail.Number
		r.step(ctx, recover.StepPlan)
		if err := r.exec(ctx, planOpts, ra.PlanRecover, recover.PlanInput{Request: in, Tail: tail}, &p); err != nil {
			return r.fail(ctx, err)
		}
	}
	r.planned(ctx, p)

	target := recover.Target{Database: p.Database, Instance: p.Instance, To: p.Target, Name: p.Name, AsGiven: in.As != "", Replace: in.Replace}
	long := func(timeout time.Duration, summary string) workflow.ActivityOptions {
		return workflow.ActivityOptions{StartToCloseTimeout: timeout, ScheduleToCloseTimeout: 3 * timeout,
			HeartbeatTimeout: p.HeartbeatTimeout, RetryPolicy: retry(5*time.Second, 20), Summary: summary}
	}
	full := p.Restore.Full()
	r.step(ctx, recover.StepFull)
	var fo recover.StepOutput
	err = r.exec(ctx, long(p.RestoreTimeout, fmt.Sprintf("restore set %d into %s on %s", full.Sequence, tsql.Printable(p.Name), p.Target)),
		ra.RestoreFull, recover.RestoreFullInput{Target: target, Step: full, Moves: p.Moves, BufferCount: p.BufferCount,
			MaxTransferSize: p.MaxTransferSize, Intent: p.Intent}, &fo)
	if err != nil {
		return r.fail(ctx, err)
	}
	r.st.Times.Full, r.st.FullPercent, r.st.FullServer = workflow.Now(ctx).Sub(r.stepBegan), 100, fo.Server
	r.st.BytesDone += full.Bytes
	r.count(fo)

	if d, ok := p.Restore.Diff(); ok {
		// Only a plan with a differential gets this command; plans made
		// before differentials existed have none, so their histories
		// replay unchanged.
		r.step(ctx, recover.StepDiff)
		var do recover.StepOutput
		err = r.exec(ctx, long(p.RestoreTimeout, fmt.Sprintf("restore differential set %d into %s", d.Sequence, tsql.Printable(p.Name))),
			ra.RestoreDiff, recover.RestoreDiffInput{Target: target, Step: d, Copy: fo.Copy}, &do)
		if err != nil {
			return r.fail(ctx, err)
		}
		r.st.Times.Diff = workflow.Now(ctx).Sub(r.stepBegan)
		r.st.BytesDone += d.Bytes
		r.count(do)
	}

	logs := p.Restore.Logs()
	r.step(ctx, recover.StepLogs)
	prev := r.stepBegan
	for i, l := range logs {
		r.st.CurrentLog = l.Number
		r.eta(ctx)
		var lo recover.StepOutput
		err := r.exec(ctx, long(p.LogTimeout, fmt.Sprintf("restore log %d of %d (log %d of chain %d) into %s", i+1, len(logs), l.Number,
			l.Chain, tsql.Printable(p.Name))),
			ra.RestoreLog, recover.RestoreLogInput{Target: target, Step: l, Index: i + 1, Count: len(logs), StopAt: p.Restore.StopAt,
				StopAtOffsetMinutes: p.Restore.StopAtOffsetMinutes, Copy: fo.Copy}, &lo)
		if err != nil {
			return r.fail(ctx, err)
		}
		r.st.LogsDone++
		r.st.BytesDone += l.Bytes
		r.logBytes += l.Bytes
		r.st.LogBytes = r.logBytes
		r.count(lo)
		now := workflow.Now(ctx)
		if took := now.Sub(prev); !lo.Skipped && !lo.Reattached && (r.st.LogFastest == 0 || took < r.st.LogFastest) {
			r.st.LogFastest = took
		}
		prev = now
		r.st.Times.Logs = now.Sub(r.stepBegan)
		if lo.Reached {
			// STOPAT was reached inside this log: the later ones hold
			// nothing the point needs.
			r.st.StoppedAt = l.Number
			break
		}
	}
	r.st.CurrentLog = 0

	r.step(ctx, recover.StepFinish)
	var out recover.FinishOutput
	err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Minute, HeartbeatTimeout: p.HeartbeatTimeout,
		RetryPolicy: retry(10*time.Second, 20), Summary: "recover " + tsql.Printable(p.Name) + " on " + p.Target,
	}), ra.FinishRecover, recover.FinishInput{Target: target, Copy: fo.Copy, NoRecovery: in.NoRecovery}).Get(ctx, &out)
	if err != nil {
		return r.fail(ctx, err)
	}
	now := workflow.Now(ctx)
	r.st.Times.Finish, r.st.Times.Total = now.Sub(r.stepBegan), now.Sub(r.st.Started)
	r.st.State, r.st.LogsRestored, r.st.ETA = out.State, len(out.LogsRestored), 0
	r.st.Outcome = RecoverRecovered
	if in.NoRecovery {
		r.st.Outcome = RecoverRestoring
	}
	r.st.Step = recover.StepDone
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrStep.ValueSet(recover.StepDone), AttrOutcome.ValueSet(r.st.Outcome))
	r.details(ctx)
	return r.st, nil
}

// serverAway are the failures of a step that a backup server (or the
// target's way to it) being away explains; serverWaitEvery is the pace at
// which such a step is tried again: a DBA sees the recover resume within
// seconds of the server's return, not after a backoff grown to minutes.
var serverAway = []string{activities.ErrBackupTargetUnreachable, activities.ErrNoBackupServerReachable}

const serverWaitEvery = 10 * time.Second

// exec runs a step's activity with o, waiting for its backup server in a
// run that does (r.wait, see awaitServer).
func (r *recoverRun) exec(ctx workflow.Context, o workflow.ActivityOptions, activity, in, out any) error {
	if !r.wait {
		return workflow.ExecuteActivity(withOptions(ctx, o), activity, in).Get(ctx, out)
	}
	return awaitServer(ctx, o, &r.st.Waiting, r.st.Step, activity, in, out)
}

// awaitServer runs a step's activity with o; a failure of serverAway ends
// the activity's own backoff: waiting says which server the step waits
// for, and the step is tried again every serverWaitEvery (the retries of
// one activity: the history does not grow with the wait) until o's bound
// over all attempts (ScheduleToClose) passes.
func awaitServer(ctx workflow.Context, o workflow.ActivityOptions, waiting *string, step string, activity, in, out any) error {
	first, rp := o, *o.RetryPolicy
	rp.NonRetryableErrorTypes = append(slices.Clone(rp.NonRetryableErrorTypes), serverAway...)
	first.RetryPolicy = &rp
	fctx := withOptions(ctx, first)
	until := workflow.Now(ctx).Add(workflow.GetActivityOptions(fctx).ScheduleToCloseTimeout)
	err := workflow.ExecuteActivity(fctx, activity, in).Get(ctx, out)
	left := until.Sub(workflow.Now(ctx)) - serverWaitEvery
	if err == nil || !slices.Contains(serverAway, errorType(err)) || left <= 0 {
		return err
	}
	*waiting = fmt.Sprintf("waits for the backup server, tried again every %s: %s", serverWaitEvery, applicationMessage(err))
	defer func() { *waiting = "" }()
	workflow.GetLogger(ctx).Warn("step waits for a backup server", "step", step, "error", applicationMessage(err))
	if err := workflow.Sleep(ctx, serverWaitEvery); err != nil {
		return err
	}
	again := o
	again.ScheduleToCloseTimeout = left
	again.RetryPolicy = &temporal.RetryPolicy{InitialInterval: serverWaitEvery, BackoffCoefficient: 1, MaximumInterval: serverWaitEvery,
		MaximumAttempts: int32(left/serverWaitEvery) + 1, NonRetryableErrorTypes: o.RetryPolicy.NonRetryableErrorTypes}
	return workflow.ExecuteActivity(withOptions(ctx, again), activity, in).Get(ctx, out)
}

// tailLog takes the tail-log backup of the plan's source as its log
// chain's next log backup (logs.BackupLog with Tail).
func (r *recoverRun) tailLog(ctx workflow.Context, p recover.Plan) (*recover.Tail, error) {
	var out logs.BackupLogOutput
	err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Minute, ScheduleToCloseTimeout: time.Hour, HeartbeatTimeout: time.Minute,
		RetryPolicy: retry(10*time.Second, 10), Summary: "tail-log backup of " + tsql.Printable(p.Database) + " WITH NORECOVERY",
	}), la.BackupLog, logs.BackupLogInput{Database: p.Database, Instance: p.Instance, Tail: true}).Get(ctx, &out)
	if err != nil {
		return nil, err
	}
	if out.Number == 0 || out.Break != nil {
		why := "no log backup was taken"
		if out.Break != nil {
			why = fmt.Sprintf("the log chain broke (%s: %s)", out.Break.Reason, out.Break.Detail)
		}
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"the tail-log backup of %s does not continue its log chain: %s; no restore reaches it", tsql.Printable(p.Database), why),
			activities.ErrRecoveryPointUnreachable, nil)
	}
	return &recover.Tail{Chain: out.Chain, Number: out.Number, Server: out.Server, Finish: out.Finish}, nil
}

func pointText(in RecoverInput) string {
	if in.Latest {
		return "latest"
	}
	return in.AsOf.UTC().Format(time.RFC3339Nano)
}

// planned takes the plan into the status.
func (r *recoverRun) planned(ctx workflow.Context, p recover.Plan) {
	s := &r.st
	s.Times.Plan = workflow.Now(ctx).Sub(r.stepBegan)
	s.Database, s.Instance, s.Target, s.Name = p.Database, p.Instance, p.Target, p.Name
	full := p.Restore.Full()
	s.Sequence, s.FullGUID, s.BytesTotal, r.fullBytes = full.Sequence, full.GUID, p.Restore.Bytes(), full.Bytes
	if d, ok := p.Restore.Diff(); ok {
		r.diffBytes = d.Bytes
	}
	s.Predicted = p.Predicted
	logs := p.Restore.Logs()
	s.LogsTotal = len(logs)
	if len(logs) > 0 {
		s.Chain, s.FirstLog, s.LastLog = logs[0].Chain, logs[0].Number, logs[len(logs)-1].Number
	}
	s.StopAt, s.RecoveryPoint, s.RecoveryPointFrom = p.Restore.StopAt, p.Restore.RecoveryPoint, p.Restore.RecoveryPointFrom
	s.RecoveryPointBound = p.Restore.RecoveryPointBound
	s.DataDir, s.LogDir, s.Replaces, s.Unreachable, s.Warnings = p.DataDir, p.LogDir, p.Replaces, p.Unreachable, p.Warnings
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrInstance.ValueSet(p.Instance), AttrSequence.ValueSet(full.Sequence))
}

// step starts a step: its time, the search attribute, the details.
func (r *recoverRun) step(ctx workflow.Context, step string) {
	r.st.Step, r.stepBegan = step, workflow.Now(ctx)
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrStep.ValueSet(step))
	r.eta(ctx)
}

// count adds a step's server, and its skipped or re-attached statement.
func (r *recoverRun) count(o recover.StepOutput) {
	if o.Server != "" && !slices.Contains(r.st.Servers, o.Server) {
		r.st.Servers = append(r.st.Servers, o.Server)
	}
	if o.Skipped {
		r.st.Skipped++
	}
	if o.Reattached {
		r.st.Reattached++
	}
}

// progress takes the full's RESTORE percent from its ProgressSignal.
func (r *recoverRun) progress(ctx workflow.Context) {
	ch := workflow.GetSignalChannel(ctx, activities.ProgressSignal)
	for {
		var p activities.StepProgress
		if !ch.Receive(ctx, &p) {
			return
		}
		if p.Step != recover.StepFull || r.st.Step != recover.StepFull || p.Sequence != r.st.Sequence {
			continue // late, of an earlier attempt or step
		}
		r.st.FullPercent = p.Percent
		r.eta(ctx)
	}
}

// eta estimates the time left from what was measured: during the full,
// its rate (percent per second) for the rest of it and, at its bytes per
// second, for the logs; then the mean time of the logs done for the logs
// left (before the first, the full's rate). Where the plan predicted the
// steps (Predicted), what is not measured yet is taken from it: the full
// before its first percent, the differential, the logs before the first
// (each log's cost and its bytes' rate), and the recovery after them.
func (r *recoverRun) eta(ctx workflow.Context) {
	s := &r.st
	el := workflow.Now(ctx).Sub(r.stepBegan)
	left := s.LogsTotal - s.LogsDone
	var logBytesLeft int64 = s.BytesTotal - r.fullBytes - r.logBytes
	p := s.Predicted
	if p == nil {
		switch {
		case s.Step == recover.StepFull && s.FullPercent > 0 && el >= time.Second:
			fullLeft := time.Duration(float64(el) * (100 - s.FullPercent) / s.FullPercent)
			rate := float64(r.fullBytes) * s.FullPercent / 100 / el.Seconds()
			s.ETA = fullLeft + bytesAt(logBytesLeft, rate)
		case s.Step == recover.StepLogs && s.LogsDone > 0:
			s.ETA = s.Times.Logs / time.Duration(s.LogsDone) * time.Duration(left)
		case s.Step == recover.StepLogs && s.Times.Full > 0:
			s.ETA = bytesAt(logBytesLeft, float64(r.fullBytes)/s.Times.Full.Seconds())
		default:
			s.ETA = 0
		}
		r.details(ctx)
		return
	}
	// The logs left as predicted: each one's cost and its bytes.
	logsLeft := plan.LogReplay{PerLog: p.LogOverhead, Rate: plan.StepRate{MBps: p.LogMBps}}.Duration(left, logBytesLeft-r.diffBytes)
	diff := p.Diff
	switch {
	case s.Step == recover.StepFull && s.FullPercent > 0 && el >= time.Second:
		s.ETA = time.Duration(float64(el)*(100-s.FullPercent)/s.FullPercent) + diff + logsLeft + p.Recovery
	case s.Step == recover.StepFull:
		s.ETA = max(p.Full-el, 0) + diff + logsLeft + p.Recovery
	case s.Step == recover.StepDiff:
		s.ETA = max(diff-el, 0) + logsLeft + p.Recovery
	case s.Step == recover.StepLogs && s.LogsDone > 0:
		s.ETA = s.Times.Logs/time.Duration(s.LogsDone)*time.Duration(left) + p.Recovery
	case s.Step == recover.StepLogs:
		s.ETA = max(logsLeft-el, 0) + p.Recovery
	case s.Step == recover.StepFinish:
		s.ETA = max(p.Recovery-el, 0)
	default:
		s.ETA = 0
	}
	r.details(ctx)
}

func bytesAt(b int64, perSecond float64) time.Duration {
	if perSecond <= 0 || b <= 0 {
		return 0
	}
	return time.Duration(float64(b) / perSecond * float64(time.Second))
}

// fail ends the run with err, its status saying why.
func (r *recoverRun) fail(ctx workflow.Context, err error) (RecoverStatus, error) {
	r.st.Outcome, r.st.LastError = RecoverFailed, err.Error()
	if t := errorType(err); t != "" {
		r.st.LastError = fmt.Sprintf("[%s] %s", t, applicationMessage(err))
	}
	r.st.Times.Total = workflow.Now(ctx).Sub(r.st.Started)
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrOutcome.ValueSet(RecoverFailed))
	r.details(ctx)
	return r.st, err
}

// applicationMessage is the message of the ApplicationError in err's
// chain (the activity's own words, without Temporal's wrapping).
func applicationMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	return err.Error()
}

// details shows the recover in the Web UI ("Current details"), in
// Markdown.
func (r *recoverRun) details(ctx workflow.Context) {
	s := r.st
	out := fmt.Sprintf("**recover %s** of %s into **%s** on **%s** · to %s · step **%s** · outcome **%s**\n\n",
		tsql.Printable(s.Database), s.Instance, tsql.Printable(s.Name), s.Target, s.Point, s.Step, s.Outcome)
	if s.Sequence != 0 {
		out += fmt.Sprintf("full: set %d", s.Sequence)
		if s.FullServer != "" {
			out += " from " + s.FullServer
		}
		if s.FullPercent > 0 && s.FullPercent < 100 {
			out += fmt.Sprintf(" · %.0f %%", s.FullPercent)
		}
		out += fmt.Sprintf(" · logs %d of %d", s.LogsDone, s.LogsTotal)
		if s.LogsTotal > 0 {
			out += fmt.Sprintf(" (chain %d, logs %d-%d)", s.Chain, s.FirstLog, s.LastLog)
		}
		if s.CurrentLog != 0 {
			out += fmt.Sprintf(" · restoring log %d", s.CurrentLog)
		}
		out += fmt.Sprintf(" · %s of %s", plan.FormatBytes(s.BytesDone), plan.FormatBytes(s.BytesTotal))
		if s.ETA > 0 {
			out += " · ETA " + plan.RoundDuration(s.ETA).String()
		}
		if s.Predicted != nil {
			out += " · predicted " + plan.RoundDuration(s.Predicted.Restore()).String()
		}
		out += "\n\n"
	}
	if !s.RecoveryPoint.IsZero() {
		out += fmt.Sprintf("recovery point %s (%s%s)\n\n", s.RecoveryPoint.UTC().Format(time.RFC3339), s.RecoveryPointFrom, s.boundText())
	}
	t := s.Times
	out += fmt.Sprintf("times: plan %s · full %s · logs %s · finish %s", t.Plan.Round(time.Second), t.Full.Round(time.Second),
		t.Logs.Round(time.Second), t.Finish.Round(time.Second))
	if t.Total > 0 {
		out += " · total " + t.Total.Round(time.Second).String()
	}
	if len(s.Unreachable) > 0 {
		out += "\n\nnot read: " + strings.Join(s.Unreachable, "; ")
	}
	if s.LastError != "" {
		out += "\n\n**error:** " + s.LastError
	}
	workflow.SetCurrentDetails(ctx, out)
}

// boundText is "; commits up to <bound> may also be in it" when the
// recovery point is a backup's start and the bound its finish, "" else.
func (s RecoverStatus) boundText() string {
	if s.RecoveryPointBound.After(s.RecoveryPoint) {
		return "; what committed up to " + s.RecoveryPointBound.UTC().Format(time.RFC3339Nano) + " may also be in it, nothing later"
	}
	return ""
}
