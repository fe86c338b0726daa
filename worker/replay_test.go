package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// Before a rollout, `worker --replay-open` replays every open workflow of
// the task queue with the new build: a running cycle replays, a workflow
// this build cannot run fails the check and is named.
func TestReplayOpenChecksTheRunningWorkflows(t *testing.T) {
	ctx := context.Background()
	srv, cfgFile, _ := siteWithDeadInstance(t)
	// The instance's password is there: the cycle waits for the instance
	// (retries) instead of failing, so it stays open.
	t.Setenv("BACKUPCYCLE_TEST_UNSET", "Pw-unused-1")
	runWorker(t, "--config", cfgFile)
	c, err := client.Dial(ctx, config.Temporal{Address: srv.FrontendAddress()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cycle, err := c.StartCycle(ctx, workflows.CycleInput{Instance: "sql01", Database: "Sales"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.SDK().TerminateWorkflow(ctx, cycle.GetID(), cycle.GetRunID(), "test done") }()
	// A workflow type this build does not have (one a rollout would drop).
	retired, err := c.SDK().ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: "retired-1", TaskQueue: workflows.TaskQueue}, "RetiredWorkflow")
	if err != nil {
		t.Fatal(err)
	}
	// The cycle's history holds its plan by now.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if planned, failure := planOutcome(t, c.SDK(), cycle.GetID(), cycle.GetRunID()); planned || failure != "" {
			if failure != "" {
				t.Fatalf("the cycle ended: %s", failure)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cycle did not complete its plan within 1m")
		}
	}

	replay := func(open, want int) string {
		t.Helper()
		// Visibility lists a workflow a moment after its start or end.
		query := "ExecutionStatus = 'Running' AND TaskQueue = '" + workflows.TaskQueue + "'"
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			resp, err := c.SDK().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetExecutions()) == open {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d open workflows listed, want %d", len(resp.GetExecutions()), open)
			}
		}
		var out, errb bytes.Buffer
		if code := run(ctx, []string{"--config", cfgFile, "--replay-open"}, &out, &errb); code != want {
			t.Fatalf("--replay-open: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, want, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
	got := replay(2, exitFail)
	for _, rx := range []string{
		`(?m)^ok   backup-sql01-Sales \(run ` + regexp.QuoteMeta(cycle.GetRunID()) + `\)$`,
		`(?m)^FAIL retired-1 \(run ` + regexp.QuoteMeta(retired.GetRunID()) + `\): .*RetiredWorkflow`,
		`(?m)^replayed 2 open workflows of task queue backupcycle with this build: 1 do not replay$`,
		`worker: 1 open workflows do not replay with this build: roll it out only after they finish, or put the change behind workflow.GetVersion`,
	} {
		if !regexp.MustCompile(rx).MatchString(got) {
			t.Errorf("--replay-open output lacks %s:\n%s", rx, got)
		}
	}

	// Without it, the running cycle alone: the build may take over.
	if err := c.SDK().TerminateWorkflow(ctx, retired.GetID(), retired.GetRunID(), "retired"); err != nil {
		t.Fatal(err)
	}
	got = replay(1, exitOK)
	if !strings.Contains(got, "ok   backup-sql01-Sales") || !strings.Contains(got, ": 0 do not replay") {
		t.Errorf("--replay-open after the retired workflow ended:\n%s", got)
	}
}
