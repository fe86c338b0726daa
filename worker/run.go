package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/internal/logging"
	"github.com/backupcycle/backupcycle/internal/preflight"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// demoTimeout bounds the --demo health check (a cold embedded server takes
// a few seconds to hand out its first task).
const demoTimeout = 2 * time.Minute

// runDev runs the embedded server, the Web UI and the worker in this process.
func runDev(ctx context.Context, o options, stdout, stderr io.Writer) error {
	began := time.Now()
	log, err := logging.New(true)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	mx, metricsURL, err := startMetrics(o, log)
	if err != nil {
		return err
	}
	defer closeMetrics(mx, log)

	if err := os.MkdirAll(o.stateDir, 0o755); err != nil {
		return fmt.Errorf("state directory %s: %w (choose another with --state-dir)", o.stateDir, err)
	}
	dbFile := filepath.Join(o.stateDir, "temporal.db")
	srv, err := devserver.Start(ctx, devserver.Options{
		DBFile:           dbFile,
		FrontendIP:       o.ip,
		FrontendPort:     o.port,
		UIPort:           o.uiPort,
		Namespace:        devserver.DefaultNamespace,
		SearchAttributes: workflows.SearchAttributeTypes,
		Logger:           log,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			log.Error("embedded Temporal server did not stop cleanly", zap.Error(err))
		}
	}()

	// The emulated SQL Servers and backup servers the cycle activities use.
	site, err := startSite(ctx, o, srv, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := site.Stop(); err != nil {
			log.Error("emulated site did not stop cleanly", zap.Error(err))
		}
	}()

	tcfg := client.WithDefaults(config.Temporal{Address: srv.FrontendAddress(), Namespace: srv.Namespace(), TaskQueue: o.taskQueue})
	sdk, err := srv.NewClient(ctx, sdkclient.Options{Logger: logging.NewSDKLogger(log), MetricsHandler: sdkMetrics(mx)})
	if err != nil {
		return err
	}
	defer sdk.Close()
	c := client.New(sdk, tcfg, log)

	demo := func(ctx context.Context) error {
		if err := healthDemo(ctx, c, stdout, srv.WorkflowURL); err != nil {
			return err
		}
		results, err := runDemoCycles(ctx, c, stdout, srv.WorkflowURL)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, demoSummary(results))
		if u := cyclesURL(srv.UIAddress(), c.Namespace()); u != "" {
			fmt.Fprintf(stdout, "  all cycles of %s in the Web UI: %s\n", devenv.Database, u)
		}
		return nil
	}
	defer watchManifests(ctx, mx, site.Config, log)()
	return serve(ctx, c, newActivities(log, site.Config, c, mx), log, o, stdout, func() {
		fmt.Fprintf(stdout, "backupcycle worker ready in %s (embedded Temporal, state in %s)\n", since(began), dbFile)
		if ui := srv.UIAddress(); ui != "" {
			fmt.Fprintf(stdout, "  Temporal Web UI:   %s\n", ui)
		}
		fmt.Fprintf(stdout, "  Temporal frontend: %s (namespace %s, task queue %s)\n", srv.FrontendAddress(), c.Namespace(), c.TaskQueue())
		if metricsURL != "" {
			fmt.Fprintf(stdout, "  metrics:           %s\n", metricsURL)
		}
		printSite(stdout, site)
		if (!o.demo || o.keep) && srv.UIAddress() != "" {
			fmt.Fprintf(stdout, "  start a cycle:     Web UI > Start Workflow: type %s, task queue %s, input {\"database\":\"%s\"}\n",
				workflows.BackupCycleName, c.TaskQueue(), devenv.Database)
		}
		if !o.demo || o.keep {
			fmt.Fprintf(stdout, "  health check:      go run ./starter health --address %s\n", srv.FrontendAddress())
			fmt.Fprintf(stdout, "  stop:              Ctrl-C\n")
		}
	}, demo)
}

