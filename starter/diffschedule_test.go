package main

import (
	"context"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// The worker's differential schedules: one per database with diff_backup,
// an interval of diff_backup.every with overlap SKIP starting a
// differential BackupCycle of it (which runs under the database's cycle
// id, one at a time with its fulls); kept paused when updated; neither an
// orphan cycle schedule nor one of `schedule list`; deleted once
// diff_backup is gone. The per-database full schedule is left alone.
func TestDiffSchedulesKeptAndRemoved(t *testing.T) {
	c := testClient(t, "tq-diff-schedule")
	ctx := context.Background()
	diffed := func(every time.Duration) *config.Config {
		return &config.Config{File: "diff.yaml", Databases: []config.Database{
			{Name: "Sales", Instance: "sql01", Policy: config.Policy{OwnsBackupChain: true, DiffBackup: config.DiffBackup{Every: every}}},
			{Name: "HR", Instance: "sql01"}}}
	}
	id := client.DiffScheduleID("sql01", "Sales")
	t.Cleanup(func() { c.DeleteSchedule(ctx, id) })
	if id != "diff/sql01/Sales" {
		t.Errorf("schedule id %q", id)
	}
	kept, deleted, err := c.EnsureDiffSchedules(ctx, diffed(6*time.Hour))
	if err != nil || len(kept) != 1 || kept[0].ScheduleID != id || kept[0].Action != "created" || len(deleted) != 0 {
		t.Fatalf("ensure: %+v, deleted %v, %v", kept, deleted, err)
	}
	d, err := sdk(t).ScheduleClient().GetHandle(ctx, id).Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := d.Schedule.Action.(*sdkclient.ScheduleWorkflowAction)
	if !ok || a.Workflow != workflows.BackupCycleName || a.ID != id || a.TaskQueue != "tq-diff-schedule" || len(a.Args) != 1 {
		t.Fatalf("action: %+v", d.Schedule.Action)
	}
	var in workflows.CycleInput
	p, _ := a.Args[0].(*commonpb.Payload)
	if err := converter.GetDefaultDataConverter().FromPayload(p, &in); err != nil || !in.Differential || in.Database != "Sales" || in.Instance != "sql01" {
		t.Fatalf("the schedule starts %+v (%v), want a differential of sql01/Sales", in, err)
	}
	if iv := d.Schedule.Spec.Intervals; len(iv) != 1 || iv[0].Every != 6*time.Hour || iv[0].Offset < 0 || iv[0].Offset >= 6*time.Hour ||
		d.Schedule.Policy.Overlap != enumspb.SCHEDULE_OVERLAP_POLICY_SKIP {
		t.Fatalf("spec %+v, policy %+v", d.Schedule.Spec, d.Schedule.Policy)
	}

	// Paused by a DBA, then every changes: updated, still paused.
	if err := c.PauseSchedule(ctx, id, "maintenance"); err != nil {
		t.Fatal(err)
	}
	if kept, _, err = c.EnsureDiffSchedules(ctx, diffed(4*time.Hour)); err != nil || len(kept) != 1 || kept[0].Action != "updated" {
		t.Fatalf("second ensure: %+v, %v", kept, err)
	}
	if d, err = sdk(t).ScheduleClient().GetHandle(ctx, id).Describe(ctx); err != nil || !d.Schedule.State.Paused ||
		d.Schedule.Spec.Intervals[0].Every != 4*time.Hour {
		t.Fatalf("after update: %+v, %v", d.Schedule, err)
	}

	// Neither an orphan nor one of the cycle schedules `schedule list` shows.
	notOrphan(t, c, id, diffed(6*time.Hour), &config.Config{File: "empty.yaml"})
	all, err := c.ListSchedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.ScheduleID == id {
			t.Errorf("the differential schedule is listed among the cycle schedules: %+v", s)
		}
	}

	// diff_backup removed: the schedule goes.
	_, deleted, err = c.EnsureDiffSchedules(ctx, diffed(0))
	if err != nil || len(deleted) != 1 || deleted[0] != id {
		t.Fatalf("ensure without diff_backup: deleted %v, %v", deleted, err)
	}
	if _, err := c.DescribeSchedule(ctx, id); err == nil || !strings.Contains(err.Error(), "no such schedule") {
		t.Errorf("after removal: %v", err)
	}
}

// `starter run --differential` starts the database's cycle asking for a
// differential; with --resume it is a usage error (a resumed set is
// finished as it was taken).
func TestRunDifferential(t *testing.T) {
	if code, _, errs := on(t, "tq-run-diff", "run", "--database", "Diffy", "--instance", "sql01", "--differential"); code != exitOK {
		t.Fatalf("run --differential: %d %s", code, errs)
	}
	id := client.CycleWorkflowID("sql01", "Diffy")
	defer terminate(t, id)
	it := sdk(t).GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ev, err := it.Next()
	if err != nil {
		t.Fatal(err)
	}
	var in workflows.CycleInput
	p := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	if len(p) != 1 {
		t.Fatalf("start event %v", ev)
	}
	if err := converter.GetDefaultDataConverter().FromPayload(p[0], &in); err != nil || !in.Differential || in.Database != "Diffy" {
		t.Fatalf("started with %+v (%v), want a differential of Diffy", in, err)
	}
	code, _, errs := on(t, "tq-run-diff", "run", "--database", "Diffy", "--instance", "sql01", "--differential", "--resume", "3")
	if code != exitUsage || !strings.Contains(errs, "without --differential") {
		t.Errorf("--differential --resume: %d %q", code, errs)
	}
}
