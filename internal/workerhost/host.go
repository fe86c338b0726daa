// Package workerhost is what both worker commands run: the Temporal worker
// with backupcycle's workflows and activities, its metrics endpoint, the
// configuration it re-reads while it runs, and the --demo health check. The
// production worker (./worker) and the development worker with the embedded
// Temporal server (internal/devenv/cmd/devworker) differ only in where
// Temporal and the configuration come from; this package must not link the
// embedded server, so the production binary does not either.
package workerhost

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// DemoTimeout bounds the --demo health check (a cold embedded server takes
// a few seconds to hand out its first task).
const DemoTimeout = 2 * time.Minute

// Run says how Serve runs and what it prints.
type Run struct {
	// Demo runs RunDemo once the worker polls and, without Keep, stops
	// afterwards.
	Demo, Keep bool
	// Ready prints the ready banner once the worker polls.
	Ready func()
	// RunDemo is the --demo work (a health check, the dev mode's cycles).
	RunDemo func(ctx context.Context) error
	// Overrides, when set, gives activities to register instead of the
	// product's (workflows.RegisterWith): the development worker's.
	Overrides func(*activities.Activities) workflows.Overrides
}

// Serve runs the worker until ctx ends (a signal) or, with Demo and without
// Keep, until RunDemo is done.
func Serve(ctx context.Context, c *client.Client, acts *activities.Activities, log *zap.Logger, r Run, stdout io.Writer) error {
	fatal := make(chan error, 1)
	cfg := acts.Cycle.Config
	if acts.Cycle.Live != nil {
		cfg = acts.Cycle.Live.Config()
	}
	opts := WorkerOptions(cfg)
	opts.OnFatalError = func(err error) { fatal <- err }
	w := worker.New(c.SDK(), c.TaskQueue(), opts)
	log.Info("worker options", zap.Int("max_concurrent_activities", opts.MaxConcurrentActivityExecutionSize))
	var o workflows.Overrides
	if r.Overrides != nil {
		o = r.Overrides(acts)
	}
	workflows.RegisterWith(w, acts, o)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on task queue %q, namespace %q: %w", c.TaskQueue(), c.Namespace(), err)
	}
	// What the configuration asks to keep running: the log chains, the
	// drill and differential schedules. Kept at start, and again whenever
	// the worker takes a changed configuration file (a drill: or
	// diff_backup added or removed takes effect without a restart).
	kctx, kcancel := context.WithCancel(ctx)
	defer kcancel()
	if cfg != nil {
		keepRunning(kctx, c, cfg, log)
	}
	if lc, ok := acts.Cycle.Live.(interface{ OnChange(func(*config.Config)) }); ok {
		changed := make(chan *config.Config, 1)
		lc.OnChange(func(cfg *config.Config) {
			// Only the newest configuration matters: one waiting is
			// replaced (OnChange is called one reload at a time).
			select {
			case <-changed:
			default:
			}
			changed <- cfg
		})
		go func() {
			for {
				select {
				case <-kctx.Done():
					return
				case cfg := <-changed:
					log.Info("configuration changed: keeping its log chains and schedules")
					keepRunning(kctx, c, cfg, log)
				}
			}
		}()
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			w.Stop()
		}
	}
	defer stop()
	if r.Ready != nil {
		r.Ready()
	}

	var demoErr error
	if r.Demo && r.RunDemo != nil {
		demoErr = r.RunDemo(ctx)
		if !r.Keep || ctx.Err() != nil {
			if demoErr != nil {
				return demoErr
			}
			stop()
			fmt.Fprintln(stdout, "demo done: stopped (use --keep to stay up)")
			return nil
		}
		// --keep stays up after a failed demo too: the failed run is what
		// there is to look at. The exit code still says it failed.
		if demoErr != nil {
			fmt.Fprintf(stdout, "demo FAILED: %s\n", demoErr)
		}
		fmt.Fprintln(stdout, "demo done: staying up (--keep): browse the runs and start more in the Web UI; Ctrl-C stops")
	}

	select {
	case <-ctx.Done():
		log.Info("signal received: stopping the worker")
		stop()
		fmt.Fprintln(stdout, "worker stopped")
		return demoErr
	case err := <-fatal:
		return fmt.Errorf("worker stopped on a fatal error: %w", err)
	}
}

// ActivityHeadroom is how many activities a worker runs at once beyond its
// cycles' (ActivityConcurrency): a fleet run's plan, calibrations, health
// checks, the plans of starts that wait for a slot, and the cleanup of
// cycles that end.
const ActivityHeadroom = 8

// ActivityConcurrency is how many activities a worker of cfg runs at once.
// A running cycle holds a slot of its instance (or availability group) and
// runs one activity at a time, so the sum of every SQL instance's and
// availability group's max_concurrent bounds the cycles' activities;
// ActivityHeadroom is added for the rest. It is read when the worker
// starts: a change to max_concurrent takes a restart to change it.
func ActivityConcurrency(cfg *config.Config) int {
	n := ActivityHeadroom
	if cfg == nil {
		return n
	}
	for _, s := range cfg.SQLInstances {
		n += max(s.MaxConcurrent, 1)
	}
	for _, g := range cfg.AvailabilityGroups {
		n += max(g.MaxConcurrent, 1)
	}
	return n
}

