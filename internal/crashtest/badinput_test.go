package crashtest

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	starter "github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

const smallDB = 4 << 20

// badInput runs a cycle that must fail: a clean cycle first when withGood
// (an earlier verified set whose files must not change), then break(),
// then the failing cycle. It checks the error type, the message parts,
// and that the failed cycle's sequence is nowhere marked copied/verified.
type badInput struct {
	t        *testing.T
	s        *site
	good     *workflows.CycleResult
	hashes   map[string][32]byte
	progress workflows.Progress
	took     time.Duration
	err      error
}

func runBad(t *testing.T, s *site, withGood bool, breakIt func(), wantType string, wantMsg ...string) *badInput {
	t.Helper()
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s.inProcessWorker(c)
	b := &badInput{t: t, s: s}
	if withGood {
		res, err := wait(t, s.start(c, s.tq+"-good"), 2*time.Minute)
		if err != nil {
			t.Fatalf("clean cycle before the bad input: %v", err)
		}
		b.good = &res
		b.hashes = s.hashes()
	}
	if breakIt != nil {
		breakIt()
	}
	start := time.Now()
	run := s.start(c, s.tq+"-bad")
	_, err := wait(t, run, 3*time.Minute)
	b.took = time.Since(start)
	b.err = err
	record(t, history(t, c, run).events, "bad_"+strings.ToLower(strings.TrimPrefix(s.tq, "crash-TestBadInput")))
	if err == nil {
		t.Fatalf("cycle with bad input succeeded, want %s", wantType)
	}
	if got := errorType(err); got != wantType {
		t.Errorf("error type %q, want %q: %v", got, wantType, err)
	}
	for _, m := range wantMsg {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q does not name %q", err.Error(), m)
		}
	}
	b.progress, _ = progress(c, run)
	if b.progress.Outcome != workflows.OutcomeFailed {
		t.Errorf("progress after the failure: %+v, want outcome failed", b.progress)
	}
	// Nothing half-written counts as good: no manifest of a sequence after
	// the good one is copied or verified on any server.
	next := int64(1)
	if b.good != nil {
		next = b.good.Sequence + 1
		if bad := unchanged(b.hashes, s.hashes()); len(bad) > 0 {
			t.Errorf("files of the earlier verified set changed: %v", bad)
		}
		for _, srv := range []string{b.good.Server, b.good.Remote} {
			if m := s.manifest(srv, b.good.Sequence); m == nil || m.State != catalog.StateVerified {
				t.Errorf("earlier set on %s: %+v, want still verified", srv, m)
			}
		}
	}
	for seq := next; seq < next+3; seq++ {
		for _, srv := range []string{"bak01", "bak02"} {
			if m := s.manifest(srv, seq); m != nil && m.State != catalog.StateFailed && m.State != catalog.StateWritten {
				t.Errorf("seq %d on %s is %s after a failed cycle, want failed (or no manifest)", seq, srv, m.State)
			}
		}
	}
	t.Logf("BADINPUT | %s | %v | %.1fs", t.Name(), err, b.took.Seconds())
	return b
}

// The configured database does not exist on its instance.
func TestBadInputUnknownDatabase(t *testing.T) {
	s := newSite(t, "Sales", smallDB, "")
	if err := s.src.CreateDatabase(sqlsim.DatabaseSpec{Name: "Other", Size: smallDB}); err != nil {
		t.Fatal(err)
	}
	// Configure a database the instance does not have.
	s.reconfigure(func(y string) string { return strings.Replace(y, `name: "Sales"`, `name: "Salez"`, 1) }, "Salez")
	runBad(t, s, false, nil, activities.ErrDatabaseNotFound, "'Salez'", "sql01", "check the database name")
	if n := len(statements(s.src, "BACKUP DATABASE")); n != 0 {
		t.Errorf("BACKUP ran %d times for a database that does not exist", n)
	}
}

