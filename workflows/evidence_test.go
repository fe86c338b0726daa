package workflows

import (
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/activities"
	cycleacts "github.com/backupcycle/backupcycle/activities/cycle"
)

// evidenceCycle is a healthy night of a database whose configuration keeps
// an evidence ledger.
func evidenceCycle() *fakeCycle {
	f := newFakeCycle()
	f.plan = func(activities.PlanInput) (activities.Plan, error) {
		p := healthyPlan()
		p.Evidence = true
		return p, nil
	}
	return f
}

// With an evidence ledger the verified set is recorded on the servers
// holding it, after the verification copy is dropped and before retention.
func TestCycleRecordsEvidenceOfTheVerifiedSet(t *testing.T) {
	f := evidenceCycle()
	r := newCycleRun(t, f)
	res, err := r.run(CycleInput{Database: "Sales"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PlanCycle", "AllocateSequence", "Backup", "WriteManifest", "CopyToRemote", "Restore",
		"CheckDB", "SanityChecks", "MarkVerified", "DropVerifyDB", "RecordSetEvidence", "ApplyRetention"}
	if !slices.Equal(f.calls, want) {
		t.Fatalf("activities ran %v, want %v", f.calls, want)
	}
	if in := f.evidenceIn[0]; in.Sequence != 7 || !slices.Equal(in.Servers, []string{"bak01", "remote01"}) {
		t.Errorf("RecordSetEvidence input %+v: want seq 7 on bak01 and remote01", in)
	}
	if len(res.Evidence) != 2 || len(res.Warnings) != 0 || !slices.Contains(r.steps, activities.StepEvidence) {
		t.Errorf("result: evidence %+v, warnings %v, steps %v", res.Evidence, res.Warnings, r.steps)
	}
}

// A ledger that cannot be written, on one server or at all, leaves the set
// verified: warnings name it, retention still runs.
func TestCycleEvidenceFailureKeepsTheSetVerified(t *testing.T) {
	for _, tt := range []struct {
		name string
		out  activities.EvidenceOutput
		err  error
		want string
	}{
		{"one server", activities.EvidenceOutput{NotRecorded: []string{"remote01: share full"}}, nil, "evidence not recorded on remote01: share full"},
		{"no key", activities.EvidenceOutput{}, temporal.NewNonRetryableApplicationError("evidence signing key: file k missing",
			activities.ErrInvalidConfig, nil), "evidence signing key: file k missing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := evidenceCycle()
			f.evidence = func(activities.EvidenceInput) (activities.EvidenceOutput, error) { return tt.out, tt.err }
			r := newCycleRun(t, f)
			res, err := r.run(CycleInput{Database: "Sales"})
			if err != nil {
				t.Fatalf("the cycle failed: %v; a ledger's failure must leave the set verified", err)
			}
			if r.attr(AttrOutcome.GetName()) != OutcomeVerified || len(f.failedIn) != 0 || f.count("ApplyRetention") != 1 {
				t.Errorf("outcome %v, marked failed %d times, retention %d", r.attr(AttrOutcome.GetName()), len(f.failedIn), f.count("ApplyRetention"))
			}
			if len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], "evidence not recorded") || !strings.Contains(res.Warnings[0], tt.want) {
				t.Errorf("warnings %v: want one with %q", res.Warnings, tt.want)
			}
		})
	}
}

// With an immutable copy too, the ledgers follow the set to its object
// store, but only when the set itself was copied there.
func TestCycleEvidenceFollowsTheImmutableCopy(t *testing.T) {
	for _, failed := range []bool{false, true} {
		f := immutableCycle()
		plan := f.plan
		f.plan = func(in activities.PlanInput) (activities.Plan, error) {
			p, err := plan(in)
			p.Evidence = true
			return p, err
		}
		if failed {
			f.immutable = func(cycleacts.ImmutableInput) (cycleacts.ImmutableOutput, error) {
				return cycleacts.ImmutableOutput{}, temporal.NewNonRetryableApplicationError("not immutable", activities.ErrNotImmutable, nil)
			}
		}
		r := newCycleRun(t, f)
		if _, err := r.run(CycleInput{Database: "Sales"}); err != nil {
			t.Fatal(err)
		}
		want := "vault01"
		if failed {
			want = ""
		}
		if len(f.evidenceIn) != 1 || f.evidenceIn[0].Immutable != want {
			t.Errorf("immutable copy failed %v: RecordSetEvidence input %+v, want the ledgers copied to %q", failed, f.evidenceIn, want)
		}
	}
}
