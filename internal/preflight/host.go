package preflight

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/hostcheck"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// What an instance can host and which paths it can use (internal/hostcheck):
// a source must reach its backup servers where the worker does, a
// verification instance must hold the copies of the databases it verifies.
// Source facts (each database's allocated size, FILESTREAM, containment,
// QAT compression) say what a copy needs; they are read with the source's
// checks, and the verification instances are judged once all are read.

// hostState is what a verification instance said about itself.
type hostState struct {
	facts   hostcheck.Facts
	factErr error
	dirs    map[string]hostcheck.DirState // restore directory -> its state
	volumes []hostcheck.FileVolume
	volErr  error
}

// findingCheck turns a hostcheck finding into a report row.
func findingCheck(base Check, f hostcheck.Finding, name, why string) Check {
	c := base
	c.Name, c.For, c.Detail = name, why, f.Detail
	switch {
	case f.Problem:
		c.Status, c.Fix = Missing, f.Fix
	case f.Warn:
		c.Status, c.Fix = Warn, f.Fix
	default:
		c.Status = OK
	}
	return c
}

// hostRow is the instance's platform, edition and version, or why they
// could not be read.
func hostRow(inst string, f hostcheck.Facts, err error, why string) Check {
	c := Check{Kind: KindInstance, Instance: inst, Name: "host", For: why}
	if err != nil {
		c.Status, c.Detail = Warn, "could not read what the instance can host: "+err.Error()
		c.Fix = "run preflight again; the error names the cause"
		return c
	}
	platform := f.Platform
	if platform == "" {
		platform = "platform unknown (" + f.PlatformErr.Error() + ")"
	}
	c.Status, c.Detail = OK, fmt.Sprintf("%s, %s, major version %d", platform, f.Edition, f.Major)
	return c
}

// declaredPlatform compares a declared platform with the detected one.
func declaredPlatform(in *config.SQLInstance, f hostcheck.Facts) (Check, bool) {
	if in.Platform == "" || f.Platform == "" || strings.EqualFold(in.Platform, f.Platform) {
		return Check{}, false
	}
	return Check{Kind: KindInstance, Instance: in.Name, Name: "platform", Status: Missing, For: "the paths this instance may use",
		Detail: fmt.Sprintf("declared %s in the configuration, but SQL Server runs on %s", in.Platform, f.Platform),
		Fix:    fmt.Sprintf("set platform: %s for %s under sql_instances, or leave it out", strings.ToLower(f.Platform), in.Name)}, true
}

// sourceHostChecks are a source instance's paths to the backup servers its
// databases write to: usable on its platform, and the same directory as
// the worker's location (a probe file the worker writes must be seen by
// SQL Server: an unmounted mount point is not).
func sourceHostChecks(ctx context.Context, o Options, in *config.SQLInstance, dbs []*config.Database, q *mssql.DB, f hostcheck.Facts) []Check {
	var cs []Check
	seen := map[string]bool{}
	for _, d := range dbs {
		for _, name := range d.BackupServers {
			srv, ok := o.Config.BackupServer(name)
			if !ok || seen[name] {
				continue
			}
			seen[name] = true
			base := Check{Kind: KindInstance, Instance: in.Name}
			paths := hostcheck.Paths(in.Name, f, name, srv.PathsKey(in.Name), srv.PathsFor(in.Name))
			cs = append(cs, findingCheck(base, paths, paths.Check, "source: BACKUP writes to "+name))
			if paths.Problem {
				continue
			}
			cs = append(cs, probeCheck(ctx, o, in, srv, q))
		}
	}
	return cs
}

// probeCheck is hostcheck.Probe as a report row.
func probeCheck(ctx context.Context, o Options, in *config.SQLInstance, srv *config.BackupServer, q *mssql.DB) Check {
	paths := srv.PathsFor(in.Name)
	c := Check{Kind: KindInstance, Instance: in.Name, Name: "sees " + srv.Name,
		For: "source: SQL Server's paths and the worker's location are one directory (an unmounted mount point is not)"}
	err := runProbe(ctx, o, srv, paths, q)
	if errors.Is(err, errNotOpened) {
		c.Status, c.Detail = Warn, "not checked: the worker cannot open "+srv.Location+" (see backup server "+srv.Name+")"
		return c
	}
	key := srv.PathsKey(in.Name)
	switch {
	case errors.Is(err, hostcheck.ErrNotSeen):
		c.Status, c.Detail = Missing, err.Error()
		c.Fix = fmt.Sprintf("make %s of %s (%s) and location %s the same directory: mount the share where a path is a mount point on %s's host, or fix %s or location",
			key, srv.Name, strings.Join(paths, ", "), srv.Location, in.Name, key)
	case err != nil:
		c.Status, c.Detail = Warn, "not checked: "+err.Error()
		c.Fix = "make " + strings.Join(paths, ", ") + " reachable from " + in.Name + "'s host"
	default:
		c.Status, c.Detail = OK, fmt.Sprintf("SQL Server read through %s the probe the worker wrote in %s (removed)", strings.Join(paths, ", "), srv.Location)
	}
	return c
}

