package main

import (
	"context"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/metrics/endpoint"
)

// startMetrics serves /metrics on --metrics-addr; nil (and no URL) when the
// flag is not given. It listens before anything else starts, so a port in
// use is reported at once.
func startMetrics(o options, log *zap.Logger) (*endpoint.Endpoint, string, error) {
	if o.metricsAddr == "" {
		return nil, "", nil
	}
	e, err := endpoint.New(log.Named("metrics"))
	if err != nil {
		return nil, "", err
	}
	url, err := e.Listen(o.metricsAddr)
	if err != nil {
		_ = e.Close()
		return nil, "", err
	}
	return e, url, nil
}

// watchManifests keeps the per-database gauges (last verified set, time to
// recover, objectives) current from the manifests on cfg's backup servers,
// from now on, also right after a restart. The returned function stops it
// and waits a moment for the read in progress.
func watchManifests(ctx context.Context, e *endpoint.Endpoint, cfg *config.Config, log *zap.Logger) func() {
	if e == nil || cfg == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Product().Watch(ctx, cfg, endpoint.DefaultRefresh, nil, log)
	}()
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second): // an SMB read that ignores the cancel must not hold up the exit
		}
	}
}

// sdkMetrics is the Temporal client's MetricsHandler: nil (the SDK's no-op)
// without an endpoint.
func sdkMetrics(e *endpoint.Endpoint) sdkclient.MetricsHandler {
	if e == nil {
		return nil
	}
	return e.SDKHandler()
}

// closeMetrics stops the endpoint, if any.
func closeMetrics(e *endpoint.Endpoint, log *zap.Logger) {
	if e == nil {
		return
	}
	if err := e.Close(); err != nil {
		log.Warn("metrics endpoint did not stop cleanly", zap.Error(err))
	}
}
