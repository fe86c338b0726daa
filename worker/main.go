// Command worker runs the backupcycle Temporal worker.
//
//	worker --dev                 embedded Temporal server + Web UI + worker in one process, and the
//	                             emulated site (SQL Servers sql01/sqlverify, backup servers bak01/bak02)
//	worker --dev --demo          the same, runs two backup cycles of Sales, prints them and exits
//	worker --config FILE         worker for an existing Temporal cluster
//
// --metrics-addr HOST:PORT serves Prometheus metrics at /metrics in either
// mode; --task-queue NAME polls another task queue than the config's (a
// worker next to a backup server polls that server's task_queue).
//
// SIGINT/SIGTERM stop it gracefully: the worker first, then the embedded server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/internal/logging"
	"github.com/backupcycle/backupcycle/workflows"
)

// Exit codes: 0 stopped cleanly, 1 failed, 2 bad usage.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

type options struct {
	dev        bool
	configFile string
	stateDir   string
	ip         string
	port       int
	uiPort     int
	demo       bool
	keep       bool
	devDBSize  config.Size
	devFleet   int
	// metricsAddr serves /metrics when set; taskQueue overrides
	// temporal.task_queue.
	metricsAddr string
	taskQueue   string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default so a second one kills
		// a shutdown that hangs.
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.dev, "dev", false, "start an embedded Temporal server (SQLite under --state-dir) and the Web UI, and run the worker on it")
	fs.StringVar(&o.configFile, "config", "", "backupcycle YAML config: run the worker against the Temporal cluster of its temporal: section")
	fs.StringVar(&o.stateDir, "state-dir", ".demo", "with --dev: directory of all state (Temporal's temporal.db, the emulated SQL Servers, the backup servers, config.dev.yaml); kept between runs, remove it to start over")
	fs.StringVar(&o.ip, "ip", "127.0.0.1", "with --dev: address the frontend and the Web UI listen on")
	fs.IntVar(&o.port, "port", devserver.DefaultFrontendPort, "with --dev: frontend gRPC port (0 = a free port)")
	fs.IntVar(&o.uiPort, "ui-port", devserver.DefaultUIPort, "with --dev: Web UI port (0 = a free port, -1 = no UI)")
	fs.BoolVar(&o.demo, "demo", false, "run the health-check workflow once after start and, with --dev, two backup cycles of the emulated database; print the results, then exit (1 unless all verified)")
	fs.BoolVar(&o.keep, "keep", false, "with --demo: keep running afterwards, Web UI included (Ctrl-C stops)")
	o.devDBSize = devenv.DefaultDatabaseSize
	fs.Var(sizeFlag{&o.devDBSize}, "dev-db-size", "with --dev: size of the emulated database Sales when the state directory is new (e.g. 320MiB, 16MiB)")
	fs.IntVar(&o.devFleet, "dev-fleet", 0, fmt.Sprintf("with --dev: also hold this many small databases on sql01 (0 to %d), selected with USER_DATABASES, for starter fleet", len(devenv.FleetDatabaseNames)))
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. :9090 on every interface, 127.0.0.1:9090 on loopback only); off when empty")
	fs.StringVar(&o.taskQueue, "task-queue", "", "poll this task queue instead of the config's temporal.task_queue (default "+workflows.TaskQueue+"); a worker next to a backup server polls that server's task_queue")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: worker --dev [flags]           embedded Temporal + Web UI + worker in one process
       worker --config FILE [flags]   worker for an existing Temporal cluster

The worker polls task queue %q (or temporal.task_queue, or --task-queue) and
runs backupcycle's workflows and activities. A backup server with a task_queue in
the config gets its copies run by a worker polling that queue: start one next to
it with --config FILE --task-queue NAME.
--metrics-addr serves Prometheus metrics (the Temporal SDK's and backupcycle_*,
alert rules in deploy/prometheus/alerts.yml).
SIGINT/SIGTERM stop it gracefully. Log level: %s=debug|info|warn|error.

flags:
`, workflows.TaskQueue, logging.LevelEnv)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if err := o.check(fs); err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return exitUsage
	}
	var err error
	if o.dev {
		err = runDev(ctx, o, stdout, stderr)
	} else {
		err = runRemote(ctx, o, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "worker: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return exitFail
	}
	return exitOK
}

func (o options) check(fs *flag.FlagSet) error {
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q: see `worker --help`", fs.Arg(0))
	case o.dev && o.configFile != "":
		return errors.New("--dev and --config exclude each other: --dev embeds its own Temporal server, --config connects to one")
	case !o.dev && o.configFile == "":
		return errors.New("say where Temporal is: --dev (embedded server, for trying it out) or --config FILE (existing cluster); see `worker --help`")
	case o.keep && !o.demo:
		return errors.New("--keep only makes sense with --demo (without --demo the worker keeps running anyway)")
	case o.uiPort < devserver.NoUI:
		return fmt.Errorf("--ui-port %d: use a port, 0 for a free one or -1 for no UI", o.uiPort)
	case o.taskQueue != "" && strings.TrimSpace(o.taskQueue) != o.taskQueue:
		return fmt.Errorf("--task-queue %q: a task queue name has no leading or trailing spaces", o.taskQueue)
	}
	if o.metricsAddr != "" {
		if _, port, err := net.SplitHostPort(o.metricsAddr); err != nil || port == "" {
			return fmt.Errorf("--metrics-addr %q: want HOST:PORT, e.g. :9090 (every interface) or 127.0.0.1:9090", o.metricsAddr)
		}
	}
	return nil
}

// since formats a start-up duration for the ready line.
func since(t time.Time) string { return time.Since(t).Round(10 * time.Millisecond).String() }
