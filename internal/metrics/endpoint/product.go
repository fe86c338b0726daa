package endpoint

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/metrics"
	"github.com/backupcycle/backupcycle/internal/status"
)

// Names of the product's metrics as Prometheus shows them; the alert rules
// (deploy/prometheus/alerts.yml) use these and a test keeps them in step.
const (
	BackupBytes    = "backupcycle_backup_bytes_total"
	CopyBytes      = "backupcycle_copy_bytes_total"
	StepDuration   = "backupcycle_step_duration_seconds"
	SetsFailed     = "backupcycle_sets_failed_total"
	LastVerified   = "backupcycle_last_verified_timestamp_seconds"
	TimeToRecover  = "backupcycle_time_to_recover_seconds"
	RPO            = "backupcycle_rpo_seconds"
	RTO            = "backupcycle_rto_seconds"
	LastFailure    = "backupcycle_last_failure_timestamp_seconds"
	ManifestsRead  = "backupcycle_manifests_read_timestamp_seconds"
	ServerReadable = "backupcycle_backup_server_readable"
	Unauthentic    = "backupcycle_unauthenticated_sets"
	SourceDamaged  = "backupcycle_source_damaged_total"
	EvidenceMissed = "backupcycle_evidence_not_recorded_total"
	LastProvenLog  = "backupcycle_last_proven_log_timestamp_seconds"
	LogChainBroken = "backupcycle_log_chain_broken"
	StoreImmutable = "backupcycle_object_store_immutable"
	StoreProbedAt  = "backupcycle_object_store_probe_timestamp_seconds"
	LastDrill      = "backupcycle_last_drill_timestamp_seconds"
	LastDrillRTO   = "backupcycle_last_drill_rto_seconds"
	LastDrillOK    = "backupcycle_last_drill_ok"
	DrillMaxAge    = "backupcycle_drill_max_age_seconds"
	// ImmutableProven is when the immutable copy was last proven
	// restorable: the newest passed drill from it.
	ImmutableProven = "backupcycle_immutable_proven_timestamp_seconds"
	// ImmutableMissingAge is how long the oldest verified set still kept
	// has waited for its immutable copy (status's rule); ImmutableWithin
	// how long it may.
	ImmutableMissingAge = "backupcycle_immutable_copy_missing_age_seconds"
	ImmutableWithin     = "backupcycle_immutable_within_seconds"
	CyclesEnded         = metrics.CycleCounter + "_total" // through the SDK's handler
)

// DefaultRefresh is how often Watch reads the manifests again: they change
// when a cycle of another worker ends, and a read lists every backup server.
const DefaultRefresh = 5 * time.Minute

// stepBuckets cover a step of a few seconds (a tiny database) to most of a
// day (a multi-terabyte CHECKDB).
var stepBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 57600, 86400}

// Product holds the product's own metrics: what the activities measure
// (metrics.Recorder) and what the manifests on the backup servers say
// (Refresh, Watch). Its methods may be called on a nil *Product and then
// record nothing.
type Product struct {
	backupBytes, copyBytes *prometheus.CounterVec
	stepDuration           *prometheus.HistogramVec
	setsFailed             *prometheus.CounterVec
	sourceDamaged          *prometheus.CounterVec
	evidenceMissed         *prometheus.CounterVec
	state                  *manifestState
}

var _ metrics.Recorder = (*Product)(nil)

func newProduct() *Product {
	dbServer := []string{"instance", "database", "server"}
	return &Product{
		backupBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: BackupBytes,
			Help: "Bytes of the backup sets written to a backup server (the set's size when its BACKUP finished)."}, dbServer),
		copyBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: CopyBytes,
			Help: "Bytes of the backup sets copied to a remote backup server (the set's size when its copy was verified)."}, dbServer),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: StepDuration,
			Help:    "Duration of the successful steps of a cycle: backup, copy, restore, checkdb.",
			Buckets: stepBuckets}, []string{"step"}),
		setsFailed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: SetsFailed,
			Help: "Backup sets marked failed on evidence about their content, by step and evidence (corrupt_backup, checkdb_failed, ...)."},
			[]string{"step", "evidence"}),
		sourceDamaged: prometheus.NewCounterVec(prometheus.CounterOpts{Name: SourceDamaged,
			Help: "BACKUPs that met damage in the source database itself (a page failing its checksum, a data file the disk could not read)."},
			[]string{"instance", "database"}),
		evidenceMissed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: EvidenceMissed,
			Help: "Proofs (verified sets, log proofs, drills) whose evidence record could not be appended to a backup server's ledger; the proof itself stands."},
			dbServer),
		state: newManifestState(),
	}
}

