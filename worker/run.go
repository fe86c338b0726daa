package main

import (
	"context"
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
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/internal/logging"
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

	tcfg := client.WithDefaults(config.Temporal{Address: srv.FrontendAddress(), Namespace: srv.Namespace()})
	sdk, err := srv.NewClient(ctx, sdkclient.Options{Logger: logging.NewSDKLogger(log)})
	if err != nil {
		return err
	}
	defer sdk.Close()
	c := client.New(sdk, tcfg, log)

	return serve(ctx, c, newActivities(log, nil, c), log, o, stdout, func() {
		fmt.Fprintf(stdout, "backupcycle worker ready in %s (embedded Temporal, state in %s)\n", since(began), dbFile)
		if ui := srv.UIAddress(); ui != "" {
			fmt.Fprintf(stdout, "  Temporal Web UI:   %s\n", ui)
		}
		fmt.Fprintf(stdout, "  Temporal frontend: %s (namespace %s, task queue %s)\n", srv.FrontendAddress(), c.Namespace(), c.TaskQueue())
		if !o.demo || o.keep {
			fmt.Fprintf(stdout, "  health check:      go run ./starter health --address %s\n", srv.FrontendAddress())
			fmt.Fprintf(stdout, "  stop:              Ctrl-C\n")
		}
	}, srv.WorkflowURL)
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
	c, err := client.Dial(ctx, cfg.Temporal, log)
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
	return serve(ctx, c, newActivities(log, cfg, c), log, o, stdout, func() {
		fmt.Fprintf(stdout, "backupcycle worker ready in %s: Temporal %s, namespace %s, task queue %s\n",
			since(began), c.Address(), c.Namespace(), c.TaskQueue())
	}, nil)
}

// serve runs the worker until ctx ends (a signal) or, with --demo and
// without --keep, until the health check is done.
func serve(ctx context.Context, c *client.Client, acts *activities.Activities, log *zap.Logger, o options, stdout io.Writer,
	ready func(), workflowURL func(id, run string) string) error {
	fatal := make(chan error, 1)
	w := worker.New(c.SDK(), c.TaskQueue(), worker.Options{
		// In-flight activities get this long to finish on SIGTERM; the rest
		// are retried by Temporal on another (or the restarted) worker.
		WorkerStopTimeout: 10 * time.Second,
		OnFatalError:      func(err error) { fatal <- err },
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

	if o.demo {
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
		if !o.keep {
			stop()
			fmt.Fprintln(stdout, "demo done: stopped (use --keep to stay up)")
			return nil
		}
	}

	select {
	case <-ctx.Done():
		log.Info("signal received: stopping the worker")
		stop()
		fmt.Fprintln(stdout, "worker stopped")
		return nil
	case err := <-fatal:
		return fmt.Errorf("worker stopped on a fatal error: %w", err)
	}
}
