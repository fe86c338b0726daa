package workflows

import (
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/activities"
	cycleacts "github.com/backupcycle/backupcycle/activities/cycle"
)

// A database with immutable_copy: once its set is verified (and the
// verification copy dropped), the set goes to the object store from the
// servers holding it, before retention; the result says how it went.
func TestCycleCopiesTheVerifiedSetToItsObjectStore(t *testing.T) {
	f := immutableCycle()
	r := newCycleRun(t, f)
	res, err := r.run(CycleInput{Database: "Sales"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PlanCycle", "AllocateSequence", "Backup", "WriteManifest", "CopyToRemote", "Restore",
		"CheckDB", "SanityChecks", "MarkVerified", "DropVerifyDB", "CopyImmutable", "ApplyRetention"}
	if !slices.Equal(f.calls, want) {
		t.Fatalf("activities ran %v, want %v", f.calls, want)
	}
	in := f.immutableIn[0]
	if in.Target != "vault01" || in.Sequence != 7 || !slices.Equal(in.Servers, []string{"bak01", "remote01"}) {
		t.Errorf("CopyImmutable input %+v: want seq 7 from bak01 and remote01 to vault01", in)
	}
	if res.Immutable == nil || res.Immutable.State != "copied" || len(res.Warnings) != 0 {
		t.Errorf("result: immutable %+v, warnings %v", res.Immutable, res.Warnings)
	}
	if !slices.Contains(r.steps, activities.StepImmutableCopy) {
		t.Errorf("steps %v: want %s shown", r.steps, activities.StepImmutableCopy)
	}
}

// A failed immutable copy (the store is not immutable) leaves the set
// verified: the cycle ends verified with a warning naming it.
func TestCycleImmutableCopyFailureKeepsTheSetVerified(t *testing.T) {
	f := immutableCycle()
	f.immutable = func(cycleacts.ImmutableInput) (cycleacts.ImmutableOutput, error) {
		return cycleacts.ImmutableOutput{}, temporal.NewNonRetryableApplicationError("vault01 is not immutable: delete went through",
			activities.ErrNotImmutable, nil)
	}
	r := newCycleRun(t, f)
	res, err := r.run(CycleInput{Database: "Sales"})
	if err != nil {
		t.Fatalf("the cycle failed: %v; an immutable copy's failure must leave the set verified", err)
	}
	if r.attr(AttrOutcome.GetName()) != OutcomeVerified || len(f.failedIn) != 0 || f.count("ApplyRetention") != 1 {
		t.Errorf("outcome %v, marked failed %d times, retention %d: want verified, never failed, retention run",
			r.attr(AttrOutcome.GetName()), len(f.failedIn), f.count("ApplyRetention"))
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "vault01") || !strings.Contains(res.Warnings[0], "not immutable") {
		t.Errorf("warnings %v: want one naming vault01 and why", res.Warnings)
	}
	if f.count("CopyImmutable") != 1 {
		t.Errorf("CopyImmutable ran %d times; NotImmutable is not retried", f.count("CopyImmutable"))
	}
}

// Earlier sets the copy could not catch up are a warning of a verified
// cycle that names the object store and why.
func TestCycleImmutableCatchUpFailureIsAWarning(t *testing.T) {
	f := immutableCycle()
	f.immutable = func(in cycleacts.ImmutableInput) (cycleacts.ImmutableOutput, error) {
		return cycleacts.ImmutableOutput{Target: in.Target, State: "copied", CaughtUp: []int64{3},
			CatchUpError: "catching up the immutable copy of sql01/Sales seq 4: object store vault01: connection reset"}, nil
	}
	r := newCycleRun(t, f)
	res, err := r.run(CycleInput{Database: "Sales"})
	if err != nil || r.attr(AttrOutcome.GetName()) != OutcomeVerified {
		t.Fatalf("cycle: %v, outcome %v; want verified", err, r.attr(AttrOutcome.GetName()))
	}
	if res.Immutable == nil || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "earlier sets to vault01") ||
		!strings.Contains(res.Warnings[0], "seq 4") {
		t.Errorf("immutable %+v, warnings %v: want the copy and one warning naming vault01 and set 4", res.Immutable, res.Warnings)
	}
}

// immutableCycle is a healthy night of a database whose immutable_copy is
// vault01.
func immutableCycle() *fakeCycle {
	f := newFakeCycle()
	f.plan = func(activities.PlanInput) (activities.Plan, error) {
		p := healthyPlan()
		p.Immutable = "vault01"
		return p, nil
	}
	return f
}

// Without immutable_copy nothing changes: no step, no marker.
func TestCycleWithoutObjectStoreSkipsTheStep(t *testing.T) {
	f := newFakeCycle()
	r := newCycleRun(t, f)
	if _, err := r.run(CycleInput{Database: "Sales"}); err != nil {
		t.Fatal(err)
	}
	if f.count("CopyImmutable") != 0 {
		t.Error("CopyImmutable ran for a database without immutable_copy")
	}
}
