// Command stack runs the production-shaped stack of `make stack` (package
// internal/stack) until Ctrl-C or `stack --stop`, and stops it then,
// leaving no process behind.
//
//	stack --tools DIR [--state-dir .stack] [--worker bin/worker]   bring it up, print its addresses, run
//	stack --stop [--state-dir .stack]                             stop the stack running on that state directory
//	stack --upgrade BIN [--state-dir .stack]                      replace the running stack's workers with BIN, one at a time
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/logging"
	"github.com/backupcycle/backupcycle/internal/stack"
	"github.com/backupcycle/backupcycle/internal/workerhost"
	"github.com/backupcycle/backupcycle/workflows"
)

func main() {
	os.Exit(run(workerhost.SignalContext(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// Sales is smaller than the demo's: the stack is about the processes.
	o := stack.Options{DatabaseSize: 64 << 20}
	var stop bool
	var upgrade string
	fs := flag.NewFlagSet("stack", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.StateDir, "state-dir", ".stack", "directory of all state (PostgreSQL's cluster, the emulated site, logs/, secrets/); kept between runs, remove it to start over")
	fs.StringVar(&o.Repo, "repo", ".", "the repository root (docker-compose.yml, deploy/)")
	fs.StringVar(&o.Tools, "tools", "", "the Temporal programs' directory, as scripts/temporal-tools.sh prints it")
	fs.StringVar(&o.Worker, "worker", "bin/worker", "the production worker binary (make build)")
	fs.BoolVar(&stop, "stop", false, "stop the stack running on --state-dir and exit")
	fs.StringVar(&upgrade, "upgrade", "", "replace the workers of the stack running on --state-dir with this worker build, one at a time, each after its --replay-open approved it, and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "stack: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if stop {
		if err := stack.Stop(o.StateDir, 2*time.Minute); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		fmt.Fprintf(stdout, "stack on %s stopped\n", o.StateDir)
		return 0
	}
	if upgrade != "" {
		if err := stack.RequestUpgrade(o.StateDir, upgrade, 10*time.Minute); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		fmt.Fprintf(stdout, "stack on %s: both workers run %s\n", o.StateDir, upgrade)
		return 0
	}
	if o.Tools == "" {
		fmt.Fprintln(stderr, "stack: --tools is required: the directory scripts/temporal-tools.sh prints (make stack gives it)")
		return 2
	}
	if err := os.MkdirAll(filepath.Join(o.StateDir, "logs"), 0o755); err != nil {
		fmt.Fprintf(stderr, "stack: %v\n", err)
		return 1
	}
	logFile := filepath.Join(o.StateDir, "logs", "stack.log")
	log, closeLog, err := logging.NewFile(logFile)
	if err != nil {
		fmt.Fprintf(stderr, "stack: %v\n", err)
		return 1
	}
	defer closeLog()
	o.Logger, o.Progress = log, stdout
	o.Upgrades = stack.UpgradeRequests(ctx, o.StateDir)
	fmt.Fprintf(stdout, "stack: bringing up PostgreSQL, Temporal (schema, server, namespace), the Web UI, the emulated site and two workers; logs in %s\n",
		filepath.Join(o.StateDir, "logs"))
	err = stack.Run(ctx, o, func(a stack.Addresses, took time.Duration) {
		fmt.Fprintf(stdout, "stack ready in %s\n", took.Round(100*time.Millisecond))
		fmt.Fprintf(stdout, "  PostgreSQL:        %s (user temporal, password in %s)\n", a.Postgres, filepath.Join(o.StateDir, "secrets", "postgres_password"))
		fmt.Fprintf(stdout, "  Temporal frontend: %s (namespace %s)\n", a.Frontend, stack.Namespace)
		fmt.Fprintf(stdout, "  Temporal Web UI:   %s\n", a.UI)
		fmt.Fprintf(stdout, "  workers:           task queue %s (metrics %s), task queue %s for %s's copies (metrics %s)\n",
			workflows.TaskQueue, a.Metrics[0], stack.CopyQueue, stack.CopyServer, a.Metrics[1])
		fmt.Fprintf(stdout, "  emulated site:     %s, %s and %s, backup servers %s; config %s\n", devenv.SourceInstance, devenv.VerifyInstance,
			devenv.Database, strings.Join(devenv.BackupServers, ", "), a.ConfigFile)
		fmt.Fprintf(stdout, "  a verified cycle:  bin/starter --config %s run --database %s --wait\n", a.ConfigFile, devenv.Database)
		fmt.Fprintf(stdout, "  stop:              Ctrl-C, or make stack-stop\n")
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintln(stdout, "stack stopped")
	return 0
}
