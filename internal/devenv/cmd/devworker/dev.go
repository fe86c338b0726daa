package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/internal/logging"
	"github.com/backupcycle/backupcycle/internal/workerhost"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// LogFile is the structured (JSON) log in the state directory.
const LogFile = "devworker.log"

// runDev runs the embedded server, the Web UI, the emulated site and the
// worker in this process.
func runDev(ctx context.Context, o options, stdout io.Writer) error {
	began := time.Now()
	_, statErr := os.Stat(o.stateDir)
	fresh := os.IsNotExist(statErr)
	if err := os.MkdirAll(o.stateDir, 0o755); err != nil {
		return fmt.Errorf("state directory %s: %w (choose another with --state-dir)", o.stateDir, err)
	}
	// The terminal shows the human-readable lines; the structured log of
	// the server, the site and the worker goes to a file beside the state.
	logFile := filepath.Join(o.stateDir, LogFile)
	log, closeLog, err := logging.NewFile(logFile)
	if err != nil {
		return err
	}
	defer closeLog()
	mx, metricsURL, err := workerhost.StartMetrics(o.metricsAddr, o.metricsWebConfig, log)
	if err != nil {
		if fresh {
			// Nothing started: leave no state directory behind.
			closeLog()
			_ = os.Remove(logFile)
			_ = os.Remove(o.stateDir)
		}
		return err
	}
	fmt.Fprintf(stdout, "structured log: %s\n", logFile)
	defer workerhost.CloseMetrics(mx, log)

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
	// The site's configuration file, re-read while the worker runs like the
	// production worker's (a database added there needs no restart).
	live, err := workerhost.LoadLive(site.ConfigFile, log, func(c *config.Config) {
		if o.taskQueue != "" {
			c.Temporal.TaskQueue = o.taskQueue
		}
	})
	if err != nil {
		return err
	}
	defer live.Watch(ctx, 0)()

	tcfg := client.WithDefaults(config.Temporal{Address: srv.FrontendAddress(), Namespace: srv.Namespace(), TaskQueue: o.taskQueue})
	sdk, err := srv.NewClient(ctx, sdkclient.Options{Logger: logging.NewSDKLogger(log), MetricsHandler: workerhost.SDKMetrics(mx)})
	if err != nil {
		return err
	}
	defer sdk.Close()
	c := client.New(sdk, tcfg, log)

	checks, drills := &pitChecks{}, &drillChecks{}
	demo := func(ctx context.Context) error {
		if err := workerhost.HealthDemo(ctx, c, stdout, srv.WorkflowURL); err != nil {
			return err
		}
		results, err := runDemoCycles(ctx, c, stdout, srv.WorkflowURL)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, demoSummary(results))
		if site.Vault != nil {
			if err := showImmutable(stdout, results); err != nil {
				return err
			}
		}
		if o.logEvery > 0 {
			if err := showLogChain(ctx, c, stdout, o.logEvery); err != nil {
				return err
			}
			if err := showPITProof(ctx, c, stdout, checks, pitEveryTicks*o.logEvery); err != nil {
				return err
			}
			var rto time.Duration
			if db, err := live.Config().Database(devenv.SourceInstance, devenv.Database); err == nil {
				rto = db.RTO
			}
			if err := showDrill(ctx, c, stdout, drills, rto, srv.WorkflowURL); err != nil {
				return err
			}
		}
		if u := cyclesURL(srv.UIAddress(), c.Namespace()); u != "" {
			fmt.Fprintf(stdout, "  all cycles of %s in the Web UI: %s\n", devenv.Database, u)
		}
		return nil
	}
	defer workerhost.WatchManifests(ctx, mx, live, log)()
	return workerhost.Serve(ctx, c, workerhost.NewActivities(log, live, c, mx), log, workerhost.Run{
		Demo: o.demo, Keep: o.keep, RunDemo: demo, Overrides: devOverrides(site, live, o.logEvery, checks, drills),
		Ready: func() {
			fmt.Fprintf(stdout, "backupcycle worker ready in %s (embedded Temporal, state in %s)\n", workerhost.Since(began), dbFile)
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
		},
	}, stdout)
}

