package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Drill is `drill:`: a scheduled recovery drill of the database. Each drill
// recovers it (the Recover workflow) under a scratch name on an instance,
// runs its sanity checks (and CHECKDB when asked) on the copy, drops the
// copy and records what it restored and the measured time to recover
// beside the manifests. Every 0: no drills.
type Drill struct {
	Every time.Duration `yaml:"every"`
	// Instance is where the drill recovers the database; "" the
	// verification instance of its copy target (DrillInstance).
	Instance string `yaml:"instance"`
	// Point is DrillPointLatest (the default); Within instead picks a
	// random instant of the last Within of the proven window (log backups
	// needed).
	Point  string        `yaml:"point"`
	Within time.Duration `yaml:"within"`
	// CheckDB also runs DBCC CHECKDB on the recovered copy.
	CheckDB bool `yaml:"checkdb"`
	// From is DrillFromAny (every backup server of the database),
	// DrillFromRemote (only its copy targets: as if the primary site were
	// gone) or DrillFromImmutable (its immutable_copy alone, staged on
	// Staging first).
	From string `yaml:"from"`
	// Staging is the backup server a drill from the immutable copy stages
	// the files on (under StagingDir) for the drill instance to restore;
	// "" the copy target of the first backup server, else the first
	// (StagingServer).
	Staging string `yaml:"staging"`
	// MaxAge: a last drill older than this shows the database red; 0:
	// twice Every.
	MaxAge time.Duration `yaml:"max_age"`
	// Name is the scratch copy's name; {db} and {instance} are replaced.
	Name string `yaml:"name"`
}

// Drill values and defaults.
const (
	DrillPointLatest = "latest"
	DrillFromAny     = "any"
	DrillFromRemote  = "remote"
	// DrillFromImmutable restores from the immutable copy on the object
	// store: as if ransomware had taken every backup server.
	DrillFromImmutable = "immutable"
	// StagingDir is the directory of a backup server a drill from the
	// immutable copy stages its files under (StagingDir/<inst>@<db>/):
	// listings of the sets never recurse into it.
	StagingDir       = "staging"
	DefaultDrillName = "{db}_drill"
	// MinDrillEvery: each drill restores the whole database.
	MinDrillEvery = time.Hour
)

// Drills reports whether the database is drilled.
func (p *Policy) Drills() bool { return p.Drill.Every > 0 }

// DrillMaxAge is drill.max_age, or twice drill.every.
func (p *Policy) DrillMaxAge() time.Duration {
	if p.Drill.MaxAge > 0 {
		return p.Drill.MaxAge
	}
	return 2 * p.Drill.Every
}

// DrillDatabaseName is the name of db's drill copy: drill.name (default
// DefaultDrillName) with {db} and {instance} replaced.
func (db *Database) DrillDatabaseName() string {
	n := db.Drill.Name
	if n == "" {
		n = DefaultDrillName
	}
	return strings.NewReplacer("{db}", db.Name, "{instance}", db.Instance).Replace(n)
}

// StagingServer is where a drill of db from its immutable copy stages
// the files: drill.staging, else the copy target of its first backup
// server (the remote site's, which the drill instance reads), else its
// first backup server.
func (db *Database) StagingServer() string {
	if db.Drill.Staging != "" {
		return db.Drill.Staging
	}
	if len(db.BackupServers) == 0 {
		return ""
	}
	if t := db.CopyTarget(db.BackupServers[0]); t != "" {
		return t
	}
	return db.BackupServers[0]
}

// DrillInstance is where db's drills recover it: drill.instance, else the
// verification instance of the copy target of its first backup server.
func (c *Config) DrillInstance(db *Database) string {
	if db.Drill.Instance != "" {
		return db.Drill.Instance
	}
	if len(db.BackupServers) == 0 {
		return ""
	}
	if s, ok := c.BackupServer(db.CopyTarget(db.BackupServers[0])); ok {
		return s.VerifyInstance
	}
	return ""
}

