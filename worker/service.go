package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/winservice"
	"github.com/backupcycle/backupcycle/internal/workerhost"
)

// The Windows service mode: `worker service ACTION [flags]`. The command
// line is parsed here, portably; internal/winservice talks to the Service
// Control Manager.

// defaultServiceName is the service's name when --name is not given.
const defaultServiceName = "backupcycle-worker"

// Service actions.
const (
	actionInstall   = "install"
	actionUninstall = "uninstall"
	actionStart     = "start"
	actionStop      = "stop"
	// actionRun is what the Service Control Manager starts: the worker
	// under svc.Run. install puts it in the service's command line.
	actionRun = "run"
)

// serviceActions are the actions a user gives, in the order of the help.
var serviceActions = []string{actionInstall, actionUninstall, actionStart, actionStop, actionRun}

// serviceOptions are the options of `worker service ACTION`.
type serviceOptions struct {
	action string
	name   string
	// account is the account the service runs as (install): empty for
	// LocalSystem, "NT SERVICE\NAME" for the service's virtual account, a
	// group managed service account "DOMAIN\name$".
	account string
	// logFile receives the worker's log (its stderr and stdout): a
	// service has no console. Default: NAME.log next to the config file.
	logFile string
	run     options
}

// runService runs `worker service ACTION [flags]` (args after "service").
func runService(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	so, code, done := parseService(args, stdout, stderr)
	if done {
		return code
	}
	if err := serviceAction(ctx, so, stdout); err != nil {
		fmt.Fprintf(stderr, "worker service %s: %s\n", so.action, strings.ReplaceAll(err.Error(), "\n", " "))
		return exitFail
	}
	return exitOK
}

// parseService parses `worker service` arguments. The worker flags
// (--config, --task-queue, --metrics-addr, --metrics-web-config) are
// those of `worker` and mean the same; install writes them into the
// service's command line with the file paths made absolute (a service
// starts in the system directory).
func parseService(args []string, stdout, stderr io.Writer) (serviceOptions, int, bool) {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, `usage: worker service install --config FILE [--name NAME] [--account ACCOUNT] [--log-file FILE] [worker flags]
       worker service start|stop|uninstall [--name NAME]

Runs the worker as a Windows service (on Linux: deploy/systemd). Run it from
an elevated prompt (Run as administrator).
  install    register service NAME (default %s), started automatically at
             boot, restarted by the Service Control Manager after a failure
             (after %s), and its event log source
  start      start it and wait until the worker polls Temporal
  stop       stop it gracefully (activities in flight get %s) and wait
  uninstall  stop it and remove it and its event log source
  run        what the Service Control Manager starts (not for use at a prompt)
Start-up failures (a config that does not load, Temporal unreachable) are
written to the Windows event log (Application, source NAME); the worker's
log goes to --log-file.

flags:
`, defaultServiceName, winservice.RecoveryText(), workerhost.StopTimeout)
	}
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		usage(stdout)
		serviceFlags(&serviceOptions{}, stdout).PrintDefaults()
		return serviceOptions{}, exitOK, true
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "worker service: say what to do first: %s (see `worker service --help`)\n", strings.Join(serviceActions[:4], ", "))
		return serviceOptions{}, exitUsage, true
	}
	so := serviceOptions{action: args[0]}
	known := false
	for _, a := range serviceActions {
		known = known || a == so.action
	}
	if !known {
		fmt.Fprintf(stderr, "worker service: unknown action %q: use %s\n", so.action, strings.Join(serviceActions[:4], ", "))
		return so, exitUsage, true
	}
	fs := serviceFlags(&so, stderr)
	fs.Usage = func() { usage(stderr); fs.PrintDefaults() }
	var showVersion bool
	if code, done := workerhost.ParseArgs(fs, args[1:], "worker service "+so.action, &showVersion, func() error { return so.check(fs) }, stdout, stderr); done {
		return so, code, true
	}
	return so, exitOK, false
}

// serviceFlags is the flag set of `worker service`.
func serviceFlags(so *serviceOptions, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("worker service", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&so.name, "name", defaultServiceName, "service name (also its event log source): one per worker on the host, e.g. backupcycle-worker-bak02 for a second task queue")
	fs.StringVar(&so.account, "account", "", `install: the account the service runs as (default LocalSystem): NT SERVICE\NAME (its virtual account) or a group managed service account DOMAIN\name$; it must read the config and secret files and write the log file`)
	fs.StringVar(&so.logFile, "log-file", "", "install: the worker's log file (JSON lines, appended; default NAME.log next to the config file)")
	fs.StringVar(&so.run.configFile, "config", "", "install: backupcycle YAML config, as for `worker --config`")
	fs.StringVar(&so.run.taskQueue, "task-queue", "", "install: as for `worker --task-queue`")
	fs.StringVar(&so.run.metricsAddr, "metrics-addr", "", "install: as for `worker --metrics-addr`")
	fs.StringVar(&so.run.metricsWebConfig, "metrics-web-config", "", "install: as for `worker --metrics-web-config`")
	return fs
}