// The password the instance's password_env points to is wrong.
func TestBadInputLoginFailed(t *testing.T) {
	s := newSite(t, "Sales", smallDB, "")
	b := runBad(t, s, true, func() { t.Setenv(envSQLPass, "not-the-password") },
		activities.ErrLoginFailed, "sa", "check the user and the password reference")
	// The secret itself never reaches the error.
	if msg := b.err.Error() + b.progress.Error; strings.Contains(msg, "not-the-password") || strings.Contains(msg, sqlPassword) {
		t.Errorf("a password leaked into the cycle's error: %s", msg)
	}
}

// The SQL host is down when the cycle starts: the cycle waits (bounded by
// sql_host_wait, shown as waiting-for-sql-host) and then fails.
func TestBadInputSQLHostUnreachable(t *testing.T) {
	s := newSite(t, "Sales", smallDB, `    sql_host_wait:
      initial: 1s
      max_interval: 2s
      give_up_after: 6s
`)
	// Watch for the wait step while the failing cycle runs.
	c := dial(t, sharedTemporal(t))
	var waited atomic.Bool
	done := make(chan struct{})
	watched := make(chan struct{})
	b := runBad(t, s, true, func() {
		if err := s.src.Stop(); err != nil {
			t.Fatal(err)
		}
		go func() {
			defer close(watched)
			for !waited.Load() {
				run := c.GetWorkflow(context.Background(), workflows.CycleWorkflowID(s.inst, s.db), "")
				if p, err := progress(c, run); err == nil && p.Step == activities.StepWaitingForSQLHost {
					waited.Store(true)
				}
				select {
				case <-done:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}, activities.ErrSQLHostUnreachable, "sql01")
	close(done)
	<-watched
	if !waited.Load() {
		t.Errorf("the cycle never showed step %s", activities.StepWaitingForSQLHost)
	}
	// Bounded: give_up_after 6 s of waits plus the attempts themselves.
	if b.took < 6*time.Second {
		t.Errorf("cycle gave up after %s, before its sql_host_wait of 6s", b.took)
	}
}

// The worker's location of a backup server does not exist.
func TestBadInputSharePathMissing(t *testing.T) {
	s := newSite(t, "Sales", smallDB, "")
	missing := s.dirs["bak01"] + "-missing"
	s.reconfigure(func(y string) string {
		return strings.Replace(y, "location: "+s.dirs["bak01"]+"\n", "location: "+missing+"\n", 1)
	}, "Sales")
	runBad(t, s, false, nil, activities.ErrInvalidConfig, "bak01", missing)
}

// The primary backup server's share is full: ShareFull, the set is marked
// failed, the earlier verified set is untouched.
func TestBadInputShareFull(t *testing.T) {
	s := newSite(t, "Sales", smallDB, "")
	// The second cycle's primary is bak02: give it 1 MiB left.
	runBad(t, s, true, func() { s.src.SetShareQuota(`\\bak02\backup`, 1<<20) },
		activities.ErrShareFull, "free space on the backup share")
}

// Limits SQL Server enforces are refused when the configuration loads,
// with the key, the value and the fix.
func TestBadInputConfigLimits(t *testing.T) {
	s := newSite(t, "Sales", smallDB, "")
	base, err := os.ReadFile(s.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"stripes above 64", "    stripes: 65\n", []string{"stripes", "65", "64"}},
		{"memory budget", "    buffer_count: 128\n    max_transfer_size: 4MiB\n    memory_budget: 256MiB\n",
			[]string{"BUFFERCOUNT 128", "MAXTRANSFERSIZE 4MiB", "exceeds memory_budget 256MiB", "lower buffer_count"}},
		{"max transfer not a multiple of 64KiB", "    max_transfer_size: 100KiB\n", []string{"max_transfer_size", "not a multiple of 64KiB"}},
		{"max transfer above 4MiB", "    max_transfer_size: 8MiB\n", []string{"max_transfer_size", "above 4MiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := string(base) + tc.yaml
			if strings.Contains(tc.yaml, "stripes") {
				y = strings.Replace(string(base), "    stripes: 2\n", "", 1) + tc.yaml
			}
			_, err := config.Parse([]byte(y), "limits.yaml")
			if err == nil {
				t.Fatalf("config with %q loaded", tc.yaml)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), "limits.yaml") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

// A configuration that bypassed loading (built in code) with the same
// limits broken: the cycle refuses it before any SQL runs.
func TestBadInputConfigLimitsAtRuntime(t *testing.T) {
	for _, tc := range []struct {
		name, typ string
		set       func(p *config.Policy)
	}{
		{"stripes above 64", activities.ErrInvalidConfig, func(p *config.Policy) { p.Stripes = 65 }},
		{"memory budget", activities.ErrInsufficientMemory, func(p *config.Policy) {
			p.BufferCount, p.MaxTransferSize, p.MemoryBudget = 128, 4<<20, 256<<20
		}},
		{"max transfer not a multiple of 64KiB", activities.ErrInvalidConfig, func(p *config.Policy) { p.MaxTransferSize = 100 << 10 }},
		{"max transfer above 4MiB", activities.ErrInvalidConfig, func(p *config.Policy) { p.MaxTransferSize = 8 << 20 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSite(t, "Sales", smallDB, "")
			tc.set(&s.cfg.Databases[0].Policy)
			runBad(t, s, false, nil, tc.typ)
			if n := len(statements(s.src, "BACKUP DATABASE")); n != 0 {
				t.Errorf("BACKUP ran %d times with a configuration SQL Server refuses", n)
			}
		})
	}
}

// Two cycles of one database started at once through the starter client:
// the workflow id per database makes Temporal reject the second while the
// first runs; once it finished, the next cycle starts.
func TestBadInputTwoCyclesAtOnce(t *testing.T) {
	// Its own database name: the workflow id is per database, and the
	// server is shared with the other scenarios.
	s := newSite(t, "Twice", smallDB, "")
	s.src.SetThrottle(1 << 20) // the first is still running when the second starts
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s.inProcessWorker(c)
	sc := starter.New(c, config.Temporal{Address: srv.FrontendAddress(), Namespace: srv.Namespace(), TaskQueue: s.tq}, zap.NewNop())
	first, err := sc.StartCycle(context.Background(), workflows.CycleInput{Database: s.db})
	if err != nil {
		t.Fatalf("first cycle: %v", err)
	}
	second, err := sc.StartCycle(context.Background(), workflows.CycleInput{Database: s.db})
	var running *starter.AlreadyRunningError
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case err == nil:
		_, err1 := wait(t, first, 3*time.Minute)
		_, err2 := wait(t, second, 3*time.Minute)
		t.Errorf("two cycles of %s started at once both ran (%s: %v; %s: %v): the workflow id must be per database",
			s.db, first.GetID(), err1, second.GetID(), err2)
		return
	case !errors.As(err, &running) || !errors.As(err, &started) || running.WorkflowID != first.GetID():
		t.Errorf("second start: %v, want AlreadyRunningError wrapping WorkflowExecutionAlreadyStarted for %s", err, first.GetID())
	case !strings.Contains(err.Error(), s.db) || !strings.Contains(err.Error(), "already running") ||
		!strings.Contains(err.Error(), "wait for it to finish"):
		t.Errorf("second start: %q, want the database, \"already running\" and the fix", err)
	}
	res, err := wait(t, first, 3*time.Minute)
	if err != nil {
		t.Fatalf("first cycle: %v", err)
	}
	if n := len(statements(s.src, "BACKUP DATABASE")); n != 1 {
		t.Errorf("BACKUP ran %d times, want once: the rejected start must not run", n)
	}
	// A finished cycle does not block the next one.
	s.src.SetThrottle(0)
	next, err := sc.StartCycle(context.Background(), workflows.CycleInput{Database: s.db})
	if err != nil {
		t.Fatalf("cycle after the first finished: %v", err)
	}
	if res2, err := wait(t, next, 3*time.Minute); err != nil || res2.Sequence != res.Sequence+1 {
		t.Errorf("next cycle: seq %d, %v; want seq %d verified", res2.Sequence, err, res.Sequence+1)
	}
}
