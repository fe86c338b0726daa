package workerhost

import (
	"context"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/metrics/endpoint"
)

// StartMetrics serves /metrics on addr; nil (and no URL) when addr is
// empty. Called before anything else starts, so a port in use is reported
// at once.
func StartMetrics(addr string, log *zap.Logger) (*endpoint.Endpoint, string, error) {
	if addr == "" {
		return nil, "", nil
	}
	e, err := endpoint.New(log.Named("metrics"))
	if err != nil {
		return nil, "", err
	}
	url, err := e.Listen(addr)
	if err != nil {
		_ = e.Close()
		return nil, "", err
	}
	return e, url, nil
}

// WatchManifests keeps the per-database gauges (last verified set, time to
// recover, objectives) current from the manifests on the backup servers of
// the configuration in force, from now on, also right after a restart, and
// starts over with the new configuration when live reloads one. The returned
// function stops it and waits a moment for the read in progress.
func WatchManifests(ctx context.Context, e *endpoint.Endpoint, live *LiveConfig, log *zap.Logger) func() {
	if e == nil || live == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	changed := make(chan struct{}, 1)
	live.OnChange(func(*config.Config) {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	go func() {
		defer close(done)
		for {
			wctx, stop := context.WithCancel(ctx)
			watched := make(chan struct{})
			go func(cfg *config.Config) {
				defer close(watched)
				e.Product().Watch(wctx, cfg, endpoint.DefaultRefresh, nil, log)
			}(live.Config())
			select {
			case <-ctx.Done():
			case <-changed:
			}
			stop()
			<-watched
			if ctx.Err() != nil {
				return
			}
		}
	}()
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second): // an SMB read that ignores the cancel must not hold up the exit
		}
	}
}

// SDKMetrics is the Temporal client's MetricsHandler: nil (the SDK's no-op)
// without an endpoint.
func SDKMetrics(e *endpoint.Endpoint) sdkclient.MetricsHandler {
	if e == nil {
		return nil
	}
	return e.SDKHandler()
}

// CloseMetrics stops the endpoint, if any.
func CloseMetrics(e *endpoint.Endpoint, log *zap.Logger) {
	if e == nil {
		return
	}
	if err := e.Close(); err != nil {
		log.Warn("metrics endpoint did not stop cleanly", zap.Error(err))
	}
}
