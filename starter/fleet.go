package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/workflows"
)

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// fleetCmd starts the Fleet workflow now (every selected database of the
// configuration within the limits), or shows the running one.
func fleetCmd(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
	var instances stringList
	fs.Var(&instances, "instance", "only this source instance (sql_instances name; repeatable); default: all")
	wait := fs.Bool("wait", false, "wait for the run and print every database's outcome; exit 1 unless all are verified or deliberately not run")
	status := fs.Bool("status", false, "show the running fleet's progress (the fleet query) instead of starting one")
	asJSON := fs.Bool("json", false, "print the result (or with --status the progress) as JSON")
	workflowID := fs.String("workflow-id", "", "with --status: the fleet run to ask (default "+workflows.FleetWorkflowID+"; a schedule's runs have their own ids)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *status && (*wait || len(instances) > 0) {
		return usageError{msg: "--status shows a running fleet: it does not go with --wait or --instance"}
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
	if *status {
		qctx, cancel := context.WithTimeout(ctx, e.timeout)
		defer cancel()
		st, err := c.FleetStatus(qctx, *workflowID)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(e.stdout, st)
		}
		fmt.Fprintf(e.stdout, "fleet began %s, window ends %s\n  %s\n  counts: %s\n", st.Began.UTC().Format(time.RFC3339),
			st.Deadline.UTC().Format(time.RFC3339), st.Usage, countsText(st.Counts))
		if len(st.Running) > 0 {
			fmt.Fprintf(e.stdout, "  running: %s\n", strings.Join(st.Running, ", "))
		}
		writeOutcomes(e.stdout, st.Outcomes)
		return nil
	}
	run, err := c.StartFleet(ctx, workflows.FleetInput{Instances: instances})
	if err != nil {
		return err
	}
	if !*wait {
		if *asJSON {
			return writeJSON(e.stdout, map[string]string{"workflow_id": run.GetID(), "run_id": run.GetRunID()})
		}
		fmt.Fprintf(e.stdout, "fleet run started: workflow %s, run %s (namespace %s, task queue %s)\n  follow it: `starter fleet --status`, or in the Web UI (its children are the cycles)\n",
			run.GetID(), run.GetRunID(), c.Namespace(), c.TaskQueue())
		return nil
	}
	wctx := ctx
	if flagSet(fs, "timeout") {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, e.timeout)
		defer cancel()
	}
	res, err := c.WaitFleet(wctx, run)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := writeJSON(e.stdout, res); err != nil {
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
		line := fmt.Sprintf("  %-24s %-10s %s", o.Outcome, o.Instance, o.Database)
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
			line += "  " + o.Reason
		}
		fmt.Fprintln(w, line)
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
