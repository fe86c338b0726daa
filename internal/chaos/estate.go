package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // the estate's zones whatever the host has installed

	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// The estate is what a real SQL Server fleet varies in and the product must
// hold up against: each instance's SQL Server build and time zone, whether
// the verification instance holds the certificate of the TDE database, how
// a start and the configuration spell a database's name, the availability
// group's roles, and whether a DBA's integrity check ran on the source just
// before (its LastGoodCheckDbTime travels into the copy, on the source's
// clock). Each run draws its own (Draw); the fleet is brought to it before
// the run starts (Fleet.ApplyEstate). An estate whose verification instance
// cannot read a set (an older version, no certificate) must end with the
// documented non-evidence outcome, InvalidConfig at the plan or the RESTORE,
// the set never failed (I8); a later estate that fixes it lets the next cycle
// or a resume verify.

// Instances of the estate, in the order of Estate's arrays.
var estateInstances = [4]string{Sql01, Sql02, Sql03, Verify01}

func estateIndex(instance string) int {
	for i, n := range estateInstances {
		if n == instance {
			return i
		}
	}
	return -1
}

// Builds the emulator knows (sqlsim.Config.ProductVersion), weighted: the
// sources run 2016 to 2022; the verification instance is 2022, now and then
// still 2019 (older than a 2022 source: it cannot restore its sets).
var (
	sourceBuilds = []weighted[string]{{"16.0.4135.4", 3}, {"15.0.4385.2", 2}, {"14.0.3456.2", 1}, {"13.0.6300.2", 1}}
	verifyBuilds = []weighted[string]{{"16.0.4135.4", 6}, {"15.0.4385.2", 1}}
	// zones: SQL Server's local time; half and quarter hours and a zone
	// past +12 included, DST rules as the zone has them.
	zones = []weighted[string]{{"UTC", 3}, {"Europe/Berlin", 1}, {"America/New_York", 1}, {"Asia/Kolkata", 1},
		{"Pacific/Auckland", 1}, {"America/Los_Angeles", 1}}
	agPreferences = []weighted[string]{{sqlsim.PreferSecondary, 2}, {sqlsim.PreferPrimary, 1}, {sqlsim.PreferSecondaryOnly, 1}, {sqlsim.PreferNone, 1}}
	agSyncStates  = []weighted[string]{{sqlsim.Synchronized, 4}, {sqlsim.Synchronizing, 1}, {sqlsim.NotSynchronizing, 1}}
)

// Spellings of a database name a start uses.
const (
	SpellExact = iota // as sys.databases has it
	SpellLower
	SpellUpper
	SpellTitle
)

// Estate is one run's SQL Server estate (comparable: Plan compares with ==).
type Estate struct {
	Build [4]string // ProductVersion of sql01, sql02, sql03, verify01
	Zone  [4]string // IANA time zone of each
	// TDECert: verify01 holds the certificate of the TDE database (HR on
	// sql02); without it no set of HR restores there (33111).
	TDECert bool
	// Spell is how the run's starts spell the database (a Web UI user, a
	// `starter run --database SALES`).
	Spell int
	// EntryLower: the databases: entry of HR is spelled hr.
	EntryLower bool
	// SourceCheckDB: a DBA's DBCC CHECKDB of the target ran on its source
	// just before the run.
	SourceCheckDB bool
	// The availability group's roles: its primary replica, the automated
	// backup preference, whether the secondary allows connections, the
	// secondary's synchronization state of its database.
	AGPrimary    string
	AGPreference string
	AGReadable   bool
	AGSync       string
	// Via is the instance a start of the group's database names: the
	// group, or one of its replicas.
	Via string
	// VerifySwap: while the cycle copies its set, the verification
	// instance stops being able to read it (Sim.swapVerify): the plan
	// passed, the RESTORE meets it.
	VerifySwap bool
}

