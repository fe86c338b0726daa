package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// reloadSite is a config whose SQL instance listens nowhere: the plan of a
// cycle still completes (it reports an unreadable source as a warning),
// which is what shows that the worker found the database in its config.
const reloadSite = `temporal:
  address: %[1]s
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
    location: %[2]s/bak01
    verify_instance: verify
    restore_data_dir: /data
    restore_log_dir: /log
  - name: bak02
    unc_paths: ['/var/opt/mssql/backup/bak02']
    location: %[2]s/bak02
    verify_instance: verify
    restore_data_dir: /data
    restore_log_dir: /log
databases:
  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
`

// A database added to the config file of a running worker is backed up
// without a restart; before that, the cycle's "not configured" error names
// the file and says the worker re-reads it, and an edit that does not load
// leaves the worker running on the configuration in force.
func TestWorkerPicksUpADatabaseAddedToItsConfig(t *testing.T) {
	ctx := context.Background()
	srv, cfgFile, site := siteWithDeadInstance(t)

	out := runWorker(t, "--config", cfgFile)
	if !strings.Contains(out.String(), "  config:  "+cfgFile+" (re-read when it changes and on SIGHUP)") {
		t.Errorf("the ready banner does not say the config is re-read:\n%s", out)
	}
	c, err := client.Dial(ctx, config.Temporal{Address: srv.FrontendAddress()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	orders := workflows.CycleInput{Instance: "sql01", Database: "Orders"}

	notConfigured := func(when string) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, time.Minute)
		defer rcancel()
		_, err := c.RunCycle(rctx, orders)
		for _, want := range []string{
			fmt.Sprintf(`database "Orders" is not configured in %s`, cfgFile),
			fmt.Sprintf("this worker re-reads %s when it changes and on SIGHUP, no restart needed", cfgFile),
		} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: cycle of Orders: err = %v, want it to say %q", when, err, want)
			}
		}
	}
	notConfigured("before the edit")

	// An edit that does not load (Orders without its instance) is logged and
	// the worker keeps the configuration in force.
	bad := site + "  - name: Orders\n    backup_servers: [bak01, bak02]\n"
	if err := os.WriteFile(cfgFile, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(cfgFile); err == nil {
		t.Fatal("the broken edit loads: the test no longer tests a failed reload")
	}
	time.Sleep(2 * configPoll) // the poll has met the broken file
	notConfigured("after an edit that does not load")

	// Fixed: the next cycle of Orders gets past its plan.
	good := site + "  - name: Orders\n    instance: sql01\n    backup_servers: [bak01, bak02]\n"
	if err := os.WriteFile(cfgFile, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	wf, err := c.StartCycle(ctx, orders)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = c.SDK().TerminateWorkflow(ctx, wf.GetID(), wf.GetRunID(), "test done")
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		// The plan's resolution of the name on the instance, or a later
		// step, fails on the unusable instance (no password, nothing
		// listening): what counts is that the configuration knew Orders.
		planned, failure := planOutcome(t, c.SDK(), wf.GetID(), wf.GetRunID())
		if planned || failure != "" && strings.Contains(failure, "SQL instance sql01") && !strings.Contains(failure, "not configured") {
			break
		}
		if failure != "" {
			t.Fatalf("cycle of Orders after the database was added: %s", failure)
		}
		if time.Now().After(deadline) {
			t.Fatal("the cycle of Orders did not complete its plan within 1m of the database being added")
		}
	}
}

// planOutcome reads a cycle's history: whether its PlanCycle activity
// completed, and the workflow's failure message if it failed.
func planOutcome(t *testing.T, c sdkclient.Client, id, runID string) (planned bool, failure string) {
	t.Helper()
	plans := map[int64]bool{}
	it := c.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "PlanCycle" {
			plans[ev.GetEventId()] = true
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && plans[a.GetScheduledEventId()] {
			planned = true
		}
		if a := ev.GetWorkflowExecutionFailedEventAttributes(); a != nil {
			failure = a.GetFailure().GetMessage()
		}
	}
	return planned, failure
}

// runWorker runs the worker in this process until the test ends (then it
// must stop with exit code 0) and returns its stdout once it is ready.
func runWorker(t *testing.T, args ...string) *syncBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	out := &syncBuffer{}
	go func() { done <- run(ctx, args, out, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("worker %v: exit code after cancel = %d, want 0\nstdout:\n%s", args, code, out)
		}
	})
	for deadline := time.Now().Add(time.Minute); !strings.Contains(out.String(), "backupcycle worker ready"); time.Sleep(50 * time.Millisecond) {
		select {
		case code := <-done:
			done <- code
			t.Fatalf("worker %v exited %d before it was ready:\n%s", args, code, out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %v not ready within 1m:\n%s", args, out)
		}
	}
	return out
}

// siteWithDeadInstance starts a Temporal server and writes reloadSite for
// it: the server, the config file and its text.
func siteWithDeadInstance(t *testing.T) (*devserver.Server, string, string) {
	t.Helper()
	srv, err := devserver.Start(context.Background(), devserver.Options{UIPort: devserver.NoUI, SearchAttributes: workflows.SearchAttributeTypes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() }) // after the worker's cleanup: registered first
	dir := t.TempDir()
	for _, d := range []string{"bak01", "bak02"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfgFile := filepath.Join(dir, "backupcycle.yaml")
	site := fmt.Sprintf(reloadSite, srv.FrontendAddress(), dir)
	if err := os.WriteFile(cfgFile, []byte(site), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, cfgFile, site
}

// A drill: added to the config file of a running worker gets its drill
// schedule without a restart, and loses it when drill: is removed again.
func TestWorkerKeepsDrillSchedulesAsItsConfigChanges(t *testing.T) {
	ctx := context.Background()
	srv, cfgFile, site := siteWithDeadInstance(t)
	runWorker(t, "--config", cfgFile)
	c, err := client.Dial(ctx, config.Temporal{Address: srv.FrontendAddress()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id := client.DrillScheduleID("sql01", "Sales")
	exists := func() bool {
		_, err := c.SDK().ScheduleClient().GetHandle(ctx, id).Describe(ctx)
		return err == nil
	}
	waitFor := func(want bool, what string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for exists() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: schedule %s exists %v after a minute, want %v", what, id, !want, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if exists() {
		t.Fatalf("schedule %s exists before any drill: was configured", id)
	}
	withDrill := site + "    drill: {every: 24h}\n"
	if err := os.WriteFile(cfgFile, []byte(withDrill), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(true, "drill: added")
	if err := os.WriteFile(cfgFile, []byte(site), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(false, "drill: removed")
}
