package cycle_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/workflows"
)

// twoDatabases is the site with a second database of sql01, Orders,
// configured as Sales but without sanity checks.
func twoDatabases(t *testing.T) *cycle.SQLFixture {
	t.Helper()
	f := cycle.NewSQLFixture(t, "Sales", "")
	if err := f.Source().CreateDatabase(sqlsim.DatabaseSpec{Name: "Orders", Size: 4 << 20, DataFiles: 2}); err != nil {
		t.Fatal(err)
	}
	cfg := f.Config()
	orders := cfg.Databases[0]
	orders.Name, orders.SanityChecks = "Orders", nil
	cfg.Databases = append(cfg.Databases, orders)
	return f
}

// TestE2ECyclesOfOneInstanceTakeTurns: two cycles of two databases of
// sql01, whose max_concurrent is 1 (the default), started at once as two
// `starter run` start them (each under its database's own workflow id, no
// fleet run): the second waits for the first's slot, and the emulated SQL
// Server never runs their BACKUPs at the same time; both end verified.
func TestE2ECyclesOfOneInstanceTakeTurns(t *testing.T) {
	f := twoDatabases(t)
	cfg := f.Config()
	if inst, _ := cfg.SQLInstance("sql01"); inst.MaxConcurrent != 1 {
		t.Fatalf("sql01's max_concurrent is %d, want the default 1", inst.MaxConcurrent)
	}
	// Each BACKUP takes a moment: long enough for the other to start.
	f.Source().SetThrottle(4 << 20)
	e := newE2E(t, f, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, db := range []string{"Sales", "Orders"} {
		run, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.CycleWorkflowID("sql01", db), TaskQueue: e.tq},
			workflows.BackupCycleName, workflows.CycleInput{Database: db, Instance: "sql01"})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res workflows.CycleResult
			errs[i] = run.Get(ctx, &res)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
	}
	backups := cycle.Statements(f.Source(), "BACKUP DATABASE")
	if len(backups) != 2 {
		t.Fatalf("%d BACKUP statements, want one per database", len(backups))
	}
	a, b := backups[0], backups[1]
	if b.Start.Before(a.End) {
		t.Errorf("the BACKUPs of %s (%s to %s) and %s (from %s) ran at the same time on an instance with max_concurrent 1",
			a.Database, a.Start.Format(time.StampMilli), a.End.Format(time.StampMilli), b.Database, b.Start.Format(time.StampMilli))
	}
}

// TestE2EATerminatedCycleGivesItsSlotsBack: a cycle terminated from the Web
// UI mid-BACKUP (no cleanup runs, no worker is told) holds no slot
// afterwards: the server terminates its slots with it, and the next cycle
// of the instance runs at once.
func TestE2EATerminatedCycleGivesItsSlotsBack(t *testing.T) {
	f := twoDatabases(t)
	f.Source().SetThrottle(64 << 10) // a BACKUP of about a minute
	e := newE2E(t, f, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := workflows.CycleWorkflowID("sql01", "Sales")
	if _, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: e.tq}, workflows.BackupCycleName,
		workflows.CycleInput{Database: "Sales", Instance: "sql01"}); err != nil {
		t.Fatal(err)
	}
	for len(cycle.Statements(f.Source(), "BACKUP DATABASE")) == 0 {
		if ctx.Err() != nil {
			t.Fatal("the first cycle's BACKUP never started")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := e.c.TerminateWorkflow(ctx, id, "", "terminated from the Web UI"); err != nil {
		t.Fatal(err)
	}
	f.Source().SetThrottle(0)
	_, _, err := e.cycle("Orders")
	if err != nil {
		t.Fatalf("the next cycle of the instance: %v", err)
	}
}
