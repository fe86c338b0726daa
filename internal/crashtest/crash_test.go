package crashtest

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/workflows"
)

const (
	dbSize    = 24 << 20
	copyChunk = 4 << 20 // the copier's default chunk
	stripes   = 2
)

// The cycle's activities that succeed exactly once in a clean run.
var onceSteps = []string{"PlanCycle", "AllocateSequence", "Backup", "WriteManifest", "CopyToRemote", "Restore",
	"CheckDB", "SanityChecks", "MarkVerified"}

// statementCounts snapshots the emulators' logs so a scenario can look at
// what the crashed cycle alone ran.
type statementCounts map[string]int

func (s *site) counts() statementCounts {
	return statementCounts{
		"BACKUP DATABASE":  len(statements(s.src, "BACKUP DATABASE")),
		"RESTORE DATABASE": len(statements(s.verify, "RESTORE DATABASE")),
		"DBCC CHECKDB":     len(statements(s.verify, "DBCC CHECKDB")),
	}
}

// since returns the outcomes of kind's statements started after c.
func (s *site) since(c statementCounts, kind string) []string {
	in := s.verify
	if kind == "BACKUP DATABASE" {
		in = s.src
	}
	return outcomes(in, kind)[c[kind]:]
}

// crashRun is one measured scenario: a clean cycle first (the reference
// time and the earlier verified set), then the cycle that suffers the crash.
type crashRun struct {
	clean, crashed   workflows.CycleResult
	cleanTook, took  time.Duration
	killedAt         workflows.Progress
	runs             activityRuns
	before           statementCounts
	hashesBefore     map[string][32]byte
	crashedStep      string
	resent           int64
	crashedStatement string
}

// runClean runs the scenario's clean cycle (the reference for recovery time
// and the earlier set whose files must not change) and records it.
func (r *crashRun) runClean(t *testing.T, s *site, c client.Client) {
	t.Helper()
	start := time.Now()
	var err error
	r.clean, err = wait(t, s.start(c, s.tq+"-clean"), 3*time.Minute)
	if err != nil {
		t.Fatalf("clean cycle: %v", err)
	}
	r.cleanTook = time.Since(start)
	r.hashesBefore, r.before = s.hashes(), s.counts()
}

// checkCrashRun asserts what every crash scenario promises: the cycle
// completes verified with the next sequence, nothing failed, the earlier
// set's files are unchanged, and only the crashed step ran twice.
func checkCrashRun(t *testing.T, s *site, r *crashRun) {
	t.Helper()
	if r.crashed.Sequence != r.clean.Sequence+1 || len(r.crashed.Failed) != 0 {
		t.Errorf("crashed cycle: seq %d failed %v; want seq %d verified, no set failed", r.crashed.Sequence, r.crashed.Failed, r.clean.Sequence+1)
	}
	for _, srv := range []string{r.crashed.Server, r.crashed.Remote} {
		if m := s.manifest(srv, r.crashed.Sequence); m == nil || m.State != catalog.StateVerified {
			t.Errorf("manifest of seq %d on %s: %+v, want verified", r.crashed.Sequence, srv, m)
		}
		if m := s.manifest(srv, r.clean.Sequence); m == nil || m.State != catalog.StateVerified {
			t.Errorf("earlier set seq %d on %s: %+v, want still verified", r.clean.Sequence, srv, m)
		}
	}
	if bad := unchanged(r.hashesBefore, s.hashes()); len(bad) > 0 || len(r.hashesBefore) < 2*(stripes+1) {
		t.Errorf("earlier set's files changed or gone: %v (of %d)", bad, len(r.hashesBefore))
	}
	for _, name := range onceSteps {
		want := 1
		if name == r.crashedStep {
			want = 2
		}
		got := r.runs.started[name]
		if name == r.crashedStep && got > want {
			// More attempts of the crashed step are Temporal retrying (a hung
			// worker still holding open polls is handed the retry too; a
			// heartbeat late on a loaded machine): each
			// re-attaches, and the statement count below is what proves
			// nothing ran twice.
			t.Logf("%s: %d attempts", name, got)
			got = want
		}
		if r.runs.completed[name] != 1 || got != want {
			t.Errorf("%s: %d attempts, %d completions; want %d attempts, 1 completion (attempts %v)",
				name, r.runs.started[name], r.runs.completed[name], want, r.runs.started)
		}
	}
	if r.runs.completed["MarkFailed"] != 0 {
		t.Errorf("MarkFailed ran %d times: a worker crash must not fail the set", r.runs.completed["MarkFailed"])
	}
	t.Logf("statements of the crashed cycle: BACKUP %v, RESTORE %v, CHECKDB %v", s.since(r.before, "BACKUP DATABASE"),
		s.since(r.before, "RESTORE DATABASE"), s.since(r.before, "DBCC CHECKDB"))
	// The emulators' logs: exactly one successful statement of each kind,
	// and only the crashed step's statement may have a second try.
	for _, kind := range []string{"BACKUP DATABASE", "RESTORE DATABASE", "DBCC CHECKDB"} {
		got := s.since(r.before, kind)
		ok := 0
		for _, o := range got {
			if o == "ok" {
				ok++
			}
		}
		if ok != 1 || (kind != r.crashedStatement && len(got) != 1) {
			t.Errorf("%s in the crashed cycle: %v, want one successful statement (a retry only for the crashed step)", kind, got)
		}
	}
}

