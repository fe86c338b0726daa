// Package status answers "when was this database last proven restorable?"
// from the manifests on the backup servers: they are the durable record of
// every cycle, while Temporal's visibility forgets runs after the namespace
// retention. Summarize is a pure function over manifests; Load reads them
// from every configured backup server.
package status

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
)

// Objectives of one database. RTO 0 means none.
type Objectives struct {
	RPO Duration `json:"rpo_seconds"`
	RTO Duration `json:"rto_seconds,omitempty"`
	// With log backups the rpo is judged against the point the log chain
	// is proven to, not the newest verified set's age.
	LogObjectives
	// ImmutableCopy is the object store that keeps a locked copy of every
	// verified set (immutable_copy); "" for none.
	ImmutableCopy string `json:"immutable_copy,omitempty"`
	// ImmutableWithin is how long a verified set may wait for its copy
	// there (immutable_within); SetKept how long the backup servers keep
	// a set (keep_verified x rpo), which the copy's lock must outlast.
	ImmutableWithin Duration `json:"immutable_within_seconds,omitempty"`
	SetKept         Duration `json:"set_kept_seconds,omitempty"`
	// Drills: the last drill is judged against rto and drill.max_age.
	DrillObjectives
	// DiffEvery is diff_backup.every: the database takes differentials.
	DiffEvery Duration `json:"diff_every_seconds,omitempty"`
}

// Target is a configured database and its objectives.
type Target struct {
	Instance, Database string
	Objectives
}

// Found is one manifest as read from one backup server.
type Found struct {
	Server   string
	Manifest *catalog.Manifest
}

// Verified is the newest verified set of a database (a full), or the
// newest verified differential on it.
type Verified struct {
	Sequence   int64     `json:"sequence"`
	TakenAt    time.Time `json:"taken_at"`    // the instant the BACKUP finished (catalog.Manifest.TakenAt)
	VerifiedAt time.Time `json:"verified_at"` // when the set reached verified
	Age        Duration  `json:"age_seconds"` // now - TakenAt: the data a restore would lose
	// OffsetUnknown: the manifest predates recording the source's offset
	// from UTC, so TakenAt is the source's wall clock read as UTC and Age
	// may be off by that offset (until a newer set is verified).
	OffsetUnknown bool `json:"taken_at_offset_unknown,omitempty"`
	// Servers hold the set with a manifest saying verified: where the copies are.
	Servers []string `json:"servers"`
	// Restore and CheckDB are the measured step times; TimeToRecover is their
	// sum, 0 when the manifest has no restore timing. A differential's
	// restore step restored its base too: to the point it reaches.
	Restore        Duration `json:"restore_seconds"`
	CheckDB        Duration `json:"checkdb_seconds"`
	TimeToRecover  Duration `json:"time_to_recover_seconds"`
	VerifyInstance string   `json:"verify_instance,omitempty"` // from the restore proof
	// Predicted is what the plan predicts for this set's restore and
	// CHECKDB, beside the measured times above; nil without the set's size.
	Predicted *Prediction `json:"predicted,omitempty"`
	// Immutable is the set's copy on an object store, once one was tried.
	Immutable *Immutable `json:"immutable,omitempty"`
	// Base is a differential's base set; 0 for a full.
	Base int64 `json:"base,omitempty"`
}

// Failure is the newest failed or cancelled set taken after the last
// verified one.
type Failure struct {
	Sequence int64         `json:"sequence"`
	State    catalog.State `json:"state"` // failed or cancelled
	Step     catalog.Step  `json:"step"`
	// Type is the evidence of a failed set (corrupt_backup, checkdb_failed,
	// ...) or "cancelled".
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
	TakenAt time.Time `json:"taken_at"`
	Servers []string  `json:"servers"`
	// Base is a failed differential's base set; 0 for a full.
	Base int64 `json:"base,omitempty"`
}

// Unauthenticated is a set of a database whose manifests are not
// authenticated (catalog.Manifest.Trusted: a manifest key is configured
// and no worker's signature verifies): what they claim is shown, and
// counted for nothing.
type Unauthenticated struct {
	Sequence int64         `json:"sequence"`
	State    catalog.State `json:"state"`   // what the manifest claims
	Auth     catalog.Auth  `json:"auth"`    // unsigned or invalid
	Servers  []string      `json:"servers"` // where such a manifest of the set is
}

