package workflows

import (
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/drill"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Drill is a recovery drill: the database recovered under a scratch name
// on the drill instance by a Recover (a child workflow: the Web UI shows
// it with its progress), its sanity checks (and CHECKDB) run on the copy,
// the copy dropped (also when a step failed; only the copy this drill
// created), and the drill recorded beside the manifests on every backup
// server read: what was restored, the point asked and reached, the
// measured time to recover and each step's time, the checks, the outcome.
// A Temporal Schedule per database with drill: starts it (the worker keeps
// the schedules); `starter drill` starts one now.

// Drill names: the workflow type and its query.
const (
	DrillName  = "Drill"
	DrillQuery = "drill"
)

// DrillInput is a drill's request.
type DrillInput = drill.Request

// da is only used to name the drill's activity methods.
var da *drill.Activities

// DrillWorkflowID is the id of a drill of (instance, database):
// drill/<instance>/<database>, one drill of a database at a time.
func DrillWorkflowID(instance, database string) string { return pathID("drill", instance, database) }

// launchDrill runs the drill as a child under the database's drill id;
// skipped when a drill runs there.
func launchDrill(ctx workflow.Context, id string, in DrillInput, st *DrillStatus) (DrillStatus, error) {
	st.Database, st.Instance, st.Step = in.Database, in.Instance, StepLaunch
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation:   true,
		StaticSummary:         "drill of " + tsql.Printable(in.Database) + " on " + in.Instance,
		TypedSearchAttributes: temporal.NewSearchAttributes(AttrDatabase.ValueSet(in.Database), AttrInstance.ValueSet(in.Instance)),
	})
	child := workflow.ExecuteChildWorkflow(cctx, DrillName, in)
	if err := child.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		if temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			st.Skipped = fmt.Sprintf("skipped: a drill of %s/%s is running as workflow %s; one drill of a database runs at a time",
				in.Instance, in.Database, id)
			st.HeldBy, st.Step = id, drill.StepDone
			workflow.GetLogger(ctx).Warn(st.Skipped)
			_ = workflow.UpsertTypedSearchAttributes(ctx, AttrStep.ValueSet(drill.StepDone), AttrOutcome.ValueSet(OutcomeSkipped))
			return *st, nil
		}
		return *st, err
	}
	var out DrillStatus
	err := child.Get(ctx, &out)
	out.RunBy = id
	if out.Step == "" {
		out.Database, out.Instance, out.Step = in.Database, in.Instance, drill.StepDone
	}
	*st = out
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrStep.ValueSet(drill.StepDone), AttrOutcome.ValueSet(out.Result.Outcome))
	return out, err
}

// DrillStatus is what the `drill` query returns and the workflow returns
// at its end.
type DrillStatus struct {
	Database string `json:"database"`
	Instance string `json:"instance,omitempty"`
	Target   string `json:"target,omitempty"`
	Name     string `json:"name,omitempty"`
	From     string `json:"from,omitempty"`
	Point    string `json:"point,omitempty"`
	Step     string `json:"step"`
	// RecoverID is the child Recover's workflow id.
	RecoverID string `json:"recover_id,omitempty"`
	// Recover is the child's result (its times, the recovery point).
	Recover *RecoverStatus     `json:"recover,omitempty"`
	Checks  *drill.CheckOutput `json:"checks,omitempty"`
	// Result is the record written.
	Result   catalog.DrillResult `json:"result"`
	Recorded []string            `json:"recorded,omitempty"`
	Leftover string              `json:"leftover,omitempty"`
	Waiting  string              `json:"waiting,omitempty"` // what the drill's own step waits for (a backup server), and why; its Recover's says its own
	// Skipped is set, and nothing else was done, when this start found a
	// drill of the database running under its workflow id (HeldBy).
	Skipped string `json:"skipped,omitempty"`
	HeldBy  string `json:"held_by,omitempty"`
	// RunBy is the workflow id that ran the drill when this start
	// launched it under the database's own (a scheduled start).
	RunBy string `json:"run_by,omitempty"`
}

