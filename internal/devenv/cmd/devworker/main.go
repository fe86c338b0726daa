// Command devworker is the development worker behind `make demo`: an
// embedded Temporal server (SQLite under --state-dir), its Web UI and a
// backupcycle worker in one process, with the emulated site of
// internal/devenv (SQL Servers sql01/sqlverify, backup servers bak01/bak02,
// the object store vault01).
//
//	devworker                 run until Ctrl-C; start cycles from the Web UI or the starter
//	devworker --demo          run the health check and two backup cycles of Sales, print them and Sales's log chain, and exit
//	devworker --demo --keep   the same, then stay up for the Web UI
//
// It links the Temporal server, the Web UI server and the SQL Server
// emulator, which is why it is not the production worker (./worker).
// SIGINT/SIGTERM stop it gracefully: the worker first, then the embedded
// server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/devserver"
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

type options struct {
	stateDir  string
	ip        string
	port      int
	uiPort    int
	demo      bool
	keep      bool
	devDBSize config.Size
	devFleet  int
	// metricsAddr serves /metrics when set, with TLS and basic
	// authentication from metricsWebConfig; taskQueue overrides the task
	// queue of the site's configuration.
	metricsAddr      string
	metricsWebConfig string
	taskQueue        string
	// logEvery is how often Sales's log chain ticks (its log_backup.every
	// is a minute); 0: no log backups.
	logEvery time.Duration
	// objectStore serves vault01, Sales's immutable_copy (versitygw).
	objectStore bool
}

func main() {
	os.Exit(run(workerhost.SignalContext(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	var showVersion bool
	fs := flag.NewFlagSet("devworker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.stateDir, "state-dir", ".demo", "directory of all state (Temporal's temporal.db, the emulated SQL Servers, the backup servers, config.dev.yaml); kept between runs, remove it to start over")
	fs.StringVar(&o.ip, "ip", "127.0.0.1", "address the frontend and the Web UI listen on")
	fs.IntVar(&o.port, "port", devserver.DefaultFrontendPort, "frontend gRPC port (0 = a free port)")
	fs.IntVar(&o.uiPort, "ui-port", devserver.DefaultUIPort, "Web UI port (0 = a free port, -1 = no UI)")
	fs.BoolVar(&o.demo, "demo", false, "run the health-check workflow and two backup cycles of the emulated database once after start; print the results, then exit (1 unless all verified)")
	fs.BoolVar(&o.keep, "keep", false, "with --demo: keep running afterwards, Web UI included (Ctrl-C stops)")
	o.devDBSize = devenv.DefaultDatabaseSize
	fs.Var(sizeFlag{&o.devDBSize}, "dev-db-size", "size of the emulated database Sales when the state directory is new (e.g. 320MiB, 16MiB)")
	fs.IntVar(&o.devFleet, "dev-fleet", 0, fmt.Sprintf("also hold this many small databases on sql01 (0 to %d), selected with USER_DATABASES, for starter fleet", len(devenv.FleetDatabaseNames)))
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9090); off when empty")
	fs.StringVar(&o.metricsWebConfig, "metrics-web-config", "", workerhost.WebConfigUsage)
	fs.StringVar(&o.taskQueue, "task-queue", "", "poll this task queue instead of "+workflows.TaskQueue)
	fs.DurationVar(&o.logEvery, "log-every", defaultLogEvery, "Sales takes log backups (log_backup every 1m, a standby proof) and its log chain ticks this often; 0: no log backups")
	fs.BoolVar(&o.objectStore, "object-store", true, "serve "+devenv.ObjectStore+", an S3 bucket with Object Lock (versitygw, built from tools/versitygw once), as Sales's immutable_copy")
	fs.BoolVar(&showVersion, "version", false, "print the module version and VCS revision of this build and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: devworker [flags]   embedded Temporal + Web UI + worker + emulated site in one process

The development worker of `+"`make demo`"+`: it needs no Temporal cluster and no SQL
Server. The production worker is ./worker (worker --config FILE).
The site's configuration is --state-dir/%s; the worker re-reads it
when it changes and on SIGHUP. Log level: %s=debug|info|warn|error.

flags:
`, devenv.ConfigFile, logging.LevelEnv)
		fs.PrintDefaults()
	}
	if code, done := workerhost.ParseArgs(fs, args, "devworker", &showVersion, func() error { return o.check(fs) }, stdout, stderr); done {
		return code
	}
	if err := runDev(ctx, o, stdout); err != nil {
		fmt.Fprintf(stderr, "devworker: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return exitFail
	}
	return exitOK
}

func (o options) check(fs *flag.FlagSet) error {
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q: see `devworker --help`", fs.Arg(0))
	case o.keep && !o.demo:
		return errors.New("--keep only makes sense with --demo (without --demo the worker keeps running anyway)")
	case o.logEvery < 0:
		return fmt.Errorf("--log-every %s: use a duration such as 3s, or 0 for no log backups", o.logEvery)
	case o.uiPort < devserver.NoUI:
		return fmt.Errorf("--ui-port %d: use a port, 0 for a free one or -1 for no UI", o.uiPort)
	}
	return workerhost.CheckFlags(o.metricsAddr, o.metricsWebConfig, o.taskQueue)
}
