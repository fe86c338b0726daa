package cycle

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// sourceAheadWithCleanCheckDB puts the source on UTC+2 (the verification
// instance stays on UTC, a Linux container's default) and runs a clean
// DBCC CHECKDB of the database there, as a DBA's nightly job would shortly
// before the cycle's BACKUP: the restored copy then carries a
// LastGoodCheckDbTime two hours "ahead" of the verification server's clock.
func (f *sqlFixture) sourceAheadWithCleanCheckDB() {
	f.t.Helper()
	f.withSource(func(c *sqlsim.Config) { c.TimeZone = time.FixedZone("UTC+2", 2*3600) })
	execOn(f.t.(*testing.T), f.src, "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS")
}

// A CHECKDB of the copy whose connection is lost, and which ends unseen
// after finding damage, is not taken for clean because the copy's
// LastGoodCheckDbTime (its source's, on the source's clock) lies after its
// restore on the verification server's clock: the attempt fails (the
// workflow restores again, as after a lost instance), and the next CHECKDB
// reports what it finds.
func TestSQLCheckDBLostConnectionAcrossClocks(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	f.sourceAheadWithCleanCheckDB()
	_, verify := f.copiedSet()
	var restored activities.StepOutput
	f.must(f.acts.Restore, verify, &restored)
	if err := f.verify.CorruptPage(restored.VerifyDatabase, 1, 30); err != nil {
		t.Fatal(err)
	}
	f.verify.SetThrottle(2 << 20)
	defer f.verify.SetThrottle(0)
	if err := f.verify.DropConnectionAt(sqlsim.OpCheckDB, 30); err != nil {
		t.Fatal(err)
	}
	err := f.run(f.acts.CheckDB, verify, nil)
	if f.verify.LostConnections() != 1 {
		t.Fatal("the armed lost connection did not fire")
	}
	if err == nil {
		t.Fatalf("CHECKDB of a damaged copy whose connection was lost reported clean (CHECKDB statements %+v)",
			statements(f.verify, "DBCC CHECKDB"))
	}
	if ae := appErrorOf(t, err); ae.NonRetryable() || activities.Evidence(ae.Type()) != "" {
		t.Errorf("CHECKDB whose connection was lost and whose end was not seen: %v; want a retryable error that is no evidence", err)
	}
	f.verify.SetThrottle(0)
	err = f.run(f.acts.CheckDB, verify, nil)
	if activities.ErrorType(err) != activities.ErrCheckDBFailed || !strings.Contains(err.Error(), "(1:30)") {
		t.Errorf("CHECKDB run again: %v; want CheckDBFailed naming page (1:30)", err)
	}
	if got := statements(f.verify, "DBCC CHECKDB"); len(got) != 2 {
		t.Errorf("CHECKDB statements %+v; want the one whose connection was lost, then one run again", got)
	}
}

// DBCC CHECKDB raises corruption outside the 8900s too: the system table
// pre-checks (7984-7988, "cannot be repaired", CHECKDB stops at once), a
// failed record check (2537), schema corruption (211, severity 23, here on
// a connection SQL Server keeps open). Each is evidence against the set
// (CheckDBFailed, not retried), never a transient SQLError nor a lost host.
func TestSQLCheckDBErrorFamiliesAreEvidence(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, verify := f.copiedSet()
	f.must(f.acts.Restore, verify, nil)
	for _, n := range []int32{7985, 2537, 211} {
		if err := f.verify.CheckDBError(n); err != nil {
			t.Fatal(err)
		}
		before := len(statements(f.verify, "DBCC CHECKDB"))
		err := f.run(f.acts.CheckDB, verify, nil)
		ae := appErrorOf(t, err)
		if ae.Type() != activities.ErrCheckDBFailed || !ae.NonRetryable() || activities.Evidence(ae.Type()) != "checkdb_failed" ||
			!strings.Contains(err.Error(), fmt.Sprintf("error %d", n)) {
			t.Errorf("CHECKDB raising %d: %v (type %s, non-retryable %v); want non-retryable CheckDBFailed, evidence checkdb_failed, quoting the error",
				n, err, ae.Type(), ae.NonRetryable())
		}
		if got := statements(f.verify, "DBCC CHECKDB")[before:]; len(got) != 1 {
			t.Errorf("CHECKDB raising %d: statements %+v, want exactly one", n, got)
		}
	}
	f.must(f.acts.CheckDB, verify, nil) // the faults were one-shot: the copy is clean
}

