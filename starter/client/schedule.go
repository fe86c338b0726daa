package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/workflows"
)

// ScheduleSpec is when the backup cycles of every configured database run.
// The configuration has no per-database schedule key yet, so one spec applies
// to all of them (from `starter schedule apply --cron ... --jitter ...`).
type ScheduleSpec struct {
	// Cron is a five-field cron expression, e.g. "0 1 * * *" (01:00 daily).
	Cron string
	// Jitter spreads the start of each database's cycle by up to this long,
	// so many databases do not hit the backup servers at the same second.
	Jitter time.Duration
	// TimeZone of Cron (IANA name); "" is UTC.
	TimeZone string
	// CatchupWindow: a run missed while Temporal was down still starts if it
	// is at most this late.
	CatchupWindow time.Duration
}

// Defaults of ScheduleSpec.
const (
	DefaultCron          = "0 1 * * *"
	DefaultCatchupWindow = 6 * time.Hour
)

// ScheduleNote is shown with every schedule in the Web UI.
const ScheduleNote = "backupcycle: one verified backup cycle of this database per run; a run is skipped while the previous one still runs"

// ScheduleID is the id of the schedule of one database (the same as its
// cycles' workflow id; Temporal appends the start time to the workflow ids
// of scheduled runs).
func ScheduleID(instance, database string) string { return CycleWorkflowID(instance, database) }

// ScheduleResult is what ApplySchedules did to one database's schedule.
type ScheduleResult struct {
	ScheduleID string
	Database   string // instance/name
	Action     string // "created" or "updated"
	NextRuns   []time.Time
}

// ScheduleSummary is one BackupCycle schedule as Temporal has it.
type ScheduleSummary struct {
	ScheduleID     string
	Database       string // from the BackupDatabase search attribute of its action
	Cron           []string
	Jitter         time.Duration
	TimeZone       string
	Paused         bool
	Note           string
	Overlap        enumspb.ScheduleOverlapPolicy
	CatchupWindow  time.Duration
	NextRuns       []time.Time
	LastRun        time.Time // zero if it never ran
	LastWorkflowID string
	Running        int
}

func (s ScheduleSpec) withDefaults() ScheduleSpec {
	if s.Cron == "" {
		s.Cron = DefaultCron
	}
	if s.CatchupWindow == 0 {
		s.CatchupWindow = DefaultCatchupWindow
	}
	return s
}

func (s ScheduleSpec) validate() error {
	if n := len(strings.Fields(s.Cron)); n != 5 {
		return fmt.Errorf("schedule cron %q has %d fields; give five (minute hour day-of-month month day-of-week), e.g. %q", s.Cron, n, DefaultCron)
	}
	if s.Jitter < 0 {
		return fmt.Errorf("schedule jitter %s is negative; give 0 or a positive duration such as 30m", s.Jitter)
	}
	if s.CatchupWindow < 10*time.Second {
		// Temporal's own minimum.
		return fmt.Errorf("schedule catch-up window %s is below Temporal's minimum of 10s; give e.g. 6h", s.CatchupWindow)
	}
	if s.TimeZone != "" {
		if _, err := time.LoadLocation(s.TimeZone); err != nil {
			return fmt.Errorf("schedule time zone %q is unknown: give an IANA name such as Europe/Berlin (%v)", s.TimeZone, err)
		}
	}
	return nil
}

func (c *Client) scheduleParts(db *config.Database, spec ScheduleSpec) (sdkclient.ScheduleSpec, *sdkclient.ScheduleWorkflowAction, *sdkclient.SchedulePolicies) {
	in := workflows.CycleInput{Database: db.Name, Instance: db.Instance}
	opts := c.cycleOptions(in)
	action := &sdkclient.ScheduleWorkflowAction{
		ID:                    opts.ID,
		Workflow:              workflows.BackupCycleName,
		Args:                  []any{in},
		TaskQueue:             c.taskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(cycleAttributes(in)...),
		StaticSummary:         "scheduled: " + workflows.CycleSummary(db.Instance, db.Name, "", ""),
	}
	return sdkclient.ScheduleSpec{CronExpressions: []string{spec.Cron}, Jitter: spec.Jitter, TimeZoneName: spec.TimeZone},
		action,
		&sdkclient.SchedulePolicies{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, CatchupWindow: spec.CatchupWindow}
}

