package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/backupcycle/backupcycle/activities/drill"
	"github.com/backupcycle/backupcycle/workflows"
)

// Two drills of one database never run at once, whatever started them: a
// scheduled drill (its id is the database's drill id with the time
// appended) that comes while a manual one runs is skipped, naming it,
// before it prepares anything — a second drill would clear the scratch
// copy the first is restoring or checking as if an earlier drill had left
// it. On the embedded Temporal server, with the drill's first activities
// stood in for: the manual drill holds in PrepareDrill until released.
func TestDrillBesideARunningOneIsSkipped(t *testing.T) {
	const tq = "tq-drill-overlap"
	c := sdk(t)
	release := make(chan struct{})
	var prepared atomic.Int32
	w := sdkworker.New(c, tq, sdkworker.Options{})
	workflows.RegisterWorkflows(w)
	w.RegisterActivityWithOptions(func(_ context.Context, in drill.Request) (drill.Request, error) {
		in.Database, in.Instance = "Sales", "sql01"
		return in, nil
	}, activity.RegisterOptions{Name: "ResolveDrill"})
	w.RegisterActivityWithOptions(func(ctx context.Context, in drill.Request) (drill.Plan, error) {
		prepared.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return drill.Plan{}, temporal.NewNonRetryableApplicationError("the test ends the drill here", "TestStop", nil)
	}, activity.RegisterOptions{Name: "PrepareDrill"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	manual, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: workflows.DrillWorkflowID("sql01", "Sales"), TaskQueue: tq},
		workflows.DrillName, workflows.DrillInput{Database: "Sales", Instance: "sql01"})
	if err != nil {
		t.Fatal(err)
	}
	for prepared.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the manual drill never reached PrepareDrill")
		}
		time.Sleep(20 * time.Millisecond)
	}
	scheduled, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: workflows.DrillWorkflowID("sql01", "Sales") + "-2026-12-02T05:00:00Z",
		TaskQueue: tq}, workflows.DrillName, workflows.DrillInput{Database: "sales", Instance: "sql01"})
	if err != nil {
		t.Fatal(err)
	}
	var st workflows.DrillStatus
	if err := scheduled.Get(ctx, &st); err != nil {
		t.Fatalf("the scheduled drill: %v, want skipped", err)
	}
	if st.Skipped == "" || st.HeldBy != workflows.DrillWorkflowID("sql01", "Sales") || prepared.Load() != 1 {
		t.Errorf("the scheduled drill beside a running one: %+v, PrepareDrill ran %d times; want skipped, held by the manual drill, nothing prepared",
			st, prepared.Load())
	}
	close(release)
	if err := manual.Get(ctx, nil); err == nil {
		t.Error("the manual drill passed; the test's PrepareDrill fails it")
	}
}
