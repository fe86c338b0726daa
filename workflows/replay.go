package workflows

import (
	"fmt"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// ReplayHistoryFile replays a workflow history exported as JSON (Web UI
// "Download", `temporal workflow show --output json`, or the tests'
// recordings) against this build's workflow code, under the workflow id it
// ran with: a cycle behaves differently under its database's own id (it
// runs) and under any other (it launches). An error means this build would
// break that run (non-determinism): let such runs finish before rolling it
// out.
func ReplayHistoryFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		return fmt.Errorf("read history %s: %w", path, err)
	}
	var exec workflow.Execution
	if evs := h.GetEvents(); len(evs) > 0 {
		exec.ID = evs[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId()
	}
	r := worker.NewWorkflowReplayer()
	RegisterWorkflows(r)
	return r.ReplayWorkflowHistoryWithOptions(nil, h, worker.ReplayWorkflowHistoryOptions{OriginalExecution: exec})
}
