// Command worker runs the backupcycle Temporal worker against an existing
// Temporal cluster:
//
//	worker --config FILE         poll the task queue of the config's temporal: section
//	worker --config FILE --demo  the same, run the health check once and exit
//	worker --version             module version and VCS revision of this build
//	worker service ACTION        run it as a Windows service (install, start, stop, uninstall)
//
// --metrics-addr HOST:PORT serves Prometheus metrics at /metrics (with
// TLS and basic authentication from --metrics-web-config FILE);
// --task-queue NAME polls another task queue than the config's (a worker
// next to a backup server polls that server's task_queue).
//
// The worker re-reads its config file when it changes and on SIGHUP; a file
// that does not load is logged and the configuration in force stays.
// SIGINT/SIGTERM stop it gracefully.
//
// The embedded Temporal server, Web UI and emulated site of `make demo` are
// the development worker's (internal/devenv/cmd/devworker), so this binary
// links none of them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/backupcycle/backupcycle/internal/logging"
	"github.com/backupcycle/backupcycle/internal/workerhost"
	"github.com/backupcycle/backupcycle/workflows"
)

// Exit codes: workerhost's.
const (
	exitOK    = workerhost.ExitOK
	exitFail  = workerhost.ExitFail
	exitUsage = workerhost.ExitUsage
)

// devCommand is how the development worker is started, for the hint given
// to a --dev flag.
const devCommand = "go run ./internal/devenv/cmd/devworker"

type options struct {
	configFile string
	demo       bool
	// metricsAddr serves /metrics when set, with TLS and basic
	// authentication from metricsWebConfig; taskQueue overrides
	// temporal.task_queue.
	metricsAddr      string
	metricsWebConfig string
	taskQueue        string
	// replayOpen replays the open workflows' histories and exits.
	replayOpen bool
	// ready, when set, is called once the worker polls (the Windows
	// service reports itself running then).
	ready func()
}

func main() {
	os.Exit(run(workerhost.SignalContext(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "service" {
		return runService(ctx, args[1:], stdout, stderr)
	}
	if name := devFlag(args); name != "" {
		fmt.Fprintf(stderr, "worker: --%s belongs to the development worker (embedded Temporal server, Web UI, emulated site): "+
			"run `make demo`, or `%s --help`; this worker connects to a Temporal cluster with --config FILE\n", name, devCommand)
		return exitUsage
	}
	var o options
	var showVersion bool
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.configFile, "config", "", "backupcycle YAML config: run the worker against the Temporal cluster of its temporal: section (re-read when it changes and on SIGHUP)")
	fs.BoolVar(&o.demo, "demo", false, "run the health-check workflow once after start, print the result and exit")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9090 on loopback only, :9090 on every interface); off when empty")
	fs.StringVar(&o.metricsWebConfig, "metrics-web-config", "", workerhost.WebConfigUsage)
	fs.StringVar(&o.taskQueue, "task-queue", "", "poll this task queue instead of the config's temporal.task_queue (default "+workflows.TaskQueue+"); a worker next to a backup server polls that server's task_queue")
	fs.BoolVar(&showVersion, "version", false, "print the module version and VCS revision of this build and exit")
	fs.BoolVar(&o.replayOpen, "replay-open", false, "replay the history of every open workflow on the task queue with this build, print the outcome per workflow and exit (1 when one does not replay): run it before rolling out a new worker")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: worker --config FILE [flags]   worker for an existing Temporal cluster
       worker --config FILE --replay-open   can this build take over the running cycles?
       worker --version
       worker service install|start|stop|uninstall [flags]   the Windows service

The worker polls task queue %q (or temporal.task_queue, or --task-queue) and
runs backupcycle's workflows and activities. A backup server with a task_queue in
the config gets its copies run by a worker polling that queue: start one next to
it with --config FILE --task-queue NAME.
It re-reads FILE when it changes and on SIGHUP: databases, instances and backup
servers added there need no restart (the temporal: section does). A file that
does not load is logged with its errors and the configuration in force stays.
--metrics-addr serves Prometheus metrics (the Temporal SDK's and backupcycle_*,
alert rules in deploy/prometheus/alerts.yml); --metrics-web-config adds TLS and
basic authentication (Prometheus' web configuration file).
SIGINT/SIGTERM stop it gracefully. Log level: %s=debug|info|warn|error.
As a service: on Linux deploy/systemd/backupcycle-worker.service, on Windows
worker service install|start|stop|uninstall (worker service --help).
The embedded Temporal server, Web UI and emulated site: make demo, or
%s --help.

flags:
`, workflows.TaskQueue, logging.LevelEnv, devCommand)
		fs.PrintDefaults()
	}
	if code, done := workerhost.ParseArgs(fs, args, "worker", &showVersion, func() error { return o.check(fs) }, stdout, stderr); done {
		return code
	}
	if o.replayOpen {
		failed, err := runReplay(ctx, o, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "worker: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			return exitFail
		}
		if failed > 0 {
			fmt.Fprintf(stderr, "worker: %d open workflows do not replay with this build: roll it out only after they finish, or put the change behind workflow.GetVersion\n", failed)
			return exitFail
		}
		return exitOK
	}
	if err := runRemote(ctx, o, stdout); err != nil {
		fmt.Fprintf(stderr, "worker: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return exitFail
	}
	return exitOK
}

func (o options) check(fs *flag.FlagSet) error {
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q: see `worker --help`", fs.Arg(0))
	case o.configFile == "":
		return fmt.Errorf("say where Temporal is: --config FILE (its temporal: section); to try it out without a cluster: make demo, or %s", devCommand)
	case o.replayOpen && (o.demo || o.metricsAddr != "" || o.metricsWebConfig != ""):
		return errors.New("--replay-open only replays and exits: it takes neither --demo nor --metrics-addr")
	}
	return workerhost.CheckFlags(o.metricsAddr, o.metricsWebConfig, o.taskQueue)
}

// devOnly are the development worker's flags.
var devOnly = []string{"dev", "state-dir", "ip", "port", "ui-port", "keep", "dev-db-size", "dev-fleet"}

// devFlag is the first of args that is a development worker's flag, or "".
func devFlag(args []string) string {
	for _, a := range args {
		if a == "--" {
			return ""
		}
		name, ok := strings.CutPrefix(a, "-")
		if !ok {
			continue
		}
		name = strings.TrimPrefix(name, "-")
		name, _, _ = strings.Cut(name, "=")
		for _, d := range devOnly {
			if name == d {
				return name
			}
		}
	}
	return ""
}
