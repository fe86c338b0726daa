package workflows

import (
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	cycleacts "github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/metrics"
)

// How a cycle starts: launched under the database's own id, skipped, a
// failed set resumed, the database's name resolved, the plan.

// launch runs the cycle under the database's own workflow id, as a child of
// this start, or reports the cycle that holds that id. Cancelling this start
// cancels the cycle it launched.
func (c *cycle) launch(ctx workflow.Context, id string, plan activities.Plan) (CycleResult, error) {
	c.step(ctx, StepLaunch)
	in := c.in
	in.Instance = plan.Instance
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation:   true,
		StaticSummary:         CycleSummary(plan.Instance, in.Database, plan.Rotation[0], plan.Remote),
		TypedSearchAttributes: temporal.NewSearchAttributes(AttrDatabase.ValueSet(in.Database), AttrInstance.ValueSet(plan.Instance)),
	})
	child := workflow.ExecuteChildWorkflow(cctx, BackupCycleName, in)
	var exec workflow.Execution
	if err := child.GetChildWorkflowExecution().Get(ctx, &exec); err != nil {
		if temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			msg := fmt.Sprintf("skipped: a cycle of %s/%s is running as workflow %s; one cycle per database runs at a time",
				plan.Instance, in.Database, id)
			c.log(ctx).Warn(msg)
			c.outcome(ctx, OutcomeSkipped)
			metrics.CycleEnded(workflow.GetMetricsHandler(ctx), metrics.OutcomeSkipped, "")
			c.step(ctx, activities.StepDone)
			return CycleResult{Database: in.Database, Instance: plan.Instance, Skipped: msg, HeldBy: id}, nil
		}
		return CycleResult{}, c.end(ctx, err)
	}
	c.log(ctx).Info("cycle launched under the database's workflow id", "workflow_id", id, "run_id", exec.RunID)
	var res CycleResult
	if err := child.Get(ctx, &res); err != nil {
		if cancelled(ctx, err) {
			c.outcome(ctx, OutcomeCancelled)
			return CycleResult{}, temporal.NewCanceledError(fmt.Sprintf("cycle %s cancelled", id))
		}
		c.progress.Error = err.Error()
		c.outcome(ctx, OutcomeFailed)
		return CycleResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("backup cycle %s of %s/%s failed", id, plan.Instance, in.Database), errorType(err), err)
	}
	res.RunBy = id
	c.outcome(ctx, res.outcome())
	c.step(ctx, activities.StepDone)
	return res, nil
}

// skip ends a start whose plan found nothing to back up now (why): no
// replica of the database's availability group that can back it up
// (activities.SkipNotPreferredReplica), no verified full to prove a
// differential on (activities.SkipNoDifferentialBase). Skipped, with the
// reason, in the result, the search attributes and the cycle metric (its
// type); no set is touched and nothing is failed.
func (c *cycle) skip(ctx workflow.Context, plan activities.Plan, why, reason string) CycleResult {
	c.log(ctx).Warn("skipped: " + why)
	c.progress.Error = why
	c.outcome(ctx, OutcomeSkipped)
	metrics.CycleEnded(workflow.GetMetricsHandler(ctx), metrics.OutcomeSkipped, reason)
	c.step(ctx, activities.StepDone)
	return CycleResult{Database: c.in.Database, Instance: plan.Instance, Skipped: why, SkipReason: reason}
}

func (r CycleResult) outcome() string {
	if r.Skipped != "" {
		return OutcomeSkipped
	}
	return OutcomeVerified
}

// resume takes over set c.in.Resume left unfinished by an earlier run.
func (c *cycle) resume(ctx workflow.Context, plan activities.Plan) (cycleacts.ResumeOutput, error) {
	c.step(ctx, activities.StepResume)
	var set cycleacts.ResumeOutput
	err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		// It reads every stripe on every holder (ResumeSet): as long as a copy.
		StartToCloseTimeout:    orDefault(plan.Limits.CopyDeadline, defaultCopyDeadline),
		ScheduleToCloseTimeout: orDefault(plan.Limits.CopyDeadline, defaultCopyDeadline),
		HeartbeatTimeout:       c.hb,
		RetryPolicy:            retry(5*time.Second, 10),
		Summary:                fmt.Sprintf("resume %s seq %d", c.in.Database, c.in.Resume),
	}), a.ResumeSet, cycleacts.ResumeInput{
		Database: c.in.Database, Instance: c.instance, Entry: c.entry, Sequence: c.in.Resume, Servers: retentionServers(plan),
	}).Get(ctx, &set)
	if err != nil {
		return set, err
	}
	c.setServer(ctx, set.Primary)
	c.setSequence(ctx, set.Sequence)
	c.holders = set.Holders
	c.base, c.progress.Base = set.Base, set.Base
	c.log(ctx).Info("resuming set", "state", set.State, "holders", set.Holders)
	return set, nil
}

