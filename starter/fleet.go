package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/workflows"
)

// fleetCommand starts the Fleet workflow now (every selected database of the
// configuration within the limits), or shows the running one.
func fleetCommand(e *env) *cobra.Command {
	var instances []string
	var wait, status, asJSON bool
	var workflowID string
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "run the Fleet now: a verified cycle of every selected database, largest first, within the limits; or --status of the running one",
		Long: `Starts the Fleet workflow now: a verified cycle of every database the instances' selections pick (and every
database under databases:), largest first, within each instance's, backup server's and the fleet's
max_concurrent. --wait follows it to the end (no time limit unless --timeout is given) and exits 1 when any
database failed, was cancelled or was not reached. --status asks the running fleet for its progress.`,
		Args: noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if status && (wait || len(instances) > 0) {
				return usageError{msg: "--status shows a running fleet: it does not go with --wait or --instance"}
			}
			if workflowID != "" && !status {
				return usageError{msg: "--workflow-id goes with --status"}
			}
			if len(instances) > 0 && e.configFile != "" {
				cfg, err := e.loadConfig()
				if err != nil {
					return err
				}
				for _, n := range instances {
					if _, ok := cfg.SQLInstance(n); !ok {
						return usageError{msg: fmt.Sprintf("--instance %q is not defined in sql_instances of %s", n, cfg.File)}
					}
				}
			}
			c, err := e.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			if status {
				qctx, cancel := e.withTimeout(ctx, defaultTimeout)
				defer cancel()
				id := workflowID
				if id == "" {
					id = workflows.FleetWorkflowID
				}
				st, err := c.FleetStatus(qctx, id)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, fleetStatusJSON{WorkflowID: id, BeganAt: rfc3339(st.Began), DeadlineAt: rfc3339(st.Deadline),
						Running: orEmpty(st.Running), Pending: orEmpty(st.Pending), Counts: countsOf(st.Counts), Outcomes: outcomesOf(st.Outcomes), Usage: st.Usage})
				}
				if st.Began.IsZero() {
					// The run has not taken its first step yet.
					fmt.Fprintf(e.stdout, "fleet run %s is starting: no databases resolved yet\n", id)
					return nil
				}
				fmt.Fprintf(e.stdout, "fleet began %s, window ends %s\n  %s\n  counts: %s\n", st.Began.UTC().Format(time.RFC3339),
					st.Deadline.UTC().Format(time.RFC3339), st.Usage, countsText(st.Counts))
				if len(st.Running) > 0 {
					fmt.Fprintf(e.stdout, "  running: %s\n", tsql.Printable(strings.Join(st.Running, ", ")))
				}
				writeOutcomes(e.stdout, st.Outcomes)
				return nil
			}
			run, err := c.StartFleet(ctx, workflows.FleetInput{Instances: instances})
			if err != nil {
				return err
			}
			if !wait {
				if asJSON {
					return writeJSON(e.stdout, startedJSON{WorkflowID: run.GetID(), RunID: run.GetRunID(), Namespace: c.Namespace(), TaskQueue: c.TaskQueue()})
				}
				fmt.Fprintf(e.stdout, "fleet run started: workflow %s, run %s (namespace %s, task queue %s)\n  follow it: `starter fleet --status`, or in the Web UI (its children are the cycles)\n",
					run.GetID(), run.GetRunID(), c.Namespace(), c.TaskQueue())
				return nil
			}
			wctx, cancel := e.withTimeout(ctx, 0)
			defer cancel()
			res, err := c.WaitFleet(wctx, run)
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(e.stdout, fleetResultJSON{WorkflowID: run.GetID(), RunID: run.GetRunID(), BeganAt: rfc3339(res.Began),
					EndedAt: rfc3339(res.Ended), Duration: secs(res.Ended.Sub(res.Began)), Counts: countsOf(res.Counts), Outcomes: outcomesOf(res.Outcomes)}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(e.stdout, "fleet run %s: %s (%s)\n", run.GetID(), countsText(res.Counts), res.Ended.Sub(res.Began).Round(time.Second))
				writeOutcomes(e.stdout, res.Outcomes)
			}
			if bad := res.Counts[workflows.OutcomeFailed] + res.Counts[workflows.OutcomeNotReached] + res.Counts[workflows.OutcomeCancelled]; bad > 0 {
				return fmt.Errorf("fleet run %s: %d database(s) not verified tonight (failed, cancelled or not reached in the window)", run.GetID(), bad)
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringArrayVar(&instances, "instance", nil, "only this source instance (sql_instances name; repeatable); default: all")
	f.BoolVar(&wait, "wait", false, "follow the run to its end and print every database's outcome; exit 1 unless all are verified or deliberately not run (no time limit unless --timeout is given)")
	f.BoolVar(&status, "status", false, "show the running fleet's progress (the fleet query) instead of starting one")
	f.StringVar(&workflowID, "workflow-id", "", "with --status: the fleet run to ask (default "+workflows.FleetWorkflowID+"; a schedule's runs have their own ids)")
	jsonFlag(cmd, &asJSON, "print the started run, the result (--wait) or the progress (--status)")
	return cmd
}

func countsText(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

func writeOutcomes(w io.Writer, outs []workflows.DatabaseOutcome) {
	for _, o := range outs {
		line := fmt.Sprintf("  %-24s %-10s %s", o.Outcome, tsql.Printable(o.Instance), tsql.Printable(o.Database))
		if o.Sequence != 0 {
			line += fmt.Sprintf("  seq %d", o.Sequence)
		}
		if o.Duration > 0 {
			line += "  " + o.Duration.Round(time.Second).String()
		}
		if o.Type != "" {
			line += "  [" + o.Type + "]"
		}
		if o.Reason != "" && o.Outcome != workflows.OutcomeVerified {
			line += "  " + tsql.Printable(o.Reason)
		}
		fmt.Fprintln(w, line)
	}
}
