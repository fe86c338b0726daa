// Package preflight checks, before the first night, that the configured
// credentials hold every permission the backup cycle needs: on each source
// instance and database (BACKUP DATABASE, CREATE DATABASE for RESTORE
// HEADERONLY, VIEW SERVER STATE, the sequence table), on each verification
// instance (RESTORE, REPLACE/DROP of the copy, the restore history, DBCC
// CHECKDB and the sanity queries) and on each backup server's storage
// (list, write, read back, delete, free space against the planned sets).
// Each missing permission comes with the GRANT or ALTER ROLE that fixes it.
// It also checks what the instances can do (host.go, internal/hostcheck):
// the paths each uses to the backup servers (no UNC paths on Linux; SQL
// Server sees a probe file the worker wrote), and whether each
// verification instance can host the copies of the databases it verifies
// (edition limit, FILESTREAM, containment, QAT, restore directories and
// their free space, tempdb), each problem with its fix. And it warns where
// a credential can do more than the product needs (privilege.go): a SQL
// login's server roles and permissions, an SMB user that is an
// administrator or owns its directory, an S3 key that may delete the
// bucket or change its lock or policy (objectstore.go).
//
// `starter preflight` prints the report; the worker runs the same checks at
// start-up and logs what is missing as warnings.
package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/hostcheck"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/selection"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/location"
)

// Options say what to check and how to connect.
type Options struct {
	// Config is the loaded configuration (required).
	Config *config.Config
	// Database limits the checks to the databases of that name (and their
	// instances and backup servers); "" checks everything configured.
	Database string
	// Instance narrows Database to one source instance.
	Instance string
	// CompressionFactor is the uncompressed / compressed size the plan
	// assumes for compression: true; 0 or less means 1 (no reduction).
	CompressionFactor float64
	// OpenSQL connects to an instance (initial database master, as the
	// cycle does). Default: mssql.Open with the configured credentials.
	OpenSQL func(ctx context.Context, inst *config.SQLInstance) (*mssql.DB, error)
	// OpenStorage opens a backup server's location as the worker reaches
	// it. Default: location.Open with the configured SMB credentials.
	OpenStorage func(ctx context.Context, srv *config.BackupServer) (storage.Storage, error)
	// QueryTimeout bounds the questions asked of one instance after it
	// connected; default 1 min.
	QueryTimeout time.Duration
	// Startup is the worker's own run, at each start and reload: an object
	// store is only opened (one HEAD of its bucket, its reachability).
	// Its immutability probe, which leaves a locked object each time, and
	// its privilege checks are `starter preflight`'s and the probe's
	// before a copy (once a day), never a restart's.
	Startup bool
}

// scope is what a run checks.
type scope struct {
	dbs       []*config.Database
	instances []*config.SQLInstance         // in config order
	sources   map[string][]*config.Database // instance -> its databases in scope
	verifies  map[string][]string           // instance -> backup servers it verifies copies of
	drills    map[string]bool               // instances drills recover databases on
	servers   []*config.BackupServer        // in config order
	stores    map[string][]*config.Database // backup server -> databases whose sets it may hold
}

