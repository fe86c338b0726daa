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

// RecoverRun is a started (and, from WaitRecover, finished) Recover.
type RecoverRun struct {
	WorkflowID string
	RunID      string
	Result     workflows.RecoverStatus
}

// RecoverWorkflowID is the id of a recover into database name on instance
// target (workflows.RecoverWorkflowID): one recover into a database at a
// time.
func RecoverWorkflowID(target, name string) string { return workflows.RecoverWorkflowID(target, name) }

// StartRecover starts a Recover of in (workflows.RecoverInput, the
// request's configuration names and point) and returns without waiting.
// While a recover into the same target database runs, it returns
// *AlreadyRunningError.
func (c *Client) StartRecover(ctx context.Context, in workflows.RecoverInput) (sdkclient.WorkflowRun, error) {
	if err := in.Check(); err != nil {
		return nil, err
	}
	opts := sdkclient.StartWorkflowOptions{
		ID:                                       RecoverWorkflowID(in.ToInstance, in.Name()),
		TaskQueue:                                c.taskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		StaticSummary: fmt.Sprintf("recover %s into %s on %s", workflows.CycleSummary(in.Instance, in.Database, "", ""),
			tsql.Printable(in.Name()), in.ToInstance),
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrDatabase.ValueSet(in.Database)),
	}
	run, err := c.sdk.ExecuteWorkflow(ctx, opts, workflows.RecoverName, in)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return nil, fmt.Errorf("a recover into %s on %s is already running as workflow %s (run %s): wait for it, or cancel it "+
				"(`starter cancel --workflow-id %s`): %w", tsql.Printable(in.Name()), in.ToInstance, opts.ID, started.RunId, opts.ID, err)
		}
		return nil, fmt.Errorf("start %s of %s on namespace %q: %w", workflows.RecoverName, in.Database, c.namespace, err)
	}
	c.log.Info("recover started", zap.String(logging.KeyWorkflowID, run.GetID()), zap.String(logging.KeyRunID, run.GetRunID()),
		zap.String(logging.KeyDB, in.Database))
	return run, nil
}

// WaitRecover waits for the recover run (from StartRecover) to finish; the
// error of a failed recover keeps the workflow's error chain (its
// temporal.ApplicationError carries the step's error type), and Result
// holds its status as far as it got when Temporal hands it back.
func (c *Client) WaitRecover(ctx context.Context, run sdkclient.WorkflowRun) (RecoverRun, error) {
	out := RecoverRun{WorkflowID: run.GetID(), RunID: run.GetRunID()}
	return out, c.wait(ctx, run, "recover", &out.Result)
}

// wait gets run's result into result; when ctx ended first, the error
// says the run goes on without us.
func (c *Client) wait(ctx context.Context, run sdkclient.WorkflowRun, what string, result any) error {
	if err := run.Get(ctx, result); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("stopped waiting for %s %s: %w (it goes on in Temporal and resumes when a worker polls task queue %q)",
				what, run.GetID(), ctx.Err(), c.taskQueue)
		}
		return err
	}
	return nil
}

// RecoverStatus asks a running recover where it stands (the `recover`
// query).
func (c *Client) RecoverStatus(ctx context.Context, workflowID, runID string) (workflows.RecoverStatus, error) {
	var st workflows.RecoverStatus
	return st, c.query(ctx, workflowID, runID, workflows.RecoverQuery, &st)
}

// query asks a workflow's query into v.
func (c *Client) query(ctx context.Context, workflowID, runID, name string, v any) error {
	r, err := c.sdk.QueryWorkflow(ctx, workflowID, runID, name)
	if err != nil {
		return err
	}
	return r.Get(v)
}
