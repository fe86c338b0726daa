package client

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/selection"
	"github.com/backupcycle/backupcycle/internal/status"
)

// RecoveryFacts are what the backup servers hold of a database's two
// restores to its newest point (plan.EstimateRecovery): its newest verified
// full, the newest verified differential on it, the log backups since
// each, and the drills recorded (how fast they replayed logs, what they
// predicted and measured).
type RecoveryFacts struct {
	// Full is the newest verified full (nil: none), Diff the newest
	// verified differential on it (nil: none).
	Full, Diff *catalog.Manifest
	// Logs and LogBytesSinceFull are the log backups taken after the full
	// (written or copied, each counted once), LogsSinceDiff and
	// LogBytesSinceDiff those after the differential.
	Logs, LogsSinceDiff                  int
	LogBytesSinceFull, LogBytesSinceDiff int64
	// Drills are the drills of the trusted drill records, each once.
	Drills []catalog.DrillResult
	// logs are the log backups known, for the bytes of a drill recorded
	// before drills kept them.
	logs map[logKey]catalog.LogBackup
}

// LastDrill is the newest drill (nil: none).
func (f RecoveryFacts) LastDrill() *catalog.DrillResult {
	var last *catalog.DrillResult
	for i, d := range f.Drills {
		if last == nil || d.At.After(last.At) {
			last = &f.Drills[i]
		}
	}
	return last
}

// drillLogBytes are the bytes of the log backups a drill restored, when
// every one it names is known.
func (f RecoveryFacts) drillLogBytes(d catalog.DrillResult) (int64, bool) {
	var n int64
	for i := d.FirstLog; i <= d.LastLog; i++ {
		lb, ok := f.logs[logKey{d.Chain, i}]
		if !ok {
			return 0, false
		}
		n += logBytes(lb)
	}
	return n, n > 0
}

// logKey is one log backup of a database.
type logKey struct{ chain, number int64 }

// ReadRecoveryFacts reads the manifests, chain records and drill record of
// a configured database on its backup servers and their copy targets
// (open nil means status.Open); it only reads. Servers that cannot be read
// are skipped, as MeasuredThroughput reports them.
func ReadRecoveryFacts(ctx context.Context, cfg *config.Config, instance, database string, open status.OpenFunc) (RecoveryFacts, error) {
	db, err := selection.Lookup(cfg, instance, database)
	if err != nil {
		return RecoveryFacts{}, err
	}
	keys, err := cfg.ManifestKeyRing()
	if err != nil {
		return RecoveryFacts{}, err
	}
	if open == nil {
		open = status.Open
	}
	sets := catalog.Of(db.Instance, db.Name)
	var all []*catalog.Manifest
	logs := map[logKey]catalog.LogBackup{}
	drills := map[[2]string]catalog.DrillResult{}
	for _, name := range db.ServersAndTargets() {
		srv, ok := cfg.BackupServer(name)
		if !ok {
			continue
		}
		st, err := open(ctx, srv)
		if err != nil {
			continue
		}
		fsys := status.ReadOnlyFS(st)
		if l, err := catalog.List(ctx, fsys, keys, &sets); err == nil {
			all = append(all, l.Manifests...)
		}
		if l, err := catalog.ListChains(ctx, fsys, keys, sets); err == nil {
			for _, r := range l.Records {
				if !r.Trusted() {
					continue
				}
				for _, lb := range r.Logs {
					if lb.State == catalog.LogWritten || lb.State == catalog.LogCopied {
						logs[logKey{r.Chain, lb.Number}] = lb
					}
				}
			}
		}
		// A drill record that is missing or cannot be read measures nothing.
		if r, err := catalog.LoadDrill(ctx, fsys, keys, db.Instance, db.Name); err == nil && r != nil && r.Trusted() {
			for _, d := range r.Drills {
				drills[[2]string{d.WorkflowID, d.RunID}] = d
			}
		}
		st.Close()
	}
	f := RecoveryFacts{logs: logs}
	for _, k := range slices.SortedFunc(maps.Keys(drills), func(a, b [2]string) int { return drills[a].At.Compare(drills[b].At) }) {
		f.Drills = append(f.Drills, drills[k])
	}
	if f.Full, err = catalog.NewestVerified(sets, all); err != nil {
		return f, nil // nothing verified: nothing to estimate from
	}
	for _, m := range all {
		if sets.Owns(m) && m.Trusted() && m.Verified() && m.IsDifferential() && m.Differential.Sequence == f.Full.Sequence &&
			(f.Diff == nil || m.Newer(f.Diff)) {
			f.Diff = m
		}
	}
	for _, lb := range logs {
		at := logFinish(lb)
		if !at.After(f.Full.TakenAt()) {
			continue
		}
		f.Logs++
		f.LogBytesSinceFull += logBytes(lb)
		if f.Diff != nil && at.After(f.Diff.TakenAt()) {
			f.LogsSinceDiff++
			f.LogBytesSinceDiff += logBytes(lb)
		}
	}
	if f.Diff == nil {
		f.LogsSinceDiff, f.LogBytesSinceDiff = f.Logs, f.LogBytesSinceFull
	}
	return f, nil
}

