package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	fleetacts "github.com/backupcycle/backupcycle/activities/fleet"
	"github.com/backupcycle/backupcycle/internal/fleet"
)

// fleetFake stands in for BackupCycle children: each takes its database's
// duration of workflow time, records when it ran, and fails when asked.
type fleetFake struct {
	mu       sync.Mutex
	took     map[string]time.Duration // by instance/database
	fail     map[string]string        // error type by instance/database
	interval []span
	// check answers CheckFleetCarry; nil: the carry as it is, with the
	// plan's limits.
	check func(fleetacts.FleetCarryInput) (fleetacts.FleetCarryCheck, error)
}

type span struct {
	item       fleet.Item
	start, end time.Time
}

func (f *fleetFake) cycle(items map[string]fleet.Item) func(ctx workflow.Context, in CycleInput) (CycleResult, error) {
	return func(ctx workflow.Context, in CycleInput) (CycleResult, error) {
		key := in.Instance + "/" + in.Database
		start := workflow.Now(ctx)
		if err := workflow.Sleep(ctx, f.took[key]); err != nil {
			return CycleResult{}, err
		}
		f.mu.Lock()
		f.interval = append(f.interval, span{items[key], start, workflow.Now(ctx)})
		f.mu.Unlock()
		if t := f.fail[key]; t != "" {
			return CycleResult{}, temporal.NewNonRetryableApplicationError("backup cycle of "+in.Database+" failed at step checkdb: corrupt", t, nil)
		}
		return CycleResult{Database: in.Database, Instance: in.Instance, Sequence: 7}, nil
	}
}

