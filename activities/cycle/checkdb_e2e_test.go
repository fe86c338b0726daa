package cycle_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// CHECKDB verdicts of whole cycles: the retry of a CHECKDB that could not
// run, corruption found by the system table pre-checks, a CHECKDB that
// outlives its step's deadline.

// checkDBs are the outcomes of the CHECKDBs of db on in since the first
// `from` of them.
func checkDBs(in *sqlsim.Instance, db string, from int) []sqlsim.StatementRecord {
	var out []sqlsim.StatementRecord
	for _, s := range cycle.Statements(in, "DBCC CHECKDB")[from:] {
		if s.Database == db {
			out = append(out, s)
		}
	}
	return out
}

// The source runs on UTC+2, the verification instance on UTC, and a clean
// CHECKDB ran on the source shortly before the BACKUP: the restored copy
// reports that CHECKDB's LastGoodCheckDbTime, on the source's clock, which
// lies after the copy's restore on the verification server's clock. The
// first CHECKDB of the copy cannot run (tempdb full: 8921); its retry must
// run a CHECKDB that ends after the restore, never take the source's value
// for a clean CHECKDB of the copy.
func TestE2ECheckDBRetryAcrossClocks(t *testing.T) {
	f := cycle.NewSQLFixture(t, "Sales", fastWaits)
	f.SourceAheadWithCleanCheckDB()
	v := f.Verify()
	acts := f.Acts()
	var first atomic.Bool
	first.Store(true)
	e := newE2E(t, f, map[string]any{"CheckDB": func(ctx context.Context, in activities.VerifyInput) (activities.StepOutput, error) {
		if first.Swap(false) {
			v.SetTempdbFull(true)
			defer v.SetTempdbFull(false)
		}
		return acts.CheckDB(ctx, in)
	}})
	res, run, err := e.cycle("Sales")
	if err != nil {
		t.Fatalf("cycle: %v", err)
	}
	restores := cycle.Statements(v, "RESTORE DATABASE")
	if len(restores) != 1 || restores[0].Outcome != "ok" {
		t.Fatalf("RESTORE statements %+v, want one, ok", restores)
	}
	checks := checkDBs(v, restores[0].Database, 0)
	var outcomes []string
	for _, c := range checks {
		outcomes = append(outcomes, c.Outcome)
	}
	if !slices.Equal(outcomes, []string{"error 8921", "ok"}) {
		t.Fatalf("CHECKDB outcomes %v; want the one tempdb stopped (8921), then one that ran to its end: "+
			"the retry must not take the copy's LastGoodCheckDbTime (its source's, on the source's clock) for a CHECKDB of the copy", outcomes)
	}
	if !checks[1].End.After(restores[0].End) {
		t.Errorf("the clean CHECKDB ended %s, before the RESTORE ended %s", checks[1].End, restores[0].End)
	}
	if steps := stepsOf(t, e.c, run); steps.attempts["CheckDB"] != 2 {
		t.Errorf("CheckDB reached attempt %d, want 2 (8921 is retried)", steps.attempts["CheckDB"])
	}
	if m := f.Manifest(res.Remote, res.Sequence); m.State != catalog.StateVerified {
		t.Errorf("manifest %s, want verified", m.State)
	}
}

// Corruption found by the system table pre-checks (7985, severity 16:
// "cannot be repaired", CHECKDB stops at once) fails the set on evidence:
// CheckDBFailed, the manifest failed with checkdb_failed, CHECKDB not
// tried again.
func TestE2ECheckDBPreCheckFailsTheSet(t *testing.T) {
	f := cycle.NewSQLFixture(t, "Sales", fastWaits)
	if err := f.Verify().CheckDBError(7985); err != nil {
		t.Fatal(err)
	}
	e := newE2E(t, f, nil)
	_, run, err := e.cycle("Sales")
	if cycleErrorType(err) != activities.ErrCheckDBFailed || !strings.Contains(err.Error(), "7985") {
		t.Fatalf("cycle with a failed system table pre-check: %v; want CheckDBFailed quoting 7985", err)
	}
	steps := stepsOf(t, e.c, run)
	if steps.attempts["CheckDB"] != 1 {
		t.Errorf("CheckDB reached attempt %d, want 1: corruption is not retried", steps.attempts["CheckDB"])
	}
	seq := steps.sequences(t, "CheckDB")
	if len(seq) != 1 {
		t.Fatalf("CheckDB ran for sequences %v, want one", seq)
	}
	for _, s := range []string{"bak01", "bak02"} {
		m := f.Manifest(s, seq[0])
		if m.State != catalog.StateFailed || m.Failure == nil || m.Failure.Evidence != catalog.EvidenceCheckDBFailed {
			t.Errorf("manifest on %s: %s %+v, want failed with evidence checkdb_failed", s, m.State, m.Failure)
		}
	}
}

// A CHECKDB that outlives its step's deadline (held in its last phase,
// DBCC IVIEW CHECK, past checkdb_timeout and every retry) is stopped when
// the cycle fails: nothing of the failed cycle still runs on the
// verification instance, and the next cycle restores over the copy and is
// verified.
func TestE2ECheckDBPastItsDeadlineIsStopped(t *testing.T) {
	f := cycle.NewSQLFixture(t, "Sales", fastWaits)
	v := f.Verify()
	acts := f.Acts()
	var short atomic.Bool
	short.Store(true)
	e := newE2E(t, f, map[string]any{"PlanCycle": func(ctx context.Context, in activities.PlanInput) (activities.Plan, error) {
		p, err := acts.PlanCycle(ctx, in)
		if short.Load() {
			p.Limits.CheckDBTimeout, p.Limits.CheckDBDeadline = 2*time.Second, 6*time.Second
		}
		return p, err
	}})
	release, err := v.HoldCheckDB(sqlsim.PhaseIViewCheck)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	_, run, err := e.cycle("Sales")
	if err == nil {
		t.Fatal("cycle whose CHECKDB outlived its deadline succeeded")
	}
	recordHistory(t, e.c, run, "cycle_checkdb_deadline")
	checks := checkDBs(v, "Sales_verify", 0)
	if len(checks) != 1 || checks[0].Outcome == "running" {
		t.Errorf("CHECKDB statements after the cycle failed: %+v; want its one CHECKDB stopped", checks)
	}
	db := f.VerifySQL()
	if n, _, err := db.QueryValue(context.Background(), "running DBCC", "SELECT COUNT(*) FROM sys.dm_exec_requests WHERE command LIKE N'DBCC%'"); err != nil || n != int64(0) {
		t.Errorf("DBCC requests still running on the verification instance after the cycle failed: %v (%v)", n, err)
	}
	short.Store(false)
	release()
	res, _, err := e.cycle("Sales")
	if err != nil {
		t.Fatalf("next cycle: %v", err)
	}
	if m := f.Manifest(res.Remote, res.Sequence); m.State != catalog.StateVerified {
		t.Errorf("next cycle's manifest %s, want verified", m.State)
	}
}