func (p *Product) collectors() []prometheus.Collector {
	return []prometheus.Collector{p.backupBytes, p.copyBytes, p.stepDuration, p.setsFailed, p.sourceDamaged, p.evidenceMissed, p.state}
}

// StepDone records a finished step (metrics.Recorder).
func (p *Product) StepDone(step, instance, database, server string, bytes int64, took time.Duration) {
	if p == nil {
		return
	}
	if o, err := p.stepDuration.GetMetricWithLabelValues(step); err == nil {
		o.Observe(took.Seconds())
	}
	var bytesTo *prometheus.CounterVec
	switch step {
	case metrics.StepBackup:
		bytesTo = p.backupBytes
	case metrics.StepCopy:
		bytesTo = p.copyBytes
	default:
		return
	}
	// GetMetricWithLabelValues rather than WithLabelValues: a label value
	// Prometheus refuses (not UTF-8) loses one sample instead of panicking
	// in an activity.
	if c, err := bytesTo.GetMetricWithLabelValues(instance, database, server); err == nil {
		c.Add(float64(max(bytes, 0)))
	}
}

// Verified moves the database's last verified set forward at once, without
// waiting for the next read of the manifests (metrics.Recorder).
func (p *Product) Verified(instance, database string, takenAt time.Time, timeToRecover time.Duration) {
	if p == nil {
		return
	}
	p.state.verified(instance, database, takenAt, timeToRecover)
}

// SetFailed counts a set marked failed (metrics.Recorder).
func (p *Product) SetFailed(step, evidence string) {
	if p == nil {
		return
	}
	if c, err := p.setsFailed.GetMetricWithLabelValues(step, evidence); err == nil {
		c.Inc()
	}
}

// SourceDamaged counts a BACKUP that met damage in its source database
// (metrics.Recorder).
func (p *Product) SourceDamaged(instance, database string) {
	if p == nil {
		return
	}
	if c, err := p.sourceDamaged.GetMetricWithLabelValues(instance, database); err == nil {
		c.Inc()
	}
}

// EvidenceNotRecorded counts a proof whose evidence record was not
// appended to server's ledger (metrics.Recorder).
func (p *Product) EvidenceNotRecorded(instance, database, server string) {
	if p == nil {
		return
	}
	if c, err := p.evidenceMissed.GetMetricWithLabelValues(instance, database, server); err == nil {
		c.Inc()
	}
}

// ImmutableProbed records an object store's probe at once, without waiting
// for the next read of the manifests (metrics.Recorder).
func (p *Product) ImmutableProbed(server string, immutable bool, at time.Time) {
	if p == nil {
		return
	}
	p.state.probed(server, immutable, at)
}

// Refresh reads the manifests of every backup server of cfg (open nil means
// status.Open) and makes the per-database gauges say what they say. It
// returns the report it read.
func (p *Product) Refresh(ctx context.Context, cfg *config.Config, open status.OpenFunc) status.Report {
	if p == nil || cfg == nil {
		return status.Report{}
	}
	p.state.loading.Lock()
	defer p.state.loading.Unlock()
	p.state.beginLoad()
	r := status.Load(ctx, cfg, open, time.Now())
	p.state.apply(r, time.Now())
	return r
}

