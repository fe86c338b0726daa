package client

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

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

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// CycleWorkflowID is the workflow id StartCycle gives a cycle started at t:
// readable in the Web UI's list, unique per start.
func CycleWorkflowID(database string, t time.Time) string {
	return fmt.Sprintf("backup-%s-%s", unsafeID.ReplaceAllString(database, "_"), t.UTC().Format("20060102T150405.000Z"))
}

// StartCycle starts one BackupCycle of in.Database (a configuration key) and
// returns without waiting. The search attribute BackupDatabase is set at
// start so the Web UI can filter the cycle before its first step.
func (c *Client) StartCycle(ctx context.Context, in workflows.CycleInput) (sdkclient.WorkflowRun, error) {
	if in.Database == "" {
		return nil, errors.New("start BackupCycle: no database given: name a database of the configuration, e.g. Sales")
	}
	run, err := c.sdk.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
		ID:                    CycleWorkflowID(in.Database, time.Now()),
		TaskQueue:             c.taskQueue,
		StaticSummary:         "backup cycle of " + in.Database,
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrDatabase.ValueSet(in.Database)),
	}, workflows.BackupCycleName, in)
	if err != nil {
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
	out := CycleRun{WorkflowID: run.GetID(), RunID: run.GetRunID()}
	if err := run.Get(ctx, &out.Result); err != nil {
		switch {
		case errors.Is(ctx.Err(), context.Canceled):
			// Only the wait ends: the workflow is durable and a worker resumes it.
			return out, fmt.Errorf("stopped waiting for backup cycle %s: %w (the cycle goes on in Temporal and resumes when a worker polls task queue %q)",
				out.WorkflowID, ctx.Err(), c.taskQueue)
		case ctx.Err() != nil:
			return out, fmt.Errorf("backup cycle %s did not finish: %w (is a worker polling task queue %q on namespace %q?)",
				out.WorkflowID, ctx.Err(), c.taskQueue, c.namespace)
		}
		return out, fmt.Errorf("backup cycle %s of %s failed: %w", out.WorkflowID, in.Database, err)
	}
	return out, nil
}
