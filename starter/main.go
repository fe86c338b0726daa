// Command starter starts backupcycle workflows programmatically: a health
// check now, and (as the cycle issues land) a backup cycle now, schedules,
// status and plans. It talks to Temporal through package starter/client,
// which other services import instead of shelling out to this command.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/logging"
	"github.com/backupcycle/backupcycle/starter/client"
)

// Exit codes: 0 done, 1 the command failed, 2 bad usage.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// command is one subcommand. Later issues add theirs to commands.
type command struct {
	name    string
	summary string
	// run parses args with fs (connection flags already on it) and does the work.
	run func(ctx context.Context, env *env, fs *flag.FlagSet, args []string) error
}

var commands = []command{
	{name: "health", summary: "start the HealthCheck workflow, wait for it and print which worker ran it", run: healthCmd},
	{name: "run", summary: "run one verified backup cycle of a database now (backup, copy, restore, CHECKDB, sanity checks)", run: runCmd},
	{name: "schedule", summary: "create or update one Temporal Schedule per configured database; list, pause, trigger or delete them", run: scheduleCmd},
	{name: "status", summary: "show the latest cycles per database: step, sequence, server, outcome, times, live progress", run: statusCmd},
	{name: "plan", summary: "print the plan of a cycle without touching anything: servers, stripes, memory, estimated times", run: planCmd},
	{name: "fleet", summary: "run the Fleet now: a verified cycle of every selected database, largest first, within the limits; or --status of the running one", run: fleetCmd},
	{name: "databases", summary: "show what each instance's databases: selection resolves to now (from sys.databases) and why every other database is skipped", run: databasesCmd},
	{name: "preflight", summary: "check every permission the cycle needs on the configured instances and backup servers; print the GRANTs that are missing", run: preflightCmd},
}

// env is what commands share: output streams and the connection settings.
type env struct {
	stdout, stderr io.Writer
	configFile     string
	address        string
	namespace      string
	taskQueue      string
	timeout        time.Duration
	log            *zap.Logger
	cfg            *config.Config // loaded once by loadConfig
}

// usageError is bad command-line input: exit 2, with a hint.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	var cmd *command
	for i := range commands {
		if commands[i].name == args[0] {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "starter: unknown command %q: run `starter --help` for the list\n", args[0])
		return exitUsage
	}

	e := &env{stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("starter "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&e.configFile, "config", "", "backupcycle YAML config; its temporal: section says how to reach Temporal")
	fs.StringVar(&e.address, "address", "", "Temporal frontend host:port (overrides the config; default "+client.DefaultAddress+")")
	fs.StringVar(&e.namespace, "namespace", "", "Temporal namespace (overrides the config; default "+client.DefaultNamespace+")")
	fs.StringVar(&e.taskQueue, "task-queue", "", "task queue of the workers (overrides the config; default backupcycle)")
	fs.DurationVar(&e.timeout, "timeout", time.Minute, "give up waiting for the workflow after this long")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: starter %s [flags]\n\n%s.\n\nflags:\n", cmd.name, cmd.summary)
		fs.PrintDefaults()
	}

	level := zapcore.WarnLevel // a command's output is its result, not the SDK's chatter
	if os.Getenv(logging.LevelEnv) != "" {
		if l, err := zapcore.ParseLevel(os.Getenv(logging.LevelEnv)); err == nil {
			level = l
		}
	}
	e.log = logging.NewAt(true, level)
	defer func() { _ = e.log.Sync() }()

	err := cmd.run(ctx, e, fs, args[1:])
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "starter %s: %s\n", cmd.name, ue.msg)
		return exitUsage
	default:
		// One line: the error chain already names the thing and the fix.
		fmt.Fprintf(stderr, "starter: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return exitFail
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: starter <command> [flags]\n\nStarts backupcycle workflows on Temporal.\n\ncommands:\n")
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	sort.Strings(names)
	for _, n := range names {
		for _, c := range commands {
			if c.name == n {
				fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
			}
		}
	}
	fmt.Fprintf(w, "\nRun `starter <command> --help` for its flags. Exit codes: 0 done, 1 failed, 2 bad usage.\n")
}

// parse parses the flags and rejects stray arguments.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{msg: fmt.Sprintf("unexpected argument %q: see `%s --help`", fs.Arg(0), fs.Name())}
	}
	return nil
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
func (e *env) requireConfig(fs *flag.FlagSet) (*config.Config, error) {
	if e.configFile == "" {
		return nil, usageError{msg: fmt.Sprintf("--config FILE is required: the backupcycle YAML that lists the databases (see config.example.yaml; `%s --help`)", fs.Name())}
	}
	return e.loadConfig()
}

// flagSet reports whether the flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}