func resolve(o Options) (scope, error) {
	cfg := o.Config
	s := scope{sources: map[string][]*config.Database{}, verifies: map[string][]string{}, stores: map[string][]*config.Database{},
		drills: map[string]bool{}}
	for i := range cfg.Databases {
		db := &cfg.Databases[i]
		// --instance names the instance, or a replica of the database's
		// availability group.
		if (o.Database == "" || db.Name == o.Database) && (o.Instance == "" || db.Instance == o.Instance || slices.Contains(cfg.Sources(db.Instance), o.Instance)) {
			s.dbs = append(s.dbs, db)
		}
	}
	if len(s.dbs) == 0 && o.Database != "" {
		if _, err := selection.Lookup(cfg, o.Instance, o.Database); err != nil {
			return s, err
		}
		return s, fmt.Errorf("database %q is not configured on instance %q in %s", o.Database, o.Instance, cfg.File)
	}
	usedServers, usedInstances := map[string]bool{}, map[string]bool{}
	for _, db := range s.dbs {
		if db.ImmutableCopy != "" {
			usedServers[db.ImmutableCopy] = true
		}
		// A database of an availability group is checked on every
		// replica: a fail-over moves its backup there.
		for _, src := range cfg.Sources(db.Instance) {
			s.sources[src] = append(s.sources[src], db)
			usedInstances[src] = true
		}
		// A drill restores the sets there: it needs what a verification
		// instance needs to read them (its certificates are compared).
		if in := cfg.DrillInstance(db); db.Drills() && in != "" {
			s.drills[in], usedInstances[in] = true, true
		}
		for _, b := range db.BackupServers {
			holders := []string{b}
			if t := db.CopyTarget(b); t != "" && t != b {
				holders = append(holders, t)
				if srv, ok := cfg.BackupServer(t); ok && srv.VerifyInstance != "" {
					if !slices.Contains(s.verifies[srv.VerifyInstance], t) {
						s.verifies[srv.VerifyInstance] = append(s.verifies[srv.VerifyInstance], t)
					}
					usedInstances[srv.VerifyInstance] = true
				}
			}
			for _, h := range holders {
				usedServers[h] = true
				if !slices.Contains(s.stores[h], db) {
					s.stores[h] = append(s.stores[h], db)
				}
			}
		}
	}
	order := map[string]int{}
	for i, b := range cfg.BackupServers {
		order[b.Name] = i
	}
	for _, servers := range s.verifies {
		slices.SortFunc(servers, func(a, b string) int { return order[a] - order[b] })
	}
	// Without --database every configured instance and server is checked:
	// one nobody uses yet still proves its credentials.
	all := o.Database == "" && o.Instance == ""
	for i := range cfg.SQLInstances {
		if in := &cfg.SQLInstances[i]; all || usedInstances[in.Name] {
			s.instances = append(s.instances, in)
		}
	}
	for i := range cfg.BackupServers {
		if b := &cfg.BackupServers[i]; all || usedServers[b.Name] {
			s.servers = append(s.servers, b)
		}
	}
	return s, nil
}

// Run checks everything in scope and returns the report. It fails only
// when the scope itself is wrong (an unknown database); everything that
// cannot be reached or is not permitted is a check in the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Config == nil {
		return nil, fmt.Errorf("preflight: no configuration given")
	}
	s, err := resolve(o)
	if err != nil {
		return nil, err
	}
	if o.OpenSQL == nil {
		o.OpenSQL = openSQL
	}
	if o.OpenStorage == nil {
		o.OpenStorage = location.OpenServer
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = time.Minute
	}
	r := &Report{Config: o.Config.File, headers: map[string]string{}}
	if cs := configChecks(o.Config); len(cs) > 0 {
		r.headers[sectionKey(cs[0])] = "configuration " + o.Config.File
		r.add(cs...)
	}
	sizes := map[*config.Database]dbSize{}
	e := newEstate()
	needs := map[*config.Database]hostcheck.Need{}
	hosts := map[string]*hostState{}
	for _, in := range s.instances {
		checkInstance(ctx, o, s, in, r, sizes, e, needs, hosts)
	}
	// A verification instance is judged once every source told what its
	// copies need (host.go).
	for _, in := range s.instances {
		if h := hosts[in.Name]; h != nil {
			servers, verified := verifiedOn(o.Config, s, in.Name)
			r.add(verifyHostChecks(in.Name, h, servers, verified, needs)...)
		}
	}
	r.addToSections(readabilityChecks(o.Config, s.dbs, e)...)
	for _, srv := range s.servers {
		key := sectionKey(Check{Kind: KindServer, Server: srv.Name})
		if srv.IsObjectStore() {
			where := srv.S3.Endpoint
			if where == "" {
				where = "AWS S3 " + srv.S3.Region
			}
			r.headers[key] = "object store " + srv.Name + " (bucket " + srv.S3.Bucket + " at " + where + ")"
			r.add(objectStoreChecks(ctx, srv, !o.Startup)...)
			continue
		}
		r.headers[key] = "backup server " + srv.Name + " (" + srv.Loc.String() + ")"
		r.add(probeStorage(ctx, srv, o.OpenStorage, needOf(o, s.stores[srv.Name], sizes))...)
	}
	redact(r, o.Config)
	r.finish()
	return r, nil
}

// verifiedOn are the backup servers whose copies instance verifies, and
// per server the databases in scope whose copies go there.
func verifiedOn(cfg *config.Config, s scope, instance string) ([]*config.BackupServer, map[string][]*config.Database) {
	var servers []*config.BackupServer
	for _, name := range s.verifies[instance] {
		if srv, ok := cfg.BackupServer(name); ok {
			servers = append(servers, srv)
		}
	}
	verified := map[string][]*config.Database{}
	for _, db := range s.dbs {
		for _, b := range db.BackupServers {
			t := db.CopyTarget(b)
			if srv, ok := cfg.BackupServer(t); ok && t != b && srv.VerifyInstance == instance && !slices.Contains(verified[t], db) {
				verified[t] = append(verified[t], db)
			}
		}
	}
	return servers, verified
}

