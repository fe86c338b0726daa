// Package drill holds the activities of the Drill workflow: a recovery
// drill of a database. PrepareDrill chooses the drill's target, scratch
// name, the servers it reads and its point, and records the instance
// before anything is restored; the Recover workflow (a child) restores
// the copy; CheckDrill runs the database's sanity checks (and CHECKDB)
// on it; DropDrill drops it, only when it is the copy this drill created;
// RecordDrill writes what happened into the drill record beside the
// manifests (catalog.DrillRecord) on every backup server read.
package drill

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/activities/recover"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/evidence"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/recovery"
)

// Activities are the Drill workflow's activities, over the cycle's
// dependencies.
type Activities struct {
	Base *activities.Activities
}

// New returns the drill activities over base's dependencies.
func New(base *activities.Activities) *Activities { return &Activities{Base: base} }

// Steps of a drill, as in logs and the `drill` query.
const (
	StepPrepare = "drill-prepare"
	StepRecover = "drill-recover"
	StepChecks  = "drill-checks"
	StepDrop    = "drill-drop"
	StepRecord  = "drill-record"
	StepDone    = "done"
)

// Request is what a drill is asked: the database as configured, and what
// may override its drill: settings (the target instance, from, a point).
// No secret.
type Request struct {
	Database string `json:"database"`
	Instance string `json:"instance,omitempty"`
	// ToInstance overrides drill.instance; From drill.from (any, remote, immutable);
	// AsOf or Latest drill.point / within (an instant, the latest point).
	ToInstance string    `json:"to_instance,omitempty"`
	From       string    `json:"from,omitempty"`
	AsOf       time.Time `json:"as_of,omitzero"`
	Latest     bool      `json:"latest,omitempty"`
}

// Check refuses a request without a database or with an unknown from.
func (r Request) Check() error {
	switch {
	case r.Database == "":
		return errors.New(`drill input: give "database" (as configured), e.g. {"database":"Sales"}`)
	case r.From != "" && r.From != config.DrillFromAny && r.From != config.DrillFromRemote && r.From != config.DrillFromImmutable:
		return fmt.Errorf(`drill input: "from" %q: use any, remote or immutable`, r.From)
	case r.From == config.DrillFromImmutable && !r.AsOf.IsZero():
		return errors.New(`drill input: "from": "immutable" restores the newest set the immutable copy holds to its end (the object store holds no log backups): leave "as_of" out`)
	case r.Latest && !r.AsOf.IsZero():
		return errors.New(`drill input: "as_of" and "latest" both given: give one, or neither for drill.point / drill.within`)
	}
	return nil
}

// Plan is what PrepareDrill decided.
type Plan struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	// Target is the instance the copy is restored on, Name its name.
	Target string `json:"target"`
	Name   string `json:"name"`
	From   string `json:"from"`
	// Only are the servers the Recover may read (from: remote); Servers
	// those read here, where the drill is recorded (from: immutable: the
	// database's backup servers, the object store taking no record).
	Only    []string `json:"only,omitempty"`
	Servers []string `json:"servers"`
	// Latest or AsOf is the point asked; Point says it.
	Latest  bool      `json:"latest,omitempty"`
	AsOf    time.Time `json:"as_of,omitzero"`
	Point   string    `json:"point"`
	CheckDB bool      `json:"checkdb,omitempty"`
	// Scratch is the target before the drill (its clock, the ids of its
	// databases): a copy created after it with an id none had then, by
	// this login, from one of Fulls, is the drill's own.
	Scratch *catalog.VerifyCopy `json:"scratch"`
	Fulls   []string            `json:"fulls"`
	// Leftover describes a copy an earlier drill left, dropped now.
	Leftover    string   `json:"leftover,omitempty"`
	Unreachable []string `json:"unreachable,omitempty"`
	// Predicted is each step of the restore the Recover will run, as the
	// plan predicts it now, before it runs (recover.Predict); nil when no
	// restore reaches the point (the Recover says why).
	Predicted *catalog.RecoveryPrediction `json:"predicted,omitempty"`
	// Immutable is the source of a drill from the immutable copy: what
	// is staged (StageDrill) and where, before the Recover restores it.
	Immutable *Immutable `json:"immutable,omitempty"`
}