// keepRunning starts the log chain of every database with log_backup that
// has none running (one workflow id per database, an existing one kept),
// and keeps one drill schedule per database with drill: and one
// differential schedule per database with diff_backup, deleting those of
// databases that no longer have them. Failures are logged: the next start
// of the worker or change of its configuration tries again.
func keepRunning(ctx context.Context, c *client.Client, cfg *config.Config, log *zap.Logger) {
	if ids, err := c.EnsureLogChains(ctx, cfg); err != nil {
		log.Warn("log chains not all started: the next start of the worker or change of its configuration tries again", zap.Error(err))
	} else if len(ids) > 0 {
		log.Info("log chains running", zap.Strings("workflow_ids", ids))
	}
	for _, k := range []struct {
		what, key string
		ensure    func(context.Context, *config.Config) ([]client.ScheduleResult, []string, error)
	}{{"drill", "drill:", c.EnsureDrillSchedules}, {"differential", "diff_backup", c.EnsureDiffSchedules}} {
		kept, deleted, err := k.ensure(ctx, cfg)
		if err != nil {
			log.Warn(k.what+" schedules not all kept: the next start of the worker or change of its configuration tries again", zap.Error(err))
		}
		for _, s := range kept {
			log.Info(k.what+" schedule "+s.Action, zap.String("schedule_id", s.ScheduleID), zap.String("db", s.Database), zap.Times("next_runs", s.NextRuns))
		}
		if len(deleted) > 0 {
			log.Info(k.what+" schedules deleted: their databases have no "+k.key+" any more", zap.Strings("schedule_ids", deleted))
		}
	}
}

// Interceptors are the production worker's activity interceptors: the
// fault simulation and the crash tests run them too.
func Interceptors() []interceptor.WorkerInterceptor {
	return []interceptor.WorkerInterceptor{&stopGrace{}}
}

// WorkerOptions are the options of a worker of cfg.
func WorkerOptions(cfg *config.Config) worker.Options {
	return worker.Options{
		// In-flight activities get this long to finish on SIGTERM; the rest
		// are retried by Temporal on another (or the restarted) worker, once
		// their attempts are reported as interrupted (stopGrace).
		WorkerStopTimeout: stopTimeout,
		Interceptors:      Interceptors(),
		// The SDK sends heartbeat details at most every 0.8 x HeartbeatTimeout
		// by default (48 s for the copy's 1 min): a worker killed in between
		// loses the copy's checkpoints and the retry starts the stripe over.
		MaxHeartbeatThrottleInterval: 2 * time.Second,
		// Within the configuration's limits (the SDK's default is 1,000):
		// activities beyond them wait in Temporal's task queue, where
		// another worker may take them.
		MaxConcurrentActivityExecutionSize: ActivityConcurrency(cfg),
		// The SDK's 2 pollers split between the sticky and the normal
		// queue: one at a time took the workflow tasks of every running
		// cycle, which waited for it (70 ms a task on a fleet run).
		MaxConcurrentWorkflowTaskPollers: 8,
	}
}

// HealthDemo runs the health-check workflow once and prints its result;
// workflowURL, when not nil, links it in the Web UI.
func HealthDemo(ctx context.Context, c *client.Client, stdout io.Writer, workflowURL func(id, run string) string) error {
	hctx, cancel := context.WithTimeout(ctx, DemoTimeout)
	res, err := c.RunHealthCheck(hctx)
	cancel()
	if err != nil {
		return err
	}
	wi := res.Result.Worker
	fmt.Fprintf(stdout, "health check %s completed: worker host=%s pid=%d version=%s\n", res.WorkflowID, wi.Host, wi.PID, wi.Version)
	if workflowURL != nil {
		if u := workflowURL(res.WorkflowID, res.RunID); u != "" {
			fmt.Fprintf(stdout, "  see it in the Web UI: %s\n", u)
		}
	}
	return nil
}

// WebConfigUsage is the help of --metrics-web-config, which both commands
// take.
const WebConfigUsage = "with --metrics-addr: Prometheus web configuration file (tls_server_config: cert_file, key_file; " +
	"basic_auth_users: user: bcrypt hash) to serve /metrics over TLS with basic authentication; " +
	"format: https://prometheus.io/docs/prometheus/latest/configuration/https/"

// CheckFlags checks the flags both commands share: --metrics-addr,
// --metrics-web-config and --task-queue.
func CheckFlags(metricsAddr, webConfig, taskQueue string) error {
	if webConfig != "" && metricsAddr == "" {
		return fmt.Errorf("--metrics-web-config needs --metrics-addr: it configures TLS and basic authentication of the metrics endpoint")
	}
	if taskQueue != "" && strings.TrimSpace(taskQueue) != taskQueue {
		return fmt.Errorf("--task-queue %q: a task queue name has no leading or trailing spaces", taskQueue)
	}
	if metricsAddr != "" {
		if _, port, err := net.SplitHostPort(metricsAddr); err != nil || port == "" {
			return fmt.Errorf("--metrics-addr %q: want HOST:PORT, e.g. :9090 (every interface) or 127.0.0.1:9090", metricsAddr)
		}
	}
	return nil
}

// Since formats a start-up duration for the ready line.
func Since(t time.Time) string { return time.Since(t).Round(10 * time.Millisecond).String() }
