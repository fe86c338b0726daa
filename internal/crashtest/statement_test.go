package crashtest

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
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
