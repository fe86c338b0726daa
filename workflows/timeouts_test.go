package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/backupcycle/backupcycle/activities"
	cycleacts "github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/plan"
)

// scheduled is what the workflow scheduled one activity with, as the
// activity sees it (activity.GetInfo).
type scheduled struct {
	StartToClose, ScheduleToClose, Heartbeat time.Duration
}

// optionsRecorder records every activity's options and inputs while the
// fake cycle answers it.
type optionsRecorder struct {
	mu       sync.Mutex
	opts     map[string][]scheduled
	sequence []activities.SequenceInput
	sanity   []activities.VerifyInput
}

func (o *optionsRecorder) record(ctx context.Context) {
	info := activity.GetInfo(ctx)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.opts[info.ActivityType.Name] = append(o.opts[info.ActivityType.Name],
		scheduled{info.StartToCloseTimeout, info.ScheduleToCloseTimeout, info.HeartbeatTimeout})
}

func (o *optionsRecorder) of(t *testing.T, name string) scheduled {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.opts[name]) == 0 {
		t.Fatalf("%s was not scheduled (scheduled: %v)", name, o.opts)
	}
	return o.opts[name][0]
}

// recordOptions registers mocks, ahead of the fake's own, that record the
// options of each activity and then answer as the fake does.
func recordOptions(f *fakeCycle) (*optionsRecorder, func(*testsuite.TestWorkflowEnvironment)) {
	o := &optionsRecorder{opts: map[string][]scheduled{}}
	return o, func(env *testsuite.TestWorkflowEnvironment) {
		var acts = &cycleacts.Activities{}
		env.OnActivity(acts.PlanCycle, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, in activities.PlanInput) (activities.Plan, error) {
				o.record(ctx)
				f.record("PlanCycle")
				return f.plan(in)
			})
		env.OnActivity(acts.AllocateSequence, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, in activities.SequenceInput) (int64, error) {
				o.record(ctx)
				o.mu.Lock()
				o.sequence = append(o.sequence, in)
				o.mu.Unlock()
				return f.sequence()
			})
		env.OnActivity(acts.Backup, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, in activities.BackupInput) (activities.BackupOutput, error) {
				o.record(ctx)
				f.record("Backup")
				f.backupIn = append(f.backupIn, in)
				return f.backup(in)
			})
		env.OnActivity(acts.WriteManifest, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, in activities.ManifestInput) (activities.ManifestOutput, error) {
				o.record(ctx)
				return f.manifest(in)
			})
		env.OnActivity(acts.CopyToRemote, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, in activities.CopyInput) (activities.CopyOutput, error) {
				o.record(ctx)
				return f.copy(in)
			})
		env.OnActivity(acts.Restore, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, in activities.VerifyInput) (activities.StepOutput, error) {
				o.record(ctx)
				return f.restore(in)
			})
		env.OnActivity(acts.CheckDB, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, in activities.VerifyInput) (activities.StepOutput, error) {
				o.record(ctx)
				return f.checkDB(in)
			})
		env.OnActivity(acts.SanityChecks, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, in activities.VerifyInput) (activities.StepOutput, error) {
				o.record(ctx)
				o.mu.Lock()
				o.sanity = append(o.sanity, in)
				o.mu.Unlock()
				return f.sanity(in)
			})
		env.OnActivity(acts.MarkVerified, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, _ activities.MarkInput) error {
				o.record(ctx)
				return nil
			})
		env.OnActivity(acts.DropVerifyDB, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, _ activities.VerifyInput) error {
				o.record(ctx)
				return nil
			})
		env.OnActivity(acts.ApplyRetention, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, in activities.RetentionInput) (activities.RetentionOutput, error) {
				o.record(ctx)
				return f.retention(in)
			})
	}
}

