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
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

func drillCommand(e *env) *cobra.Command {
	var in workflows.DrillInput
	var asOf string
	var wait, asJSON bool
	cmd := &cobra.Command{
		Use:   "drill",
		Short: "run a recovery drill of a database now: recover it under a scratch name, check it, drop it, record it",
		Long: `Starts the Drill workflow, as the schedule of a database with drill: does: a Recover (its child workflow)
restores the database under drill.name (default <db>_drill) on drill.instance (default the verification
instance of its copy target), to --as-of, --latest, or drill.point / drill.within; the sanity checks (and
CHECKDB with drill.checkdb) run on the copy; the copy is dropped (only the copy this drill created); the
drill is recorded beside the manifests on every backup server it read: what was restored, the point
reached, the measured time to recover against rto, each step's time. --from remote reads the copy
targets alone, as if the primary site were gone. --from immutable restores the newest set of the
immutable copy (immutable_copy) to its end, as if ransomware had taken every backup server: its
objects are staged on a backup server (drill.staging, under staging/), each SHA-256 checked, restored
from there, and removed after the drill.

The workflow id is drill/<instance>/<database>: one drill of a database at a time. Without --wait it
prints the started run and returns; with --wait it prints the outcome. Exit 1 unless the drill passed.`,
		Args: noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			switch {
			case in.Database == "":
				return usageError{msg: "--database NAME is required: the database to drill, as configured"}
			case asOf != "" && in.Latest:
				return usageError{msg: "give one of --as-of TIME and --latest, or neither for drill.point / drill.within"}
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
			if err := in.Check(); err != nil {
				return usageError{msg: err.Error()}
			}
			var rto time.Duration
			if cfg != nil {
				if db, err := cfg.Database(inst, in.Database); err == nil {
					rto = db.RTO
				}
			}
			c, err := e.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			run, err := c.StartDrill(ctx, in)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if !wait {
				if asJSON {
					return writeJSON(w, startedJSON{WorkflowID: run.GetID(), RunID: run.GetRunID(), Database: in.Database, Instance: in.Instance,
						Namespace: c.Namespace(), TaskQueue: c.TaskQueue()})
				}
				fmt.Fprintf(w, "drill of %s started: workflow %s, run %s (namespace %s, task queue %s)\n",
					tsql.Printable(in.Database), run.GetID(), run.GetRunID(), c.Namespace(), c.TaskQueue())
				fmt.Fprintf(w, "  follow it in the Web UI (workflow %s and its Recover child) or with `starter drill ... --wait`\n", run.GetID())
				return nil
			}
			if !asJSON {
				fmt.Fprintf(w, "drill of %s started: workflow %s; waiting...\n", tsql.Printable(in.Database), run.GetID())
			}
			wctx, cancel := e.withTimeout(ctx, 0)
			defer cancel()
			res, err := c.WaitDrill(wctx, run)
			if err == nil && asJSON {
				return writeJSON(w, res.Result)
			}
			var appErr *temporal.ApplicationError
			if err != nil && errors.As(err, &appErr) {
				return fmt.Errorf("drill %s of %s failed: %s [%s]", res.WorkflowID, in.Database, appErr.Message(), appErr.Type())
			}
			if err != nil {
				return err
			}
			printDrillResult(w, res, rto)
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&in.Database, "database", "", "database to drill (its name under databases: in the config, or one an instance selects); required")
	f.StringVar(&in.Instance, "instance", "", "its source SQL instance (sql_instances[].name), when the name is configured on several")
	f.StringVar(&in.From, "from", "", "any (every backup server of the database), remote (its copy targets alone) or immutable (its immutable copy, staged); default drill.from")
	f.StringVar(&asOf, "as-of", "", "the point: RFC 3339 (2026-03-01T02:15:00Z, or with an offset), or a date and time in this machine's zone")
	f.BoolVar(&in.Latest, "latest", false, "the newest point the backups reach (default: drill.point, or a point of drill.within)")
	f.BoolVar(&wait, "wait", false, "follow the drill to its end and print its outcome (no time limit unless --timeout is given)")
	jsonFlag(cmd, &asJSON, "print the started run (with --wait: the drill's result)")
	return cmd
}

// printDrillResult prints a passed drill: what was recovered where, the
// time to recover against rto (0: none configured), the point reached,
// what was restored, the checks, the copy dropped, where it is recorded.
func printDrillResult(w io.Writer, run client.DrillRun, rto time.Duration) {
	st := run.Result
	if st.Skipped != "" {
		fmt.Fprintf(w, "DRILL SKIPPED %s: %s\n", tsql.Printable(st.Database), st.Skipped)
		return
	}
	r := st.Result
	fmt.Fprintf(w, "DRILL %s %s: recovered as %s on %s to %s (%s; workflow %s, recover %s)\n", strings.ToUpper(r.Outcome), tsql.Printable(st.Database),
		tsql.Printable(r.Database), r.Instance, r.RecoveryPoint.UTC().Format(time.RFC3339Nano), r.RecoveryPointFrom, run.WorkflowID, st.RecoverID)
	line := "  rto:      time to recover " + plan.RoundDuration(r.RTO).String()
	switch {
	case rto <= 0:
		line += " (no rto configured)"
	case r.RTO > rto:
		line += fmt.Sprintf(", ABOVE the rto of %s", status.Duration(rto))
	default:
		line += fmt.Sprintf(", within the rto of %s", status.Duration(rto))
	}
	fmt.Fprintln(w, line)
	from := fmt.Sprintf("set %d", r.Sequence)
	if r.LastLog > 0 {
		from += fmt.Sprintf(" and %d log backup(s) of chain %d (logs %d-%d)", r.LastLog-r.FirstLog+1, r.Chain, r.FirstLog, r.LastLog)
	}
	fmt.Fprintf(w, "  restored: %s to the point %s, read from %s\n", from, r.Point, strings.Join(r.Servers, ", "))
	if im := r.Immutable; im != nil {
		removed := "removed after"
		if !im.Removed {
			removed = "NOT removed"
		}
		fmt.Fprintf(w, "  immutable: %d object(s) of set %d from %s (%s), staged on %s in %s, %s\n", len(im.Objects), im.Sequence, im.Store,
			im.Location, im.Staging, im.Dir, removed)
	}
	checks := "sanity checks " + strings.Join(r.Sanity, ", ") + " hold"
	if len(r.Sanity) == 0 {
		checks = "no sanity checks configured"
	}
	switch {
	case r.CheckDBClean:
		checks += "; CHECKDB clean"
	case !r.CheckDB:
		checks += "; CHECKDB not run (drill.checkdb)"
	}
	fmt.Fprintf(w, "  checks:   %s\n", checks)
	s := r.Steps
	fmt.Fprintf(w, "  times:    prepare %s, plan %s, full %s, logs %s, recovery %s, checks %s, drop %s\n", plan.RoundDuration(s.Prepare),
		plan.RoundDuration(s.Plan), plan.RoundDuration(s.Full), plan.RoundDuration(s.Logs), plan.RoundDuration(s.Recovery),
		plan.RoundDuration(s.Checks), plan.RoundDuration(s.Drop))
	if pe := predictionText(r.PredictionError); pe != "" {
		fmt.Fprintf(w, "  predicted: %s\n", pe)
	}
	dropped := tsql.Printable(r.Database) + " dropped"
	if !r.Dropped {
		dropped = tsql.Printable(r.Database) + " NOT dropped: " + tsql.Printable(r.DropError)
	}
	fmt.Fprintf(w, "  copy:     %s\n", dropped)
	if st.Leftover != "" {
		fmt.Fprintf(w, "  leftover: %s, dropped first\n", tsql.Printable(st.Leftover))
	}
	fmt.Fprintf(w, "  recorded: on %s\n", strings.Join(st.Recorded, ", "))
}

// predictionText is each predicted step of a drill against its measured
// time: "full 1.2s, measured 1.1s, error -100ms (x0.92); ..." ("": no
// prediction recorded).
func predictionText(errs []catalog.StepError) string {
	var parts []string
	for _, e := range errs {
		parts = append(parts, fmt.Sprintf("%s %s, measured %s, error %s", stepName(e.Step), rd(e.Predicted), rd(e.Measured), errorText(e)))
	}
	return strings.Join(parts, "; ")
}