// RecoverRequest is the Recover the plan asks for.
func (p Plan) RecoverRequest() recover.Request {
	r := recover.Request{Database: p.Database, Instance: p.Instance, ToInstance: p.Target, As: p.Name, AsOf: p.AsOf, Latest: p.Latest, Only: p.Only}
	if im := p.Immutable; im != nil {
		r.Staged = &recover.Staged{Server: im.Staging, Dir: im.Dir}
	}
	return r
}

// StageInput is StageDrill's and UnstageDrill's input of the plan.
func (p Plan) StageInput() StageInput {
	return StageInput{Database: p.Database, Instance: p.Instance, Immutable: p.Immutable}
}

// ResolveDrill is the request with the database and instance as the
// configuration names them (a start may spell them otherwise, or give an
// alias of the instance): the drill's workflow id is made of those, so
// that one drill of a database runs at a time whatever started it.
// Nothing is read or changed on any instance.
func (a *Activities) ResolveDrill(ctx context.Context, in Request) (Request, error) {
	if err := in.Check(); err != nil {
		return Request{}, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	db, err := a.Base.Cycle.Database(in.Instance, in.Database)
	if err != nil {
		return Request{}, err
	}
	in.Database, in.Instance = db.Name, db.Instance
	return in, nil
}

// PrepareDrill resolves the drill's settings, reads the database's backups
// (from the copy targets alone with from: remote), picks the point (a
// random instant of the last drill.within of the proven window), drops a
// copy an earlier drill left under the scratch name (only one a drill
// record shows is a drill's) and refuses any other database of that name,
// then records the target's clock and databases: how DropDrill knows the
// copy is this drill's.
func (a *Activities) PrepareDrill(ctx context.Context, in Request) (Plan, error) {
	if err := in.Check(); err != nil {
		return Plan{}, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	d := &a.Base.Cycle
	stop := d.KeepAlive(ctx)
	defer stop()
	db, err := d.Database(in.Instance, in.Database)
	if err != nil {
		return Plan{}, err
	}
	cfg := d.CurrentConfig()
	p := Plan{Database: db.Name, Instance: db.Instance, Target: in.ToInstance, Name: db.DrillDatabaseName(), From: in.From, CheckDB: db.Drill.CheckDB}
	if p.Target == "" {
		p.Target = cfg.DrillInstance(db)
	}
	if p.From == "" {
		p.From = db.Drill.From
	}
	if p.From == "" {
		p.From = config.DrillFromAny
	}
	inst, err := a.target(db, p.Target)
	if err != nil {
		return Plan{}, err
	}
	p.Target = inst.Name
	log := activities.Logger(a.Base, ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance), zap.String("step", StepPrepare),
		zap.String("target", inst.Name), zap.String("name", p.Name))
	if p.From == config.DrillFromRemote {
		for _, s := range db.BackupServers {
			if t := db.CopyTarget(s); t != "" && !slices.Contains(p.Only, t) {
				p.Only = append(p.Only, t)
			}
		}
	}
	var cat recovery.Catalog
	if p.From == config.DrillFromImmutable {
		if cat, p.Immutable, err = a.immutableSource(ctx, db, log); err != nil {
			return Plan{}, err
		}
		// Recorded on the database's backup servers: the object store
		// keeps no drill record.
		p.Only, p.Servers = []string{p.Immutable.Staging}, db.ServersAndTargets()
		// The store holds no log backups: the newest set, to its end.
		in.AsOf, in.Latest = time.Time{}, true
	} else {
		var unreachable []string
		if cat, unreachable, err = recover.ReadCatalog(ctx, recover.New(a.Base), db, p.Only, log); err != nil {
			return Plan{}, err
		}
		p.Servers, p.Unreachable = cat.Servers, unreachable
	}
	for _, s := range cat.Sets {
		p.Fulls = append(p.Fulls, s.GUID)
	}
	switch {
	case !in.AsOf.IsZero():
		p.AsOf = in.AsOf.UTC()
	case in.Latest:
		p.Latest = true
	case db.Drill.Within > 0:
		if p.AsOf, err = pickPoint(cat, db.Drill.Within, time.Now()); err != nil {
			return Plan{}, err
		}
	default:
		p.Latest = true
	}
	point := recovery.Point{Latest: p.Latest, At: p.AsOf}
	p.Point = point.String()
	full := "" // the set the restore starts from, as planned now
	if rp, err := recovery.Choose(cat, point); err == nil {
		pred := recover.Predict(db, cat, rp)
		p.Predicted, full = &pred, rp.Full().GUID
	}

	sqlDB, err := d.ConnectSQL(ctx, inst, "master")
	if err != nil {
		return Plan{}, err
	}
	defer sqlDB.Close()
	if err := a.clearLeftover(ctx, sqlDB, db, &p, log); err != nil {
		return Plan{}, err
	}
	// The scratch names the full: a copy this drill leaves is still known
	// as its own once retention has removed that set.
	if p.Scratch, err = activities.CopyIntent(a.Base, ctx, sqlDB, inst.Name, p.Name, full, nil); err != nil {
		return Plan{}, err
	}
	// A crash from here on leaves a copy the next drill must know is a
	// drill's: the record says so before the RESTORE is sent.
	a.update(ctx, db, p.Servers, log, func(r *catalog.DrillRecord) { r.Scratch = p.Scratch })
	log.Info("drill prepared", zap.String("point", p.Point), zap.String("from", p.From), zap.Strings("servers", p.Servers),
		zap.Duration("predicted", p.Predicted.Restore()))
	return p, nil
}

// target is the drill's instance: configured, and never one the database
// is a source on (a drill creates and drops a copy there).
func (a *Activities) target(db *config.Database, name string) (*config.SQLInstance, error) {
	d := &a.Base.Cycle
	if name == "" {
		return nil, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
			"%s: no drill instance: set drill.instance, or a verify_instance on its copy target", db.ID()))
	}
	inst, err := d.Instance(name)
	if err != nil {
		return nil, err
	}
	sources := append([]string{db.Instance}, db.Aliases...)
	if g, ok := d.AvailabilityGroup(db.Instance); ok {
		sources = append(sources, g.Replicas...)
	}
	for _, s := range sources {
		if src, err := d.Instance(s); err == nil && (src.Name == inst.Name || config.SameAddress(src.Address, inst.Address)) {
			return nil, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
				"%s is the source instance of %s: a drill restores and drops a copy, never beside the production database; drill on the verification instance",
				inst.Name, db.ID()))
		}
	}
	return inst, nil
}