// Database is the answer for one (instance, database).
type Database struct {
	Instance   string `json:"instance"`
	Database   string `json:"database"`
	Configured bool   `json:"configured"` // listed in the config (else found only in manifests)
	Objectives
	// LastVerified is the newest verified full (nil: never verified): a
	// restore starts from it. LastDifferential is the newest verified
	// differential on it (diff_backup), whose point the rpo and rto are
	// judged by when there is one.
	LastVerified     *Verified `json:"last_verified"`
	LastDifferential *Verified `json:"last_differential,omitempty"`
	LastFailure      *Failure  `json:"last_failure,omitempty"`
	// Unauthenticated are the sets whose manifests are not authenticated,
	// newest number first; they count for nothing above.
	Unauthenticated []Unauthenticated `json:"unauthenticated,omitempty"`
	// OutOfObjectives is true when the database has no verified set, its age
	// exceeds the RPO or its time to recover exceeds the RTO; Reasons say which.
	OutOfObjectives bool     `json:"out_of_objectives"`
	Reasons         []string `json:"reasons,omitempty"`
	// LogChain is the database's log chain, when it has log backups.
	LogChain *LogChain `json:"log_chain,omitempty"`
	// LastDrill is the newest recovery drill, for a database with drill.
	LastDrill *LastDrill `json:"last_drill,omitempty"`
	// ImmutableMissing are the verified sets, oldest first, that have
	// waited longer than immutable_within for their immutable copy (each
	// also a reason).
	ImmutableMissing []int64 `json:"immutable_missing,omitempty"`
	// ImmutableWaitingSince is when the oldest verified set still kept
	// without a copy that counts (the same rule as ImmutableMissing,
	// whatever its age) was verified; zero when every one has its copy.
	// Its age above immutable_within is what puts a set in
	// ImmutableMissing.
	ImmutableWaitingSince time.Time `json:"immutable_waiting_since,omitzero"`
	// ImmutableProven is the newest passed drill from the immutable copy
	// (nil: none recorded).
	ImmutableProven *ImmutableProven `json:"immutable_proven,omitempty"`
}

// Duration marshals to JSON as seconds (a number monitoring can compare).
type Duration time.Duration

// MarshalJSON writes the duration in seconds.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).Seconds()) }

// UnmarshalJSON reads seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s float64
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration in seconds: %w", err)
	}
	*d = Duration(s * float64(time.Second))
	return nil
}

