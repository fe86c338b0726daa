// Command starter starts and follows backupcycle workflows: a health check,
// a verified backup cycle now, a recover to a point in time, the fleet,
// schedules, status, cancel, plans,
// the permission checks and the probes of what SQL Server does where the
// product assumes (conformance). It talks to Temporal through package
// starter/client, which other services import instead of shelling out to
// this command.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	_ "time/tzdata" // --tz names resolve on hosts without a zoneinfo database (Windows)

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/logging"
	"github.com/backupcycle/backupcycle/internal/selection"
	"github.com/backupcycle/backupcycle/internal/version"
	"github.com/backupcycle/backupcycle/starter/client"
)

// Exit codes: 0 done, 1 the command failed, 2 bad usage.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// defaultTimeout bounds the commands that ask Temporal and return (health,
// status, schedule, cancel, fleet --status) when --timeout is not given.
// `run --wait`, `fleet --wait` and `cancel --wait` wait for the run to end
// unless --timeout is given: a cycle takes hours.
var defaultTimeout = time.Minute

// env is what commands share: output streams and the connection settings.
type env struct {
	stdin          io.Reader // answers to a confirmation (conformance)
	stdout, stderr io.Writer
	// tty: stdout is a terminal, so `run --wait` redraws one progress line
	// per step instead of printing plain lines.
	tty        bool
	configFile string
	address    string
	namespace  string
	taskQueue  string
	timeout    time.Duration
	timeoutSet bool
	log        *zap.Logger
	cfg        *config.Config // loaded once by loadConfig
}

// usageError is bad command-line input: exit 2, with a hint.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// failure is an error of a command's work (not of its command line): exit 1.
type failure struct{ err error }

func (f failure) Error() string { return f.err.Error() }
func (f failure) Unwrap() error { return f.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runIO(ctx, args, os.Stdin, stdout, stderr)
}

// runIO is run with the standard input given.
func runIO(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	if f, ok := stdout.(*os.File); ok {
		e.tty = term.IsTerminal(int(f.Fd()))
	}
	level := zapcore.WarnLevel // a command's output is its result, not the SDK's chatter
	if os.Getenv(logging.LevelEnv) != "" {
		if l, err := zapcore.ParseLevel(os.Getenv(logging.LevelEnv)); err == nil {
			level = l
		}
	}
	e.log = logging.NewAt(true, level)
	defer func() { _ = e.log.Sync() }()
	return e.execute(ctx, newRoot(e), args)
}

// execute runs root with args and maps the outcome to an exit code.
func (e *env) execute(ctx context.Context, root *cobra.Command, args []string) int {
	root.SetArgs(args)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if cmd == nil {
		cmd = root
	}
	var ue usageError
	var f failure
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "%s: %s\n", cmd.CommandPath(), ue.msg)
		return exitUsage
	case errors.As(err, &f):
		printFailure(e.stderr, f.err)
		return exitFail
	default:
		// cobra's own: an unknown command, flag or argument.
		fmt.Fprintf(e.stderr, "%s: %s\nRun `%s --help` for usage.\n", cmd.CommandPath(), strings.TrimRight(err.Error(), "\n"), cmd.CommandPath())
		return exitUsage
	}
}

// printFailure prints a configuration's problems one per line, as package
// config words them (file:line: message), and any other error on one line:
// the error chain already names the thing and the fix.
func printFailure(w io.Writer, err error) {
	var ce config.Errors
	if errors.As(err, &ce) {
		for _, c := range ce {
			fmt.Fprintln(w, c.Error())
		}
		fmt.Fprintf(w, "starter: %d problem(s) in the configuration above: fix them and run the command again\n", len(ce))
		return
	}
	fmt.Fprintf(w, "starter: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "starter",
		Short: "Start and follow backupcycle workflows on Temporal",
		Long: `Starts and follows backupcycle workflows on Temporal: verified backup cycles, the fleet, schedules.

The connection flags (--config, --address, --namespace, --task-queue, --timeout) go before or after the
command: ` + "`starter --config c.yaml run --database Sales` and `starter run --database Sales --config c.yaml`" + ` are the same.
Commands that take a database take its name (--database, with --instance when the name is configured on
several instances): the workflow id is derived from it.

Exit codes: 0 done, 1 failed, 2 bad usage. --json prints snake_case keys, durations in seconds (keys
ending in _seconds) and timestamps in RFC 3339.`,
		Version:       version.String(),
		SilenceErrors: true,
		SilenceUsage:  true,
		// A bare `starter` is a usage error; an unknown command is found by
		// cobra (Args nil: it suggests the nearest command).
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageError{msg: "give a command: see `starter --help` for the list"}
		},
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			e.timeoutSet = cmd.Flags().Changed("timeout")
			if e.timeoutSet && e.timeout <= 0 {
				return usageError{msg: fmt.Sprintf("--timeout %s: give a positive duration such as 90s or 2h", e.timeout)}
			}
			return nil
		},
	}
	root.SetVersionTemplate("starter {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&e.configFile, "config", "", "backupcycle YAML config; its temporal: section says how to reach Temporal")
	pf.StringVar(&e.address, "address", "", "Temporal frontend host:port (overrides the config; default "+client.DefaultAddress+")")
	pf.StringVar(&e.namespace, "namespace", "", "Temporal namespace (overrides the config; default "+client.DefaultNamespace+")")
	pf.StringVar(&e.taskQueue, "task-queue", "", "task queue of the workers (overrides the config; default backupcycle)")
	pf.DurationVar(&e.timeout, "timeout", 0, fmt.Sprintf("give up waiting after this long (default %s; run --wait, fleet --wait and cancel --wait wait until the run ends unless it is given)", defaultTimeout))
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{msg: err.Error() + flagHint(cmd, err) + fmt.Sprintf(" (see `%s --help`)", cmd.CommandPath())}
	})
	root.AddCommand(
		healthCommand(e),
		runCommand(e),
		cancelCommand(e),
		scheduleCommand(e),
		statusCommand(e),
		planCommand(e),
		fleetCommand(e),
		databasesCommand(e),
		preflightCommand(e),
		calibrateCommand(e),
		conformanceCommand(e),
		logsCommand(e),
		recoverCommand(e),
		drillCommand(e),
		evidenceCommand(e),
	)
	return root
}