// Watch calls Refresh now and then every `every` until ctx ends, so the
// gauges are right after a worker restart and follow the cycles other
// workers finish. Each read is bounded by `every`; a backup server that
// cannot be read is logged and its databases keep their last known values.
func (p *Product) Watch(ctx context.Context, cfg *config.Config, every time.Duration, open status.OpenFunc, log *zap.Logger) {
	if p == nil || cfg == nil {
		return
	}
	if every <= 0 {
		every = DefaultRefresh
	}
	if log == nil {
		log = zap.NewNop()
	}
	t := time.NewTicker(every)
	defer t.Stop()
	named := map[[3]string]bool{} // broken manifests logged, once while they stay broken
	for {
		rctx, cancel := context.WithTimeout(ctx, every)
		r := p.Refresh(rctx, cfg, open)
		cancel()
		if ctx.Err() != nil {
			return
		}
		for _, s := range r.Incomplete() {
			log.Warn("metrics: backup server not read: its databases keep their last known values", zap.String("server", s.Name),
				zap.String("error", s.Error))
		}
		still := map[[3]string]bool{}
		for _, s := range r.Servers {
			for _, name := range slices.Sorted(maps.Keys(s.Broken)) {
				k := [3]string{s.Name, name, s.Broken[name]}
				still[k] = true
				if !named[k] {
					log.Warn("metrics: a manifest on the backup server cannot be read and is not counted: look at it", zap.String("server", s.Name),
						zap.String("file", name), zap.String("error", s.Broken[name]))
				}
			}
		}
		named = still
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// row is what the gauges say about one (instance, database).
type row struct {
	takenAt       time.Time // newest verified set's BACKUP finish; zero: never verified
	timeToRecover time.Duration
	rpo, rto      time.Duration
	failureAt     time.Time // newest failed/cancelled set after it; zero: none
	failureType   string
	unauthentic   int // sets whose manifests are not authenticated
	// logs: the database has log backups; provenTo is the point its chain
	// is proven to (zero: none), chainBroken says it ended or has a hole.
	logs        bool
	provenTo    time.Time
	chainBroken bool
	// drills: the database has drill; drillAt is its newest drill's end
	// (zero: none recorded), drillRTO its measured time to recover,
	// drillOK whether it passed; drillMaxAge is drill.max_age.
	drills      bool
	drillAt     time.Time
	drillRTO    time.Duration
	drillOK     bool
	drillMaxAge time.Duration
	// immutableProven is the end of the newest passed drill from the
	// immutable copy (zero: none recorded).
	immutableProven time.Time
	// immutableCopy is the database's immutable_copy ("" none),
	// immutableWithin its immutable_within; immutableWaiting is when the
	// oldest verified set still kept without its copy was verified (zero:
	// none).
	immutableCopy    string
	immutableWithin  time.Duration
	immutableWaiting time.Time
}

type dbKey struct{ instance, database string }

// manifestState is the gauges derived from the manifests, emitted as one
// consistent snapshot on every scrape.
type manifestState struct {
	loading sync.Mutex // one read of the manifests at a time

	mu      sync.Mutex
	rows    map[dbKey]row
	recent  map[dbKey]row // Verified calls since the current read began
	servers map[string]bool
	readAt  time.Time
	// stores are the object stores' newest probes.
	stores map[string]probe

	lastVerified, timeToRecover, rpo, rto, lastFailure, readTime, readable, unauthentic *prometheus.Desc
	lastProven, chainBroken                                                             *prometheus.Desc
	lastDrill, lastDrillRTO, lastDrillOK, drillMaxAge, immutableProven                  *prometheus.Desc
	storeImmutable, storeProbedAt                                                       *prometheus.Desc
	immutableMissingAge, immutableWithin                                                *prometheus.Desc
}

// probe is an object store's newest immutability probe.
type probe struct {
	immutable bool
	at        time.Time
}

func newManifestState() *manifestState {
	db := []string{"instance", "database"}
	return &manifestState{
		rows: map[dbKey]row{}, recent: map[dbKey]row{}, servers: map[string]bool{}, stores: map[string]probe{},
		lastVerified: prometheus.NewDesc(LastVerified,
			"Unix time the newest verified backup set of the database was taken (its BACKUP finished): the point a restore "+
				"returns to. time() minus it is the data a restore would lose; 0 when no set was ever verified. From the "+
				"manifests on the backup servers, and at once when a cycle marks a set verified.", db, nil),
		timeToRecover: prometheus.NewDesc(TimeToRecover,
			"Measured time to recover of the newest verified set: its restore plus CHECKDB, in seconds.", db, nil),
		rpo: prometheus.NewDesc(RPO, "Recovery point objective of the database (config rpo), in seconds.", db, nil),
		rto: prometheus.NewDesc(RTO, "Recovery time objective of the database (config rto), in seconds; absent when none is set.", db, nil),
		lastFailure: prometheus.NewDesc(LastFailure,
			"Unix time the newest failed or cancelled set of the database failed, when no set was verified after it; type is "+
				"the evidence (corrupt_backup, checkdb_failed, ...) or cancelled. From the manifests.",
			[]string{"instance", "database", "type"}, nil),
		readTime: prometheus.NewDesc(ManifestsRead,
			"Unix time the worker last finished reading the manifests of every backup server.", nil, nil),
		readable: prometheus.NewDesc(ServerReadable,
			"1 when the last read of the backup server's manifests succeeded, 0 when it could not be listed.", []string{"server"}, nil),
		unauthentic: prometheus.NewDesc(Unauthentic,
			"Backup sets of the database whose manifests are not authenticated (manifest_keys configured, and no worker's signature "+
				"verifies): written before the keys were configured, or by someone else. They count for nothing above.", db, nil),
		lastProven: prometheus.NewDesc(LastProvenLog,
			"Unix time the database's log chain is proven restorable to: a verified full and the unbroken run of log backups "+
				"after it restored on the verification instance (the start of the last of them). time() minus it is the data a "+
				"restore would lose; 0 when nothing is proven yet. Databases with log_backup only; from the chain records.", db, nil),
		chainBroken: prometheus.NewDesc(LogChainBroken,
			"1 when the database's log chain ended (a break: SIMPLE recovery, a foreign log backup) or has a hole after its newest "+
				"verified full, so that no restore reaches the present until the next full backup is verified; else 0. "+
				"Databases with log_backup only.", db, nil),
		lastDrill: prometheus.NewDesc(LastDrill,
			"Unix time the database's newest recovery drill ended (passed or failed), from the authenticated drill records on "+
				"the backup servers; 0 when none is recorded yet. Databases with drill only.", db, nil),
		lastDrillRTO: prometheus.NewDesc(LastDrillRTO,
			"Measured time to recover of the database's newest recovery drill: the Recover's start to the copy online, in "+
				"seconds. Absent while no drill reached that point.", db, nil),
		lastDrillOK: prometheus.NewDesc(LastDrillOK,
			"1 when the database's newest recovery drill passed (recovered, checked, its copy dropped), 0 when it failed. "+
				"Absent while no drill is recorded.", db, nil),
		drillMaxAge: prometheus.NewDesc(DrillMaxAge,
			"Age above which the database's last recovery drill is too old (config drill.max_age, default twice drill.every), "+
				"in seconds. Databases with drill only.", db, nil),
		immutableProven: prometheus.NewDesc(ImmutableProven,
			"Unix time the newest passed recovery drill from the database's immutable copy (drill.from immutable) ended: when "+
				"the copy on the object store was last proven restorable. Absent while none is recorded. Databases with drill only.", db, nil),
		storeImmutable: prometheus.NewDesc(StoreImmutable,
			"1 when the newest immutability probe of the object store (a kind: s3 backup server) found that a locked object "+
				"can be neither deleted, nor its lock shortened, nor overwritten with the worker's own credentials; 0 when one of "+
				"them went through: the immutable copies there are not immutable. Absent until the store was first probed.",
			[]string{"server"}, nil),
		immutableMissingAge: prometheus.NewDesc(ImmutableMissingAge,
			"Age in seconds of the oldest verified set of the database that the backup servers still keep and whose immutable "+
				"copy on its immutable_copy (server) is not recorded, failed, or locked too briefly (as starter status judges it), "+
				"counted from its verification; 0 when every one has its copy. Above immutable_within the database is RED. "+
				"Databases with immutable_copy only; from the manifests.", []string{"instance", "database", "server"}, nil),
		immutableWithin: prometheus.NewDesc(ImmutableWithin,
			"How long a verified set of the database may wait for its immutable copy on server (config immutable_within), "+
				"in seconds. Databases with immutable_copy only.", []string{"instance", "database", "server"}, nil),
		storeProbedAt: prometheus.NewDesc(StoreProbedAt,
			"Unix time of the object store's newest immutability probe (one a day while copies go there).", []string{"server"}, nil),
	}
}

func (s *manifestState) probed(server string, immutable bool, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.stores[server]; ok && old.at.After(at) {
		return
	}
	s.stores[server] = probe{immutable, at}
}

func (s *manifestState) beginLoad() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recent = map[dbKey]row{}
}

func (s *manifestState) verified(instance, database string, takenAt time.Time, ttr time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := dbKey{instance, database}
	r := s.rows[k]
	if takenAt.Before(r.takenAt) {
		return // an older set verified late: the newest stays
	}
	r.takenAt, r.timeToRecover = takenAt, ttr
	if !r.failureAt.IsZero() {
		r.failureAt, r.failureType = time.Time{}, "" // a failure before it is history
	}
	s.rows[k] = r
	s.recent[k] = r
}

// apply replaces the rows with what the report says, except where the
// report knows less: a set verified while it was being read, and the
// databases of a backup server that could not be read (their last known
// values stay, rather than an alert on a network hiccup).
func (s *manifestState) apply(r status.Report, at time.Time) {
	complete := len(r.Incomplete()) == 0
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[dbKey]row, len(r.Databases))
	for _, d := range r.Databases {
		k := dbKey{d.Instance, d.Database}
		n := row{rpo: time.Duration(d.RPO), rto: time.Duration(d.RTO)}
		if v := d.LastVerified; v != nil {
			n.takenAt, n.timeToRecover = v.TakenAt, time.Duration(v.TimeToRecover)
		}
		// The newest point a restore reaches: a differential on that full
		// (its restore step restored both), as status judges it.
		if v := d.LastDifferential; v != nil {
			n.takenAt, n.timeToRecover = v.TakenAt, time.Duration(v.TimeToRecover)
		}
		if f := d.LastFailure; f != nil {
			n.failureAt, n.failureType = f.At, f.Type
		}
		n.unauthentic = len(d.Unauthenticated)
		if l := d.LogChain; l != nil {
			n.logs, n.provenTo, n.chainBroken = true, l.ProvenTo, l.BrokenOrGap()
		}
		if d.DrillEvery > 0 {
			n.drills, n.drillMaxAge = true, time.Duration(d.DrillMaxAge)
			if l := d.LastDrill; l != nil {
				n.drillAt, n.drillRTO, n.drillOK = l.At, l.RTO, l.Outcome == catalog.DrillPassed
			}
			if p := d.ImmutableProven; p != nil {
				n.immutableProven = p.At
			}
		}
		if d.Configured && d.ImmutableCopy != "" && d.ImmutableWithin > 0 {
			n.immutableCopy, n.immutableWithin, n.immutableWaiting = d.ImmutableCopy, time.Duration(d.ImmutableWithin), d.ImmutableWaitingSince
			// A set on a server not read may be the one waiting longest.
			if old, ok := s.rows[k]; ok && !complete && !old.immutableWaiting.IsZero() &&
				(n.immutableWaiting.IsZero() || old.immutableWaiting.Before(n.immutableWaiting)) {
				n.immutableWaiting = old.immutableWaiting
			}
		}
		if old, ok := s.rows[k]; ok && !complete && old.immutableProven.After(n.immutableProven) {
			n.immutableProven = old.immutableProven
		}
		if old, ok := s.rows[k]; ok && !complete && old.drillAt.After(n.drillAt) {
			n.drillAt, n.drillRTO, n.drillOK = old.drillAt, old.drillRTO, old.drillOK
		}
		if old, ok := s.rows[k]; ok && !complete && old.takenAt.After(n.takenAt) {
			n.takenAt, n.timeToRecover, n.failureAt, n.failureType = old.takenAt, old.timeToRecover, old.failureAt, old.failureType
		}
		if old, ok := s.rows[k]; ok && !complete && old.provenTo.After(n.provenTo) {
			n.provenTo, n.chainBroken = old.provenTo, old.chainBroken
		}
		if v, ok := s.recent[k]; ok && v.takenAt.After(n.takenAt) {
			n.takenAt, n.timeToRecover, n.failureAt, n.failureType = v.takenAt, v.timeToRecover, time.Time{}, ""
		}
		next[k] = n
	}
	for k, old := range s.rows {
		if _, ok := next[k]; ok {
			continue
		}
		if _, ok := s.recent[k]; ok || !complete {
			next[k] = old
		}
	}
	s.rows = next
	s.servers = map[string]bool{}
	for _, srv := range r.Servers {
		s.servers[srv.Name] = srv.Error == ""
	}
	for _, o := range r.ObjectStores {
		if old, ok := s.stores[o.Name]; o.Probed && (!ok || !old.at.After(o.ProbedAt)) {
			s.stores[o.Name] = probe{o.Immutable, o.ProbedAt}
		}
	}
	s.readAt = at
}

