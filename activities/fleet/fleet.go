// Package fleet holds the activities of the Fleet workflow: the nightly
// run of a whole configuration. PlanFleet resolves every instance's
// selection and orders the databases; KeepSelectedSchedules keeps the drill
// and differential schedules of the databases only a selection picks;
// CheckFleetCarry holds what a run hands its continuation to the
// configuration in force.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/fleet"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/selection"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Activities are the Fleet workflow's activities. The worker registers
// them beside the cycle's (workflows.Register); they share its
// dependencies through Base.
type Activities struct {
	// Base carries the dependencies; a field, not embedded, so that
	// registering Activities registers only this package's methods.
	Base *activities.Activities
}

// New returns the fleet activities over base's dependencies.
func New(base *activities.Activities) *Activities { return &Activities{Base: base} }

// FleetInput asks for the night's list of databases.
type FleetInput struct {
	// Instances limits the run to these source instances (a fleet per
	// instance); empty: every instance with databases to back up.
	Instances []string `json:"instances,omitempty"`
}

// FleetPlan is what a Fleet run backs up tonight, largest first, and what
// it does not, with the reason.
type FleetPlan struct {
	Items []fleet.Item `json:"items"`
	// NotRun are databases the run does not back up: not selectable
	// (state, snapshot) or not runnable (an unreachable instance, a rotation
	// that cannot be derived, a verification copy name taken twice).
	NotRun []FleetNotRun `json:"not_run,omitempty"`
	Limits fleet.Limits  `json:"limits"`
	Window time.Duration `json:"window"`
	// LogChains are the resolved databases with log_backup, whether listed
	// under databases: or picked by a selection: the run keeps a log chain
	// running for each (one workflow per database, an existing one kept).
	LogChains []FleetLogChain `json:"log_chains,omitempty"`
	// Drills and Diffs are the databases a selection picks (no databases:
	// entry: the worker keeps those's) with drill: and diff_backup from
	// defaults:: the run keeps their drill and differential schedules
	// (KeepSelectedSchedules), which the worker's start cannot, knowing
	// only the entries.
	Drills []FleetLogChain `json:"drills,omitempty"`
	Diffs  []FleetLogChain `json:"diffs,omitempty"`
}

// FleetLogChain names a database whose log chain (or drill or
// differential schedule) a Fleet run ensures: configuration keys, the
// name as sys.databases spells it.
type FleetLogChain struct {
	Instance string `json:"instance"`
	Database string `json:"database"`
}

// FleetNotRun is a database (or, with Database "", a whole instance's
// selection) the run leaves out.
type FleetNotRun struct {
	Instance string `json:"instance"`
	Database string `json:"database,omitempty"`
	Reason   string `json:"reason"`
	// Type is the error type when a failure kept it out (the instance
	// unreachable, a configuration error); "" for a database the selection
	// skips by design (offline, snapshot).
	Type string `json:"type,omitempty"`
}