// readHostState reads what a verification instance can host, for the
// restore directories of the servers it verifies.
func readHostState(ctx context.Context, q *mssql.DB, servers []*config.BackupServer) *hostState {
	h := &hostState{dirs: map[string]hostcheck.DirState{}}
	h.facts, h.factErr = hostcheck.Read(ctx, q)
	if h.factErr != nil {
		return h
	}
	for _, srv := range servers {
		for _, dir := range []string{srv.RestoreDataDir, srv.RestoreLogDir} {
			if _, ok := h.dirs[dir]; !ok && dir != "" {
				h.dirs[dir] = hostcheck.ReadDir(ctx, q, h.facts, dir)
			}
		}
	}
	h.volumes, h.volErr = hostcheck.ReadVolumes(ctx, q)
	return h
}

// verifyHostChecks judge a verification instance against the copies it
// would host: per backup server it verifies, its paths and restore
// directories (existence, free space for the largest copy, with the copy
// its log proof keeps beside it; a warning when all copies at once would
// not fit), per database what it uses (edition
// limit, FILESTREAM, containment, QAT compression), and tempdb.
func verifyHostChecks(inst string, h *hostState, servers []*config.BackupServer, verified map[string][]*config.Database,
	needs map[*config.Database]hostcheck.Need) []Check {
	base := Check{Kind: KindInstance, Instance: inst}
	if h.factErr != nil {
		return []Check{hostRow(inst, h.facts, h.factErr, "verification: what the instance can host")}
	}
	cs := []Check{hostRow(inst, h.facts, nil, "verification: what the instance can host")}
	var largest int64
	largestName := ""
	for _, srv := range servers {
		why := "verification: RESTORE of the copies on " + srv.Name
		p := hostcheck.Paths(inst, h.facts, srv.Name, srv.PathsKey(inst), srv.PathsFor(inst))
		cs = append(cs, findingCheck(base, p, p.Check, why))
		for _, k := range []struct{ key, dir string }{{"restore_data_dir", srv.RestoreDataDir}, {"restore_log_dir", srv.RestoreLogDir}} {
			d := hostcheck.Directory(inst, k.key, k.dir, h.dirs[k.dir])
			cs = append(cs, findingCheck(base, d, k.key+" of "+srv.Name, why))
		}
		var one, all [2]int64 // data, log: the largest copy, and every copy at once
		var oneName string
		for _, db := range verified[srv.Name] {
			n, ok := needs[db]
			if !ok {
				continue
			}
			// A log proof's copy beside the cycle's (plan.ProofSpaceOf):
			// the standby copy stays, wherever the cycle's copy of the
			// rotation lands.
			ps := plan.ProofSpaceOf(db.ProofMode(), db.KeepVerifyDB, n.DataBytes, n.LogBytes)
			data, log := int64(ps.Copies)*n.DataBytes, int64(ps.Copies)*n.LogBytes
			if ps.Mode != "" {
				cs = append(cs, Check{Kind: KindInstance, Instance: inst, Name: "log proof space for " + db.ID(), For: why,
					Status: OK, Detail: ps.String()})
			}
			if data+log > one[0]+one[1] {
				one, oneName = [2]int64{data, log}, db.ID()
				if ps.Copies > 1 {
					oneName = fmt.Sprintf("%d copies of %s (log_proof %s)", ps.Copies, db.ID(), ps.Mode)
				}
			}
			all[0], all[1] = all[0]+data, all[1]+log
			if n.DataBytes > largest {
				largest, largestName = n.DataBytes, db.ID()
			}
		}
		if oneName == "" {
			continue
		}
		if h.volErr != nil {
			cs = append(cs, Check{Kind: KindInstance, Instance: inst, Name: "free space of " + srv.Name + "'s restore directories", For: why,
				Status: Warn, Detail: "not checked: " + h.volErr.Error(),
				Fix: "grant the permission the error names (sys.dm_os_volume_stats needs VIEW SERVER STATE, on 2022 VIEW SERVER PERFORMANCE STATE)"})
			continue
		}
		dirs := func(n [2]int64, what string) []hostcheck.DirNeed {
			return []hostcheck.DirNeed{{Key: "restore_data_dir", Dir: srv.RestoreDataDir, Bytes: n[0], What: "data files of " + what},
				{Key: "restore_log_dir", Dir: srv.RestoreLogDir, Bytes: n[1], What: "log of " + what}}
		}
		for _, f := range hostcheck.Space(inst, dirs(one, oneName), h.volumes, "") {
			c := findingCheck(base, f, f.Check+" of "+srv.Name, why)
			if !f.Problem && len(verified[srv.Name]) > 1 {
				// One copy fits; all of them at once (a fleet's concurrent
				// restores, copies kept with keep_verify_db) may not.
				for _, a := range hostcheck.Space(inst, dirs(all, fmt.Sprintf("all %d databases", len(verified[srv.Name]))), h.volumes, "") {
					if a.Check == f.Check && a.Problem {
						c.Status, c.Detail = Warn, "one copy at a time fits, not all at once: "+a.Detail
						c.Fix = "keep fleet.max_concurrent and keep_verify_db within the space, or " + a.Fix
					}
				}
			}
			cs = append(cs, c)
		}
	}
	for _, srv := range servers {
		for _, db := range verified[srv.Name] {
			n, ok := needs[db]
			if !ok {
				continue
			}
			for _, f := range hostcheck.Features(inst, h.facts, n) {
				if f.Problem || f.Warn {
					cs = append(cs, findingCheck(base, f, f.Check+" for "+db.ID(), "verification: RESTORE of "+db.ID()))
				}
			}
		}
	}
	if largestName != "" && h.volErr == nil {
		if t := hostcheck.Tempdb(inst, h.volumes, largest, largestName); t.Warn {
			cs = append(cs, findingCheck(base, t, "tempdb", "verification: DBCC CHECKDB of the copies"))
		}
	}
	return cs
}