// pickPoint is a random instant of the last `within` of the newest proven
// window of the catalog's chains (a verified full's finish to the point
// its applied logs reach), among those the recovery plan accepts
// (recovery.Accepted): a point the source's clock going back leaves
// unnamed by STOPAT is never picked, so a drill of a proven chain does not
// fail on its point.
func pickPoint(cat recovery.Catalog, within time.Duration, now time.Time) (time.Time, error) {
	var from, to time.Time
	for _, ch := range cat.Chains {
		if f, t, _, ok := ch.ProvenWindow(); ok && t.After(to) {
			from, to = f, t
		}
	}
	if to.IsZero() {
		return time.Time{}, activities.NonRetryable(activities.ErrRecoveryPointUnreachable, errors.New(
			"drill.within picks a point of the proven window, and no log chain is proven past a verified full yet: wait for the log proof, or drill with point: latest"))
	}
	if lo := to.Add(-within); lo.After(from) {
		from = lo
	}
	// Almost always the random point is one the plan accepts (the clock
	// goes back twice a year at most): one plan checks it. Only when it is
	// not are the acceptable spans worked out (a plan per log of the
	// window) and the point drawn again among them, which keeps it
	// uniform over the acceptable points.
	lo, hi := from.UTC().Add(time.Millisecond-1).Truncate(time.Millisecond), to.UTC().Truncate(time.Millisecond)
	if !hi.Before(lo) {
		at := lo.Add(time.Duration(rand.Int64N(hi.Sub(lo).Milliseconds()+1)) * time.Millisecond)
		if _, err := recovery.Choose(cat, recovery.Point{At: at}); err == nil {
			return at, nil
		}
	}
	spans := recovery.Accepted(cat, from, to)
	var total int64 // milliseconds to pick from
	for _, s := range spans {
		total += s.To.Sub(s.From).Milliseconds() + 1
	}
	if total == 0 {
		_, why := recovery.Choose(cat, recovery.Point{At: hi})
		if why == nil {
			return hi, nil // a window of one instant
		}
		return time.Time{}, activities.NonRetryable(activities.ErrRecoveryPointUnreachable, fmt.Errorf(
			"drill.within picks a point of the last %s of the proven window (%s to %s), and the recovery plan accepts none of them (%v): "+
				"drill with a longer drill.within, once later logs are proven, or with point: latest",
			within, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), why))
	}
	n := rand.Int64N(total)
	for _, s := range spans {
		k := s.To.Sub(s.From).Milliseconds() + 1
		if n < k {
			return s.From.Add(time.Duration(n) * time.Millisecond).UTC(), nil
		}
		n -= k
	}
	return spans[len(spans)-1].To.UTC(), nil
}

