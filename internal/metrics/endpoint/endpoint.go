// Package endpoint is the worker's Prometheus endpoint: one registry that
// holds the Temporal SDK's metrics (through the SDK's OpenTelemetry
// handler and OpenTelemetry's Prometheus exporter), the product's own
// (Product: bytes, step durations, sets failed, and the per-database gauges
// read from the manifests) and the Go runtime's, served as Prometheus text
// at /metrics.
package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdkclient "go.temporal.io/sdk/client"
	sdkotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"

	"github.com/backupcycle/backupcycle/internal/metrics"
)

// Path is where the metrics are served.
const Path = "/metrics"

// sdkBuckets cover the SDK's timers, recorded in seconds: a gRPC request
// of a millisecond to an activity of hours.
var sdkBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 14400}

// Endpoint is the registry and, once Listen is called, its HTTP server.
type Endpoint struct {
	registry *prometheus.Registry
	provider *sdkmetric.MeterProvider
	sdk      sdkclient.MetricsHandler
	product  *Product
	log      *zap.Logger
	server   *http.Server
	served   chan error
}

// New builds the registry. log (nil: none) gets the errors of the SDK's
// instruments, which the SDK's handler would otherwise panic on.
func New(log *zap.Logger) (*Endpoint, error) {
	if log == nil {
		log = zap.NewNop()
	}
	reg := prometheus.NewRegistry()
	// Memory, goroutines and file descriptors of a worker that runs for months.
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("metrics: register the Go collector: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("metrics: register the process collector: %w", err)
	}
	// Names as Temporal's SDK documents them (temporal_request_total,
	// temporal_activity_execution_latency_bucket): no unit suffix, no
	// OpenTelemetry scope labels or target_info series.
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutUnits(), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("metrics: OpenTelemetry Prometheus exporter: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithView(
		// OpenTelemetry's default buckets are for milliseconds; the SDK records seconds.
		sdkmetric.NewView(sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram, Unit: "s"},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: sdkBuckets}}),
		// The SDK's handler gives an instrument no description: the HELP line of the cycles.
		sdkmetric.NewView(sdkmetric.Instrument{Name: metrics.CycleCounter},
			sdkmetric.Stream{Description: "Backup cycles that ended, by outcome (verified, failed, cancelled, skipped) and error type (none when verified)."}),
	))
	h := sdkotel.NewMetricsHandler(sdkotel.MetricsHandlerOptions{
		Meter: provider.Meter("temporal-sdk-go"),
		// Counters as Prometheus counters (_total), not gauges.
		UseMonotonicCounters: true,
		OnError:              func(err error) { log.Warn("metrics: SDK instrument not recorded", zap.Error(err)) },
	})
	p := newProduct()
	for _, c := range p.collectors() {
		if err := reg.Register(c); err != nil {
			_ = provider.Shutdown(context.Background())
			return nil, fmt.Errorf("metrics: register the product's metrics: %w", err)
		}
	}
	return &Endpoint{registry: reg, provider: provider, sdk: h, product: p, log: log}, nil
}

// SDKHandler is for the Temporal client's Options.MetricsHandler: the
// worker's SDK metrics and what workflows record through
// workflow.GetMetricsHandler (metrics.CycleEnded) land in this registry.
func (e *Endpoint) SDKHandler() sdkclient.MetricsHandler { return e.sdk }

// Product is the product's metrics, for the activities and Watch.
func (e *Endpoint) Product() *Product { return e.product }

// Handler serves the registry as Prometheus text. A collector that fails
// is logged and left out; the rest is still served, so one broken series
// does not blind every alert.
func (e *Endpoint) Handler() http.Handler {
	return promhttp.HandlerFor(e.registry, promhttp.HandlerOpts{
		Registry:      e.registry,
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      zap.NewStdLog(e.log),
	})
}

// Listen serves Handler at Path on addr (host:port; port 0 picks a free
// one) over plain HTTP and returns the URL to scrape.
func (e *Endpoint) Listen(addr string) (string, error) { return e.ListenWeb(addr, "") }

// ListenWeb is Listen with a web configuration file (webConfig, "" for
// none): the Prometheus exporter toolkit's format, which Prometheus'
// own exporters read with --web.config.file: TLS (tls_server_config,
// certificates re-read for each new connection, so a renewed one needs
// no restart) and basic authentication (basic_auth_users, bcrypt
// hashes). It is checked before anything listens; the URL is https when
// it sets TLS.
func (e *Endpoint) ListenWeb(addr, webConfig string) (string, error) {
	if e.server != nil {
		return "", errors.New("metrics: endpoint already listening")
	}
	scheme := "http"
	if webConfig != "" {
		tls, err := checkWebConfig(webConfig)
		if err != nil {
			return "", fmt.Errorf("--metrics-web-config %s: %w (the format: https://prometheus.io/docs/prometheus/latest/configuration/https/)", webConfig, err)
		}
		if tls {
			scheme = "https"
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("--metrics-addr %s: %w (give a free host:port, e.g. 127.0.0.1:9090, or :0 for any free port)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, e.Handler())
	e.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	e.served = make(chan error, 1)
	flags := &web.FlagConfig{WebListenAddresses: &[]string{addr}, WebSystemdSocket: new(bool), WebConfigFile: &webConfig}
	// The toolkit logs through slog: its lines (listening, TLS on or off,
	// a refused login) go to the worker's log at info level.
	slogger := slog.New(slog.NewTextHandler(zap.NewStdLog(e.log).Writer(), nil))
	go func() { e.served <- web.Serve(ln, e.server, flags, slogger) }()
	return urlOf(scheme, ln.Addr()), nil
}

// checkWebConfig validates a web configuration file as the toolkit will
// read it (users' hashes, certificate and key) and reports whether it
// serves TLS.
func checkWebConfig(file string) (tls bool, err error) {
	if err := web.Validate(file); err != nil {
		return false, err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return false, err
	}
	var c struct {
		TLS struct {
			CertFile string `yaml:"cert_file"`
			Cert     string `yaml:"cert"`
		} `yaml:"tls_server_config"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		return false, err
	}
	return c.TLS.CertFile != "" || c.TLS.Cert != "", nil
}

// URL is the address to scrape a plain HTTP listener on: an unspecified
// host (listening on every interface) is shown as 127.0.0.1.
func URL(a net.Addr) string { return urlOf("http", a) }

func urlOf(scheme string, a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return scheme + "://" + a.String() + Path
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + Path
}

// Close stops the HTTP server (a scrape in progress gets a few seconds)
// and the SDK's meter provider.
func (e *Endpoint) Close() error {
	var errs []error
	if e.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, e.server.Shutdown(ctx))
		cancel()
		if err := <-e.served; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
		e.server = nil
	}
	errs = append(errs, e.provider.Shutdown(context.Background()))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("metrics: stop the endpoint: %w", err)
	}
	return nil
}
