package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// srv is the one embedded Temporal server of this test binary (in memory,
// free ports, the product's search attributes). No worker polls its task
// queues, so started cycles stay running until a test terminates them.
var srv *devserver.Server

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := devserver.Start(ctx, devserver.Options{UIPort: devserver.NoUI, SearchAttributes: workflows.SearchAttributeTypes})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "start embedded Temporal: %v\n", err)
		os.Exit(1)
	}
	srv = s
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop embedded Temporal: %v\n", err)
	}
	os.Exit(code)
}

const site = "testdata/site.yaml"

// on runs the starter against the embedded server on its own task queue.
func on(t testing.TB, tq string, args ...string) (int, string, string) {
	t.Helper()
	return runStarter(t, append(args, "--address", srv.FrontendAddress(), "--task-queue", tq)...)
}

func sdk(t testing.TB) sdkclient.Client {
	t.Helper()
	c, err := srv.NewClient(context.Background(), sdkclient.Options{Logger: nopLog{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func testClient(t *testing.T, tq string) *client.Client {
	return client.New(sdk(t), config.Temporal{Address: srv.FrontendAddress(), Namespace: srv.Namespace(), TaskQueue: tq}, zap.NewNop())
}

type nopLog struct{}

func (nopLog) Debug(string, ...any) {}
func (nopLog) Info(string, ...any)  {}
func (nopLog) Warn(string, ...any)  {}
func (nopLog) Error(string, ...any) {}

// eventually retries f until it returns "" (visibility is eventually
// consistent) and fails with its last complaint.
func eventually(t *testing.T, f func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func terminate(t *testing.T, id string) {
	t.Helper()
	if err := sdk(t).TerminateWorkflow(context.Background(), id, "", "test done"); err != nil {
		t.Fatalf("terminate %s: %v", id, err)
	}
}

func TestRunRefusesASecondCycleOfTheSameDatabase(t *testing.T) {
	code, out, errs := on(t, "tq-run", "run", "--config", site, "--database", "Sales")
	if code != exitOK || !strings.Contains(out, "workflow backup-sql01-Sales, run ") || !strings.Contains(out, "BackupDatabase = 'Sales'") {
		t.Fatalf("first run: exit %d, out %q, err %q", code, out, errs)
	}
	code, out, errs = on(t, "tq-run", "run", "--config", site, "--database", "Sales")
	if code != exitFail || out != "" || strings.Count(errs, "\n") != 1 ||
		!strings.HasPrefix(errs, "starter: a backup cycle of Sales is already running as workflow backup-sql01-Sales (run ") {
		t.Errorf("second run: exit %d, out %q, err %q", code, out, errs)
	}
	// Through the client: the typed error, wrapping Temporal's.
	_, err := testClient(t, "tq-run").StartCycle(context.Background(), workflows.CycleInput{Database: "Sales", Instance: "sql01"})
	var already *client.AlreadyRunningError
	if !errorsAs(err, &already) || already.WorkflowID != "backup-sql01-Sales" || already.RunID == "" {
		t.Errorf("client: %v", err)
	}
	// Once it is closed, the next cycle may start (ALLOW_DUPLICATE).
	terminate(t, "backup-sql01-Sales")
	code, out, errs = on(t, "tq-run", "run", "--config", site, "--database", "Sales")
	if code != exitOK {
		t.Errorf("run after the first closed: exit %d, out %q, err %q", code, out, errs)
	}
	terminate(t, "backup-sql01-Sales")
}

func TestRunWaitWithoutWorkerTimesOutWithOneLine(t *testing.T) {
	code, out, errs := on(t, "tq-wait", "run", "--config", site, "--database", "Inventory", "--wait", "--timeout", "1s")
	defer terminate(t, "backup-sql01-Inventory")
	if code != exitFail || !strings.Contains(out, "waiting...") || strings.Count(errs, "\n") != 1 ||
		!strings.Contains(errs, "backup cycle backup-sql01-Inventory did not finish") || !strings.Contains(errs, `task queue "tq-wait"`) {
		t.Errorf("exit %d, out %q, err %q", code, out, errs)
	}
}

func TestRunUnknownDatabaseFailsBeforeDialing(t *testing.T) {
	code, _, errs := runStarter(t, "run", "--config", site, "--database", "Nope", "--address", deadAddress(t))
	if code != exitFail || !strings.Contains(errs, `database "Nope" is not configured`) {
		t.Errorf("exit %d, err %q", code, errs)
	}
}

func TestStatusShowsAttributesAndRunningCycles(t *testing.T) {
	c := sdk(t)
	ctx := context.Background()
	// A closed cycle with every attribute, as the workflow upserts them.
	db := `Sal'es\x` // quoted in the query, or (backslash) filtered client-side
	_, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: "status-closed", TaskQueue: "tq-status",
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrDatabase.ValueSet(db), workflows.AttrStep.ValueSet("copy"),
			workflows.AttrSequence.ValueSet(17), workflows.AttrServer.ValueSet("bak02"), workflows.AttrOutcome.ValueSet(workflows.OutcomeFailed)),
	}, workflows.BackupCycleName, workflows.CycleInput{Database: db})
	if err != nil {
		t.Fatal(err)
	}
	terminate(t, "status-closed")
	// A running one through the starter (no worker: its progress query cannot be answered).
	if code, _, errs := on(t, "tq-status", "run", "--database", db); code != exitOK {
		t.Fatalf("run: %s", errs)
	}
	runningID := client.CycleWorkflowID("", db)
	defer terminate(t, runningID)
	// Another database must not show up.
	if code, _, errs := on(t, "tq-status", "run", "--database", "Other"); code != exitOK {
		t.Fatalf("run: %s", errs)
	}
	defer terminate(t, "backup-Other")

	var out string
	eventually(t, func() string {
		var code int
		var errs string
		code, out, errs = on(t, "tq-status", "status", "--database", db, "--progress-timeout", "1s")
		if code != exitOK || strings.Count(out, "database "+db) != 2 {
			return fmt.Sprintf("status: exit %d, out %q, err %q", code, out, errs)
		}
		return ""
	})
	lines := strings.Split(out, "\n")
	// Newest first: the running one, then the terminated one with its attributes.
	if !strings.HasPrefix(lines[0], runningID+"  Running  database "+db+"  step -") {
		t.Errorf("first line %q", lines[0])
	}
	if !strings.Contains(out, "progress: no answer to the progress query within the timeout (is a worker polling task queue \"tq-status\"?)") {
		t.Errorf("no progress note in %q", out)
	}
	if !strings.Contains(out, "status-closed  Terminated  database "+db+"  step copy  seq 17  server bak02  outcome failed") ||
		!strings.Contains(out, ", closed ") {
		t.Errorf("closed cycle missing in %q", out)
	}
	if strings.Contains(out, "backup-Other") {
		t.Errorf("other database listed: %q", out)
	}
	// --limit 1 keeps the newest only.
	code, out, _ := on(t, "tq-status", "status", "--database", db, "--limit", "1", "--progress-timeout", "100ms")
	if code != exitOK || strings.Contains(out, "status-closed") || !strings.Contains(out, runningID) {
		t.Errorf("--limit 1: %q", out)
	}
	// A quote in the name goes through the server-side query.
	if code, _, errs := on(t, "tq-status", "run", "--database", "O'Brien"); code != exitOK {
		t.Fatalf("run: %s", errs)
	}
	defer terminate(t, client.CycleWorkflowID("", "O'Brien"))
	eventually(t, func() string {
		code, out, errs := on(t, "tq-status", "status", "--database", "O'Brien", "--progress-timeout", "100ms")
		if code != exitOK || strings.Count(out, "Running  database O'Brien") != 1 || strings.Contains(out, "Sal'es") {
			return fmt.Sprintf("O'Brien: exit %d, out %q, err %q", code, out, errs)
		}
		return ""
	})
	if code, _, errs := on(t, "tq-status", "status", "--limit", "0"); code != exitUsage || !strings.Contains(errs, "--limit 0: give 1 or more") {
		t.Errorf("--limit 0: exit %d %q", code, errs)
	}
}

func TestScheduleApplyListPauseTriggerDelete(t *testing.T) {
	tq := "tq-schedule"
	code, out, errs := on(t, tq, "--config", site, "schedule", "apply", "--cron", "30 2 * * *", "--jitter", "20m")
	if code != exitOK || !strings.Contains(out, "created schedule backup-sql01-Sales for sql01/Sales: cron \"30 2 * * *\", jitter 20m0s, overlap skip; next runs 20") ||
		!strings.Contains(out, "created schedule backup-sql01-Inventory for sql01/Inventory") {
		t.Fatalf("apply: exit %d, out %q, err %q", code, out, errs)
	}
	t.Cleanup(func() {
		on(t, tq, "schedule", "delete", "backup-sql01-Sales")
		on(t, tq, "schedule", "delete", "backup-sql01-Inventory")
	})
	// The next runs honour cron + jitter: 02:30 to 02:50 UTC.
	c := testClient(t, tq)
	ctx := context.Background()
	s, err := c.DescribeSchedule(ctx, "backup-sql01-Sales")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.NextRuns) == 0 || s.Database != "Sales" || s.Paused || strings.Join(s.Cron, "") != "30 2 * * *" ||
		s.Overlap != enumspb.SCHEDULE_OVERLAP_POLICY_SKIP || s.CatchupWindow != client.DefaultCatchupWindow || s.Jitter != 20*time.Minute {
		t.Fatalf("described: %+v", s)
	}
	for _, n := range s.NextRuns {
		n = n.UTC()
		if n.Hour() != 2 || n.Minute() < 30 || n.Minute() > 50 {
			t.Errorf("next run %s is outside 02:30-02:50", n)
		}
	}

	// Pause (by database name), then apply again: updated, still paused.
	if code, out, errs := on(t, tq, "schedule", "pause", "Sales", "--config", site, "--note", "disk swap"); code != exitOK || !strings.Contains(out, "schedule backup-sql01-Sales: pause done") {
		t.Fatalf("pause: %d %q %q", code, out, errs)
	}
	code, out, _ = on(t, tq, "schedule", "apply", "--config", site, "--cron", "0 3 * * *", "--catchup-window", "1h")
	if code != exitOK || strings.Count(out, "updated schedule") != 2 || strings.Contains(out, "created") {
		t.Errorf("second apply: %q", out)
	}
	if s, _ = c.DescribeSchedule(ctx, "backup-sql01-Sales"); !s.Paused || s.Note != "disk swap" || strings.Join(s.Cron, "") != "0 3 * * *" ||
		s.CatchupWindow != time.Hour || s.Overlap != enumspb.SCHEDULE_OVERLAP_POLICY_SKIP {
		t.Errorf("after update: %+v", s)
	}

	eventually(t, func() string {
		code, out, errs = on(t, tq, "schedule", "list")
		if code != exitOK || !strings.Contains(out, "backup-sql01-Sales  database Sales  PAUSED  cron 0 3 * * * jitter 0s") ||
			!strings.Contains(out, "backup-sql01-Inventory  database Inventory  active") || !strings.Contains(out, "note: disk swap") {
			return fmt.Sprintf("list: exit %d, out %q, err %q", code, out, errs)
		}
		return ""
	})

	// A schedule of a database that is not in the configuration is named
	// on apply, not touched.
	other := &config.Config{File: "other.yaml", Databases: []config.Database{{Name: "Gone", Instance: "sql09"}}}
	if _, err := c.ApplySchedules(ctx, other, client.ScheduleSpec{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteSchedule(ctx, "backup-sql09-Gone") })
	eventually(t, func() string {
		code, out, errs = on(t, tq, "schedule", "apply", "--config", site)
		if code != exitOK || !strings.Contains(out, "not in testdata/site.yaml: schedule backup-sql09-Gone (database Gone) still runs; remove it with `starter schedule delete backup-sql09-Gone`") {
			return fmt.Sprintf("apply with an orphan: exit %d, out %q, err %q", code, out, errs)
		}
		return ""
	})

	// Trigger starts a cycle now, with the schedule's workflow id prefix.
	if code, _, errs := on(t, tq, "schedule", "trigger", "backup-sql01-Inventory"); code != exitOK {
		t.Fatalf("trigger: %q", errs)
	}
	eventually(t, func() string {
		s, err := c.DescribeSchedule(ctx, "backup-sql01-Inventory")
		if err != nil || s.Running != 1 || !strings.HasPrefix(s.LastWorkflowID, "backup-sql01-Inventory-") {
			return fmt.Sprintf("after trigger: %+v, %v", s, err)
		}
		return ""
	})
	s, _ = c.DescribeSchedule(ctx, "backup-sql01-Inventory")
	desc, err := sdk(t).DescribeWorkflowExecution(ctx, s.LastWorkflowID, "")
	if err != nil || desc.GetWorkflowExecutionInfo().GetType().GetName() != workflows.BackupCycleName {
		t.Errorf("triggered workflow: %v, %v", desc, err)
	}
	terminate(t, s.LastWorkflowID)

	// Delete, then the name is unknown with a clear line.
	if code, _, errs := on(t, tq, "schedule", "delete", "Inventory"); code != exitOK {
		t.Fatalf("delete: %q", errs)
	}
	code, _, errs = on(t, tq, "schedule", "pause", "backup-sql01-Inventory")
	if code != exitFail || !strings.Contains(errs, "pause schedule backup-sql01-Inventory: no such schedule") || strings.Count(errs, "\n") != 1 {
		t.Errorf("pause deleted: %d %q", code, errs)
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// notOrphan waits for schedule id to be listed, then checks that no
// configuration of cfgs calls it an orphan cycle schedule: it is the
// worker's.
func notOrphan(t *testing.T, c *client.Client, id string, cfgs ...*config.Config) {
	t.Helper()
	ctx := context.Background()
	eventually(t, func() string {
		it, err := sdk(t).ScheduleClient().List(ctx, sdkclient.ScheduleListOptions{})
		for err == nil && it.HasNext() {
			var e *sdkclient.ScheduleListEntry
			if e, err = it.Next(); err == nil && e.ID == id {
				return ""
			}
		}
		return fmt.Sprintf("schedule %s not listed yet (%v)", id, err)
	})
	for _, cfg := range cfgs {
		orphans, err := c.OrphanSchedules(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range orphans {
			if o.ScheduleID == id {
				t.Errorf("%s: schedule %s is listed as an orphan cycle schedule: %+v", cfg.File, id, o)
			}
		}
	}
}

// The worker's drill schedules: one per database with drill:, an interval
// of drill.every with overlap SKIP starting a Drill of it; kept paused
// when updated; not orphan cycle schedules; deleted once drill: is gone.
func TestDrillSchedulesKeptAndRemoved(t *testing.T) {
	c := testClient(t, "tq-drill-schedule")
	ctx := context.Background()
	drilled := func(every time.Duration) *config.Config {
		return &config.Config{File: "drill.yaml", Databases: []config.Database{
			{Name: "Sales", Instance: "sql01", Policy: config.Policy{Drill: config.Drill{Every: every}}},
			{Name: "HR", Instance: "sql01"}}}
	}
	id := client.DrillScheduleID("sql01", "Sales")
	t.Cleanup(func() { c.DeleteSchedule(ctx, id) })
	kept, deleted, err := c.EnsureDrillSchedules(ctx, drilled(24*time.Hour))
	if err != nil || len(kept) != 1 || kept[0].ScheduleID != id || kept[0].Action != "created" || len(deleted) != 0 || len(kept[0].NextRuns) == 0 {
		t.Fatalf("ensure: %+v, deleted %v, %v", kept, deleted, err)
	}
	if id != "drill/sql01/Sales" {
		t.Errorf("schedule id %q", id)
	}
	d, err := sdk(t).ScheduleClient().GetHandle(ctx, id).Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := d.Schedule.Action.(*sdkclient.ScheduleWorkflowAction)
	if !ok || a.Workflow != workflows.DrillName || a.ID != id || a.TaskQueue != "tq-drill-schedule" {
		t.Fatalf("action: %+v", d.Schedule.Action)
	}
	if iv := d.Schedule.Spec.Intervals; len(iv) != 1 || iv[0].Every != 24*time.Hour || iv[0].Offset < 0 || iv[0].Offset >= 24*time.Hour ||
		d.Schedule.Policy.Overlap != enumspb.SCHEDULE_OVERLAP_POLICY_SKIP {
		t.Fatalf("spec %+v, policy %+v", d.Schedule.Spec, d.Schedule.Policy)
	}
	if next := d.Info.NextActionTimes; len(next) < 2 || next[1].Sub(next[0]) != 24*time.Hour {
		t.Errorf("next runs %v, want a day apart", next)
	}

	// Paused by a DBA, then drill.every changes: updated, still paused.
	if err := c.PauseSchedule(ctx, id, "maintenance"); err != nil {
		t.Fatal(err)
	}
	if kept, _, err = c.EnsureDrillSchedules(ctx, drilled(12*time.Hour)); err != nil || len(kept) != 1 || kept[0].Action != "updated" {
		t.Fatalf("second ensure: %+v, %v", kept, err)
	}
	if d, err = sdk(t).ScheduleClient().GetHandle(ctx, id).Describe(ctx); err != nil || !d.Schedule.State.Paused ||
		d.Schedule.Spec.Intervals[0].Every != 12*time.Hour {
		t.Fatalf("after update: %+v, %v", d.Schedule, err)
	}

	// Not an orphan cycle schedule, whichever configuration is asked.
	notOrphan(t, c, id, drilled(24*time.Hour), &config.Config{File: "empty.yaml"})

	// drill: removed: the schedule goes.
	_, deleted, err = c.EnsureDrillSchedules(ctx, drilled(0))
	if err != nil || len(deleted) != 1 || deleted[0] != id {
		t.Fatalf("ensure without drill: deleted %v, %v", deleted, err)
	}
	if _, err := c.DescribeSchedule(ctx, id); err == nil || !strings.Contains(err.Error(), "no such schedule") {
		t.Errorf("after removal: %v", err)
	}
}

// The drill and differential schedules of a database an instance's
// selection picks: a fleet run keeps them (KeepSelectedSchedules, as the
// worker keeps the entries'), and the worker, which knows only the
// entries, leaves them while the instance selects and defaults: has the
// key; once defaults: drops it, they go.
func TestSelectedDatabasesKeepTheirSchedules(t *testing.T) {
	c := testClient(t, "tq-selected-schedules")
	ctx := context.Background()
	cfgOf := func(on bool) *config.Config {
		cfg := &config.Config{File: "selected.yaml", SQLInstances: []config.SQLInstance{{Name: "sql01", Databases: []string{"USER_DATABASES"}}},
			Databases: []config.Database{{Name: "Sales", Instance: "sql01"}}}
		if on {
			cfg.Defaults.Drill, cfg.Defaults.DiffBackup = config.Drill{Every: 24 * time.Hour}, config.DiffBackup{Every: 6 * time.Hour}
		}
		return cfg
	}
	archive := &config.Database{Name: "Archive", Instance: "sql01", Policy: cfgOf(true).Defaults}
	drill, diff := client.DrillScheduleID("sql01", "Archive"), client.DiffScheduleID("sql01", "Archive")
	t.Cleanup(func() { c.DeleteSchedule(ctx, drill); c.DeleteSchedule(ctx, diff) })
	ids, err := c.KeepSelectedSchedules(ctx, []*config.Database{archive}, []*config.Database{archive})
	if err != nil || !slices.Equal(ids, []string{drill, diff}) {
		t.Fatalf("kept %v, %v; want %s and %s", ids, err, drill, diff)
	}
	d, err := sdk(t).ScheduleClient().GetHandle(ctx, drill).Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := d.Schedule.Action.(*sdkclient.ScheduleWorkflowAction); !ok || a.Workflow != workflows.DrillName || a.ID != drill ||
		d.Schedule.Spec.Intervals[0].Every != 24*time.Hour {
		t.Fatalf("drill schedule %+v", d.Schedule)
	}
	// Listed (visibility is eventually consistent), the worker's keeping
	// of the entries' leaves them.
	eventually(t, func() string {
		for _, id := range []string{drill, diff} {
			if s, err := c.DescribeSchedule(ctx, id); err != nil || !listed(ctx, t, id) {
				return fmt.Sprintf("schedule %s not listed yet (%+v, %v)", id, s, err)
			}
		}
		return ""
	})
	for what, ensure := range map[string]func(context.Context, *config.Config) ([]client.ScheduleResult, []string, error){
		"drill": c.EnsureDrillSchedules, "differential": c.EnsureDiffSchedules} {
		if _, deleted, err := ensure(ctx, cfgOf(true)); err != nil || len(deleted) != 0 {
			t.Fatalf("the worker's %s schedules: deleted %v, %v; want the selected database's left", what, deleted, err)
		}
		if _, deleted, err := ensure(ctx, cfgOf(false)); err != nil || len(deleted) != 1 {
			t.Fatalf("the worker's %s schedules, defaults: without it: deleted %v, %v; want the selected database's", what, deleted, err)
		}
	}
}

// listed reports whether the namespace's schedule listing shows id.
func listed(ctx context.Context, t *testing.T, id string) bool {
	it, err := sdk(t).ScheduleClient().List(ctx, sdkclient.ScheduleListOptions{PageSize: 1000})
	if err != nil {
		return false
	}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return false
		}
		if e.ID == id {
			return true
		}
	}
	return false
}
