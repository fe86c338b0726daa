package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/workflows"
)

// startWorker polls tq with whatever register puts on it.
func startWorker(t *testing.T, tq string, register func(w sdkworker.Worker)) {
	t.Helper()
	w := sdkworker.New(sdk(t), tq, sdkworker.Options{})
	register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
}

// blockingCycle stands in for BackupCycle: it answers the progress query
// and runs until it is cancelled.
func blockingCycle(ctx workflow.Context, in workflows.CycleInput) (workflows.CycleResult, error) {
	p := workflows.Progress{Database: in.Database, Step: activities.StepBackup, Sequence: 7, Server: "bak01", Percent: 40, Bytes: 3 << 20, Outcome: workflows.OutcomeRunning}
	if err := workflow.SetQueryHandler(ctx, workflows.ProgressQuery, func() (workflows.Progress, error) { return p, nil }); err != nil {
		return workflows.CycleResult{}, err
	}
	return workflows.CycleResult{}, workflow.Await(ctx, func() bool { return false })
}

// blockingFleet stands in for Fleet the same way.
func blockingFleet(ctx workflow.Context, in workflows.FleetInput) (workflows.FleetResult, error) {
	began := workflow.Now(ctx)
	st := workflows.FleetStatus{Began: began, Deadline: began.Add(8 * time.Hour), Running: []string{"sql01/Sales"},
		Counts: map[string]int{workflows.OutcomeRunning: 1, workflows.OutcomeNotReached: 0}, Usage: "fleet 1/4",
		Outcomes: []workflows.DatabaseOutcome{{Instance: "sql01", Database: "Old", Outcome: workflows.OutcomeVerified, Sequence: 3, Duration: 90 * time.Second}}}
	if err := workflow.SetQueryHandler(ctx, workflows.FleetQuery, func() (workflows.FleetStatus, error) { return st, nil }); err != nil {
		return workflows.FleetResult{}, err
	}
	return workflows.FleetResult{}, workflow.Await(ctx, func() bool { return false })
}

func registerBlocking(w sdkworker.Worker) {
	w.RegisterWorkflowWithOptions(blockingCycle, workflow.RegisterOptions{Name: workflows.BackupCycleName})
	w.RegisterWorkflowWithOptions(blockingFleet, workflow.RegisterOptions{Name: workflows.FleetName})
}

