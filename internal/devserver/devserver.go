// Package devserver runs a complete Temporal server in-process: frontend,
// history, matching and worker services (the worker service runs Schedules)
// on SQLite, plus the Temporal Web UI. It backs the devworker, the demo and
// the integration tests; production uses a real Temporal cluster.
//
// Several servers can run in one process (static membership, free ports,
// a random name per in-memory database). Known limits of the server's SQLite
// plugin: its connection pool never closes a database, so an in-memory
// database lives until the process exits and a file stays open after Stop
// (a later Start on the same file reuses that connection).
package devserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	temporalserver "go.temporal.io/server/temporal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/types/known/durationpb"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
)

// Default ports, those of `temporal server start-dev`, so tools and habits
// carry over.
const (
	DefaultFrontendPort = 7233
	DefaultUIPort       = 8233
	DefaultNamespace    = "default"
	// DefaultRetention keeps closed workflows a week: long enough to look at
	// last night's cycles in the UI, short enough to keep the file small.
	DefaultRetention = 7 * 24 * time.Hour
)

// NoUI as Options.UIPort disables the Web UI.
const NoUI = -1

// Fixed cluster identity: on a file the stored cluster metadata wins over the
// config, so a changed name or ID would make an existing file unusable.
const (
	clusterName = "active"
	clusterID   = "5b1f8d3e-6c2a-4b7e-9a41-0d2c7e6f9b10" // must be a UUID
)

// Options configures Start. The zero value is an in-memory server on free
// ports with the UI on a free port; DefaultOptions gives the 7233/8233 ports
// of `temporal server start-dev`.
type Options struct {
	// DBFile is the SQLite file; "" means in-memory (gone after Stop).
	DBFile string
	// FrontendIP is where the frontend and the UI listen (default 127.0.0.1).
	FrontendIP string
	// FrontendPort of the gRPC frontend; 0 picks a free port. The history,
	// matching and worker services always take free ports.
	FrontendPort int
	// UIPort of the Web UI; 0 picks a free port, NoUI (-1) disables it.
	UIPort int
	// Namespace to create (default "default").
	Namespace string
	// Retention of closed workflows in Namespace (default DefaultRetention).
	// Applies when the namespace is created; an existing one keeps its own.
	Retention time.Duration
	// SearchAttributes to register on Namespace (name -> type); existing files
	// get the missing ones added at start.
	SearchAttributes map[string]enumspb.IndexedValueType
	// Logger receives the server's logs, named "temporal" (nil: none).
	Logger *zap.Logger
	// ServerLogLevel filters the server's logs, which are chatty below warn
	// (nil: zapcore.WarnLevel). A zapcore.Level works.
	ServerLogLevel zapcore.LevelEnabler
}

// DefaultOptions returns the `temporal server start-dev` defaults: frontend
// on 127.0.0.1:7233, UI on 8233, namespace "default", in-memory.
func DefaultOptions() Options {
	return Options{
		FrontendIP:   "127.0.0.1",
		FrontendPort: DefaultFrontendPort,
		UIPort:       DefaultUIPort,
		Namespace:    DefaultNamespace,
	}
}

// Server is a running embedded Temporal server (and UI).
type Server struct {
	opts      Options
	frontend  string
	uiAddr    string
	httpAPI   string
	server    temporalserver.Server
	ui        *uiserver.Server
	uiDone    chan struct{}
	logFilter *levelFilter
	stopOnce  sync.Once
	stopErr   error
}

