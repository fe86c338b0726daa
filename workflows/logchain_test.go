package workflows

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/logs"
)

// fakeChain answers the log chain's activities and records when each ran
// (the test environment's clock).
type fakeChain struct {
	mu       sync.Mutex
	plan     logs.LogPlan
	backup   func(n int, in logs.BackupLogInput) (logs.BackupLogOutput, error)
	copyTook time.Duration
	copyErr  error

	backups  []time.Time
	backupIn []logs.BackupLogInput
	copies   []time.Time // when each CopyLogs began
	copyIn   []logs.CopyLogsInput
	written  int64 // highest number BackupLog returned
	cycles   []string
}

func newFakeChain() *fakeChain {
	f := &fakeChain{plan: logs.LogPlan{Database: "Sales", Instance: "sql01", Enabled: true, Every: time.Minute,
		ProofMode: "standby", Server: "bak01", CopyTo: "bak02"}}
	f.backup = func(n int, in logs.BackupLogInput) (logs.BackupLogOutput, error) {
		return logs.BackupLogOutput{Chain: 1, Number: int64(n), Server: "bak01", FirstLSN: "100", LastLSN: "200",
			Every: time.Minute}, nil
	}
	return f
}

// chainRun builds a test environment for LogChain of sql01/Sales under
// its canonical id.
func chainRun(t *testing.T, f *fakeChain) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(LogChain, workflow.RegisterOptions{Name: LogChainName})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in CycleInput) (CycleResult, error) {
		f.mu.Lock()
		f.cycles = append(f.cycles, workflow.GetInfo(ctx).WorkflowExecution.ID)
		f.mu.Unlock()
		return CycleResult{Database: in.Database}, workflow.Sleep(ctx, 3*time.Hour)
	}, workflow.RegisterOptions{Name: BackupCycleName})
	// The proof workflow LogChain starts with log_proof: standby.
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in LogProofInput) (LogProofStatus, error) {
		return LogProofStatus{Database: in.Database}, workflow.Sleep(ctx, 3*time.Hour)
	}, workflow.RegisterOptions{Name: LogProofName})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in ScratchProofInput) (ScratchProofStatus, error) {
		return ScratchProofStatus{Database: in.Database}, workflow.Sleep(ctx, 3*time.Hour)
	}, workflow.RegisterOptions{Name: ScratchProofName})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: LogChainWorkflowID("sql01", "Sales")})
	// 12:00:00 UTC: the database's phase decides the first tick.
	env.SetStartTime(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	var acts *logs.Activities
	env.OnActivity(acts.LogPlan, mock.Anything, mock.Anything).Return(
		func(context.Context, logs.LogPlanInput) (logs.LogPlan, error) { return f.plan, nil })
	env.OnActivity(acts.BackupLog, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in logs.BackupLogInput) (logs.BackupLogOutput, error) {
			f.mu.Lock()
			f.backups = append(f.backups, env.Now())
			f.backupIn = append(f.backupIn, in)
			n := len(f.backups)
			f.mu.Unlock()
			out, err := f.backup(n, in)
			if err == nil && out.Number > 0 {
				f.mu.Lock()
				f.written = out.Number
				f.mu.Unlock()
			}
			return out, err
		})
	env.OnActivity(acts.CopyLogs, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in logs.CopyLogsInput) (logs.CopyLogsOutput, error) {
			f.mu.Lock()
			f.copies = append(f.copies, env.Now())
			f.copyIn = append(f.copyIn, in)
			through := f.written
			f.mu.Unlock()
			if f.copyErr != nil {
				return logs.CopyLogsOutput{}, f.copyErr
			}
			return logs.CopyLogsOutput{Chain: in.Chain, From: "bak01", To: "bak02", Through: through}, nil
		}).After(f.copyTook)
	return env
}

// continuedWith is the input the run continued as new with.
func continuedWith(t *testing.T, env *testsuite.TestWorkflowEnvironment) LogChainInput {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("run ended with %v, want continue-as-new", err)
	}
	var in LogChainInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
		t.Fatal(err)
	}
	return in
}