// checkInstance connects to one instance and checks its roles and
// databases; what a verification instance can host is read here and
// judged later (verifyHostChecks), and so is what it can restore
// (readabilityChecks, from the estate e).
func checkInstance(ctx context.Context, o Options, s scope, in *config.SQLInstance, r *Report, sizes map[*config.Database]dbSize,
	e *estate, needs map[*config.Database]hostcheck.Need, hosts map[string]*hostState) {
	dbs, servers := s.sources[in.Name], s.verifies[in.Name]
	var roles []string
	if len(dbs) > 0 {
		names := make([]string, len(dbs))
		for i, db := range dbs {
			names[i] = db.Name
		}
		roles = append(roles, "source of "+strings.Join(names, ", "))
	}
	if len(servers) > 0 {
		roles = append(roles, "verifies the copies on "+strings.Join(servers, ", "))
	}
	if len(roles) == 0 {
		roles = append(roles, "no configured database uses it")
	}
	key := sectionKey(Check{Kind: KindInstance, Instance: in.Name})
	r.headers[key] = "SQL instance " + in.Name + " (" + in.Address + "): " + strings.Join(roles, "; ")
	login := Check{Kind: KindInstance, Instance: in.Name, Name: "login", For: "every step on this instance"}

	db, err := o.OpenSQL(ctx, in)
	if err != nil {
		login.Status, login.Detail = Missing, err.Error()
		login.Fix = fmt.Sprintf("check address, user %q and %s of sql_instances %s (the login must exist, be enabled and may connect to master)",
			in.User, in.Password, in.Name)
		if len(dbs) > 0 || len(servers) > 0 {
			login.Detail += "; the checks of this instance did not run"
		}
		r.add(login)
		return
	}
	defer db.Close()
	qctx, cancel := context.WithTimeout(ctx, o.QueryTimeout)
	defer cancel()
	sf, err := readServerFacts(qctx, db)
	if err != nil {
		login.Status, login.Detail = Missing, "connected, but could not read the login's permissions: "+err.Error()
		login.Fix = "run preflight again; if it persists, check that " + in.Name + " is SQL Server 2016 or later"
		r.add(login)
		return
	}
	login.Status, login.Detail = OK, "connected as "+sf.Login+" to "+sf.product()
	r.add(login)
	r.add(privilegeChecks(in.Name, sf)...)
	e.noteInstance(qctx, db, in.Name, sf, len(servers) > 0 || s.drills[in.Name])
	hf, herr := hostcheck.Read(qctx, db)
	if herr == nil {
		if c, ok := declaredPlatform(in, hf); ok {
			r.add(c)
		}
	}
	if s.drills[in.Name] && herr == nil {
		r.add(stagingChecks(qctx, o, s, in, db, hf)...)
	}
	if len(servers) > 0 {
		var srvs []*config.BackupServer
		for _, name := range servers {
			if srv, ok := o.Config.BackupServer(name); ok {
				srvs = append(srvs, srv)
			}
		}
		hosts[in.Name] = readHostState(qctx, db, srvs)
	}
	if len(dbs) > 0 {
		r.add(sourceInstanceChecks(in.Name, sf)...)
		if herr != nil {
			r.add(hostRow(in.Name, hf, herr, "source: the paths it writes to"))
		} else {
			r.add(sourceHostChecks(qctx, o, in, dbs, db, hf)...)
		}
		if slices.ContainsFunc(dbs, func(d *config.Database) bool { return d.Sequence == config.SequenceCatalog }) {
			mf, err := readMSDBFacts(qctx, db)
			c := backupHistoryCheck(in.Name, sf, mf)
			if err != nil && c.Status != OK {
				c.Detail = "could not ask: " + err.Error()
			}
			r.add(c)
		}
	}
	if len(servers) > 0 {
		mf, err := readMSDBFacts(qctx, db)
		cs := verifyInstanceChecks(in.Name, sf, mf)
		for i := range cs {
			if err != nil && strings.HasPrefix(cs[i].Name, "SELECT msdb.") && cs[i].Status != OK {
				cs[i].Detail = "could not ask: " + err.Error()
			}
		}
		r.add(cs...)
		steps, readable, err := readJobSteps(qctx, db)
		c := maintenanceJobsCheck(in.Name, sf.Login, copyPatterns(s, in.Name), steps, readable)
		if err != nil {
			c.Detail = "could not ask: " + err.Error() + "; " + c.Detail
		}
		r.add(c)
	}
	for _, d := range dbs {
		f, err := readDatabaseFacts(qctx, db, d)
		if err != nil {
			r.add(Check{Kind: KindDatabase, Instance: d.Instance, Database: d.Name, Name: "permissions", Status: Missing,
				Detail: "could not read: " + err.Error(), Fix: "run preflight again; the error names the cause"})
			continue
		}
		if f.State == "ONLINE" {
			e.noteDatabase(qctx, db, d)
		}
		if f.State != "" && f.SizeBytes >= 0 {
			// Express and Web write uncompressed sets, whatever the plan assumes.
			sizes[d] = dbSize{bytes: f.SizeBytes, uncompressed: compressionRefused(sf)}
		}
		if f.State == "ONLINE" && herr == nil {
			if n, ok, err := readNeed(qctx, db, d, hf, !compressionRefused(sf)); err == nil && ok {
				needs[d] = n
			}
		}
		g, inGroup := o.Config.AvailabilityGroup(d.Instance)
		shown := d
		if inGroup {
			// Its checks on this replica are this replica's.
			c := *d
			c.Instance = in.Name
			shown = &c
		}
		r.add(databaseChecks(shown, sf, f)...)
		if c, ok := databasePrivilegeCheck(shown, sf, f); ok {
			r.add(c)
		}
		if inGroup && f.State == "ONLINE" {
			r.add(availabilityChecks(qctx, db, in.Name, d, g, sf)...)
		}
	}
}