// clearLeftover drops a copy under the scratch name that an earlier drill
// left (the newest trusted drill record's scratch record shows it is a
// drill's); any other database of that name stops the drill.
func (a *Activities) clearLeftover(ctx context.Context, sqlDB *mssql.DB, db *config.Database, p *Plan, log *zap.Logger) error {
	st, err := activities.DatabaseState(ctx, sqlDB, p.Name)
	if err != nil || st == nil {
		return err
	}
	rec := a.newest(ctx, db, p.Servers, log)
	why := "no drill record names it"
	if rec != nil && rec.Scratch != nil && rec.Scratch.On(p.Target, p.Name) {
		ok, w, err := own(ctx, sqlDB, p.Name, rec.Scratch, p.Fulls)
		if err != nil {
			return err
		}
		if ok {
			if err := activities.DropCopy(ctx, sqlDB, p.Target, p.Name, st, log); err != nil {
				return err
			}
			p.Leftover = fmt.Sprintf("%s (%s, database_id %d, created %s), left by an earlier drill", p.Name, st.State, st.ID, st.Created.Format(time.DateTime))
			log.Warn("dropped the copy an earlier drill left", zap.String("copy", p.Leftover))
			return nil
		}
		why = w
	}
	return activities.NonRetryable(activities.ErrTargetDatabaseExists, fmt.Errorf(
		"database %q exists on %s and no drill created it (%s): nothing was restored or dropped; drop or rename it, or set drill.name",
		p.Name, p.Target, why))
}

// own reports whether name is the copy the drill recorded in v created:
// it did not exist then (its id was no database's, created no earlier
// than the instance's clock), this login owns it, and its newest restore,
// when msdb recorded one since (a higher restore_history_id than its
// newest then), is of one of the database's fulls or of the full v names
// (the drill's plan; retention may have removed it since) (a RESTORE cut short
// records none, and leaves it RESTORING). The cycle's own-copy guard
// judges its copies by the same facts.
func own(ctx context.Context, sqlDB *mssql.DB, name string, v *catalog.VerifyCopy, fulls []string) (bool, string, error) {
	st, err := activities.DatabaseState(ctx, sqlDB, name)
	if err != nil || st == nil {
		return false, "gone", err
	}
	last, err := activities.LastRestore(ctx, sqlDB, name)
	if err != nil {
		return false, "", err
	}
	what := fmt.Sprintf("%s, database_id %d, created %s", st.State, st.ID, st.Created.Format(time.DateTime))
	since := v.InstanceTime.Add(-activities.ClockSlack)
	switch {
	case st.OwnerSID == "" || st.OwnerSID != st.LoginSID:
		return false, what + ", owned by another login", nil
	case slices.Contains(v.OtherDatabaseIDs, st.ID) || st.Created.Before(since):
		return false, what + ", there before the drill", nil
	case last != nil && activities.RecordedAfter(v, last):
		if slices.ContainsFunc(fulls, func(g string) bool { return activities.SameGUID(g, last.BackupSetGUID) }) ||
			v.BackupSetGUID != "" && activities.SameGUID(v.BackupSetGUID, last.BackupSetGUID) {
			return true, "", nil
		}
		return false, fmt.Sprintf("%s, restored from backup set %s, none of the database's", what, last.BackupSetGUID), nil
	case st.State == "RESTORING":
		return true, "", nil
	}
	return false, what + ", not restored since the drill began", nil
}

