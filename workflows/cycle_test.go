package workflows

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	cycleacts "github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/catalog"
)

// fakeCycle answers the cycle's activities from overridable functions and
// records every call, so each test states only what differs from a healthy
// night.
type fakeCycle struct {
	mu    sync.Mutex
	calls []string // activity names in call order
	next  int64    // next sequence number

	plan      func(activities.PlanInput) (activities.Plan, error)
	backup    func(activities.BackupInput) (activities.BackupOutput, error)
	copy      func(activities.CopyInput) (activities.CopyOutput, error)
	restore   func(activities.VerifyInput) (activities.StepOutput, error)
	checkDB   func(activities.VerifyInput) (activities.StepOutput, error)
	sanity    func(activities.VerifyInput) (activities.StepOutput, error)
	manifest  func(activities.ManifestInput) (activities.ManifestOutput, error)
	retention func(activities.RetentionInput) (activities.RetentionOutput, error)
	immutable func(cycleacts.ImmutableInput) (cycleacts.ImmutableOutput, error)
	evidence  func(activities.EvidenceInput) (activities.EvidenceOutput, error)
	sequence  func() (int64, error)
	stop      func(activities.StopInput) (activities.StopOutput, error)

	planIn      []activities.PlanInput
	sequenceIn  []activities.SequenceInput
	backupIn    []activities.BackupInput
	copyIn      []activities.CopyInput
	restoreIn   []activities.VerifyInput
	checkIn     []activities.VerifyInput
	failedIn    []activities.MarkInput
	cancelledIn []activities.MarkInput
	stopIn      []activities.StopInput
	verifiedIn  []activities.MarkInput
	retentionIn []activities.RetentionInput
	dropIn      []activities.VerifyInput
	immutableIn []cycleacts.ImmutableInput
	evidenceIn  []activities.EvidenceInput
}

func healthyPlan() activities.Plan {
	return activities.Plan{
		Database: "Sales", Instance: "sql01", Rotation: []string{"bak01", "bak02"},
		LastServerSource: "none", Stripes: 4, Remote: "remote01",
		VerifyInstance: "verify01",
	}
}

func newFakeCycle() *fakeCycle {
	f := &fakeCycle{next: 7}
	f.plan = func(activities.PlanInput) (activities.Plan, error) { return healthyPlan(), nil }
	f.sequence = func() (int64, error) {
		s := f.next
		f.next++
		return s, nil
	}
	f.backup = func(in activities.BackupInput) (activities.BackupOutput, error) {
		return activities.BackupOutput{
			Stripes:  []activities.Stripe{{Name: "Sales_00000007_1of4.bak"}},
			Bytes:    4 << 30,
			Duration: 10 * time.Minute,
		}, nil
	}
	f.manifest = func(in activities.ManifestInput) (activities.ManifestOutput, error) {
		return activities.ManifestOutput{
			Manifest: "Sales_manifest.json",
			Stripes:  []activities.Stripe{{Name: "s1", Size: 1, SHA256: "ab"}},
		}, nil
	}
	f.copy = func(activities.CopyInput) (activities.CopyOutput, error) {
		return activities.CopyOutput{Bytes: 4 << 30, Duration: 20 * time.Minute}, nil
	}
	f.restore = func(activities.VerifyInput) (activities.StepOutput, error) {
		return activities.StepOutput{Duration: 30 * time.Minute, VerifyDatabase: "Sales_verify"}, nil
	}
	f.checkDB = func(activities.VerifyInput) (activities.StepOutput, error) {
		return activities.StepOutput{Duration: 40 * time.Minute}, nil
	}
	f.sanity = func(activities.VerifyInput) (activities.StepOutput, error) {
		return activities.StepOutput{Duration: time.Minute, Checks: 2}, nil
	}
	f.retention = func(activities.RetentionInput) (activities.RetentionOutput, error) {
		return activities.RetentionOutput{Deleted: []activities.SetRef{{Server: "bak01", Sequence: 3}}}, nil
	}
	return f
}

func (f *fakeCycle) record(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
}

func (f *fakeCycle) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == name {
			n++
		}
	}
	return n
}

// cycleRun is one workflow execution in the test environment, with the
// search attributes it upserted.
type cycleRun struct {
	t     *testing.T
	env   *testsuite.TestWorkflowEnvironment
	f     *fakeCycle
	mu    sync.Mutex
	steps []string       // BackupStep values in upsert order
	attrs map[string]any // last value of each search attribute
}

// newCycleRun builds the environment; first mocks come before the fake's
// defaults and so take precedence over them.
func newCycleRun(t *testing.T, f *fakeCycle, first ...func(*testsuite.TestWorkflowEnvironment)) *cycleRun {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(BackupCycle, workflow.RegisterOptions{Name: BackupCycleName})
	r := &cycleRun{t: t, env: env, f: f, attrs: map[string]any{}}
	for _, fn := range first {
		fn(env)
	}
	var acts = &cycleacts.Activities{}
	env.OnActivity(acts.PlanCycle, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PlanInput) (activities.Plan, error) {
			f.record("PlanCycle")
			f.planIn = append(f.planIn, in)
			return f.plan(in)
		})
	env.OnActivity(acts.AllocateSequence, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SequenceInput) (int64, error) {
			f.record("AllocateSequence")
			f.sequenceIn = append(f.sequenceIn, in)
			return f.sequence()
		})
	env.OnActivity(acts.Backup, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BackupInput) (activities.BackupOutput, error) {
			f.record("Backup")
			f.backupIn = append(f.backupIn, in)
			return f.backup(in)
		})
	env.OnActivity(acts.WriteManifest, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ManifestInput) (activities.ManifestOutput, error) {
			f.record("WriteManifest")
			return f.manifest(in)
		})
	env.OnActivity(acts.CopyToRemote, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CopyInput) (activities.CopyOutput, error) {
			f.record("CopyToRemote")
			f.copyIn = append(f.copyIn, in)
			return f.copy(in)
		})
	env.OnActivity(acts.Restore, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.VerifyInput) (activities.StepOutput, error) {
			f.record("Restore")
			f.restoreIn = append(f.restoreIn, in)
			return f.restore(in)
		})
	env.OnActivity(acts.CheckDB, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.VerifyInput) (activities.StepOutput, error) {
			f.record("CheckDB")
			f.checkIn = append(f.checkIn, in)
			return f.checkDB(in)
		})
	env.OnActivity(acts.SanityChecks, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.VerifyInput) (activities.StepOutput, error) {
			f.record("SanityChecks")
			return f.sanity(in)
		})
	env.OnActivity(acts.MarkVerified, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MarkInput) error {
			f.record("MarkVerified")
			f.verifiedIn = append(f.verifiedIn, in)
			return nil
		})
	env.OnActivity(acts.MarkFailed, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MarkInput) error {
			f.record("MarkFailed")
			f.failedIn = append(f.failedIn, in)
			return nil
		})
	env.OnActivity(acts.MarkCancelled, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MarkInput) error {
			f.record("MarkCancelled")
			f.cancelledIn = append(f.cancelledIn, in)
			return nil
		})
	env.OnActivity(acts.StopStatements, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.StopInput) (activities.StopOutput, error) {
			f.record("StopStatements")
			f.stopIn = append(f.stopIn, in)
			if f.stop != nil {
				return f.stop(in)
			}
			return activities.StopOutput{}, nil
		})
	env.OnActivity(acts.DropVerifyDB, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.VerifyInput) error {
			f.record("DropVerifyDB")
			f.dropIn = append(f.dropIn, in)
			return nil
		})
	env.OnActivity(acts.ApplyRetention, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RetentionInput) (activities.RetentionOutput, error) {
			f.record("ApplyRetention")
			f.retentionIn = append(f.retentionIn, in)
			return f.retention(in)
		})
	env.OnActivity(acts.CopyImmutable, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in cycleacts.ImmutableInput) (cycleacts.ImmutableOutput, error) {
			f.record("CopyImmutable")
			f.immutableIn = append(f.immutableIn, in)
			if f.immutable != nil {
				return f.immutable(in)
			}
			return cycleacts.ImmutableOutput{Target: in.Target, State: "copied", Objects: 2}, nil
		})
	env.OnActivity(acts.RecordSetEvidence, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.EvidenceInput) (activities.EvidenceOutput, error) {
			f.record("RecordSetEvidence")
			f.evidenceIn = append(f.evidenceIn, in)
			if f.evidence != nil {
				return f.evidence(in)
			}
			var out activities.EvidenceOutput
			for _, s := range in.Servers {
				out.Recorded = append(out.Recorded, activities.EvidenceRecord{Server: s, Seq: 1})
			}
			return out, nil
		})
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		r.mu.Lock()
		defer r.mu.Unlock()
		if v, ok := sa.GetKeyword(AttrStep); ok {
			r.steps = append(r.steps, v)
			r.attrs[AttrStep.GetName()] = v
		}
		for _, k := range []temporal.SearchAttributeKeyKeyword{AttrDatabase, AttrServer, AttrOutcome} {
			if v, ok := sa.GetKeyword(k); ok {
				r.attrs[k.GetName()] = v
			}
		}
		if v, ok := sa.GetInt64(AttrSequence); ok {
			r.attrs[AttrSequence.GetName()] = v
		}
	}).Return(nil)
	return r
}

