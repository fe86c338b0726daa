package crashtest

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/worker"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/workflows"
)

// stop is a deploy: SIGTERM, the worker stops gracefully (its activities'
// contexts are cancelled after WorkerStopTimeout) and exits.
func (p *workerProcess) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatal("worker did not stop within a minute of SIGTERM")
	}
}

// A worker restarted (deploy) in the middle of a RESTORE leaves the RESTORE
// running on the verification instance; the retry on the new worker
// re-attaches to it: one RESTORE statement executed, not two, and the set is
// verified.
func TestWorkerRestartDuringRestore(t *testing.T) {
	t.Parallel()
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s := newSite(t, "Sales", dbSize, "")
	s.verify.SetThrottle(2 << 20)
	w := s.startWorkerProcess(srv.FrontendAddress())

	run := s.start(c, s.tq+"-deploy")
	until(t, "the cycle to be in RESTORE", 3*time.Minute, func() bool {
		p, err := progress(c, run)
		return err == nil && p.Step == activities.StepRestore && running(s.verify, "RESTORE DATABASE")
	})
	w.stop(t)
	if !running(s.verify, "RESTORE DATABASE") {
		t.Fatalf("RESTORE no longer running after the worker stopped: %v; a worker stop must leave it running",
			outcomes(s.verify, "RESTORE DATABASE"))
	}
	s.startWorkerProcess(srv.FrontendAddress())
	res, err := wait(t, run, 5*time.Minute)
	if err != nil {
		t.Fatalf("cycle after the worker restart: %v", err)
	}
	if got := outcomes(s.verify, "RESTORE DATABASE"); len(got) != 1 || got[0] != "ok" {
		t.Errorf("RESTORE statements on the verification instance: %v; want exactly one, ok", got)
	}
	if m := s.manifest(res.Remote, res.Sequence); m == nil || m.State != catalog.StateVerified {
		t.Errorf("set %d on %s: %+v, want verified", res.Sequence, res.Remote, m)
	}
	// The restart must have cost an attempt that the next one followed up
	// (else the test proved nothing about re-attaching).
	runs := history(t, c, run)
	if runs.started["Restore"] < 2 || runs.completed["Restore"] != 1 {
		t.Errorf("Restore: %d attempts, %d completions; want a second attempt (after the restart) that completed",
			runs.started["Restore"], runs.completed["Restore"])
	}
	t.Logf("restore attempts started %d, failed %d; RESTORE statements %v", runs.started["Restore"], runs.failed["Restore"], outcomes(s.verify, "RESTORE DATABASE"))
}

// Temporal unreachable (the worker alive) for longer than the heartbeat
// timeout in the middle of a BACKUP: the attempt is timed out and its
// context cancelled, but the BACKUP runs on, and the next attempt attaches
// to it: one BACKUP statement, the set verified.
func TestTemporalAwayDuringBackup(t *testing.T) {
	dbFile := filepath.Join(t.TempDir(), "temporal.db")
	port := freePort(t)
	srv := persistentServer(t, dbFile, port)
	t.Cleanup(func() { _ = srv.Stop() })
	c := dial(t, srv)
	s := newSite(t, "Sales", 4*dbSize, "")
	s.src.SetThrottle(2 << 20) // ~48 s of BACKUP
	w := worker.New(c, s.tq, workerOptions())
	workflows.Register(w, newActivities(s.cfg, c))
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	run := s.start(c, s.tq+"-away")
	until(t, "the cycle to be in BACKUP", 3*time.Minute, func() bool {
		p, err := progress(c, run)
		return err == nil && p.Step == activities.StepBackup && p.Percent >= 10 && running(s.src, "BACKUP DATABASE")
	})
	if err := srv.Stop(); err != nil {
		t.Fatalf("stop the embedded server: %v", err)
	}
	away := 3 * heartbeatTimeout
	t.Logf("Temporal stopped for %s (heartbeat timeout %s), the worker stays up", away, heartbeatTimeout)
	time.Sleep(away)
	if !running(s.src, "BACKUP DATABASE") {
		t.Errorf("BACKUP no longer running while Temporal was away: %v", outcomes(s.src, "BACKUP DATABASE"))
	}
	srv = persistentServer(t, dbFile, port)
	run = c.GetWorkflow(context.Background(), run.GetID(), run.GetRunID())
	res, err := wait(t, run, 5*time.Minute)
	if err != nil {
		t.Fatalf("cycle after Temporal came back: %v", err)
	}
	if got := outcomes(s.src, "BACKUP DATABASE"); len(got) != 1 || got[0] != "ok" {
		t.Errorf("BACKUP statements on the source: %v; want exactly one, ok", got)
	}
	if m := s.manifest(res.Server, res.Sequence); m == nil || m.State != catalog.StateVerified {
		t.Errorf("set %d on %s: %+v, want verified", res.Sequence, res.Server, m)
	}
	// The heartbeat timeout must have ended the first attempt, and the
	// next one attached to its BACKUP.
	runs := history(t, c, run)
	if runs.started["Backup"] < 2 || runs.completed["Backup"] != 1 {
		t.Errorf("Backup: %d attempts, %d completions; want a second attempt (after the heartbeat timeout) that completed",
			runs.started["Backup"], runs.completed["Backup"])
	}
}