// drawEstate draws an estate; always the same number of draws in the same
// order.
func drawEstate(r *rand.Rand) Estate {
	var e Estate
	for i := range estateInstances {
		builds := sourceBuilds
		if estateInstances[i] == Verify01 {
			builds = verifyBuilds
		}
		e.Build[i] = pick(r, builds)
		e.Zone[i] = pick(r, zones)
	}
	e.TDECert = r.IntN(4) != 0
	e.Spell = []int{SpellExact, SpellExact, SpellLower, SpellUpper, SpellTitle}[r.IntN(5)]
	e.EntryLower = r.IntN(3) == 0
	e.SourceCheckDB = r.IntN(3) == 0
	e.AGPrimary = agReplicas[r.IntN(len(agReplicas))]
	e.AGPreference = pick(r, agPreferences)
	e.AGReadable = r.IntN(2) == 0
	e.AGSync = pick(r, agSyncStates)
	e.Via = []string{AGroup, AGroup, agReplicas[0], agReplicas[1]}[r.IntN(4)]
	e.VerifySwap = r.IntN(10) == 0
	return e
}

// BuildOf is instance's build in the estate ("" for an instance outside it).
func (e Estate) BuildOf(instance string) string {
	if i := estateIndex(instance); i >= 0 {
		return e.Build[i]
	}
	return ""
}

// ZoneOf is instance's time zone in the estate.
func (e Estate) ZoneOf(instance string) string {
	if i := estateIndex(instance); i >= 0 {
		return e.Zone[i]
	}
	return "UTC"
}

// Group describes the availability group's roles and how the run names
// its database's instance.
func (e Estate) Group() string {
	s := fmt.Sprintf("primary %s, preference %s", e.AGPrimary, e.AGPreference)
	if e.AGReadable {
		s += ", secondary readable"
	}
	if e.AGSync != sqlsim.Synchronized {
		s += ", secondary " + e.AGSync
	}
	return s + ", started through " + e.Via
}

// major is the major version of a build ("16.0.4135.4": 16; 0 if none).
func major(build string) int {
	m, _, _ := strings.Cut(build, ".")
	n, _ := strconv.Atoi(m)
	return n
}

// spell is name spelled as the estate's starts spell it.
func spell(name string, how int) string {
	switch how {
	case SpellLower:
		return strings.ToLower(name)
	case SpellUpper:
		return strings.ToUpper(name)
	case SpellTitle:
		if name == "" {
			return name
		}
		return strings.ToUpper(name[:1]) + strings.ToLower(name[1:])
	}
	return name
}

// location loads a zone of the estate.
func location(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	return time.LoadLocation(name)
}

// ApplyEstate brings the fleet to e between runs (no cycle runs): instances
// restarted on their data in another build or zone, the TDE certificate
// installed on or dropped from verify01, the group's roles set, the
// configuration rewritten (and the workers restarted) when an entry's
// spelling changed. It returns what changed, for the run's notes.
func (f *Fleet) ApplyEstate(ctx context.Context, e Estate) ([]string, error) {
	var changed []string
	restart := map[string]bool{}
	for i, name := range estateInstances {
		if f.estate.Build[i] != e.Build[i] || f.estate.Zone[i] != e.Zone[i] {
			restart[name] = true
		}
	}
	// A replica is restarted with its partner: the group is built again on
	// both (an instance is a replica of one group value at a time).
	if restart[agReplicas[0]] || restart[agReplicas[1]] {
		restart[agReplicas[0]], restart[agReplicas[1]] = true, true
	}
	for _, name := range estateInstances {
		if !restart[name] {
			continue
		}
		i := estateIndex(name)
		if err := f.restartInstance(name, e.Build[i], e.Zone[i]); err != nil {
			return changed, err
		}
		changed = append(changed, fmt.Sprintf("%s %s %s", name, e.Build[i], e.Zone[i]))
	}
	if restart[agReplicas[0]] || f.group == nil {
		if err := f.buildGroup(e); err != nil {
			return changed, err
		}
	}
	if err := f.setRoles(e); err != nil {
		return changed, err
	}
	if f.estate.TDECert != e.TDECert || !f.estateSet {
		v := f.Instances[Verify01]
		has := false
		for _, c := range f.certsOnVerify() {
			has = has || strings.EqualFold(c, f.tdeCert.Name)
		}
		switch {
		case e.TDECert && !has:
			if err := v.ImportCertificate(f.tdeCert); err != nil {
				return changed, err
			}
			changed = append(changed, Verify01+" got the TDE certificate")
		case !e.TDECert && has:
			if err := v.DropCertificate(f.tdeCert.Name); err != nil {
				return changed, err
			}
			changed = append(changed, Verify01+" lost the TDE certificate")
		}
	}
	if f.estate.EntryLower != e.EntryLower || !f.estateSet {
		f.entryLower = e.EntryLower
		if err := f.writeConfig(); err != nil {
			return changed, err
		}
		if f.estateSet {
			// The workers read the configuration when they start.
			if err := f.RestartWorkers(); err != nil {
				return changed, err
			}
		}
		changed = append(changed, fmt.Sprintf("entry %q", f.entryName(TDETarget)))
	}
	f.estate, f.estateSet = e, true
	return changed, nil
}

