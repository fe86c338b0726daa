package client

import (
	"context"
	"errors"
	"fmt"
	"sort"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/backupcycle/backupcycle/workflows"
)

// RunningWorkflow is one open workflow run.
type RunningWorkflow struct {
	WorkflowID string
	RunID      string
	Type       string // BackupCycle, Fleet, ...
	Database   string // BackupDatabase, for cycles
	Instance   string // BackupInstance, once the cycle knows it
}

// NotRunningError says there is nothing to cancel under a workflow id.
type NotRunningError struct {
	WorkflowID string
	Status     string // the last run's status; "" when the id has no run at all
}

func (e *NotRunningError) Error() string {
	if e.Status == "" {
		return fmt.Sprintf("no workflow %s on this namespace: nothing to cancel (see `starter status`)", e.WorkflowID)
	}
	return fmt.Sprintf("workflow %s is not running (its last run is %s): nothing to cancel", e.WorkflowID, e.Status)
}

// Running returns the open run of workflowID, or *NotRunningError.
func (c *Client) Running(ctx context.Context, workflowID string) (RunningWorkflow, error) {
	d, err := c.sdk.DescribeWorkflowExecution(ctx, workflowID, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return RunningWorkflow{}, &NotRunningError{WorkflowID: workflowID}
	}
	if err != nil {
		return RunningWorkflow{}, fmt.Errorf("describe workflow %s on namespace %q: %w", workflowID, c.namespace, err)
	}
	info := d.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return RunningWorkflow{}, &NotRunningError{WorkflowID: workflowID, Status: statusName(info.GetStatus())}
	}
	s := summarize(info)
	return RunningWorkflow{WorkflowID: s.WorkflowID, RunID: s.RunID, Type: info.GetType().GetName(), Database: s.Database, Instance: s.Instance}, nil
}

// RunningCycles lists the open BackupCycle runs of a database (every
// instance when instance is ""), from visibility: a run started a moment
// ago may not show yet.
func (c *Client) RunningCycles(ctx context.Context, database, instance string) ([]RunningWorkflow, error) {
	f := StatusFilter{Database: database, Instance: instance}
	q := StatusQuery(f) + " AND ExecutionStatus = 'Running'"
	all, err := c.listOpen(ctx, q)
	if err != nil {
		return nil, err
	}
	var out []RunningWorkflow
	for _, r := range all {
		// Names with a backslash are filtered here (see StatusQuery).
		if r.Database == database && (instance == "" || r.Instance == instance) {
			out = append(out, r)
		}
	}
	return out, nil
}

// RunningFleets lists the open Fleet runs: the manual one (under
// workflows.FleetWorkflowID) and those a schedule started, whose ids carry
// the start time.
func (c *Client) RunningFleets(ctx context.Context) ([]RunningWorkflow, error) {
	q := fmt.Sprintf("WorkflowType = %s AND ExecutionStatus = 'Running'", quoteQuery(workflows.FleetName))
	out, err := c.listOpen(ctx, q)
	if err != nil {
		return nil, err
	}
	// Visibility lags a fresh start; the manual fleet's id is known.
	if r, err := c.Running(ctx, workflows.FleetWorkflowID); err == nil {
		seen := false
		for _, o := range out {
			seen = seen || o.WorkflowID == r.WorkflowID
		}
		if !seen {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].WorkflowID < out[j].WorkflowID })
	return out, nil
}

func (c *Client) listOpen(ctx context.Context, query string) ([]RunningWorkflow, error) {
	var out []RunningWorkflow
	var token []byte
	for {
		resp, err := c.sdk.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.namespace, Query: query, PageSize: 100, NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("list running workflows on namespace %q with query %q: %w", c.namespace, query, err)
		}
		for _, e := range resp.GetExecutions() {
			s := summarize(e)
			out = append(out, RunningWorkflow{WorkflowID: s.WorkflowID, RunID: s.RunID, Type: e.GetType().GetName(), Database: s.Database, Instance: s.Instance})
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return out, nil
		}
	}
}

// Cancel requests cancellation of the open run of workflowID and returns
// it. A cycle then stops its running statement, removes the files of its
// unfinished set, records the set as cancelled and ends Canceled; a fleet
// cancels its running cycles the same way. Nothing open under the id gives
// *NotRunningError.
func (c *Client) Cancel(ctx context.Context, workflowID string) (RunningWorkflow, error) {
	r, err := c.Running(ctx, workflowID)
	if err != nil {
		return r, err
	}
	if err := c.sdk.CancelWorkflow(ctx, r.WorkflowID, r.RunID); err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			// It closed between the describe and the request.
			return r, &NotRunningError{WorkflowID: workflowID, Status: "closed"}
		}
		return r, fmt.Errorf("cancel workflow %s (run %s) on namespace %q: %w", r.WorkflowID, r.RunID, c.namespace, err)
	}
	return r, nil
}

// WaitClosed waits for a run to close and returns its status (Canceled,
// Completed, Failed, ...); ctx bounds the wait.
func (c *Client) WaitClosed(ctx context.Context, workflowID, runID string) (string, error) {
	// Get returns when the run closes; its error is the run's outcome,
	// read back from Describe below.
	if err := c.sdk.GetWorkflow(ctx, workflowID, runID).Get(ctx, nil); err != nil && ctx.Err() != nil {
		return "", fmt.Errorf("workflow %s has not closed yet: %w (it goes on in Temporal; see `starter status`)", workflowID, ctx.Err())
	}
	// The latest run: a fleet that continued as new closes in a later one.
	d, err := c.sdk.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return "", fmt.Errorf("describe workflow %s on namespace %q: %w", workflowID, c.namespace, err)
	}
	return statusName(d.GetWorkflowExecutionInfo().GetStatus()), nil
}
