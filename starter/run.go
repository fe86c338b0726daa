package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/internal/selection"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

func runCmd(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
	database := fs.String("database", "", "database to back up (its name under databases: in the config); required")
	instance := fs.String("instance", "", "source SQL instance (sql_instances[].name), when the database name is configured on several")
	lastServer := fs.String("last-server", "", "previous cycle's primary backup server (default: read from the manifests)")
	resume := fs.Int64("resume", 0, "finish set SEQ, left written/copied/restored/checked by an outage, instead of taking a new backup")
	wait := fs.Bool("wait", false, "wait for the cycle and print its result; exit 1 unless it is verified (--timeout bounds the wait only if given)")
	asJSON := fs.Bool("json", false, "with --wait: print the result as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *database == "" {
		return usageError{msg: "--database NAME is required: the database to back up, as configured under databases:"}
	}
	if *resume < 0 {
		return usageError{msg: "--resume SEQ takes the positive sequence number of an unfinished set (see `starter status`)"}
	}
	in := workflows.CycleInput{Database: *database, Instance: *instance, LastServer: *lastServer, Resume: *resume}
	if e.configFile != "" {
		// Resolve the instance so the workflow id is the same however the
		// cycle is started (and a misspelt name fails here, not in the worker).
		cfg, err := e.loadConfig()
		if err != nil {
			return err
		}
		db, err := selection.Lookup(cfg, *instance, *database)
		if err != nil {
			return err
		}
		in.Instance = db.Instance
	}
	c, err := e.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	run, err := c.StartCycle(ctx, in)
	if err != nil {
		return err
	}
	if !*wait {
		fmt.Fprintf(e.stdout, "backup cycle of %s started: workflow %s, run %s (namespace %s, task queue %s)\n",
			in.Database, run.GetID(), run.GetRunID(), c.Namespace(), c.TaskQueue())
		fmt.Fprintf(e.stdout, "  follow it: `starter status --database %s`, or in the Web UI: Workflows, filter BackupDatabase = '%s'\n",
			in.Database, strings.ReplaceAll(in.Database, "'", "''"))
		return nil
	}
	if !*asJSON {
		fmt.Fprintf(e.stdout, "backup cycle of %s started: workflow %s, run %s; waiting...\n", in.Database, run.GetID(), run.GetRunID())
	}
	wctx := ctx
	if flagSet(fs, "timeout") {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, e.timeout)
		defer cancel()
	}
	res, err := c.WaitCycle(wctx, run, in.Database)
	var appErr *temporal.ApplicationError
	if err != nil && errors.As(err, &appErr) {
		// The cycle's own reason and error type, not Temporal's nested chain
		// (which repeats the message per layer).
		return fmt.Errorf("backup cycle %s of %s failed: %s [%s]", res.WorkflowID, in.Database, appErr.Message(), appErr.Type())
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"workflow_id": res.WorkflowID, "run_id": res.RunID, "result": res.Result})
	}
	if res.Result.Skipped != "" {
		return fmt.Errorf("backup cycle %s of %s %s", res.WorkflowID, in.Database, res.Result.Skipped)
	}
	printCycleResult(e, res)
	if len(res.Result.Locations) == 0 {
		// A cycle returns a result only once its set is verified; a result
		// without a location is not a verified set.
		return fmt.Errorf("backup cycle %s of %s returned no verified set", res.WorkflowID, in.Database)
	}
	return nil
}

func printCycleResult(e *env, run client.CycleRun) {
	r := run.Result
	fmt.Fprintf(e.stdout, "VERIFIED %s sequence %d (workflow %s)\n", r.Database, r.Sequence, run.WorkflowID)
	fmt.Fprintf(e.stdout, "  backed up to %s, copied to %s, restored as %s, CHECKDB clean, sanity checks hold\n", r.Server, r.Remote, r.VerifyDatabase)
	fmt.Fprintf(e.stdout, "  set:     %d stripes, manifest %s, on %s\n", len(r.Stripes), r.Manifest, strings.Join(r.Locations, " and "))
	t := r.Timings
	fmt.Fprintf(e.stdout, "  times:   backup %s, copy %s, restore %s, CHECKDB %s, sanity %s; total %s\n",
		rnd(t.Backup), rnd(t.Copy), rnd(t.Restore), rnd(t.CheckDB), rnd(t.Sanity), rnd(t.Total))
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

func rnd(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
