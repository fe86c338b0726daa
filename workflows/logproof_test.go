package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
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
