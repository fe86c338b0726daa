package client

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
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

// DiffScheduleNote is shown with every differential schedule in the Web UI.
const DiffScheduleNote = "backupcycle: one differential backup of this database per run (diff_backup.every), taken, copied and proven " +
	"on its base like a full; kept by the worker from the configuration; a run ends skipped while another cycle of the database runs"

// DiffSchedulePrefix starts the id of every differential schedule.
const DiffSchedulePrefix = "diff/"

// DiffScheduleID is the id of the differential schedule of (instance,
// database), and the workflow id (Temporal appends each run's start time)
// of the start that runs the differential under the database's own cycle
// id: one cycle of a database at a time, full or differential.
func DiffScheduleID(instance, database string) string {
	return workflows.DiffStartID(instance, database)
}

// scheduleOffset spreads the schedules of databases with one interval over
// it, so they do not all run at the same moment: a phase of the
// database's own, stable across restarts.
func scheduleOffset(db *config.Database, every time.Duration) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(db.Instance + "\x00" + db.Name))
	return time.Duration(h.Sum64()%uint64(every/time.Second)) * time.Second
}

// kept is one schedule the worker keeps from the configuration: every
// `every`, overlap SKIP, starting workflow with args under id.
type kept struct {
	id       string
	db       *config.Database
	every    time.Duration
	workflow string
	args     any
	summary  string
}

