package workerhost

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/backupcycle/backupcycle/activities"
)

// ends is what a step returns once the attempt's context has ended: the
// backup server's client fails a stat "context canceled", which the step
// classifies as the server's failure.
func ends(ctx context.Context) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("backup server bak02: stat: %v", ctx.Err()), activities.ErrBackupTargetUnreachable, ctx.Err())
}

func TestInterruptedAttemptIsNotTheBackupServersFailure(t *testing.T) {
	run := func(cause error) error {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return interrupted(ctx, ends(ctx))
	}
	for _, cause := range []error{
		errors.New("RecordActivityHeartbeat: Unavailable: connection refused"), // the server restarting
		worker.ErrWorkerShutdown,
		context.Canceled,
	} {
		err := run(cause)
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || appErr.Type() != activities.ErrActivityInterrupted || appErr.NonRetryable() {
			t.Errorf("context ended by %v: %v, want a retryable %s", cause, err, activities.ErrActivityInterrupted)
		}
	}
	// A cancellation the workflow asked for: the attempt's error is kept.
	err := run(temporal.NewCanceledError())
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrBackupTargetUnreachable {
		t.Errorf("cancelled on request: %v, want the attempt's own error", err)
	}
}
