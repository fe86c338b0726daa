package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

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
	cfg := configFor(t, "127.0.0.1:1")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "say where Temporal is: --config FILE (its temporal: section); to try it out without a cluster: make demo"},
		{[]string{"--config", cfg, "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"--help"}, exitOK, "usage: worker --config FILE"},
		{[]string{"--help"}, exitOK, "--config FILE --task-queue NAME"},
		{[]string{"--help"}, exitOK, "-metrics-addr string"},
		{[]string{"--help"}, exitOK, "re-reads FILE when it changes and on SIGHUP"},
		{[]string{"--config", "/nonexistent/bc.yaml"}, exitFail, "/nonexistent/bc.yaml"},
		{[]string{"--config", cfg, "--metrics-addr", "9090"}, exitUsage, `--metrics-addr "9090": want HOST:PORT, e.g. :9090`},
		{[]string{"--config", cfg, "--metrics-addr", "127.0.0.1:"}, exitUsage, `--metrics-addr "127.0.0.1:": want HOST:PORT`},
		{[]string{"--config", cfg, "--task-queue", " bak01 "}, exitUsage, `--task-queue " bak01 ": a task queue name has no leading or trailing spaces`},
		// A port in use is reported before the worker dials Temporal (127.0.0.1:1 would fail later).
		{[]string{"--config", cfg, "--metrics-addr", busy}, exitFail, "--metrics-addr " + busy + ": listen tcp"},
		{[]string{"--help"}, exitOK, "-metrics-web-config string"},
		{[]string{"--config", cfg, "--metrics-web-config", "web.yml"}, exitUsage, "--metrics-web-config needs --metrics-addr"},
		// A web configuration that does not load stops the start too, before Temporal is dialled.
		{[]string{"--config", cfg, "--metrics-addr", "127.0.0.1:0", "--metrics-web-config", "/nonexistent/web.yml"}, exitFail,
			"--metrics-web-config /nonexistent/web.yml: "},
		// The development worker's flags say where that worker is.
		{[]string{"--dev"}, exitUsage, "--dev belongs to the development worker (embedded Temporal server, Web UI, emulated site): run `make demo`, or `go run ./internal/devenv/cmd/devworker --help`"},
		{[]string{"--config", cfg, "--state-dir=.demo"}, exitUsage, "--state-dir belongs to the development worker"},
		{[]string{"-ui-port", "0"}, exitUsage, "--ui-port belongs to the development worker"},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("worker %v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
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
    address: 127.0.0.1:2
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
