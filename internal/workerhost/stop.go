package workerhost

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
)

const (
	// stopTimeout is how long the activities in flight get on SIGTERM
	// (worker.Options.WorkerStopTimeout); the rest are retried by Temporal
	// on another (or the restarted) worker.
	stopTimeout = 10 * time.Second
	// stopReport is the part of stopTimeout kept for reporting the attempts
	// that did not finish in time.
	stopReport = 3 * time.Second
)

// stopGrace ends an activity's context stopTimeout-stopReport after the
// worker began to stop, with the cause worker.ErrWorkerShutdown. The SDK
// ends it only at stopTimeout and returns from Stop without waiting for the
// attempt's failure to be reported; the process then exits, the report is
// lost, and Temporal retries the activity only after its heartbeat timeout
// (minutes) instead of its retry interval. Ended earlier, the attempt (a
// statement left running for the next one, a copy that keeps its
// checkpoints) is reported within the stop, as interrupted (interrupted),
// as is every attempt whose context ended without the workflow's request.
type stopGrace struct {
	interceptor.WorkerInterceptorBase
}

func (*stopGrace) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &stopGraceActivity{interceptor.ActivityInboundInterceptorBase{Next: next}}
}

type stopGraceActivity struct {
	interceptor.ActivityInboundInterceptorBase
}

func (i *stopGraceActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopping := activity.GetWorkerStopChannel(ctx)
	go func() {
		select {
		case <-stopping:
		case <-ctx.Done():
			return
		}
		t := time.NewTimer(stopTimeout - stopReport)
		defer t.Stop()
		select {
		case <-t.C:
			cancel(worker.ErrWorkerShutdown)
		case <-ctx.Done():
		}
	}()
	res, err := i.Next.ExecuteActivity(ctx, in)
	return res, interrupted(ctx, err)
}

// StopTimeout is how long the activities in flight get when the worker is
// asked to stop: a service manager waits longer than this before it kills
// the worker (systemd's TimeoutStopSec, the Windows service's stop wait).
const StopTimeout = stopTimeout