// sizeFlag is a flag.Value for sizes written like the config's (320MiB).
type sizeFlag struct{ v *config.Size }

func (f sizeFlag) String() string {
	if f.v == nil {
		return ""
	}
	return f.v.String()
}

func (f sizeFlag) Set(s string) error {
	n, err := config.ParseSize(s)
	if err != nil {
		return err
	}
	*f.v = n
	return nil
}

// startSite starts the emulated site of --dev (internal/devenv) next to the
// embedded Temporal server, whose address goes into the site's config.
func startSite(ctx context.Context, o options, srv *devserver.Server, log *zap.Logger) (*devenv.Site, error) {
	site, err := devenv.Start(ctx, devenv.Options{
		StateDir:        o.stateDir,
		DatabaseSize:    int64(o.devDBSize),
		FleetDatabases:  o.devFleet,
		LogBackups:      o.logEvery > 0,
		Drill:           o.logEvery > 0, // a drill to a point of the log chain's proven window
		ObjectStore:     o.objectStore,
		IP:              o.ip,
		TemporalAddress: srv.FrontendAddress(),
		Namespace:       srv.Namespace(),
		Logger:          log.Named("sqlsim"),
	})
	if err != nil {
		return nil, err
	}
	return site, nil
}

// printSite tells what the emulated site is and how to use it.
func printSite(w io.Writer, site *devenv.Site) {
	how := "continued (database, sequence numbers and backup sets kept)"
	if site.Created {
		how = fmt.Sprintf("created in %s", site.CreateTime.Round(10e6))
	}
	fmt.Fprintf(w, "  emulated site:     %s, config %s\n", how, site.ConfigFile)
	size := "?"
	if files, err := site.Source.DatabaseFiles(devenv.Database); err == nil {
		size = fmt.Sprintf("%s in %d files", humanSize(filesSize(files)), len(files))
	}
	fmt.Fprintf(w, "    %-10s %-21s source SQL Server, database %s (%s)\n", devenv.SourceInstance, site.Source.Addr(), devenv.Database, size)
	if n := len(site.FleetDatabases); n > 0 {
		fmt.Fprintf(w, "    %-10s %-21s and %d small databases for the Fleet: %s\n", "", "", n, strings.Join(site.FleetDatabases, ", "))
	}
	fmt.Fprintf(w, "    %-10s %-21s verification SQL Server at the remote site\n", devenv.VerifyInstance, site.Verify.Addr())
	for _, b := range devenv.BackupServers {
		fmt.Fprintf(w, "    %-10s %-21s backup server, SQL Server writes to %s\n", b, relPath(site.BackupDirs[b]), strings.Join(site.UNCPaths[b], " and "))
	}
	if v := site.Vault; v != nil {
		fmt.Fprintf(w, "    %-10s %-21s object store (S3, versitygw), bucket %s with Object Lock: Sales's immutable copies\n",
			devenv.ObjectStore, strings.TrimPrefix(v.Endpoint, "http://"), devenv.ObjectStoreBucket)
	}
	fmt.Fprintf(w, "  %s\n", site.BackupMode())
}

// cyclesURL is the Web UI's list of the demo database's cycles.
func cyclesURL(ui, namespace string) string {
	if ui == "" {
		return ""
	}
	q := fmt.Sprintf("%s = '%s'", workflows.AttrDatabase.GetName(), devenv.Database)
	return fmt.Sprintf("%s/namespaces/%s/workflows?query=%s", ui, url.PathEscape(namespace), url.QueryEscape(q))
}

// relPath shortens p relative to the working directory when it is inside it.
func relPath(p string) string {
	if r, err := filepath.Rel(".", p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	if abs, err := filepath.Abs("."); err == nil {
		if r, err := filepath.Rel(abs, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
	}
	return p
}
