package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// asOfLayouts are what --as-of takes besides RFC 3339: a date and time
// without an offset, read in this machine's time zone.
var asOfLayouts = []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04", "2006-01-02 15:04"}

// parseAsOf reads --as-of: RFC 3339 (with Z or an offset), else a local
// date and time.
func parseAsOf(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, l := range asOfLayouts {
		if t, err := time.ParseInLocation(l, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--as-of %q: give an instant such as 2026-03-01T02:15:00Z or 2026-03-01T03:15:00+01:00 "+
		"(or 2026-03-01 03:15:00, read in this machine's time zone, %s)", s, time.Local)
}

func recoverCommand(e *env) *cobra.Command {
	var in workflows.RecoverInput
	var asOf string
	var wait, asJSON bool
	cmd := &cobra.Command{
		Use:   "recover",
		Short: "restore a database to a point in time (or the latest) on an instance, from whichever backup servers are reachable",
		Long: `Starts the Recover workflow: the newest verified full backup before the point and the log backups that
reach it, chosen from the manifests and log chain records of every backup server of the database it can
read (the remote site's copies when the primary site is gone), each file's SHA-256 checked before it is
restored, restored on --to-instance as --as (default: the database's name) WITH MOVE into that instance's
default data and log paths (or --data-dir, --log-dir), CHECKSUM, the backup's own BUFFERCOUNT and
MAXTRANSFERSIZE, STOPAT = --as-of in every log, then RECOVERY (unless --norecovery).

Before anything is restored it checks what would fail late: the target's version against the source's,
the TDE certificate of an encrypted database, the name free (--replace restores over it), the free space
for the files' allocated size; it never restores over the source database itself (same instance and
name) unless both --replace and --as of that name are given.

With --tail-log it first backs up the tail of the source's log (BACKUP LOG WITH NORECOVERY, as the log
chain's next log backup, hashed and recorded on its backup server), so that no committed transaction is
lost, and the restore ends with it. That leaves the SOURCE DATABASE RESTORING: no one can use it until a
restore over it ends. A recover over the source itself to --latest is refused without --tail-log.

The workflow id is recover/<to-instance>/<name>: one recover into a database at a time. Without --wait
it prints the started run and returns; with --wait it follows the steps (log n of m, ETA) and prints the
result: the recovery point reached, the measured times, the servers read. Exit 1 unless the database was
recovered (or left restoring with --norecovery).`,
		Args: noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			switch {
			case in.Database == "":
				return usageError{msg: "--database NAME is required: the database to recover, as configured"}
			case in.ToInstance == "":
				return usageError{msg: "--to-instance NAME is required: the configured SQL instance to restore on"}
			case (asOf == "") == !in.Latest:
				return usageError{msg: "give exactly one of --as-of TIME (e.g. 2026-03-01T02:15:00Z) and --latest"}
			}
			if asOf != "" {
				t, err := parseAsOf(asOf)
				if err != nil {
					return usageError{msg: err.Error()}
				}
				in.AsOf = t.UTC()
			}
			inst, cfg, err := e.resolveInstance(in.Instance, in.Database)
			if err != nil {
				return err
			}
			in.Instance = inst
			if cfg != nil {
				if _, ok := cfg.SQLInstance(in.ToInstance); !ok {
					return usageError{msg: fmt.Sprintf("--to-instance %s is not configured in %s: add it under sql_instances:", in.ToInstance, cfg.File)}
				}
			}
			if err := in.Check(); err != nil {
				return usageError{msg: err.Error()}
			}
			c, err := e.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			run, err := c.StartRecover(ctx, in)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if in.TailLog && !asJSON {
				fmt.Fprintf(w, "tail-log backup: %s on %s is backed up WITH NORECOVERY first and LEFT RESTORING: no one can use it until a restore over it ends\n",
					tsql.Printable(in.Database), in.Instance)
			}
			if !wait {
				if asJSON {
					return writeJSON(w, startedJSON{WorkflowID: run.GetID(), RunID: run.GetRunID(), Database: in.Database, Instance: in.Instance,
						Namespace: c.Namespace(), TaskQueue: c.TaskQueue()})
				}
				fmt.Fprintf(w, "recover of %s into %s on %s started: workflow %s, run %s (namespace %s, task queue %s)\n",
					tsql.Printable(in.Database), tsql.Printable(in.Name()), in.ToInstance, run.GetID(), run.GetRunID(), c.Namespace(), c.TaskQueue())
				fmt.Fprintf(w, "  follow it in the Web UI (workflow %s, its current details) or with `starter recover ... --wait`\n", run.GetID())
				return nil
			}
			if !asJSON {
				fmt.Fprintf(w, "recover of %s into %s on %s to %s started: workflow %s; waiting...\n", tsql.Printable(in.Database),
					tsql.Printable(in.Name()), in.ToInstance, pointOf(in), run.GetID())
			}
			wctx, cancel := e.withTimeout(ctx, 0)
			defer cancel()
			stop := func() {}
			if !asJSON {
				stop = followRecover(wctx, c, run.GetID(), run.GetRunID(), w)
			}
			res, err := c.WaitRecover(wctx, run)
			stop()
			if asJSON {
				if jerr := writeJSON(w, recoverJSONOf(res)); jerr != nil {
					return jerr
				}
			}
			var appErr *temporal.ApplicationError
			if err != nil && errors.As(err, &appErr) {
				return fmt.Errorf("recover %s of %s failed: %s [%s]", res.WorkflowID, in.Database, appErr.Message(), appErr.Type())
			}
			if err != nil {
				return err
			}
			if !asJSON {
				printRecoverResult(w, res)
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&in.Database, "database", "", "database to recover (its name under databases: in the config, or one an instance selects); required")
	f.StringVar(&in.Instance, "instance", "", "its source SQL instance (sql_instances[].name), when the name is configured on several")
	f.StringVar(&in.ToInstance, "to-instance", "", "the configured SQL instance to restore on; required")
	f.StringVar(&in.As, "as", "", "the database's name there (default: --database)")
	f.StringVar(&asOf, "as-of", "", "the point: RFC 3339 (2026-03-01T02:15:00Z, or with an offset), or a date and time in this machine's zone")
	f.BoolVar(&in.Latest, "latest", false, "the newest point the backups reach (every log backup held, to its end)")
	f.BoolVar(&in.Replace, "replace", false, "restore over a database of that name on the target")
	f.BoolVar(&in.NoRecovery, "norecovery", false, "leave the database RESTORING (more logs may follow by hand)")
	f.BoolVar(&in.TailLog, "tail-log", false, "back up the tail of the source's log first (WITH NORECOVERY: the source is LEFT RESTORING) and restore to its end")
	f.StringVar(&in.DataDir, "data-dir", "", "the data files' directory as the target sees it (default: its SERVERPROPERTY('InstanceDefaultDataPath'))")
	f.StringVar(&in.LogDir, "log-dir", "", "the log file's directory (default: its SERVERPROPERTY('InstanceDefaultLogPath'))")
	f.BoolVar(&wait, "wait", false, "follow the recover to its end and print its result (no time limit unless --timeout is given)")
	jsonFlag(cmd, &asJSON, "print the started run (with --wait: the result)")
	return cmd
}

func pointOf(in workflows.RecoverInput) string {
	if in.Latest {
		return "the latest point"
	}
	return in.AsOf.UTC().Format(time.RFC3339Nano)
}

// followRecover prints a line whenever the recover moves on (a step, a
// log), with its ETA, until stop.
func followRecover(ctx context.Context, c *client.Client, workflowID, runID string, w io.Writer) (stop func()) {
	last := ""
	return every(ctx, func(ctx context.Context) {
		st, err := c.RecoverStatus(ctx, workflowID, runID)
		if err != nil || ctx.Err() != nil {
			return
		}
		if line := recoverLine(st); line != last {
			fmt.Fprintln(w, line)
			last = line
		}
	})
}

// recoverLine is one progress line: the step and where it stands.
func recoverLine(s workflows.RecoverStatus) string {
	line := "  step " + s.Step
	switch {
	case s.Step == "restore-full":
		line += fmt.Sprintf(" (set %d", s.Sequence)
		if s.FullServer != "" {
			line += " from " + s.FullServer
		}
		line += fmt.Sprintf(")  %3.0f%%", s.FullPercent)
	case s.Step == "tail-log":
		line += fmt.Sprintf("  (BACKUP LOG %s WITH NORECOVERY: the source is left RESTORING)", tsql.Printable(s.Database))
	case s.Step == "restore-logs":
		line += fmt.Sprintf("  log %d of %d", s.LogsDone+1, s.LogsTotal)
		if s.CurrentLog != 0 {
			line += fmt.Sprintf(" (log %d of chain %d)", s.CurrentLog, s.Chain)
		}
	}
	if s.ETA > 0 {
		line += "  ETA " + plan.RoundDuration(s.ETA).String()
	}
	if s.Waiting != "" {
		line += "  " + s.Waiting
	}
	return line
}

func printRecoverResult(w io.Writer, run client.RecoverRun) {
	r := run.Result
	word := "RECOVERED"
	if r.Outcome == workflows.RecoverRestoring {
		word = "RESTORING (norecovery)"
	}
	fmt.Fprintf(w, "%s %s on %s to %s (%s; workflow %s)\n", word, tsql.Printable(r.Name), r.Target, r.RecoveryPoint.UTC().Format(time.RFC3339Nano),
		r.RecoveryPointFrom, run.WorkflowID)
	if r.RecoveryPointBound.After(r.RecoveryPoint) {
		fmt.Fprintf(w, "  every transaction committed before %s is in it; one that committed while that backup ran, up to %s, may be too\n",
			r.RecoveryPoint.UTC().Format(time.RFC3339Nano), r.RecoveryPointBound.UTC().Format(time.RFC3339Nano))
	}
	from := fmt.Sprintf("set %d of %s", r.Sequence, tsql.Printable(r.Database))
	if r.Instance != "" {
		from += "@" + r.Instance
	}
	if r.LogsDone > 0 {
		from += fmt.Sprintf(" and %d log backup(s) of chain %d (logs %d-%d", r.LogsDone, r.Chain, r.FirstLog, r.FirstLog+int64(r.LogsDone)-1)
		if r.StoppedAt != 0 {
			from += fmt.Sprintf(", STOPAT reached in log %d", r.StoppedAt)
		}
		if r.LogsDone < r.LogsTotal {
			from += fmt.Sprintf("; %d later log(s) not needed", r.LogsTotal-r.LogsDone)
		}
		from += ")"
	}
	fmt.Fprintf(w, "  restored: %s, read from %s\n", from, strings.Join(r.Servers, ", "))
	if r.TailLog != 0 {
		fmt.Fprintf(w, "  tail-log: log %d of chain %d, taken WITH NORECOVERY: the source %s is RESTORING\n", r.TailLog, r.Chain,
			tsql.Printable(r.Database))
	}
	if len(r.Unreachable) > 0 {
		fmt.Fprintf(w, "  not read: %s\n", strings.Join(r.Unreachable, "; "))
	}
	t := r.Times
	perLog := ""
	if r.LogsDone > 0 {
		perLog = fmt.Sprintf(" (%s per log)", plan.RoundDuration(t.Logs/time.Duration(r.LogsDone)))
	}
	fmt.Fprintf(w, "  times:    plan %s, full %s, logs %s%s, recovery %s; time to recover %s\n", plan.RoundDuration(t.Plan),
		plan.RoundDuration(t.Full), plan.RoundDuration(t.Logs), perLog, plan.RoundDuration(t.Finish), plan.RoundDuration(t.Total))
	if pe := predictionText(catalog.PredictionErrors(r.Predicted, catalog.DrillStepTimes{Full: t.Full, Diff: t.Diff, Logs: t.Logs, Recovery: t.Finish},
		false)); pe != "" {
		fmt.Fprintf(w, "  predicted: %s\n", pe)
	}
	fmt.Fprintf(w, "  files:    data in %s, log in %s; %s read\n", r.DataDir, r.LogDir, humanBytes(r.BytesDone))
	if r.Replaces != "" {
		fmt.Fprintf(w, "  replaced: %s\n", tsql.Printable(r.Replaces))
	}
	fmt.Fprintf(w, "  msdb:     %d log backup(s) restored into it since its full, each once; state %s\n", r.LogsRestored, r.State)
	if r.Skipped > 0 || r.Reattached > 0 {
		fmt.Fprintf(w, "  resumed:  %d step(s) found done by an earlier attempt, %d statement(s) re-attached\n", r.Skipped, r.Reattached)
	}
	for _, wn := range r.Warnings {
		fmt.Fprintf(w, "  warning:  %s\n", tsql.Printable(wn))
	}
}

// recoverJSON is the --json shape of a recover's result.
type recoverJSON struct {
	WorkflowID        string         `json:"workflow_id"`
	RunID             string         `json:"run_id"`
	Database          string         `json:"database"`
	Instance          string         `json:"instance,omitempty"`
	Target            string         `json:"target"`
	Name              string         `json:"name"`
	Point             string         `json:"point"`
	Outcome           string         `json:"outcome"`
	State             string         `json:"state,omitempty"`
	Sequence          int64          `json:"sequence,omitempty"`
	Servers           []string       `json:"servers,omitempty"`
	Chain             int64          `json:"chain,omitempty"`
	LogsTotal         int            `json:"logs_total"`
	LogsDone          int            `json:"logs_done"`
	LogsRestored      int            `json:"logs_restored"`
	StoppedAt         int64          `json:"stopped_at,omitempty"`
	StopAt            string         `json:"stop_at,omitempty"`
	RecoveryPoint     string         `json:"recovery_point,omitempty"`
	RecoveryPointFrom string         `json:"recovery_point_from,omitempty"`
	RecoveryPointTo   string         `json:"recovery_point_bound,omitempty"`
	Bytes             int64          `json:"bytes"`
	Times             map[string]any `json:"times"`
	Unreachable       []string       `json:"unreachable,omitempty"`
	Warnings          []string       `json:"warnings,omitempty"`
	Error             string         `json:"error,omitempty"`
}

func recoverJSONOf(run client.RecoverRun) recoverJSON {
	r := run.Result
	t := r.Times
	return recoverJSON{WorkflowID: run.WorkflowID, RunID: run.RunID, Database: r.Database, Instance: r.Instance, Target: r.Target, Name: r.Name,
		Point: r.Point, Outcome: r.Outcome, State: r.State, Sequence: r.Sequence, Servers: r.Servers, Chain: r.Chain, LogsTotal: r.LogsTotal,
		LogsDone: r.LogsDone, LogsRestored: r.LogsRestored, StoppedAt: r.StoppedAt, StopAt: rfc3339(r.StopAt), RecoveryPoint: rfc3339(r.RecoveryPoint),
		RecoveryPointFrom: r.RecoveryPointFrom, RecoveryPointTo: rfc3339(r.RecoveryPointBound), Bytes: r.BytesDone, Unreachable: r.Unreachable, Warnings: r.Warnings, Error: r.LastError,
		Times: map[string]any{"plan_seconds": secs(t.Plan), "full_seconds": secs(t.Full), "logs_seconds": secs(t.Logs),
			"finish_seconds": secs(t.Finish), "total_seconds": secs(t.Total)}}
}
