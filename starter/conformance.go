package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/conformance"
	"github.com/backupcycle/backupcycle/internal/version"
)

// conformanceCommand runs the conformance probes on a source instance and
// a verification instance: what the product assumes where SQL Server's
// documentation is silent, checked on the real server with a scratch
// database that is removed afterwards. Exit 1 when a probe fails.
func conformanceCommand(e *env) *cobra.Command {
	var o conformance.Options
	var size string
	var asJSON, yes bool
	cmd := &cobra.Command{
		Use:   "conformance",
		Short: "check on your SQL Server what the product assumes where the documentation is silent; a scratch database, removed afterwards",
		Long: `Checks on the real SQL Server what backupcycle assumes where Microsoft's documentation does not settle it:
LastGoodCheckDbTime after a restore and after a CHECKDB, the phases DBCC CHECKDB shows in sys.dm_exec_requests,
the batch text sys.dm_exec_sql_text returns, when create_date and restore_date are stamped, whether a BACKUP whose
client vanished runs on, the drop of a RESTORING copy, the clock of RESTORE HEADERONLY's dates, the errors of a
file that is not a backup or does not exist, the recovery forks of the log backup after a restore, and, when a
database of --instance has encryption:, the header of a backup taken WITH ENCRYPTION.

It first prints what it will create (a scratch database on --instance, its backups and log backups on a backup
server, two copies on --verify-instance, the scratch database restored over itself) and asks before it goes ahead (--yes does not ask). Everything it creates is removed when it ends,
also when it fails or is interrupted (Ctrl-C); what it could not remove is named. It needs only the configured logins'
CREATE DATABASE (it owns what it creates), VIEW SERVER STATE to watch its own statements, VIEW DEFINITION on the
certificate of encryption: (when configured), and the SQL Server service accounts' access to the backup server.

Per probe it prints the assumption, what the server did, holds / fails / inconclusive and what a failure means.
--json is what to send back to backupcycle's maintainers. Exit 0 when every probe holds or is inconclusive, 1 when
one fails, the run stopped early or something it created could not be removed.`,
		Args: noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if o.Instance == "" {
				return usageError{msg: "--instance NAME is required: the SQL instance (sql_instances name) to create the scratch database on"}
			}
			cfg, err := e.requireConfig(cmd)
			if err != nil {
				return err
			}
			o.Config = cfg
			if size != "" {
				n, err := config.ParseSize(size)
				if err != nil || n <= 0 {
					return usageError{msg: fmt.Sprintf("--size %q: give the data to fill the scratch database with, e.g. 256MiB or 1GiB", size)}
				}
				o.FillBytes = int64(n)
			}
			p, err := conformance.NewPlan(o)
			if err != nil {
				return usageError{msg: err.Error()}
			}
			// With --json, stdout is the report alone.
			talk := e.stdout
			if asJSON {
				talk = e.stderr
			}
			if err := p.WriteText(talk); err != nil {
				return err
			}
			if !yes && !confirmed(e.stdin, talk) {
				return fmt.Errorf("not confirmed: nothing was created (--yes goes ahead without asking)")
			}
			ctx, cancel := e.withTimeout(ctx, 0)
			defer cancel()
			rep, runErr := conformance.Run(ctx, p)
			rep.Version = version.String()
			if asJSON {
				err = rep.WriteJSON(e.stdout)
			} else {
				err = rep.WriteText(e.stdout)
			}
			switch {
			case runErr != nil:
				return runErr
			case err != nil:
				return err
			case len(rep.Cleanup.Left) > 0:
				return fmt.Errorf("%d things it created could not be removed (listed in the report): remove them by hand", len(rep.Cleanup.Left))
			case rep.Failed():
				return fmt.Errorf("%d of %d probes fail: SQL Server does not do what the product assumes (see the report)", rep.Fails, len(rep.Probes))
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&o.Instance, "instance", "", "the SQL instance (sql_instances name) to create the scratch database on and back it up (required)")
	f.StringVar(&o.VerifyInstance, "verify-instance", "", "the instance that restores the copies (default: --instance, under other names)")
	f.StringVar(&o.Server, "server", "", "the backup server to back up to (default: one whose verify_instance is the verification instance, else the first)")
	f.StringVar(&size, "size", "", "data to fill the scratch database with (default 256MiB): larger makes the statements slow enough to watch")
	f.BoolVar(&yes, "yes", false, "go ahead without asking")
	jsonFlag(cmd, &asJSON, "print the report (the plan and the question go to stderr)")
	return cmd
}

// confirmed asks on w and reads the answer from in: yes or y.
func confirmed(in io.Reader, w io.Writer) bool {
	fmt.Fprint(w, "Go ahead? [y/N] ")
	if in == nil {
		return false
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if f, ok := in.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		fmt.Fprintln(w, strings.TrimSpace(line)) // a terminal echoes the answer itself
	}
	if err != nil && line == "" {
		return false
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes"
}
