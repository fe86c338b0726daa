package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// The tests run the worker as a real process (signals, exit codes, stdout)
// by re-executing the test binary as the worker: no second link of the
// Temporal server.
const mainEnv = "BACKUPCYCLE_WORKER_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

type proc struct {
	cmd    *exec.Cmd
	stdout *bytes.Buffer // everything read so far
	lines  chan string
	stderr *bytes.Buffer
	done   chan error
}

func startWorker(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, lines: make(chan string, 100), done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("worker stdout:\n%s\nworker stderr:\n%s", p.stdout, p.stderr)
		}
	})
	return p
}

// waitLine reads stdout until a line matches re and returns its groups.
func (p *proc) waitLine(t *testing.T, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("worker exited before printing a line matching %q", re)
			}
			p.stdout.WriteString(line + "\n")
			if m := rx.FindStringSubmatch(line); m != nil {
				return m
			}
		case <-timeout:
			t.Fatalf("no line matching %q within 2m", re)
		}
	}
}

// wait drains stdout and returns the exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case line, ok := <-p.lines:
			if ok {
				p.stdout.WriteString(line + "\n")
				continue
			}
			select {
			case err := <-p.done:
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					return ee.ExitCode()
				}
				if err != nil {
					t.Fatal(err)
				}
				return 0
			case <-timeout:
				t.Fatal("worker did not exit within 1m")
			}
		case <-timeout:
			t.Fatal("worker did not exit within 1m")
		}
	}
}