// readNeed is what a copy of db will need of the instance verifying it, as
// its source tells: the allocated size of its data and log files
// (sys.master_files), FILESTREAM, containment, and QAT compression (the
// source compresses its backups with QAT_DEFLATE when its backup
// compression algorithm is 2 and the accelerator is loaded).
func readNeed(ctx context.Context, q querier, db *config.Database, src hostcheck.Facts, srcCompresses bool) (hostcheck.Need, bool, error) {
	n := hostcheck.Need{Database: db.ID()}
	query, args, err := tsql.DatabaseFiles(db.Name)
	if err != nil {
		return n, false, err
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return n, false, fmt.Errorf("files of %s: %w", db.Name, err)
	}
	files := 0
	for rows.Next() {
		var typ, pages sql.NullInt64
		if err := rows.Scan(&typ, &pages); err != nil {
			rows.Close()
			return n, false, fmt.Errorf("files of %s: %w", db.Name, err)
		}
		files++
		switch typ.Int64 {
		case tsql.FileTypeLog:
			n.LogBytes += pages.Int64 * tsql.PageBytes
		case tsql.FileTypeFilestream:
			n.Filestream = true
		default:
			n.DataBytes += pages.Int64 * tsql.PageBytes
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return n, false, fmt.Errorf("files of %s: %w", db.Name, err)
	}
	rows.Close()
	if files == 0 {
		return n, false, nil // not visible to the login: the size row says so
	}
	query, args, err = tsql.DatabaseContainment(db.Name)
	if err != nil {
		return n, false, err
	}
	var containment sql.NullInt64
	if err := queryRow(ctx, q, "containment of "+db.Name, query, args, &containment); err == nil {
		n.Contained = containment.Int64 != 0
	}
	n.QAT = db.Compression && srcCompresses && src.Major >= 16 && src.Options[tsql.OptionBackupCompressionAlg] == 2 &&
		(src.QAT == "HARDWARE" || src.QAT == "SOFTWARE")
	return n, true, nil
}

// errNotOpened: runProbe could not open the server's location.
var errNotOpened = errors.New("the worker cannot open the location")

// runProbe is hostcheck.Probe of srv through the worker's location and q's
// paths (RESTORE HEADERONLY).
func runProbe(ctx context.Context, o Options, srv *config.BackupServer, paths []string, q *mssql.DB) error {
	st, err := o.OpenStorage(ctx, srv)
	if err != nil {
		return fmt.Errorf("%w %s: %w", errNotOpened, srv.Location, err)
	}
	defer st.Close()
	return hostcheck.Probe(ctx, st, paths, func(ctx context.Context, path string) error {
		stmt, err := tsql.RestoreHeaderOnly([]string{path})
		if err != nil {
			return err
		}
		_, err = q.HeaderOnly(ctx, stmt)
		return err
	})
}
