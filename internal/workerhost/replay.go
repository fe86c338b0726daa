package workerhost

import (
	"context"
	"fmt"
	"io"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/logging"
	"github.com/backupcycle/backupcycle/workflows"
)

// ReplayOpen replays the history so far of every open workflow on the
// client's task queue against this build's workflow code, printing one line
// per workflow: the check before rolling out a new worker, which takes over
// the running cycles (a workflow change without workflow.GetVersion shows
// up here as non-determinism). It returns how many did not replay.
func ReplayOpen(ctx context.Context, sdk sdkclient.Client, namespace, taskQueue string, log *zap.Logger, stdout io.Writer) (int, error) {
	query := fmt.Sprintf("ExecutionStatus = 'Running' AND TaskQueue = '%s'", taskQueue)
	type open struct {
		workflow.Execution
		typ string
	}
	var execs []open
	var token []byte
	for {
		resp, err := sdk.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, Query: query, NextPageToken: token})
		if err != nil {
			return 0, fmt.Errorf("list the open workflows of task queue %q on namespace %q: %w", taskQueue, namespace, err)
		}
		for _, e := range resp.GetExecutions() {
			execs = append(execs, open{workflow.Execution{ID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId()}, e.GetType().GetName()})
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	r := worker.NewWorkflowReplayer()
	reg := &typeRegistry{WorkflowRegistry: r, types: map[string]bool{}}
	workflows.RegisterWorkflows(reg)
	failed := 0
	for _, e := range execs {
		var err error
		if !reg.types[e.typ] {
			// The replayer skips what never completed a workflow task, so a
			// type this build lacks would otherwise pass.
			err = fmt.Errorf("workflow type %s is not in this build", e.typ)
		} else {
			var h *historypb.History
			if h, err = history(ctx, sdk, e.Execution); err == nil {
				// Under its own id: a cycle runs under its database's id and
				// launches itself there under any other.
				err = r.ReplayWorkflowHistoryWithOptions(logging.NewSDKLogger(log), h, worker.ReplayWorkflowHistoryOptions{OriginalExecution: e.Execution})
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return failed, ctx.Err()
			}
			failed++
			fmt.Fprintf(stdout, "FAIL %s (run %s): %v\n", e.ID, e.RunID, err)
			continue
		}
		fmt.Fprintf(stdout, "ok   %s (run %s)\n", e.ID, e.RunID)
	}
	fmt.Fprintf(stdout, "replayed %d open workflows of task queue %s with this build: %d do not replay\n", len(execs), taskQueue, failed)
	return failed, nil
}

// typeRegistry notes the workflow types registered through it.
type typeRegistry struct {
	worker.WorkflowRegistry
	types map[string]bool
}

func (r *typeRegistry) RegisterWorkflowWithOptions(w any, o workflow.RegisterOptions) {
	r.types[o.Name] = true
	r.WorkflowRegistry.RegisterWorkflowWithOptions(w, o)
}

// history is the history so far of one execution.
func history(ctx context.Context, sdk sdkclient.Client, e workflow.Execution) (*historypb.History, error) {
	h := &historypb.History{}
	it := sdk.GetWorkflowHistory(ctx, e.ID, e.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("read the history: %w", err)
		}
		h.Events = append(h.Events, ev)
	}
	return h, nil
}