// ApplySchedules creates or updates one Temporal Schedule per database of
// cfg (idempotent: applying twice leaves the same schedules). An existing
// schedule keeps its paused state. Overlap is SKIP: a run that comes due
// while the previous cycle still runs is skipped, not queued.
func (c *Client) ApplySchedules(ctx context.Context, cfg *config.Config, spec ScheduleSpec) ([]ScheduleResult, error) {
	spec = spec.withDefaults()
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if len(cfg.Databases) == 0 {
		return nil, fmt.Errorf("%s configures no databases by name: per-database schedules need databases: entries; schedule the Fleet instead (`starter schedule apply --fleet`), which runs what each instance's selection picks", cfg.File)
	}
	var out []ScheduleResult
	for i := range cfg.Databases {
		db := &cfg.Databases[i]
		res, err := c.applySchedule(ctx, db, spec)
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}

func (c *Client) applySchedule(ctx context.Context, db *config.Database, spec ScheduleSpec) (ScheduleResult, error) {
	id := ScheduleID(db.Instance, db.Name)
	sspec, action, policy := c.scheduleParts(db, spec)
	res, err := c.upsertSchedule(ctx, id, sspec, action, policy, ScheduleNote)
	res.Database = db.ID()
	if err != nil {
		return res, fmt.Errorf("schedule %s of database %s: %w", id, db.ID(), err)
	}
	return res, nil
}

// upsertSchedule creates schedule id, or updates its spec, action and
// policies when it exists (keeping its paused state and note), and reads
// its next run times.
func (c *Client) upsertSchedule(ctx context.Context, id string, sspec sdkclient.ScheduleSpec, action *sdkclient.ScheduleWorkflowAction,
	policy *sdkclient.SchedulePolicies, note string) (ScheduleResult, error) {
	res := ScheduleResult{ScheduleID: id, Action: "created"}
	sc := c.sdk.ScheduleClient()
	h, err := sc.Create(ctx, sdkclient.ScheduleOptions{
		ID: id, Spec: sspec, Action: action,
		Overlap: policy.Overlap, CatchupWindow: policy.CatchupWindow, Note: note,
	})
	if errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		res.Action = "updated"
		h = sc.GetHandle(ctx, id)
		err = h.Update(ctx, sdkclient.ScheduleUpdateOptions{DoUpdate: func(in sdkclient.ScheduleUpdateInput) (*sdkclient.ScheduleUpdate, error) {
			s := in.Description.Schedule
			s.Spec, s.Action, s.Policy = &sspec, action, policy
			return &sdkclient.ScheduleUpdate{Schedule: &s}, nil
		}})
	}
	if err != nil {
		return res, err
	}
	desc, err := h.Describe(ctx)
	if err != nil {
		return res, fmt.Errorf("describe schedule %s: %w", id, err)
	}
	res.NextRuns = desc.Info.NextActionTimes
	return res, nil
}

// OrphanSchedules returns the BackupCycle schedules of the namespace that
// belong to no database of cfg (a database removed from the configuration
// keeps its schedule until it is deleted). Listing is eventually
// consistent: a schedule deleted a moment ago may still show.
func (c *Client) OrphanSchedules(ctx context.Context, cfg *config.Config) ([]ScheduleSummary, error) {
	all, err := c.ListSchedules(ctx)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{FleetScheduleID: true}
	for _, db := range cfg.Databases {
		want[ScheduleID(db.Instance, db.Name)] = true
	}
	var out []ScheduleSummary
	for _, s := range all {
		if !want[s.ScheduleID] {
			out = append(out, s)
		}
	}
	return out, nil
}

// FleetScheduleID is the id of the schedule that starts the Fleet.
const FleetScheduleID = "backupcycle-fleet"

// FleetScheduleNote is shown with the fleet's schedule in the Web UI.
const FleetScheduleNote = "backupcycle: the nightly Fleet run of every selected database; a run is skipped while the previous one still runs"