// newest is the newest trusted drill record on servers (nil: none).
func (a *Activities) newest(ctx context.Context, db *config.Database, servers []string, log *zap.Logger) *catalog.DrillRecord {
	var best *catalog.DrillRecord
	a.each(ctx, db, servers, log, func(_ string, fsys catalog.FS, keys *catalog.Keys) error {
		r, err := catalog.LoadDrill(ctx, fsys, keys, db.Instance, db.Name)
		if err == nil && r != nil && r.Trusted() && (best == nil || r.UpdatedAt.After(best.UpdatedAt)) {
			best = r
		}
		return err
	})
	return best
}

// each calls fn with every server's directory; a server that fails is
// logged and the others go on. It returns the servers fn succeeded on.
func (a *Activities) each(ctx context.Context, db *config.Database, servers []string, log *zap.Logger,
	fn func(server string, fsys catalog.FS, keys *catalog.Keys) error) []string {
	d := &a.Base.Cycle
	keys, err := d.ManifestKeys()
	if err != nil {
		log.Warn("drill record not read or written: the manifest keys", zap.Error(err))
		return nil
	}
	var ok []string
	for _, name := range servers {
		err := func() error {
			srv, err := d.Server(name)
			if err != nil {
				return err
			}
			st, err := d.OpenServer(ctx, srv)
			if err != nil {
				return err
			}
			defer st.Close()
			return fn(name, catalog.StorageFS{Storage: st}, keys)
		}()
		if err != nil {
			log.Warn("drill record on a backup server: the others serve", zap.String("server", name), zap.Error(err))
			continue
		}
		ok = append(ok, name)
	}
	return ok
}

// update changes the drill record on every server (a missing one started,
// an untrusted one replaced); it returns the servers written.
func (a *Activities) update(ctx context.Context, db *config.Database, servers []string, log *zap.Logger, change func(*catalog.DrillRecord)) []string {
	now := a.Base.Cycle.Clock().UTC()
	return a.each(ctx, db, servers, log, func(_ string, fsys catalog.FS, keys *catalog.Keys) error {
		r, err := catalog.LoadDrill(ctx, fsys, keys, db.Instance, db.Name)
		if err != nil || r == nil || !r.Trusted() {
			if err != nil {
				log.Warn("drill record unreadable: started anew", zap.Error(err))
			}
			r = catalog.NewDrillRecord(db.Instance, db.Name, now)
		}
		change(r)
		r.UpdatedAt = now
		return catalog.SaveDrill(ctx, fsys, keys, r)
	})
}

// Copy names the drill's scratch copy for the later steps.
type Copy struct {
	Database string              `json:"database"`
	Instance string              `json:"instance,omitempty"`
	Target   string              `json:"target"`
	Name     string              `json:"name"`
	Scratch  *catalog.VerifyCopy `json:"scratch"`
	Fulls    []string            `json:"fulls"`
}

// CheckInput asks for the checks of the recovered copy.
type CheckInput struct {
	Copy
	// Sequence is the full restored; RecoveryPoint the point reached
	// (max_age of a sanity check is measured from it).
	Sequence      int64     `json:"sequence"`
	RecoveryPoint time.Time `json:"recovery_point"`
	CheckDB       bool      `json:"checkdb,omitempty"`
}

// CheckOutput is what the checks found.
type CheckOutput struct {
	Sanity  []string      `json:"sanity,omitempty"` // the checks that held
	CheckDB bool          `json:"checkdb,omitempty"`
	Took    time.Duration `json:"took"`
}

