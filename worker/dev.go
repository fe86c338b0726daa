package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/workflows"
)

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