// Start creates the schema and namespace if needed, starts the server and
// the UI, registers missing search attributes and returns once the
// namespace answers through the frontend. ctx bounds the wait.
func Start(ctx context.Context, opts Options) (*Server, error) {
	opts = withDefaults(opts)
	ports, err := pickPorts(opts)
	if err != nil {
		return nil, err
	}
	frontend := net.JoinHostPort(opts.FrontendIP, strconv.Itoa(ports.frontend))

	sqlConf, isNew, err := sqliteConfig(opts.DBFile)
	if err != nil {
		return nil, err
	}
	if isNew {
		if err := sqliteschema.SetupSchema(sqlConf); err != nil {
			return nil, fmt.Errorf("devserver: create Temporal schema in %s: %w", describeDB(opts.DBFile), err)
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, opts.Namespace, false, opts.SearchAttributes)
	if err != nil {
		return nil, fmt.Errorf("devserver: namespace %q: %w", opts.Namespace, err)
	}
	ns.Detail.Config.Retention = durationpb.New(opts.Retention)
	// A no-op when the namespace exists (restart on the same file).
	if err := sqliteschema.CreateNamespaces(sqlConf, ns); err != nil {
		return nil, fmt.Errorf("devserver: create namespace %q in %s: %w (is the file a Temporal SQLite database?)",
			opts.Namespace, describeDB(opts.DBFile), err)
	}

	cfg := serverConfig(opts, sqlConf, ports)
	hosts := map[primitives.ServiceName]static.Hosts{
		primitives.FrontendService: static.SingleLocalHost(frontend),
		primitives.HistoryService:  static.SingleLocalHost(loopback(ports.history)),
		primitives.MatchingService: static.SingleLocalHost(loopback(ports.matching)),
		primitives.WorkerService:   static.SingleLocalHost(loopback(ports.worker)),
	}
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	var level zapcore.LevelEnabler = zapcore.WarnLevel
	if opts.ServerLogLevel != nil {
		level = opts.ServerLogLevel
	}
	// A switchable filter so Stop can mute the warnings the server's own
	// internal workers log while their connections close.
	filter := &levelFilter{base: level}
	// No caller: the server's adapter would report its own file, and it
	// adds "logging-call-at" itself.
	logger = logger.Named("temporal").WithOptions(zap.WithCaller(false), zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return &levelCore{Core: c, filter: filter}
	}))

	srv, err := temporalserver.NewServer(
		temporalserver.WithConfig(cfg),
		temporalserver.ForServices(temporalserver.DefaultServices),
		temporalserver.WithStaticHosts(hosts),
		temporalserver.WithLogger(serverlog.NewZapLogger(logger)),
		temporalserver.WithDynamicConfigClient(dynamicconfig.StaticClient{
			// Search attributes added at start are usable at once, not after
			// the cache's refresh interval.
			dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): []dynamicconfig.ConstrainedValue{{Value: true}},
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("devserver: configure Temporal server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("devserver: start Temporal server (frontend %s, %s): %w", frontend, describeDB(opts.DBFile), err)
	}
	s := &Server{opts: opts, frontend: frontend, server: srv, logFilter: filter,
		httpAPI: net.JoinHostPort(opts.FrontendIP, strconv.Itoa(ports.frontendHTTP))}

	if err := s.waitReady(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	if err := s.ensureSearchAttributes(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	if opts.UIPort != NoUI {
		if err := s.startUI(ctx, ports.ui); err != nil {
			_ = s.Stop()
			return nil, err
		}
	}
	return s, nil
}

// FrontendAddress is host:port of the gRPC frontend (for client.Options.HostPort).
func (s *Server) FrontendAddress() string { return s.frontend }

// HTTPAPIAddress is host:port of the frontend's HTTP API (also Nexus).
func (s *Server) HTTPAPIAddress() string { return s.httpAPI }

// UIAddress is the Web UI's base URL (http://host:port), "" when the UI is off.
func (s *Server) UIAddress() string {
	if s.uiAddr == "" {
		return ""
	}
	return "http://" + s.uiAddr
}

// Namespace is the namespace the server was started with.
func (s *Server) Namespace() string { return s.opts.Namespace }

// DBFile is the SQLite file, "" when in-memory.
func (s *Server) DBFile() string { return s.opts.DBFile }

// WorkflowURL is the Web UI page of a workflow run ("" when the UI is off).
func (s *Server) WorkflowURL(workflowID, runID string) string {
	if s.uiAddr == "" {
		return ""
	}
	// A workflow id may hold slashes (drill/sql01/Sales): one path segment.
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s/%s/history", s.UIAddress(), s.opts.Namespace, url.PathEscape(workflowID), runID)
}

// NewClient dials the frontend; HostPort and an empty Namespace are filled in.
func (s *Server) NewClient(ctx context.Context, opts sdkclient.Options) (sdkclient.Client, error) {
	opts.HostPort = s.frontend
	if opts.Namespace == "" {
		opts.Namespace = s.opts.Namespace
	}
	c, err := sdkclient.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("devserver: dial embedded frontend %s: %w", s.frontend, err)
	}
	return c, nil
}

// Stop stops the UI, then the server; the ports are free when it returns.
// Safe to call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		if s.ui != nil {
			s.ui.Stop()
			<-s.uiDone
		}
		s.logFilter.stopping.Store(true)
		if err := s.server.Stop(); err != nil {
			s.stopErr = fmt.Errorf("devserver: stop Temporal server: %w", err)
		}
	})
	return s.stopErr
}

