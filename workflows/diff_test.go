package workflows

import (
	"slices"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
)

// diffPlan is the plan of a differential on set 5 (the newest verified
// full), written beside it on bak02 and proven from bak01.
func diffPlan(activities.PlanInput) (activities.Plan, error) {
	p := healthyPlan()
	p.Rotation, p.Remote = []string{"bak02", "bak01"}, "bak01"
	p.LastServerSource = "differential base"
	p.Mode = activities.BackupMode{Compression: true, Sequence: "catalog",
		Differential: &catalog.DiffBase{Sequence: 5, BackupSetGUID: "6F9A2B10-3C4D-4E5F-8091-A2B3C4D5E6F7"}}
	return p, nil
}

// A differential runs as the database's cycle (one at a time with its
// fulls, under its workflow id): planned as one, backed up in the plan's
// mode (its base), copied, proven, verified and retained like a full.
func TestCycleDifferentialRunsTheWholeCycle(t *testing.T) {
	f := newFakeCycle()
	f.plan = diffPlan
	r := newCycleRun(t, f)
	res, err := r.run(CycleInput{Database: "Sales", Differential: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.planIn) != 1 || !f.planIn[0].Differential {
		t.Fatalf("plan inputs %+v, want one asking for a differential", f.planIn)
	}
	if len(f.backupIn) != 1 || f.backupIn[0].Mode == nil || f.backupIn[0].Mode.Differential == nil ||
		f.backupIn[0].Mode.Differential.Sequence != 5 || f.backupIn[0].Server != "bak02" {
		t.Fatalf("backup inputs %+v, want one differential on set 5 to bak02", f.backupIn)
	}
	want := []string{"PlanCycle", "AllocateSequence", "Backup", "WriteManifest", "CopyToRemote", "Restore", "CheckDB", "SanityChecks",
		"MarkVerified", "DropVerifyDB", "ApplyRetention"}
	if !slices.Equal(dropThenRetention(f.calls), want) {
		t.Fatalf("calls %v\nwant  %v", f.calls, want)
	}
	if res.Base != 5 || res.Sequence != 7 || res.Remote != "bak01" || len(f.verifiedIn) != 1 {
		t.Fatalf("result %+v, want differential 7 on base 5 verified from bak01", res)
	}
	if p := r.progress(); p.Base != 5 {
		t.Errorf("progress %+v, want the base", p)
	}
}

// No verified full (or the base moved): the differential ends skipped,
// saying why, and touches nothing.
func TestCycleDifferentialWithoutABaseIsSkipped(t *testing.T) {
	f := newFakeCycle()
	why := "no verified full backup of sql01/Sales that is not COPY_ONLY on its backup servers"
	f.plan = func(activities.PlanInput) (activities.Plan, error) {
		return activities.Plan{Database: "Sales", Instance: "sql01", NoDifferentialBase: why}, nil
	}
	r := newCycleRun(t, f)
	res, err := r.run(CycleInput{Database: "Sales", Differential: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != why || res.SkipReason != activities.SkipNoDifferentialBase || !slices.Equal(f.calls, []string{"PlanCycle"}) {
		t.Fatalf("result %+v, calls %v: want skipped with the plan's reason and nothing else run", res, f.calls)
	}
	if r.attr(AttrOutcome.GetName()) != OutcomeSkipped {
		t.Errorf("outcome %v", r.attr(AttrOutcome.GetName()))
	}
}

// A differential whose header names a full backup the product did not
// take as its base fails with DifferentialBaseMoved: that differential is
// marked failed (foreign_base), nothing else is, and its base is never
// named to MarkFailed.
func TestCycleDifferentialOnAForeignFullFailsOnlyItself(t *testing.T) {
	f := newFakeCycle()
	f.plan = diffPlan
	f.manifest = func(activities.ManifestInput) (activities.ManifestOutput, error) {
		return activities.ManifestOutput{}, temporal.NewNonRetryableApplicationError(
			"differential set 7 of sql01/Sales holds the changes since backup set X, a full backup by DBA", activities.ErrDifferentialBaseMoved, nil)
	}
	r := newCycleRun(t, f)
	_, err := r.run(CycleInput{Database: "Sales", Differential: true})
	if appErr := appError(t, err); appErr.Type() != activities.ErrDifferentialBaseMoved {
		t.Fatalf("error type %s, want %s", appErr.Type(), activities.ErrDifferentialBaseMoved)
	}
	if len(f.failedIn) != 1 || f.failedIn[0].Sequence != 7 || f.failedIn[0].Evidence != string(catalog.EvidenceForeignBase) ||
		!slices.Equal(f.failedIn[0].Servers, []string{"bak02"}) {
		t.Fatalf("MarkFailed %+v, want set 7 only, on bak02, evidence foreign_base", f.failedIn)
	}
	if f.count("CopyToRemote") != 0 || f.count("Restore") != 0 {
		t.Errorf("calls %v: nothing after the catalog step", f.calls)
	}
}

// A failed or cancelled differential's RESTORE step stops its base's
// RESTORE too: StopStatements gets the base.
func TestCycleDifferentialStopsItsBasesRestore(t *testing.T) {
	f := newFakeCycle()
	f.plan = diffPlan
	f.restore = func(activities.VerifyInput) (activities.StepOutput, error) {
		return activities.StepOutput{}, temporal.NewNonRetryableApplicationError("restore took too long", activities.ErrInvalidConfig, nil)
	}
	r := newCycleRun(t, f)
	if _, err := r.run(CycleInput{Database: "Sales", Differential: true}); err == nil {
		t.Fatal("want a failure")
	}
	if len(f.stopIn) == 0 || f.stopIn[0].Base != 5 || f.stopIn[0].Remote != "bak01" {
		t.Fatalf("StopStatements %+v, want the base with the remote", f.stopIn)
	}
}