// TestWorkerCrashAtStep kills the worker process (SIGKILL) in the middle of
// a step, starts a new one, and checks the cycle completes without redoing
// any step that had succeeded; the copy resumes from its checkpoints.
func TestWorkerCrashAtStep(t *testing.T) {
	cases := []struct {
		name, step, activity, statement string
		// limit is every backup server's bandwidth_limit: a copy slow enough to interrupt.
		limit string
		// freeze hangs the worker instead of killing it: its statement
		// keeps running on the SQL instance and the retry re-attaches.
		freeze bool
		// slow holds the step open long enough to kill the worker in it.
		slow func(s *site)
		// in reports that the cycle is far enough into the step.
		in func(s *site, p workflows.Progress) bool
	}{
		{step: activities.StepBackup, activity: "Backup", statement: "BACKUP DATABASE",
			slow: func(s *site) { s.src.SetThrottle(2 << 20) },
			in: func(s *site, p workflows.Progress) bool {
				return p.Step == activities.StepBackup && p.Percent >= 30 && running(s.src, "BACKUP DATABASE")
			}},
		{name: "backup-hung", step: activities.StepBackup, activity: "Backup", freeze: true,
			slow: func(s *site) { s.src.SetThrottle(1 << 20) },
			in: func(s *site, p workflows.Progress) bool {
				return p.Step == activities.StepBackup && p.Percent >= 20 && running(s.src, "BACKUP DATABASE")
			}},
		{step: activities.StepCopy, activity: "CopyToRemote", limit: "2MiB",
			slow: func(*site) {},
			in: func(s *site, p workflows.Progress) bool {
				return p.Step == activities.StepCopy && p.Percent >= 60
			}},
		{step: activities.StepRestore, activity: "Restore", statement: "RESTORE DATABASE",
			slow: func(s *site) { s.verify.SetThrottle(2 << 20) },
			in: func(s *site, p workflows.Progress) bool {
				return p.Step == activities.StepRestore && p.Percent >= 30 && running(s.verify, "RESTORE DATABASE")
			}},
		{step: activities.StepCheckDB, activity: "CheckDB", statement: "DBCC CHECKDB",
			slow: func(s *site) { s.verify.SetThrottle(2 << 20) },
			in: func(s *site, p workflows.Progress) bool {
				return p.Step == activities.StepCheckDB && running(s.verify, "DBCC CHECKDB")
			}},
	}
	srv := sharedTemporal(t)
	for _, tc := range cases {
		if tc.name == "" {
			tc.name = tc.step
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := dial(t, srv)
			s := newSite(t, "Sales", dbSize, "", bandwidth(tc.limit))
			tc.slow(s)
			w := s.startWorkerProcess(srv.FrontendAddress())
			r := &crashRun{crashedStep: tc.activity, crashedStatement: tc.statement}

			r.runClean(t, s, c)

			start := time.Now()
			run := s.start(c, s.tq+"-crash")
			until(t, "the cycle to be in step "+tc.step, 3*time.Minute, func() bool {
				p, err := progress(c, run)
				r.killedAt = p
				return err == nil && tc.in(s, p)
			})
			if tc.freeze {
				w.freeze()
			} else {
				w.kill()
			}
			t.Logf("worker %s in step %s at %.0f %% (%d bytes confirmed)", map[bool]string{false: "killed", true: "hung"}[tc.freeze], r.killedAt.Step, r.killedAt.Percent,
				r.killedAt.Bytes)
			s.startWorkerProcess(srv.FrontendAddress())
			var err error
			r.crashed, err = wait(t, run, 5*time.Minute)
			if err != nil {
				t.Fatalf("cycle after the worker crash: %v", err)
			}
			r.took = time.Since(start)
			r.runs = history(t, c, run)
			record(t, r.runs.events, "worker_crash_"+tc.name)
			checkCrashRun(t, s, r)

			if tc.step == activities.StepCopy {
				out := r.runs.copyOut
				// Bytes sent again: what all attempts sent beyond the set's
				// size (the copier extends each file to its final size
				// before writing, so the files' sizes no longer tell how far
				// the killed attempt got); and at least what the kill's
				// progress had confirmed beyond where the new attempt resumed.
				r.resent = max(out.Resent, r.killedAt.Bytes-out.Resumed)
				// The new attempt resumes from the last checkpoint that
				// reached Temporal: at most one heartbeat interval (1 s at
				// the 2 MiB/s limit) plus one unconfirmed chunk per stripe
				// behind the kill.
				bound := int64(stripes*copyChunk + 2<<20)
				if out.Resumed == 0 || out.Sent+out.Resumed != out.Bytes || r.resent > bound {
					t.Errorf("copy after the crash: %+v, killed at %d bytes, re-sent %d; want a resumed copy re-sending at most %d",
						out, r.killedAt.Bytes, r.resent, bound)
				}
			}
			if tc.freeze && !r.runs.backupOut.Reattached {
				t.Errorf("backup after the hung worker: %+v, want the retry re-attached to the running BACKUP", r.runs.backupOut)
			}
			how := "worker killed in "
			if tc.freeze {
				how = "worker hung in "
			}
			report(t, how+tc.step, r)
		})
	}
}

