package cycle

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// copiedSet backs a set up on the plan's primary and copies it to its
// remote (the round robin alternates bak01 and bak02): ready to verify.
func (f *sqlFixture) copiedSet() (int64, activities.VerifyInput) {
	f.t.Helper()
	p, seq, _ := f.backedUp()
	f.must(f.acts.CopyToRemote, activities.CopyInput{Database: f.db, Sequence: seq, From: p.Rotation[0], To: p.Remote}, nil)
	return seq, activities.VerifyInput{Database: f.db, Sequence: seq, Server: p.Remote}
}

// setGUID is the backup set GUID the set's manifest recorded.
func (f *sqlFixture) setGUID(seq int64) string {
	f.t.Helper()
	m := f.load("bak02", seq) // every copied set is on both servers
	if m.Header == nil || m.Header.BackupSetGUID == "" {
		f.t.Fatalf("manifest of seq %d has no backup set GUID", seq)
	}
	return m.Header.BackupSetGUID
}

// verifySQL connects to the verification instance as the activities do.
func (f *sqlFixture) verifySQL() *mssql.DB {
	f.t.Helper()
	db, err := mssql.Open(context.Background(), mssql.Target{Instance: "verify01", Address: f.verify.Addr(), User: "sa",
		Password: sqlPassword, Database: "master", Encrypt: "disable"})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { db.Close() })
	return db
}

// verifyRestores counts the RESTORE DATABASE statements verify01 ran.
func (f *sqlFixture) verifyRestores() int { return len(statements(f.verify, "RESTORE DATABASE")) }

// TestCheckDBRecordsRestoreProof: Restore, CheckDB and SanityChecks pass on
// the copy restored from this set, and CheckDB records the proof — the
// restore-history row and this set's backup set GUID — in the manifest on
// both servers (invariant I2 of the README's guarantees).
func TestCheckDBRecordsRestoreProof(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	seq, verify := f.copiedSet()
	f.must(f.acts.Restore, verify, nil)
	if m := f.load("bak02", seq); m.Proof != nil {
		t.Fatalf("proof recorded before CHECKDB: %+v", m.Proof)
	}
	f.must(f.acts.CheckDB, verify, nil)
	f.must(f.acts.SanityChecks, verify, nil)
	sqlDB := f.verifySQL()
	p, err := activities.LastRestore(context.Background(), sqlDB, "Sales_verify")
	if err != nil || p == nil {
		t.Fatalf("restore history: %+v %v", p, err)
	}
	for _, s := range []string{"bak01", "bak02"} {
		m := f.load(s, seq)
		pr := m.Proof
		if m.State != catalog.StateChecked || pr == nil || pr.VerifyInstance != "verify01" || pr.VerifyDatabase != "Sales_verify" ||
			pr.RestoreHistoryID != p.HistoryID || !strings.EqualFold(pr.BackupSetGUID, f.setGUID(seq)) ||
			!pr.RestoredAt.Equal(p.RestoreDate) || pr.CheckedAt.IsZero() {
			t.Errorf("manifest on %s: %s, proof %+v; want checked with restore %d of %s", s, m.State, pr, p.HistoryID, f.setGUID(seq))
		}
	}
}

