package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/workflows"
)

// logsCommand is `starter logs`: the log chain of a database as its
// running workflow reports it, and `logs start`.
func logsCommand(e *env) *cobra.Command {
	var database, instance string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "logs",
		Short: "the log chain of a database (--database): its state, last log backup, lag and copies; `logs start` starts chains",
		Long: `Shows the log chain of a database with log_backup, as its LogChain workflow (logchain/<instance>/<database>)
answers the logchain query: the chain's state (ok, degraded, broken, off), the chain id, the newest log
backup (number, LSN, start), its lag, how far the copies to the remote backup server reach, and why a
broken chain ended (a full backup starts the next one).`,
		Args: noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if database == "" {
				return usageError{msg: "--database NAME is required (or use `starter logs start`)"}
			}
			inst, _, err := e.resolveInstance(instance, database)
			if err != nil {
				return err
			}
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
