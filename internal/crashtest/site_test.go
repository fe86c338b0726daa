// Package crashtest proves the crash table and the bad-input rows of the
// backup cycle end to end: the BackupCycle workflow on the embedded Temporal
// server, its activities on a real worker (a separate process where a crash
// must be real), two emulated SQL Server instances over TDS and two backup
// servers SQL Server reaches by UNC path.
package crashtest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/workerhost"
	"github.com/backupcycle/backupcycle/workflows"
)

const sqlPassword = sitetest.Password

// Environment of the worker process (see TestMain).
const (
	envWorker    = "BC_CRASHTEST_WORKER" // "1" turns the test binary into a worker
	envConfig    = "BC_CRASHTEST_CONFIG"
	envFrontend  = "BC_CRASHTEST_FRONTEND"
	envTaskQueue = "BC_CRASHTEST_TASK_QUEUE"
	envSQLPass   = sitetest.PasswordEnv
)

var quiet = sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

func TestMain(m *testing.M) {
	// The crash scenarios kill a worker with SIGKILL: it runs as a child
	// process, which is this test binary started again in worker mode.
	if os.Getenv(envWorker) == "1" {
		if err := runWorkerProcess(); err != nil {
			fmt.Fprintln(os.Stderr, "crashtest worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// Set once here: parallel tests cannot use t.Setenv.
	os.Setenv(envSQLPass, sqlPassword)
	code := m.Run()
	if sharedSrv != nil {
		_ = sharedSrv.Stop()
	}
	os.Exit(code)
}

// workerOptions are the production worker's (worker/run.go) plus a short
// heartbeat throttle: the SDK otherwise sends a heartbeat's details at most
// every 0.8 x HeartbeatTimeout (48 s for the cycle's 1 min), and a process
// killed in between loses the copy checkpoints recorded since.
func workerOptions() worker.Options {
	return worker.Options{
		WorkerStopTimeout:            10 * time.Second,
		MaxHeartbeatThrottleInterval: time.Second,
		Interceptors:                 workerhost.Interceptors(),
	}
}

// heartbeatTimeout is the long activities' HeartbeatTimeout in these tests.
const heartbeatTimeout = 5 * time.Second

// newActivities wires the activities like worker/activities.go, with a
// faster poll so that progress and re-attachment show within a test.
func newActivities(cfg *config.Config, c client.Client) *activities.Activities {
	log := zap.NewNop()
	if os.Getenv("BC_CRASHTEST_LOG") != "" {
		log, _ = zap.NewDevelopment()
	}
	acts := activities.New(log)
	acts.Cycle = activities.CycleDeps{Config: cfg, Signal: c.SignalWorkflow, Poll: 200 * time.Millisecond,
		// A dead worker's activity is retried after 5 s instead of the
		// production minute: the scenarios stay short, the path is the same.
		HeartbeatTimeout: heartbeatTimeout}
	return acts
}

// runWorkerProcess is the child: a worker for one task queue until killed.
func runWorkerProcess() error {
	cfg, err := config.Load(os.Getenv(envConfig))
	if err != nil {
		return err
	}
	c, err := client.Dial(client.Options{HostPort: os.Getenv(envFrontend), Namespace: devserver.DefaultNamespace, Logger: quiet})
	if err != nil {
		return err
	}
	defer c.Close()
	w := worker.New(c, os.Getenv(envTaskQueue), workerOptions())
	workflows.Register(w, newActivities(cfg, c))
	return w.Run(worker.InterruptCh())
}

// siteSeq numbers the sites of one test binary.
var siteSeq atomic.Int64

var (
	sharedOnce sync.Once
	sharedSrv  *devserver.Server
	sharedErr  error
)

// sharedTemporal is one in-memory embedded server for the scenarios that do
// not restart it.
func sharedTemporal(t testing.TB) *devserver.Server {
	t.Helper()
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		sharedSrv, sharedErr = devserver.Start(ctx, devserver.Options{UIPort: devserver.NoUI,
			SearchAttributes: workflows.SearchAttributeTypes})
	})
	if sharedErr != nil {
		t.Fatalf("embedded Temporal server: %v", sharedErr)
	}
	return sharedSrv
}

func dial(t testing.TB, srv *devserver.Server) client.Client {
	t.Helper()
	c, err := srv.NewClient(context.Background(), client.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// site is the emulated estate (package sitetest): source instance sql01,
// verification instance verify01, backup servers bak01 and bak02
// (directories SQL Server reaches as \\bakNN\backup), and the
// configuration naming them. Its fields are the site's, by short names.
type site struct {
	t    *testing.T
	site *sitetest.Site
	db   string
	// inst is the source instance's configuration name, unique per site:
	// scenarios run in parallel on one Temporal server, and a cycle's
	// workflow id is per (instance, database).
	inst        string
	dirs        map[string]string
	src, verify *sqlsim.Instance
	cfgPath     string
	cfg         *config.Config
	tq          string
}

// newSite starts both instances with database db of size bytes (backed up
// without compression); extra is YAML appended to the database's entry,
// more shape the site further (bandwidth, onSamba).
func newSite(t *testing.T, db string, size int64, extra string, more ...func(*sitetest.Options)) *site {
	t.Helper()
	o := sitetest.Options{Database: db, Size: size, Extra: extra, Uncompressed: true,
		Instance: fmt.Sprintf("sql01-%d", siteSeq.Add(1))}
	for _, m := range more {
		m(&o)
	}
	st := sitetest.New(t, o)
	return &site{t: t, site: st, db: db, inst: st.Instance, dirs: st.Dirs, src: st.Source, verify: st.Verify,
		cfgPath: st.ConfigPath, cfg: st.Config, tq: "crash-" + regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-")}
}

// bandwidth sets every backup server's bandwidth_limit to rate ("" =
// unlimited): a copy that takes long enough to be interrupted.
func bandwidth(rate string) func(*sitetest.Options) {
	return func(o *sitetest.Options) {
		if rate != "" {
			o.BandwidthLimit = map[string]string{"bak01": rate, "bak02": rate}
		}
	}
}

// onSamba puts some backup servers on Samba (the worker reaches them over
// SMB; SQL Server's UNC path maps to the share's directory).
func onSamba(smb map[string]*sambatest.Server) func(*sitetest.Options) {
	return func(o *sitetest.Options) { o.SMB = smb }
}

// onTwoSambas starts two Samba servers with one login, bak01 and bak02,
// and the option that puts the site's backup servers on them.
func onTwoSambas(t *testing.T) (bak01, bak02 *sambatest.Server, opt func(*sitetest.Options)) {
	bak01 = sambatest.Start(t, sambatest.Options{})
	bak02 = sambatest.Start(t, sambatest.Options{User: bak01.User(), Password: bak01.Password()})
	return bak01, bak02, onSamba(map[string]*sambatest.Server{"bak01": bak01, "bak02": bak02})
}

// reconfigure rewrites the site's configuration file with edit and loads
// it; db is the database key the cycles use from now on.
func (s *site) reconfigure(edit func(yaml string) string, db string) {
	s.t.Helper()
	s.site.Reconfigure(edit)
	s.cfg = s.site.Config
	s.db = db
}

// inProcessWorker runs the product's activities on a worker in this process.
func (s *site) inProcessWorker(c client.Client) {
	w := worker.New(c, s.tq, workerOptions())
	workflows.Register(w, newActivities(s.cfg, c))
	if err := w.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(w.Stop)
}

// workerProcess is a worker in a child process, killed with kill.
type workerProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (s *site) startWorkerProcess(frontend string) *workerProcess {
	s.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWorker+"=1", envConfig+"="+s.cfgPath, envFrontend+"="+frontend, envTaskQueue+"="+s.tq)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start worker process: %v", err)
	}
	p := &workerProcess{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	s.t.Cleanup(p.kill)
	return p
}

// kill is the crash: SIGKILL, no chance to report anything to Temporal or
// to close SQL sessions cleanly.
func (p *workerProcess) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// freeze stops the worker (SIGSTOP) without closing its connections: a
// hung or partitioned worker. Its SQL sessions and statements live on.
func (p *workerProcess) freeze() {
	_ = p.cmd.Process.Signal(syscall.SIGSTOP)
}

// start begins a cycle of the site's database under the database's own
// workflow id (id names the scenario only in the test's messages).
func (s *site) start(c client.Client, id string) client.WorkflowRun {
	s.t.Helper()
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: workflows.CycleWorkflowID(s.inst, s.db), TaskQueue: s.tq},
		workflows.BackupCycleName, workflows.CycleInput{Database: s.db})
	if err != nil {
		s.t.Fatalf("start cycle %s: %v", id, err)
	}
	return run
}

// wait waits for a cycle's result, bounded.
func wait(t *testing.T, run client.WorkflowRun, limit time.Duration) (workflows.CycleResult, error) {
	t.Helper()
	return waitFor[workflows.CycleResult](t, run, limit)
}

// waitFor waits for any workflow's result, bounded.
func waitFor[R any](t *testing.T, run client.WorkflowRun, limit time.Duration) (R, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var res R
	err := run.Get(ctx, &res)
	if ctx.Err() != nil {
		t.Fatalf("workflow %s did not finish within %s: %v", run.GetID(), limit, err)
	}
	return res, err
}

func progress(c client.Client, run client.WorkflowRun) (workflows.Progress, error) {
	var p workflows.Progress
	v, err := c.QueryWorkflow(context.Background(), run.GetID(), run.GetRunID(), workflows.ProgressQuery)
	if err != nil {
		return p, err
	}
	return p, v.Get(&p)
}

// until polls cond every 50 ms, failing the test after limit.
func until(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// statements are what an instance ran of one kind.
var statements = sitetest.Statements

func outcomes(in *sqlsim.Instance, kind string) []string {
	var out []string
	for _, s := range statements(in, kind) {
		out = append(out, s.Outcome)
	}
	return out
}

func running(in *sqlsim.Instance, kind string) bool {
	for _, s := range statements(in, kind) {
		if s.Outcome == "running" {
			return true
		}
	}
	return false
}

// manifest loads a set's manifest from a backup server's directory; nil
// when there is none.
func (s *site) manifest(server string, seq int64) *catalog.Manifest {
	s.t.Helper()
	return s.site.Manifest(server, s.db, seq)
}

// hashes of every file of every set on both servers: a scenario proves that
// earlier sets stay byte for byte what they were.
func (s *site) hashes() map[string][32]byte {
	s.t.Helper()
	out := map[string][32]byte{}
	for _, srv := range []string{"bak01", "bak02"} {
		files, _ := filepath.Glob(filepath.Join(s.dirs[srv], "*"))
		for _, p := range files {
			if strings.Contains(filepath.Base(p), ".sequence.json") {
				continue // the sequence floor, rewritten by every allocation
			}
			data, err := os.ReadFile(p)
			if err != nil {
				s.t.Fatal(err)
			}
			out[srv+"/"+filepath.Base(p)] = sha256.Sum256(data)
		}
	}
	return out
}

// unchanged reports the files of before that differ or are gone in after.
func unchanged(before, after map[string][32]byte) []string {
	var bad []string
	for k, h := range before {
		if a, ok := after[k]; !ok || a != h {
			bad = append(bad, k)
		}
	}
	return bad
}

// activityRuns counts, per activity type, the attempts started, the
// completions and the failures/timeouts in a run's history, and decodes the
// CopyToRemote result.
type activityRuns struct {
	started, completed, failed map[string]int
	copyOut                    activities.CopyOutput
	backupOut                  activities.BackupOutput
	events                     *historypb.History
}

func history(t *testing.T, c client.Client, run client.WorkflowRun) activityRuns {
	t.Helper()
	r := activityRuns{started: map[string]int{}, completed: map[string]int{}, failed: map[string]int{}, events: &historypb.History{}}
	it := c.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	scheduled := map[int64]string{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		r.events.Events = append(r.events.Events, ev)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			// Started is recorded once, with the last attempt's number.
			r.started[scheduled[a.GetScheduledEventId()]] += int(a.GetAttempt())
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
			name := scheduled[a.GetScheduledEventId()]
			r.completed[name]++
			var out any
			switch name {
			case "CopyToRemote":
				out = &r.copyOut
			case "Backup":
				out = &r.backupOut
			}
			if out != nil {
				if err := converter.GetDefaultDataConverter().FromPayloads(a.GetResult(), out); err != nil {
					t.Fatal(err)
				}
			}
		}
		if a := ev.GetActivityTaskFailedEventAttributes(); a != nil {
			r.failed[scheduled[a.GetScheduledEventId()]]++
		}
		if a := ev.GetActivityTaskTimedOutEventAttributes(); a != nil {
			r.failed[scheduled[a.GetScheduledEventId()]]++
		}
	}
	return r
}

// record writes a history to testdata/<name>.json when
// BACKUPCYCLE_RECORD_HISTORY=1, for TestHistoriesReplay.
func record(t *testing.T, h *historypb.History, name string) {
	t.Helper()
	if os.Getenv("BACKUPCYCLE_RECORD_HISTORY") != "1" {
		return
	}
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", name+".json")
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d events in %s", len(h.Events), path)
}

func errorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}
