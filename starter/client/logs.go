package client

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/workflows"
)

// EnsureLogChain starts the log chain workflow of (instance, database)
// under its one id, or returns the one already running: idempotent, so the
// worker's start, a fleet and `starter logs start` may all call it. A
// running chain is never replaced (no TERMINATE_EXISTING): it holds the
// chain's cursor.
func (c *Client) EnsureLogChain(ctx context.Context, instance, database string) (sdkclient.WorkflowRun, error) {
	opts := sdkclient.StartWorkflowOptions{
		ID:                       workflows.LogChainWorkflowID(instance, database),
		TaskQueue:                c.taskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            "log chain of " + workflows.CycleSummary(instance, database, "", ""),
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrDatabase.ValueSet(database),
			workflows.AttrInstance.ValueSet(instance)),
	}
	run, err := c.sdk.ExecuteWorkflow(ctx, opts, workflows.LogChainName, workflows.LogChainInput{Database: database, Instance: instance})
	if err != nil {
		return nil, fmt.Errorf("start the log chain of %s/%s: %w", instance, database, err)
	}
	return run, nil
}

// EnsureLogChains keeps a log chain running for every database of cfg with
// log_backup (its databases: entries); the error joins the ones that could
// not be started, the others are started anyway.
func (c *Client) EnsureLogChains(ctx context.Context, cfg *config.Config) (started []string, err error) {
	var errs []error
	for i := range cfg.Databases {
		db := &cfg.Databases[i]
		if !db.LogBackups() {
			continue
		}
		if _, e := c.EnsureLogChain(ctx, db.Instance, db.Name); e != nil {
			errs = append(errs, e)
			continue
		}
		started = append(started, workflows.LogChainWorkflowID(db.Instance, db.Name))
	}
	return started, errors.Join(errs...)
}
