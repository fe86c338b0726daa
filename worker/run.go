package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities/health"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/logging"
	"github.com/backupcycle/backupcycle/internal/preflight"
	"github.com/backupcycle/backupcycle/internal/version"
	"github.com/backupcycle/backupcycle/internal/workerhost"
	"github.com/backupcycle/backupcycle/starter/client"
)

// configPoll is how often the config file is checked for a change.
var configPoll = workerhost.DefaultPoll

// runRemote runs the worker against the cluster the config names.
func runRemote(ctx context.Context, o options, stdout io.Writer) error {
	began := time.Now()
	log, err := logging.New(false)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	live, err := workerhost.LoadLive(o.configFile, log, func(c *config.Config) {
		if o.taskQueue != "" {
			c.Temporal.TaskQueue = o.taskQueue
		}
	})
	if err != nil {
		return err
	}
	cfg := live.Config()
	mx, metricsURL, err := workerhost.StartMetrics(o.metricsAddr, o.metricsWebConfig, log)
	if err != nil {
		return err
	}
	defer workerhost.CloseMetrics(mx, log)
	c, err := client.Dial(ctx, cfg.Temporal, log, func(opts *sdkclient.Options) { opts.MetricsHandler = workerhost.SDKMetrics(mx) })
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
	defer checkPermissions(ctx, live, log)()
	defer live.Watch(ctx, configPoll)()
	defer workerhost.WatchManifests(ctx, mx, live, log)()
	// Against a real cluster --demo only proves the worker: a cycle would
	// touch real SQL Servers.
	demo := func(ctx context.Context) error { return workerhost.HealthDemo(ctx, c, stdout, nil) }
	return workerhost.Serve(ctx, c, workerhost.NewActivities(log, live, c, mx), log, workerhost.Run{
		Demo:    o.demo,
		RunDemo: demo,
		Ready: func() {
			fmt.Fprintf(stdout, "backupcycle worker ready in %s: Temporal %s, namespace %s, task queue %s\n",
				workerhost.Since(began), c.Address(), c.Namespace(), c.TaskQueue())
			fmt.Fprintf(stdout, "  build:   %s\n", version.String())
			fmt.Fprintf(stdout, "  config:  %s (re-read when it changes and on SIGHUP)\n", live.File())
			if auth := health.ManifestAuthentication(live.Config()); auth == health.AuthenticationOff {
				fmt.Fprintf(stdout, "  WARNING: manifests are not authenticated (no manifest_keys in %s): anyone who can write a backup share can make a database look verified\n", live.File())
				log.Warn("manifests are not authenticated: no manifest_keys configured; see README \"Authenticated manifests\"")
			} else {
				fmt.Fprintf(stdout, "  manifests: %s\n", auth)
			}
			if metricsURL != "" {
				fmt.Fprintf(stdout, "  metrics: %s\n", metricsURL)
			}
			if o.ready != nil {
				o.ready()
			}
		},
	}, stdout)
}

// runReplay replays the open workflows of the config's task queue (or
// --task-queue) with this build and returns how many did not replay.
func runReplay(ctx context.Context, o options, stdout io.Writer) (int, error) {
	log, err := logging.New(false)
	if err != nil {
		return 0, err
	}
	defer func() { _ = log.Sync() }()
	cfg, err := config.Load(o.configFile)
	if err != nil {
		return 0, err
	}
	if o.taskQueue != "" {
		cfg.Temporal.TaskQueue = o.taskQueue
	}
	c, err := client.Dial(ctx, cfg.Temporal, log)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return workerhost.ReplayOpen(ctx, c.SDK(), c.Namespace(), c.TaskQueue(), log, stdout)
}

// checkPermissions runs startupPreflight at start and again for each
// configuration reloaded (a database added there is checked at once). The
// returned function stops the checks in progress.
func checkPermissions(ctx context.Context, live *workerhost.LiveConfig, log *zap.Logger) func() {
	var mu sync.Mutex
	stop := startupPreflight(ctx, live.Config(), log)
	closed := false
	live.OnChange(func(cfg *config.Config) {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return
		}
		// Not waited for here: OnChange must not block the reload.
		go stop()
		stop = startupPreflight(ctx, cfg, log)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		closed = true
		stop()
	}
}

// startupPreflight checks, in the background, the permissions the cycle
// needs (as `starter preflight` does) and logs each missing one as a
// warning with the keys instance, db and server. An object store is only
// opened (preflight.Options.Startup). It never stops the worker.
// The returned function cancels the checks and waits for them.
func startupPreflight(ctx context.Context, cfg *config.Config, log *zap.Logger) func() {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r, err := preflight.Run(ctx, preflight.Options{Config: cfg, CompressionFactor: client.DefaultCompressionFactor, Startup: true})
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
