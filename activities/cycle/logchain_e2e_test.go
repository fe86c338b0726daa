package cycle_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/workflows"
)

// The LogChain workflow end to end: the embedded Temporal server, a worker
// with every workflow and activity (workflows.Register, as the worker and
// the development worker run them), the emulated site with a committing
// workload. The database has no full backup yet: the chain's first tick
// finds no chain and starts the BackupCycle whose verified full starts it;
// later ticks take log backups that the copy lane copies to bak02; the run
// continues as new after its ticks.
func TestE2ELogChainStartsOnTheFullItRequestsAndCopiesItsLogs(t *testing.T) {
	f := cycle.NewSQLFixtureOf(t, sitetest.Options{Database: "Sales", CommitLog: true, ManifestKeys: []string{"k1"},
		Extra: "    owns_backup_chain: true\n    log_backup: {every: 1m}\n"})
	// A tick every two seconds: below what the configuration accepts
	// (log_backup.every >= 1m), set on the loaded configuration so that a
	// few ticks fit in a test.
	cfg := f.Config()
	cfg.Databases[0].LogBackup.Every = 2 * time.Second
	if err := f.Source().StartWorkload("Sales", 20); err != nil {
		t.Fatal(err)
	}
	c := temporalClient(t)
	tq := "e2e-" + regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-")
	acts := f.Acts()
	acts.Cycle.Signal = c.SignalWorkflow
	acts.Cycle.Poll = 200 * time.Millisecond
	w := worker.New(c, tq, worker.Options{})
	workflows.Register(w, acts.Activities)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	const ticks = 14
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	id := workflows.LogChainWorkflowID("sql01", "Sales")
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: tq,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING},
		workflows.LogChainName, workflows.LogChainInput{Database: "Sales", Instance: "sql01", TicksPerRun: ticks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.TerminateWorkflow(context.Background(), id, "", "test done") })
	// The first run ends by continuing as new.
	var st workflows.LogChainStatus
	err = run.GetWithOptions(ctx, &st, client.WorkflowRunGetOptions{DisableFollowingRuns: true})
	if err == nil || !isContinueAsNew(err) {
		t.Fatalf("first run ended with %v (%+v), want continue-as-new after %d ticks", err, st, ticks)
	}
	recordHistory(t, c, run, "logchain_first_run")
	events, kinds := historyEvents(t, c, run)
	t.Logf("first run: %d ticks, %d history events (%.1f a tick)", ticks, events, float64(events)/ticks)
	// The run hands over nothing half done: every activity it scheduled
	// completed before it continued as new (a copy scheduled in its last
	// task would be dropped with it).
	if s, c := kinds[enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED], kinds[enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]; s != c {
		t.Errorf("first run scheduled %d activities and completed %d", s, c)
	}

	// The full the chain asked for is verified, and the chain starts on it.
	cycle := workflows.CycleWorkflowID("sql01", "Sales")
	var res workflows.CycleResult
	if err := c.GetWorkflow(ctx, cycle, "").Get(ctx, &res); err != nil {
		t.Fatalf("the cycle the chain started: %v", err)
	}
	if res.Sequence < 1 || res.Remote != "bak02" {
		t.Fatalf("the cycle the chain started: %+v", res)
	}
	if m := f.Manifest(res.Server, res.Sequence); m.State != catalog.StateVerified {
		t.Fatalf("set %d is %s", res.Sequence, m.State)
	}
	// The next run goes on with the chain: wait for three logs copied.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		v, err := c.QueryWorkflow(ctx, id, "", workflows.LogChainQuery)
		if err == nil {
			_ = v.Get(&st)
		}
		if st.Chain == 1 && st.CopiedThrough >= 3 && st.State == workflows.ChainOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if st.Chain != 1 || st.CopiedThrough < 3 || st.State != workflows.ChainOK || st.LastLSN == "" {
		t.Fatalf("chain status %+v, want chain 1 ok with 3 logs copied", st)
	}
	keys, err := cfg.ManifestKeyRing()
	if err != nil {
		t.Fatal(err)
	}
	var parts [2][]*catalog.ChainRecord
	for i, srv := range sitetest.Servers {
		st, err := local.Open(ctx, f.Dir(srv))
		if err != nil {
			t.Fatal(err)
		}
		l, err := catalog.ListChains(ctx, catalog.StorageFS{Storage: st}, keys, catalog.Of("sql01", "Sales"))
		if err != nil {
			t.Fatal(err)
		}
		parts[i] = l.Records
	}
	if len(parts[0]) != 1 || len(parts[1]) != 1 {
		t.Fatalf("chain records: %d on bak01, %d on bak02", len(parts[0]), len(parts[1]))
	}
	r := parts[1][0]
	if r.Fulls[0].Sequence != res.Sequence {
		t.Fatalf("chain starts on full %d, the cycle verified %d", r.Fulls[0].Sequence, res.Sequence)
	}
	ch, err := catalog.AssembleChain(parts[0], map[string]bool{r.Fulls[0].BackupSetGUID: true})
	if err != nil {
		t.Fatal(err)
	}
	if logs, gap := ch.Restorable(ch.Base()); len(logs) < 3 || gap != nil || logs[0].Number != 1 {
		t.Fatalf("restorable after the base full: %d logs, gap %v", len(logs), gap)
	}
	for n := int64(1); n <= 3; n++ {
		l := r.Log(n)
		if l == nil || l.State != catalog.LogCopied {
			t.Fatalf("log %d on bak02: %+v", n, l)
		}
		if _, err := os.Stat(filepath.Join(f.Dir("bak02"), l.Files[0].Name)); err != nil {
			t.Fatal(err)
		}
	}
}

func isContinueAsNew(err error) bool {
	var can *workflow.ContinueAsNewError
	return errors.As(err, &can)
}

// historyEvents counts the run's history events, in all and by type.
func historyEvents(t *testing.T, c client.Client, run client.WorkflowRun) (int, map[enumspb.EventType]int) {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n, kinds := 0, map[enumspb.EventType]int{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		n++
		kinds[ev.GetEventType()]++
	}
	return n, kinds
}