func TestDevWorkerServesUIRunsHealthCheckAndStopsOnSIGTERM(t *testing.T) {
	state := t.TempDir()
	w := startWorker(t, "--dev", "--state-dir", state, "--port", "0", "--ui-port", "0", "--dev-db-size", "16MiB")
	ui := w.waitLine(t, `^\s+Temporal Web UI:\s+(http://\S+)$`)[1]
	frontend := w.waitLine(t, `^\s+Temporal frontend:\s+(\S+) `)[1]
	ctx := context.Background()

	// The Web UI is up and is the Temporal UI (a SvelteKit shell).
	resp, err := http.Get(ui + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `<div id="svelte">`) ||
		!strings.Contains(string(body), "/_app/immutable/entry/start.") {
		t.Fatalf("GET %s/: %d, body %.300q", ui, resp.StatusCode, body)
	}

	// A starter elsewhere runs the health check; the worker process runs it.
	c, err := client.Dial(ctx, config.Temporal{Address: frontend}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CheckSearchAttributes(ctx); err != nil {
		t.Fatalf("--dev did not register the search attributes: %v", err)
	}
	hctx, cancel := context.WithTimeout(ctx, time.Minute)
	run, err := c.RunHealthCheck(hctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if run.Result.Step != workflows.HealthStep || run.Result.Worker.PID != w.cmd.Process.Pid {
		t.Errorf("result %+v: want step health and the worker's pid %d", run.Result, w.cmd.Process.Pid)
	}

	// Visible through a visibility query on a custom search attribute, both
	// from the frontend and through the Web UI's API.
	query := fmt.Sprintf("%s = '%s'", workflows.AttrStep.GetName(), workflows.HealthStep)
	ids := listIDs(t, c.SDK(), query, run.WorkflowID)
	if !contains(ids, run.WorkflowID) {
		t.Errorf("query %q lists %v, want %s", query, ids, run.WorkflowID)
	}
	resp, err = http.Get(ui + "/api/v1/namespaces/default/workflows?query=" + url.QueryEscape(query))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), run.WorkflowID) {
		t.Errorf("UI API list %q: %d %.500s", query, resp.StatusCode, body)
	}

	// SIGTERM: graceful stop, exit 0, and the ports are released.
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := w.wait(t); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
	if !strings.Contains(w.stdout.String(), "worker stopped") {
		t.Errorf("stdout lacks %q", "worker stopped")
	}
	if !strings.Contains(w.stderr.String(), "Stopped Worker") {
		t.Errorf("stderr lacks the SDK's %q: not a graceful worker.Stop", "Stopped Worker")
	}

	// --demo on the same state: runs its own health check, exits 0, and the
	// first run is still there afterwards (history kept across restarts).
	demo := startWorker(t, "--dev", "--demo", "--state-dir", state, "--port", "0", "--ui-port", "-1", "--dev-db-size", "16MiB")
	demoID := demo.waitLine(t, `^health check (\S+) completed: worker host=\S+ pid=\d+`)[1]
	if code := demo.wait(t); code != 0 {
		t.Fatalf("--demo exit code %d, want 0", code)
	}
	if strings.Contains(demo.stdout.String(), "Temporal Web UI") {
		t.Errorf("--ui-port -1 still printed a UI address:\n%s", demo.stdout)
	}
	srv, err := devserver.Start(ctx, devserver.Options{DBFile: filepath.Join(state, "temporal.db"), UIPort: devserver.NoUI})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	sc, err := srv.NewClient(ctx, sdkclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	ids = listIDs(t, sc, query, run.WorkflowID, demoID)
	if !contains(ids, run.WorkflowID) || !contains(ids, demoID) {
		t.Errorf("after two restarts query %q lists %v, want %s and %s", query, ids, run.WorkflowID, demoID)
	}
}

func TestConfigWorkerAgainstACluster(t *testing.T) {
	ctx := context.Background()
	// A "cluster" without the search attributes: the worker must refuse.
	bare, err := devserver.Start(ctx, devserver.Options{UIPort: devserver.NoUI})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Stop()
	// No worker polls yet: a health check gives up with a hint.
	idle, err := client.Dial(ctx, config.Temporal{Address: bare.FrontendAddress()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	// Long enough for the start itself on a loaded machine: the wait for a
	// worker is what must time out, and give the hint.
	hctx, hcancel := context.WithTimeout(ctx, 8*time.Second)
	_, err = idle.RunHealthCheck(hctx)
	hcancel()
	if err == nil || !strings.Contains(err.Error(), `is a worker polling task queue "backupcycle" on namespace "default"?`) {
		t.Errorf("health check without a worker: err = %v", err)
	}

	var out, errb bytes.Buffer
	code := run(ctx, []string{"--config", configFor(t, bare.FrontendAddress())}, &out, &errb)
	if code != exitFail || !strings.Contains(errb.String(), `namespace "default" lacks search attributes BackupDatabase (Keyword)`) ||
		!strings.Contains(errb.String(), "temporal operator search-attribute create --namespace default --name BackupStep --type Keyword") ||
		strings.Count(errb.String(), "\n") != 1 {
		t.Fatalf("worker on a namespace without attributes: exit %d, stderr %q", code, errb.String())
	}

	// With them, --config --demo runs the health check and exits 0.
	srv, err := devserver.Start(ctx, devserver.Options{UIPort: devserver.NoUI, SearchAttributes: workflows.SearchAttributeTypes})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	out.Reset()
	errb.Reset()
	code = run(ctx, []string{"--config", configFor(t, srv.FrontendAddress()), "--demo"}, &out, &errb)
	if code != exitOK || !regexp.MustCompile(`(?m)^health check health-\S+ completed: worker host=\S+ pid=\d+`).MatchString(out.String()) {
		t.Fatalf("--config --demo: exit %d\nstdout %s\nstderr %s", code, out.String(), errb.String())
	}

	// Without --demo it runs until its context ends (what SIGTERM does in main).
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan int, 1)
	var out2 bytes.Buffer
	go func() {
		done <- run(cctx, []string{"--config", configFor(t, srv.FrontendAddress())}, &out2, io.Discard)
	}()
	c, err := client.Dial(ctx, config.Temporal{Address: srv.FrontendAddress()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hctx, hcancel = context.WithTimeout(ctx, time.Minute)
	if _, err := c.RunHealthCheck(hctx); err != nil {
		t.Fatalf("health check against the --config worker: %v", err)
	}
	hcancel()
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("exit code after cancel = %d, want 0", code)
	}
}

func TestUsageErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().String()
	never := filepath.Join(t.TempDir(), "never")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "say where Temporal is: --dev"},
		{[]string{"--dev", "--config", "x.yaml"}, exitUsage, "exclude each other"},
		{[]string{"--dev", "--keep"}, exitUsage, "--keep only makes sense with --demo"},
		{[]string{"--dev", "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"--help"}, exitOK, "usage: worker --dev"},
		{[]string{"--help"}, exitOK, "--config FILE --task-queue NAME"},
		{[]string{"--help"}, exitOK, "-metrics-addr string"},
		{[]string{"--config", "/nonexistent/bc.yaml"}, exitFail, "/nonexistent/bc.yaml"},
		{[]string{"--dev", "--metrics-addr", "9090"}, exitUsage, `--metrics-addr "9090": want HOST:PORT, e.g. :9090`},
		{[]string{"--dev", "--metrics-addr", "127.0.0.1:"}, exitUsage, `--metrics-addr "127.0.0.1:": want HOST:PORT`},
		{[]string{"--dev", "--task-queue", " bak01 "}, exitUsage, `--task-queue " bak01 ": a task queue name has no leading or trailing spaces`},
		// A port in use is reported before anything starts (no embedded server, no state directory).
		{[]string{"--dev", "--metrics-addr", busy, "--state-dir", never}, exitFail, "--metrics-addr " + busy + ": listen tcp"},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("worker %v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
	if _, err := os.Stat(never); err == nil {
		t.Error("a worker that could not listen on --metrics-addr created its state directory")
	}
}

// configFor writes the repository's example config with the Temporal
// address replaced: the example must stay loadable by the worker.
func configFor(t *testing.T, address string) string {
	t.Helper()
	data, err := os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rx := regexp.MustCompile(`(?m)^(temporal:\s*\n(?:\s*#.*\n)*\s+address:\s*)\S+`)
	if !rx.Match(data) {
		t.Fatal("config.example.yaml: no temporal.address line to replace")
	}
	data = rx.ReplaceAll(data, []byte("${1}"+address))
	path := filepath.Join(t.TempDir(), "backupcycle.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path); err != nil {
		t.Fatalf("example config with address %s does not load: %v", address, err)
	}
	return path
}

// listIDs lists the workflow IDs query matches, waiting until want are all
// there (visibility is written just after a workflow closes) or 20s passed.
func listIDs(t *testing.T, c sdkclient.Client, query string, want ...string) []string {
	t.Helper()
	var ids []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			t.Fatalf("list %q: %v", query, err)
		}
		ids = ids[:0]
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		all := true
		for _, w := range want {
			all = all && contains(ids, w)
		}
		if all {
			break
		}
	}
	return ids
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A --config worker with --task-queue polls that queue, and with
// --metrics-addr serves the SDK's metrics of that traffic and the gauges of
// its config's databases read from the backup servers' manifests.
func TestConfigWorkerServesMetricsOnItsTaskQueue(t *testing.T) {
	ctx := context.Background()
	srv, err := devserver.Start(ctx, devserver.Options{UIPort: devserver.NoUI, SearchAttributes: workflows.SearchAttributeTypes})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`temporal:
  address: %s
sql_instances:
  - name: sql01
    address: 127.0.0.1:1
    user: backup
    password_env: BACKUPCYCLE_TEST_UNSET
  - name: verify
    address: 127.0.0.1:1
    user: backup
    password_env: BACKUPCYCLE_TEST_UNSET
backup_servers:
  - name: bak01
    unc_paths: ['/var/opt/mssql/backup/bak01']
    location: bak01
    verify_instance: verify
    restore_data_dir: /data
    restore_log_dir: /log
  - name: bak02
    unc_paths: ['/var/opt/mssql/backup/bak02']
    location: bak02
    verify_instance: verify
    restore_data_dir: /data
    restore_log_dir: /log
databases:
  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
    rpo: 2h
`, srv.FrontendAddress())
	for _, d := range []string{"bak01", "bak02"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfgFile := filepath.Join(dir, "backupcycle.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	wctx, cancel := context.WithCancel(ctx)
	done := make(chan int, 1)
	out := &syncBuffer{}
	go func() {
		done <- run(wctx, []string{"--config", cfgFile, "--task-queue", "near-bak02", "--metrics-addr", "127.0.0.1:0"}, out, io.Discard)
	}()
	defer func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("exit code after cancel = %d, want 0\nstdout:\n%s", code, out.String())
		}
	}()
	var metricsURL string
	for deadline := time.Now().Add(time.Minute); metricsURL == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if m := regexp.MustCompile(`(?m)^\s+metrics: (http://127\.0\.0\.1:\d+/metrics)$`).FindStringSubmatch(out.String()); m != nil {
			metricsURL = m[1]
		}
	}
	if metricsURL == "" {
		t.Fatalf("no metrics URL in the ready banner:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "task queue near-bak02") {
		t.Errorf("ready banner does not name task queue near-bak02:\n%s", out.String())
	}

	// A health check started on near-bak02 is run by this worker.
	c, err := client.Dial(ctx, config.Temporal{Address: srv.FrontendAddress(), TaskQueue: "near-bak02"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hctx, hcancel := context.WithTimeout(ctx, time.Minute)
	_, err = c.RunHealthCheck(hctx)
	hcancel()
	if err != nil {
		t.Fatalf("health check on task queue near-bak02: %v", err)
	}

	want := []*regexp.Regexp{
		// The SDK's metrics of that traffic, under Temporal's names.
		regexp.MustCompile(`(?m)^temporal_workflow_completed_total\{[^}]*task_queue="near-bak02"[^}]*workflow_type="HealthCheck"[^}]*\} [1-9]`),
		regexp.MustCompile(`(?m)^temporal_request_total\{activity_type="Health"[^}]*operation="RespondActivityTaskCompleted"[^}]*\} [1-9]`),
		// The config's database, read from the (empty) backup servers.
		regexp.MustCompile(`(?m)^backupcycle_last_verified_timestamp_seconds\{database="Sales",instance="sql01"\} 0$`),
		regexp.MustCompile(`(?m)^backupcycle_rpo_seconds\{database="Sales",instance="sql01"\} 7200$`),
		regexp.MustCompile(`(?m)^backupcycle_backup_server_readable\{server="bak02"\} 1$`),
	}
	var body string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(metricsURL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		missing := 0
		for _, rx := range want {
			if !rx.MatchString(body) {
				missing++
			}
		}
		if missing == 0 {
			return
		}
	}
	for _, rx := range want {
		if !rx.MatchString(body) {
			t.Errorf("GET %s: no line matching %s", metricsURL, rx)
		}
	}
	t.Logf("metrics:\n%s", body)
}

// syncBuffer is a bytes.Buffer the worker writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