// certsOnVerify are the names of master's certificates on verify01.
func (f *Fleet) certsOnVerify() []string {
	db, err := f.DB(Verify01)
	if err != nil {
		return nil
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT name FROM master.sys.certificates")
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if rows.Scan(&n) == nil {
			out = append(out, n)
		}
	}
	return out
}

// instanceConfig is the emulator configuration of instance name in a build
// and zone.
func (f *Fleet) instanceConfig(name, build, zone string) (sqlsim.Config, error) {
	loc, err := location(zone)
	if err != nil {
		return sqlsim.Config{}, err
	}
	sh := map[string]string{UNC(Bak01): f.dirs[Bak01], UNC(Bak02): f.dirs[Bak02]}
	if name == Verify01 {
		sh[`D:\restore`] = f.dirs["restore"]
	}
	if name == LogTarget.Instance {
		// A DBA's own log backups (FaultForeignLog) go here: a disk of
		// the source that no worker reaches.
		sh[dbaDisk] = f.dirs["dba"]
	}
	return sqlsim.Config{Name: name, DataDir: f.dirs[name], Logins: map[string]string{"sa": f.passwords[passwordEnv(name)]}, Shares: sh,
		ProductVersion: build, TimeZone: loc}, nil
}

func passwordEnv(instance string) string {
	return "BC_CHAOS_" + strings.ToUpper(instance) + "_PASSWORD"
}

// restartInstance stops instance and starts it again on its data and
// address as build in zone (an upgrade, a rebuilt host, a time zone or DST
// change); its statement log is kept for the checker.
func (f *Fleet) restartInstance(name, build, zone string) error {
	cfg, err := f.instanceConfig(name, build, zone)
	if err != nil {
		return err
	}
	old := f.Instances[name]
	cfg.ListenAddr = old.Addr()
	f.retire(name, old)
	if err := old.Stop(); err != nil {
		return fmt.Errorf("chaos: stop %s: %w", name, err)
	}
	in, err := sqlsim.New(cfg)
	if err != nil {
		return err
	}
	if err := in.Start(); err != nil {
		return fmt.Errorf("chaos: start %s as %s in %s: %w", name, build, zone, err)
	}
	in.SetThrottle(f.opts.Throttle)
	f.Instances[name] = in
	return nil
}

// retire keeps what the checker reads of an instance's statement log before
// the instance is replaced: its BACKUP, RESTORE and CHECKDB statements.
func (f *Fleet) retire(name string, in *sqlsim.Instance) {
	for _, st := range in.Statements() {
		switch st.Kind {
		case "BACKUP DATABASE", "RESTORE DATABASE", "DBCC CHECKDB":
			f.retired[name] = append(f.retired[name], st)
		}
	}
}

// Statements are the BACKUP, RESTORE and CHECKDB statements of instance's
// earlier lives and every statement of its current one, oldest first.
func (f *Fleet) Statements(instance string) []sqlsim.StatementRecord {
	in := f.Instances[instance]
	if in == nil {
		return nil
	}
	return append(append([]sqlsim.StatementRecord(nil), f.retired[instance]...), in.Statements()...)
}

// buildGroup makes the availability group over the source instances as
// they run now, its database in it.
func (f *Fleet) buildGroup(e Estate) error {
	g, err := sqlsim.NewAvailabilityGroup(AGName, e.AGPreference)
	if err != nil {
		return err
	}
	for _, name := range agReplicas {
		if err := g.AddReplica(f.Instances[name], sqlsim.ReplicaOptions{Primary: name == e.AGPrimary, Readable: e.AGReadable}); err != nil {
			return err
		}
	}
	if err := g.AddDatabase(AGDatabase); err != nil {
		return err
	}
	f.group = g
	return nil
}