// PlanFleet resolves every instance's selection from sys.databases (ONLINE
// databases only, as `starter databases` shows), reads the sizes of their
// data files from sys.master_files, and derives each database's primary
// backup server and remote copy target from the manifests, one listing per
// backup server. An instance that cannot be read is reported, not fatal:
// the other instances still run.
func (a *Activities) PlanFleet(ctx context.Context, in FleetInput) (FleetPlan, error) {
	defer a.Base.Cycle.KeepAlive(ctx)()
	cfg, err := a.Base.Cycle.Configured()
	if err != nil {
		return FleetPlan{}, err
	}
	log := activities.Logger(a.Base, ctx)
	// An availability group narrows the run to its replicas.
	var only []string
	for _, name := range in.Instances {
		if g, ok := cfg.AvailabilityGroup(name); ok {
			only = append(only, g.Replicas...)
			continue
		}
		if _, ok := cfg.SQLInstance(name); !ok {
			return FleetPlan{}, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("fleet: instance %q is not defined in sql_instances or availability_groups of %s", name, cfg.File))
		}
		only = append(only, name)
	}
	out := FleetPlan{Window: cfg.Fleet.Window, Limits: activities.FleetLimits(cfg)}

	var dbs []config.Database
	sizes := map[string]int64{} // by Database.ID
	for _, inst := range sources(cfg) {
		if len(only) > 0 && !slices.Contains(only, inst) {
			continue
		}
		got, notRun, err := a.resolveInstance(ctx, cfg, inst, sizes)
		if err != nil {
			if ctx.Err() != nil {
				return FleetPlan{}, ctx.Err()
			}
			log.Warn("fleet: instance not readable: its databases are not run tonight", zap.String("instance", inst), zap.Error(err))
			out.NotRun = append(out.NotRun, FleetNotRun{Instance: inst, Reason: err.Error(), Type: activities.ErrorType(err)})
			continue
		}
		// A database of an availability group comes from every replica
		// that selects it: it runs once, as the group's.
		for _, d := range got {
			if !slices.ContainsFunc(dbs, func(o config.Database) bool { return o.ID() == d.ID() }) {
				dbs = append(dbs, d)
			}
		}
		out.NotRun = append(out.NotRun, notRun...)
	}
	out.NotRun = slices.DeleteFunc(out.NotRun, func(n FleetNotRun) bool {
		g, ok := cfg.GroupOf(n.Instance)
		return ok && n.Database != "" && slices.ContainsFunc(dbs, func(d config.Database) bool { return d.Instance == g.Name && d.Name == n.Database })
	})

	// One listing per backup server gives every database's last primary:
	// the manifests of the fleet's instance keys, no others.
	var instances []string
	for _, d := range dbs {
		for _, k := range append([]string{d.Instance}, d.Aliases...) {
			if !slices.Contains(instances, k) {
				instances = append(instances, k)
			}
		}
	}
	listFleet := func(ctx context.Context, fsys catalog.FS, keys *catalog.Keys) (catalog.Listing, error) {
		return catalog.ListInstances(ctx, fsys, keys, instances)
	}
	var manifests []*catalog.Manifest
	unreachable := map[string]bool{}
	for _, name := range serversOf(dbs) {
		l, err := activities.ListServer(a.Base, ctx, name, listFleet)
		if err != nil {
			if ctx.Err() != nil {
				return FleetPlan{}, ctx.Err()
			}
			log.Warn("fleet: backup server not readable while planning", zap.String("server", name), zap.Error(err))
			unreachable[name] = true
			continue
		}
		manifests = append(manifests, l.Manifests...)
	}

	// Log chains do not depend on tonight's rotation or verification
	// names: every resolved database with log_backup gets one, unless its
	// standby copy (and the scratch copies named after it) would have the
	// name of another chain's on a verification instance they share: the
	// second chain's proofs would be refused for ever.
	standbys := map[string]string{}
	for _, db := range dbs {
		if _, group := cfg.AvailabilityGroup(db.Instance); group && db.LogBackups() {
			// A group's database gets no chain (LogPlan says why); one a
			// selection picks inherits log_backup from defaults:, so it is
			// left out here rather than started to fail every night.
			log.Info("fleet: no log chain for a database of an availability group", zap.String("instance", db.Instance), zap.String("db", db.Name))
			continue
		}
		if !db.LogBackups() {
			continue
		}
		if reason := standbyCollision(cfg, &db, standbys); reason != "" {
			out.NotRun = append(out.NotRun, FleetNotRun{Instance: db.Instance, Database: db.Name, Type: activities.ErrInvalidConfig, Reason: reason})
			continue
		}
		out.LogChains = append(out.LogChains, FleetLogChain{Instance: db.Instance, Database: db.Name})
	}

	for _, db := range dbs {
		if entryOf(cfg, &db) {
			continue
		}
		ref := FleetLogChain{Instance: db.Instance, Database: db.Name}
		if db.Drills() {
			out.Drills = append(out.Drills, ref)
		}
		// A group's database takes no differential (it may be backed up
		// COPY_ONLY on a secondary); one a selection picks inherits
		// diff_backup from defaults:, so it is left out here.
		if _, group := cfg.AvailabilityGroup(db.Instance); db.DiffBackups() && !group {
			out.Diffs = append(out.Diffs, ref)
		}
	}

	verifyNames := map[string]string{}
	for _, db := range dbs {
		if err := a.Base.Cycle.CheckNames(&db); err != nil {
			out.NotRun = append(out.NotRun, FleetNotRun{Instance: db.Instance, Database: db.Name, Reason: err.Error(), Type: activities.ErrInvalidConfig})
			continue
		}
		last := catalog.LastServer(activities.SetsOf(&db), manifests)
		primary, err := plan.NextServer(db.BackupServers, last, unreachable)
		if errors.Is(err, plan.ErrNoServerReachable) {
			primary, err = plan.NextServer(db.BackupServers, last, nil)
		}
		if err != nil {
			out.NotRun = append(out.NotRun, FleetNotRun{Instance: db.Instance, Database: db.Name, Reason: err.Error(), Type: activities.ErrInvalidConfig})
			continue
		}
		remote := db.CopyTarget(primary)
		// Two selected databases whose restored copies would get one name
		// on one verification instance would replace each other's proof.
		if srv, ok := cfg.BackupServer(remote); ok {
			k := srv.VerifyInstance + "\x00" + strings.ToLower(db.VerifyDatabaseName(0))
			if other, dup := verifyNames[k]; dup {
				out.NotRun = append(out.NotRun, FleetNotRun{Instance: db.Instance, Database: db.Name, Type: activities.ErrInvalidConfig,
					Reason: fmt.Sprintf("its verification copy %q on %s would collide with %s's: set verify_name in defaults: (e.g. \"{instance}_{db}_verify\")",
						db.VerifyDatabaseName(0), srv.VerifyInstance, other)})
				continue
			}
			verifyNames[k] = db.ID()
		}
		out.Items = append(out.Items, fleet.Item{Instance: db.Instance, Database: db.Name, SizeBytes: sizes[db.ID()],
			Servers: []string{primary, remote}})
	}
	fleet.Order(out.Items)
	log.Info("fleet planned", zap.Int("databases", len(out.Items)), zap.Int("not_run", len(out.NotRun)),
		zap.Int("log_chains", len(out.LogChains)))
	return out, nil
}