// queryAt queries the chain's status at d after the start; the result is
// filled in when the run has passed d.
func queryAt(t *testing.T, env *testsuite.TestWorkflowEnvironment, d time.Duration) *LogChainStatus {
	t.Helper()
	st := &LogChainStatus{}
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(LogChainQuery)
		if err == nil {
			err = v.Get(st)
		}
		if err != nil {
			t.Errorf("query at %s: %v", d, err)
		}
	}, d)
	return st
}

func TestLogChainTicksOnItsPhaseAndContinuesAsNewWithItsCursor(t *testing.T) {
	f := newFakeChain()
	env := chainRun(t, f)
	env.ExecuteWorkflow(LogChainName, LogChainInput{Database: "Sales", Instance: "sql01", TicksPerRun: 5})
	in := continuedWith(t, env)
	if in.Database != "Sales" || in.Instance != "sql01" || in.Chain != 1 || in.Last != 5 || in.TicksPerRun != 5 {
		t.Fatalf("continued with %+v, want chain 1 at log 5", in)
	}
	if len(f.backups) != 5 {
		t.Fatalf("%d log backups, want 5 (one per tick)", len(f.backups))
	}
	phase := phaseOf("sql01", "Sales", time.Minute)
	for i, at := range f.backups {
		if got := at.Sub(at.Truncate(time.Minute)); got != phase {
			t.Errorf("log backup %d at %s: %s past the minute, want the database's phase %s", i+1, at.Format(time.RFC3339), got, phase)
		}
		if i > 0 && at.Sub(f.backups[i-1]) != time.Minute {
			t.Errorf("log backups %d and %d are %s apart, want every (1m)", i, i+1, at.Sub(f.backups[i-1]))
		}
	}
	// Inputs carry the chain the workflow knows, a hint for the record.
	if f.backupIn[0].Chain != 0 || f.backupIn[4].Chain != 1 {
		t.Errorf("BackupLog inputs %+v: want chain 0 first, then 1", f.backupIn)
	}
	if len(f.copies) == 0 || f.copyIn[len(f.copyIn)-1].Chain != 1 {
		t.Fatalf("copies %v of %+v: want the chain copied", f.copies, f.copyIn)
	}
}

// The copy lane never delays the next log backup: copies taking 150 s
// each run beside ticks every minute.
func TestLogChainSlowCopyDoesNotDelayBackups(t *testing.T) {
	f := newFakeChain()
	f.copyTook = 150 * time.Second
	env := chainRun(t, f)
	env.ExecuteWorkflow(LogChainName, LogChainInput{Database: "Sales", Instance: "sql01", TicksPerRun: 6})
	in := continuedWith(t, env)
	for i := 1; i < len(f.backups); i++ {
		if d := f.backups[i].Sub(f.backups[i-1]); d != time.Minute {
			t.Fatalf("log backups %d and %d are %s apart while copies take %s: the copy delays the backups", i, i+1, d, f.copyTook)
		}
	}
	if len(f.copies) < 2 || len(f.copies) >= len(f.backups) {
		t.Fatalf("%d copies for %d log backups: want fewer copies (each takes every log written meanwhile), at least 2", len(f.copies), len(f.backups))
	}
	// The run waited for its copy in flight before continuing.
	if in.Last != 6 {
		t.Fatalf("continued at log %d, want 6", in.Last)
	}
}

