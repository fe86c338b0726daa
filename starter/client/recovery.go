package client

import (
	"context"
	"fmt"
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
// each, and how fast its newest passed drill replayed logs.
type RecoveryFacts struct {
	// Full is the newest verified full (nil: none), Diff the newest
	// verified differential on it (nil: none).
	Full, Diff *catalog.Manifest
	// Logs and LogBytesSinceFull are the log backups taken after the full
	// (written or copied, each counted once), LogsSinceDiff and
	// LogBytesSinceDiff those after the differential.
	Logs, LogsSinceDiff                  int
	LogBytesSinceFull, LogBytesSinceDiff int64
	// LogReplay is the newest passed drill's logs over its logs step
	// (plan.SourceDrill); zero when no drill replayed logs long enough.
	LogReplay plan.StepRate
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
	var drills []catalog.DrillResult
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
			drills = append(drills, r.Drills...)
		}
		st.Close()
	}
	var f RecoveryFacts
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
	f.LogReplay = drillLogRate(drills, logs)
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

// drillLogRate is the newest passed drill's log replay: the bytes of the
// log backups it restored over its logs step, when that step took
// plan.MinMeasuredDuration or more and every log it names is known.
func drillLogRate(drills []catalog.DrillResult, logs map[logKey]catalog.LogBackup) plan.StepRate {
	slices.SortFunc(drills, func(a, b catalog.DrillResult) int { return b.At.Compare(a.At) })
	for _, d := range drills {
		if d.Outcome != catalog.DrillPassed || d.Chain == 0 || d.FirstLog == 0 || d.LastLog < d.FirstLog || d.Steps.Logs < plan.MinMeasuredDuration {
			continue
		}
		var n int64
		known := true
		for i := d.FirstLog; i <= d.LastLog && known; i++ {
			lb, ok := logs[logKey{d.Chain, i}]
			known = ok
			n += logBytes(lb)
		}
		if !known || n <= 0 {
			continue
		}
		sec := d.Steps.Logs.Seconds()
		return plan.StepRate{MBps: float64(n) / plan.MiB / sec, Source: plan.SourceDrill, At: d.At, Bytes: n, Seconds: sec}
	}
	return plan.StepRate{}
}

// RecoveryComparison is `starter plan`'s answer for a database with
// diff_backup: both restores to its newest point and which is shorter.
type RecoveryComparison struct {
	Facts    RecoveryFacts
	Estimate plan.RecoveryEstimate
	// Restore and LogReplay are the rates used, each measured or assumed.
	Restore, LogReplay plan.StepRate
}

// CompareRecovery estimates both restores from facts, with the measured
// restore rate (measured) where there is one, else the plan's assumed
// site (p), and the drill's log replay rate, else the restore rate
// (assumed). Nil without a verified full.
func CompareRecovery(p CyclePlan, facts RecoveryFacts, measured plan.Throughput) (*RecoveryComparison, error) {
	if facts.Full == nil || facts.Full.Header == nil {
		return nil, nil
	}
	c := &RecoveryComparison{Facts: facts, Restore: measured.Restore, LogReplay: facts.LogReplay}
	full := facts.Full.Header.BackupSize
	if !c.Restore.Measured() {
		w := plan.Workload{DataBytes: max(full, 1), CompressionFactor: p.Assumptions.CompressionFactor, InstantFileInit: p.Assumptions.InstantFileInit}
		c.Restore = plan.StepRate{MBps: plan.RestoreRate(p.RemoteHW, w).MBps, Source: plan.SourceAssumed}
	}
	if !c.LogReplay.Measured() {
		c.LogReplay = plan.StepRate{MBps: c.Restore.MBps, Source: plan.SourceAssumed}
	}
	var diff int64
	if facts.Diff != nil && facts.Diff.Header != nil {
		diff = facts.Diff.Header.BackupSize
	}
	e, err := plan.EstimateRecovery(plan.RecoveryInput{FullBytes: full, DiffBytes: diff, LogBytesSinceFull: facts.LogBytesSinceFull,
		LogBytesSinceDiff: facts.LogBytesSinceDiff, Restore: c.Restore, LogReplay: c.LogReplay})
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", p.Database, err)
	}
	c.Estimate = e
	return c, nil
}