// Drill runs one drill (see the top of this file).
func Drill(ctx workflow.Context, in DrillInput) (DrillStatus, error) {
	info := workflow.GetInfo(ctx)
	started := workflow.Now(ctx)
	st := DrillStatus{Database: in.Database, Instance: in.Instance, Step: drill.StepPrepare,
		Result: catalog.DrillResult{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID, StartedAt: started.UTC()}}
	if err := workflow.SetQueryHandler(ctx, DrillQuery, func() (DrillStatus, error) { return st, nil }); err != nil {
		return st, err
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrDatabase.ValueSet(in.Database), AttrOutcome.ValueSet(RecoverRunning))
	if err := in.Check(); err != nil {
		return st, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrInvalidConfig, nil)
	}
	// One drill of a database at a time: a drill clears what an earlier
	// one left under the scratch name, so a second one running beside it
	// would drop the copy the first is checking. The id
	// drill/<instance>/<database> is the lock: a start under another id
	// (a schedule appends its time to it; a Web UI start may spell the
	// names otherwise) runs the drill as a child under that id, or is
	// skipped while one runs there.
	if workflow.GetVersion(ctx, "drill-one-at-a-time", workflow.DefaultVersion, 1) == 1 {
		var canon DrillInput
		err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, ScheduleToCloseTimeout: 10 * time.Minute,
			RetryPolicy: retry(5*time.Second, 10), Summary: "resolve the drill of " + tsql.Printable(in.Database)}),
			da.ResolveDrill, in).Get(ctx, &canon)
		if err != nil {
			return st, err
		}
		if id := DrillWorkflowID(canon.Instance, canon.Database); info.WorkflowExecution.ID != id {
			return launchDrill(ctx, id, canon, &st)
		}
		in = canon
	}
	res := &st.Result
	step := func(name string) time.Time {
		st.Step = name
		_ = workflow.UpsertTypedSearchAttributes(ctx, AttrStep.ValueSet(name))
		return workflow.Now(ctx)
	}

	began := step(drill.StepPrepare)
	var p drill.Plan
	prepare := workflow.ActivityOptions{StartToCloseTimeout: 15 * time.Minute, ScheduleToCloseTimeout: time.Hour,
		HeartbeatTimeout: time.Minute, RetryPolicy: retry(10*time.Second, 10), Summary: "prepare the drill of " + tsql.Printable(in.Database)}
	var err error
	// No backup server readable: the drill waits for one at a short pace,
	// saying so (only drills started with it get the commands of the wait).
	if workflow.GetVersion(ctx, "drill-server-wait", workflow.DefaultVersion, 1) == 1 {
		err = awaitServer(ctx, prepare, &st.Waiting, drill.StepPrepare, da.PrepareDrill, in, &p)
	} else {
		err = workflow.ExecuteActivity(withOptions(ctx, prepare), da.PrepareDrill, in).Get(ctx, &p)
	}
	res.Steps.Prepare = workflow.Now(ctx).Sub(began)
	if err != nil {
		// Nothing was restored, and nothing is known of where it would
		// have been recorded: the workflow's failure says why.
		return st, err
	}
	st.Database, st.Instance, st.Target, st.Name, st.From, st.Point, st.Leftover = p.Database, p.Instance, p.Target, p.Name, p.From, p.Point, p.Leftover
	res.Instance, res.Database, res.From, res.Point, res.Servers, res.CheckDB = p.Target, p.Name, p.From, p.Point, p.Servers, p.CheckDB
	// What the plan predicted of the steps before they ran.
	res.Predicted = p.Predicted
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrInstance.ValueSet(p.Instance))
	cp := drill.Copy{Database: p.Database, Instance: p.Instance, Target: p.Target, Name: p.Name, Scratch: p.Scratch, Fulls: p.Fulls}

	// A drill from the immutable copy stages its objects on a backup
	// server first (removed after the drill, whatever happened). Only such
	// a drill gets these commands: histories of the others replay.
	staged := p.Immutable != nil && workflow.GetVersion(ctx, "drill-from-immutable", workflow.DefaultVersion, 1) == 1
	if staged {
		res.Immutable = &catalog.DrillImmutable{Store: p.Immutable.Store, Location: p.Immutable.Location, Sequence: p.Immutable.Sequence,
			Objects: p.Immutable.Objects(), Staging: p.Immutable.Staging, Dir: p.Immutable.Dir}
		step(drill.StepStage)
		err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 6 * time.Hour, HeartbeatTimeout: 2 * time.Minute,
			RetryPolicy: retry(10*time.Second, 20), Summary: fmt.Sprintf("stage set %d of %s from %s on %s", p.Immutable.Sequence,
				tsql.Printable(p.Database), p.Immutable.Store, p.Immutable.Staging)}),
			da.StageDrill, p.StageInput()).Get(ctx, nil)
	}

	if err == nil { // staging failed: no Recover
		step(drill.StepRecover)
		st.RecoverID = RecoverWorkflowID(p.Target, p.Name)
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            RecoverWorkflowID(p.Target, p.Name),
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_TERMINATE,
		StaticSummary:         fmt.Sprintf("drill: recover %s into %s on %s to %s", tsql.Printable(p.Database), tsql.Printable(p.Name), p.Target, p.Point),
		TypedSearchAttributes: temporal.NewSearchAttributes(AttrDatabase.ValueSet(p.Database), AttrInstance.ValueSet(p.Instance)),
	})
	var rs RecoverStatus
	if err == nil {
		err = workflow.ExecuteChildWorkflow(cctx, RecoverName, p.RecoverRequest()).Get(ctx, &rs)
	}
	if err == nil {
		st.Recover = &rs
		t := rs.Times
		res.RTO, res.Steps.Plan, res.Steps.Full, res.Steps.Diff, res.Steps.Logs, res.Steps.Recovery = t.Total, t.Plan, t.Full, t.Diff, t.Logs, t.Finish
		res.LogBytes, res.LogFastest = rs.LogBytes, rs.LogFastest
		if rs.Predicted != nil {
			// The Recover's own, of the restore it chose (a log taken
			// since the drill's plan is in it), made before it restored.
			res.Predicted = rs.Predicted
		}
		res.RecoveryPoint, res.RecoveryPointFrom, res.Sequence, res.Bytes = rs.RecoveryPoint.UTC(), rs.RecoveryPointFrom, rs.Sequence, rs.BytesDone
		if !rs.RecoveryPointBound.IsZero() {
			res.RecoveryPointBound = rs.RecoveryPointBound.UTC()
		}
		if rs.LogsDone > 0 {
			res.Chain, res.FirstLog, res.LastLog = rs.Chain, rs.FirstLog, rs.FirstLog+int64(rs.LogsDone)-1
		}
		if len(rs.Servers) > 0 {
			res.Servers = rs.Servers
		}

		began = step(drill.StepChecks)
		var co drill.CheckOutput
		err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 6 * time.Hour, HeartbeatTimeout: 2 * time.Minute,
			RetryPolicy: retry(10*time.Second, 10), Summary: "check the drill copy " + tsql.Printable(p.Name) + " on " + p.Target}),
			da.CheckDrill, drill.CheckInput{Copy: cp, Sequence: rs.Sequence, RecoveryPoint: rs.RecoveryPoint, CheckDB: p.CheckDB}).Get(ctx, &co)
		res.Steps.Checks = workflow.Now(ctx).Sub(began)
		if err == nil {
			st.Checks = &co
			res.Sanity, res.CheckDBClean = co.Sanity, co.CheckDB
		}
	}
	failed := err

	// The copy goes, whatever happened, unless the drill is cancelled
	// while it is being dropped: a disconnected context outlives a
	// cancellation.
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	began = step(drill.StepDrop)
	var do drill.DropOutput
	derr := workflow.ExecuteActivity(withOptions(dctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Minute, HeartbeatTimeout: 2 * time.Minute,
		RetryPolicy: retry(10*time.Second, 10), Summary: "drop the drill copy " + tsql.Printable(p.Name) + " on " + p.Target}),
		da.DropDrill, cp).Get(dctx, &do)
	res.Steps.Drop = workflow.Now(dctx).Sub(began)
	res.Dropped, res.DropError = do.Dropped, do.Why
	if derr != nil {
		res.DropError = applicationMessage(derr)
	}
	if staged {
		step(drill.StepUnstage)
		uerr := workflow.ExecuteActivity(withOptions(dctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Minute,
			ScheduleToCloseTimeout: 2 * time.Hour, RetryPolicy: retry(10*time.Second, 20),
			Summary: "remove the files staged for the drill of " + tsql.Printable(p.Database) + " on " + p.Immutable.Staging}),
			da.UnstageDrill, p.StageInput()).Get(dctx, nil)
		res.Immutable.Removed = uerr == nil
		if uerr != nil && derr == nil {
			derr = uerr
		}
	}

	if st.Recover != nil {
		// The restore's steps were measured: each against its prediction.
		res.PredictionError = catalog.PredictionErrors(res.Predicted, res.Steps, res.CheckDBClean)
	}
	res.Outcome = catalog.DrillPassed
	if failed != nil {
		res.Outcome, res.ErrorType, res.Error = catalog.DrillFailed, errorType(failed), applicationMessage(failed)
	}
	res.At = workflow.Now(dctx).UTC()
	step(drill.StepRecord)
	scratch := p.Scratch
	if scratch != nil && st.Recover != nil {
		s := *scratch
		s.BackupSetGUID = st.Recover.FullGUID
		scratch = &s
	}
	rerr := workflow.ExecuteActivity(withOptions(dctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Minute, ScheduleToCloseTimeout: time.Hour,
		RetryPolicy: retry(10*time.Second, 20), Summary: "record the drill of " + tsql.Printable(p.Database)}),
		da.RecordDrill, drill.RecordInput{Database: p.Database, Instance: p.Instance, Servers: p.Servers, Result: *res, Scratch: scratch}).Get(dctx, &st.Recorded)
	st.Step = drill.StepDone
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrStep.ValueSet(drill.StepDone), AttrOutcome.ValueSet(res.Outcome))
	switch {
	case failed != nil:
		return st, failed
	case derr != nil:
		return st, derr
	case rerr != nil:
		return st, rerr
	}
	return st, nil
}