// dbSize is a database's size as its source instance reported it.
type dbSize struct {
	bytes        int64 // data + log
	uncompressed bool  // the edition has no backup compression
}

// needOf is what the databases' sets take on a server.
func needOf(o Options, dbs []*config.Database, sizes map[*config.Database]dbSize) need {
	var n need
	for _, db := range dbs {
		n.Databases = append(n.Databases, db.ID())
		size, ok := sizes[db]
		if !ok {
			n.Unknown = append(n.Unknown, db.ID())
			continue
		}
		n.Worst += size.bytes
		cf := 1.0
		if db.Compression && o.CompressionFactor > 1 && !size.uncompressed {
			cf = o.CompressionFactor
		}
		n.Planned += int64(float64(size.bytes) / cf)
	}
	return n
}

// openSQL connects with the configured credentials, to master as the cycle
// does.
func openSQL(ctx context.Context, inst *config.SQLInstance) (*mssql.DB, error) {
	return mssql.OpenInstance(ctx, inst, "master", "backupcycle preflight")
}

// redact removes every configured secret from what the report says: the
// errors it quotes come from drivers, and a secret must never be printed.
func redact(r *Report, cfg *config.Config) {
	var secrets []string
	add := func(ref config.SecretRef) {
		if ref.IsZero() {
			return
		}
		if v, err := config.ResolveSecret(ref); err == nil && v != "" {
			secrets = append(secrets, v)
		}
	}
	for _, in := range cfg.SQLInstances {
		add(in.Password)
	}
	for _, b := range cfg.BackupServers {
		if b.SMB != nil {
			add(b.SMB.Password)
		}
		if b.IsObjectStore() {
			if v, err := b.SecretAccessKey(); err == nil && v != "" {
				secrets = append(secrets, v)
			}
		}
	}
	for _, k := range cfg.ManifestKeys {
		if v, err := k.Resolve(); err == nil && v != "" {
			secrets = append(secrets, v)
		}
	}
	if len(secrets) == 0 {
		return
	}
	for i := range r.Checks {
		c := &r.Checks[i]
		for _, s := range secrets {
			c.Detail = strings.ReplaceAll(c.Detail, s, "***")
			c.Fix = strings.ReplaceAll(c.Fix, s, "***")
		}
	}
}

// copyPatterns are the names of the copies restored on instance inst, as
// LIKE patterns (config.Database.VerifyPattern), one per distinct pattern.
func copyPatterns(s scope, inst string) []string {
	var out []string
	for _, db := range s.dbs {
		for _, b := range db.BackupServers {
			t := db.CopyTarget(b)
			if t == "" {
				continue
			}
			if srv, ok := findServer(s, t); ok && srv.VerifyInstance == inst && !slices.Contains(out, db.VerifyPattern()) {
				out = append(out, db.VerifyPattern())
			}
		}
	}
	return out
}

func findServer(s scope, name string) (*config.BackupServer, bool) {
	for _, b := range s.servers {
		if b.Name == name {
			return b, true
		}
	}
	return nil, false
}
