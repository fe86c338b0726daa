package client

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/workflows"
)

// DrillScheduleNote is shown with every drill schedule in the Web UI.
const DrillScheduleNote = "backupcycle: one recovery drill of this database per run (drill.every); kept by the worker from the configuration; " +
	"a run is skipped while the previous drill still runs"

// DrillScheduleID is the id of the drill schedule of (instance, database):
// the drills' workflow id, to which Temporal appends each run's start time.
func DrillScheduleID(instance, database string) string {
	return workflows.DrillWorkflowID(instance, database)
}

// drillOffset spreads the drills of databases with one drill.every over
// the interval, so they do not all restore at the same moment: a phase of
// the database's own, stable across restarts.
func drillOffset(db *config.Database, every time.Duration) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(db.Instance + "\x00" + db.Name))
	return time.Duration(h.Sum64()%uint64(every/time.Second)) * time.Second
}

// EnsureDrillSchedules keeps one Temporal Schedule per database of cfg with
// drill: (its databases: entries): created or updated to start a Drill
// every drill.every (overlap SKIP: a drill that comes due while the
// previous one runs is skipped; an existing schedule keeps its paused
// state), and deletes the drill schedules of databases that no longer have
// drill:. The error joins the schedules that could not be kept or
// deleted; the others are handled anyway.
func (c *Client) EnsureDrillSchedules(ctx context.Context, cfg *config.Config) (kept []ScheduleResult, deleted []string, err error) {
	var errs []error
	want := map[string]bool{}
	for i := range cfg.Databases {
		db := &cfg.Databases[i]
		if !db.Drills() {
			continue
		}
		id := DrillScheduleID(db.Instance, db.Name)
		want[id] = true
		in := workflows.DrillInput{Database: db.Name, Instance: db.Instance}
		every := db.Drill.Every
		sspec := sdkclient.ScheduleSpec{Intervals: []sdkclient.ScheduleIntervalSpec{{Every: every, Offset: drillOffset(db, every)}}}
		action := &sdkclient.ScheduleWorkflowAction{
			ID:                    id,
			Workflow:              workflows.DrillName,
			Args:                  []any{in},
			TaskQueue:             c.taskQueue,
			TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrDatabase.ValueSet(db.Name), workflows.AttrInstance.ValueSet(db.Instance)),
			StaticSummary:         "scheduled drill " + workflows.CycleSummary(db.Instance, db.Name, "", ""),
		}
		// A drill missed while Temporal was down still starts within
		// the cycles' catch-up window, or within every when shorter.
		policy := &sdkclient.SchedulePolicies{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, CatchupWindow: min(DefaultCatchupWindow, every)}
		res, e := c.upsertSchedule(ctx, id, sspec, action, policy, DrillScheduleNote)
		res.Database = db.ID()
		if e != nil {
			errs = append(errs, fmt.Errorf("drill schedule %s of database %s: %w", id, db.ID(), e))
			continue
		}
		kept = append(kept, res)
	}
	ids, e := c.scheduleIDs(ctx, workflows.DrillName)
	if e != nil {
		errs = append(errs, e)
	}
	for _, id := range ids {
		if want[id] {
			continue
		}
		err := c.sdk.ScheduleClient().GetHandle(ctx, id).Delete(ctx)
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			// deleted since the (eventually consistent) listing
		case err != nil:
			errs = append(errs, c.scheduleErr("delete", id, err))
		default:
			deleted = append(deleted, id)
		}
	}
	return kept, deleted, errors.Join(errs...)
}
