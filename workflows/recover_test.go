package workflows

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/logs"
	"github.com/backupcycle/backupcycle/activities/recover"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/recovery"
)

// recoverPlan is a plan of set 7 (1 GB) and logs 11-14 of chain 2
// (10 MB each), STOPAT reached in log 13.
func recoverPlan() recover.Plan {
	at := time.Date(2026, 3, 1, 2, 15, 0, 0, time.UTC)
	steps := []recovery.Step{{Kind: recovery.KindFull, Sequence: 7, GUID: "F", Bytes: 1e9, Servers: []string{"bak02"}}}
	for n := int64(11); n <= 14; n++ {
		steps = append(steps, recovery.Step{Kind: recovery.KindLog, Chain: 2, Number: n, GUID: "L", Bytes: 1e7, Servers: []string{"bak02"}})
	}
	return recover.Plan{Database: "Sales", Instance: "sql01", Target: "sql02", Name: "Sales", Restore: recovery.Plan{Steps: steps,
		StopAt: at, StopAtOffsetMinutes: 60, RecoveryPoint: at, RecoveryPointFrom: "stopat"}, Intent: &catalog.VerifyCopy{BackupSetGUID: "F"},
		Unreachable: []string{"bak01: unreachable"}, RestoreTimeout: time.Hour, LogTimeout: 10 * time.Minute, HeartbeatTimeout: time.Minute}
}

type recoverEnv struct {
	env  *testsuite.TestWorkflowEnvironment
	mu   sync.Mutex
	logs []recover.RestoreLogInput
}