// asLogin adds login l to in and runs stmt as l on a connection of its
// own, like aside; the channel gives its outcome.
func (f *sqlFixture) asLogin(in *sqlsim.Instance, instance string, l sqlsim.Login, kind, stmt string) <-chan error {
	f.t.Helper()
	if err := in.SetLogin(l); err != nil {
		f.t.Fatal(err)
	}
	db, err := mssql.Open(context.Background(), mssql.Target{Instance: instance, Address: in.Addr(), User: l.Name,
		Password: l.Password, Encrypt: "disable"})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { db.Close() })
	before := len(statements(in, kind))
	done := make(chan error, 1)
	go func() {
		_, err := db.Run(context.Background(), kind, stmt, nil)
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); len(statements(in, kind)) == before && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	return done
}

// runningCheckDB waits until n CHECKDBs run on in, all held in phase, and
// returns the newest one's record.
func runningCheckDB(t *testing.T, in *sqlsim.Instance, n int, phase string) sqlsim.StatementRecord {
	t.Helper()
	db, err := mssql.Open(context.Background(), mssql.Target{Instance: "verify01", Address: in.Addr(), User: "sa",
		Password: sqlPassword, Encrypt: "disable"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		v, _, err := db.QueryValue(context.Background(), "count held CHECKDBs",
			"SELECT COUNT(*) FROM sys.dm_exec_requests WHERE command = @p1", phase)
		if c, ok := v.(int64); err == nil && ok && c == int64(n) {
			got := statements(in, "DBCC CHECKDB")
			return got[len(got)-1]
		}
	}
	t.Fatalf("%d CHECKDBs held in %s never showed in sys.dm_exec_requests (statements %+v)", n, phase, statements(in, "DBCC CHECKDB"))
	return sqlsim.StatementRecord{}
}

// A cancelled or failed cycle stops its own CHECKDB and nothing else: a
// DBA's DBCC CHECKDB of the same copy (another login, PHYSICAL_ONLY), a
// batch of the product's own login that merely contains the product's
// statement, and a session of another login running that very statement
// all run on. (Held in TABLE CHECK, the phase the product used to look
// for.)
func TestSQLStopStatementsLeavesOtherCheckDBsAlone(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	seq, verify := f.copiedSet()
	var restored activities.StepOutput
	f.must(f.acts.Restore, verify, &restored)
	release, err := f.verify.HoldCheckDB(sqlsim.PhaseTableCheck)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ours := make(chan error, 1)
	go func() { ours <- f.run(f.acts.CheckDB, verify, nil) }()
	text := runningCheckDB(t, f.verify, 1, sqlsim.PhaseTableCheck).SQL

	dba := sqlsim.Login{Name: "dba", Password: sqlPassword, Sysadmin: true}
	others := map[string]<-chan error{
		"PHYSICAL_ONLY of another login": f.asLogin(f.verify, "verify01", dba, "DBCC CHECKDB",
			"DBCC CHECKDB(["+restored.VerifyDatabase+"]) WITH PHYSICAL_ONLY"),
		"a batch that contains the statement": f.aside(f.verify, "verify01", "DBCC CHECKDB", "SELECT 1;\n"+text),
		"the statement, run by another login": f.asLogin(f.verify, "verify01",
			sqlsim.Login{Name: "dba2", Password: sqlPassword, Sysadmin: true}, "DBCC CHECKDB", text),
	}
	runningCheckDB(t, f.verify, 4, sqlsim.PhaseTableCheck)

	var out activities.StopOutput
	f.must(f.acts.StopStatements, activities.StopInput{Database: "Sales", Sequence: seq, Remote: verify.Server}, &out)
	if len(out.Stopped) != 1 || len(out.Left) != 0 {
		t.Errorf("stopped %v, left %v; want the cycle's own CHECKDB alone stopped", out.Stopped, out.Left)
	}
	if err := <-ours; err == nil {
		t.Error("the stopped CHECKDB's step succeeded")
	}
	release()
	for what, done := range others {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v; want it left to run to its end", what, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not end after the hold was released", what)
		}
	}
}