// logFinish is when a log backup finished, as an instant when recorded.
func logFinish(lb catalog.LogBackup) time.Time {
	if !lb.BackupFinishUTC.IsZero() {
		return lb.BackupFinishUTC
	}
	return lb.BackupFinish
}

func logBytes(lb catalog.LogBackup) int64 {
	var n int64
	for _, f := range lb.Files {
		n += f.Size
	}
	return n
}

// RecoveryComparison is `starter plan`'s answer of a database's restore
// to its newest point: both restores (with and without its newest
// differential), each step of the one a recover would run now, and the
// rates they used.
type RecoveryComparison struct {
	Facts    RecoveryFacts
	Estimate plan.RecoveryEstimate
	// Predicted is each step of the restore a recover runs now: through
	// the newest differential when there is one.
	Predicted catalog.RecoveryPrediction
	// Rates are the rates used, each measured or assumed.
	Rates plan.RecoveryRates
}

// CompareRecovery estimates both restores from facts, with the measured
// restore and CHECKDB rates (measured) where there are some, else the
// plan's assumed site (p), and the newest drill's log replay and
// recovery (plan.RecoveryRates.WithDrills). Nil without a verified full.
func CompareRecovery(p CyclePlan, facts RecoveryFacts, measured plan.Throughput) (*RecoveryComparison, error) {
	if facts.Full == nil || facts.Full.Header == nil {
		return nil, nil
	}
	r := plan.RecoveryRates{Restore: measured.Restore, CheckDB: measured.CheckDB}
	full := facts.Full.Header.BackupSize
	if !r.Restore.Measured() {
		w := plan.Workload{DataBytes: max(full, 1), CompressionFactor: p.Assumptions.CompressionFactor, InstantFileInit: p.Assumptions.InstantFileInit}
		r.Restore = plan.StepRate{MBps: plan.RestoreRate(p.RemoteHW, w).MBps, Source: plan.SourceAssumed}
	}
	if !r.CheckDB.Measured() {
		r.CheckDB = plan.StepRate{MBps: p.RemoteHW.DatabaseReadMBps(), Source: plan.SourceAssumed}
	}
	r = r.WithDrills(facts.Drills, facts.drillLogBytes)
	c := &RecoveryComparison{Facts: facts, Rates: r}
	var diff int64
	if facts.Diff != nil && facts.Diff.Header != nil {
		diff = facts.Diff.Header.BackupSize
	}
	e, err := plan.EstimateRecovery(plan.RecoveryInput{FullBytes: full, DiffBytes: diff, LogsSinceFull: facts.Logs, LogsSinceDiff: facts.LogsSinceDiff,
		LogBytesSinceFull: facts.LogBytesSinceFull, LogBytesSinceDiff: facts.LogBytesSinceDiff, Restore: r.Restore, LogReplay: r.Logs})
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", p.Database, err)
	}
	c.Estimate = e
	c.Predicted = plan.PredictRecovery(plan.RestoreSizes{FullBytes: full, DiffBytes: diff, Logs: facts.LogsSinceDiff, LogBytes: facts.LogBytesSinceDiff}, r)
	return c, nil
}