// checkDrills checks the drill keys of defaults and of every database,
// and that no two databases' drill copies share a name on one instance.
func (d *decoder) checkDrills(c *Config) {
	sources := map[string]bool{}
	for _, db := range c.Databases {
		sources[db.Instance] = true
	}
	for _, in := range c.SQLInstances {
		if len(in.Databases) > 0 {
			sources[in.Name] = true
		}
	}
	d.checkDrill(c, &c.Defaults, "defaults", "defaults", sources)
	names := map[string]string{}
	for i := range c.Databases {
		db := &c.Databases[i]
		path := fmt.Sprintf("databases[%d]", i)
		owner := labelled(path, db.Name)
		if d.given(join(path, "drill")) {
			d.checkDrill(c, &db.Policy, path, owner, sources)
		}
		if !db.Drills() || db.Name == "" {
			continue
		}
		d.checkStaging(c, db, path, owner)
		inst, name := c.DrillInstance(db), db.DrillDatabaseName()
		l, kp := d.drillKey(path, "name")
		switch {
		case strings.EqualFold(name, db.Name):
			d.errf(l, kp, "%s: drill.name %q names the drill copy like the database itself: use e.g. %q", owner, db.Drill.Name, DefaultDrillName)
		case strings.EqualFold(name, db.VerifyDatabaseName(0)) || db.LogBackups() && strings.EqualFold(name, db.StandbyDatabaseName()):
			d.errf(l, kp, "%s: the drill copy %q is named like the cycle's or the standby copy: set drill.name, e.g. %q", owner, name, DefaultDrillName)
		}
		k := inst + "\x00" + strings.ToLower(name)
		if other, dup := names[k]; dup && other != owner {
			d.errf(l, kp, "%s: its drill copy %q on %s would collide with %s's: set drill.name (e.g. \"{instance}_{db}_drill\")", owner, name, inst, other)
		}
		names[k] = owner
	}
}

