package preflight

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/hostcheck"
	"github.com/backupcycle/backupcycle/internal/mssql"
)

// A drill from the immutable copy (drill.from: immutable) stages the set's
// objects on a backup server (drill.staging, config.StagingServer) and
// the drill instance restores them from there: the worker must write in
// that server's location, and the drill instance read the same directory
// through its path. The probe is the one a source's paths get
// (hostcheck.Probe), run on the drill instance.

// stagingChecks are the drill instance in's checks of the staging servers
// of the databases in scope that drill there from their immutable copy.
func stagingChecks(ctx context.Context, o Options, s scope, in *config.SQLInstance, q *mssql.DB, f hostcheck.Facts) []Check {
	var cs []Check
	seen := map[string]bool{}
	for _, db := range s.dbs {
		if !db.Drills() || db.Drill.From != config.DrillFromImmutable || o.Config.DrillInstance(db) != in.Name {
			continue
		}
		srv, ok := o.Config.BackupServer(db.StagingServer())
		if !ok || srv.IsObjectStore() || seen[srv.Name] {
			continue // the configuration's checks name it
		}
		seen[srv.Name] = true
		why := fmt.Sprintf("drill of %s from the immutable copy: RESTORE of the files staged on %s", db.ID(), srv.Name)
		paths := hostcheck.Paths(in.Name, f, srv.Name, srv.PathsKey(in.Name), srv.PathsFor(in.Name))
		if paths.Problem {
			cs = append(cs, findingCheck(Check{Kind: KindInstance, Instance: in.Name}, paths, "drill staging paths to "+srv.Name, why))
			continue
		}
		cs = append(cs, stagingProbe(ctx, o, in, srv, q, why))
	}
	return cs
}

// stagingProbe: the worker writes a probe in the staging server's location
// and the drill instance reads it through its path.
func stagingProbe(ctx context.Context, o Options, in *config.SQLInstance, srv *config.BackupServer, q *mssql.DB, why string) Check {
	paths := srv.PathsFor(in.Name)
	c := Check{Kind: KindInstance, Instance: in.Name, Name: "reads drill staging on " + srv.Name, For: why}
	other := "or set drill.staging to a backup server the worker writes and " + in.Name + " reads"
	err := runProbe(ctx, o, srv, paths, q)
	switch {
	case err == nil:
		c.Status, c.Detail = OK, fmt.Sprintf("the worker wrote a probe in %s and %s read it through %s (removed)", srv.Location, in.Name,
			strings.Join(paths, ", "))
	case errors.Is(err, errNotOpened), errors.Is(err, hostcheck.ErrNotWritten):
		c.Status, c.Detail = Missing, fmt.Sprintf("the worker cannot write in %s of staging server %s: %v", srv.Location, srv.Name, err)
		c.Fix = storageFix(srv, err) + " (staging server " + srv.Name + "), " + other
	case errors.Is(err, hostcheck.ErrNotSeen):
		c.Status, c.Detail = Missing, err.Error()
		c.Fix = fmt.Sprintf("make %s of %s (%s) reach the directory of location %s from %s's host (the share mounted, %s's service account "+
			"allowed to read it), %s", srv.PathsKey(in.Name), srv.Name, strings.Join(paths, ", "), srv.Location, in.Name, in.Name, other)
	default:
		c.Status, c.Detail = Missing, fmt.Sprintf("%s could not read the probe on staging server %s: %v", in.Name, srv.Name, err)
		c.Fix = fmt.Sprintf("make %s reachable and readable from %s's host, %s", strings.Join(paths, ", "), in.Name, other)
	}
	return c
}