func TestLogChainQueryShowsLastLogLagAndCopies(t *testing.T) {
	f := newFakeChain()
	f.backup = func(n int, in logs.BackupLogInput) (logs.BackupLogOutput, error) {
		return logs.BackupLogOutput{Chain: 3, Number: int64(40 + n), Server: "bak01", LastLSN: "900",
			Start: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), Finish: time.Date(2025, 3, 1, 12, 0, 1, 0, time.UTC),
			Every: time.Minute}, nil
	}
	env := chainRun(t, f)
	st := queryAt(t, env, 2*time.Minute+30*time.Second)
	env.ExecuteWorkflow(LogChainName, LogChainInput{Database: "Sales", Instance: "sql01", Chain: 3, Last: 40, TicksPerRun: 4})
	continuedWith(t, env)
	if st := *st; st.State != ChainOK || st.Chain != 3 || st.LastLog < 41 || st.LastLSN != "900" || st.Lag <= 0 || st.CopiedThrough == 0 ||
		st.CopyTo != "bak02" || st.Every != time.Minute {
		t.Fatalf("query: %+v", st)
	}
}

// A broken chain asks for a full backup once: a cycle under the
// database's cycle id, abandoned (it outlives the run), not again while it
// runs, however many ticks find the chain still broken.
func TestLogChainBrokenStartsOneCycleForANewFull(t *testing.T) {
	f := newFakeChain()
	br := &logs.Break{Reason: "recovery_model_switch", Detail: "BACKUP LOG failed with 4214", At: time.Date(2025, 3, 1, 12, 1, 0, 0, time.UTC)}
	f.backup = func(n int, in logs.BackupLogInput) (logs.BackupLogOutput, error) {
		if n == 1 {
			return logs.BackupLogOutput{Chain: 1, Number: 9, Every: time.Minute}, nil
		}
		return logs.BackupLogOutput{Chain: 1, Break: br, NeedFull: true, Every: time.Minute}, nil
	}
	env := chainRun(t, f)
	st := queryAt(t, env, 4*time.Minute+30*time.Second)
	env.ExecuteWorkflow(LogChainName, LogChainInput{Database: "Sales", Instance: "sql01", TicksPerRun: 6})
	in := continuedWith(t, env)
	if len(f.cycles) != 1 || f.cycles[0] != CycleWorkflowID("sql01", "Sales") {
		t.Fatalf("cycles started %v, want one under %s", f.cycles, CycleWorkflowID("sql01", "Sales"))
	}
	if st := *st; st.State != ChainBroken || st.Break == nil || st.Break.Reason != br.Reason || st.FullRequested == "" {
		t.Fatalf("query while broken: %+v", st)
	}
	if in.Chain != 1 || in.Last != 9 {
		t.Fatalf("continued with %+v, want chain 1 at log 9", in)
	}
}

// A failed log backup degrades the chain; the next tick tries again and
// the chain is ok once it succeeds.
func TestLogChainFailedBackupDegradesUntilTheNextTick(t *testing.T) {
	f := newFakeChain()
	f.backup = func(n int, in logs.BackupLogInput) (logs.BackupLogOutput, error) {
		if n == 2 {
			return logs.BackupLogOutput{}, temporal.NewNonRetryableApplicationError("recovery model SIMPLE: ALTER DATABASE [Sales] SET RECOVERY FULL",
				activities.ErrInvalidConfig, nil)
		}
		return logs.BackupLogOutput{Chain: 1, Number: int64(n), Every: time.Minute}, nil
	}
	env := chainRun(t, f)
	mid := queryAt(t, env, 2*time.Minute+30*time.Second)
	env.ExecuteWorkflow(LogChainName, LogChainInput{Database: "Sales", Instance: "sql01", TicksPerRun: 3})
	in := continuedWith(t, env)
	if mid := *mid; mid.State != ChainDegraded || !strings.Contains(mid.LastError, "SET RECOVERY FULL") {
		t.Fatalf("after the failed tick: %+v", mid)
	}
	if len(f.backups) != 3 || in.Last != 3 {
		t.Fatalf("%d log backups, continued at %d: want 3 and 3", len(f.backups), in.Last)
	}
}

// log_backup removed from the configuration: the chain ends, without a
// log backup.
func TestLogChainEndsWhenLogBackupsAreOff(t *testing.T) {
	f := newFakeChain()
	f.plan.Enabled = false
	env := chainRun(t, f)
	env.ExecuteWorkflow(LogChainName, LogChainInput{Database: "Sales", Instance: "sql01"})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	var st LogChainStatus
	if err := env.GetWorkflowResult(&st); err != nil || st.State != ChainOff {
		t.Fatalf("result %+v (%v), want state off", st, err)
	}
	if len(f.backups) != 0 {
		t.Fatalf("%d log backups taken with log backups off", len(f.backups))
	}
}