func newRecoverEnv(t *testing.T) *recoverEnv {
	var ts testsuite.WorkflowTestSuite
	r := &recoverEnv{env: ts.NewTestWorkflowEnvironment()}
	r.env.RegisterWorkflowWithOptions(Recover, workflow.RegisterOptions{Name: RecoverName})
	r.env.SetStartTime(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	return r
}

// steps mocks the plan and the steps: the full takes 10 minutes, each log
// a minute, log 13 reaches the point; log 12's first attempt fails as a
// worker stopped in its RESTORE LOG would, and its retry finds it applied.
func (r *recoverEnv) steps(t *testing.T) {
	var acts *recover.Activities
	r.env.OnActivity(acts.PlanRecover, mock.Anything, mock.Anything).Return(recoverPlan(), nil)
	r.restores(t)
}

// restores mocks the steps after the plan (see steps).
func (r *recoverEnv) restores(t *testing.T) {
	var acts *recover.Activities
	cp := &catalog.VerifyCopy{BackupSetGUID: "F", RestoreHistoryID: 9}
	r.env.OnActivity(acts.RestoreFull, mock.Anything, mock.Anything).After(10 * time.Minute).Return(
		func(_ context.Context, in recover.RestoreFullInput) (recover.StepOutput, error) {
			if in.Intent == nil || in.Step.Sequence != 7 || in.Name != "Sales" || in.To != "sql02" {
				t.Errorf("RestoreFull input %+v", in)
			}
			return recover.StepOutput{Server: "bak02", Copy: cp}, nil
		})
	failed := false
	r.env.OnActivity(acts.RestoreLog, mock.Anything, mock.Anything).After(time.Minute).Return(
		func(_ context.Context, in recover.RestoreLogInput) (recover.StepOutput, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.logs = append(r.logs, in)
			if in.Step.Number == 12 && !failed {
				failed = true
				return recover.StepOutput{}, temporal.NewApplicationError("RESTORE LOG left running: the worker is stopping", activities.ErrStatementLeftRunning)
			}
			return recover.StepOutput{Server: "bak02", Skipped: in.Step.Number == 12, Reattached: in.Step.Number == 12,
				Reached: in.Step.Number == 13}, nil
		})
	r.env.OnActivity(acts.FinishRecover, mock.Anything, mock.Anything).Return(recover.FinishOutput{State: "ONLINE", LogsRestored: []string{"a", "b", "c"}}, nil)
}

func (r *recoverEnv) queryAt(t *testing.T, d time.Duration) *RecoverStatus {
	st := &RecoverStatus{}
	r.env.RegisterDelayedCallback(func() {
		v, err := r.env.QueryWorkflow(RecoverQuery)
		if err == nil {
			err = v.Get(st)
		}
		if err != nil {
			t.Errorf("query at %s: %v", d, err)
		}
	}, d)
	return st
}

// The full, then the logs in order up to the one in which STOPAT is
// reached (log 14 is not restored), then RECOVERY; a log retried after its
// attempt was cut short; live progress with an ETA from the measured
// rates, and the result's times and recovery point.
func TestRecoverRestoresInOrderAndReports(t *testing.T) {
	r := newRecoverEnv(t)
	r.steps(t)
	// During the full: its RESTORE reports 40 % after 4 minutes.
	r.env.RegisterDelayedCallback(func() {
		r.env.SignalWorkflow(activities.ProgressSignal, activities.StepProgress{Step: recover.StepFull, Sequence: 7, Percent: 40})
	}, 4*time.Minute)
	duringFull := r.queryAt(t, 5*time.Minute)
	duringLogs := r.queryAt(t, 11*time.Minute+30*time.Second)
	r.env.ExecuteWorkflow(RecoverName, RecoverInput{Database: "Sales", ToInstance: "sql02", AsOf: time.Date(2026, 3, 1, 2, 15, 0, 0, time.UTC)})
	if !r.env.IsWorkflowCompleted() || r.env.GetWorkflowError() != nil {
		t.Fatalf("workflow: %v", r.env.GetWorkflowError())
	}
	var res RecoverStatus
	if err := r.env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if duringFull.Step != recover.StepFull || duringFull.FullPercent != 40 || duringFull.ETA <= 0 {
		t.Errorf("during the full: step %s, %.0f %%, ETA %s", duringFull.Step, duringFull.FullPercent, duringFull.ETA)
	}
	// 40 % in 4 minutes: 6 minutes left of the full, and the 40 MB of
	// logs at its 1.67 MB/s: 24 s.
	if want := 6*time.Minute + 24*time.Second; duringFull.ETA < want-2*time.Second || duringFull.ETA > want+2*time.Second {
		t.Errorf("ETA during the full %s, want about %s", duringFull.ETA, want)
	}
	if duringLogs.Step != recover.StepLogs || duringLogs.LogsDone != 1 || duringLogs.CurrentLog != 12 || duringLogs.ETA <= 0 {
		t.Errorf("during the logs: %+v", duringLogs)
	}
	var numbers []int64
	for _, l := range r.logs {
		numbers = append(numbers, l.Step.Number)
		if !l.StopAt.Equal(recoverPlan().Restore.StopAt) || l.StopAtOffsetMinutes != 60 || l.Copy == nil || l.Copy.RestoreHistoryID != 9 || l.Count != 4 {
			t.Errorf("RestoreLog input %+v", l)
		}
	}
	if got := numbers; len(got) != 4 || got[0] != 11 || got[1] != 12 || got[2] != 12 || got[3] != 13 {
		t.Fatalf("logs restored %v, want 11, 12 (twice: its retry), 13; not 14", got)
	}
	if res.Outcome != RecoverRecovered || res.LogsDone != 3 || res.StoppedAt != 13 || res.LogsRestored != 3 || res.Skipped != 1 || res.Reattached != 1 {
		t.Fatalf("result %+v", res)
	}
	if res.Times.Full != 10*time.Minute || res.Times.Logs < 3*time.Minute || res.Times.Total < 13*time.Minute || res.ETA != 0 {
		t.Fatalf("times %+v, ETA %s", res.Times, res.ETA)
	}
	if !res.RecoveryPoint.Equal(recoverPlan().Restore.RecoveryPoint) || res.RecoveryPointFrom != "stopat" || res.State != "ONLINE" ||
		res.Sequence != 7 || res.FullServer != "bak02" || len(res.Unreachable) != 1 {
		t.Fatalf("result %+v", res)
	}
}

// Before a step has a measured rate the ETA is the plan's prediction: at
// the full's start, without a percent yet, its predicted time, the logs'
// (each one's cost) and the recovery; at the logs' start the logs'
// predicted time, not their bytes at the full's rate. (The ETA is
// computed as each step starts and as progress arrives.) The result
// carries the prediction, the logs' bytes and the fastest log (a retry an
// earlier attempt had done is not counted).
func TestRecoverETAFromThePrediction(t *testing.T) {
	r := newRecoverEnv(t)
	var acts *recover.Activities
	p := recoverPlan()
	p.Predicted = &catalog.RecoveryPrediction{Full: 8 * time.Minute, Logs: 2 * time.Minute, LogCount: 4, LogOverhead: 30 * time.Second,
		Recovery: time.Minute, LogFrom: "drill"}
	r.env.OnActivity(acts.PlanRecover, mock.Anything, mock.Anything).Return(p, nil)
	r.restores(t)
	startOfFull := r.queryAt(t, time.Minute)
	startOfLogs := r.queryAt(t, 10*time.Minute+30*time.Second)
	r.env.ExecuteWorkflow(RecoverName, RecoverInput{Database: "Sales", ToInstance: "sql02", AsOf: time.Date(2026, 3, 1, 2, 15, 0, 0, time.UTC)})
	if !r.env.IsWorkflowCompleted() || r.env.GetWorkflowError() != nil {
		t.Fatalf("workflow: %v", r.env.GetWorkflowError())
	}
	// The full's 8 minutes, four logs at 30 s, the recovery.
	if startOfFull.Step != recover.StepFull || startOfFull.ETA != 11*time.Minute {
		t.Errorf("at the full's start (no percent): step %s, ETA %s, want 11m0s", startOfFull.Step, startOfFull.ETA)
	}
	// Four logs at 30 s and the recovery.
	if startOfLogs.Step != recover.StepLogs || startOfLogs.LogsDone != 0 || startOfLogs.ETA != 3*time.Minute {
		t.Errorf("at the logs' start: step %s, %d done, ETA %s, want 3m0s", startOfLogs.Step, startOfLogs.LogsDone, startOfLogs.ETA)
	}
	var res RecoverStatus
	if err := r.env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Predicted == nil || *res.Predicted != *p.Predicted || res.LogBytes != 3e7 || res.LogFastest < time.Minute || res.LogFastest > time.Minute+time.Second {
		t.Errorf("result: predicted %+v, log bytes %d, fastest %s", res.Predicted, res.LogBytes, res.LogFastest)
	}
}

// A plan the backups do not reach ends the run at once with its type, and
// the status says why.
func TestRecoverFailsWithThePlansReason(t *testing.T) {
	r := newRecoverEnv(t)
	var acts *recover.Activities
	r.env.OnActivity(acts.PlanRecover, mock.Anything, mock.Anything).Return(recover.Plan{},
		temporal.NewNonRetryableApplicationError("no restore reaches it: before the oldest verified full", activities.ErrRecoveryPointUnreachable, nil))
	r.env.ExecuteWorkflow(RecoverName, RecoverInput{Database: "Sales", ToInstance: "sql02", Latest: true})
	err := r.env.GetWorkflowError()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrRecoveryPointUnreachable {
		t.Fatalf("workflow error %v, want RecoveryPointUnreachable", err)
	}
	// A bad input is refused before any activity.
	r = newRecoverEnv(t)
	r.env.ExecuteWorkflow(RecoverName, RecoverInput{Database: "Sales", ToInstance: "sql02"})
	if err := r.env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Type() != activities.ErrInvalidConfig || !strings.Contains(err.Error(), "as_of") {
		t.Fatalf("no point: %v", err)
	}
}

// --tail-log: the plan checks everything first, then the tail of the
// source's log is taken (BackupLog with Tail) and the plan made again to
// end with it; the restore follows the second plan and the result names
// the tail. A tail that does not continue the chain ends the run before
// anything is restored.
func TestRecoverWithTheTailOfTheLog(t *testing.T) {
	r := newRecoverEnv(t)
	r.restores(t)
	var acts *recover.Activities
	var la *logs.Activities
	finish := time.Date(2026, 3, 1, 8, 59, 0, 0, time.UTC)
	var plans []recover.PlanInput
	r.env.OnActivity(acts.PlanRecover, mock.Anything, mock.Anything).Return(func(_ context.Context, in recover.PlanInput) (recover.Plan, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		plans = append(plans, in)
		p := recoverPlan()
		if in.Tail != nil {
			p.Restore.Steps = append(p.Restore.Steps[:2], recovery.Step{Kind: recovery.KindLog, Chain: 2, Number: in.Tail.Number, GUID: "T",
				Bytes: 1e6, Servers: []string{in.Tail.Server}})
			p.Restore.StopAt, p.Restore.RecoveryPoint, p.Restore.RecoveryPointFrom = time.Time{}, finish, "tail"
		}
		return p, nil
	})
	var tails []logs.BackupLogInput
	r.env.OnActivity(la.BackupLog, mock.Anything, mock.Anything).Return(func(_ context.Context, in logs.BackupLogInput) (logs.BackupLogOutput, error) {
		tails = append(tails, in)
		return logs.BackupLogOutput{Chain: 2, Number: 15, Server: "bak01", Finish: finish}, nil
	})
	r.env.ExecuteWorkflow(RecoverName, RecoverInput{Database: "Sales", ToInstance: "sql02", Latest: true, TailLog: true})
	if !r.env.IsWorkflowCompleted() || r.env.GetWorkflowError() != nil {
		t.Fatalf("workflow: %v", r.env.GetWorkflowError())
	}
	var res RecoverStatus
	if err := r.env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(tails) != 1 || !tails[0].Tail || tails[0].Database != "Sales" {
		t.Fatalf("BackupLog calls %+v, want one with Tail", tails)
	}
	if len(plans) != 2 || plans[0].Tail != nil || plans[1].Tail == nil || plans[1].Tail.Number != 15 {
		t.Fatalf("plans %+v, want one without the tail, then one ending with log 15", plans)
	}
	var numbers []int64
	for _, l := range r.logs {
		numbers = append(numbers, l.Step.Number)
	}
	if len(numbers) != 2 || numbers[0] != 11 || numbers[1] != 15 {
		t.Fatalf("logs restored %v, want 11 then the tail 15", numbers)
	}
	if res.TailLog != 15 || !res.RecoveryPoint.Equal(finish) || res.RecoveryPointFrom != "tail" {
		t.Fatalf("result: tail %d, recovery point %s (%s)", res.TailLog, res.RecoveryPoint, res.RecoveryPointFrom)
	}

	// A tail the chain does not take: nothing restored.
	r = newRecoverEnv(t)
	r.steps(t)
	r.env.OnActivity(la.BackupLog, mock.Anything, mock.Anything).Return(logs.BackupLogOutput{Chain: 2,
		Break: &logs.Break{Reason: "gap", Detail: "log 14 missing"}, NeedFull: true}, nil)
	r.env.ExecuteWorkflow(RecoverName, RecoverInput{Database: "Sales", ToInstance: "sql02", Latest: true, TailLog: true})
	var appErr *temporal.ApplicationError
	if err := r.env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Type() != activities.ErrRecoveryPointUnreachable ||
		!strings.Contains(err.Error(), "log 14 missing") {
		t.Fatalf("broken tail: %v, want RecoveryPointUnreachable naming the break", err)
	}
	if len(r.logs) != 0 {
		t.Fatalf("logs restored after a broken tail: %d", len(r.logs))
	}
}

// A backup server that the full's step reads from is away for 4m20s:
// the step waits for it at a short pace, its status saying for which
// server, and resumes within seconds of its return (the activity's own
// retries had grown to 100 s apart by then).
func TestRecoverResumesSoonAfterTheServerReturns(t *testing.T) {
	r := newRecoverEnv(t)
	var acts *recover.Activities
	r.env.OnActivity(acts.PlanRecover, mock.Anything, mock.Anything).Return(recoverPlan(), nil)
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	back := start.Add(4*time.Minute + 20*time.Second)
	var restored time.Time
	r.env.OnActivity(acts.RestoreFull, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in recover.RestoreFullInput) (recover.StepOutput, error) {
			if now := r.env.Now(); now.Before(back) {
				return recover.StepOutput{}, temporal.NewApplicationError(
					"backup server bak02: connect smb://bak02:445/backup: connection refused", activities.ErrBackupTargetUnreachable)
			}
			restored = r.env.Now()
			return recover.StepOutput{Server: "bak02", Copy: &catalog.VerifyCopy{BackupSetGUID: "F", RestoreHistoryID: 9}}, nil
		})
	r.env.OnActivity(acts.RestoreLog, mock.Anything, mock.Anything).Return(recover.StepOutput{Server: "bak02"}, nil)
	r.env.OnActivity(acts.FinishRecover, mock.Anything, mock.Anything).Return(recover.FinishOutput{State: "ONLINE"}, nil)
	away := r.queryAt(t, 3*time.Minute)
	r.env.ExecuteWorkflow(RecoverName, RecoverInput{Database: "Sales", ToInstance: "sql02", Latest: true})
	if !r.env.IsWorkflowCompleted() || r.env.GetWorkflowError() != nil {
		t.Fatalf("workflow: %v", r.env.GetWorkflowError())
	}
	if restored.IsZero() {
		t.Fatal("the full was never restored")
	}
	if d := restored.Sub(back); d > 15*time.Second {
		t.Errorf("the full was restored %s after the server returned, want within 15s", d)
	}
	if away.Step != recover.StepFull || !strings.Contains(away.Waiting, "bak02") {
		t.Errorf("status while the server is away: step %q, waiting %q; want the full's step waiting for bak02", away.Step, away.Waiting)
	}
	var res RecoverStatus
	if err := r.env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Waiting != "" || res.Outcome != RecoverRecovered {
		t.Errorf("result %+v: want recovered, waiting for nothing", res)
	}
	t.Logf("server back at +4m20s, full restored %s later", restored.Sub(back))
}