func (r *cycleRun) run(in CycleInput) (CycleResult, error) {
	// The database's own id: a start under another id launches a child.
	return r.runAs(CycleWorkflowID("sql01", in.Database), in)
}

func (r *cycleRun) runAs(id string, in CycleInput) (CycleResult, error) {
	r.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	r.env.ExecuteWorkflow(BackupCycleName, in)
	if !r.env.IsWorkflowCompleted() {
		r.t.Fatal("workflow did not complete")
	}
	var res CycleResult
	err := r.env.GetWorkflowError()
	if err == nil {
		if gerr := r.env.GetWorkflowResult(&res); gerr != nil {
			r.t.Fatal(gerr)
		}
	}
	return res, err
}

func (r *cycleRun) progress() Progress {
	r.t.Helper()
	v, err := r.env.QueryWorkflow(ProgressQuery)
	if err != nil {
		r.t.Fatalf("query %s: %v", ProgressQuery, err)
	}
	var p Progress
	if err := v.Get(&p); err != nil {
		r.t.Fatal(err)
	}
	return p
}

func (r *cycleRun) attr(name string) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attrs[name]
}

// appError returns the ApplicationError a failed workflow ended with.
func appError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	if err == nil {
		t.Fatal("workflow succeeded, want a failure")
	}
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		t.Fatalf("workflow error %v is not an ApplicationError", err)
	}
	return appErr
}

// dropThenRetention is calls with DropVerifyDB before ApplyRetention
// where they ran together: the cycle schedules both in one workflow task,
// and the test environment runs them in either order.
func dropThenRetention(calls []string) []string {
	out := slices.Clone(calls)
	if i := slices.Index(out, "ApplyRetention"); i >= 0 && i+1 < len(out) && out[i+1] == "DropVerifyDB" {
		out[i], out[i+1] = out[i+1], out[i]
	}
	return out
}

// TestCyclePlanAllocatesTheSequence: a cycle started under the database's
// own id has its plan allocate the sequence (one activity less, no step
// sequence); a plan that could not leaves it to AllocateSequence. A start
// under another id, which launches the cycle, allocates nothing.
func TestCyclePlanAllocatesTheSequence(t *testing.T) {
	for _, planned := range []int64{9, 0} {
		f := newFakeCycle()
		f.plan = func(in activities.PlanInput) (activities.Plan, error) {
			p := healthyPlan()
			if in.AllocateSequence {
				p.Sequence = planned
			}
			return p, nil
		}
		r := newCycleRun(t, f)
		res, err := r.run(CycleInput{Database: "Sales", Instance: "sql01"})
		if err != nil {
			t.Fatalf("plan allocated %d: %v", planned, err)
		}
		if len(f.planIn) != 1 || !f.planIn[0].AllocateSequence {
			t.Fatalf("plan inputs %+v, want one asking for the sequence", f.planIn)
		}
		want, allocations, sequenceStep := planned, 0, false
		if planned == 0 {
			want, allocations, sequenceStep = 7, 1, true
		}
		if res.Sequence != want || f.count("AllocateSequence") != allocations || slices.Contains(r.steps, "sequence") != sequenceStep {
			t.Errorf("plan allocated %d: seq %d, AllocateSequence ran %d times, steps %v; want seq %d, %d, step sequence %v",
				planned, res.Sequence, f.count("AllocateSequence"), r.steps, want, allocations, sequenceStep)
		}
		if len(f.backupIn) != 1 || f.backupIn[0].Sequence != want {
			t.Errorf("plan allocated %d: backups %+v, want one of seq %d", planned, f.backupIn, want)
		}
	}
	// A start under another id, or without its instance, launches the
	// cycle: its plan allocates nothing (the number would be a gap).
	for id, instance := range map[string]string{"schedule-of-sales": "sql01", CycleWorkflowID("", "Sales"): ""} {
		f := newFakeCycle()
		r := newCycleRun(t, f)
		if _, err := r.runAs(id, CycleInput{Database: "Sales", Instance: instance}); err != nil {
			t.Fatal(err)
		}
		if len(f.planIn) == 0 || f.planIn[0].AllocateSequence {
			t.Errorf("a start as %s with instance %q planned %+v, want no sequence allocated", id, instance, f.planIn)
		}
	}
}

