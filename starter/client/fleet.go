package client

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/logging"
	"github.com/backupcycle/backupcycle/workflows"
)

// FleetRunningError says that a Fleet run holds workflows.FleetWorkflowID.
type FleetRunningError struct {
	RunID string
	Err   error
}

func (e *FleetRunningError) Error() string {
	return fmt.Sprintf("a fleet run is already running as workflow %s (run %s): wait for it (`starter fleet --status`) or cancel it (`starter cancel --fleet`)",
		workflows.FleetWorkflowID, e.RunID)
}

func (e *FleetRunningError) Unwrap() error { return e.Err }

// StartFleet starts the Fleet workflow under workflows.FleetWorkflowID and
// returns without waiting; *FleetRunningError while one runs.
func (c *Client) StartFleet(ctx context.Context, in workflows.FleetInput) (sdkclient.WorkflowRun, error) {
	run, err := c.sdk.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
		ID:                                       workflows.FleetWorkflowID,
		TaskQueue:                                c.taskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		StaticSummary:                            "fleet run: every selected database" + instancesText(in.Instances),
	}, workflows.FleetName, in)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return nil, &FleetRunningError{RunID: started.RunId, Err: err}
		}
		return nil, fmt.Errorf("start %s on namespace %q: %w", workflows.FleetName, c.namespace, err)
	}
	c.log.Info("fleet run started", zap.String(logging.KeyWorkflowID, run.GetID()), zap.String(logging.KeyRunID, run.GetRunID()))
	return run, nil
}

// WaitFleet waits for a Fleet run, across its continue-as-new runs, and
// returns its result.
func (c *Client) WaitFleet(ctx context.Context, run sdkclient.WorkflowRun) (workflows.FleetResult, error) {
	var res workflows.FleetResult
	// Get follows continue-as-new to the last run of the chain.
	if err := run.Get(ctx, &res); err != nil {
		if ctx.Err() != nil {
			return res, fmt.Errorf("stopped waiting for fleet run %s: %w (it goes on in Temporal)", run.GetID(), ctx.Err())
		}
		return res, fmt.Errorf("fleet run %s failed: %w", run.GetID(), err)
	}
	return res, nil
}

// FleetStatus asks the running fleet (workflowID "" = the manual fleet's
// id) for its FleetStatus.
func (c *Client) FleetStatus(ctx context.Context, workflowID string) (workflows.FleetStatus, error) {
	if workflowID == "" {
		workflowID = workflows.FleetWorkflowID
	}
	var s workflows.FleetStatus
	v, err := c.sdk.QueryWorkflow(ctx, workflowID, "", workflows.FleetQuery)
	if err != nil {
		return s, fmt.Errorf("%s query of %s: %w", workflows.FleetQuery, workflowID, err)
	}
	if err := v.Get(&s); err != nil {
		return s, fmt.Errorf("decode the %s query answer of %s: %w", workflows.FleetQuery, workflowID, err)
	}
	return s, nil
}