// SelectedSchedules are the databases a fleet run keeps the drill and
// differential schedules of (FleetPlan.Drills, Diffs).
type SelectedSchedules struct {
	Drills []FleetLogChain `json:"drills,omitempty"`
	Diffs  []FleetLogChain `json:"diffs,omitempty"`
}

// KeepSelectedSchedules keeps the drill schedule of every database of
// in.Drills and the differential schedule of every one of in.Diffs, as the
// worker keeps those of the databases: entries (same ids, intervals,
// phases and policies; a paused one stays paused), each database's
// settings as the configuration resolves it now (defaults:); a name the
// configuration no longer selects is refused by that lookup. It returns
// the schedule ids kept.
func (a *Activities) KeepSelectedSchedules(ctx context.Context, in SelectedSchedules) ([]string, error) {
	if a.Base.Cycle.Schedules == nil {
		return nil, activities.NonRetryable(activities.ErrInvalidConfig, errors.New("fleet: this worker keeps no schedules (no Temporal client wired)"))
	}
	resolve := func(refs []FleetLogChain, keep func(*config.Database) bool) ([]*config.Database, error) {
		var out []*config.Database
		for _, r := range refs {
			db, err := a.Base.Cycle.Database(r.Instance, r.Database)
			if err != nil {
				return nil, err
			}
			if keep(db) {
				out = append(out, db)
			}
		}
		return out, nil
	}
	drills, err := resolve(in.Drills, (*config.Database).Drills)
	if err != nil {
		return nil, err
	}
	diffs, err := resolve(in.Diffs, (*config.Database).DiffBackups)
	if err != nil {
		return nil, err
	}
	ids, err := a.Base.Cycle.Schedules.KeepSelectedSchedules(ctx, drills, diffs)
	if err != nil {
		return ids, fmt.Errorf("fleet: schedules of selected databases: %w", err)
	}
	activities.Logger(a.Base, ctx).Info("fleet: schedules of selected databases kept", zap.Strings("schedule_ids", ids))
	return ids, nil
}