// A BackupLog that reports every 0 (log_backup removed while the run
// went on) ends the chain after the copy in flight.
func TestLogChainEndsWhenEveryDropsToZero(t *testing.T) {
	f := newFakeChain()
	f.backup = func(n int, in logs.BackupLogInput) (logs.BackupLogOutput, error) {
		if n == 2 {
			return logs.BackupLogOutput{Chain: 1}, nil
		}
		return logs.BackupLogOutput{Chain: 1, Number: int64(n), Every: time.Minute}, nil
	}
	env := chainRun(t, f)
	env.ExecuteWorkflow(LogChainName, LogChainInput{Database: "Sales", Instance: "sql01", TicksPerRun: 10})
	var st LogChainStatus
	if err := env.GetWorkflowResult(&st); err != nil || st.State != ChainOff || len(f.backups) != 2 {
		t.Fatalf("result %+v (%v) after %d log backups: want off after 2", st, err, len(f.backups))
	}
}

// Only the canonical id runs a chain: a second workflow id for one
// database would run two chains.
func TestLogChainRefusesAnotherWorkflowID(t *testing.T) {
	f := newFakeChain()
	env := chainRun(t, f)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "my-own-id"})
	env.ExecuteWorkflow(LogChainName, LogChainInput{Database: "Sales", Instance: "sql01"})
	var appErr *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Type() != activities.ErrInvalidConfig ||
		!strings.Contains(err.Error(), LogChainWorkflowID("sql01", "Sales")) {
		t.Fatalf("error %v: want InvalidConfig naming the canonical id", err)
	}
}

func TestLogChainWorkflowID(t *testing.T) {
	if got := LogChainWorkflowID("sql01", "Sales"); got != "logchain/sql01/Sales" {
		t.Fatalf("id %q", got)
	}
	a, b := LogChainWorkflowID("sql01", "Sales/x"), LogChainWorkflowID("sql01", "Sales_x")
	if a == b || !strings.HasPrefix(a, "logchain/sql01/Sales_x-") {
		t.Fatalf("escaped ids %q and %q must differ", a, b)
	}
}

func TestNextTickAndPhase(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 30, 0, time.UTC)
	for _, c := range []struct {
		every, phase time.Duration
		want         time.Time
	}{
		{time.Minute, 0, time.Date(2025, 3, 1, 12, 1, 0, 0, time.UTC)},
		{time.Minute, 45 * time.Second, time.Date(2025, 3, 1, 12, 0, 45, 0, time.UTC)},
		{time.Minute, 30 * time.Second, time.Date(2025, 3, 1, 12, 1, 30, 0, time.UTC)}, // exactly on a tick: the next one
		{5 * time.Minute, 10 * time.Second, time.Date(2025, 3, 1, 12, 5, 10, 0, time.UTC)},
	} {
		if got := nextTick(now, c.every, c.phase); !got.Equal(c.want) {
			t.Errorf("nextTick(%s, every %s, phase %s) = %s, want %s", now.Format(time.TimeOnly), c.every, c.phase,
				got.Format(time.TimeOnly), c.want.Format(time.TimeOnly))
		}
	}
	seen := map[time.Duration]bool{}
	for _, db := range []string{"Sales", "HR", "Orders", "Stock", "Web", "Mail"} {
		p := phaseOf("sql01", db, time.Minute)
		if p < 0 || p >= time.Minute || p%time.Second != 0 {
			t.Fatalf("phase %s of %s outside [0, 1m) or not whole seconds", p, db)
		}
		seen[p] = true
	}
	if len(seen) < 4 {
		t.Fatalf("six databases share %d phases: the fleet's log backups would bunch", len(seen))
	}
}