func withDefaults(o Options) Options {
	if o.FrontendIP == "" {
		o.FrontendIP = "127.0.0.1"
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	return o
}

type ports struct{ frontend, frontendHTTP, history, matching, worker, ui int }

// pickPorts resolves 0 to free ports. All listeners are held until every
// port is chosen so two picks in one call never collide; a fixed port that
// is taken fails here with a clear message instead of deep in the server.
func pickPorts(o Options) (ports, error) {
	var p ports
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	take := func(ip string, port int, what, flag string) (int, error) {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			if port != 0 {
				return 0, fmt.Errorf("devserver: %s port %s:%d is not available: %w (stop what uses it or choose another with %s; 0 picks a free one)",
					what, ip, port, err, flag)
			}
			return 0, fmt.Errorf("devserver: no free port for the %s on %s: %w", what, ip, err)
		}
		held = append(held, l)
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	var err error
	if p.frontend, err = take(o.FrontendIP, o.FrontendPort, "Temporal frontend", "--port"); err != nil {
		return p, err
	}
	// The frontend's HTTP API (and Nexus) on a free port beside gRPC.
	if p.frontendHTTP, err = take(o.FrontendIP, 0, "Temporal HTTP API", ""); err != nil {
		return p, err
	}
	for _, dst := range []*int{&p.history, &p.matching, &p.worker} {
		if *dst, err = take("127.0.0.1", 0, "Temporal internal service", ""); err != nil {
			return p, err
		}
	}
	if o.UIPort != NoUI {
		if o.UIPort < 0 || o.UIPort > 65535 {
			return p, fmt.Errorf("devserver: UI port %d is out of range: use 1-65535, 0 for a free port or -1 for no UI", o.UIPort)
		}
		if p.ui, err = take(o.FrontendIP, o.UIPort, "Web UI", "--ui-port"); err != nil {
			return p, err
		}
	}
	return p, nil
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// sqliteConfig returns the SQL config for a file (WAL: readers do not block
// the single writer) or a private in-memory database, and whether the schema
// must be created.
func sqliteConfig(file string) (*config.SQL, bool, error) {
	if file == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, false, fmt.Errorf("devserver: random database name: %w", err)
		}
		// A random name: two in-memory servers in one process must not share
		// the shared-cache database. The SQLite plugin creates the schema of a
		// memory database itself, hence isNew is false.
		return &config.SQL{
			PluginName:        sqliteplugin.PluginName,
			DatabaseName:      "backupcycle-" + hex.EncodeToString(b[:]),
			ConnectAttributes: map[string]string{"mode": "memory", "cache": "shared"},
		}, false, nil
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, false, fmt.Errorf("devserver: database path %q: %w", file, err)
	}
	dir := filepath.Dir(abs)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, false, fmt.Errorf("devserver: directory %s of the database file does not exist: create it first", dir)
	}
	isNew := false
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		isNew = true
	} else if err != nil {
		return nil, false, fmt.Errorf("devserver: database file %s: %w", abs, err)
	}
	return &config.SQL{
		PluginName:        sqliteplugin.PluginName,
		DatabaseName:      abs,
		ConnectAttributes: map[string]string{"mode": "rwc", "journal_mode": "wal"},
	}, isNew, nil
}

func describeDB(file string) string {
	if file == "" {
		return "in-memory SQLite"
	}
	return "SQLite file " + file
}