func (so *serviceOptions) check(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: see `worker service --help`", fs.Arg(0))
	}
	if so.name == "" || strings.ContainsAny(so.name, `/\ `) {
		return fmt.Errorf("--name %q: a service name is not empty and has no slash, backslash or space", so.name)
	}
	takesWorkerFlags := so.action == actionInstall || so.action == actionRun
	if !takesWorkerFlags {
		r := so.run
		if r.configFile != "" || r.taskQueue != "" || r.metricsAddr != "" || r.metricsWebConfig != "" || so.account != "" || so.logFile != "" {
			return fmt.Errorf("%s takes only --name: the worker flags, --account and --log-file are given to install", so.action)
		}
		return nil
	}
	if so.run.configFile == "" {
		return fmt.Errorf("say where Temporal is: --config FILE (its temporal: section), as for `worker --config`")
	}
	if so.action == actionRun && so.account != "" {
		return fmt.Errorf("--account is given to install")
	}
	if err := workerhost.CheckFlags(so.run.metricsAddr, so.run.metricsWebConfig, so.run.taskQueue); err != nil {
		return err
	}
	// The service starts in the system directory: relative paths would
	// name files there.
	for _, p := range []*string{&so.run.configFile, &so.run.metricsWebConfig, &so.logFile} {
		if *p != "" {
			abs, err := filepath.Abs(*p)
			if err != nil {
				return fmt.Errorf("%s: %w", *p, err)
			}
			*p = abs
		}
	}
	if so.logFile == "" {
		so.logFile = filepath.Join(filepath.Dir(so.run.configFile), so.name+".log")
	}
	return nil
}

// serviceAction does so.action.
func serviceAction(ctx context.Context, so serviceOptions, stdout io.Writer) error {
	if runtime.GOOS != "windows" {
		return winservice.ErrNotWindows
	}
	s := so.service()
	switch so.action {
	case actionInstall:
		// A config that does not load would fail only at the first start:
		// say so now, at the prompt.
		if _, err := config.Load(so.run.configFile); err != nil {
			return fmt.Errorf("%w (the service is not installed)", err)
		}
		return winservice.Install(s, stdout)
	case actionUninstall:
		return winservice.Uninstall(s, stdout)
	case actionStart:
		return winservice.Start(s, stdout)
	case actionStop:
		return winservice.Stop(s, stdout)
	}
	return winservice.Run(ctx, s, func(ctx context.Context, ready func(), stdout io.Writer) error {
		o := so.run
		o.ready = ready
		return runRemote(ctx, o, stdout)
	})
}

// service is the Windows service of so.
func (so serviceOptions) service() winservice.Service {
	return winservice.Service{
		Name: so.name, DisplayName: so.displayName(), Description: so.description(), Account: so.account,
		Args: so.runArgs(), ConfigFile: so.run.configFile, LogFile: so.logFile,
		StopWait: winservice.StopWaitFor(workerhost.StopTimeout),
	}
}

// runArgs is the service's command line after the executable: `service
// run` with the name, the log file and the worker flags given to install.
func (so serviceOptions) runArgs() []string {
	args := []string{"service", actionRun, "--name", so.name, "--log-file", so.logFile, "--config", so.run.configFile}
	for _, f := range []struct{ flag, value string }{
		{"--task-queue", so.run.taskQueue},
		{"--metrics-addr", so.run.metricsAddr},
		{"--metrics-web-config", so.run.metricsWebConfig},
	} {
		if f.value != "" {
			args = append(args, f.flag, f.value)
		}
	}
	return args
}

// displayName is the service's name in the Services console.
func (so serviceOptions) displayName() string {
	if so.name == defaultServiceName {
		return "backupcycle worker"
	}
	return "backupcycle worker (" + so.name + ")"
}

// description is the service's description in the Services console.
func (so serviceOptions) description() string {
	q := so.run.taskQueue
	if q == "" {
		q = "the config's temporal.task_queue"
	}
	return fmt.Sprintf("Runs backupcycle's verified SQL Server backup cycles (Temporal worker, task queue %s). Config %s, log %s.",
		q, so.run.configFile, so.logFile)
}