func TestCycleHappyPathVerifiesAndMeasures(t *testing.T) {
	f := newFakeCycle()
	r := newCycleRun(t, f)
	res, err := r.run(CycleInput{Database: "Sales"})
	if err != nil {
		t.Fatalf("cycle failed: %v", err)
	}

	wantCalls := []string{"PlanCycle", "AllocateSequence", "Backup", "WriteManifest", "CopyToRemote", "Restore",
		"CheckDB", "SanityChecks", "MarkVerified", "DropVerifyDB", "ApplyRetention"}
	if !slices.Equal(dropThenRetention(f.calls), wantCalls) {
		t.Errorf("activities ran %v, want %v", f.calls, wantCalls)
	}
	if res.Sequence != 7 || res.Server != "bak01" || res.Instance != "sql01" || res.Remote != "remote01" || res.Manifest != "Sales_manifest.json" {
		t.Errorf("result identifies %s seq %d on %s/%s manifest %q, want Sales seq 7 on bak01/remote01",
			res.Database, res.Sequence, res.Server, res.Remote, res.Manifest)
	}
	if !slices.Equal(res.Locations, []string{"bak01", "remote01"}) {
		t.Errorf("locations = %v, want [bak01 remote01]", res.Locations)
	}
	if len(res.Stripes) != 1 || res.Stripes[0].SHA256 != "ab" {
		t.Errorf("stripes = %+v, want the manifest's stripes with hashes", res.Stripes)
	}
	want := activities.Timings{Backup: 10 * time.Minute, Copy: 20 * time.Minute, Restore: 30 * time.Minute,
		CheckDB: 40 * time.Minute, Sanity: time.Minute, Total: 100 * time.Minute}
	if res.Timings != want {
		t.Errorf("timings = %+v, want %+v", res.Timings, want)
	}
	if len(res.Failed) != 0 || len(res.Warnings) != 0 {
		t.Errorf("failed %v warnings %v, want none", res.Failed, res.Warnings)
	}
	if len(f.verifiedIn) != 1 || f.verifiedIn[0].Sequence != 7 ||
		!slices.Equal(f.verifiedIn[0].Servers, []string{"bak01", "remote01"}) || f.verifiedIn[0].Timings != want {
		t.Errorf("MarkVerified got %+v, want seq 7 on bak01+remote01 with the timings", f.verifiedIn)
	}
	in := f.restoreIn[0]
	if in.Server != "remote01" || in.Sequence != 7 || in.Instance != "sql01" || res.VerifyDatabase != "Sales_verify" {
		t.Errorf("restore input %+v, result verify db %q: want seq 7 of sql01 from remote01, into Sales_verify", in, res.VerifyDatabase)
	}
	if c := f.copyIn[0]; c.From != "bak01" || c.To != "remote01" || c.Sequence != 7 {
		t.Errorf("copy input %+v, want seq 7 bak01 -> remote01", c)
	}

	// The copy is dropped while retention runs: no step of its own.
	wantSteps := []string{"plan", "sequence", "backup", "catalog", "copy", "restore", "checkdb", "sanity",
		"verified", "retention", "done"}
	if !slices.Equal(r.steps, wantSteps) {
		t.Errorf("BackupStep went %v, want %v", r.steps, wantSteps)
	}
	for name, want := range map[string]any{"BackupDatabase": "Sales", "BackupSequence": int64(7),
		"BackupServer": "bak01", "BackupOutcome": OutcomeVerified} {
		if got := r.attr(name); got != want {
			t.Errorf("search attribute %s = %v, want %v", name, got, want)
		}
	}
	p := r.progress()
	if p.Step != activities.StepDone || p.Outcome != OutcomeVerified || p.Sequence != 7 || p.Timings != want {
		t.Errorf("final progress %+v, want done/verified seq 7 with timings", p)
	}
}

func TestCycleRoundRobinChoiceIsPassedThrough(t *testing.T) {
	f := newFakeCycle()
	f.plan = func(in activities.PlanInput) (activities.Plan, error) {
		p := healthyPlan()
		if in.LastServer == "bak01" { // the previous cycle used bak01: alternate
			p.Rotation = []string{"bak02", "bak01"}
			p.LastServer, p.LastServerSource = in.LastServer, "caller"
		}
		return p, nil
	}
	r := newCycleRun(t, f)
	res, err := r.run(CycleInput{Database: "Sales", LastServer: "bak01"})
	if err != nil {
		t.Fatal(err)
	}
	if f.planIn[0].LastServer != "bak01" || f.planIn[0].Database != "Sales" {
		t.Errorf("PlanCycle got %+v, want the caller's database and last server", f.planIn[0])
	}
	if res.Server != "bak02" || f.backupIn[0].Server != "bak02" || f.copyIn[0].From != "bak02" {
		t.Errorf("backed up to %s, copied from %s, result %s: want bak02 (the plan's primary)",
			f.backupIn[0].Server, f.copyIn[0].From, res.Server)
	}
	if f.backupIn[0].Stripes != 4 {
		t.Errorf("backup stripes = %d, want the plan's 4", f.backupIn[0].Stripes)
	}
	if got := r.attr("BackupServer"); got != "bak02" {
		t.Errorf("BackupServer = %v, want bak02", got)
	}
	if ret := f.retentionIn[0]; ret.Protect != res.Sequence ||
		!slices.Equal(ret.Servers, []string{"bak02", "bak01", "remote01"}) {
		t.Errorf("retention input %+v, want protect seq %d on every server", ret, res.Sequence)
	}
}