// flagHint points the spellings of earlier releases to what replaced them.
func flagHint(cmd *cobra.Command, err error) string {
	if cmd.Name() != "schedule" {
		return ""
	}
	for _, old := range []string{"apply", "list", "pause", "unpause", "trigger", "delete"} {
		if strings.Contains(err.Error(), "--"+old) {
			return fmt.Sprintf(": schedule actions are subcommands, e.g. `starter schedule %s`", old)
		}
	}
	return ""
}

// action wraps a command's work: its errors are failures (exit 1) unless
// they are usage errors (exit 2).
func action(f func(ctx context.Context, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := f(cmd.Context(), cmd, args)
		var ue usageError
		if err == nil || errors.As(err, &ue) {
			return err
		}
		return failure{err: err}
	}
}

// noArgs rejects stray arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{msg: fmt.Sprintf("unexpected argument %q: see `%s --help`", args[0], cmd.CommandPath())}
	}
	return nil
}

// waitTimeout is --timeout if given, else def (0: no limit).
func (e *env) waitTimeout(def time.Duration) time.Duration {
	if e.timeoutSet {
		return e.timeout
	}
	return def
}

// withTimeout bounds ctx by waitTimeout(def); def 0 and no --timeout leave
// it unbounded.
func (e *env) withTimeout(ctx context.Context, def time.Duration) (context.Context, context.CancelFunc) {
	if d := e.waitTimeout(def); d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

// temporalConfig merges the config file's temporal: section and the flags.
func (e *env) temporalConfig() (config.Temporal, error) {
	var t config.Temporal
	if e.configFile != "" {
		cfg, err := e.loadConfig()
		if err != nil {
			return t, err
		}
		t = cfg.Temporal
	}
	if e.address != "" {
		t.Address = e.address
	}
	if e.namespace != "" {
		t.Namespace = e.namespace
	}
	if e.taskQueue != "" {
		t.TaskQueue = e.taskQueue
	}
	return client.WithDefaults(t), nil
}

// dial connects with the merged settings.
func (e *env) dial(ctx context.Context) (*client.Client, error) {
	t, err := e.temporalConfig()
	if err != nil {
		return nil, err
	}
	return client.Dial(ctx, t, e.log)
}

// resolveInstance settles a database's instance from the configuration
// (when one is given), so that its workflow id is the same however a run is
// started, and a misspelt name fails here, not in the worker. cfg is nil
// without a configuration.
func (e *env) resolveInstance(instance, database string) (string, *config.Config, error) {
	if e.configFile == "" {
		return instance, nil, nil
	}
	cfg, err := e.loadConfig()
	if err != nil {
		return "", nil, err
	}
	db, err := selection.Lookup(cfg, instance, database)
	if err != nil {
		return "", nil, err
	}
	return db.Instance, cfg, nil
}

// session dials Temporal and bounds ctx by --timeout, else defaultTimeout,
// for a command that asks one thing and returns; done closes both.
func (e *env) session(ctx context.Context) (*client.Client, context.Context, func(), error) {
	c, err := e.dial(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := e.withTimeout(ctx, defaultTimeout)
	return c, ctx, func() { cancel(); c.Close() }, nil
}

// loadConfig loads --config once; commands that need it call requireConfig.
func (e *env) loadConfig() (*config.Config, error) {
	if e.cfg == nil {
		cfg, err := config.Load(e.configFile)
		if err != nil {
			return nil, err
		}
		e.cfg = cfg
	}
	return e.cfg, nil
}

// requireConfig is loadConfig for commands that cannot work without one.
func (e *env) requireConfig(cmd *cobra.Command) (*config.Config, error) {
	if e.configFile == "" {
		return nil, usageError{msg: fmt.Sprintf("--config FILE is required: the backupcycle YAML that lists the databases (see config.example.yaml; `%s --help`)", cmd.CommandPath())}
	}
	return e.loadConfig()
}

// jsonFlag adds --json to cmd.
func jsonFlag(cmd *cobra.Command, v *bool, what string) {
	cmd.Flags().BoolVar(v, "json", false, what+" as JSON (snake_case keys, durations in seconds, RFC 3339 times)")
}
