package cycle_test

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/workflows"
)

// The BackupCycle workflow with Differential on the embedded Temporal
// server: before any full it ends skipped (no base); after a verified full
// it takes, copies and proves a differential on it, under the database's
// own cycle id, and the result names the base.
func TestE2EDifferentialCycle(t *testing.T) {
	f := cycle.NewSQLFixtureOf(t, sitetest.Options{Database: "Sales", CommitLog: true,
		Extra: "    owns_backup_chain: true\n    diff_backup: {every: 6h}\n"})
	e := newE2E(t, f, nil)
	diff := func() workflows.CycleResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// A start under another id, as the worker's schedule starts it:
		// the cycle runs under the database's id.
		run, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.DiffStartID("sql01", "Sales") + "-1", TaskQueue: e.tq},
			workflows.BackupCycleName, workflows.CycleInput{Database: "Sales", Instance: "sql01", Differential: true})
		if err != nil {
			t.Fatal(err)
		}
		var res workflows.CycleResult
		if err := run.Get(ctx, &res); err != nil {
			t.Fatalf("differential cycle: %v", err)
		}
		return res
	}
	if res := diff(); res.SkipReason != activities.SkipNoDifferentialBase {
		t.Fatalf("a differential with no full: %+v, want skipped", res)
	}
	full, _, err := e.cycle("Sales")
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := f.Source().CommitNow("Sales"); err != nil {
			t.Fatal(err)
		}
	}
	res := diff()
	if res.Skipped != "" || res.Base != full.Sequence || res.Sequence <= full.Sequence || res.RunBy != workflows.CycleWorkflowID("sql01", "Sales") {
		t.Fatalf("differential %+v, want one on set %d run under the database's cycle id", res, full.Sequence)
	}
	for _, s := range res.Locations {
		m := f.Manifest(s, res.Sequence)
		if !m.Verified() || !m.IsDifferential() || m.Differential.Sequence != full.Sequence {
			t.Errorf("differential on %s: %s %+v", s, m.State, m.Differential)
		}
	}
}