// largePlan is the plan of a 4 TiB database on one 1 GbE NIC path, with the
// timeouts PlanCycle derives for it.
func largePlan(t *testing.T) activities.Plan {
	t.Helper()
	const size = 4 << 40
	est, err := plan.SiteEstimate(size, 1, 1, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := plan.Timeouts(size, est, plan.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	p := healthyPlan()
	p.Budget = b
	p.Limits = activities.Limits{
		BackupTimeout: b.Backup.StartToClose, BackupDeadline: b.Backup.ScheduleToClose,
		RestoreTimeout: b.Restore.StartToClose, RestoreDeadline: b.Restore.ScheduleToClose,
		CheckDBTimeout: b.CheckDB.StartToClose, CheckDBDeadline: b.CheckDB.ScheduleToClose,
		CopyDeadline: b.Copy.ScheduleToClose, Heartbeat: b.Heartbeat,
	}
	offset := -300
	p.Source = activities.SourceFacts{Read: true, SizeBytes: size, EngineEdition: 4, Edition: "Express Edition (64-bit)",
		Updateability: "READ_ONLY", UTCOffsetMinutes: &offset}
	p.Mode = activities.BackupMode{Compression: false, CopyOnly: true, Sequence: "catalog"}
	p.Warnings = []string{"compression: Express Edition (64-bit) of sql01 cannot create compressed backups"}
	return p
}

// Every activity is scheduled with the plan's timeouts: the long steps with
// those derived from the size (no 12 h kill of a 4 TiB backup), every step
// with a bound over its retries, and heartbeat timeouts of minutes.
func TestCycleSchedulesTheTimeoutsOfThePlan(t *testing.T) {
	f := newFakeCycle()
	p := largePlan(t)
	f.plan = func(activities.PlanInput) (activities.Plan, error) { return p, nil }
	o, first := recordOptions(f)
	r := newCycleRun(t, f, first)
	res, err := r.run(CycleInput{Database: "Sales"})
	if err != nil {
		t.Fatal(err)
	}
	l := p.Limits
	for name, want := range map[string]scheduled{
		"Backup":       {l.BackupTimeout, l.BackupDeadline, l.Heartbeat},
		"Restore":      {l.RestoreTimeout, l.RestoreDeadline, l.Heartbeat},
		"CheckDB":      {l.CheckDBTimeout, l.CheckDBDeadline, l.Heartbeat},
		"SanityChecks": {l.CheckDBTimeout, l.CheckDBDeadline, l.Heartbeat},
		"CopyToRemote": {l.CopyDeadline, l.CopyDeadline, l.Heartbeat},
	} {
		if got := o.of(t, name); got != want {
			t.Errorf("%s scheduled with %+v, want the plan's %+v", name, got, want)
		}
	}
	for _, name := range []string{"Backup", "Restore", "CheckDB"} {
		if got := o.of(t, name); got.StartToClose <= 12*time.Hour {
			t.Errorf("%s of 4 TiB on 1 Gbps: StartToClose %v, want above 12 h", name, got.StartToClose)
		}
	}
	for name, all := range o.opts {
		for _, s := range all {
			if s.ScheduleToClose <= 0 || s.ScheduleToClose < s.StartToClose {
				t.Errorf("%s: ScheduleToClose %v (StartToClose %v): every step needs a bound over its retries", name, s.ScheduleToClose, s.StartToClose)
			}
			if s.Heartbeat < plan.MinHeartbeat || s.Heartbeat > 5*time.Minute {
				t.Errorf("%s: heartbeat timeout %v, want 3-5 min", name, s.Heartbeat)
			}
		}
	}
	if len(o.opts) < 10 {
		t.Errorf("recorded only %d activities: %v", len(o.opts), o.opts)
	}
	// The plan's mode reaches the steps that act on it.
	if len(f.backupIn) != 1 || f.backupIn[0].Mode == nil || *f.backupIn[0].Mode != p.Mode {
		t.Errorf("Backup input %+v, want the plan's mode %+v", f.backupIn, p.Mode)
	}
	if len(o.sequence) != 1 || o.sequence[0].Method != "catalog" {
		t.Errorf("AllocateSequence input %+v, want the plan's sequence method", o.sequence)
	}
	if len(o.sanity) != 1 || o.sanity[0].SourceUTCOffsetMinutes == nil || *o.sanity[0].SourceUTCOffsetMinutes != -300 {
		t.Errorf("SanityChecks input %+v, want the source's offset -300", o.sanity)
	}
	if len(res.Warnings) != 1 || res.Warnings[0] != "plan: "+p.Warnings[0] {
		t.Errorf("result warnings %q, want the plan's", res.Warnings)
	}
}

// A configured heartbeat timeout reaches every activity after the plan, and
// none is longer than its attempt; the plan itself runs with the default.
func TestCycleHeartbeatOverride(t *testing.T) {
	f := newFakeCycle()
	p := largePlan(t)
	p.Limits.Heartbeat = 20 * time.Second
	p.Limits.CopyDeadline = 10 * time.Second
	f.plan = func(activities.PlanInput) (activities.Plan, error) { return p, nil }
	o, first := recordOptions(f)
	r := newCycleRun(t, f, first)
	if _, err := r.run(CycleInput{Database: "Sales"}); err != nil {
		t.Fatal(err)
	}
	if got := o.of(t, "PlanCycle").Heartbeat; got != plan.DefaultHeartbeat {
		t.Errorf("PlanCycle heartbeat %v, want the default %v (no plan yet)", got, plan.DefaultHeartbeat)
	}
	for _, name := range []string{"AllocateSequence", "Backup", "WriteManifest", "Restore", "CheckDB", "SanityChecks", "MarkVerified", "ApplyRetention"} {
		if got := o.of(t, name).Heartbeat; got != 20*time.Second {
			t.Errorf("%s heartbeat %v, want the configured 20s", name, got)
		}
	}
	if got := o.of(t, "CopyToRemote"); got.Heartbeat != 10*time.Second || got.StartToClose != 10*time.Second {
		t.Errorf("CopyToRemote %+v, want the heartbeat capped at the 10s deadline", got)
	}
}

// A plan recorded before plans carried timeouts and a mode: the workflow's
// defaults, still bounded, and Backup uses the configuration's mode.
func TestCycleOldPlanGetsBoundedDefaults(t *testing.T) {
	f := newFakeCycle()
	o, first := recordOptions(f)
	r := newCycleRun(t, f, first)
	if _, err := r.run(CycleInput{Database: "Sales"}); err != nil {
		t.Fatal(err)
	}
	if got := o.of(t, "Backup"); got.StartToClose != defaultBackupTimeout || got.ScheduleToClose != 2*defaultBackupTimeout ||
		got.Heartbeat != plan.DefaultHeartbeat {
		t.Errorf("Backup with an old plan: %+v, want %v, %v, %v", got, defaultBackupTimeout, 2*defaultBackupTimeout, plan.DefaultHeartbeat)
	}
	if len(f.backupIn) != 1 || f.backupIn[0].Mode != nil {
		t.Errorf("Backup input %+v, want no mode (the configuration's)", f.backupIn)
	}
}