// Every non-retryable error stops the cycle at once (one attempt, even when
// the activity forgot to mark it non-retryable), marks the set failed, never
// verifies it and never runs retention.
func TestCycleNonRetryableErrorsStopAndMarkFailed(t *testing.T) {
	fail := func(typ string) error { return temporal.NewApplicationError(typ+" happened", typ) }
	cases := []struct {
		name, activity, typ string
		breakIt             func(f *fakeCycle, err error)
		marked              bool // a sequence exists: the set is marked failed
		holders             []string
	}{
		{"plan invalid config", "PlanCycle", activities.ErrInvalidConfig,
			func(f *fakeCycle, err error) {
				f.plan = func(activities.PlanInput) (activities.Plan, error) { return activities.Plan{}, err }
			}, false, nil},
		{"plan memory guard", "PlanCycle", activities.ErrInsufficientMemory,
			func(f *fakeCycle, err error) {
				f.plan = func(activities.PlanInput) (activities.Plan, error) { return activities.Plan{}, err }
			}, false, nil},
		{"sequence login failed", "AllocateSequence", activities.ErrLoginFailed,
			func(f *fakeCycle, err error) { f.sequence = func() (int64, error) { return 0, err } }, false, nil},
		{"backup database not found", "Backup", activities.ErrDatabaseNotFound,
			func(f *fakeCycle, err error) {
				f.backup = func(activities.BackupInput) (activities.BackupOutput, error) { return activities.BackupOutput{}, err }
			}, true, []string{"bak01"}},
		{"backup login failed", "Backup", activities.ErrLoginFailed,
			func(f *fakeCycle, err error) {
				f.backup = func(activities.BackupInput) (activities.BackupOutput, error) { return activities.BackupOutput{}, err }
			}, true, []string{"bak01"}},
		{"backup share full", "Backup", activities.ErrShareFull,
			func(f *fakeCycle, err error) {
				f.backup = func(activities.BackupInput) (activities.BackupOutput, error) { return activities.BackupOutput{}, err }
			}, true, []string{"bak01"}},
		{"catalog corrupt", "WriteManifest", activities.ErrCorruptBackup,
			func(f *fakeCycle, err error) {
				f.manifest = func(activities.ManifestInput) (activities.ManifestOutput, error) {
					return activities.ManifestOutput{}, err
				}
			}, true, []string{"bak01"}},
		// A full remote share says nothing about the set: it stays written,
		// intact on its primary, for a later resume.
		{"copy share full", "CopyToRemote", activities.ErrShareFull,
			func(f *fakeCycle, err error) {
				f.copy = func(activities.CopyInput) (activities.CopyOutput, error) { return activities.CopyOutput{}, err }
			}, false, nil},
		{"restore corrupt backup", "Restore", activities.ErrCorruptBackup,
			func(f *fakeCycle, err error) {
				f.restore = func(activities.VerifyInput) (activities.StepOutput, error) { return activities.StepOutput{}, err }
			}, true, []string{"bak01", "remote01"}},
		{"checkdb failed", "CheckDB", activities.ErrCheckDBFailed,
			func(f *fakeCycle, err error) {
				f.checkDB = func(activities.VerifyInput) (activities.StepOutput, error) { return activities.StepOutput{}, err }
			}, true, []string{"bak01", "remote01"}},
		{"sanity failed", "SanityChecks", activities.ErrSanityCheckFailed,
			func(f *fakeCycle, err error) {
				f.sanity = func(activities.VerifyInput) (activities.StepOutput, error) { return activities.StepOutput{}, err }
			}, true, []string{"bak01", "remote01"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCycle()
			tc.breakIt(f, fail(tc.typ))
			r := newCycleRun(t, f)
			_, err := r.run(CycleInput{Database: "Sales"})
			appErr := appError(t, err)
			if appErr.Type() != tc.typ {
				t.Errorf("error type %q, want %q (%v)", appErr.Type(), tc.typ, err)
			}
			if !strings.Contains(appErr.Error(), "Sales") || !strings.Contains(appErr.Error(), tc.typ+" happened") {
				t.Errorf("error %q should name the database and carry the cause", appErr.Error())
			}
			if n := f.count(tc.activity); n != 1 {
				t.Errorf("%s ran %d times, want 1 (non-retryable)", tc.activity, n)
			}
			if f.count("MarkVerified") != 0 || f.count("ApplyRetention") != 0 {
				t.Errorf("calls %v: a failed set must never be verified nor trigger retention", f.calls)
			}
			if tc.marked {
				if len(f.failedIn) != 1 || f.failedIn[0].Sequence != 7 || f.failedIn[0].ErrorType != tc.typ ||
					!strings.Contains(f.failedIn[0].Reason, tc.typ+" happened") ||
					!slices.Equal(f.failedIn[0].Servers, tc.holders) {
					t.Errorf("MarkFailed got %+v, want seq 7 on %v with type %s and the reason", f.failedIn, tc.holders, tc.typ)
				}
			} else if len(f.failedIn) != 0 {
				t.Errorf("MarkFailed got %+v: no sequence, or no evidence about the set's content", f.failedIn)
			}
			if got := r.attr("BackupOutcome"); got != OutcomeFailed {
				t.Errorf("BackupOutcome = %v, want failed", got)
			}
			// BackupStep keeps the step that failed, for filtering.
			if n := len(r.steps); n < 2 || r.steps[n-1] == activities.StepFailed || r.steps[n-1] != r.steps[n-2] {
				t.Errorf("BackupStep updates %v: want the failing step kept at the end, not %q", r.steps, activities.StepFailed)
			}
			if p := r.progress(); p.Outcome != OutcomeFailed || p.Step != activities.StepFailed || p.Error == "" {
				t.Errorf("progress %+v, want failed with the error", p)
			}
		})
	}
}

func TestCycleEmptyDatabaseIsInvalidConfig(t *testing.T) {
	f := newFakeCycle()
	r := newCycleRun(t, f)
	_, err := r.run(CycleInput{})
	if appErr := appError(t, err); appErr.Type() != activities.ErrInvalidConfig ||
		!strings.Contains(appErr.Error(), "configuration key") {
		t.Errorf("error %v, want InvalidConfig telling what to pass", err)
	}
	if len(f.calls) != 0 {
		t.Errorf("activities ran %v for an empty input", f.calls)
	}
}

// Crash table, "SQL host dies during BACKUP": seq 7 marked failed with how far
// it got, wait for the host (step waiting-for-sql-host), seq 8 verified.
func TestCycleSQLHostLostDuringBackupRetriesWithNewSequence(t *testing.T) {
	f := newFakeCycle()
	inner := f.backup
	f.backup = func(in activities.BackupInput) (activities.BackupOutput, error) {
		if in.Sequence == 7 {
			return activities.BackupOutput{}, temporal.NewApplicationError("connection to sql01 lost during BACKUP",
				activities.ErrSQLHostUnreachable, activities.BackupFailure{Started: true, Percent: 40})
		}
		return inner(in)
	}
	r := newCycleRun(t, f)
	res, err := r.run(CycleInput{Database: "Sales"})
	if err != nil {
		t.Fatalf("cycle failed: %v", err)
	}
	if res.Sequence != 8 || !slices.Equal(res.Failed, []int64{7}) || res.Server != "bak01" {
		t.Errorf("result seq %d failed %v server %s, want seq 8 verified after seq 7 failed on bak01",
			res.Sequence, res.Failed, res.Server)
	}
	if len(f.failedIn) != 1 || f.failedIn[0].Sequence != 7 || !strings.Contains(f.failedIn[0].Reason, "40 %") ||
		f.failedIn[0].ErrorType != activities.ErrSQLHostUnreachable {
		t.Errorf("MarkFailed got %+v, want seq 7, SQLHostUnreachable, reason with 40 %%", f.failedIn)
	}
	if !slices.Contains(r.steps, activities.StepWaitingForSQLHost) {
		t.Errorf("steps %v never showed %s", r.steps, activities.StepWaitingForSQLHost)
	}
	if f.count("Backup") != 2 || f.count("AllocateSequence") != 2 {
		t.Errorf("calls %v, want two sequences and two backups", f.calls)
	}
	if f.retentionIn[0].Protect != 8 || f.verifiedIn[0].Sequence != 8 {
		t.Errorf("verified %d protected %d, want 8", f.verifiedIn[0].Sequence, f.retentionIn[0].Protect)
	}
}

// A host that never comes back: bounded waiting, then SQLHostUnreachable.
func TestCycleSQLHostNeverBackFailsAfterBoundedWait(t *testing.T) {
	f := newFakeCycle()
	f.plan = func(activities.PlanInput) (activities.Plan, error) {
		p := healthyPlan()
		p.Limits.HostWait = time.Minute // waits of 10 s, 20 s, 30 s
		return p, nil
	}
	f.sequence = func() (int64, error) {
		return 0, temporal.NewApplicationError("sql01:1433 refused the connection", activities.ErrSQLHostUnreachable)
	}
	r := newCycleRun(t, f)
	start := r.env.Now()
	_, err := r.run(CycleInput{Database: "Sales"})
	if appErr := appError(t, err); appErr.Type() != activities.ErrSQLHostUnreachable {
		t.Errorf("error %v, want SQLHostUnreachable", err)
	}
	if n := f.count("AllocateSequence"); n != 4 {
		t.Errorf("AllocateSequence ran %d times, want 4 (first try + 3 waits)", n)
	}
	if waited := r.env.Now().Sub(start); waited < time.Minute || waited > 2*time.Minute {
		t.Errorf("workflow clock advanced %s, want the bounded 1m of waiting", waited)
	}
	if f.count("Backup") != 0 || len(f.failedIn) != 0 {
		t.Errorf("calls %v: nothing was backed up, nothing to mark failed", f.calls)
	}
}

