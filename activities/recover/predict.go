package recover

import (
	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/recovery"
)

// Predict is what each step of restoring rp should take, from what was
// known before it runs (plan.PredictRecovery): the full's and the
// differential's data (BackupSize) at the restore rate the database's
// verified sets measured (the site the timeouts assume where none did,
// plan.Estimate), its log backups at the log replay and the recovery the
// newest drill recorded in cat measured (a second a log assumed before
// one: plan.DefaultLogOverhead), and a CHECKDB of the copy at the
// measured CHECKDB rate.
func Predict(db *config.Database, cat recovery.Catalog, rp recovery.Plan) catalog.RecoveryPrediction {
	full := rp.Full()
	var s plan.RestoreSizes
	var manifests []*catalog.Manifest
	var compressed bool
	for _, set := range cat.Sets {
		manifests = append(manifests, set.Manifest)
		if activities.SameGUID(set.GUID, full.GUID) {
			s.FullBytes, compressed = dataBytes(set.Manifest, full), set.Manifest.Options.Compression
		}
	}
	if d, ok := rp.Diff(); ok {
		for _, set := range cat.Diffs {
			if activities.SameGUID(set.GUID, d.GUID) {
				s.DiffBytes = dataBytes(set.Manifest, d)
			}
		}
	}
	for _, l := range rp.Logs() {
		s.Logs++
		s.LogBytes += l.Bytes
	}
	r := plan.RecoveryRates{}
	if _, used, err := plan.Estimate(plan.SiteCycle(max(s.FullBytes, 1), 1, 1, compressed, 0), compressed,
		plan.FromManifests(activities.SetsOf(db), manifests)); err == nil {
		r.Restore, r.CheckDB = used.Restore, used.CheckDB
	}
	r = r.WithDrills(cat.Drills, func(d catalog.DrillResult) (int64, bool) { return cat.LogBytes(d.Chain, d.FirstLog, d.LastLog) })
	return plan.PredictRecovery(s, r)
}

// dataBytes is a set's data (BackupSize), else its files' bytes.
func dataBytes(m *catalog.Manifest, s recovery.Step) int64 {
	if m != nil && m.Header != nil && m.Header.BackupSize > 0 {
		return m.Header.BackupSize
	}
	return s.Bytes
}
