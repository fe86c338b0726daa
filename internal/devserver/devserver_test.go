package devserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap/zaptest"
)

func echoWorkflow(ctx workflow.Context, s string) (string, error) {
	if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
		return "", err
	}
	return "echo:" + s, nil
}

func start(t *testing.T, opts Options) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t)
	}
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func dial(t *testing.T, s *Server) sdkclient.Client {
	t.Helper()
	c, err := s.NewClient(context.Background(), sdkclient.Options{Logger: nopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func portOf(t *testing.T, hostport string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(hostport, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	fmt.Sscan(p, &n)
	return n
}

// assertFree fails if something still listens on hostport after Stop.
func assertFree(t *testing.T, hostport string) {
	t.Helper()
	l, err := net.Listen("tcp", strings.TrimPrefix(hostport, "http://"))
	if err != nil {
		t.Errorf("%s still in use after Stop: %v", hostport, err)
		return
	}
	l.Close()
}

func TestRestartOnSameFileKeepsHistoryAndAddsSearchAttributes(t *testing.T) {
	db := filepath.Join(t.TempDir(), "temporal.db")
	ctx := context.Background()

	first := start(t, Options{DBFile: db, UIPort: NoUI,
		SearchAttributes: map[string]enumspb.IndexedValueType{"BackupStep": enumspb.INDEXED_VALUE_TYPE_KEYWORD}})
	c := dial(t, first)
	w := worker.New(c, "tq", worker.Options{})
	w.RegisterWorkflowWithOptions(echoWorkflow, workflow.RegisterOptions{Name: "Echo"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	run, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: "echo-1", TaskQueue: "tq"}, "Echo", "hi")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil || got != "echo:hi" {
		t.Fatalf("first run: %q, %v", got, err)
	}
	w.Stop()
	c.Close()
	frontend := first.FrontendAddress()
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	assertFree(t, frontend)

	// Same file, same frontend port (proves it was released), more attributes.
	second := start(t, Options{DBFile: db, UIPort: NoUI, FrontendPort: portOf(t, frontend),
		SearchAttributes: map[string]enumspb.IndexedValueType{
			"BackupStep":     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
			"BackupSequence": enumspb.INDEXED_VALUE_TYPE_INT,
		}})
	c2 := dial(t, second)
	desc, err := c2.DescribeWorkflowExecution(ctx, "echo-1", run.GetRunID())
	if err != nil {
		t.Fatalf("workflow of the first start lost after restart: %v", err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Errorf("status after restart = %v, want completed", st)
	}
	if err := c2.GetWorkflow(ctx, "echo-1", run.GetRunID()).Get(ctx, &got); err != nil || got != "echo:hi" {
		t.Errorf("result after restart: %q, %v", got, err)
	}
	sas, err := c2.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: DefaultNamespace})
	if err != nil {
		t.Fatal(err)
	}
	if sas.GetCustomAttributes()["BackupSequence"] != enumspb.INDEXED_VALUE_TYPE_INT ||
		sas.GetCustomAttributes()["BackupStep"] != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
		t.Errorf("custom attributes after restart = %v, want BackupStep and the added BackupSequence", sas.GetCustomAttributes())
	}
	ns, err := c2.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: DefaultNamespace})
	if err != nil {
		t.Fatal(err)
	}
	if r := ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(); r != DefaultRetention {
		t.Errorf("retention = %v, want %v", r, DefaultRetention)
	}
}

func TestTwoServersInParallelServeTheUI(t *testing.T) {
	servers := make([]*Server, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[i], errs[i] = Start(context.Background(), Options{Logger: zaptest.NewLogger(t)})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("server %d: %v", i, err)
		}
		t.Cleanup(func() { _ = servers[i].Stop() })
	}
	if servers[0].FrontendAddress() == servers[1].FrontendAddress() || servers[0].UIAddress() == servers[1].UIAddress() {
		t.Fatalf("servers share addresses: %s %s", servers[0].FrontendAddress(), servers[1].FrontendAddress())
	}
	for i, s := range servers {
		resp, err := http.Get(s.UIAddress() + "/")
		if err != nil {
			t.Fatalf("server %d UI: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// The Temporal UI is a SvelteKit app: a shell page loading its entry script.
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") ||
			!strings.Contains(string(body), `<div id="svelte">`) {
			t.Fatalf("server %d GET %s/: %d %q, body %.300q", i, s.UIAddress(), resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		entry := regexp.MustCompile(`/_app/immutable/entry/start\.[^"]+\.js`).FindString(string(body))
		resp, err = http.Get(s.UIAddress() + entry)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if entry == "" || resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "javascript") {
			t.Errorf("server %d UI entry script %q: %d %q", i, entry, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		// The UI's API proxies to this server's frontend.
		resp, err = http.Get(s.UIAddress() + "/api/v1/namespaces/" + DefaultNamespace)
		if err != nil {
			t.Fatal(err)
		}
		var ns struct {
			NamespaceInfo struct{ Name, State string }
		}
		err = json.NewDecoder(resp.Body).Decode(&ns)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || ns.NamespaceInfo.Name != DefaultNamespace {
			t.Errorf("server %d UI API namespace: %d %+v %v", i, resp.StatusCode, ns, err)
		}
	}
	for _, s := range servers {
		fe, ui := s.FrontendAddress(), s.UIAddress()
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
		assertFree(t, fe)
		assertFree(t, ui)
	}
}

func TestBusyPortIsAClearError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = Start(context.Background(), Options{FrontendPort: port, UIPort: NoUI})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("127.0.0.1:%d is not available", port)) || !strings.Contains(err.Error(), "--port") {
		t.Fatalf("Start on a busy port: err = %v, want one naming the port and --port", err)
	}
	_, err = Start(context.Background(), Options{UIPort: 70000})
	if err == nil || !strings.Contains(err.Error(), "UI port 70000") {
		t.Fatalf("Start with UI port 70000: err = %v", err)
	}
}

// BenchmarkStartStop measures the start-up (until the namespace answers and
// the UI serves) and shutdown of an embedded server.
func BenchmarkStartStop(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts func(dir string) Options
	}{
		{"memory", func(string) Options { return Options{UIPort: NoUI} }},
		{"memory+ui", func(string) Options { return Options{} }},
		{"file+ui", func(dir string) Options { return Options{DBFile: filepath.Join(dir, "t.db")} }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dir := b.TempDir()
			var starting, stopping time.Duration
			n := 0
			for b.Loop() {
				t0 := time.Now()
				s, err := Start(context.Background(), bc.opts(dir))
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := s.Stop(); err != nil {
					b.Fatal(err)
				}
				starting += t1.Sub(t0)
				stopping += time.Since(t1)
				n++
			}
			b.ReportMetric(float64(starting.Milliseconds())/float64(n), "start-ms/op")
			b.ReportMetric(float64(stopping.Milliseconds())/float64(n), "stop-ms/op")
		})
	}
}
