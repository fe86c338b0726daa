package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// progressEvery is how often `run --wait` asks the cycle for its progress.
var progressEvery = time.Second

func runCommand(e *env) *cobra.Command {
	var in workflows.CycleInput
	var wait, asJSON bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "run one verified backup cycle of a database now (backup, copy, restore, CHECKDB, sanity checks)",
		Long: `Starts one verified backup cycle of a database now, under the database's workflow id (see ` + "`starter plan`" + `).

Without --wait it prints the started run and returns. With --wait it follows the cycle until it ends: on a
terminal one live line per step (percent, MB/s, ETA from the cycle's progress query), else plain lines; then
the result. --wait waits until the cycle ends unless --timeout is given: a cycle of a large database takes
hours. Exit 1 unless the set is verified.`,
		Args: noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if in.Database == "" {
				return usageError{msg: "--database NAME is required: the database to back up, as configured under databases:"}
			}
			if in.Resume < 0 {
				return usageError{msg: "--resume SEQ takes the positive sequence number of an unfinished set (see `starter status`)"}
			}
			if in.Resume > 0 && in.Differential {
				return usageError{msg: "--resume SEQ finishes a set as it was taken (full or differential): give it without --differential"}
			}
			inst, _, err := e.resolveInstance(in.Instance, in.Database)
			if err != nil {
				return err
			}
			in.Instance = inst
			c, err := e.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			run, err := c.StartCycle(ctx, in)
			if err != nil {
				return err
			}
			started := startedJSON{WorkflowID: run.GetID(), RunID: run.GetRunID(), Database: in.Database, Instance: in.Instance,
				Namespace: c.Namespace(), TaskQueue: c.TaskQueue()}
			if !wait {
				if asJSON {
					return writeJSON(e.stdout, started)
				}
				fmt.Fprintf(e.stdout, "backup cycle of %s started: workflow %s, run %s (namespace %s, task queue %s)\n",
					tsql.Printable(in.Database), run.GetID(), run.GetRunID(), c.Namespace(), c.TaskQueue())
				fmt.Fprintf(e.stdout, "  follow it: `starter status --database %s`, or in the Web UI: Workflows, filter BackupDatabase = '%s'\n",
					tsql.Printable(in.Database), tsql.Printable(strings.ReplaceAll(in.Database, "'", "''")))
				return nil
			}
			if !asJSON {
				fmt.Fprintf(e.stdout, "backup cycle of %s started: workflow %s, run %s; waiting...\n", tsql.Printable(in.Database), run.GetID(), run.GetRunID())
			}
			wctx, cancel := e.withTimeout(ctx, 0)
			defer cancel()
			var stopProgress func()
			if !asJSON {
				stopProgress = followProgress(wctx, c, run.GetID(), run.GetRunID(), newProgressPrinter(e.stdout, e.tty))
			}
			res, err := c.WaitCycle(wctx, run, in.Database)
			if stopProgress != nil {
				stopProgress()
			}
			var appErr *temporal.ApplicationError
			if err != nil && errors.As(err, &appErr) {
				// The cycle's own reason and error type, not Temporal's nested chain
				// (which repeats the message per layer).
				return fmt.Errorf("backup cycle %s of %s failed: %s [%s]", res.WorkflowID, in.Database, appErr.Message(), appErr.Type())
			}
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(e.stdout, cycleRunOf(res)); err != nil {
					return err
				}
			}
			if res.Result.Skipped != "" {
				return fmt.Errorf("backup cycle %s of %s %s", res.WorkflowID, in.Database, res.Result.Skipped)
			}
			if !asJSON {
				printCycleResult(e, res)
			}
			if len(res.Result.Locations) == 0 {
				// A cycle returns a result only once its set is verified; a result
				// without a location is not a verified set.
				return fmt.Errorf("backup cycle %s of %s returned no verified set", res.WorkflowID, in.Database)
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&in.Database, "database", "", "database to back up (its name under databases: in the config); required")
	f.StringVar(&in.Instance, "instance", "", "source SQL instance (sql_instances[].name), when the database name is configured on several")
	f.StringVar(&in.LastServer, "last-server", "", "previous cycle's primary backup server (default: read from the manifests)")
	f.Int64Var(&in.Resume, "resume", 0, "finish set SEQ, left written/copied/restored/checked by an outage, instead of taking a new backup")
	f.BoolVar(&in.Differential, "differential", false, "take a differential on the newest verified full (diff_backup), proven on top of it, instead of a full")
	f.BoolVar(&wait, "wait", false, "follow the cycle to its end and print its result; exit 1 unless it is verified (no time limit unless --timeout is given)")
	jsonFlag(cmd, &asJSON, "print the started run (with --wait: the result)")
	return cmd
}

func printCycleResult(e *env, run client.CycleRun) {
	r := run.Result
	kind := ""
	if r.Base > 0 {
		kind = fmt.Sprintf(" (a differential on sequence %d)", r.Base)
	}
	fmt.Fprintf(e.stdout, "VERIFIED %s sequence %d%s (workflow %s)\n", tsql.Printable(r.Database), r.Sequence, kind, run.WorkflowID)
	fmt.Fprintf(e.stdout, "  backed up to %s, copied to %s, restored as %s, CHECKDB clean, sanity checks hold\n", r.Server, r.Remote, tsql.Printable(r.VerifyDatabase))
	fmt.Fprintf(e.stdout, "  set:     %d stripes, manifest %s, on %s\n", len(r.Stripes), r.Manifest, strings.Join(r.Locations, " and "))
	t := r.Timings
	fmt.Fprintf(e.stdout, "  times:   backup %s, copy %s, restore %s, CHECKDB %s, sanity %s; total %s\n",
		plan.RoundDuration(t.Backup), plan.RoundDuration(t.Copy), plan.RoundDuration(t.Restore), plan.RoundDuration(t.CheckDB), plan.RoundDuration(t.Sanity), plan.RoundDuration(t.Total))
	if len(r.Failed) > 0 {
		fmt.Fprintf(e.stdout, "  failed on the way: sequences %v\n", r.Failed)
	}
	for _, d := range r.Deleted {
		fmt.Fprintf(e.stdout, "  retention deleted sequence %d on %s\n", d.Sequence, d.Server)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(e.stdout, "  warning: %s\n", w)
	}
}
