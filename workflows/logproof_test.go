package workflows

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities/logs"
)

// LogChain shows where the proof stands, as the proof workflow signals
// it, and measures the standby's lag at its own ticks.
func TestLogChainShowsTheStandbyLag(t *testing.T) {
	env := chainRun(t, newFakeChain())
	through := time.Date(2025, 3, 1, 12, 0, 30, 0, time.UTC)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(LogChainProofSignal, ProofProgress{Mode: "standby", Through: 40, ThroughStart: through, Standby: "Sales_standby",
			VerifyInstance: "sqlv"})
	}, 90*time.Second)
	st := queryAt(t, env, 3*time.Minute+30*time.Second)
	env.ExecuteWorkflow(LogChainName, LogChainInput{Database: "Sales", Instance: "sql01", TicksPerRun: 4})
	continuedWith(t, env)
	if st.Proof == nil || st.Proof.Through != 40 || st.Proof.Standby != "Sales_standby" || st.ProofLag < 2*time.Minute || st.ProofLag > 4*time.Minute {
		t.Fatalf("query: proof %+v, lag %s", st.Proof, st.ProofLag)
	}
}

// LogProof tells LogChain where the standby stands only when that changed:
// a round that applied nothing new costs the chain's history nothing.
func TestLogProofTellsTheChainOnlyChanges(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(LogProof, workflow.RegisterOptions{Name: LogProofName})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: LogProofWorkflowID("sql01", "Sales")})
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	env.SetStartTime(start)
	var acts *logs.Activities
	env.OnActivity(acts.LogPlan, mock.Anything, mock.Anything).Return(logs.LogPlan{Database: "Sales", Instance: "sql01", Enabled: true,
		Every: time.Minute, ProofMode: "standby"}, nil)
	var mu sync.Mutex
	calls := 0
	env.OnActivity(acts.ApplyLogs, mock.Anything, mock.Anything).Return(func(context.Context, logs.ApplyLogsInput) (logs.ApplyLogsOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		through := int64(5)
		if calls >= 3 {
			through = 7
		}
		return logs.ApplyLogsOutput{Standby: "Sales_standby", Instance: "sqlv", Chain: 1, Through: through,
			ThroughStart: start.Add(time.Duration(through) * time.Minute)}, nil
	})
	var sent []ProofProgress
	env.OnSignalExternalWorkflow(mock.Anything, LogChainWorkflowID("sql01", "Sales"), "", LogChainProofSignal, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			sent = append(sent, arg.(ProofProgress))
			return nil
		})
	env.ExecuteWorkflow(LogProofName, LogProofInput{Database: "Sales", Instance: "sql01"})
	if !env.IsWorkflowCompleted() {
		t.Fatal("not completed")
	}
	if len(sent) != 2 || sent[0].Through != 5 || sent[1].Through != 7 || calls != roundsPerRun {
		t.Fatalf("%d rounds sent %+v: want log 5 then log 7 only", calls, sent)
	}
}

// scratchRun runs ScratchProof of sql01/Sales with mocked proofs, each
// taking `took`, and records what ran when.
type scratchLog struct {
	mu      sync.Mutex
	ran     []string // "pit", "nightly", "drop"
	at      []time.Time
	fracs   []float64
	dropped int
}

func scratchRun(t *testing.T, mode string, took time.Duration) (*testsuite.TestWorkflowEnvironment, *scratchLog) {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(ScratchProof, workflow.RegisterOptions{Name: ScratchProofName})
	env.SetStartTime(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	var acts *logs.Activities
	env.OnActivity(acts.LogPlan, mock.Anything, mock.Anything).Return(logs.LogPlan{Database: "Sales", Instance: "sql01", Enabled: true,
		Every: time.Minute, ProofMode: mode, PITEvery: 6 * time.Hour}, nil)
	l := &scratchLog{}
	note := func(what string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.ran, l.at = append(l.ran, what), append(l.at, env.Now())
	}
	env.OnActivity(acts.PITProof, mock.Anything, mock.Anything).Return(func(_ context.Context, in logs.PITProofInput) (logs.ProofOutput, error) {
		note("pit")
		l.mu.Lock()
		l.fracs = append(l.fracs, in.Fraction)
		l.mu.Unlock()
		return logs.ProofOutput{OK: true}, nil
	}).After(took)
	env.OnActivity(acts.NightlyProof, mock.Anything, mock.Anything).Return(func(context.Context, logs.NightlyProofInput) (logs.ProofOutput, error) {
		note("nightly")
		return logs.ProofOutput{OK: true}, nil
	}).After(took)
	env.OnActivity(acts.DropProofCopy, mock.Anything, mock.Anything).Return(func(context.Context, logs.DropProofInput) error {
		note("drop")
		return nil
	})
	return env, l
}

// The point-in-time proof runs at once and then every pit_proof.every,
// each to a drawn fraction of the window, its copy dropped after it; the
// run continues as new after proofsPerRun proofs with when it last ran.
func TestScratchProofRunsThePITProofOnItsSchedule(t *testing.T) {
	env, l := scratchRun(t, "standby", time.Hour)
	env.ExecuteWorkflow(ScratchProofName, ScratchProofInput{Database: "Sales", Instance: "sql01"})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("ended with %v, want continue-as-new", err)
	}
	var next ScratchProofInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if len(l.ran) != 2*proofsPerRun || l.ran[0] != "pit" || l.ran[1] != "drop" || slices.Contains(l.ran, "nightly") {
		t.Fatalf("ran %v", l.ran)
	}
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	if !l.at[0].Equal(start.Add(time.Hour)) || l.at[2].Sub(l.at[0]) != 7*time.Hour { // each proof takes an hour
		t.Fatalf("proofs at %s and %s: want the first at once (ending after its hour), the next 6h after it ended", l.at[0], l.at[2])
	}
	for _, f := range l.fracs {
		if f < 0 || f >= 1 {
			t.Fatalf("fraction %v", f)
		}
	}
	if slices.Equal(l.fracs[:3], []float64{l.fracs[0], l.fracs[0], l.fracs[0]}) {
		t.Fatalf("fractions are not drawn: %v", l.fracs[:3])
	}
	if next.LastPIT.IsZero() || next.LastNightly != (time.Time{}) {
		t.Fatalf("continued with %+v", next)
	}
}

// log_proof: nightly: the nightly proof runs at once and every day, the
// point-in-time proof between, never at the same time (one scratch copy).
func TestScratchProofNightlyAndPITTakeTurns(t *testing.T) {
	env, l := scratchRun(t, "nightly", time.Hour)
	env.ExecuteWorkflow(ScratchProofName, ScratchProofInput{Database: "Sales", Instance: "sql01"})
	if len(l.ran) < 8 || l.ran[0] != "nightly" || l.ran[1] != "drop" || l.ran[2] != "pit" {
		t.Fatalf("ran %v", l.ran)
	}
	var nightly []time.Time
	for i, what := range l.ran {
		if what == "nightly" {
			nightly = append(nightly, l.at[i])
		}
	}
	if len(nightly) < 2 || nightly[1].Sub(nightly[0]) < 24*time.Hour || nightly[1].Sub(nightly[0]) > 26*time.Hour {
		t.Fatalf("nightly proofs at %v: want a day apart", nightly)
	}
}
