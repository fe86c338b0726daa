package workerhost

import (
	"context"
	"net"
	"strings"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/metrics/endpoint"
)

// StartMetrics serves /metrics on addr, with the web configuration file
// webConfig when set (TLS, basic authentication); nil (and no URL) when
// addr is empty. Called before anything else starts, so a port in use or a
// bad web configuration is reported at once. Served on an address other
// hosts reach without TLS and authentication, it logs a warning: the
// metrics hold no secret, but name every database, instance and server.
func StartMetrics(addr, webConfig string, log *zap.Logger) (*endpoint.Endpoint, string, error) {
	if addr == "" {
		return nil, "", nil
	}
	e, err := endpoint.New(log.Named("metrics"))
	if err != nil {
		return nil, "", err
	}
	url, err := e.ListenWeb(addr, webConfig)
	if err != nil {
		_ = e.Close()
		return nil, "", err
	}
	host, _, _ := net.SplitHostPort(addr)
	switch {
	case config.LoopbackHost(host) || strings.HasPrefix(url, "https://"):
	case webConfig != "":
		log.Warn("metrics: the web configuration sets no TLS, so its basic authentication sends the password in clear to an address other hosts can reach: "+
			"add tls_server_config to "+webConfig, zap.String("addr", addr), zap.String("url", url))
	default:
		log.Warn("metrics: /metrics is served without TLS or authentication on an address other hosts can reach: "+
			"whoever reaches it reads the names of the databases, instances and backup servers and the state of their backups; "+
			"bind it to 127.0.0.1, keep the port closed in the firewall, or give --metrics-web-config (TLS and basic authentication)",
			zap.String("addr", addr), zap.String("url", url))
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