// Crash table, "primary backup server dies during BACKUP": next server in
// the rotation, new sequence.
func TestCycleBackupServerLostFailsOverWithNewSequence(t *testing.T) {
	f := newFakeCycle()
	inner := f.backup
	f.backup = func(in activities.BackupInput) (activities.BackupOutput, error) {
		if in.Server == "bak01" {
			return activities.BackupOutput{}, temporal.NewApplicationError(`cannot open \\bak01\backup`,
				activities.ErrBackupTargetUnreachable)
		}
		return inner(in)
	}
	r := newCycleRun(t, f)
	res, err := r.run(CycleInput{Database: "Sales"})
	if err != nil {
		t.Fatalf("cycle failed: %v", err)
	}
	if res.Server != "bak02" || res.Sequence != 8 || !slices.Equal(res.Failed, []int64{7}) {
		t.Errorf("result server %s seq %d failed %v, want bak02 seq 8 after seq 7 failed", res.Server, res.Sequence, res.Failed)
	}
	if len(f.failedIn) != 1 || !slices.Equal(f.failedIn[0].Servers, []string{"bak01"}) ||
		f.failedIn[0].ErrorType != activities.ErrBackupTargetUnreachable {
		t.Errorf("MarkFailed got %+v, want seq 7 on bak01", f.failedIn)
	}
	if f.copyIn[0].From != "bak02" || !slices.Equal(res.Locations, []string{"bak02", "remote01"}) {
		t.Errorf("copied from %s, locations %v: want bak02", f.copyIn[0].From, res.Locations)
	}
	if got := r.attr("BackupServer"); got != "bak02" {
		t.Errorf("BackupServer = %v, want bak02", got)
	}
}

// Without copy_to, the copy target follows the primary: after a fail-over
// to bak02 the set is copied to bak02's target, never to bak02 itself.
func TestCycleFailOverFollowsCopyTarget(t *testing.T) {
	f := newFakeCycle()
	f.plan = func(activities.PlanInput) (activities.Plan, error) {
		p := healthyPlan()
		p.Rotation = []string{"bak01", "bak02", "bak03"}
		p.Remote = "bak02"
		p.Remotes = map[string]string{"bak01": "bak02", "bak02": "bak03", "bak03": "bak01"}
		return p, nil
	}
	inner := f.backup
	f.backup = func(in activities.BackupInput) (activities.BackupOutput, error) {
		if in.Server == "bak01" {
			return activities.BackupOutput{}, temporal.NewApplicationError("bak01 down", activities.ErrBackupTargetUnreachable)
		}
		return inner(in)
	}
	r := newCycleRun(t, f)
	res, err := r.run(CycleInput{Database: "Sales"})
	if err != nil {
		t.Fatal(err)
	}
	if f.copyIn[0].From != "bak02" || f.copyIn[0].To != "bak03" || f.restoreIn[0].Server != "bak03" || res.Remote != "bak03" {
		t.Errorf("copy %+v restore on %s result remote %s: want bak02 -> bak03, restored on bak03",
			f.copyIn[0], f.restoreIn[0].Server, res.Remote)
	}
	if !slices.Equal(f.retentionIn[0].Servers, []string{"bak01", "bak02", "bak03"}) {
		t.Errorf("retention servers %v, want each server once", f.retentionIn[0].Servers)
	}
}

func TestCycleNoBackupServerReachable(t *testing.T) {
	f := newFakeCycle()
	f.plan = func(activities.PlanInput) (activities.Plan, error) {
		p := healthyPlan()
		p.Limits.ServerWait = 30 * time.Second // waits of 10 s, 20 s
		return p, nil
	}
	f.backup = func(in activities.BackupInput) (activities.BackupOutput, error) {
		return activities.BackupOutput{}, temporal.NewApplicationError("share unreachable: "+in.Server,
			activities.ErrBackupTargetUnreachable)
	}
	r := newCycleRun(t, f)
	_, err := r.run(CycleInput{Database: "Sales"})
	appErr := appError(t, err)
	if appErr.Type() != activities.ErrNoBackupServerReachable ||
		!strings.Contains(appErr.Error(), "bak01") || !strings.Contains(appErr.Error(), "bak02") {
		t.Errorf("error %v, want NoBackupServerReachable naming bak01 and bak02", err)
	}
	// 3 rounds over 2 servers (first + 2 waits), each attempt a new sequence.
	if n := f.count("Backup"); n != 6 {
		t.Errorf("Backup ran %d times, want 6", n)
	}
	seqs := map[int64]bool{}
	for _, in := range f.backupIn {
		if seqs[in.Sequence] {
			t.Errorf("sequence %d reused", in.Sequence)
		}
		seqs[in.Sequence] = true
	}
	if len(f.failedIn) != 6 {
		t.Errorf("%d sets marked failed, want 6", len(f.failedIn))
	}
	if !slices.Contains(r.steps, activities.StepWaitingForBackupServer) {
		t.Errorf("steps %v never showed %s", r.steps, activities.StepWaitingForBackupServer)
	}
}

// Crash table, "verification instance dies during CHECKDB": restore again
// from the remote copies, same sequence.
func TestCycleVerifyInstanceLostRestoresAgain(t *testing.T) {
	f := newFakeCycle()
	checks := 0
	f.checkDB = func(activities.VerifyInput) (activities.StepOutput, error) {
		checks++
		if checks == 1 {
			return activities.StepOutput{}, temporal.NewApplicationError("verify01 connection lost",
				activities.ErrSQLHostUnreachable)
		}
		return activities.StepOutput{Duration: 40 * time.Minute}, nil
	}
	r := newCycleRun(t, f)
	res, err := r.run(CycleInput{Database: "Sales"})
	if err != nil {
		t.Fatalf("cycle failed: %v", err)
	}
	if f.count("Restore") != 2 || f.count("CheckDB") != 2 || f.count("Backup") != 1 || f.count("CopyToRemote") != 1 {
		t.Errorf("calls %v, want backup+copy once, restore+checkdb twice", f.calls)
	}
	if f.restoreIn[1].Sequence != 7 || res.Sequence != 7 || len(f.failedIn) != 0 {
		t.Errorf("restored seq %d, result seq %d, failed %v: want the same seq 7, nothing failed",
			f.restoreIn[1].Sequence, res.Sequence, f.failedIn)
	}
}