// TestTemporalServerRestart stops the worker and the embedded server in the
// middle of BACKUP, starts the server again on the same SQLite file and a
// new worker: the cycle completes as if nothing happened.
func TestTemporalServerRestart(t *testing.T) {
	dbFile := filepath.Join(t.TempDir(), "temporal.db")
	port := freePort(t)
	startServer := func() *devserver.Server { return persistentServer(t, dbFile, port) }
	srv := startServer()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = srv.Stop()
		}
	})
	c := dial(t, srv)
	s := newSite(t, "Sales", dbSize, "")
	s.src.SetThrottle(2 << 20)
	w := s.startWorkerProcess(srv.FrontendAddress())
	r := &crashRun{crashedStep: "Backup", crashedStatement: "BACKUP DATABASE"}

	r.runClean(t, s, c)

	start := time.Now()
	run := s.start(c, s.tq+"-restart")
	until(t, "the cycle to be in BACKUP", 3*time.Minute, func() bool {
		p, err := progress(c, run)
		r.killedAt = p
		return err == nil && p.Step == activities.StepBackup && p.Percent >= 30 && running(s.src, "BACKUP DATABASE")
	})
	w.kill()
	if err := srv.Stop(); err != nil {
		t.Fatalf("stop the embedded server: %v", err)
	}
	stopped = true
	c.Close()
	t.Logf("worker and server stopped in step %s at %.0f %%", r.killedAt.Step, r.killedAt.Percent)

	srv = startServer()
	stopped = false
	c = dial(t, srv)
	s.startWorkerProcess(srv.FrontendAddress())
	run = c.GetWorkflow(context.Background(), run.GetID(), run.GetRunID())
	var err error
	r.crashed, err = wait(t, run, 5*time.Minute)
	if err != nil {
		t.Fatalf("cycle after the server restart: %v", err)
	}
	r.took = time.Since(start)
	r.runs = history(t, c, run)
	record(t, r.runs.events, "server_restart")
	checkCrashRun(t, s, r)
	report(t, "Temporal server restarted in backup", r)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	n, _ := strconv.Atoi(p)
	return n
}

// report logs the scenario's row of the recovery table (go test -v).
func report(t *testing.T, scenario string, r *crashRun) {
	t.Logf("RECOVERY | %s | verified | seq %d verified (clean run seq %d) | clean %.1fs, crashed %.1fs, extra %.1fs | re-sent %d bytes",
		scenario, r.crashed.Sequence, r.clean.Sequence, r.cleanTook.Seconds(), r.took.Seconds(),
		(r.took - r.cleanTook).Seconds(), r.resent)
}

// persistentServer starts the embedded Temporal server on a SQLite file and
// a fixed port, so that it can be stopped and started again with its state.
func persistentServer(t *testing.T, dbFile string, port int) *devserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{DBFile: dbFile, FrontendPort: port, UIPort: devserver.NoUI,
		SearchAttributes: workflows.SearchAttributeTypes})
	if err != nil {
		t.Fatalf("embedded Temporal server on %s: %v", dbFile, err)
	}
	return srv
}
