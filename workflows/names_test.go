package workflows

import (
	"slices"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities"
)

// `starter run --database sales` on a case-insensitive instance whose
// database is Sales: the plan resolves the name, and the cycle runs under
// Sales's own workflow id, with Sales in every activity's input and the
// databases: entry's spelling passed on.
func TestCycleRunsUnderTheResolvedName(t *testing.T) {
	f := newFakeCycle()
	f.plan = func(in activities.PlanInput) (activities.Plan, error) {
		p := healthyPlan()
		p.Database, p.Entry = "Sales", "sales"
		return p, nil
	}
	r := newCycleRun(t, f)
	res, err := r.runAs(CycleWorkflowID("sql01", "sales"), CycleInput{Database: "sales", Instance: "sql01"})
	if err != nil {
		t.Fatal(err)
	}
	if want := CycleWorkflowID("sql01", "Sales"); res.RunBy != want || res.Database != "Sales" {
		t.Errorf("result %+v, want Sales's cycle run by %s", res, want)
	}
	if len(f.backupIn) != 1 || f.backupIn[0].Database != "Sales" || f.backupIn[0].Entry != "sales" ||
		len(f.verifiedIn) != 1 || f.verifiedIn[0].Database != "Sales" || f.verifiedIn[0].Entry != "sales" {
		t.Errorf("backup %+v, verified %+v: want Sales with entry sales", f.backupIn, f.verifiedIn)
	}
	if got := r.attr("BackupDatabase"); got != "Sales" {
		t.Errorf("BackupDatabase %v, want Sales", got)
	}
}

// While the source instance cannot be reached to resolve the name, the
// cycle waits as for a lost SQL host and plans again; nothing runs under
// the unresolved name. An instance that never answers fails it, bounded.
func TestCycleWaitsForTheNameToResolve(t *testing.T) {
	f := newFakeCycle()
	f.plan = func(in activities.PlanInput) (activities.Plan, error) {
		p := healthyPlan()
		p.Limits.HostWait = time.Minute
		if f.count("PlanCycle") < 3 {
			p.Unresolved = `the name "Sales" could not be resolved on sql01: unreachable`
		}
		return p, nil
	}
	r := newCycleRun(t, f)
	res, err := r.run(CycleInput{Database: "Sales"})
	if err != nil || res.Sequence != 7 {
		t.Fatalf("cycle %+v %v, want verified after the instance answered", res, err)
	}
	if n := f.count("PlanCycle"); n != 3 {
		t.Errorf("PlanCycle ran %d times, want 3", n)
	}
	if !slices.Contains(r.steps, activities.StepWaitingForSQLHost) {
		t.Errorf("steps %v, want %s", r.steps, activities.StepWaitingForSQLHost)
	}

	f = newFakeCycle()
	f.plan = func(in activities.PlanInput) (activities.Plan, error) {
		p := healthyPlan()
		p.Limits.HostWait = time.Minute
		p.Unresolved = "unreachable"
		return p, nil
	}
	r = newCycleRun(t, f)
	_, err = r.run(CycleInput{Database: "Sales"})
	if appErr := appError(t, err); appErr.Type() != activities.ErrSQLHostUnreachable {
		t.Errorf("error %v, want SQLHostUnreachable", err)
	}
	if f.count("AllocateSequence") != 0 || f.count("Backup") != 0 {
		t.Errorf("calls %v: nothing may run under an unresolved name", f.calls)
	}
}
