package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/health"
)

func TestHealthCheckReturnsWorkerInfoAndSetsStep(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(HealthCheck, workflowOptions(HealthCheckName))
	acts := &health.Activities{}
	env.RegisterActivity(acts)

	want := health.HealthInfo{Host: "w1", PID: 7, Version: "v", Time: time.Unix(1, 0).UTC()}
	env.OnActivity(acts.Health, mock.Anything).Return(want, nil).Once()
	// The visibility query BackupStep = 'health' depends on this upsert.
	env.OnUpsertTypedSearchAttributes(temporal.NewSearchAttributes(AttrStep.ValueSet(HealthStep))).Return(nil).Once()

	env.ExecuteWorkflow(HealthCheckName)

	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	var got HealthResult
	if err := env.GetWorkflowResult(&got); err != nil {
		t.Fatal(err)
	}
	if got.Step != HealthStep || got.Worker != want {
		t.Errorf("result = %+v, want step %q and worker %+v", got, HealthStep, want)
	}
	env.AssertExpectations(t)
}

func TestHealthCheckRetriesThenFails(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	Register(env, &activities.Activities{})

	calls := 0
	env.OnActivity((&health.Activities{}).Health, mock.Anything).Return(
		func(context.Context) (health.HealthInfo, error) {
			calls++
			return health.HealthInfo{}, errors.New("worker sick")
		})

	env.ExecuteWorkflow(HealthCheckName)

	err := env.GetWorkflowError()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Error() != "worker sick" {
		t.Fatalf("workflow error = %v, want the activity's application error", err)
	}
	if calls != 3 {
		t.Errorf("activity ran %d times, want 3 (MaximumAttempts)", calls)
	}
}

func workflowOptions(name string) workflow.RegisterOptions {
	return workflow.RegisterOptions{Name: name}
}

// TestHealthCheckReplaysRecordedHistory replays a history recorded from a
// real run on the embedded server (testdata/health_check_history.json): a
// change to HealthCheck that breaks running workflows fails here. Record a
// new file only together with a workflow.GetVersion branch.
func TestHealthCheckReplaysRecordedHistory(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	RegisterWorkflows(r)
	if err := r.ReplayWorkflowHistoryFromJSONFile(nil, "testdata/health_check_history.json"); err != nil {
		t.Fatal(err)
	}
}