// ApplyFleetSchedule creates or updates the one schedule that starts the
// Fleet workflow (idempotent; an existing schedule keeps its paused state).
// instances narrows the fleet to those source instances.
func (c *Client) ApplyFleetSchedule(ctx context.Context, spec ScheduleSpec, instances []string) (ScheduleResult, error) {
	spec = spec.withDefaults()
	if err := spec.validate(); err != nil {
		return ScheduleResult{}, err
	}
	id := FleetScheduleID
	sspec := sdkclient.ScheduleSpec{CronExpressions: []string{spec.Cron}, Jitter: spec.Jitter, TimeZoneName: spec.TimeZone}
	action := &sdkclient.ScheduleWorkflowAction{
		ID:            workflows.FleetWorkflowID,
		Workflow:      workflows.FleetName,
		Args:          []any{workflows.FleetInput{Instances: instances}},
		TaskQueue:     c.taskQueue,
		StaticSummary: "scheduled fleet run: every selected database" + instancesText(instances),
	}
	policy := &sdkclient.SchedulePolicies{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, CatchupWindow: spec.CatchupWindow}
	res, err := c.upsertSchedule(ctx, id, sspec, action, policy, FleetScheduleNote)
	res.Database = "fleet"
	if err != nil {
		return res, fmt.Errorf("fleet schedule %s: %w", id, err)
	}
	return res, nil
}

func instancesText(instances []string) string {
	if len(instances) == 0 {
		return ""
	}
	return " of " + strings.Join(instances, ", ")
}

