package workflows

import (
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
)

// startCycles is a start of several cycles at once under their own ids, as
// several `starter run`, Web UI starts and schedules make them.
func startCycles(ctx workflow.Context, dbs []string) ([]CycleResult, error) {
	var futures []workflow.ChildWorkflowFuture
	for _, db := range dbs {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: CycleWorkflowID("sql01", db)})
		futures = append(futures, workflow.ExecuteChildWorkflow(cctx, BackupCycleName, CycleInput{Database: db, Instance: "sql01"}))
	}
	out := make([]CycleResult, len(futures))
	for i, f := range futures {
		if err := f.Get(ctx, &out[i]); err != nil {
			return out, err
		}
	}
	return out, nil
}

// TestCyclesKeepToTheInstancesLimit: cycles of two databases of one
// instance whose max_concurrent is 1, started at once by anything but a
// fleet run, take turns: the second waits for the first's slot (step
// waiting-for-slot) and never backs up, copies or restores while the first
// runs; both end verified. With a limit of 2 they run side by side.
func TestCyclesKeepToTheInstancesLimit(t *testing.T) {
	for _, tc := range []struct {
		limit, want int
	}{{1, 1}, {2, 2}} {
		f := newFakeCycle()
		var mu sync.Mutex
		running, peak := map[string]bool{}, 0
		f.plan = func(in activities.PlanInput) (activities.Plan, error) {
			p := healthyPlan()
			p.Database = in.Database
			p.Slots = []activities.Slot{{Kind: activities.SlotServer, Name: "remote01", Limit: 4},
				{Kind: activities.SlotInstance, Name: "sql01", Limit: tc.limit}, {Kind: activities.SlotServer, Name: "bak01", Limit: 4}}
			return p, nil
		}
		f.backup = func(in activities.BackupInput) (activities.BackupOutput, error) {
			mu.Lock()
			running[in.Database] = true
			peak = max(peak, len(running))
			mu.Unlock()
			time.Sleep(50 * time.Millisecond) // the other cycle gets every chance to start its own
			return activities.BackupOutput{Stripes: []activities.Stripe{{Name: in.Database + "_1of1.bak"}}, Bytes: 1, Duration: time.Minute}, nil
		}
		f.retention = func(in activities.RetentionInput) (activities.RetentionOutput, error) {
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			delete(running, in.Database)
			mu.Unlock()
			return activities.RetentionOutput{}, nil
		}
		r := newCycleRun(t, f, func(env *testsuite.TestWorkflowEnvironment) {
			env.RegisterWorkflowWithOptions(startCycles, workflow.RegisterOptions{Name: "startCycles"})
			env.RegisterWorkflowWithOptions(ConcurrencySlot, workflow.RegisterOptions{Name: SlotName})
		})
		r.env.ExecuteWorkflow("startCycles", []string{"Sales", "Orders"})
		if err := r.env.GetWorkflowError(); err != nil {
			t.Fatalf("limit %d: cycles failed: %v", tc.limit, err)
		}
		var res []CycleResult
		if err := r.env.GetWorkflowResult(&res); err != nil || len(res) != 2 || res[0].Sequence == 0 || res[1].Sequence == 0 {
			t.Fatalf("limit %d: results %+v, %v; want both verified", tc.limit, res, err)
		}
		if peak != tc.want {
			t.Errorf("limit %d: %d cycles ran at once, want %d", tc.limit, peak, tc.want)
		}
		if tc.limit == 1 && f.count("ApplyRetention") != 2 {
			t.Errorf("limit 1: retention ran %d times, want once per cycle", f.count("ApplyRetention"))
		}
		r.mu.Lock()
		waited := false
		for _, s := range r.steps {
			waited = waited || s == activities.StepWaitingForSlot
		}
		r.mu.Unlock()
		if waited != (tc.limit == 1) {
			t.Errorf("limit %d: a cycle waited for a slot: %v (steps %v)", tc.limit, waited, r.steps)
		}
	}
}

// slotRun is a run of startCycles whose slot starts go to started (the
// workflow id of each, one call at a time).
func slotRun(t *testing.T, f *fakeCycle, started func(id string)) *cycleRun {
	var mu sync.Mutex
	return newCycleRun(t, f, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterWorkflowWithOptions(startCycles, workflow.RegisterOptions{Name: "startCycles"})
		env.RegisterWorkflowWithOptions(ConcurrencySlot, workflow.RegisterOptions{Name: SlotName})
		env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, _ converter.EncodedValues) {
			if info.WorkflowType.Name == SlotName {
				mu.Lock()
				started(info.WorkflowExecution.ID)
				mu.Unlock()
			}
		})
	})
}

// TestCycleTakesTheFreeSlotFirst: a plan that found slots free
// (Slot.Free) has the cycle start those first, not slot 1 up: each held
// slot tried is a child start that fails, a workflow task and two history
// events. A hint out of the limit is ignored.
func TestCycleTakesTheFreeSlotFirst(t *testing.T) {
	f := newFakeCycle()
	f.plan = func(in activities.PlanInput) (activities.Plan, error) {
		p := healthyPlan()
		p.Database = in.Database
		p.Slots = []activities.Slot{{Kind: activities.SlotServer, Name: "bak01", Limit: 2, Free: []int{9, 2}},
			{Kind: activities.SlotInstance, Name: "sql01", Limit: 4, Free: []int{3}}}
		return p, nil
	}
	var started []string
	r := slotRun(t, f, func(id string) { started = append(started, id) })
	r.env.ExecuteWorkflow("startCycles", []string{"Sales"})
	if err := r.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	want := []string{SlotWorkflowID(activities.SlotInstance, "sql01", 3), SlotWorkflowID(activities.SlotServer, "bak01", 2)}
	if !slices.Equal(started, want) {
		t.Errorf("slots started %v, want %v", started, want)
	}
}

// TestCycleGivesBackLaterSlotsWhileItWaits: a cycle starts its slots at
// once; when its instance's only slot is held, it gives back the server
// slot it took after it (a cycle never waits holding a later slot: two
// cycles would wait for each other) and takes it again once the instance
// is free. Both cycles end verified.
func TestCycleGivesBackLaterSlotsWhileItWaits(t *testing.T) {
	f := newFakeCycle()
	free := map[string][]int{"Sales": {2}, "Orders": {3}} // a server slot of each cycle's own
	f.plan = func(in activities.PlanInput) (activities.Plan, error) {
		p := healthyPlan()
		p.Database = in.Database
		p.Slots = []activities.Slot{{Kind: activities.SlotInstance, Name: "sql01", Limit: 1},
			{Kind: activities.SlotServer, Name: "bak01", Limit: 4, Free: free[in.Database]}}
		return p, nil
	}
	started := map[string]int{}
	r := slotRun(t, f, func(id string) { started[id]++ })
	r.env.ExecuteWorkflow("startCycles", []string{"Sales", "Orders"})
	if err := r.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res []CycleResult
	if err := r.env.GetWorkflowResult(&res); err != nil || len(res) != 2 || res[0].Sequence == 0 || res[1].Sequence == 0 {
		t.Fatalf("results %+v, %v; want both verified", res, err)
	}
	// The cycle that waited started its server slot twice: taken with the
	// instance's, given back, taken again after the instance's.
	again := 0
	for _, k := range []int{2, 3} {
		if started[SlotWorkflowID(activities.SlotServer, "bak01", k)] == 2 {
			again++
		}
	}
	if again != 1 || started[SlotWorkflowID(activities.SlotInstance, "sql01", 1)] != 2 {
		t.Errorf("slots started %v, want the instance's twice (once per cycle) and one server slot twice", started)
	}
}