func TestCycleVerifyInstanceLostTooOftenFails(t *testing.T) {
	f := newFakeCycle()
	f.checkDB = func(activities.VerifyInput) (activities.StepOutput, error) {
		return activities.StepOutput{}, temporal.NewApplicationError("verify01 lost", activities.ErrSQLHostUnreachable)
	}
	r := newCycleRun(t, f)
	_, err := r.run(CycleInput{Database: "Sales"})
	if appErr := appError(t, err); appErr.Type() != activities.ErrSQLHostUnreachable {
		t.Errorf("error %v, want SQLHostUnreachable", err)
	}
	if n := f.count("Restore"); n != defaultRestoreRounds {
		t.Errorf("Restore ran %d times, want %d rounds", n, defaultRestoreRounds)
	}
	// An instance that stays away says nothing about the set: it is not
	// marked failed (it stays copied, for a later cycle or resume), and
	// never verified.
	if len(f.failedIn) != 0 || f.count("MarkVerified") != 0 {
		t.Errorf("failed %+v calls %v: want the set left as it is, never verified", f.failedIn, f.calls)
	}
}

// Crash table, "remote backup server dies during copy": retried until the
// deadline, then CopyDeadlineExceeded; the set is intact and stays written.
func TestCycleCopyDeadlineLeavesSetWritten(t *testing.T) {
	f := newFakeCycle()
	f.plan = func(activities.PlanInput) (activities.Plan, error) {
		p := healthyPlan()
		p.Limits.CopyDeadline = 2 * time.Minute
		return p, nil
	}
	f.copy = func(activities.CopyInput) (activities.CopyOutput, error) {
		return activities.CopyOutput{}, temporal.NewApplicationError("remote01 unreachable", activities.ErrBackupTargetUnreachable)
	}
	r := newCycleRun(t, f)
	_, err := r.run(CycleInput{Database: "Sales"})
	appErr := appError(t, err)
	if appErr.Type() != activities.ErrCopyDeadlineExceeded || !strings.Contains(appErr.Error(), "remote01") {
		t.Errorf("error %v, want CopyDeadlineExceeded naming remote01", err)
	}
	if n := f.count("CopyToRemote"); n < 2 {
		t.Errorf("copy ran %d times, want retries until the deadline", n)
	}
	if len(f.failedIn) != 0 || f.count("Restore") != 0 {
		t.Errorf("calls %v: the set must stay written (not failed) and never be restored", f.calls)
	}
}

func TestCycleHousekeepingFailureKeepsSetVerified(t *testing.T) {
	f := newFakeCycle()
	f.retention = func(activities.RetentionInput) (activities.RetentionOutput, error) {
		return activities.RetentionOutput{}, temporal.NewApplicationError("bak02 unreachable", activities.ErrBackupTargetUnreachable)
	}
	r := newCycleRun(t, f)
	res, err := r.run(CycleInput{Database: "Sales"})
	if err != nil {
		t.Fatalf("cycle failed: %v", err)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "retention") {
		t.Errorf("warnings %v, want the retention failure", res.Warnings)
	}
	if len(f.failedIn) != 0 || r.attr("BackupOutcome") != OutcomeVerified {
		t.Errorf("a verified set must stay verified: failed %v outcome %v", f.failedIn, r.attr("BackupOutcome"))
	}
}

func TestCycleKeepVerifyDBSkipsDrop(t *testing.T) {
	f := newFakeCycle()
	f.plan = func(activities.PlanInput) (activities.Plan, error) {
		p := healthyPlan()
		p.KeepVerifyDB = true
		return p, nil
	}
	r := newCycleRun(t, f)
	if _, err := r.run(CycleInput{Database: "Sales"}); err != nil {
		t.Fatal(err)
	}
	if f.count("DropVerifyDB") != 0 {
		t.Errorf("calls %v: the verification database was to be kept", f.calls)
	}
}

// The progress query shows the running step with the percent and bytes the
// Backup activity signals; a late signal of an older sequence is ignored.
func TestCycleProgressQueryWhileBackingUp(t *testing.T) {
	f := newFakeCycle()
	// Backup takes an hour of workflow time; look at it on the way.
	r := newCycleRun(t, f, func(env *testsuite.TestWorkflowEnvironment) {
		var acts = &cycleacts.Activities{}
		env.OnActivity(acts.Backup, mock.Anything, mock.Anything).Return(
			activities.BackupOutput{Bytes: 8 << 30, Duration: time.Hour}, nil).After(time.Hour)
	})
	var during, stale Progress
	r.env.RegisterDelayedCallback(func() {
		r.env.SignalWorkflow(activities.ProgressSignal, activities.StepProgress{
			Step: activities.StepBackup, Sequence: 7, Percent: 40, Bytes: 3 << 30})
	}, 20*time.Minute)
	r.env.RegisterDelayedCallback(func() { during = r.progress() }, 30*time.Minute)
	r.env.RegisterDelayedCallback(func() {
		r.env.SignalWorkflow(activities.ProgressSignal, activities.StepProgress{
			Step: activities.StepBackup, Sequence: 6, Percent: 90, Bytes: 9 << 30})
	}, 40*time.Minute)
	r.env.RegisterDelayedCallback(func() { stale = r.progress() }, 50*time.Minute)

	res, err := r.run(CycleInput{Database: "Sales"})
	if err != nil {
		t.Fatal(err)
	}
	if during.Step != activities.StepBackup || during.Percent != 40 || during.Bytes != 3<<30 ||
		during.Sequence != 7 || during.Server != "bak01" || during.Outcome != OutcomeRunning {
		t.Errorf("progress during backup %+v, want backup 40 %% 3 GiB seq 7 on bak01, running", during)
	}
	if stale.Percent != 40 {
		t.Errorf("progress after a stale signal %+v, want still 40 %%", stale)
	}
	if res.Timings.Backup != time.Hour {
		t.Errorf("backup timing %s, want 1h", res.Timings.Backup)
	}
}

func TestBackoffIsBounded(t *testing.T) {
	b := newBackoff(10*time.Minute, activities.Limits{})
	var total time.Duration
	var waits []time.Duration
	for {
		d, ok := b.next()
		if !ok {
			break
		}
		total += d
		waits = append(waits, d)
		if len(waits) > 100 {
			t.Fatal("backoff never ends")
		}
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 290 * time.Second}
	if total != 10*time.Minute || !slices.Equal(waits, want) {
		t.Errorf("waits %v (total %s), want %v totalling 10m", waits, total, want)
	}
	b = newBackoff(10*time.Second, activities.Limits{WaitInitial: time.Second, WaitMax: 3 * time.Second})
	waits = nil
	for d, ok := b.next(); ok; d, ok = b.next() {
		waits = append(waits, d)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second, time.Second}; !slices.Equal(waits, want) {
		t.Errorf("configured waits %v, want %v", waits, want)
	}
}

// A start under any other id (a schedule's, the Web UI's) runs the cycle
// under the database's own id, so that Temporal refuses a second one.
func TestCycleStartedUnderAnotherIDRunsUnderTheDatabasesID(t *testing.T) {
	f := newFakeCycle()
	r := newCycleRun(t, f)
	res, err := r.runAs("web-ui-7f3a", CycleInput{Database: "Sales"})
	if err != nil {
		t.Fatal(err)
	}
	if want := CycleWorkflowID("sql01", "Sales"); res.RunBy != want || res.Sequence != 7 || res.Skipped != "" {
		t.Errorf("result %+v, want the cycle run by %s", res, want)
	}
	if n := f.count("Backup"); n != 1 {
		t.Errorf("Backup ran %d times, want once (in the launched cycle)", n)
	}
	if got := r.attr("BackupOutcome"); got != OutcomeVerified {
		t.Errorf("launcher outcome %v, want verified", got)
	}
}