// CheckDrill runs the database's sanity checks on the recovered copy, as
// the sanity user (cycle.SanityCheckCopy, as the cycle's), and DBCC
// CHECKDB when asked, after proving the copy is the drill's. A check that
// did not hold is SanityCheckFailed, CHECKDB's errors CheckDBFailed: the
// drill failed; no set is marked by it.
func (a *Activities) CheckDrill(ctx context.Context, in CheckInput) (CheckOutput, error) {
	d := &a.Base.Cycle
	stop := d.KeepAlive(ctx)
	defer stop()
	began := time.Now()
	db, err := d.Database(in.Instance, in.Database)
	if err != nil {
		return CheckOutput{}, err
	}
	inst, err := d.Instance(in.Target)
	if err != nil {
		return CheckOutput{}, err
	}
	log := activities.Logger(a.Base, ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance), zap.String("step", StepChecks),
		zap.String("target", inst.Name), zap.String("name", in.Name))
	sqlDB, err := d.ConnectSQL(ctx, inst, "master")
	if err != nil {
		return CheckOutput{}, err
	}
	defer sqlDB.Close()
	if ok, why, err := own(ctx, sqlDB, in.Name, in.Scratch, in.Fulls); err != nil || !ok {
		if err == nil {
			err = activities.NonRetryable(activities.ErrRestoreMismatch, fmt.Errorf("%s on %s is not the copy this drill restored (%s): not checked", in.Name, inst.Name, why))
		}
		return CheckOutput{}, err
	}
	cdb, err := d.ConnectSQL(ctx, inst, in.Name)
	if err != nil {
		return CheckOutput{}, err
	}
	defer cdb.Close()
	// The sanity checks' max_age is measured from the recovery point: the
	// copy is the database as it was then.
	ref := &catalog.Manifest{Sequence: in.Sequence, Header: &catalog.Header{BackupFinish: in.RecoveryPoint.UTC(), BackupFinishUTC: in.RecoveryPoint.UTC()}}
	ref.Header.SetUTCOffset(0)
	if err := cycle.SanityCheckCopy(ctx, cdb, db, inst.Name, in.Name, in.Sequence, ref, log); err != nil {
		return CheckOutput{}, err
	}
	out := CheckOutput{}
	for _, c := range db.SanityChecks {
		out.Sanity = append(out.Sanity, c.Name)
	}
	if in.CheckDB {
		detail, err := cycle.CheckDBCopy(ctx, sqlDB, in.Name)
		if err != nil {
			return out, err
		}
		if detail != "" {
			return out, activities.NonRetryable(activities.ErrCheckDBFailed, fmt.Errorf("%s on %s: %s", in.Name, inst.Name, detail))
		}
		out.CheckDB = true
	}
	out.Took = time.Since(began)
	log.Info("drill copy checked", zap.Strings("sanity", out.Sanity), zap.Bool("checkdb", out.CheckDB), zap.Duration("took", out.Took))
	return out, nil
}

// DropOutput says what DropDrill did.
type DropOutput struct {
	Dropped bool   `json:"dropped"`
	Why     string `json:"why,omitempty"` // not dropped: why
}

// DropDrill drops the scratch copy when it is the one this drill created
// (own); one it did not create is left, and said so. Nothing to drop is
// not an error.
func (a *Activities) DropDrill(ctx context.Context, in Copy) (DropOutput, error) {
	d := &a.Base.Cycle
	inst, err := d.Instance(in.Target)
	if err != nil {
		return DropOutput{}, err
	}
	sqlDB, err := d.ConnectSQL(ctx, inst, "master")
	if err != nil {
		return DropOutput{}, err
	}
	defer sqlDB.Close()
	st, err := activities.DatabaseState(ctx, sqlDB, in.Name)
	if err != nil || st == nil {
		return DropOutput{Why: "there is none"}, err
	}
	ok, why, err := own(ctx, sqlDB, in.Name, in.Scratch, in.Fulls)
	if err != nil {
		return DropOutput{}, err
	}
	if !ok {
		activities.Logger(a.Base, ctx).Warn("not dropped: the drill did not create it", zap.String("db", in.Database), zap.String("target", inst.Name),
			zap.String("name", in.Name), zap.String("why", why))
		return DropOutput{Why: "the drill did not create it: " + why}, nil
	}
	if err := activities.DropCopy(ctx, sqlDB, inst.Name, in.Name, st, activities.Logger(a.Base, ctx)); err != nil {
		return DropOutput{}, err
	}
	return DropOutput{Dropped: true}, nil
}