// `cancel` by database name (through the config, through --instance, and
// through visibility without either), by workflow id, and the fleet; a
// database with nothing running is exit 1 with one line.
func TestCancel(t *testing.T) {
	const tq = "tq-cancel"
	startWorker(t, tq, registerBlocking)
	start := func() {
		t.Helper()
		if code, out, errs := on(t, tq, "--config", site, "run", "--database", "Sales"); code != exitOK {
			t.Fatalf("run: %d %s%s", code, out, errs)
		}
	}

	start()
	code, out, errs := on(t, tq, "--config", site, "cancel", "--database", "Sales", "--wait")
	if code != exitOK || out != "BackupCycle of Sales@sql01 backup-sql01-Sales (run "+runOf(t, out)+"): Canceled\n" {
		t.Errorf("cancel --database --wait: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs = on(t, tq, "--config", site, "cancel", "--database", "Sales")
	if code != exitFail || out != "" || strings.Count(errs, "\n") != 1 ||
		!strings.Contains(errs, "workflow backup-sql01-Sales is not running (its last run is Canceled): nothing to cancel") {
		t.Errorf("nothing running: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	// Without --config: --instance names the id, or visibility finds it.
	start()
	code, out, errs = on(t, tq, "cancel", "--database", "Sales", "--instance", "sql01")
	if code != exitOK || !strings.HasPrefix(out, "cancel requested: BackupCycle of Sales@sql01 backup-sql01-Sales (run ") ||
		!strings.Contains(out, "ends Canceled; follow it: `starter status --database Sales`") {
		t.Errorf("cancel --instance: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	waitClosed(t, "backup-sql01-Sales")
	start()
	eventually(t, func() string {
		code, out, errs = on(t, tq, "cancel", "--database", "Sales", "--json")
		if code != exitOK {
			return fmt.Sprintf("cancel by name: exit %d, stdout %q, stderr %q", code, out, errs)
		}
		return ""
	})
	var cj cancelJSON
	if err := json.Unmarshal([]byte(out), &cj); err != nil || len(cj.Cancelled) != 1 || cj.Cancelled[0].WorkflowID != "backup-sql01-Sales" ||
		cj.Cancelled[0].Status != "CancelRequested" || cj.Cancelled[0].Type != workflows.BackupCycleName {
		t.Errorf("cancel --json: %v\n%s", err, out)
	}
	checkJSONStyle(t, "cancel --json", out)
	waitClosed(t, "backup-sql01-Sales")

	// By workflow id.
	start()
	if code, out, errs := on(t, tq, "cancel", "--workflow-id", "backup-sql01-Sales", "--wait"); code != exitOK || !strings.HasSuffix(out, "): Canceled\n") {
		t.Errorf("cancel --workflow-id: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	// The fleet.
	if code, out, errs := on(t, tq, "fleet"); code != exitOK {
		t.Fatalf("fleet: %d %s%s", code, out, errs)
	}
	code, out, errs = on(t, tq, "cancel", "--fleet", "--wait", "--json")
	if code != exitOK {
		t.Fatalf("cancel --fleet: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	cj = cancelJSON{}
	if err := json.Unmarshal([]byte(out), &cj); err != nil || len(cj.Cancelled) != 1 || cj.Cancelled[0].WorkflowID != workflows.FleetWorkflowID ||
		cj.Cancelled[0].Status != "Canceled" || cj.Cancelled[0].Type != workflows.FleetName {
		t.Errorf("cancel --fleet --json: %v\n%s", err, out)
	}
	eventually(t, func() string {
		code, out, errs = on(t, tq, "cancel", "--fleet")
		if code != exitFail || !strings.Contains(errs, "no fleet run is running") {
			return fmt.Sprintf("no fleet: exit %d, stdout %q, stderr %q", code, out, errs)
		}
		return ""
	})
}

var runRE = regexp.MustCompile(`\(run ([0-9a-f-]+)\)`)

func runOf(t *testing.T, out string) string {
	t.Helper()
	if m := runRE.FindStringSubmatch(out); m != nil {
		return m[1]
	}
	return "?"
}

// waitClosed waits until the latest run of id has closed.
func waitClosed(t *testing.T, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = sdk(t).GetWorkflow(ctx, id, "").Get(ctx, nil)
	if ctx.Err() != nil {
		t.Fatalf("%s did not close", id)
	}
}

// failingRestore stands in for the Restore activity against a verification
// instance that does not answer.
func failingRestore(ctx context.Context, in workflows.CycleInput) error {
	return temporal.NewApplicationError("restore on sqlverify: login failed for user 'backup'", "SQLHostUnreachable")
}

// retryingCycle is a cycle stuck in retries of its restore step.
func retryingCycle(ctx workflow.Context, in workflows.CycleInput) (workflows.CycleResult, error) {
	p := workflows.Progress{Database: in.Database, Step: activities.StepRestore, Sequence: 4, Server: "bak02", Outcome: workflows.OutcomeRunning}
	if err := workflow.SetQueryHandler(ctx, workflows.ProgressQuery, func() (workflows.Progress, error) { return p, nil }); err != nil {
		return workflows.CycleResult{}, err
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 300 * time.Millisecond, BackoffCoefficient: 1.5, MaximumInterval: 2 * time.Second}})
	return workflows.CycleResult{}, workflow.ExecuteActivity(ctx, "Restore", in).Get(ctx, nil)
}

// A cycle stuck in retries: status shows more than "step restore 0%": the
// activity, its attempt, when the next one starts and the last failure
// with its type (Temporal keeps them, no worker needed to answer).
func TestStatusShowsTheRetriesOfAStep(t *testing.T) {
	const tq = "tq-retry"
	startWorker(t, tq, func(w sdkworker.Worker) {
		w.RegisterWorkflowWithOptions(retryingCycle, workflow.RegisterOptions{Name: workflows.BackupCycleName})
		w.RegisterActivityWithOptions(failingRestore, activity.RegisterOptions{Name: "Restore"})
	})
	if code, out, errs := on(t, tq, "run", "--database", "Retried", "--instance", "sql07"); code != exitOK {
		t.Fatalf("run: %d %s%s", code, out, errs)
	}
	defer terminate(t, "backup-sql07-Retried")
	line := regexp.MustCompile(`(?m)^    retrying: activity Restore attempt ([2-9]|\d\d+) \((scheduled|started)\)(, next attempt \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ)?; ` +
		`last failure \[SQLHostUnreachable\]: restore on sqlverify: login failed for user 'backup'$`)
	var out string
	eventually(t, func() string {
		var code int
		var errs string
		code, out, errs = on(t, tq, "status", "--database", "Retried")
		if code != exitOK || !strings.Contains(out, "progress: step restore 0%") || !line.MatchString(out) {
			return fmt.Sprintf("status: exit %d, stderr %q\n%s", code, errs, out)
		}
		return ""
	})
	t.Logf("status:\n%s", out)

	code, js, errs := on(t, tq, "status", "--database", "Retried", "--instance", "sql07", "--json", "--limit", "1")
	if code != exitOK {
		t.Fatalf("status --json: %d %s", code, errs)
	}
	checkJSONStyle(t, "status --json", js)
	var st statusJSON
	if err := json.Unmarshal([]byte(js), &st); err != nil || len(st.Cycles) != 1 || len(st.Cycles[0].Pending) != 1 {
		t.Fatalf("status --json: %v\n%s", err, js)
	}
	p := st.Cycles[0].Pending[0]
	if p.Type != "Restore" || p.Attempt < 2 || p.MaximumAttempts != 0 || p.LastFailureType != "SQLHostUnreachable" ||
		!strings.Contains(p.LastFailure, "login failed") || p.ScheduledAt == "" {
		t.Errorf("pending activity: %+v", p)
	}
	if c := st.Cycles[0]; c.WorkflowID != "backup-sql07-Retried" || c.Instance != "sql07" || c.Progress == nil || c.Progress.Step != "restore" || c.Progress.Sequence != 4 {
		t.Errorf("cycle: %+v", c)
	}
}

// --timeout's help and behaviour agree: `run --wait` has no limit unless
// --timeout is given (the commands that return have defaultTimeout).
func TestRunWaitHasNoLimitUnlessTimeoutIsGiven(t *testing.T) {
	_, out, _ := runStarter(t, "run", "--help")
	if !strings.Contains(out, "--wait") || !strings.Contains(out, "no time limit unless --timeout is given") ||
		!strings.Contains(out, "run --wait, fleet --wait and cancel --wait wait until the run ends unless it is given") {
		t.Errorf("run --help does not say how --wait and --timeout go together:\n%s", out)
	}
	old := defaultTimeout
	defaultTimeout = 300 * time.Millisecond
	t.Cleanup(func() { defaultTimeout = old })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(3*time.Second, cancel) // stands in for Ctrl-C
	began := time.Now()
	code, out, errs := runStarterCtx(t, ctx, "run", "--database", "Waited", "--instance", "sql01", "--wait",
		"--address", srv.FrontendAddress(), "--task-queue", "tq-nolimit")
	defer terminate(t, "backup-sql01-Waited")
	if el := time.Since(began); code != exitFail || el < 2500*time.Millisecond || !strings.Contains(errs, "stopped waiting for backup cycle backup-sql01-Waited") {
		t.Errorf("after %s: exit %d, stdout %q, stderr %q", el, code, out, errs)
	}
}

// The progress line of `run --wait`: on a terminal one line per step,
// redrawn in place with percent, size, MB/s and ETA; otherwise plain lines
// when a step begins and at each quarter.
func TestProgressLines(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 1, 0, 0, 0, time.UTC)
	snaps := []struct {
		at time.Duration
		p  workflows.Progress
	}{
		{0, workflows.Progress{Step: "plan"}},
		{time.Second, workflows.Progress{Step: "backup", Sequence: 2, Server: "bak02", Percent: 10, Bytes: 100e6}},
		{11 * time.Second, workflows.Progress{Step: "backup", Sequence: 2, Server: "bak02", Percent: 30, Bytes: 300e6}},
		{21 * time.Second, workflows.Progress{Step: "backup", Sequence: 2, Server: "bak02", Percent: 55, Bytes: 550e6}},
		{22 * time.Second, workflows.Progress{Step: "copy", Sequence: 2, Server: "bak02", Percent: 0}},
	}
	var tty, plain bytes.Buffer
	pt, pp := newProgressPrinter(&tty, true), newProgressPrinter(&plain, false)
	for _, s := range snaps {
		pt.update(s.p, t0.Add(s.at))
		pp.update(s.p, t0.Add(s.at))
	}
	pt.finish()
	pp.finish()
	// 200 MB in 10 s = 20 MB/s; 20 % in 10 s leaves 70 % for 35 s.
	wantTTY := "\r\x1b[K  step plan    0%\n" +
		"\r\x1b[K  step backup (seq 2 on bak02)   10%  95.4 MiB" +
		"\r\x1b[K  step backup (seq 2 on bak02)   30%  286.1 MiB  20.0 MB/s  ETA 35s" +
		"\r\x1b[K  step backup (seq 2 on bak02)   55%  524.5 MiB  22.5 MB/s  ETA 20s\n" +
		"\r\x1b[K  step copy (seq 2 on bak02)    0%\n"
	if got := tty.String(); got != wantTTY {
		t.Errorf("terminal:\n%q\nwant\n%q", got, wantTTY)
	}
	wantPlain := "  step plan\n  step backup (seq 2 on bak02)\n" +
		"  step backup (seq 2 on bak02)   30%  286.1 MiB  20.0 MB/s  ETA 35s\n" +
		"  step backup (seq 2 on bak02)   55%  524.5 MiB  22.5 MB/s  ETA 20s\n" +
		"  step copy (seq 2 on bak02)\n"
	if got := plain.String(); got != wantPlain {
		t.Errorf("plain:\n%q\nwant\n%q", got, wantPlain)
	}
}

// `health` checks what a cycle needs: with --config a site that does not
// answer fails it (exit 1) although a worker polls; without --config or
// with --worker-only it says it only proved that a worker polls.
func TestHealthChecksTheSite(t *testing.T) {
	const tq = "tq-health"
	startWorker(t, tq, func(w sdkworker.Worker) { workflows.Register(w, activities.New(zap.NewNop())) })

	code, out, errs := on(t, tq, "health")
	if code != exitOK || !strings.Contains(out, "worker:  health check health-") ||
		!strings.Contains(out, "site:    not checked: this only proves a worker polls task queue tq-health; give --config") {
		t.Errorf("no config: exit %d, stderr %q\n%s", code, errs, out)
	}

	dir := t.TempDir()
	dead, deadVerify := deadAddress(t), deadAddress(t) // two servers: a verification instance is never a source
	t.Setenv("STARTER_HEALTH_PW", "Not-the-password1")
	cfg := fmt.Sprintf(`sql_instances:
  - {name: sql01, address: "%s", user: sa, password_env: STARTER_HEALTH_PW}
  - {name: verify, address: "%s", user: sa, password_env: STARTER_HEALTH_PW}
backup_servers:
  - {name: bak01, unc_paths: ['\\10.0.2.2\backup'], location: %s, verify_instance: verify, restore_data_dir: 'D:\restore', restore_log_dir: 'L:\log'}
  - {name: bak02, unc_paths: ['\\10.0.4.2\backup'], location: %s, verify_instance: verify, restore_data_dir: 'D:\restore', restore_log_dir: 'L:\log'}
databases:
  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02]}
`, dead, deadVerify, filepath.Join(dir, "bak01-not-mounted"), filepath.Join(dir, "bak02-not-mounted"))
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = on(t, tq, "--config", file, "health")
	if code != exitFail || !strings.Contains(out, "worker:  health check health-") || !regexp.MustCompile(`(?m)^  MISSING  sql01: `).MatchString(out) ||
		!regexp.MustCompile(`(?m)^  MISSING  backup server bak01: `).MatchString(out) ||
		!strings.Contains(errs, "health: a worker polls, but a cycle would fail") || strings.Count(errs, "\n") != 1 {
		t.Errorf("unreachable site: exit %d, stderr %q\n%s", code, errs, out)
	}
	if strings.Contains(out, "Not-the-password1") {
		t.Errorf("the password is printed:\n%s", out)
	}
	code, out, errs = on(t, tq, "--config", file, "health", "--json")
	checkJSONStyle(t, "health --json", out)
	var h healthJSON
	if err := json.Unmarshal([]byte(out), &h); err != nil || code != exitFail || h.Site == nil || h.Site.OK || h.Site.Missing == 0 || h.Worker.PID != os.Getpid() {
		t.Errorf("health --json: exit %d, %v, stderr %q\n%s", code, err, errs, out)
	}
	code, out, errs = on(t, tq, "--config", file, "health", "--worker-only")
	if code != exitOK || !strings.Contains(out, "site:    not checked (--worker-only): this only proves a worker polls task queue tq-health") {
		t.Errorf("--worker-only: exit %d, stderr %q\n%s", code, errs, out)
	}
}

// The JSON of the commands that need no site: snake_case keys, seconds,
// RFC 3339; `run --json` without --wait prints the started run.
func TestJSONShapes(t *testing.T) {
	const tq = "tq-json"
	startWorker(t, tq, registerBlocking)
	code, out, errs := on(t, tq, "--config", site, "run", "--database", "Inventory", "--json")
	if code != exitOK {
		t.Fatalf("run --json: %d %s", code, errs)
	}
	defer terminate(t, "backup-sql01-Inventory")
	checkJSONStyle(t, "run --json", out)
	var started map[string]any
	if err := json.Unmarshal([]byte(out), &started); err != nil || started["workflow_id"] != "backup-sql01-Inventory" || started["run_id"] == "" ||
		started["database"] != "Inventory" || started["instance"] != "sql01" || started["task_queue"] != tq {
		t.Errorf("run --json: %v\n%s", err, out)
	}

	var st statusJSON
	eventually(t, func() string {
		code, out, errs = on(t, tq, "status", "--database", "Inventory", "--json")
		st = statusJSON{}
		if err := json.Unmarshal([]byte(out), &st); code != exitOK || err != nil || len(st.Cycles) == 0 || st.Cycles[0].Progress == nil {
			return fmt.Sprintf("status --json: exit %d, %v, stderr %q\n%s", code, err, errs, out)
		}
		return ""
	})
	checkJSONStyle(t, "status --json", out)
	if c := st.Cycles[0]; c.WorkflowID != "backup-sql01-Inventory" || c.Status != "Running" || c.Progress.Percent != 40 || c.Progress.Bytes != 3<<20 || c.ClosedAt != "" {
		t.Errorf("status --json: %+v", c)
	}
	for _, key := range []string{`"workflow_id"`, `"run_id"`, `"started_at"`, `"backup_seconds"`} {
		if !strings.Contains(out, key) {
			t.Errorf("status --json lacks %s:\n%s", key, out)
		}
	}

	code, out, errs = on(t, tq, "--config", site, "schedule", "apply", "--jitter", "90s", "--json")
	if code != exitOK {
		t.Fatalf("schedule apply --json: %d %s", code, errs)
	}
	t.Cleanup(func() {
		on(t, tq, "schedule", "delete", "backup-sql01-Sales")
		on(t, tq, "schedule", "delete", "backup-sql01-Inventory")
	})
	checkJSONStyle(t, "schedule apply --json", out)
	eventually(t, func() string {
		code, out, errs = on(t, tq, "schedule", "list", "--json")
		if code != exitOK || !strings.Contains(out, `"jitter_seconds": 90`) || !strings.Contains(out, `"catchup_window_seconds": 21600`) {
			return fmt.Sprintf("schedule list --json: exit %d %s\n%s", code, errs, out)
		}
		return ""
	})
	checkJSONStyle(t, "schedule list --json", out)
	code, out, errs = on(t, tq, "schedule", "pause", "Sales", "--config", site, "--json")
	if code != exitOK || out != "{\n  \"schedule_id\": \"backup-sql01-Sales\",\n  \"action\": \"pause\"\n}\n" {
		t.Errorf("schedule pause --json: %d %q %q", code, out, errs)
	}

	code, out, errs = on(t, tq, "fleet", "--json")
	if code != exitOK {
		t.Fatalf("fleet --json: %d %s", code, errs)
	}
	defer terminate(t, workflows.FleetWorkflowID)
	checkJSONStyle(t, "fleet --json", out)
	code, out, errs = on(t, tq, "fleet", "--status", "--json")
	if code != exitOK {
		t.Fatalf("fleet --status --json: %d %s", code, errs)
	}
	checkJSONStyle(t, "fleet --status --json", out)
	var fs fleetStatusJSON
	if err := json.Unmarshal([]byte(out), &fs); err != nil || len(fs.Outcomes) != 1 || fs.Outcomes[0].Duration == nil || *fs.Outcomes[0].Duration != 90 ||
		len(fs.Counts) != 2 || fs.Counts[0] != (countJSON{Outcome: workflows.OutcomeNotReached, Count: 0}) {
		t.Errorf("fleet --status --json: %v\n%s", err, out)
	}
}

var (
	snakeKey  = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	timestamp = regexp.MustCompile(`^\d{4}-\d\d-\d\d[T ]\d\d:`)
)

// checkJSONStyle fails unless every key is snake_case, every *_seconds is
// a number, and every *_at (and every value that looks like a timestamp) is
// RFC 3339.
func checkJSONStyle(t testing.TB, what, raw string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Errorf("%s is not JSON: %v\n%s", what, err, raw)
		return
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, val := range x {
				p := path + "." + k
				if !snakeKey.MatchString(k) {
					t.Errorf("%s: key %s is not snake_case", what, p)
				}
				if _, isNum := val.(json.Number); strings.HasSuffix(k, "_seconds") && !isNum && val != nil {
					t.Errorf("%s: %s = %v is not a number of seconds", what, p, val)
				}
				if s, isStr := val.(string); (strings.HasSuffix(k, "_at") || k == "time") && (!isStr || s == "") {
					t.Errorf("%s: %s = %v is not a timestamp", what, p, val)
				}
				walk(p, val)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		case string:
			if timestamp.MatchString(x) {
				if _, err := time.Parse(time.RFC3339Nano, x); err != nil {
					t.Errorf("%s: %s = %q is not RFC 3339: %v", what, path, x, err)
				}
			}
		}
	}
	walk("", v)
}

func TestCheckJSONStyleCatchesGoNamesAndNanoseconds(t *testing.T) {
	for _, bad := range []string{`{"WorkflowID": "x"}`, `{"a": {"backup_seconds": "1s"}}`, `{"began_at": 5}`, `["2025-01-01 10:00:00"]`} {
		var rec recorder
		checkJSONStyle(&rec, "bad", bad)
		if !rec.failed {
			t.Errorf("%s passes", bad)
		}
	}
	var rec recorder
	checkJSONStyle(&rec, "good", `{"workflow_id": "x", "timings": {"backup_seconds": 1.5}, "started_at": "2025-01-01T10:00:00.5Z", "broken": null}`)
	if rec.failed {
		t.Errorf("a good document fails: %s", rec.msg)
	}
}

// recorder lets checkJSONStyle's own test see a failure without failing.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failed = true
	r.msg += fmt.Sprintf(format, args...) + "\n"
}