// Sequence rollback: the number handed out is used by another run's set on
// the backup server. Nothing of it is marked or touched; a new number is
// taken.
func TestCycleSequenceInUseTakesANewNumber(t *testing.T) {
	f := newFakeCycle()
	first := true
	f.backup = func(in activities.BackupInput) (activities.BackupOutput, error) {
		if first {
			first = false
			return activities.BackupOutput{}, temporal.NewNonRetryableApplicationError("set 7 belongs to another run", activities.ErrSequenceInUse, nil)
		}
		return activities.BackupOutput{Stripes: []activities.Stripe{{Name: "s"}}, Bytes: 1}, nil
	}
	r := newCycleRun(t, f)
	res, err := r.run(CycleInput{Database: "Sales"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sequence != 8 || f.count("AllocateSequence") != 2 || len(f.failedIn) != 0 {
		t.Errorf("seq %d, %d allocations, failed %+v: want seq 8 after a second allocation, nothing marked failed",
			res.Sequence, f.count("AllocateSequence"), f.failedIn)
	}
}

// A BACKUP that did not complete is evidence: the partial set is marked
// failed with backup_incomplete.
func TestCycleIncompleteBackupIsEvidence(t *testing.T) {
	f := newFakeCycle()
	f.backup = func(activities.BackupInput) (activities.BackupOutput, error) {
		return activities.BackupOutput{}, temporal.NewNonRetryableApplicationError("disk full", activities.ErrShareFull, nil)
	}
	r := newCycleRun(t, f)
	if _, err := r.run(CycleInput{Database: "Sales"}); err == nil {
		t.Fatal("want a failure")
	}
	if len(f.failedIn) != 1 || f.failedIn[0].Evidence != string(catalog.EvidenceBackupIncomplete) {
		t.Errorf("MarkFailed %+v, want the partial set failed on backup_incomplete", f.failedIn)
	}
}

// Cancel during the copy: the cycle ends Canceled (not failed, not a copy
// deadline), the set's files are removed and its manifest says cancelled;
// no verification database was restored, so none is dropped.
func TestCycleCancelDuringCopy(t *testing.T) {
	f := newFakeCycle()
	var acts = &cycleacts.Activities{}
	r := cancelDuring(t, f, acts.CopyToRemote, activities.CopyOutput{})
	if len(f.cancelledIn) != 1 || f.cancelledIn[0].Sequence != 7 || !slices.Equal(f.cancelledIn[0].Servers, []string{"bak01", "remote01"}) {
		t.Errorf("MarkCancelled %+v, want seq 7 on bak01 and remote01", f.cancelledIn)
	}
	if len(f.failedIn) != 0 || f.count("DropVerifyDB") != 0 || f.count("MarkVerified") != 0 {
		t.Errorf("calls %v: a cancel marks nothing failed, drops nothing it did not restore", f.calls)
	}
	if got := r.attr("BackupOutcome"); got != OutcomeCancelled {
		t.Errorf("outcome %v, want cancelled", got)
	}
}

// Cancel during CHECKDB: the verification database this run restored is
// dropped.
func TestCycleCancelDuringCheckDBDropsTheCopy(t *testing.T) {
	f := newFakeCycle()
	var acts = &cycleacts.Activities{}
	cancelDuring(t, f, acts.CheckDB, activities.StepOutput{})
	if f.count("DropVerifyDB") != 1 || len(f.cancelledIn) != 1 {
		t.Errorf("calls %v: want the restored copy dropped and the set cancelled", f.calls)
	}
	// Before the copy is dropped: statements of the set still running
	// (an earlier attempt's) are stopped, on the source and the remote.
	want := activities.StopInput{Database: "Sales", Instance: "sql01", Sequence: 7, Server: "bak01", Remote: "remote01"}
	if len(f.stopIn) != 1 || f.stopIn[0] != want || slices.Index(f.calls, "StopStatements") > slices.Index(f.calls, "DropVerifyDB") {
		t.Errorf("StopStatements %+v (calls %v), want %+v before DropVerifyDB", f.stopIn, f.calls, want)
	}
}

// cancelDuring runs a cycle whose activity takes an hour and cancels it 10
// minutes in; the cycle must end Canceled.
func cancelDuring(t *testing.T, f *fakeCycle, activity, out any) *cycleRun {
	t.Helper()
	r := newCycleRun(t, f, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(activity, mock.Anything, mock.Anything).After(time.Hour).Return(out, nil)
		env.RegisterDelayedCallback(env.CancelWorkflow, 10*time.Minute)
	})
	_, err := r.run(CycleInput{Database: "Sales"})
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		t.Fatalf("error %v, want Canceled", err)
	}
	return r
}

// Resume finishes a set an outage left copied: no new backup, no copy; this
// run restores, checks and verifies it.
func TestCycleResumeFinishesACopiedSet(t *testing.T) {
	f := newFakeCycle()
	var acts = &cycleacts.Activities{}
	r := newCycleRun(t, f, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(acts.ResumeSet, mock.Anything, mock.Anything).Return(cycleacts.ResumeOutput{
			Sequence: 5, Primary: "bak02", Holders: []string{"bak02", "bak01"}, State: cycleacts.ResumeFromRestore}, nil)
	})
	res, err := r.run(CycleInput{Database: "Sales", Resume: 5})
	if err != nil {
		t.Fatal(err)
	}
	if f.count("Backup") != 0 || f.count("CopyToRemote") != 0 || f.count("Restore") != 1 || res.Sequence != 5 {
		t.Errorf("calls %v result %+v: want restore/check/verify of set 5 only", f.calls, res)
	}
	if len(f.restoreIn) != 1 || f.restoreIn[0].Server != "bak01" {
		t.Errorf("restored from %+v, want bak01 (where the set was copied)", f.restoreIn)
	}
}

// A RESTORE of this run that fails (corrupt media) leaves the copy
// RESTORING: the cycle drops it (OwnRestore), or every later cycle would
// refuse to replace a copy with no restore to show. A restore refused
// before it started (the name is someone else's) drops nothing.
func TestCycleFailedRestoreDropsItsCopy(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		drop bool
	}{{activities.ErrCorruptBackup, true}, {activities.ErrVerifyDatabaseInUse, false}} {
		f := newFakeCycle()
		f.restore = func(activities.VerifyInput) (activities.StepOutput, error) {
			return activities.StepOutput{}, temporal.NewNonRetryableApplicationError("restore failed", tc.typ, nil)
		}
		r := newCycleRun(t, f)
		if _, err := r.run(CycleInput{Database: "Sales"}); err == nil {
			t.Fatalf("%s: want the cycle to fail", tc.typ)
		}
		dropped := len(f.dropIn) == 1 && f.dropIn[0].OwnRestore && f.dropIn[0].Sequence == 7
		if dropped != tc.drop || len(f.dropIn) > 1 {
			t.Errorf("%s: DropVerifyDB %+v, want dropped=%v (OwnRestore, seq 7)", tc.typ, f.dropIn, tc.drop)
		}
	}
}