// peak is the most spans overlapping at any instant among those that use
// name (as instance or server).
func peak(spans []span, uses func(fleet.Item) bool) int {
	best := 0
	for _, s := range spans {
		if !uses(s.item) {
			continue
		}
		n := 0
		for _, o := range spans {
			if uses(o.item) && !o.start.After(s.start) && o.end.After(s.start) {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

func fleetEnv(t *testing.T, p fleetacts.FleetPlan, f *fleetFake) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	items := map[string]fleet.Item{}
	for _, it := range p.Items {
		items[it.Key()] = it
	}
	env.RegisterWorkflowWithOptions(Fleet, workflow.RegisterOptions{Name: FleetName})
	env.RegisterWorkflowWithOptions(f.cycle(items), workflow.RegisterOptions{Name: BackupCycleName})
	var acts *fleetacts.Activities
	env.RegisterActivity(acts.PlanFleet)
	env.OnActivity(acts.PlanFleet, mock.Anything, mock.Anything).Return(p, nil)
	// A continuation's carry, held to a configuration whose limits and
	// window are the plan's.
	env.RegisterActivity(acts.CheckFleetCarry)
	env.OnActivity(acts.CheckFleetCarry, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in fleetacts.FleetCarryInput) (fleetacts.FleetCarryCheck, error) {
			if f.check != nil {
				return f.check(in)
			}
			return fleetacts.FleetCarryCheck{Limits: p.Limits, Deadline: in.Deadline, Pending: in.Pending}, nil
		})
	return env
}

// continuation is the environment of the run a Fleet run continued as.
func continuation(t *testing.T, p fleetacts.FleetPlan, f *fleetFake) *testsuite.TestWorkflowEnvironment {
	env := fleetEnv(t, p, f)
	env.SetContinuedExecutionRunID("previous-run")
	return env
}

func twoSiteFleet(n int) (fleetacts.FleetPlan, *fleetFake) {
	p := fleetacts.FleetPlan{Window: 24 * time.Hour, Limits: fleet.Limits{Total: 4,
		Instances: map[string]int{"sql01": 3, "sql02": 3}, Servers: map[string]int{"bak01": 2, "bak02": 2, "bak03": 2}}}
	f := &fleetFake{took: map[string]time.Duration{}, fail: map[string]string{}}
	for i := 0; i < n; i++ {
		it := fleet.Item{Instance: []string{"sql01", "sql02"}[i%2], Database: fmt.Sprintf("db%02d", i), SizeBytes: int64(1+i%7) << 30,
			Servers: [][]string{{"bak01", "bak02"}, {"bak02", "bak03"}, {"bak03", "bak01"}}[(i/2)%3]}
		p.Items = append(p.Items, it)
		f.took[it.Key()] = time.Duration(10+i%5*7) * time.Minute
	}
	fleet.Order(p.Items)
	p.NotRun = []fleetacts.FleetNotRun{{Instance: "sql02", Database: "Snap", Reason: "database snapshot"}}
	return p, f
}

func fleetResult(t *testing.T, env *testsuite.TestWorkflowEnvironment) FleetResult {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("fleet did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("fleet failed: %v", err)
	}
	var res FleetResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestFleetRunsAllWithinLimitsLargestFirst(t *testing.T) {
	// Each case makes another limit the binding one; the peaks must reach
	// it exactly (the pool is used) and never pass any limit.
	for _, tc := range []struct {
		name   string
		limits fleet.Limits
		total  int // expected peak
	}{
		{"servers", fleet.Limits{Total: 4, Instances: map[string]int{"sql01": 3, "sql02": 3},
			Servers: map[string]int{"bak01": 2, "bak02": 2, "bak03": 2}}, 3}, // each cycle holds 2 of 6 server slots
		{"instances", fleet.Limits{Total: 10, Instances: map[string]int{"sql01": 2, "sql02": 1},
			Servers: map[string]int{"bak01": 10, "bak02": 10, "bak03": 10}}, 3},
		{"total", fleet.Limits{Total: 2, Instances: map[string]int{"sql01": 5, "sql02": 5},
			Servers: map[string]int{"bak01": 10, "bak02": 10, "bak03": 10}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, f := twoSiteFleet(20)
			p.Limits = tc.limits
			f.fail["sql02/db05"] = activities.ErrCheckDBFailed
			env := fleetEnv(t, p, f)
			env.ExecuteWorkflow(FleetName, FleetInput{})
			res := fleetResult(t, env)

			if res.Counts[OutcomeVerified] != 19 || res.Counts[OutcomeFailed] != 1 || res.Counts[OutcomeNotRun] != 1 {
				t.Fatalf("counts %v, want 19 verified, 1 failed, 1 not-run", res.Counts)
			}
			for _, o := range res.Outcomes {
				if o.Database == "db05" && (o.Outcome != OutcomeFailed || o.Type != activities.ErrCheckDBFailed) {
					t.Errorf("db05: %+v, want failed with type %s", o, activities.ErrCheckDBFailed)
				}
				if o.Outcome == OutcomeVerified && (o.Sequence != 7 || o.WorkflowID != CycleWorkflowID(o.Instance, o.Database)) {
					t.Errorf("verified outcome %+v: want seq 7 under the database's own workflow id", o)
				}
			}
			if n := peak(f.interval, func(fleet.Item) bool { return true }); n != tc.total {
				t.Errorf("peak total %d, want %d", n, tc.total)
			}
			for inst, lim := range tc.limits.Instances {
				if n := peak(f.interval, func(it fleet.Item) bool { return it.Instance == inst }); n > lim {
					t.Errorf("peak on %s: %d cycles, limit %d", inst, n, lim)
				}
			}
			for srv, lim := range tc.limits.Servers {
				if n := peak(f.interval, func(it fleet.Item) bool { return it.Servers[0] == srv || it.Servers[1] == srv }); n > lim {
					t.Errorf("peak on %s: %d cycles, limit %d", srv, n, lim)
				}
			}
			// The largest database starts at the very beginning.
			first := f.interval[0].start
			for _, s := range f.interval {
				if s.start.Before(first) {
					first = s.start
				}
			}
			for _, s := range f.interval {
				if s.item.Key() == p.Items[0].Key() && !s.start.Equal(first) {
					t.Errorf("largest database %s started at %s, after the run's first start %s", s.item.Key(), s.start, first)
				}
			}
		})
	}
}

func TestFleetWindowLeavesTheRestNotReached(t *testing.T) {
	p, f := twoSiteFleet(12)
	p.Window = 30 * time.Minute
	env := fleetEnv(t, p, f)
	env.ExecuteWorkflow(FleetName, FleetInput{})
	res := fleetResult(t, env)
	if res.Counts[OutcomeNotReached] == 0 || res.Counts[OutcomeVerified] == 0 ||
		res.Counts[OutcomeNotReached]+res.Counts[OutcomeVerified] != 12 {
		t.Fatalf("counts %v, want some verified and the rest not-reached", res.Counts)
	}
	for _, s := range f.interval {
		if s.start.Sub(res.Began) >= p.Window {
			t.Errorf("%s started %s after the run began, past the window %s", s.item.Key(), s.start.Sub(res.Began), p.Window)
		}
	}
}

func TestFleetContinuesAsNewAndKeepsOutcomes(t *testing.T) {
	p, f := twoSiteFleet(7)
	env := fleetEnv(t, p, f)
	env.ExecuteWorkflow(FleetName, FleetInput{StartsPerRun: 3})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("first run ended with %v, want continue-as-new after 3 starts", err)
	}
	var next FleetInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Carry == nil || len(next.Carry.Pending) != 4 || len(next.Carry.Outcomes) != 4 || next.StartsPerRun != 3 {
		t.Fatalf("carry %+v: want 4 pending, 3 outcomes + 1 not-run", next.Carry)
	}
	// The continuation finishes the rest without planning again.
	env2 := continuation(t, p, f)
	env2.ExecuteWorkflow(FleetName, FleetInput{Carry: next.Carry})
	var res FleetResult
	for {
		if err := env2.GetWorkflowError(); errors.As(err, &can) {
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
				t.Fatal(err)
			}
			env2 = continuation(t, p, f)
			env2.ExecuteWorkflow(FleetName, next)
			continue
		}
		res = fleetResult(t, env2)
		break
	}
	if res.Counts[OutcomeVerified] != 7 || len(res.Outcomes) != 8 {
		t.Fatalf("final counts %v (%d outcomes), want 7 verified and the not-run one", res.Counts, len(res.Outcomes))
	}
	seen := map[string]bool{}
	for _, o := range res.Outcomes {
		if seen[o.Instance+"/"+o.Database] {
			t.Errorf("%s/%s has two outcomes", o.Instance, o.Database)
		}
		seen[o.Instance+"/"+o.Database] = true
	}
}

// TestFleetRefusesACarryAtStart: anyone with access to the namespace can
// start a Fleet with any input from the Web UI. A carry (the state a run
// hands its continuation: limits, window, databases) in a start is
// refused; nothing is planned or started.
func TestFleetRefusesACarryAtStart(t *testing.T) {
	p, f := twoSiteFleet(6)
	wide := fleet.Limits{Total: 100, Instances: map[string]int{"sql01": 100, "sql02": 100},
		Servers: map[string]int{"bak01": 100, "bak02": 100, "bak03": 100}}
	env := fleetEnv(t, p, f)
	env.ExecuteWorkflow(FleetName, FleetInput{Carry: &FleetCarry{Limits: wide, Pending: p.Items,
		Deadline: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}})
	err := env.GetWorkflowError()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrInvalidConfig || !strings.Contains(err.Error(), "carry") {
		t.Fatalf("Fleet started with a carry: %v, want InvalidConfig naming the carry", err)
	}
	if len(f.interval) != 0 {
		t.Errorf("%d cycles ran under a carried state", len(f.interval))
	}
}

// TestFleetContinuationKeepsToTheConfiguration: a run continuing as new
// takes the limits, deadline and databases the configuration allows now
// (CheckFleetCarry), not those its input carries: a carry that lifts every
// limit runs one cycle at a time when the configuration says so, and a
// database the configuration no longer backs up is reported, not run.
func TestFleetContinuationKeepsToTheConfiguration(t *testing.T) {
	p, f := twoSiteFleet(6)
	p.Limits = fleet.Limits{Total: 1, Instances: map[string]int{"sql01": 1, "sql02": 1},
		Servers: map[string]int{"bak01": 1, "bak02": 1, "bak03": 1}}
	wide := fleet.Limits{Total: 100, Instances: map[string]int{"sql01": 100, "sql02": 100},
		Servers: map[string]int{"bak01": 100, "bak02": 100, "bak03": 100}}
	dropped := p.Items[0]
	var asked fleetacts.FleetCarryInput
	f.check = func(in fleetacts.FleetCarryInput) (fleetacts.FleetCarryCheck, error) {
		asked = in
		return fleetacts.FleetCarryCheck{Limits: p.Limits, Deadline: in.Began.Add(p.Window), Pending: in.Pending[1:],
			NotRun: []fleetacts.FleetNotRun{{Instance: dropped.Instance, Database: dropped.Database, Type: activities.ErrInvalidConfig,
				Reason: "carried over from the previous run, but the configuration does not back it up"}}}, nil
	}
	env := continuation(t, p, f)
	began := env.Now()
	env.ExecuteWorkflow(FleetName, FleetInput{Carry: &FleetCarry{Began: began, Limits: wide, Pending: p.Items,
		Deadline: began.Add(1000 * time.Hour)}})
	res := fleetResult(t, env)
	if len(asked.Pending) != len(p.Items) || !asked.Began.Equal(began) {
		t.Errorf("CheckFleetCarry asked %+v, want the carried state", asked)
	}
	if n := peak(f.interval, func(fleet.Item) bool { return true }); n != 1 {
		t.Errorf("peak %d cycles at once, want the configuration's 1 (the carry said 100)", n)
	}
	if res.Counts[OutcomeVerified] != len(p.Items)-1 || res.Counts[OutcomeNotRun] != 1 {
		t.Errorf("counts %v, want %d verified and the dropped database not run", res.Counts, len(p.Items)-1)
	}
	for _, s := range f.interval {
		if s.item.Key() == dropped.Key() {
			t.Errorf("%s ran, though the configuration no longer backs it up", dropped.Key())
		}
	}
}

func TestFleetQueryAndDetails(t *testing.T) {
	p, f := twoSiteFleet(6)
	env := fleetEnv(t, p, f)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(FleetQuery)
		if err != nil {
			t.Errorf("fleet query: %v", err)
			return
		}
		var st FleetStatus
		if err := v.Get(&st); err != nil {
			t.Error(err)
			return
		}
		if len(st.Running) == 0 || len(st.Running)+len(st.Pending)+len(st.Outcomes) != 7 || !strings.Contains(st.Usage, "bak01") {
			t.Errorf("status mid-run %+v: want running cycles, pending ones and the not-run outcome, with the usage per server", st)
		}
	}, 5*time.Minute)
	env.ExecuteWorkflow(FleetName, FleetInput{})
	_ = fleetResult(t, env)
}

var _ = context.Background
