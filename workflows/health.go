package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities/health"
)

// HealthStep is the BackupStep value of a health-check run, so a visibility
// query on the custom attribute (BackupStep = 'health') finds it.
const HealthStep = "health"

// HealthResult is what HealthCheck returns: which worker ran the activity.
type HealthResult struct {
	Step   string            `json:"step"`
	Worker health.HealthInfo `json:"worker"`
}

// HealthCheck proves the whole chain works: a starter reached Temporal, a
// worker polled the task queue, ran an activity, and the custom search
// attributes are registered on the namespace.
func HealthCheck(ctx workflow.Context) (HealthResult, error) {
	// First, so the run is findable by BackupStep even if the activity fails.
	if err := workflow.UpsertTypedSearchAttributes(ctx, AttrStep.ValueSet(HealthStep)); err != nil {
		return HealthResult{}, err
	}

	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// The activity only reads the host name and pid: anything slower is a
		// stuck worker, and a few quick retries are all a health check needs.
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second,
			MaximumAttempts: 3,
		},
		Summary: "report worker host, pid and version",
	})
	var ha *health.Activities
	var info health.HealthInfo
	if err := workflow.ExecuteActivity(ctx, ha.Health).Get(ctx, &info); err != nil {
		return HealthResult{}, err
	}
	workflow.GetLogger(ctx).Info("health check done", "host", info.Host, "pid", info.PID, "version", info.Version)
	return HealthResult{Step: HealthStep, Worker: info}, nil
}