// A step that fails for good may leave its statement running on SQL Server
// (an attempt that timed out leaves it for the next one, and there is
// none): the cycle stops it before it ends, on the instance the step ran
// on, so the next night does not collide with it. What the login could not
// stop is named in the cycle's error with the GRANT that fixes it. A step
// that ran no statement, or an instance the step could not reach, is not
// asked.
func TestCycleFailedStepStopsItsStatement(t *testing.T) {
	left := func(typ string) error {
		return temporal.NewApplicationError("DBCC CHECKDB on verify01 left running: the attempt's timeout passed", typ)
	}
	const grant = "DBCC CHECKDB on verify01 (session 57) still runs: KILL needs ALTER ANY CONNECTION: GRANT ALTER ANY CONNECTION TO [bk];"
	cases := []struct {
		name     string
		breakIt  func(f *fakeCycle)
		want     []activities.StopInput
		beforeOf string // StopStatements comes before this activity
	}{
		{"checkdb", func(f *fakeCycle) {
			f.checkDB = func(activities.VerifyInput) (activities.StepOutput, error) {
				return activities.StepOutput{}, left(activities.ErrStatementLeftRunning)
			}
		}, []activities.StopInput{{Database: "Sales", Instance: "sql01", Sequence: 7, Remote: "remote01"}}, ""},
		{"restore", func(f *fakeCycle) {
			f.restore = func(activities.VerifyInput) (activities.StepOutput, error) {
				return activities.StepOutput{}, left(activities.ErrStatementLeftRunning)
			}
		}, []activities.StopInput{{Database: "Sales", Instance: "sql01", Sequence: 7, Remote: "remote01"}}, "DropVerifyDB"},
		{"backup", func(f *fakeCycle) {
			f.backup = func(activities.BackupInput) (activities.BackupOutput, error) {
				return activities.BackupOutput{}, left(activities.ErrStatementLeftRunning)
			}
		}, []activities.StopInput{{Database: "Sales", Instance: "sql01", Sequence: 7, Server: "bak01"}}, ""},
		{"checkdb on a lost instance", func(f *fakeCycle) {
			f.checkDB = func(activities.VerifyInput) (activities.StepOutput, error) {
				return activities.StepOutput{}, temporal.NewApplicationError("verify01 lost", activities.ErrSQLHostUnreachable)
			}
		}, nil, ""},
		{"copy", func(f *fakeCycle) {
			f.copy = func(activities.CopyInput) (activities.CopyOutput, error) {
				return activities.CopyOutput{}, temporal.NewNonRetryableApplicationError("remote full", activities.ErrShareFull, nil)
			}
		}, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCycle()
			tc.breakIt(f)
			f.stop = func(activities.StopInput) (activities.StopOutput, error) {
				return activities.StopOutput{Left: []string{grant}}, nil
			}
			r := newCycleRun(t, f)
			_, err := r.run(CycleInput{Database: "Sales"})
			appError(t, err)
			if !slices.Equal(f.stopIn, tc.want) {
				t.Fatalf("StopStatements %+v, want %+v (calls %v)", f.stopIn, tc.want, f.calls)
			}
			if tc.want == nil {
				return
			}
			if !strings.Contains(err.Error(), grant) {
				t.Errorf("cycle error %q; want it to name the statement left running and the GRANT", err)
			}
			if tc.beforeOf != "" && slices.Index(f.calls, "StopStatements") > slices.Index(f.calls, tc.beforeOf) {
				t.Errorf("calls %v: StopStatements must come before %s", f.calls, tc.beforeOf)
			}
		})
	}
}

// A plan that finds no replica of the database's availability group able
// to back it up ends the cycle skipped with the reason not-preferred-
// replica: nothing after the plan runs, nothing is marked, no error.
func TestCycleNotPreferredReplicaIsSkipped(t *testing.T) {
	f := newFakeCycle()
	f.plan = func(activities.PlanInput) (activities.Plan, error) {
		return activities.Plan{Database: "Sales", Instance: "ag1",
			NotPreferred: activities.SkipNotPreferredReplica + ": no replica of availability group ag1 can back up 'Sales' now (sql01: not the preferred backup replica)"}, nil
	}
	r := newCycleRun(t, f)
	res, err := r.run(CycleInput{Database: "Sales"})
	if err != nil {
		t.Fatalf("skipped cycle returned %v", err)
	}
	if !slices.Equal(f.calls, []string{"PlanCycle"}) {
		t.Errorf("activities ran %v, want the plan only", f.calls)
	}
	if res.SkipReason != activities.SkipNotPreferredReplica || !strings.Contains(res.Skipped, "sql01: not the preferred") || res.Instance != "ag1" {
		t.Errorf("result %+v, want skipped as not-preferred-replica with each replica's answer", res)
	}
	if got := r.attr("BackupOutcome"); got != OutcomeSkipped {
		t.Errorf("BackupOutcome = %v, want %s", got, OutcomeSkipped)
	}
}

// The replica the plan chose is where the source steps run: sequence,
// BACKUP and its manifest.
func TestCycleReadsFromThePlansReplica(t *testing.T) {
	f := newFakeCycle()
	f.plan = func(activities.PlanInput) (activities.Plan, error) {
		p := healthyPlan()
		p.Instance, p.Replica = "ag1", "sql02"
		return p, nil
	}
	var manIn activities.ManifestInput
	manifest := f.manifest
	f.manifest = func(in activities.ManifestInput) (activities.ManifestOutput, error) {
		manIn = in
		return manifest(in)
	}
	r := newCycleRun(t, f)
	if _, err := r.run(CycleInput{Database: "Sales", Instance: "ag1"}); err != nil {
		t.Fatal(err)
	}
	if len(f.sequenceIn) != 1 || f.sequenceIn[0].Replica != "sql02" || manIn.Replica != "sql02" || len(f.backupIn) != 1 || f.backupIn[0].Replica != "sql02" || f.backupIn[0].Instance != "ag1" {
		t.Errorf("sequence %+v, backup %+v, manifest %+v: want replica sql02 of ag1", f.sequenceIn, f.backupIn, manIn)
	}
}

// A BACKUP whose outcome the worker could not confirm (BackupUnconfirmed:
// completed, its stripes not measured) or an attempt interrupted
// (ActivityInterrupted) proves nothing against the set, also when the
// retries run out: the cycle fails and the set keeps its state.
func TestCycleUnconfirmedBackupIsNotEvidence(t *testing.T) {
	for _, typ := range []string{activities.ErrBackupUnconfirmed, activities.ErrActivityInterrupted} {
		t.Run(typ, func(t *testing.T) {
			f := newFakeCycle()
			f.backup = func(activities.BackupInput) (activities.BackupOutput, error) {
				return activities.BackupOutput{}, temporal.NewApplicationError("backup server lost after the BACKUP completed", typ)
			}
			r := newCycleRun(t, f)
			if _, err := r.run(CycleInput{Database: "Sales"}); err == nil {
				t.Fatal("want a failure")
			}
			if len(f.failedIn) != 0 {
				t.Errorf("MarkFailed %+v after %s, want the set left in its state", f.failedIn, typ)
			}
		})
	}
}