// RecordInput is a finished drill.
type RecordInput struct {
	Database string              `json:"database"`
	Instance string              `json:"instance,omitempty"`
	Servers  []string            `json:"servers"`
	Result   catalog.DrillResult `json:"result"`
	Scratch  *catalog.VerifyCopy `json:"scratch,omitempty"`
}

// RecordDrill adds the drill to the drill record on every backup server
// it read (the scratch record cleared once the copy is gone). None
// written is retryable: a drill nobody can see did not happen.
func (a *Activities) RecordDrill(ctx context.Context, in RecordInput) ([]string, error) {
	d := &a.Base.Cycle
	db, err := d.Database(in.Instance, in.Database)
	if err != nil {
		return nil, err
	}
	log := activities.Logger(a.Base, ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance), zap.String("step", StepRecord))
	written := a.update(ctx, db, in.Servers, log, func(r *catalog.DrillRecord) {
		r.Add(in.Result)
		// A drill that ended before it recorded a scratch of its own
		// (refused at its plan) leaves the record's: it may name the copy
		// an earlier drill left, which the next drill then recognises.
		if in.Scratch == nil {
			return
		}
		r.Scratch = in.Scratch
		if in.Result.Dropped {
			r.Scratch = nil
		}
	})
	if len(written) == 0 {
		return nil, temporal.NewApplicationError(fmt.Sprintf("the drill of %s could not be recorded on any of %s", db.ID(), strings.Join(in.Servers, ", ")),
			activities.ErrNoBackupServerReachable)
	}
	log.Info("drill recorded", zap.Strings("servers", written), zap.String("outcome", in.Result.Outcome), zap.Duration("rto", in.Result.RTO))
	// And in the evidence ledger of the same servers, best effort.
	a.each(ctx, db, written, log, func(server string, fsys catalog.FS, _ *catalog.Keys) error {
		if st, ok := fsys.(catalog.StorageFS); ok {
			activities.AppendEvidence(ctx, a.Base, st.Storage, db, 0, drillEvidence(ctx, server, db, in.Result))
		}
		return nil
	})
	return written, nil
}

// drillEvidence is the evidence record of drill res on server: the copy it
// recovered and checked, its measured time to recover against the
// database's rto, how it ended, and the immutable copy it restored from
// (drill from: immutable).
func drillEvidence(ctx context.Context, server string, db *config.Database, res catalog.DrillResult) *evidence.Record {
	passed := res.Outcome == catalog.DrillPassed
	r := activities.CopyProof(ctx, evidence.KindDrill, server, db, res.Instance, res.Database, nil, res.RecoveryPoint, res.CheckDB)
	r.WorkflowID, r.RunID = res.WorkflowID, res.RunID
	r.Sanity = &evidence.Sanity{Checks: res.Sanity, Passed: passed}
	if r.CheckDB != nil && !res.CheckDBClean {
		r.CheckDB.Result = "not clean: " + res.Error
	}
	if res.Sequence > 0 {
		r.Set = &evidence.Set{Sequence: res.Sequence}
	}
	r.Drill = &evidence.Drill{Point: res.Point, RecoveryPointFrom: res.RecoveryPointFrom, RTOSeconds: res.RTO.Seconds(),
		TargetRTOSeconds: db.RTO.Seconds(), MetRTO: passed && (db.RTO == 0 || res.RTO <= db.RTO), Passed: passed,
		FirstLog: res.FirstLog, LastLog: res.LastLog}
	if im := res.Immutable; im != nil {
		// Restored from the object store, not from server's files: the
		// record names what it proved restorable there.
		r.Drill.Immutable = &evidence.ImmutableSource{Store: im.Store, Location: im.Location, Sequence: im.Sequence}
	}
	st := res.Steps
	r.Timings = map[string]float64{"prepare": st.Prepare.Seconds(), "plan": st.Plan.Seconds(), "full": st.Full.Seconds(),
		"logs": st.Logs.Seconds(), "recovery": st.Recovery.Seconds(), "checks": st.Checks.Seconds(), "drop": st.Drop.Seconds()}
	return r
}
