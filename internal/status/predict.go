package status

import (
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/plan"
)

// Prediction is the time to recover a set as the plan predicts it: the
// seed's formulas for the set's size (RESTORE HEADERONLY's BackupSize) on
// the rates measured on the verified sets taken before it (the slowest of
// the newest plan.MeasuredWindow, as the timeouts use them), or, for a step
// never measured, on the site the timeouts assume (plan.TimeoutSite). Set
// beside the measured time it says how far the plan's model is off.
type Prediction struct {
	SizeBytes     int64    `json:"size_bytes"`
	Restore       Duration `json:"restore_seconds"`
	CheckDB       Duration `json:"checkdb_seconds"`
	TimeToRecover Duration `json:"time_to_recover_seconds"`
	// RestoreRate and CheckDBRate are the rates used, each with its
	// source: "cycle" (an earlier set) or "assumed".
	RestoreRate plan.StepRate `json:"restore_rate"`
	CheckDBRate plan.StepRate `json:"checkdb_rate"`
}

// predict is the Prediction for the newest verified set of a database;
// nil when its manifest has no size.
func predict(k key, last *set, sets map[setID]*set, former []string) *Prediction {
	m := last.best
	if m.Header == nil || m.Header.BackupSize <= 0 {
		return nil
	}
	var earlier []*catalog.Manifest
	for _, s := range sets {
		if s.best.State == catalog.StateVerified && m.Newer(s.best) {
			earlier = append(earlier, s.best)
		}
	}
	size := m.Header.BackupSize
	c := plan.SiteCycle(size, 1, 1, m.Options.Compression, 0)
	if m.Options.Compression && m.Header.CompressedBackupSize > 0 {
		// The set's own factor: the restore reads its files.
		c.Workload.CompressionFactor = max(1, float64(size)/float64(m.Header.CompressedBackupSize))
	}
	est, used, err := plan.Estimate(c, m.Options.Compression,
		plan.FromManifests(catalog.DB{Instance: k.instance, Database: k.database, Instances: former}, earlier))
	if err != nil {
		return nil
	}
	return &Prediction{SizeBytes: size, Restore: Duration(est.Restore), CheckDB: Duration(est.CheckDB),
		TimeToRecover: Duration(est.Restore + est.CheckDB), RestoreRate: used.Restore, CheckDBRate: used.CheckDB}
}
