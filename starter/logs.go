package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/backupcycle/backupcycle/internal/selection"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/workflows"
)

// logsCommand is `starter logs`: the log chain of a database as its
// running workflow reports it, and `logs start`.
func logsCommand(e *env) *cobra.Command {
	var database, instance string
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "logs",
		Short: "the log chain of a database (--database): its state, last log backup, lag and copies; `logs start` starts chains",
		Long: `Shows the log chains of a database with log_backup. With --config, from the chain records on every
backup server of the configuration (read with its manifest keys, as status --from-manifests reads the
manifests): per chain its base full (sequence, finish, verified), each log backup (number, state, LSN
range, finish with the source's offset from UTC, size, the servers holding it, proven or not and how,
another tool's log backup adopted or not), the gaps a restore from the base meets and why a broken
chain ended; the newest chain and its last 20 log backups unless --all; then the running LogChain
workflow's answer (state, lag, copies) when Temporal is reachable. Without --config, only the workflow's
answer (--instance needed): logchain/<instance>/<database>.`,
		Args: noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if database == "" {
				return usageError{msg: "--database NAME is required (or use `starter logs start`)"}
			}
			if e.configFile != "" {
				return logsFromRecords(ctx, e, cmd.OutOrStdout(), instance, database, asJSON, all)
			}
			inst := instance
			if inst == "" {
				return usageError{msg: "--instance is required without --config: the chain's workflow id names the instance"}
			}
			c, qctx, done, err := e.session(ctx)
			if err != nil {
				return err
			}
			defer done()
			id := workflows.LogChainWorkflowID(inst, database)
			v, err := c.SDK().QueryWorkflow(qctx, id, "", workflows.LogChainQuery)
			if err != nil {
				return fmt.Errorf("log chain of %s/%s (workflow %s): %w; start it with `starter logs start`", inst, tsql.Printable(database), id, err)
			}
			var st workflows.LogChainStatus
			if err := v.Get(&st); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), st)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s@%s: log chain %s", tsql.Printable(st.Database), tsql.Printable(st.Instance), st.State)
			if st.Chain > 0 {
				fmt.Fprintf(w, ", chain %d", st.Chain)
			}
			fmt.Fprintln(w)
			if st.LastLog > 0 {
				fmt.Fprintf(w, "  last log %d to LSN %s, started %s, lag %s; copied through %d to %s\n", st.LastLog, st.LastLSN,
					st.LastLogStart.UTC().Format(time.RFC3339), st.Lag.Round(time.Second), st.CopiedThrough, st.CopyTo)
			}
			if st.Break != nil {
				fmt.Fprintf(w, "  broken (%s): %s\n", st.Break.Reason, tsql.Printable(st.Break.Detail))
			}
			for _, f := range st.Foreign {
				fmt.Fprintf(w, "  foreign log backup: %s by %s at %s (adopted: %v)\n", tsql.Printable(f.Path), tsql.Printable(f.Tool),
					f.Start.UTC().Format(time.RFC3339), f.Adopted)
			}
			for _, msg := range []string{st.LastError, st.CopyError} {
				if msg != "" {
					fmt.Fprintf(w, "  error: %s\n", tsql.Printable(msg))
				}
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&database, "database", "", "the database")
	cmd.Flags().StringVar(&instance, "instance", "", "its instance (needed without --config)")
	cmd.Flags().BoolVar(&all, "all", false, "with --config: every chain and every log backup (default: the newest chain, its last 20)")
	jsonFlag(cmd, &asJSON, "the chain's status")
	cmd.AddCommand(logsStartCommand(e))
	return cmd
}

// logsStartCommand is `starter logs start`: idempotent, never replaces a
// running chain.
func logsStartCommand(e *env) *cobra.Command {
	var database, instance string
	cmd := &cobra.Command{
		Use:   "start",
		Short: "start the log chain of a database (--database), or of every database with log_backup in --config",
		Long: `Starts the LogChain workflow of a database under its one id, logchain/<instance>/<database>, or returns the
one already running (a running chain is never replaced or terminated: it holds the chain's cursor). Without
--database, every databases: entry of --config with log_backup gets its chain; the worker does the same
when it starts.`,
		Args: noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			c, qctx, done, err := e.session(ctx)
			if err != nil {
				return err
			}
			defer done()
			w := cmd.OutOrStdout()
			if database == "" {
				cfg, err := e.requireConfig(cmd)
				if err != nil {
					return err
				}
				ids, err := c.EnsureLogChains(qctx, cfg)
				for _, id := range ids {
					fmt.Fprintf(w, "log chain %s running\n", tsql.Printable(id))
				}
				if len(ids) == 0 && err == nil {
					fmt.Fprintln(w, "no database of the configuration has log_backup")
				}
				return err
			}
			inst, _, err := e.resolveInstance(instance, database)
			if err != nil {
				return err
			}
			if inst == "" {
				return usageError{msg: "--instance is required without --config: the chain's workflow id names the instance"}
			}
			run, err := c.EnsureLogChain(qctx, inst, database)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "log chain %s, run %s\n", tsql.Printable(run.GetID()), run.GetRunID())
			return nil
		}),
	}
	cmd.Flags().StringVar(&database, "database", "", "the database (default: every database with log_backup in --config)")
	cmd.Flags().StringVar(&instance, "instance", "", "its instance (needed without --config)")
	return cmd
}

// logsFromRecords is `starter logs --database D` with --config: the chain
// records on the backup servers, then the workflow's answer when Temporal
// answers (its absence is shown, not an error: the records stand alone).
func logsFromRecords(ctx context.Context, e *env, w io.Writer, instance, database string, asJSON, all bool) error {
	cfg, err := e.loadConfig()
	if err != nil {
		return err
	}
	db, err := selection.Lookup(cfg, instance, database)
	if err != nil {
		return usageError{msg: err.Error()}
	}
	rctx, cancel := e.withTimeout(ctx, defaultTimeout)
	defer cancel()
	v := readChains(rctx, cfg, db)
	id := workflows.LogChainWorkflowID(db.Instance, db.Name)
	st, qerr := queryLogChain(rctx, e, id)
	v.Workflow = workflowOf(id, st, qerr)
	if asJSON {
		return writeJSON(w, v)
	}
	writeLogsView(w, v, all)
	return nil
}

// queryLogChain asks the chain workflow id for its status.
func queryLogChain(ctx context.Context, e *env, id string) (*workflows.LogChainStatus, error) {
	c, err := e.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	v, err := c.SDK().QueryWorkflow(ctx, id, "", workflows.LogChainQuery)
	if err != nil {
		return nil, fmt.Errorf("no answer (%w): start the chain with `starter logs start`", err)
	}
	var st workflows.LogChainStatus
	if err := v.Get(&st); err != nil {
		return nil, err
	}
	return &st, nil
}
