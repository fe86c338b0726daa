package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/backupcycle/backupcycle/internal/selection"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/starter/client"
)

var scheduleActions = []string{"apply", "list", "pause", "unpause", "trigger", "delete"}

func scheduleCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "create or update one Temporal Schedule per configured database (or the fleet's); list, pause, unpause, trigger or delete them",
		Long: `Temporal Schedules that start the cycles: one per database under databases: (schedule apply), or one
for the Fleet (schedule apply --fleet). Overlap is skip: a run that comes due while the previous one still
runs is skipped. NAME is a schedule id (schedule list shows them), or a database's name: with --config it
gives that database's schedule (instance/name when the name is on several instances), without it the
schedule whose database has that name.`,
		// Args nil: an unknown action reaches RunE, which names the actions.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{msg: "give an action: " + strings.Join(scheduleActions, ", ") + " (see `starter schedule --help`)"}
			}
			return usageError{msg: fmt.Sprintf("unknown action %q: give one of %s", args[0], strings.Join(scheduleActions, ", "))}
		},
	}
	cmd.AddCommand(scheduleApplyCommand(e), scheduleListCommand(e))
	type named struct {
		verb, short string
		note        bool
		do          func(ctx context.Context, c *client.Client, id, note string) error
	}
	for _, n := range []named{
		{"pause", "pause a schedule: it starts nothing until unpaused", true, func(ctx context.Context, c *client.Client, id, note string) error {
			return c.PauseSchedule(ctx, id, note)
		}},
		{"unpause", "unpause a paused schedule", true, func(ctx context.Context, c *client.Client, id, note string) error {
			return c.UnpauseSchedule(ctx, id, note)
		}},
		{"trigger", "start a schedule's run now (skipped while a run of it is running)", false, func(ctx context.Context, c *client.Client, id, _ string) error {
			return c.TriggerSchedule(ctx, id)
		}},
		{"delete", "delete a schedule (running cycles it started go on)", false, func(ctx context.Context, c *client.Client, id, _ string) error {
			return c.DeleteSchedule(ctx, id)
		}},
	} {
		var note string
		var asJSON bool
		sub := &cobra.Command{
			Use:   n.verb + " NAME",
			Short: n.short,
			Args: func(cmd *cobra.Command, args []string) error {
				if len(args) != 1 {
					return usageError{msg: fmt.Sprintf("give one schedule NAME (a schedule id or a database name; see `starter schedule list`), got %d arguments", len(args))}
				}
				return nil
			},
			RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
				c, ctx, done, err := e.session(ctx)
				if err != nil {
					return err
				}
				defer done()
				id, err := e.scheduleID(ctx, c, args[0])
				if err != nil {
					return err
				}
				if err := n.do(ctx, c, id, note); err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, struct {
						ScheduleID string `json:"schedule_id"`
						Action     string `json:"action"`
					}{id, n.verb})
				}
				fmt.Fprintf(e.stdout, "schedule %s: %s done\n", id, n.verb)
				return nil
			}),
		}
		if n.note {
			sub.Flags().StringVar(&note, "note", "", "why (shown with the schedule in the Web UI and by schedule list)")
		}
		jsonFlag(sub, &asJSON, "print the schedule id and action")
		cmd.AddCommand(sub)
	}
	return cmd
}