// keepSchedules creates or updates each schedule of want (an existing
// schedule keeps its paused state) and deletes those of have that want
// does not name; what names them in errors ("drill schedule"). The error
// joins the schedules that could not be kept or deleted; the others are
// handled anyway.
func (c *Client) keepSchedules(ctx context.Context, want []kept, have []string, what, note string) (done []ScheduleResult, deleted []string, err error) {
	var errs []error
	wanted := map[string]bool{}
	for _, k := range want {
		wanted[k.id] = true
		sspec := sdkclient.ScheduleSpec{Intervals: []sdkclient.ScheduleIntervalSpec{{Every: k.every, Offset: scheduleOffset(k.db, k.every)}}}
		action := &sdkclient.ScheduleWorkflowAction{
			ID:                    k.id,
			Workflow:              k.workflow,
			Args:                  []any{k.args},
			TaskQueue:             c.taskQueue,
			TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrDatabase.ValueSet(k.db.Name), workflows.AttrInstance.ValueSet(k.db.Instance)),
			StaticSummary:         k.summary + " " + workflows.CycleSummary(k.db.Instance, k.db.Name, "", ""),
		}
		// A run missed while Temporal was down still starts within the
		// cycles' catch-up window, or within every when shorter.
		policy := &sdkclient.SchedulePolicies{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, CatchupWindow: min(DefaultCatchupWindow, k.every)}
		res, e := c.upsertSchedule(ctx, k.id, sspec, action, policy, note)
		res.Database = k.db.ID()
		if e != nil {
			errs = append(errs, fmt.Errorf("%s %s of database %s: %w", what, k.id, k.db.ID(), e))
			continue
		}
		done = append(done, res)
	}
	for _, id := range have {
		if wanted[id] {
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
	return done, deleted, errors.Join(errs...)
}

// EnsureDrillSchedules keeps one Temporal Schedule per database of cfg with
// drill: (its databases: entries): created or updated to start a Drill
// every drill.every (overlap SKIP: a drill that comes due while the
// previous one runs is skipped; an existing schedule keeps its paused
// state), and deletes the drill schedules of databases that no longer have
// drill:, but for those a fleet run keeps for the databases an instance's
// selection picks while defaults: has drill: (KeepSelectedSchedules). The
// error joins the schedules that could not be kept or deleted; the others
// are handled anyway.
func (c *Client) EnsureDrillSchedules(ctx context.Context, cfg *config.Config) (done []ScheduleResult, deleted []string, err error) {
	var want []kept
	for i := range cfg.Databases {
		if db := &cfg.Databases[i]; db.Drills() {
			want = append(want, drillKept(db))
		}
	}
	have, err := c.scheduleIDs(ctx, workflows.DrillName)
	have = notSelected(cfg, have, cfg.Defaults.Drills(), workflows.DrillIDPrefix, DrillScheduleID)
	done, deleted, kerr := c.keepSchedules(ctx, want, have, "drill schedule", DrillScheduleNote)
	return done, deleted, errors.Join(err, kerr)
}

// EnsureDiffSchedules keeps one Temporal Schedule per database of cfg with
// diff_backup (its databases: entries): created or updated to start a
// differential BackupCycle every diff_backup.every (overlap SKIP; the
// cycle it starts runs under the database's own cycle id, so a
// differential that comes due while a cycle of the database runs ends
// skipped; an existing schedule keeps its paused state), and deletes the
// differential schedules of databases that no longer have diff_backup, but
// for those a fleet run keeps for selected databases, as
// EnsureDrillSchedules.
func (c *Client) EnsureDiffSchedules(ctx context.Context, cfg *config.Config) (done []ScheduleResult, deleted []string, err error) {
	var want []kept
	for i := range cfg.Databases {
		if db := &cfg.Databases[i]; db.DiffBackups() {
			want = append(want, diffKept(db))
		}
	}
	ids, err := c.scheduleIDs(ctx, workflows.BackupCycleName)
	var have []string
	for _, id := range ids {
		if strings.HasPrefix(id, DiffSchedulePrefix) {
			have = append(have, id)
		}
	}
	have = notSelected(cfg, have, cfg.Defaults.DiffBackups(), workflows.DiffIDPrefix, DiffScheduleID)
	done, deleted, kerr := c.keepSchedules(ctx, want, have, "differential schedule", DiffScheduleNote)
	return done, deleted, errors.Join(err, kerr)
}

// KeepSelectedSchedules keeps the drill schedules of drills and the
// differential schedules of diffs, databases an instance's selection picks
// (a fleet run resolves them; the worker's start knows only the entries),
// exactly as the worker keeps the entries', and deletes none. It returns
// the ids kept; the error joins those that could not be.
func (c *Client) KeepSelectedSchedules(ctx context.Context, drills, diffs []*config.Database) ([]string, error) {
	var ids []string
	var errs []error
	for _, k := range []struct {
		dbs  []*config.Database
		of   func(*config.Database) kept
		what string
		note string
	}{{drills, drillKept, "drill schedule", DrillScheduleNote}, {diffs, diffKept, "differential schedule", DiffScheduleNote}} {
		var want []kept
		for _, db := range k.dbs {
			want = append(want, k.of(db))
		}
		done, _, err := c.keepSchedules(ctx, want, nil, k.what, k.note)
		for _, r := range done {
			ids = append(ids, r.ScheduleID)
		}
		errs = append(errs, err)
	}
	return ids, errors.Join(errs...)
}

// drillKept is the drill schedule of db.
func drillKept(db *config.Database) kept {
	return kept{id: DrillScheduleID(db.Instance, db.Name), db: db, every: db.Drill.Every, workflow: workflows.DrillName,
		args: workflows.DrillInput{Database: db.Name, Instance: db.Instance}, summary: "scheduled drill"}
}

// diffKept is the differential schedule of db.
func diffKept(db *config.Database) kept {
	return kept{id: DiffScheduleID(db.Instance, db.Name), db: db, every: db.DiffBackup.Every, workflow: workflows.BackupCycleName,
		args: workflows.CycleInput{Database: db.Name, Instance: db.Instance, Differential: true}, summary: "scheduled differential"}
}

// notSelected are the schedule ids of have but those a fleet run keeps for
// databases a selection picks: with the key on under defaults: (on), the
// ids of every instance with a selection, or group with a replica that has
// one (prefix gives their start), that are no databases: entry's (id gives
// an entry's). Such a schedule goes when its instance selects no more or
// defaults: drops the key; one of a database dropped meanwhile stays until
// then, its runs failing with the database not found.
func notSelected(cfg *config.Config, have []string, on bool, prefix func(instance string) string,
	id func(instance, database string) string) []string {
	if !on {
		return have
	}
	var prefixes []string
	selects := func(name string) bool {
		in, ok := cfg.SQLInstance(name)
		return ok && len(in.Databases) > 0
	}
	for _, in := range cfg.SQLInstances {
		if selects(in.Name) {
			prefixes = append(prefixes, prefix(in.Name))
		}
	}
	for _, g := range cfg.AvailabilityGroups {
		if slices.ContainsFunc(g.Replicas, selects) {
			prefixes = append(prefixes, prefix(g.Name))
		}
	}
	entries := map[string]bool{}
	for _, db := range cfg.Databases {
		entries[id(db.Instance, db.Name)] = true
	}
	return slices.DeleteFunc(have, func(h string) bool {
		return !entries[h] && slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(h, p) })
	})
}