// heldInPhase counts the requests of in whose command is phase.
func heldInPhase(t *testing.T, in *sqlsim.Instance, phase string) int64 {
	t.Helper()
	db := openSQL(t, in)
	defer db.Close()
	var n int64
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM sys.dm_exec_requests WHERE command = @p1", phase).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// runAs adds login l to in (sysadmin) and runs stmt as l on a connection of
// its own until it ends; it returns the statement's session once it runs,
// and its outcome on the channel.
func runAs(t *testing.T, in *sqlsim.Instance, login, stmt string) (int, <-chan error) {
	t.Helper()
	if login != "sa" {
		if err := in.SetLogin(sqlsim.Login{Name: login, Password: sqlPassword, Sysadmin: true}); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlserver", in.DSN(login, sqlPassword, "master"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	before := len(statements(in, "DBCC CHECKDB"))
	done := make(chan error, 1)
	go func() {
		_, err := db.ExecContext(context.Background(), stmt)
		done <- err
	}()
	until(t, login+"'s CHECKDB to run", 10*time.Second, func() bool { return len(statements(in, "DBCC CHECKDB")) > before })
	got := statements(in, "DBCC CHECKDB")
	return got[len(got)-1].Session, done
}

// A worker stopped (deploy) while the cycle's CHECKDB is in its last phase,
// DBCC IVIEW CHECK (long with EXTENDED_LOGICAL_CHECKS on a large database):
// the retry on the new worker finds it on the instance and waits for it,
// whatever its phase. Exactly one CHECKDB of the cycle runs. Other
// CHECKDBs of the same copy are neither adopted nor killed: a DBA's DBCC
// CHECKDB ... WITH PHYSICAL_ONLY, a batch of the product's own login that
// merely contains the product's statement, and that very statement run by
// another login.
func TestWorkerRestartDuringCheckDBLastPhase(t *testing.T) {
	t.Parallel()
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s := newSite(t, "Sales", dbSize, "")
	release, err := s.verify.HoldCheckDB(sqlsim.PhaseIViewCheck)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	w := s.startWorkerProcess(srv.FrontendAddress())

	run := s.start(c, s.tq+"-iview")
	until(t, "the cycle's CHECKDB to be in DBCC IVIEW CHECK", 3*time.Minute, func() bool {
		return heldInPhase(t, s.verify, sqlsim.PhaseIViewCheck) == 1
	})
	ours := statements(s.verify, "DBCC CHECKDB")[0]
	others := map[string]<-chan error{}
	var otherSessions []int
	for _, o := range []struct{ what, login, stmt string }{
		{"a DBA's PHYSICAL_ONLY", "dba", "DBCC CHECKDB([" + ours.Database + "]) WITH PHYSICAL_ONLY"},
		{"a batch of the product's login containing its statement", "sa", "SELECT 1;\n" + ours.SQL},
		{"the product's statement run by another login", "dba2", ours.SQL},
	} {
		session, done := runAs(t, s.verify, o.login, o.stmt)
		others[o.what] = done
		otherSessions = append(otherSessions, session)
	}
	until(t, "four CHECKDBs held in DBCC IVIEW CHECK", time.Minute, func() bool {
		return heldInPhase(t, s.verify, sqlsim.PhaseIViewCheck) == 4
	})

	w.stop(t)
	s.startWorkerProcess(srv.FrontendAddress())
	until(t, "the retry of CheckDB on the new worker", 2*time.Minute, func() bool {
		d, err := c.DescribeWorkflowExecution(context.Background(), run.GetID(), run.GetRunID())
		if err != nil {
			return false
		}
		for _, a := range d.GetPendingActivities() {
			if a.GetActivityType().GetName() == "CheckDB" && a.GetAttempt() >= 2 &&
				a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
				return true
			}
		}
		return false
	})
	// Room for a retry that missed the running CHECKDB to send another
	// (held too): a few of the worker's polls.
	time.Sleep(2 * time.Second)
	release()
	res, err := wait(t, run, 3*time.Minute)
	if err != nil {
		t.Fatalf("cycle after the worker restart: %v", err)
	}
	if m := s.manifest(res.Remote, res.Sequence); m == nil || m.State != catalog.StateVerified {
		t.Errorf("set %d on %s: %+v, want verified", res.Sequence, res.Remote, m)
	}
	var product []sqlsim.StatementRecord
	for _, st := range statements(s.verify, "DBCC CHECKDB") {
		if !slices.Contains(otherSessions, st.Session) {
			product = append(product, st)
		}
	}
	if len(product) != 1 || product[0].Outcome != "ok" {
		t.Errorf("the cycle's CHECKDBs: %+v; want exactly one, ok", product)
	}
	for what, done := range others {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v; want it left alone to its end", what, err)
			}
		case <-time.After(time.Minute):
			t.Errorf("%s did not end", what)
		}
	}
}
