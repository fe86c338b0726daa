package workerhost_test

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/internal/workerhost"
)

// A worker stopped with SIGTERM (a rollout) while an activity runs, the
// activity ending only when its context does (a statement it leaves running
// for the next attempt, a copy that keeps its checkpoints): the attempt's
// failure reaches Temporal before the worker is gone, so the next attempt
// starts on another worker after the retry policy's interval, not after the
// heartbeat timeout (minutes). The worker process exits as soon as Stop
// returns: here its client is closed then.
func TestStoppedWorkerReportsTheAttemptItEnded(t *testing.T) {
	ctx := context.Background()
	srv, err := devserver.Start(ctx, devserver.Options{UIPort: devserver.NoUI})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	newClient := func() sdkclient.Client {
		c, err := srv.NewClient(ctx, sdkclient.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := newClient()
	defer c.Close()

	const queue = "stop-test"
	started := make(chan struct{}, 10)
	// What a step meets once its context ends: the backup server's client
	// fails "context canceled", which the step classifies as the server's
	// failure (not retried by the activity; the cycle rotates and condemns
	// the set). The worker reports the attempt as interrupted instead.
	long := func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		return temporal.NewNonRetryableApplicationError("backup server bak02: stat: "+ctx.Err().Error(),
			activities.ErrBackupTargetUnreachable, ctx.Err())
	}
	flow := func(ctx workflow.Context) error {
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Hour,
			HeartbeatTimeout:    4 * time.Minute,
			RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second},
		}), "Long").Get(ctx, nil)
	}
	wc := newClient()
	w := worker.New(wc, queue, workerhost.WorkerOptions(&config.Config{}))
	w.RegisterWorkflowWithOptions(flow, workflow.RegisterOptions{Name: "StopTest"})
	w.RegisterActivityWithOptions(long, activity.RegisterOptions{Name: "Long"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	run, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{TaskQueue: queue}, "StopTest")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the activity did not start within a minute")
	}
	began := time.Now()
	w.Stop()
	wc.Close()
	t.Logf("the worker stopped in %s", time.Since(began).Round(100*time.Millisecond))

	// The attempt's failure is on the server: the activity waits for its
	// second attempt with the first one's failure.
	var last string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		d, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
		if err != nil {
			t.Fatal(err)
		}
		if p := d.GetPendingActivities(); len(p) == 1 {
			last = p[0].String()
			if p[0].GetAttempt() >= 2 && p[0].GetLastFailure() != nil {
				_ = c.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "test done")
				if typ := p[0].GetLastFailure().GetApplicationFailureInfo().GetType(); typ != activities.ErrActivityInterrupted {
					t.Errorf("the ended attempt was reported as %q, want %s", typ, activities.ErrActivityInterrupted)
				}
				return
			}
		} else {
			// The activity failed for good: its error was not retried.
			it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				if f := ev.GetActivityTaskFailedEventAttributes(); f != nil {
					_ = c.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "test done")
					t.Fatalf("the ended attempt failed the activity for good (%s): %s", f.GetFailure().GetApplicationFailureInfo().GetType(), f.GetFailure().GetMessage())
				}
			}
		}
	}
	_ = c.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "test done")
	t.Fatalf("10 s after the worker stopped the server still waits for the first attempt (until its heartbeat timeout): %s", last)
}