// resolve waits for the source instance while the plan could not resolve
// the database's name there (Plan.Unresolved: the instance was not
// reachable), bounded by sql_host_wait, and plans again: a cycle runs only
// under the spelling its instance confirmed.
func (c *cycle) resolve(ctx workflow.Context, plan activities.Plan) (activities.Plan, error) {
	wait := newBackoff(orDefault(plan.Limits.HostWait, defaultHostWait), plan.Limits)
	for plan.Unresolved != "" {
		cause := temporal.NewApplicationError(plan.Unresolved, activities.ErrSQLHostUnreachable)
		if err := c.wait(ctx, wait, activities.StepWaitingForSQLHost, cause); err != nil {
			return plan, err
		}
		c.step(ctx, activities.StepPlan)
		var err error
		if plan, err = c.plan(ctx); err != nil {
			return plan, err
		}
	}
	return plan, nil
}

// rename continues the cycle under the database's name as the plan resolved
// it. A plan recorded before plans resolved names carries the start's own
// name (or none), and nothing changes.
func (c *cycle) rename(plan activities.Plan) {
	c.entry = plan.Entry
	if plan.Database == "" || plan.Database == c.in.Database {
		return
	}
	c.in.Database, c.progress.Database, c.renamed = plan.Database, plan.Database, true
}

// plan runs PlanCycle and fills in the run's identity.
func (c *cycle) plan(ctx workflow.Context) (activities.Plan, error) {
	var plan activities.Plan
	err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    5 * time.Minute,
		ScheduleToCloseTimeout: shortDeadline / 2,
		HeartbeatTimeout:       c.hb,
		RetryPolicy:            retry(5*time.Second, 5),
		Summary:                "plan the cycle of " + c.in.Database,
	}), a.PlanCycle, activities.PlanInput{
		Database: c.in.Database, Instance: c.in.Instance, LastServer: c.in.LastServer, Differential: c.in.Differential,
		// A batched run that backs up under the database's own id has the
		// plan allocate its sequence too: one activity less. A start
		// without its instance launches the cycle under the id with it
		// (launch), whose plan allocates; a plan that resolves the name to
		// another spelling leaves the number unused.
		AllocateSequence: c.batched && c.in.Resume == 0 && c.in.Instance != "" &&
			workflow.GetInfo(ctx).WorkflowExecution.ID == CycleWorkflowID(c.in.Instance, c.in.Database),
	}).Get(ctx, &plan)
	if err != nil {
		return plan, err
	}
	c.instance = plan.Instance
	if plan.NotPreferred != "" || plan.NoDifferentialBase != "" {
		return plan, nil // nothing to back up now: nothing else was planned
	}
	if b := plan.Mode.Differential; b != nil {
		c.base, c.progress.Base = b.Sequence, b.Sequence
	}
	if len(plan.Rotation) == 0 || plan.Remote == "" || slices.Contains(plan.Rotation[:1], plan.Remote) {
		return plan, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"plan for %s has no backup server (rotation %v) or no remote server distinct from the primary (%q): list them in the database's config",
			c.in.Database, plan.Rotation, plan.Remote), activities.ErrInvalidConfig, nil)
	}
	c.replica = plan.Replica
	c.hb = orDefault(plan.Limits.Heartbeat, longHeartbeat)
	c.log(ctx).Info("cycle planned", "primary", plan.Rotation[0], "last_server", plan.LastServer,
		"last_server_source", plan.LastServerSource, "stripes", plan.Stripes, "remote", plan.Remote,
		"compression", plan.Mode.Compression, "copy_only", plan.Mode.CopyOnly, "sequence", plan.Mode.Sequence)
	// What the plan changed from the configuration (compression off on
	// Express, COPY_ONLY for a read-only source) or could not learn.
	for _, w := range plan.Warnings {
		c.log(ctx).Warn("plan: " + w)
	}
	return plan, nil
}