// runRemote runs the worker against the cluster the config names.
func runRemote(ctx context.Context, o options, stdout, stderr io.Writer) error {
	began := time.Now()
	log, err := logging.New(false)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	cfg, err := config.Load(o.configFile)
	if err != nil {
		return err
	}
	if o.taskQueue != "" {
		cfg.Temporal.TaskQueue = o.taskQueue
	}
	mx, metricsURL, err := startMetrics(o, log)
	if err != nil {
		return err
	}
	defer closeMetrics(mx, log)
	c, err := client.Dial(ctx, cfg.Temporal, log, func(opts *sdkclient.Options) { opts.MetricsHandler = sdkMetrics(mx) })
	if err != nil {
		return err
	}
	defer c.Close()
	checkCtx, cancel := context.WithTimeout(ctx, client.DefaultDialTimeout)
	err = c.CheckSearchAttributes(checkCtx)
	cancel()
	if err != nil {
		return err
	}
	defer startupPreflight(ctx, cfg, log)()
	// Against a real cluster --demo only proves the worker: a cycle would
	// touch real SQL Servers.
	demo := func(ctx context.Context) error { return healthDemo(ctx, c, stdout, nil) }
	defer watchManifests(ctx, mx, cfg, log)()
	return serve(ctx, c, newActivities(log, cfg, c, mx), log, o, stdout, func() {
		fmt.Fprintf(stdout, "backupcycle worker ready in %s: Temporal %s, namespace %s, task queue %s\n",
			since(began), c.Address(), c.Namespace(), c.TaskQueue())
		if metricsURL != "" {
			fmt.Fprintf(stdout, "  metrics: %s\n", metricsURL)
		}
	}, demo)
}

// startupPreflight checks, in the background, the permissions the cycle
// needs (as `starter preflight` does) and logs each missing one as a
// warning with the keys instance, db and server. It never stops the worker.
// The returned function cancels the checks and waits for them.
func startupPreflight(ctx context.Context, cfg *config.Config, log *zap.Logger) func() {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r, err := preflight.Run(ctx, preflight.Options{Config: cfg, CompressionFactor: client.DefaultCompressionFactor})
		if errors.Is(ctx.Err(), context.Canceled) {
			return // the worker stopped first: a cut-short report would only mislead
		}
		if err != nil {
			log.Warn("preflight: the permission checks did not run", zap.Error(err))
			return
		}
		r.Log(log)
	}()
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second): // never hold up the worker's exit
		}
	}
}

// serve runs the worker until ctx ends (a signal) or, with --demo and
// without --keep, until demo is done.
func serve(ctx context.Context, c *client.Client, acts *activities.Activities, log *zap.Logger, o options, stdout io.Writer,
	ready func(), demo func(ctx context.Context) error) error {
	fatal := make(chan error, 1)
	w := worker.New(c.SDK(), c.TaskQueue(), worker.Options{
		// In-flight activities get this long to finish on SIGTERM; the rest
		// are retried by Temporal on another (or the restarted) worker.
		WorkerStopTimeout: 10 * time.Second,
		// The SDK sends heartbeat details at most every 0.8 x HeartbeatTimeout
		// by default (48 s for the copy's 1 min): a worker killed in between
		// loses the copy's checkpoints and the retry starts the stripe over.
		MaxHeartbeatThrottleInterval: 2 * time.Second,
		OnFatalError:                 func(err error) { fatal <- err },
	})
	workflows.Register(w, acts)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on task queue %q, namespace %q: %w", c.TaskQueue(), c.Namespace(), err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			w.Stop()
		}
	}
	defer stop()
	ready()

	var demoErr error
	if o.demo {
		demoErr = demo(ctx)
		if !o.keep || ctx.Err() != nil {
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

// healthDemo runs the health-check workflow once and prints its result.
func healthDemo(ctx context.Context, c *client.Client, stdout io.Writer, workflowURL func(id, run string) string) error {
	hctx, cancel := context.WithTimeout(ctx, demoTimeout)
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