// TestCheckDBRefusesAnotherSetsRestore: the verification database was last
// restored from another set (another cycle's): CheckDB and SanityChecks of
// this set refuse with RestoreMismatch naming the database and both GUIDs,
// run no CHECKDB, and record no proof. Restoring this set again makes them
// pass.
func TestCheckDBRefusesAnotherSetsRestore(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	seq1, verify1 := f.copiedSet()
	seq2, verify2 := f.copiedSet()
	f.must(f.acts.Restore, verify2, nil) // the other cycle's restore
	checks := len(statements(f.verify, "DBCC CHECKDB"))
	for _, step := range []struct {
		name string
		fn   any
	}{{"CheckDB", f.acts.CheckDB}, {"SanityChecks", f.acts.SanityChecks}} {
		err := f.run(step.fn, verify1, nil)
		if activities.ErrorType(err) != activities.ErrRestoreMismatch || !appErrorOf(t, err).NonRetryable() {
			t.Fatalf("%s of set %d on set %d's copy: %v, want non-retryable RestoreMismatch", step.name, seq1, seq2, err)
		}
		for _, want := range []string{`"Sales_verify"`, "verify01", f.setGUID(seq1), f.setGUID(seq2)} {
			if !strings.Contains(strings.ToUpper(err.Error()), strings.ToUpper(want)) {
				t.Errorf("%s: %v does not name %s", step.name, err, want)
			}
		}
	}
	if n := len(statements(f.verify, "DBCC CHECKDB")); n != checks {
		t.Errorf("CHECKDB ran %d times on another set's copy", n-checks)
	}
	if n := len(statements(f.verify, "SELECT")); n == 0 {
		t.Fatal("no SELECT at all: the proof was not read")
	}
	if m := f.load("bak02", seq1); m.Proof != nil || m.State != catalog.StateCopied {
		t.Errorf("set %d after the refused CHECKDB: %s, proof %+v", seq1, m.State, m.Proof)
	}
	f.must(f.acts.Restore, verify1, nil) // replaces a copy backupcycle restored
	f.must(f.acts.CheckDB, verify1, nil)
	f.must(f.acts.SanityChecks, verify1, nil)
	if m := f.load("bak02", seq1); m.Proof == nil || !strings.EqualFold(m.Proof.BackupSetGUID, f.setGUID(seq1)) {
		t.Errorf("set %d after its own restore: proof %+v", seq1, m.Proof)
	}
}

