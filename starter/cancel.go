package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/backupcycle/backupcycle/internal/selection"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

func cancelCommand(e *env) *cobra.Command {
	var database, instance, workflowID string
	var fleet, wait, asJSON bool
	cmd := &cobra.Command{
		Use:   "cancel",
		Short: "cancel the running cycle of a database (--database), a workflow (--workflow-id) or the running fleet (--fleet)",
		Long: `Requests cancellation of a running workflow. A cycle stops its running statement (BACKUP, RESTORE,
CHECKDB), removes the files of its unfinished set, records the set as cancelled on the backup servers and
ends Canceled; every earlier set is left as it is. A fleet cancels its running cycles the same way and
reports the databases it did not reach.

--database takes the database's name: with --config (or --instance) the cycle's workflow id is derived
from it; without either the running cycles of that name are looked up in Temporal's visibility. --wait
follows the cancelled runs until they have closed (no time limit unless --timeout is given).`,
		Args: noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			n := 0
			for _, given := range []bool{database != "", workflowID != "", fleet} {
				if given {
					n++
				}
			}
			if n != 1 {
				return usageError{msg: "give exactly one of --database NAME, --workflow-id ID, --fleet"}
			}
			if instance != "" && database == "" {
				return usageError{msg: "--instance goes with --database"}
			}
			if database != "" && e.configFile != "" {
				cfg, err := e.loadConfig()
				if err != nil {
					return err
				}
				db, err := selection.Lookup(cfg, instance, database)
				if err != nil {
					return err
				}
				instance = db.Instance
			}
			c, qctx, done, err := e.session(ctx)
			if err != nil {
				return err
			}
			defer done()
			var ids []string
			switch {
			case workflowID != "":
				ids = []string{workflowID}
			case fleet:
				runs, err := c.RunningFleets(qctx)
				if err != nil {
					return err
				}
				if len(runs) == 0 {
					return fmt.Errorf("no fleet run is running on namespace %q: nothing to cancel (see `starter fleet --status`)", c.Namespace())
				}
				for _, r := range runs {
					ids = append(ids, r.WorkflowID)
				}
			case instance != "":
				ids = []string{client.CycleWorkflowID(instance, database)}
			default:
				if ids, err = runningCycleIDs(qctx, c, database); err != nil {
					return err
				}
			}

			out := cancelJSON{Cancelled: []cancelledJSON{}}
			var errs []error
			for _, id := range ids {
				r, err := c.Cancel(qctx, id)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				out.Cancelled = append(out.Cancelled, cancelledJSON{WorkflowID: r.WorkflowID, RunID: r.RunID, Type: r.Type,
					Database: r.Database, Instance: r.Instance, Status: "CancelRequested"})
			}
			if wait {
				wctx, wcancel := e.withTimeout(ctx, 0)
				defer wcancel()
				for i := range out.Cancelled {
					cr := &out.Cancelled[i]
					st, err := c.WaitClosed(wctx, cr.WorkflowID, cr.RunID)
					if err != nil {
						errs = append(errs, err)
						continue
					}
					cr.Status = st
					if st != "Canceled" {
						errs = append(errs, fmt.Errorf("workflow %s ended %s before the cancel took effect", cr.WorkflowID, st))
					}
				}
			}
			if asJSON {
				if err := writeJSON(e.stdout, out); err != nil {
					return err
				}
			} else {
				writeCancelled(e.stdout, out, wait)
			}
			return errors.Join(errs...)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&database, "database", "", "cancel the running cycle of this database (its name)")
	f.StringVar(&instance, "instance", "", "with --database: its source instance, when the name is configured on several")
	f.StringVar(&workflowID, "workflow-id", "", "cancel the running workflow with this id (a cycle, a fleet run, a scheduled launcher)")
	f.BoolVar(&fleet, "fleet", false, "cancel the running fleet run(s): the manual one and any a schedule started")
	f.BoolVar(&wait, "wait", false, "wait until the cancelled runs have closed and print how they ended")
	jsonFlag(cmd, &asJSON, "print the cancelled runs")
	return cmd
}

// runningCycleIDs finds the running cycles of a database by name through
// visibility, when neither --config nor --instance says its instance.
func runningCycleIDs(ctx context.Context, c *client.Client, database string) ([]string, error) {
	runs, err := c.RunningCycles(ctx, database, "")
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("no running cycle of database %s found on namespace %q (one started a moment ago may not be listed yet: give --config or --instance)", database, c.Namespace())
	}
	instances := map[string]bool{}
	var ids []string
	for _, r := range runs {
		if r.Instance != "" {
			instances[r.Instance] = true
		}
		ids = append(ids, r.WorkflowID)
	}
	if len(instances) > 1 {
		var names []string
		for n := range instances {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, usageError{msg: fmt.Sprintf("database %s has running cycles on instances %s: give --instance", database, strings.Join(names, ", "))}
	}
	sort.Strings(ids)
	return ids, nil
}

func writeCancelled(w io.Writer, out cancelJSON, waited bool) {
	for _, c := range out.Cancelled {
		what := c.Type
		if c.Database != "" {
			what += " of " + c.Database
			if c.Instance != "" {
				what += "@" + c.Instance
			}
		}
		if waited {
			fmt.Fprintf(w, "%s %s (run %s): %s\n", what, c.WorkflowID, c.RunID, c.Status)
			continue
		}
		fmt.Fprintf(w, "cancel requested: %s %s (run %s)\n", what, c.WorkflowID, c.RunID)
		if c.Type == workflows.FleetName {
			fmt.Fprintf(w, "  it cancels its running cycles and ends Canceled; follow it: `starter fleet --status --workflow-id %s`\n", c.WorkflowID)
		} else {
			fmt.Fprintf(w, "  it stops its running statement, removes the unfinished set's files, records the set as cancelled and ends Canceled; follow it: `starter status --database %s`\n", tsql.Printable(c.Database))
		}
	}
}