// checkDrill checks one policy's drill keys; errors go to the key that is
// wrong.
func (d *decoder) checkDrill(c *Config, p *Policy, path, owner string, sources map[string]bool) {
	dr := p.Drill
	at := func(k string) (int, string) {
		kp := join(path, "drill."+k)
		if !d.given(kp) {
			kp = join(path, "drill")
		}
		return d.line(kp), kp
	}
	given := d.given(join(path, "drill"))
	switch {
	case dr.Every < 0 || dr.Every > 0 && dr.Every < MinDrillEvery:
		l, kp := at("every")
		d.errf(l, kp, "%s: drill.every %s is below %s: each drill restores the whole database; use e.g. 24h", owner, dr.Every, MinDrillEvery)
	case dr.Every == 0 && given && path != "defaults" || dr.Every == 0 && given && path == "defaults" && dr != (Drill{}):
		l, kp := at("every")
		d.errf(l, kp, "%s: drill needs every (how often a drill runs, e.g. 24h), or remove drill", owner)
	}
	switch dr.Point {
	case "", DrillPointLatest:
	default:
		l, kp := at("point")
		d.errf(l, kp, "%s: drill.point %q: use latest, or within: 6h for a random point of the last 6 hours of the proven window", owner, dr.Point)
	}
	switch {
	case dr.Within < 0:
		l, kp := at("within")
		d.errf(l, kp, "%s: drill.within must be positive, e.g. 6h", owner)
	case dr.Within > 0 && dr.Point != "":
		l, kp := at("within")
		d.errf(l, kp, "%s: drill.point and drill.within both given: give one (point: latest, or within: 6h)", owner)
	case dr.Within > 0 && !p.LogBackups() && (path == "defaults" || d.given(join(path, "drill.within"))):
		l, kp := at("within")
		d.errf(l, kp, "%s: drill.within picks a point in time, which needs log backups: set log_backup: {every: 1m}, or use point: latest", owner)
	}
	switch dr.From {
	case "", DrillFromAny, DrillFromRemote, DrillFromImmutable:
	default:
		l, kp := at("from")
		d.errf(l, kp, "%s: drill.from %q: use any (every backup server of the database), remote (only its copy targets, as if the primary site were gone) "+
			"or immutable (its immutable_copy alone, staged on a backup server)", owner, dr.From)
	}
	switch {
	case dr.MaxAge < 0:
		l, kp := at("max_age")
		d.errf(l, kp, "%s: drill.max_age must be positive, e.g. 48h, or leave it out (twice every)", owner)
	case dr.MaxAge > 0 && dr.MaxAge < dr.Every:
		l, kp := at("max_age")
		d.errf(l, kp, "%s: drill.max_age %s is shorter than drill.every %s: the database would be red between two drills; raise it", owner, dr.MaxAge, dr.Every)
	}
	if dr.Instance != "" {
		l, kp := at("instance")
		switch in, ok := c.SQLInstance(dr.Instance); {
		case !ok:
			d.errf(l, kp, "%s: drill.instance %q is not defined in sql_instances", owner, dr.Instance)
		case sources[in.Name]:
			d.errf(l, kp, "%s: drill.instance %s is a source instance: a drill restores and drops a scratch copy, which belongs on the verification instance or another recovery instance", owner, dr.Instance)
		}
	}
	if dr.Name != "" {
		l, kp := at("name")
		rest := strings.NewReplacer("{db}", "", "{instance}", "").Replace(dr.Name)
		switch {
		case strings.ContainsAny(rest, "{}"):
			d.errf(l, kp, "%s: drill.name %q: only {db} and {instance} are replaced", owner, dr.Name)
		case strings.ContainsRune(rest, 0):
			d.errf(l, kp, "%s: drill.name contains a NUL byte", owner)
		case strings.TrimSpace(rest) == "":
			d.errf(l, kp, "%s: drill.name %q has no fixed prefix or suffix, so the drill copy could be named like a production database: add one, e.g. %q", owner, dr.Name, DefaultDrillName)
		case path == "defaults" && !strings.Contains(dr.Name, "{db}"):
			d.errf(l, kp, "%s: drill.name %q does not contain {db}, so every database's drill copy would get one name: use e.g. %q", owner, dr.Name, DefaultDrillName)
		case dr.Name == p.VerifyName || dr.Name == p.StandbyName:
			d.errf(l, kp, "%s: drill.name %q is verify_name or standby_name: the drill copy needs a name of its own; use e.g. %q", owner, dr.Name, DefaultDrillName)
		}
	}
}

// drillKey is where an error about drill.<key> of the database at path
// goes: the key when given, else its drill:, else the database (a drill
// inherited from defaults).
func (d *decoder) drillKey(path, key string) (int, string) {
	kp := join(path, "drill."+key)
	if !d.given(kp) {
		kp = join(path, "drill")
	}
	l := d.line(kp)
	if !d.given(join(path, "drill")) {
		l = d.line(path)
	}
	return l, kp
}

// checkStaging checks a drill from the immutable copy: the database has
// one, and the staging server is one of its own file backup servers.
func (d *decoder) checkStaging(c *Config, db *Database, path, owner string) {
	l, kp := d.drillKey(path, "staging")
	switch {
	case db.Drill.From == DrillFromImmutable && db.ImmutableCopy == "":
		d.errf(l, kp, "%s: drill.from immutable restores from the immutable copy, and the database has no immutable_copy: set one, or use from: any", owner)
	case db.Drill.From == DrillFromImmutable && db.Drill.Within > 0:
		l, kp := d.drillKey(path, "within")
		d.errf(l, kp, "%s: drill.within picks a point in time, and drill.from immutable restores the newest set of the immutable copy to its end "+
			"(the object store holds no log backups): use point: latest", owner)
	}
	s := db.Drill.Staging
	if s == "" {
		return
	}
	switch srv, ok := c.BackupServer(s); {
	case !ok || !slices.Contains(db.ServersAndTargets(), s):
		d.errf(l, kp, "%s: drill.staging %q is not one of the database's backup servers or copy targets", owner, s)
	case srv.IsObjectStore():
		d.errf(l, kp, "%s: drill.staging %s is an object store: the drill instance restores from a share; name a backup server of kind smb or local", owner, s)
	}
}
