package client

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/logging"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/workflows"
)

// DrillRun is a started (and, from WaitDrill, finished) Drill.
type DrillRun struct {
	WorkflowID string
	RunID      string
	Result     workflows.DrillStatus
}

// StartDrill starts a Drill of in (the database as configured; what may
// override its drill: settings) and returns without waiting. The workflow
// id is workflows.DrillWorkflowID(instance, database): while a drill of
// the database runs (a scheduled one too), it returns an error naming it.
func (c *Client) StartDrill(ctx context.Context, in workflows.DrillInput) (sdkclient.WorkflowRun, error) {
	if err := in.Check(); err != nil {
		return nil, err
	}
	opts := sdkclient.StartWorkflowOptions{
		ID:                                       workflows.DrillWorkflowID(in.Instance, in.Database),
		TaskQueue:                                c.taskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		StaticSummary:                            "drill " + workflows.CycleSummary(in.Instance, in.Database, "", ""),
		TypedSearchAttributes:                    temporal.NewSearchAttributes(workflows.AttrDatabase.ValueSet(in.Database)),
	}
	run, err := c.sdk.ExecuteWorkflow(ctx, opts, workflows.DrillName, in)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return nil, fmt.Errorf("a drill of %s is already running as workflow %s (run %s): wait for it, or cancel it "+
				"(`starter cancel --workflow-id %s`): %w", tsql.Printable(in.Database), opts.ID, started.RunId, opts.ID, err)
		}
		return nil, fmt.Errorf("start %s of %s on namespace %q: %w", workflows.DrillName, in.Database, c.namespace, err)
	}
	c.log.Info("drill started", zap.String(logging.KeyWorkflowID, run.GetID()), zap.String(logging.KeyRunID, run.GetRunID()),
		zap.String(logging.KeyDB, in.Database))
	return run, nil
}

// WaitDrill waits for the drill run (from StartDrill) to finish; a failed
// drill's error keeps the workflow's error chain, and Result holds the
// drill as recorded (the outcome, the times, what was restored).
func (c *Client) WaitDrill(ctx context.Context, run sdkclient.WorkflowRun) (DrillRun, error) {
	out := DrillRun{WorkflowID: run.GetID(), RunID: run.GetRunID()}
	return out, c.wait(ctx, run, "drill", &out.Result)
}

// DrillStatus asks a running drill where it stands (the `drill` query).
func (c *Client) DrillStatus(ctx context.Context, workflowID, runID string) (workflows.DrillStatus, error) {
	var st workflows.DrillStatus
	return st, c.query(ctx, workflowID, runID, workflows.DrillQuery, &st)
}