// entryOf reports whether db is a databases: entry of cfg (the name as
// the entry spells it, or in another case): the worker keeps its
// schedules from the configuration alone.
func entryOf(cfg *config.Config, db *config.Database) bool {
	return slices.ContainsFunc(cfg.Databases, func(e config.Database) bool {
		return e.Instance == db.Instance && strings.EqualFold(e.Name, db.Name)
	})
}

// FleetCarryInput is what a Fleet run that continued as new carried over:
// its instances, when the night began, its deadline and the databases not
// started yet.
type FleetCarryInput struct {
	Instances []string     `json:"instances,omitempty"`
	Began     time.Time    `json:"began"`
	Deadline  time.Time    `json:"deadline"`
	Pending   []fleet.Item `json:"pending"`
}

// FleetCarryCheck is the carried state held to the configuration in force.
type FleetCarryCheck struct {
	Limits   fleet.Limits  `json:"limits"`
	Deadline time.Time     `json:"deadline"`
	Pending  []fleet.Item  `json:"pending"`
	NotRun   []FleetNotRun `json:"not_run,omitempty"`
}

// CheckFleetCarry holds what a Fleet run hands its continuation to the
// configuration in force, since a continuation reads no configuration of
// its own (a workflow cannot) and its input is recorded in a history
// anyone with access to the namespace can start another run from: the
// limits are the configuration's, the deadline no later than the window
// after the night began (which is not after now), and only databases the
// configuration backs up, of the run's instances, stay pending, once each,
// on servers of their own rotation (the primary carried when it still is
// one, with its copy target). A database left out is reported, not run.
func (a *Activities) CheckFleetCarry(ctx context.Context, in FleetCarryInput) (FleetCarryCheck, error) {
	cfg, err := a.Base.Cycle.Configured()
	if err != nil {
		return FleetCarryCheck{}, err
	}
	out := FleetCarryCheck{Limits: activities.FleetLimits(cfg), Deadline: in.Deadline}
	began := in.Began
	if now := a.Base.Cycle.Clock(); began.After(now) || began.IsZero() {
		began = now
	}
	if end := began.Add(cfg.Fleet.Window); out.Deadline.After(end) || out.Deadline.IsZero() {
		out.Deadline = end
	}
	scope := map[string]bool{}
	for _, name := range in.Instances {
		scope[name] = true
		if g, ok := cfg.GroupOf(name); ok {
			scope[g.Name] = true
		}
	}
	seen := map[string]bool{}
	for _, it := range in.Pending {
		notRun := func(why string) {
			out.NotRun = append(out.NotRun, FleetNotRun{Instance: it.Instance, Database: it.Database, Type: activities.ErrInvalidConfig,
				Reason: "carried over from the previous run, but " + why})
		}
		switch {
		case seen[it.Key()]:
			continue // carried twice: it runs once
		case len(scope) > 0 && !scope[it.Instance]:
			notRun(fmt.Sprintf("%s is not among this run's instances %v", it.Instance, in.Instances))
			continue
		}
		db, err := selection.Lookup(cfg, it.Instance, it.Database)
		if err != nil || len(db.BackupServers) == 0 {
			if err == nil {
				err = fmt.Errorf("it has no backup servers")
			}
			notRun(fmt.Sprintf("the configuration does not back it up: %v", err))
			continue
		}
		seen[it.Key()] = true
		primary := db.BackupServers[0]
		if len(it.Servers) > 0 && slices.Contains(db.BackupServers, it.Servers[0]) {
			primary = it.Servers[0]
		}
		it.Servers = []string{primary, db.CopyTarget(primary)}
		it.SizeBytes = max(it.SizeBytes, 0)
		out.Pending = append(out.Pending, it)
	}
	fleet.Order(out.Pending)
	return out, nil
}

// sources are the instances that have databases to back up: a selection,
// or databases: entries naming them (or, for a replica, its availability
// group), in configuration order.
func sources(cfg *config.Config) []string {
	var out []string
	for _, s := range cfg.SQLInstances {
		used := len(s.Databases) > 0
		g, replica := cfg.GroupOf(s.Name)
		for _, d := range cfg.Databases {
			used = used || d.Instance == s.Name || replica && d.Instance == g.Name
		}
		if used {
			out = append(out, s.Name)
		}
	}
	return out
}