// Describe sends the descriptors of the manifest gauges (prometheus.Collector).
func (s *manifestState) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.lastVerified, s.timeToRecover, s.rpo, s.rto, s.lastFailure, s.readTime, s.readable, s.unauthentic,
		s.lastProven, s.chainBroken, s.lastDrill, s.lastDrillRTO, s.lastDrillOK, s.drillMaxAge, s.immutableProven, s.storeImmutable, s.storeProbedAt,
		s.immutableMissingAge, s.immutableWithin} {
		ch <- d
	}
}

// Collect sends the current snapshot (prometheus.Collector).
func (s *manifestState) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		// A name Prometheus refuses as a label value (not UTF-8) drops
		// that one series rather than failing the whole scrape.
		if m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, labels...); err == nil {
			ch <- m
		}
	}
	now := time.Now()
	for k, r := range s.rows {
		taken := 0.0
		if !r.takenAt.IsZero() {
			taken = unixSeconds(r.takenAt)
		}
		gauge(s.lastVerified, taken, k.instance, k.database)
		gauge(s.unauthentic, float64(r.unauthentic), k.instance, k.database)
		if r.timeToRecover > 0 {
			gauge(s.timeToRecover, r.timeToRecover.Seconds(), k.instance, k.database)
		}
		if r.rpo > 0 {
			gauge(s.rpo, r.rpo.Seconds(), k.instance, k.database)
		}
		if r.rto > 0 {
			gauge(s.rto, r.rto.Seconds(), k.instance, k.database)
		}
		if r.logs {
			proven, broken := 0.0, 0.0
			if !r.provenTo.IsZero() {
				proven = unixSeconds(r.provenTo)
			}
			if r.chainBroken {
				broken = 1
			}
			gauge(s.lastProven, proven, k.instance, k.database)
			gauge(s.chainBroken, broken, k.instance, k.database)
		}
		if r.drills {
			at := 0.0
			if !r.drillAt.IsZero() {
				at = unixSeconds(r.drillAt)
				ok := 0.0
				if r.drillOK {
					ok = 1
				}
				gauge(s.lastDrillOK, ok, k.instance, k.database)
			}
			if r.drillRTO > 0 {
				gauge(s.lastDrillRTO, r.drillRTO.Seconds(), k.instance, k.database)
			}
			gauge(s.lastDrill, at, k.instance, k.database)
			if r.drillMaxAge > 0 {
				gauge(s.drillMaxAge, r.drillMaxAge.Seconds(), k.instance, k.database)
			}
			if !r.immutableProven.IsZero() {
				gauge(s.immutableProven, unixSeconds(r.immutableProven), k.instance, k.database)
			}
		}
		if r.immutableCopy != "" {
			age := 0.0
			if !r.immutableWaiting.IsZero() {
				age = max(now.Sub(r.immutableWaiting).Seconds(), 0)
			}
			gauge(s.immutableMissingAge, age, k.instance, k.database, r.immutableCopy)
			gauge(s.immutableWithin, r.immutableWithin.Seconds(), k.instance, k.database, r.immutableCopy)
		}
		if !r.failureAt.IsZero() {
			gauge(s.lastFailure, unixSeconds(r.failureAt), k.instance, k.database, r.failureType)
		}
	}
	for name, ok := range s.servers {
		v := 0.0
		if ok {
			v = 1
		}
		gauge(s.readable, v, name)
	}
	for name, p := range s.stores {
		v := 0.0
		if p.immutable {
			v = 1
		}
		gauge(s.storeImmutable, v, name)
		gauge(s.storeProbedAt, unixSeconds(p.at), name)
	}
	if !s.readAt.IsZero() {
		gauge(s.readTime, unixSeconds(s.readAt))
	}
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