func scheduleApplyCommand(e *env) *cobra.Command {
	var fleet, asJSON bool
	var instances []string
	spec := client.ScheduleSpec{}
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "create or update one schedule per database of --config, or with --fleet the one schedule of the Fleet (idempotent; a paused schedule stays paused)",
		Args:  noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			cfg, err := e.requireConfig(cmd)
			if err != nil {
				return err
			}
			if len(instances) > 0 && !fleet {
				return usageError{msg: "--instance goes with --fleet: per-database schedules follow databases: of --config"}
			}
			for _, name := range instances {
				if _, ok := cfg.SQLInstance(name); !ok {
					return usageError{msg: fmt.Sprintf("--instance %q is not defined in sql_instances of %s", name, cfg.File)}
				}
			}
			c, ctx, done, err := e.session(ctx)
			if err != nil {
				return err
			}
			defer done()
			out := applyJSON{Applied: []appliedJSON{}, Orphans: []scheduleJSON{}}
			var res []client.ScheduleResult
			if fleet {
				r, err := c.ApplyFleetSchedule(ctx, spec, instances)
				if err != nil {
					return err
				}
				res = []client.ScheduleResult{r}
			} else {
				res, err = c.ApplySchedules(ctx, cfg, spec)
			}
			for _, r := range res {
				out.Applied = append(out.Applied, appliedJSON{ScheduleID: r.ScheduleID, Database: r.Database, Action: r.Action, NextRuns: rfc3339s(r.NextRuns)})
			}
			if err == nil && !fleet {
				var orphans []client.ScheduleSummary
				orphans, err = c.OrphanSchedules(ctx, cfg)
				for _, o := range orphans {
					out.Orphans = append(out.Orphans, scheduleOf(o))
				}
			}
			if asJSON {
				if jerr := writeJSON(e.stdout, out); jerr != nil {
					return jerr
				}
				return err
			}
			for _, r := range res {
				what := "for " + r.Database
				if fleet {
					what = "for the fleet"
				}
				fmt.Fprintf(e.stdout, "%s schedule %s %s: cron %q, jitter %s, overlap skip; next runs %s\n",
					r.Action, r.ScheduleID, what, cron(spec), spec.Jitter, times(r.NextRuns, 3))
			}
			for _, o := range out.Orphans {
				fmt.Fprintf(e.stdout, "not in %s: schedule %s (database %s) still runs; remove it with `starter schedule delete %s`\n",
					cfg.File, o.ScheduleID, dash(tsql.Printable(o.Database)), o.ScheduleID)
			}
			return err
		}),
	}
	f := cmd.Flags()
	f.BoolVar(&fleet, "fleet", false, "the one schedule of the Fleet workflow instead (every selected database of --config per run, within the limits)")
	f.StringArrayVar(&instances, "instance", nil, "with --fleet: only this source instance (repeatable); default all")
	f.StringVar(&spec.Cron, "cron", client.DefaultCron, "when runs start, a five-field cron expression")
	f.DurationVar(&spec.Jitter, "jitter", 0, "start each run up to this much later, at random (e.g. 30m), to spread databases")
	f.StringVar(&spec.TimeZone, "tz", "", "IANA time zone of --cron (default UTC)")
	f.DurationVar(&spec.CatchupWindow, "catchup-window", client.DefaultCatchupWindow, "a run missed while Temporal was down still starts if at most this late")
	jsonFlag(cmd, &asJSON, "print the applied schedules")
	return cmd
}

func cron(s client.ScheduleSpec) string {
	if s.Cron == "" {
		return client.DefaultCron
	}
	return s.Cron
}

func scheduleListCommand(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list the BackupCycle and Fleet schedules with their next run times",
		Args:  noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			c, ctx, done, err := e.session(ctx)
			if err != nil {
				return err
			}
			defer done()
			ss, err := c.ListSchedules(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				out := struct {
					Schedules []scheduleJSON `json:"schedules"`
				}{Schedules: []scheduleJSON{}}
				for _, s := range ss {
					out.Schedules = append(out.Schedules, scheduleOf(s))
				}
				return writeJSON(e.stdout, out)
			}
			if len(ss) == 0 {
				fmt.Fprintf(e.stdout, "no BackupCycle schedules on namespace %s: create them with `starter schedule apply --config FILE`\n", c.Namespace())
				return nil
			}
			for _, s := range ss {
				writeSchedule(e.stdout, s)
			}
			return nil
		}),
	}
	jsonFlag(cmd, &asJSON, "print the schedules")
	return cmd
}

func writeSchedule(w io.Writer, s client.ScheduleSummary) {
	state := "active"
	if s.Paused {
		state = "PAUSED"
	}
	fmt.Fprintf(w, "%s  database %s  %s  cron %s jitter %s", s.ScheduleID, tsql.Printable(s.Database), state, strings.Join(s.Cron, "; "), s.Jitter)
	if s.TimeZone != "" {
		fmt.Fprintf(w, " (%s)", s.TimeZone)
	}
	fmt.Fprintf(w, ", overlap %s, catch-up %s", strings.ToLower(s.Overlap.String()), s.CatchupWindow)
	fmt.Fprintf(w, "\n    next: %s", times(s.NextRuns, 3))
	if !s.LastRun.IsZero() {
		fmt.Fprintf(w, "; last: %s (%s)", s.LastRun.UTC().Format(time.RFC3339), s.LastWorkflowID)
	}
	if s.Running > 0 {
		fmt.Fprintf(w, "; running: %d", s.Running)
	}
	fmt.Fprintln(w)
	if s.Paused && s.Note != "" {
		fmt.Fprintf(w, "    note: %s\n", s.Note)
	}
}

// scheduleID maps NAME to a schedule id: with --config a database of it
// (name or instance/name) gives its schedule; otherwise an existing
// schedule id, or the schedule of the database named NAME.
func (e *env) scheduleID(ctx context.Context, c *client.Client, name string) (string, error) {
	if e.configFile != "" {
		cfg, err := e.loadConfig()
		if err != nil {
			return "", err
		}
		inst, db := "", name
		if i := strings.Index(name, "/"); i >= 0 {
			inst, db = name[:i], name[i+1:]
		}
		if d, err := selection.Lookup(cfg, inst, db); err == nil {
			return client.ScheduleID(d.Instance, d.Name), nil
		}
	}
	return c.ResolveSchedule(ctx, name)
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
