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

// The tests run the development worker as a real process (signals, exit
// codes, stdout) by re-executing the test binary as the command: no second
// link of the Temporal server.
const mainEnv = "BACKUPCYCLE_DEVWORKER_TEST_MAIN"

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

// wait drains stdout and returns the exit code. The worker must print a
// line or exit within idle of its last line (a demo reports each cycle,
// a stopping worker only says it stopped): silence that long is a worker
// stuck, whatever the load. Then its goroutines are dumped (SIGQUIT) to
// stderr, which the failure shows.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	const idle = 2 * time.Minute
	timer := time.NewTimer(idle)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-p.lines:
			if ok {
				p.stdout.WriteString(line + "\n")
				timer.Reset(idle)
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
			case <-timer.C:
				p.stuck(t, idle)
			}
		case <-timer.C:
			p.stuck(t, idle)
		}
	}
}

// stuck fails the test with the goroutines of a worker silent for idle.
func (p *proc) stuck(t *testing.T, idle time.Duration) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
	t.Fatalf("worker neither printed a line nor exited within %s of its last line (goroutines dumped to its stderr)", idle)
}

func TestDevWorkerServesUIRunsHealthCheckAndStopsOnSIGTERM(t *testing.T) {
	state := t.TempDir()
	w := startWorker(t, "--state-dir", state, "--port", "0", "--ui-port", "0", "--dev-db-size", "16MiB")
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
	if logged, err := os.ReadFile(filepath.Join(state, LogFile)); err != nil || !strings.Contains(string(logged), "Stopped Worker") {
		t.Errorf("the log file lacks the SDK's %q (%v): not a graceful worker.Stop", "Stopped Worker", err)
	}

	// --demo on the same state: runs its own health check, exits 0, and the
	// first run is still there afterwards (history kept across restarts).
	demo := startWorker(t, "--demo", "--state-dir", state, "--port", "0", "--ui-port", "-1", "--dev-db-size", "16MiB")
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
		{[]string{"--keep"}, exitUsage, "--keep only makes sense with --demo"},
		{[]string{"extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"--ui-port", "-2"}, exitUsage, "--ui-port -2: use a port, 0 for a free one or -1 for no UI"},
		{[]string{"--help"}, exitOK, "usage: devworker [flags]"},
		{[]string{"--help"}, exitOK, "-dev-db-size value"},
		{[]string{"--metrics-addr", "9090"}, exitUsage, `--metrics-addr "9090": want HOST:PORT, e.g. :9090`},
		{[]string{"--task-queue", " bak01 "}, exitUsage, `--task-queue " bak01 ": a task queue name has no leading or trailing spaces`},
		// A port in use is reported before anything starts (no embedded server, no state directory).
		{[]string{"--metrics-addr", busy, "--state-dir", never}, exitFail, "--metrics-addr " + busy + ": listen tcp"},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("devworker %v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
	if _, err := os.Stat(never); err == nil {
		t.Error("a worker that could not listen on --metrics-addr created its state directory")
	}
}