// String rounds to the second (minutes above an hour) and drops zero
// units: 26h, 4h30m, 9m, 12s.
func (d Duration) String() string {
	t := time.Duration(d)
	if t >= time.Hour {
		t = t.Round(time.Minute)
	} else {
		t = t.Round(time.Second)
	}
	s := t.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// TargetsOf lists the configured databases with their objectives, and the
// objectives of databases found only in manifests (the defaults).
func TargetsOf(c *config.Config) ([]Target, Objectives) {
	def := Objectives{RPO: Duration(config.DefaultRPO)}
	if c == nil {
		return nil, def
	}
	if c.Defaults.RPO > 0 {
		def = Objectives{RPO: Duration(c.Defaults.RPO), RTO: Duration(c.Defaults.RTO)}
	}
	out := make([]Target, 0, len(c.Databases))
	for _, db := range c.Databases {
		o := Objectives{RPO: Duration(db.RPO), RTO: Duration(db.RTO)}
		if o.RPO <= 0 {
			o.RPO = def.RPO
		}
		if db.LogBackups() {
			o.LogObjectives = LogObjectives{Every: Duration(db.LogBackup.Every), ProofMode: db.ProofMode(), ProofLag: Duration(db.ProofLag())}
		}
		if o.ImmutableCopy = db.ImmutableCopy; o.ImmutableCopy != "" {
			o.ImmutableWithin, o.SetKept = Duration(db.ImmutableDeadline()), Duration(db.SetKept())
		}
		if db.Drills() {
			o.DrillObjectives = DrillObjectives{DrillEvery: Duration(db.Drill.Every), DrillMaxAge: Duration(db.DrillMaxAge()), DrillFrom: db.Drill.From}
		}
		o.DiffEvery = Duration(db.DiffBackup.Every)
		out = append(out, Target{Instance: db.Instance, Database: db.Name, Objectives: o})
	}
	return out, def
}

type key struct{ instance, database string }

// setID is one set of a database: its number under the instance key it
// was written by (a database of an availability group also has the sets
// its replicas wrote before the group was configured, whose numbers may
// repeat between replicas).
type setID struct {
	instance string
	seq      int64
}

// Aliases maps the instance keys the sets of an availability group's
// databases may have been written under before the group was configured
// (its replicas and aliases) to the group's name.
type Aliases map[string]string

// AliasesOf are c's availability groups' aliases.
func AliasesOf(c *config.Config) Aliases {
	out := Aliases{}
	if c == nil {
		return out
	}
	for _, g := range c.AvailabilityGroups {
		for _, a := range g.Former() {
			out[a] = g.Name
		}
	}
	return out
}

// of are the aliases of group.
func (a Aliases) of(group string) []string {
	var out []string
	for k, g := range a {
		if g == group {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// set is one backup set as seen on every server that has its manifest.
// An untrusted manifest makes a set of its own (untrusted), never the
// trusted one's.
type set struct {
	best    *catalog.Manifest // the most advanced copy of the manifest
	servers map[catalog.State][]string
}

// setKey is a set of a database: trusted or not.
type setKey struct {
	setID
	untrusted bool
}

// Summarize answers for every target and every (instance, database) found
// in the manifests, sorted by instance then database. A database found only
// in manifests gets the default objectives. A set recorded under the
// database's sys.databases spelling with the databases: entry spelled
// otherwise (Manifest.Entry: the entry sales for the database Sales of a
// case-insensitive instance) counts for that entry. now is the clock ages
// are measured with.
func Summarize(now time.Time, targets []Target, defaults Objectives, found []Found) []Database {
	return SummarizeWith(now, targets, defaults, found, nil)
}

// SummarizeWith is Summarize where the sets a database of an availability
// group's replica (or alias) wrote before the group was configured count
// for the group's database of that name, when the group has it (configured
// or found in manifests): one line per (group, database), as its cycles
// see it. A database of that instance that is no group database (none of
// the group's name) keeps its own line.
func SummarizeWith(now time.Time, targets []Target, defaults Objectives, found []Found, aliases Aliases) []Database {
	return SummarizeAll(now, targets, defaults, found, aliases, nil)
}

// SummarizeAll is SummarizeWith that also judges the log chain of every
// configured database with log backups from its chain records (chains,
// any server's): the point it is proven to against its rpo, logs
// unproven past log_proof_lag, a broken chain or a hole.
func SummarizeAll(now time.Time, targets []Target, defaults Objectives, found []Found, aliases Aliases, chains []FoundChain) []Database {
	byDB := map[key][]FoundChain{}
	for _, c := range chains {
		k := key{c.Record.SourceInstance, c.Record.Database}
		byDB[k] = append(byDB[k], c)
	}
	objectives := map[key]Objectives{}
	configured := map[key]bool{}
	for _, t := range targets {
		k := key{t.Instance, t.Database}
		objectives[k], configured[k] = t.Objectives, true
	}
	sets := map[key]map[setKey]*set{}
	for _, f := range found {
		m := f.Manifest
		if m == nil {
			continue
		}
		k := key{m.SourceInstance, m.Database}
		if e := (key{m.SourceInstance, m.Entry}); m.Entry != "" && configured[e] {
			k = e
		}
		if sets[k] == nil {
			sets[k] = map[setKey]*set{}
		}
		id := setKey{setID{m.SourceInstance, m.Sequence}, !m.Trusted()}
		s := sets[k][id]
		if s == nil {
			s = &set{servers: map[catalog.State][]string{}}
			sets[k][id] = s
		}
		s.servers[m.State] = append(s.servers[m.State], f.Server)
		if s.best == nil || advanced(m, s.best) {
			s.best = m
		}
	}
	for k, ss := range sets {
		g := aliases[k.instance]
		gk := key{g, k.database}
		if g == "" || !configured[gk] && sets[gk] == nil {
			continue
		}
		if sets[gk] == nil {
			sets[gk] = map[setKey]*set{}
		}
		for id, s := range ss {
			sets[gk][id] = s
		}
		delete(sets, k)
	}
	keys := make([]key, 0, len(configured)+len(sets))
	for k := range configured {
		keys = append(keys, k)
	}
	for k := range sets {
		if !configured[k] {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].instance != keys[j].instance {
			return keys[i].instance < keys[j].instance
		}
		return keys[i].database < keys[j].database
	})
	out := make([]Database, 0, len(keys))
	for _, k := range keys {
		o, ok := objectives[k]
		if !ok {
			o = defaults
		}
		out = append(out, summarizeOne(now, k, configured[k], o, sets[k], aliases.of(k.instance), byDB[k]))
	}
	return out
}

// advanced reports whether manifest a of a set says more than b: verified
// beats every other state, then the copy with a restore proof and timings.
func advanced(a, b *catalog.Manifest) bool {
	if (a.State == catalog.StateVerified) != (b.State == catalog.StateVerified) {
		return a.State == catalog.StateVerified
	}
	if (a.Proof != nil) != (b.Proof != nil) {
		return a.Proof != nil
	}
	if len(a.Timings) != len(b.Timings) {
		return len(a.Timings) > len(b.Timings)
	}
	// The immutable copy is recorded after verified, without a transition.
	if ai, bi := a.Immutable, b.Immutable; (ai != nil) != (bi != nil) || ai != nil && !ai.At.Equal(bi.At) {
		return bi == nil || ai != nil && ai.At.After(bi.At)
	}
	return a.UpdatedAt.After(b.UpdatedAt)
}

func summarizeOne(now time.Time, k key, configured bool, o Objectives, sets map[setKey]*set, former []string, chains []FoundChain) Database {
	d := Database{Instance: k.instance, Database: k.database, Configured: configured, Objectives: o}
	var lastOK, lastDiff, lastBad *set
	trusted := map[setID]*set{}
	for id, s := range sets {
		m := s.best
		if id.untrusted {
			d.Unauthenticated = append(d.Unauthenticated, unauthenticatedOf(s))
			continue
		}
		trusted[id.setID] = s
		switch {
		case m.State == catalog.StateVerified && !m.IsDifferential():
			if lastOK == nil || m.Newer(lastOK.best) {
				lastOK = s
			}
		case m.State == catalog.StateFailed || m.State == catalog.StateCancelled:
			if lastBad == nil || m.Newer(lastBad.best) {
				lastBad = s
			}
		}
	}
	sort.Slice(d.Unauthenticated, func(i, j int) bool { return d.Unauthenticated[i].Sequence > d.Unauthenticated[j].Sequence })
	newest := lastOK
	if lastOK != nil {
		d.LastVerified = verifiedOf(now, lastOK)
		d.LastVerified.Predicted = predict(k, lastOK, trusted, former)
		// Only a differential of the newest verified full counts: one of
		// an older full restores only on that full.
		for id, s := range trusted {
			m := s.best
			if m.State == catalog.StateVerified && m.IsDifferential() && id.instance == lastOK.best.SourceInstance &&
				m.Differential.Sequence == lastOK.best.Sequence && (lastDiff == nil || m.Newer(lastDiff.best)) {
				lastDiff = s
			}
		}
		if lastDiff != nil && lastDiff.best.Newer(lastOK.best) {
			d.LastDifferential, newest = verifiedOf(now, lastDiff), lastDiff
		}
	}
	// A failure older than the last verified set is history, not news.
	if lastBad != nil && (newest == nil || lastBad.best.Newer(newest.best)) {
		d.LastFailure = failureOf(lastBad)
	}
	v, what := d.LastVerified, "last verified set"
	if d.LastDifferential != nil {
		v, what = d.LastDifferential, fmt.Sprintf("last verified differential (on set %d)", d.LastDifferential.Base)
	}
	switch {
	case v == nil && len(d.Unauthenticated) > 0:
		d.Reasons = append(d.Reasons, fmt.Sprintf("no authenticated verified backup set on any backup server (the manifests of %d set(s) are not authenticated and count for nothing)",
			len(d.Unauthenticated)))
	case v == nil && o.DiffEvery > 0:
		d.Reasons = append(d.Reasons, "no verified backup set on any backup server: differentials (diff_backup) wait for a verified full")
	case v == nil:
		d.Reasons = append(d.Reasons, "no verified backup set on any backup server")
	default:
		if o.RPO > 0 && v.Age > o.RPO && o.Every <= 0 {
			d.Reasons = append(d.Reasons, fmt.Sprintf("%s is %s old, above the RPO of %s", what, v.Age, o.RPO))
		}
		if o.RTO > 0 && v.TimeToRecover > o.RTO {
			d.Reasons = append(d.Reasons, fmt.Sprintf("measured time to recover %s is above the RTO of %s", v.TimeToRecover, o.RTO))
		}
	}
	if configured && o.Every > 0 {
		verified := map[string]bool{}
		for _, s := range trusted {
			if m := s.best; m.State == catalog.StateVerified && !m.IsDifferential() && m.Header != nil && m.Header.BackupSetGUID != "" {
				verified[strings.ToUpper(m.Header.BackupSetGUID)] = true
			}
		}
		judgeLogs(now, &d, chains, verified)
	}
	if configured && o.ImmutableCopy != "" && o.ImmutableWithin > 0 {
		judgeImmutableCopies(now, &d, trusted)
	}
	d.OutOfObjectives = len(d.Reasons) > 0
	return d
}

func verifiedOf(now time.Time, s *set) *Verified {
	m := s.best
	v := &Verified{Sequence: m.Sequence, TakenAt: m.TakenAt(), VerifiedAt: m.VerifiedAt(), OffsetUnknown: !m.TakenAtKnown(),
		Servers: sorted(s.servers[catalog.StateVerified])}
	if m.IsDifferential() {
		v.Base = m.Differential.Sequence
	}
	if v.VerifiedAt.IsZero() {
		v.VerifiedAt = m.UpdatedAt
	}
	if age := now.Sub(v.TakenAt); age > 0 {
		v.Age = Duration(age)
	}
	if t, ok := m.Timings[catalog.StepRestore]; ok {
		v.Restore = seconds(t.DurationSeconds)
		v.CheckDB = seconds(m.Timings[catalog.StepCheckDB].DurationSeconds)
		v.TimeToRecover = v.Restore + v.CheckDB
	}
	if m.Proof != nil {
		v.VerifyInstance = m.Proof.VerifyInstance
	}
	v.Immutable = immutableOf(m)
	return v
}

// unauthenticatedOf is an untrusted set as its manifests claim it.
func unauthenticatedOf(s *set) Unauthenticated {
	u := Unauthenticated{Sequence: s.best.Sequence, State: s.best.State, Auth: s.best.Auth}
	for _, servers := range s.servers {
		u.Servers = append(u.Servers, servers...)
	}
	sort.Strings(u.Servers)
	u.Servers = slices.Compact(u.Servers)
	return u
}

func failureOf(s *set) *Failure {
	m := s.best
	f := &Failure{Sequence: m.Sequence, State: m.State, TakenAt: m.TakenAt()}
	if m.IsDifferential() {
		f.Base = m.Differential.Sequence
	}
	rec := m.Failure
	if m.State == catalog.StateCancelled {
		rec, f.Type = m.Cancelled, "cancelled"
	}
	if rec != nil {
		f.Step, f.Reason, f.At = rec.Step, rec.Reason, rec.At
		if f.Type == "" {
			f.Type = string(rec.Evidence)
		}
	}
	f.Servers = sorted(s.servers[m.State])
	return f
}

func seconds(s float64) Duration { return Duration(s * float64(time.Second)) }

func sorted(in []string) []string {
	out := append([]string{}, in...)
	sort.Strings(out)
	return out
}
