package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/selection"
	"github.com/backupcycle/backupcycle/starter/client"
)

func scheduleCmd(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
	apply := fs.Bool("apply", false, "create or update one schedule per database of --config (idempotent)")
	fleet := fs.Bool("fleet", false, "with --apply: create or update the one schedule of the Fleet workflow instead (every selected database of --config per run, within the limits)")
	var instances stringList
	fs.Var(&instances, "instance", "with --apply --fleet: only this source instance (repeatable); default all")
	list := fs.Bool("list", false, "list the BackupCycle schedules with their next run times")
	del := fs.String("delete", "", "delete the schedule `NAME` (schedule id, or a database of --config)")
	pause := fs.String("pause", "", "pause the schedule `NAME`")
	unpause := fs.String("unpause", "", "unpause the schedule `NAME`")
	trigger := fs.String("trigger", "", "start the cycle of schedule `NAME` now (skipped while one of it runs)")
	spec := client.ScheduleSpec{}
	fs.StringVar(&spec.Cron, "cron", client.DefaultCron, "with --apply: when cycles run, a five-field cron expression")
	fs.DurationVar(&spec.Jitter, "jitter", 0, "with --apply: start each run up to this much later, at random (e.g. 30m), to spread databases")
	fs.StringVar(&spec.TimeZone, "tz", "", "with --apply: IANA time zone of --cron (default UTC)")
	fs.DurationVar(&spec.CatchupWindow, "catchup-window", client.DefaultCatchupWindow, "with --apply: a run missed while Temporal was down still starts if at most this late")
	note := fs.String("note", "", "with --pause/--unpause: why (shown in the Web UI)")
	if err := parse(fs, args); err != nil {
		return err
	}
	var chosen []string
	for _, f := range []string{"apply", "list", "delete", "pause", "unpause", "trigger"} {
		if flagSet(fs, f) {
			chosen = append(chosen, "--"+f)
		}
	}
	if len(chosen) != 1 {
		return usageError{msg: fmt.Sprintf("give exactly one of --apply, --list, --delete, --pause, --unpause, --trigger (got %d: %s)", len(chosen), strings.Join(chosen, " "))}
	}
	if chosen[0] == "--apply" {
		if _, err := e.requireConfig(fs); err != nil {
			return err
		}
	}
	c, err := e.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()

	if (*fleet || len(instances) > 0) && !*apply {
		return usageError{msg: "--fleet and --instance go with --apply"}
	}
	switch {
	case *apply && *fleet:
		for _, name := range instances {
			if _, ok := e.cfg.SQLInstance(name); !ok {
				return usageError{msg: fmt.Sprintf("--instance %q is not defined in sql_instances of %s", name, e.configFile)}
			}
		}
		r, err := c.ApplyFleetSchedule(ctx, spec, instances)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s schedule %s for the fleet: cron %q, jitter %s, overlap skip; next runs %s\n",
			r.Action, r.ScheduleID, spec.Cron, spec.Jitter, times(r.NextRuns, 3))
		return nil
	case *apply:
		res, err := c.ApplySchedules(ctx, e.cfg, spec)
		for _, r := range res {
			fmt.Fprintf(e.stdout, "%s schedule %s for %s: cron %q, jitter %s, overlap skip; next runs %s\n",
				r.Action, r.ScheduleID, r.Database, spec.Cron, spec.Jitter, times(r.NextRuns, 3))
		}
		if err != nil {
			return err
		}
		orphans, err := c.OrphanSchedules(ctx, e.cfg)
		if err != nil {
			return err
		}
		for _, o := range orphans {
			fmt.Fprintf(e.stdout, "not in %s: schedule %s (database %s) still runs; remove it with `starter schedule --delete %s`\n",
				e.configFile, o.ScheduleID, dash(o.Database), o.ScheduleID)
		}
		return nil
	case *list:
		ss, err := c.ListSchedules(ctx)
		if err != nil {
			return err
		}
		if len(ss) == 0 {
			fmt.Fprintf(e.stdout, "no BackupCycle schedules on namespace %s: create them with `starter schedule --config FILE --apply`\n", c.Namespace())
			return nil
		}
		for _, s := range ss {
			state := "active"
			if s.Paused {
				state = "PAUSED"
			}
			fmt.Fprintf(e.stdout, "%s  database %s  %s  cron %s jitter %s", s.ScheduleID, s.Database, state, strings.Join(s.Cron, "; "), s.Jitter)
			if s.TimeZone != "" {
				fmt.Fprintf(e.stdout, " (%s)", s.TimeZone)
			}
			fmt.Fprintf(e.stdout, ", overlap %s, catch-up %s", strings.ToLower(s.Overlap.String()), s.CatchupWindow)
			fmt.Fprintf(e.stdout, "\n    next: %s", times(s.NextRuns, 3))
			if !s.LastRun.IsZero() {
				fmt.Fprintf(e.stdout, "; last: %s (%s)", s.LastRun.UTC().Format(time.RFC3339), s.LastWorkflowID)
			}
			if s.Running > 0 {
				fmt.Fprintf(e.stdout, "; running: %d", s.Running)
			}
			fmt.Fprintln(e.stdout)
			if s.Paused && s.Note != "" {
				fmt.Fprintf(e.stdout, "    note: %s\n", s.Note)
			}
		}
		return nil
	}
	name := *del + *pause + *unpause + *trigger
	if name == "" {
		return usageError{msg: chosen[0] + " needs a schedule NAME: see `starter schedule --list`"}
	}
	id := e.scheduleID(name)
	switch {
	case *del != "":
		err = c.DeleteSchedule(ctx, id)
	case *pause != "":
		err = c.PauseSchedule(ctx, id, *note)
	case *unpause != "":
		err = c.UnpauseSchedule(ctx, id, *note)
	default:
		err = c.TriggerSchedule(ctx, id)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "schedule %s: %s done\n", id, strings.TrimPrefix(chosen[0], "--"))
	return nil
}

// scheduleID maps NAME to a schedule id: a database of --config (name or
// instance/name) gives its schedule; anything else is taken as the id.
func (e *env) scheduleID(name string) string {
	if e.configFile == "" {
		return name
	}
	cfg, err := e.loadConfig()
	if err != nil {
		return name
	}
	inst, db := "", name
	if i := strings.Index(name, "/"); i >= 0 {
		inst, db = name[:i], name[i+1:]
	}
	if d, err := selection.Lookup(cfg, inst, db); err == nil {
		return client.ScheduleID(d.Instance, d.Name)
	}
	return name
}

func times(ts []time.Time, n int) string {
	if len(ts) == 0 {
		return "none"
	}
	var out []string
	for i, t := range ts {
		if i == n {
			break
		}
		out = append(out, t.UTC().Format("2006-01-02 15:04:05Z"))
	}
	return strings.Join(out, ", ")
}