// TestProofNoticesAnotherRestore: a copy restored again after the proof was
// read (here: between two reads, as it would between the two ends of a
// CHECKDB) or dropped and created under the same name never passes.
func TestProofNoticesAnotherRestore(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	seq, verify := f.copiedSet()
	f.must(f.acts.Restore, verify, nil)
	db, _ := f.cfg.Database("sql01", "Sales")
	want := f.setGUID(seq)
	sqlDB := f.verifySQL()
	ctx := context.Background()
	m := f.load("bak02", seq)
	before, err := activities.ProveRestored(ctx, sqlDB, "verify01", db, seq, "Sales_verify", want, m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := activities.StillRestored(ctx, sqlDB, "verify01", db, seq, "Sales_verify", want, m, before, "CHECKDB"); err != nil {
		t.Fatalf("nothing happened, yet: %v", err)
	}
	f.must(f.acts.Restore, verify, nil) // the same set restored again: a new restore
	_, err = activities.StillRestored(ctx, sqlDB, "verify01", db, seq, "Sales_verify", want, m, before, "CHECKDB")
	if activities.ErrorType(err) != activities.ErrRestoreMismatch || !strings.Contains(err.Error(), "restored again") {
		t.Fatalf("a restore between the two ends of CHECKDB: %v, want RestoreMismatch", err)
	}
	// Dropped and created again under the name: restore history still
	// names this set, but the database is not that restore's.
	m = f.load("bak02", seq)
	f.must(f.acts.DropVerifyDB, verify, nil)
	_, err = activities.ProveRestored(ctx, sqlDB, "verify01", db, seq, "Sales_verify", want, m)
	if activities.ErrorType(err) != activities.ErrSQLHostUnreachable {
		t.Fatalf("proof of a dropped copy: %v, want SQLHostUnreachable (restore again)", err)
	}
	time.Sleep(activities.ClockSlack + 500*time.Millisecond) // created clearly after the last restore
	if err := f.verify.CreateDatabase(sqlsim.DatabaseSpec{Name: "Sales_verify", Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	_, err = activities.ProveRestored(ctx, sqlDB, "verify01", db, seq, "Sales_verify", want, m)
	if activities.ErrorType(err) != activities.ErrRestoreMismatch || !strings.Contains(err.Error(), "created at") {
		t.Fatalf("proof of a database created after the restore: %v, want RestoreMismatch", err)
	}
	if err := f.run(f.acts.CheckDB, verify, nil); activities.ErrorType(err) != activities.ErrRestoreMismatch {
		t.Fatalf("CheckDB of a re-created database: %v, want RestoreMismatch", err)
	}
}

// TestRestoreReplacesOnlyItsOwnCopies: RESTORE ... WITH REPLACE never
// replaces a verification database backupcycle did not restore — created by
// someone, restored by a DBA from their own backup, or re-created after
// backupcycle's restore: VerifyDatabaseInUse, and nothing is replaced. Its
// own copies (the previous cycle's, kept) are replaced.
func TestRestoreReplacesOnlyItsOwnCopies(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	seq, verify := f.copiedSet()
	sqlDB := f.verifySQL()
	ctx := context.Background()
	wantMsg := `database "Sales_verify" on verify01 exists and was not restored by backupcycle: nothing was replaced; drop or rename it, or set verify_name`
	refused := func(what string) {
		t.Helper()
		restores := f.verifyRestores()
		err := f.run(f.acts.Restore, verify, nil)
		if activities.ErrorType(err) != activities.ErrVerifyDatabaseInUse || !appErrorOf(t, err).NonRetryable() || !strings.Contains(err.Error(), wantMsg) {
			t.Fatalf("restore over %s: %v, want non-retryable VerifyDatabaseInUse: %s", what, err, wantMsg)
		}
		if n := f.verifyRestores(); n != restores {
			t.Fatalf("restore over %s: %d RESTORE statements ran", what, n-restores)
		}
	}

	// Somebody's own database under the name.
	if err := f.verify.CreateDatabase(sqlsim.DatabaseSpec{Name: "Sales_verify", Size: 1 << 20,
		Tables: []sqlsim.TableSpec{{Name: "Precious", Rows: 42}}}); err != nil {
		t.Fatal(err)
	}
	refused("a created database")
	if v, _, err := sqlDB.QueryValue(ctx, "count", "SELECT COUNT_BIG(*) FROM [Sales_verify].dbo.Precious"); err != nil || v != int64(42) {
		t.Fatalf("the database that was not replaced: %v %v", v, err)
	}

	// Restored by a DBA from a backup this product did not take.
	drop := func() {
		t.Helper()
		stmt, _ := tsql.DropDatabase("Sales_verify")
		if _, err := sqlDB.Run(ctx, "DROP", stmt, nil); err != nil {
			t.Fatal(err)
		}
	}
	drop()
	layout, _ := tsql.Layout([]string{`\\bak01\backup`}, tsql.NamesOf("dba", "Sales"), 1, 1)
	stmt, _ := tsql.BackupDatabase(tsql.BackupOptions{Database: "Sales", Disks: tsql.Paths(layout), Init: true, Format: true, Name: "Sales nightly (DBA)"})
	src, err := mssql.Open(ctx, mssql.Target{Instance: "sql01", Address: f.src.Addr(), User: "sa", Password: sqlPassword, Encrypt: "disable"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Run(ctx, "BACKUP", stmt, nil); err != nil {
		t.Fatal(err)
	}
	moves := map[string]string{"Sales'data": `D:\restore\dba.mdf`, "Sales'data_2": `D:\restore\dba.ndf`, "Sales'data_log": `D:\restore\dba.ldf`}
	if err := f.verify.RestoreDatabase(ctx, sqlsim.RestoreSpec{Database: "Sales_verify", Stripes: tsql.Paths(layout), Move: moves}); err != nil {
		t.Fatal(err)
	}
	refused("a database a DBA restored from their own backup")

	// backupcycle's own copy (kept from a previous cycle): replaced.
	drop()
	f.must(f.acts.Restore, verify, nil)
	f.must(f.acts.Restore, verify, nil)

	// Dropped and created again after backupcycle's restore.
	drop()
	time.Sleep(activities.ClockSlack + 500*time.Millisecond)
	if err := f.verify.CreateDatabase(sqlsim.DatabaseSpec{Name: "Sales_verify", Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	refused("a database created after backupcycle's last restore")
	drop()
	f.must(f.acts.Restore, verify, nil)
	f.must(f.acts.CheckDB, verify, nil)
	if m := f.load("bak02", seq); m.Proof == nil {
		t.Fatal("no proof after the restore into a free name")
	}
}

// TestRestoreResumesItsOwnCutRestore: the verification instance crashed in
// the middle of this activity's RESTORE, leaving the database RESTORING. The
// retry replaces it, whatever its heartbeat details say: the set's manifest
// recorded the RESTORE before it was sent, and the instance shows the
// database that RESTORE created. The heartbeat says "restore started into
// Sales_verify" before the RESTORE is sent, for people reading the run.
func TestRestoreResumesItsOwnCutRestore(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, verify := f.copiedSet()
	var mu sync.Mutex
	var beats []activities.RestoreHeartbeat
	var restoresAtFirstStarted = -1
	f.env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var hb activities.RestoreHeartbeat
		if d.HasValues() && d.Get(&hb) == nil {
			mu.Lock()
			beats = append(beats, hb)
			if hb.StartedInto != "" && restoresAtFirstStarted < 0 {
				restoresAtFirstStarted = f.verifyRestores()
			}
			mu.Unlock()
		}
	})
	f.verify.SetThrottle(2 << 20)
	if err := f.verify.CrashAt(sqlsim.OpRestore, 50); err != nil {
		t.Fatal(err)
	}
	if err := f.run(f.acts.Restore, verify, nil); activities.ErrorType(err) != activities.ErrSQLHostUnreachable {
		t.Fatalf("restore through a crash: %v, want SQLHostUnreachable", err)
	}
	mu.Lock()
	if len(beats) == 0 || beats[0].StartedInto != "Sales_verify" || beats[0].Step != activities.StepRestore || restoresAtFirstStarted != 0 {
		t.Errorf("heartbeats %+v (RESTOREs before the first with started_into: %d), want the first to say the restore started into Sales_verify before any RESTORE ran",
			beats, restoresAtFirstStarted)
	}
	mu.Unlock()
	if err := f.verify.Start(); err != nil {
		t.Fatal(err)
	}
	f.verify.SetThrottle(0)
	st, err := activities.DatabaseState(context.Background(), f.verifySQL(), "Sales_verify")
	if err != nil || st == nil || st.State != "RESTORING" {
		t.Fatalf("after the crash: %+v %v, want RESTORING", st, err)
	}
	if m := f.load(verify.Server, verify.Sequence); m.VerifyCopy == nil || m.VerifyCopy.Confirmed() || m.VerifyCopy.VerifyDatabase != "Sales_verify" {
		t.Fatalf("manifest after the cut restore records %+v, want the RESTORE into Sales_verify, unconfirmed", m.VerifyCopy)
	}
	// Heartbeat details naming another database change nothing.
	f.env.SetHeartbeatDetails(activities.RestoreHeartbeat{StepProgress: activities.StepProgress{Step: activities.StepRestore, Percent: 50}, StartedInto: "Other_verify"})
	var out activities.StepOutput
	f.must(f.acts.Restore, verify, &out)
	f.must(f.acts.CheckDB, verify, nil)
	if m := f.load(verify.Server, verify.Sequence); m.VerifyCopy == nil || !m.VerifyCopy.Confirmed() {
		t.Fatalf("manifest after the restore records %+v, want it confirmed", m.VerifyCopy)
	}
}

// TestRestoreRetryIgnoresAnotherSetsRestore: a retried Restore finds a
// RESTORE into its verification database running, but of another set (its
// text names other files): it is not taken for this set's ("marked
// verified although it was never restored"), and nothing replaces it:
// VerifyDatabaseInUse, one RESTORE ran, the set stays copied.
func TestRestoreRetryIgnoresAnotherSetsRestore(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	seq1, verify1 := f.copiedSet()
	seq2, verify2 := f.copiedSet()
	srv, _ := f.cfg.BackupServer(verify2.Server)
	layout, err := tsql.Layout(srv.UNCPaths, tsql.NamesOf("sql01", "Sales"), seq2, 2)
	if err != nil {
		t.Fatal(err)
	}
	moves := map[string]string{"Sales'data": `D:\restore\o.mdf`, "Sales'data_2": `D:\restore\o.ndf`, "Sales'data_log": `D:\restore\o.ldf`}
	f.verify.SetThrottle(2 << 20)
	other := make(chan error, 1)
	go func() {
		other <- f.verify.RestoreDatabase(context.Background(), sqlsim.RestoreSpec{Database: "Sales_verify", Stripes: tsql.Paths(layout), Move: moves, Replace: true})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for f.verifyRestores() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	f.env.SetHeartbeatDetails(activities.RestoreHeartbeat{StepProgress: activities.StepProgress{Step: activities.StepRestore, Sequence: seq1}})
	err = f.run(f.acts.Restore, verify1, nil)
	if e := <-other; e != nil {
		t.Fatalf("the other cycle's restore: %v", e)
	}
	if activities.ErrorType(err) != activities.ErrVerifyDatabaseInUse {
		t.Fatalf("retry while set %d's restore runs into its copy: %v, want VerifyDatabaseInUse", seq2, err)
	}
	if n := f.verifyRestores(); n != 1 {
		t.Fatalf("%d RESTOREs ran, want only the other cycle's", n)
	}
	if m := f.load("bak02", seq1); m.State != catalog.StateCopied {
		t.Fatalf("set %d after the mismatch: %s", seq1, m.State)
	}
}

// slowSanityWorkflow runs SanityChecks under a heartbeat timeout, as the
// cycle does (there: 1 minute).
func slowSanityWorkflow(ctx workflow.Context, in activities.VerifyInput, heartbeat time.Duration) (activities.StepOutput, error) {
	var a *Activities
	var out activities.StepOutput
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    heartbeat,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	}), a.SanityChecks, in).Get(ctx, &out)
	return out, err
}

// TestSlowSanityQueryHeartbeats (scaled down): a sanity
// query that runs three times longer than the heartbeat timeout succeeds,
// because SanityChecks heartbeats while it runs.
func TestSlowSanityQueryHeartbeats(t *testing.T) {
	f := newSQLFixture(t, "Sales", `      - name: cold-copy
        query: WAITFOR DELAY '00:00:03'; SELECT COUNT_BIG(*) FROM dbo.Orders
        at_least: 1
`)
	_, verify := f.copiedSet()
	f.must(f.acts.Restore, verify, nil)
	f.must(f.acts.CheckDB, verify, nil)
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute) // a hang guard: the workflow waits on a real 3 s activity
	env.RegisterActivity(f.acts)
	env.RegisterWorkflow(slowSanityWorkflow)
	var mu sync.Mutex
	beats := 0
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) {
		mu.Lock()
		beats++
		mu.Unlock()
	})
	env.ExecuteWorkflow(slowSanityWorkflow, verify, time.Second)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("a 3 s sanity query under a 1 s heartbeat timeout: %v", err)
	}
	var out activities.StepOutput
	if err := env.GetWorkflowResult(&out); err != nil || out.Checks != 2 {
		t.Fatalf("result %+v %v, want both checks run", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if beats < 2 {
		t.Fatalf("%d heartbeats during a 3 s query", beats)
	}
	waits := statements(f.verify, "WAITFOR")
	if len(waits) != 1 || waits[0].Outcome != "ok" {
		t.Fatalf("the slow query ran %+v", waits)
	}
}

// A later set's RESTORE cut short (the instance crashed, and stayed down
// past the retries) leaves the copy RESTORING. The next cycle, a new
// activity without that attempt's heartbeat, replaces it: the last restore
// that finished into that name was backupcycle's, and refusing it would stop
// every later cycle (found by the fault simulation).
func TestRestoreReplacesItsOwnUnfinishedCopyNextCycle(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, first := f.copiedSet()
	f.must(f.acts.Restore, first, nil)
	// The next night: the cut restore creates the copy anew well after the
	// last restore that finished.
	time.Sleep(activities.ClockSlack + 500*time.Millisecond)
	_, second := f.copiedSet()
	f.verify.SetThrottle(2 << 20)
	if err := f.verify.CrashAt(sqlsim.OpRestore, 50); err != nil {
		t.Fatal(err)
	}
	if err := f.run(f.acts.Restore, second, nil); activities.ErrorType(err) != activities.ErrSQLHostUnreachable {
		t.Fatalf("restore through a crash: %v, want SQLHostUnreachable", err)
	}
	if err := f.verify.Start(); err != nil {
		t.Fatal(err)
	}
	f.verify.SetThrottle(0)
	if st, err := activities.DatabaseState(context.Background(), f.verifySQL(), "Sales_verify"); err != nil || st == nil || st.State != "RESTORING" {
		t.Fatalf("after the crash: %+v %v, want RESTORING", st, err)
	}
	f.env.SetHeartbeatDetails(nil)
	var out activities.StepOutput
	if err := f.run(f.acts.Restore, second, &out); err != nil {
		t.Fatalf("next cycle's restore over its own unfinished copy: %v", err)
	}
	p, err := activities.LastRestore(context.Background(), f.verifySQL(), "Sales_verify")
	if err != nil || p == nil || !activities.SameGUID(p.BackupSetGUID, f.setGUID(second.Sequence)) {
		t.Errorf("restore history %+v %v, want the second set restored", p, err)
	}
}