func serverConfig(o Options, sqlConf *config.SQL, p ports) *config.Config {
	frontend := net.JoinHostPort(o.FrontendIP, strconv.Itoa(p.frontend))
	svc := func(ip string, port int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: port, BindOnIP: ip}}
	}
	return &config.Config{
		Global: config.Global{
			Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: "127.0.0.1"},
		},
		Persistence: config.Persistence{
			DefaultStore:     sqliteplugin.PluginName,
			VisibilityStore:  sqliteplugin.PluginName,
			NumHistoryShards: 1,
			DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlConf}},
		},
		ClusterMetadata: &cluster.Config{
			EnableGlobalNamespace:    false,
			FailoverVersionIncrement: 10,
			MasterClusterName:        clusterName,
			CurrentClusterName:       clusterName,
			ClusterInformation: map[string]cluster.ClusterInformation{
				clusterName: {
					Enabled:                true,
					InitialFailoverVersion: 1,
					RPCAddress:             frontend,
					HTTPAddress:            net.JoinHostPort(o.FrontendIP, strconv.Itoa(p.frontendHTTP)),
					ClusterID:              clusterID,
				},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{
			"frontend": {RPC: config.RPC{GRPCPort: p.frontend, HTTPPort: p.frontendHTTP, BindOnIP: o.FrontendIP}},
			"history":  svc("127.0.0.1", p.history),
			"matching": svc("127.0.0.1", p.matching),
			"worker":   svc("127.0.0.1", p.worker),
		},
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{
			Archival: config.ArchivalNamespaceDefaults{
				History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
				Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
			},
		},
		// The server's internal clients (worker service, schedules) dial this.
		PublicClient: config.PublicClient{HostPort: frontend},
	}
}

// waitReady polls until the frontend answers for the namespace: Start of
// the services returns before the namespace registry has loaded.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var lastErr error
	for {
		c, err := sdkclient.DialContext(ctx, sdkclient.Options{HostPort: s.frontend, Namespace: s.opts.Namespace, Logger: nopLogger{}})
		if err == nil {
			_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.opts.Namespace})
			c.Close()
			if err == nil {
				return nil
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("devserver: frontend %s not ready for namespace %q: %w (last error: %v)",
				s.frontend, s.opts.Namespace, ctx.Err(), lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ensureSearchAttributes adds the requested search attributes missing from
// the namespace: on an existing file the namespace was created earlier,
// maybe by a version of the product with fewer attributes.
func (s *Server) ensureSearchAttributes(ctx context.Context) error {
	if len(s.opts.SearchAttributes) == 0 {
		return nil
	}
	c, err := s.NewClient(ctx, sdkclient.Options{Logger: nopLogger{}})
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.opts.Namespace})
	if err != nil {
		return fmt.Errorf("devserver: list search attributes of namespace %q: %w", s.opts.Namespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, want := range s.opts.SearchAttributes {
		got, ok := resp.GetCustomAttributes()[name]
		if !ok {
			missing[name] = want
			continue
		}
		if got != want {
			return fmt.Errorf("devserver: search attribute %s exists in namespace %q as %s, want %s: use a new database file",
				name, s.opts.Namespace, got, want)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        s.opts.Namespace,
		SearchAttributes: missing,
	})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("devserver: add search attributes %v to namespace %q: %w", keys(missing), s.opts.Namespace, err)
	}
	return nil
}

// startUI serves the Web UI (assets embedded in ui-server) pointing at the
// frontend and waits until it accepts connections.
func (s *Server) startUI(ctx context.Context, port int) error {
	addr := net.JoinHostPort(s.opts.FrontendIP, strconv.Itoa(port))
	s.ui = uiserver.NewServer(uioptions.WithConfigProvider(&uiconfig.Config{
		Host:                s.opts.FrontendIP,
		Port:                port,
		TemporalGRPCAddress: s.frontend,
		EnableUI:            true,
		DefaultNamespace:    s.opts.Namespace,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		DisableNewsFetch:    true,
	}))
	s.uiDone = make(chan struct{})
	go func() {
		defer close(s.uiDone)
		// Start blocks until Stop. A bind failure would make it exit the
		// process (echo's Logger.Fatal): pickPorts checked the port first.
		_ = s.ui.Start()
	}()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	for {
		resp, err := hc.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			s.uiAddr = addr
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devserver: Web UI on %s did not come up: %w (last error: %v)", addr, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