// setRoles turns the group to e's roles: a fail-over, the preference, the
// secondary's read access and synchronization state.
func (f *Fleet) setRoles(e Estate) error {
	g := f.group
	if err := g.Failover(f.Instances[e.AGPrimary]); err != nil {
		return err
	}
	if err := g.SetPreference(e.AGPreference); err != nil {
		return err
	}
	for _, name := range agReplicas {
		if err := g.SetReadable(f.Instances[name], e.AGReadable); err != nil {
			return err
		}
		state := sqlsim.Synchronized
		if name != e.AGPrimary {
			state = e.AGSync
		}
		if err := g.SetSynchronizationState(f.Instances[name], AGDatabase, state); err != nil {
			return err
		}
	}
	return nil
}

// IntegrityCheck is a DBA's nightly DBCC CHECKDB of a source database: the
// database's LastGoodCheckDbTime, on the source's clock, goes into the next
// backup and from there into the verification copy.
func (f *Fleet) IntegrityCheck(ctx context.Context, instance, db string) error {
	q := "[" + strings.ReplaceAll(db, "]", "]]") + "]"
	return f.exec(ctx, instance, "DBCC CHECKDB("+q+") WITH NO_INFOMSGS")
}

// unreadableWhy says why verify01 cannot read the sets the run's cycle
// makes in estate e, source the instance it backs up on ("" when it can).
func unreadableWhy(p Plan, e Estate, source string) string {
	if v, w := major(e.BuildOf(Verify01)), major(e.BuildOf(source)); source != "" && v < w {
		return fmt.Sprintf("%s %s older than %s %s", Verify01, e.BuildOf(Verify01), source, e.BuildOf(source))
	}
	if p.Target.Database == TDETarget && !e.TDECert {
		return Verify01 + " without the TDE certificate"
	}
	return ""
}

// swapVerify makes the verification instance unable to read the set the
// run's cycle is copying, after its plan asked it: the TDE certificate
// dropped (the set is encrypted), or the instance rebuilt on a build older
// than the one writing the set. The RESTORE must meet it as the
// environment (InvalidConfig), the set stay copied for a resume (I8).
func (s *Sim) swapVerify(r *run) {
	r.swapped = true
	f := s.F
	e := f.estate
	switch {
	case r.plan.Target.Database == TDETarget && e.TDECert:
		if err := f.Instances[Verify01].DropCertificate(f.tdeCert.Name); err != nil {
			r.note("swap: drop the certificate on %s: %v", Verify01, err)
			return
		}
		e.TDECert = false
		r.note("estate: during the copy, %s lost the TDE certificate", Verify01)
	default:
		older := ""
		for _, w := range sourceBuilds {
			b := w.v
			if major(b) < major(e.BuildOf(r.source)) && major(b) < major(e.BuildOf(Verify01)) && (older == "" || major(b) > major(older)) {
				older = b
			}
		}
		if older == "" {
			r.note("swap: no build older than %s's %s to rebuild %s on", r.source, e.BuildOf(r.source), Verify01)
			return
		}
		i := estateIndex(Verify01)
		if err := f.restartInstance(Verify01, older, e.Zone[i]); err != nil {
			r.note("swap: %v", err)
			return
		}
		e.Build[i] = older
		if r.armedOn == Verify01 && !r.injected {
			// The fault armed on the instance goes with the new one.
			in := f.Instances[Verify01]
			var err error
			if r.plan.Fault == FaultSQLCrash {
				err = in.CrashAt(r.armedOp, r.plan.Percent)
			} else {
				r.dropsBefore = dropped(in)
				err = in.DropConnectionAt(r.armedOp, r.plan.Percent)
			}
			if err != nil {
				r.note("swap: arm %s again: %v", Verify01, err)
			}
		}
		r.note("estate: during the copy, %s rebuilt on %s", Verify01, older)
	}
	f.estate = e
	s.C.EstateFrom(time.Now(), e)
	r.unreadable = unreadableWhy(r.plan, e, r.source)
}