// ListSchedules returns every BackupCycle and Fleet schedule of the
// namespace, by id, with its next run times (drill and differential
// schedules are the worker's: EnsureDrillSchedules, EnsureDiffSchedules).
func (c *Client) ListSchedules(ctx context.Context) ([]ScheduleSummary, error) {
	ids, err := c.scheduleIDs(ctx, workflows.BackupCycleName, workflows.FleetName)
	if err != nil {
		return nil, err
	}
	out := make([]ScheduleSummary, 0, len(ids))
	for _, id := range ids {
		if strings.HasPrefix(id, DiffSchedulePrefix) {
			continue
		}
		s, err := c.DescribeSchedule(ctx, id)
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			continue // deleted since the (eventually consistent) listing
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// scheduleIDs lists, sorted, the ids of the namespace's schedules whose
// action starts a workflow of one of the types.
func (c *Client) scheduleIDs(ctx context.Context, types ...string) ([]string, error) {
	it, err := c.sdk.ScheduleClient().List(ctx, sdkclient.ScheduleListOptions{PageSize: 1000})
	if err != nil {
		return nil, fmt.Errorf("list schedules of namespace %q: %w", c.namespace, err)
	}
	var ids []string
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("list schedules of namespace %q: %w", c.namespace, err)
		}
		if slices.Contains(types, e.WorkflowType.Name) {
			ids = append(ids, e.ID)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// DescribeSchedule returns one schedule's current state.
func (c *Client) DescribeSchedule(ctx context.Context, id string) (ScheduleSummary, error) {
	d, err := c.sdk.ScheduleClient().GetHandle(ctx, id).Describe(ctx)
	if err != nil {
		return ScheduleSummary{}, c.scheduleErr("describe", id, err)
	}
	s := ScheduleSummary{ScheduleID: id, NextRuns: d.Info.NextActionTimes, Running: len(d.Info.RunningWorkflows)}
	if sp := d.Schedule.Spec; sp != nil {
		s.Cron, s.Jitter, s.TimeZone = cronText(sp), sp.Jitter, sp.TimeZoneName
	}
	if po := d.Schedule.Policy; po != nil {
		s.Overlap, s.CatchupWindow = po.Overlap, po.CatchupWindow
	}
	if st := d.Schedule.State; st != nil {
		s.Paused, s.Note = st.Paused, st.Note
	}
	if a, ok := d.Schedule.Action.(*sdkclient.ScheduleWorkflowAction); ok {
		s.Database, _ = a.TypedSearchAttributes.GetKeyword(workflows.AttrDatabase)
		if id == FleetScheduleID {
			s.Database = "fleet"
		}
	}
	if n := len(d.Info.RecentActions); n > 0 {
		last := d.Info.RecentActions[n-1]
		s.LastRun = last.ActualTime
		if last.StartWorkflowResult != nil {
			s.LastWorkflowID = last.StartWorkflowResult.WorkflowID
		}
	}
	return s, nil
}

// cronText renders the spec back: the server stores cron as calendars.
func cronText(sp *sdkclient.ScheduleSpec) []string {
	if len(sp.CronExpressions) > 0 {
		return sp.CronExpressions
	}
	var out []string
	for _, cal := range sp.Calendars {
		out = append(out, fmt.Sprintf("%s %s %s %s %s", ranges(cal.Minute, 0, 59), ranges(cal.Hour, 0, 23), ranges(cal.DayOfMonth, 1, 31), ranges(cal.Month, 1, 12), ranges(cal.DayOfWeek, 0, 6)))
	}
	return out
}

// ranges renders one calendar field; its full range lo-hi is "*".
func ranges(rs []sdkclient.ScheduleRange, lo, hi int) string {
	if len(rs) == 1 && rs[0].Start == lo && rs[0].End == hi && rs[0].Step <= 1 {
		return "*"
	}
	var parts []string
	for _, r := range rs {
		p := fmt.Sprint(r.Start)
		if r.End > r.Start {
			p += fmt.Sprintf("-%d", r.End)
		}
		if r.Step > 1 {
			p += fmt.Sprintf("/%d", r.Step)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "*"
	}
	return strings.Join(parts, ",")
}

// ResolveSchedule maps NAME to a schedule id: an existing schedule id as it
// is, else the schedule whose BackupDatabase is NAME (so a database name
// works without a configuration). Several databases of that name (one per
// instance) are an error listing their ids.
func (c *Client) ResolveSchedule(ctx context.Context, name string) (string, error) {
	_, err := c.DescribeSchedule(ctx, name)
	var nf *serviceerror.NotFound
	if err == nil || !errors.As(err, &nf) {
		return name, err
	}
	all, lerr := c.ListSchedules(ctx)
	if lerr != nil {
		return name, lerr
	}
	var ids []string
	for _, s := range all {
		if s.Database == name {
			ids = append(ids, s.ScheduleID)
		}
	}
	switch len(ids) {
	case 0:
		// The action names the missing schedule itself.
		return name, nil
	case 1:
		return ids[0], nil
	}
	return name, fmt.Errorf("database %s has %d schedules (%s): give the schedule id, or --config with --instance", name, len(ids), strings.Join(ids, ", "))
}

// DeleteSchedule removes a schedule; running cycles it started go on.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	return c.scheduleErr("delete", id, c.sdk.ScheduleClient().GetHandle(ctx, id).Delete(ctx))
}

// PauseSchedule stops a schedule from starting cycles until it is unpaused.
func (c *Client) PauseSchedule(ctx context.Context, id, note string) error {
	return c.scheduleErr("pause", id, c.sdk.ScheduleClient().GetHandle(ctx, id).Pause(ctx, sdkclient.SchedulePauseOptions{Note: note}))
}

// UnpauseSchedule resumes a paused schedule.
func (c *Client) UnpauseSchedule(ctx context.Context, id, note string) error {
	return c.scheduleErr("unpause", id, c.sdk.ScheduleClient().GetHandle(ctx, id).Unpause(ctx, sdkclient.ScheduleUnpauseOptions{Note: note}))
}

// TriggerSchedule starts the schedule's cycle now; the overlap policy SKIP
// still applies, so nothing starts while a cycle of it runs.
func (c *Client) TriggerSchedule(ctx context.Context, id string) error {
	return c.scheduleErr("trigger", id, c.sdk.ScheduleClient().GetHandle(ctx, id).Trigger(ctx, sdkclient.ScheduleTriggerOptions{}))
}

func (c *Client) scheduleErr(verb, id string, err error) error {
	if err == nil {
		return nil
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%s schedule %s: no such schedule on namespace %q (see `starter schedule list`): %w", verb, id, c.namespace, err)
	}
	return fmt.Errorf("%s schedule %s on namespace %q: %w", verb, id, c.namespace, err)
}