// serversOf is every backup server of the databases' rotations and copy
// targets, in first-seen order.
func serversOf(dbs []config.Database) []string {
	var out []string
	for _, db := range dbs {
		for _, s := range append(append([]string(nil), db.BackupServers...), db.CopyTo) {
			if s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// resolveInstance lists one instance's databases, resolves its selection
// (and what its databases: entries name there, by its collation) and
// records the sizes of the selected ones in sizes. Each comes back under
// its sys.databases spelling, the one its cycle's plan resolves a start
// to, so the fleet's child runs under the same workflow id as any other
// start of the database, with its entry's settings.
func (a *Activities) resolveInstance(ctx context.Context, cfg *config.Config, name string, sizes map[string]int64) ([]config.Database, []FleetNotRun, error) {
	inst, err := a.Base.Cycle.Instance(name)
	if err != nil {
		return nil, nil, err
	}
	db, err := a.Base.Cycle.ConnectSQL(ctx, inst, "master")
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	names, err := selection.ReadNames(ctx, db, selection.Asked(cfg, name))
	if err != nil {
		return nil, nil, activities.SQLError(err)
	}
	all := names.Databases
	res, err := selection.ForInstance(cfg, name, names)
	if err != nil {
		return nil, nil, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	var notRun []FleetNotRun
	for _, s := range res.Skipped {
		// Databases no item asks for (and tempdb) are not news every
		// night; exclusions, states, snapshots and missing names are.
		if s.Unasked {
			continue
		}
		notRun = append(notRun, FleetNotRun{Instance: name, Database: s.Name, Reason: s.Reason})
	}
	ids := map[int64]string{}
	for _, d := range all {
		ids[int64(d.ID)] = d.Name
	}
	pages := map[string]int64{}
	rows, err := db.QueryContext(ctx, tsql.AllDataFiles)
	if err == nil {
		for rows.Next() {
			var id, n int64
			if rows.Scan(&id, &n) == nil {
				pages[ids[id]] += n
			}
		}
		err = rows.Err()
		rows.Close()
	}
	if err != nil {
		// Sizes only order the run: without them it still runs.
		activities.Logger(a.Base, ctx).Warn("fleet: database sizes not readable (sys.master_files): the run is not ordered by size",
			zap.String("instance", name), zap.Error(err))
	}
	var out []config.Database
	for _, s := range res.Selected {
		key := name
		if s.Group != "" {
			key = s.Group // an availability database: the group's
		}
		d, err := selection.DatabaseFor(cfg, key, s.Name, s.Entry)
		if err != nil {
			notRun = append(notRun, FleetNotRun{Instance: key, Database: s.Name, Reason: err.Error(), Type: activities.ErrInvalidConfig})
			continue
		}
		out = append(out, d)
		sizes[d.ID()] = pages[s.Name] * tsql.PageBytes
	}
	return out, notRun, nil
}

// standbyCollision says why db's log chain cannot start when its standby
// copy would be named like one already in seen (verification instance and
// name, case-insensitive as SQL Server's database names are by default) on
// a verification instance of any of its copy targets; else it records db's.
func standbyCollision(cfg *config.Config, db *config.Database, seen map[string]string) string {
	if db.ProofMode() == "" {
		return ""
	}
	name := db.StandbyDatabaseName()
	var keys []string
	for _, s := range db.BackupServers {
		srv, ok := cfg.BackupServer(db.CopyTarget(s))
		if !ok {
			continue
		}
		k := srv.VerifyInstance + "\x00" + strings.ToLower(name)
		if other, dup := seen[k]; dup && other != db.ID() {
			return fmt.Sprintf("its log chain is not started: its standby copy %q on %s would collide with %s's: set standby_name in defaults: (e.g. \"{instance}_{db}_standby\")",
				name, srv.VerifyInstance, other)
		}
		keys = append(keys, k)
	}
	for _, k := range keys {
		seen[k] = db.ID()
	}
	return ""
}
