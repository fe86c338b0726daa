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
	"github.com/backupcycle/backupcycle/workflows"
)

// CycleRun is a started (and, from RunCycle, finished) BackupCycle.
type CycleRun struct {
	WorkflowID string
	RunID      string
	Result     workflows.CycleResult
}

// CycleWorkflowID is the workflow id of every cycle of one database,
// workflows.CycleWorkflowID. Pass the instance: without it the id is not the
// database's own, and the cycle started under it runs as a launcher that
// takes the database's id (or reports the cycle that holds it).
func CycleWorkflowID(instance, database string) string {
	return workflows.CycleWorkflowID(instance, database)
}

// AlreadyRunningError says that a cycle of the database is running already;
// it wraps Temporal's *serviceerror.WorkflowExecutionAlreadyStarted.
type AlreadyRunningError struct {
	Database   string
	WorkflowID string
	RunID      string
	Err        error
}

func (e *AlreadyRunningError) Error() string {
	return fmt.Sprintf("a backup cycle of %s is already running as workflow %s (run %s): wait for it to finish (`starter status --database %s`) or cancel it (`starter cancel --workflow-id %s`)",
		e.Database, e.WorkflowID, e.RunID, e.Database, e.WorkflowID)
}

func (e *AlreadyRunningError) Unwrap() error { return e.Err }

// cycleOptions are the start options of a cycle of in.Database.
func (c *Client) cycleOptions(in workflows.CycleInput) sdkclient.StartWorkflowOptions {
	return sdkclient.StartWorkflowOptions{
		ID:        CycleWorkflowID(in.Instance, in.Database),
		TaskQueue: c.taskQueue,
		// A finished cycle (verified or failed) does not block the next one;
		// a running one does.
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true, // else the SDK hands back the running one silently
		StaticSummary:                            workflows.CycleSummary(in.Instance, in.Database, "", ""),
		TypedSearchAttributes:                    temporal.NewSearchAttributes(cycleAttributes(in)...),
	}
}

// cycleAttributes are the search attributes a cycle of in carries from its
// start: BackupDatabase, and BackupInstance when the instance is named
// (else the cycle sets it once its plan knows it).
func cycleAttributes(in workflows.CycleInput) []temporal.SearchAttributeUpdate {
	attrs := []temporal.SearchAttributeUpdate{workflows.AttrDatabase.ValueSet(in.Database)}
	if in.Instance != "" {
		attrs = append(attrs, workflows.AttrInstance.ValueSet(in.Instance))
	}
	return attrs
}

// StartCycle starts one BackupCycle of in.Database (a configuration key) and
// returns without waiting. The search attribute BackupDatabase is set at
// start so the Web UI can filter the cycle before its first step. While a
// cycle of the same database runs, it returns *AlreadyRunningError.
func (c *Client) StartCycle(ctx context.Context, in workflows.CycleInput) (sdkclient.WorkflowRun, error) {
	if in.Database == "" {
		return nil, errors.New("start BackupCycle: no database given: name a database of the configuration, e.g. Sales")
	}
	opts := c.cycleOptions(in)
	run, err := c.sdk.ExecuteWorkflow(ctx, opts, workflows.BackupCycleName, in)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return nil, &AlreadyRunningError{Database: in.Database, WorkflowID: opts.ID, RunID: started.RunId, Err: err}
		}
		return nil, fmt.Errorf("start %s of %s on namespace %q: %w", workflows.BackupCycleName, in.Database, c.namespace, err)
	}
	c.log.Info("backup cycle started", zap.String(logging.KeyWorkflowID, run.GetID()), zap.String(logging.KeyRunID, run.GetRunID()),
		zap.String(logging.KeyDB, in.Database))
	return run, nil
}

// RunCycle starts a BackupCycle and waits for its result; ctx bounds the
// wait. The error of a failed cycle keeps the workflow's error chain
// (temporal.ApplicationError with the cycle's error type).
func (c *Client) RunCycle(ctx context.Context, in workflows.CycleInput) (CycleRun, error) {
	run, err := c.StartCycle(ctx, in)
	if err != nil {
		return CycleRun{}, err
	}
	return c.waitCycle(ctx, run, in.Database)
}

// WaitCycle waits for the cycle run (from StartCycle) to finish.
func (c *Client) WaitCycle(ctx context.Context, run sdkclient.WorkflowRun, database string) (CycleRun, error) {
	return c.waitCycle(ctx, run, database)
}

func (c *Client) waitCycle(ctx context.Context, run sdkclient.WorkflowRun, database string) (CycleRun, error) {
	out := CycleRun{WorkflowID: run.GetID(), RunID: run.GetRunID()}
	if err := run.Get(ctx, &out.Result); err != nil {
		switch {
		case errors.Is(ctx.Err(), context.Canceled):
			// Only the wait ends: the workflow is durable and a worker resumes it.
			return out, fmt.Errorf("stopped waiting for backup cycle %s: %w (the cycle goes on in Temporal and resumes when a worker polls task queue %q)",
				out.WorkflowID, ctx.Err(), c.taskQueue)
		case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.As(err, new(*serviceerror.DeadlineExceeded)):
			// The SDK's long poll may end a moment before ctx does.
			return out, fmt.Errorf("backup cycle %s did not finish: %w (is a worker polling task queue %q on namespace %q?)",
				out.WorkflowID, ctx.Err(), c.taskQueue, c.namespace)
		}
		return out, fmt.Errorf("backup cycle %s of %s failed: %w", out.WorkflowID, database, err)
	}
	return out, nil
}
