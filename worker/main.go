// Command worker runs the backupcycle Temporal worker.
//
//	worker --dev                 embedded Temporal server + Web UI + worker in one process
//	worker --dev --demo          the same, runs the health-check workflow once and exits
//	worker --config FILE         worker for an existing Temporal cluster
//
// SIGINT/SIGTERM stop it gracefully: the worker first, then the embedded server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

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
	fs.StringVar(&o.stateDir, "state-dir", ".demo", "with --dev: directory of the embedded server's database (temporal.db); kept between runs")
	fs.StringVar(&o.ip, "ip", "127.0.0.1", "with --dev: address the frontend and the Web UI listen on")
	fs.IntVar(&o.port, "port", devserver.DefaultFrontendPort, "with --dev: frontend gRPC port (0 = a free port)")
	fs.IntVar(&o.uiPort, "ui-port", devserver.DefaultUIPort, "with --dev: Web UI port (0 = a free port, -1 = no UI)")
	fs.BoolVar(&o.demo, "demo", false, "run the health-check workflow once after start, print its result, then exit")
	fs.BoolVar(&o.keep, "keep", false, "with --demo: keep running after the health check (Ctrl-C stops)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: worker --dev [flags]           embedded Temporal + Web UI + worker in one process
       worker --config FILE [flags]   worker for an existing Temporal cluster

The worker polls task queue %q and runs backupcycle's workflows and activities.
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
	}
	return nil
}

// since formats a start-up duration for the ready line.
func since(t time.Time) string { return time.Since(t).Round(10 * time.Millisecond).String() }
