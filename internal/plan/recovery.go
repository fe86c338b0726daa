package plan

import (
	"errors"
	"fmt"
	"time"
)

// A restore to the newest point reads the newest verified full, then either
// every log backup since it, or the newest differential on it and the log
// backups since that differential: "restoring a differential backup ...
// reduces the number of log backups that must be restored" ("Differential
// Backups (SQL Server)",
// https://learn.microsoft.com/sql/relational-databases/backup-restore/differential-backups-sql-server).
// A differential holds every extent changed since its base, so where most
// of the database changes between two fulls it approaches the full's size
// and the second restore is the longer one (seed 000's VLDB).

// SourceDrill: a drill's measured log restore (LogReplayFrom).
const SourceDrill Source = "drill"

// RecoveryInput is what the two restores read and how fast.
type RecoveryInput struct {
	// FullBytes is the full's data (its BackupSize), DiffBytes the newest
	// differential's (0: none yet).
	FullBytes, DiffBytes int64
	// LogsSinceFull and LogBytesSinceFull are the log backups from the
	// full to the point and their bytes, LogsSinceDiff and
	// LogBytesSinceDiff those after the differential.
	LogsSinceFull, LogsSinceDiff         int
	LogBytesSinceFull, LogBytesSinceDiff int64
	// Restore is the throughput of a RESTORE DATABASE (full or
	// differential data); LogReplay the cost of each RESTORE LOG and the
	// rate of its bytes.
	Restore   StepRate
	LogReplay LogReplay
}

// RecoveryEstimate is each part's time and the two restores'.
type RecoveryEstimate struct {
	Full, Diff, LogsSinceFull, LogsSinceDiff time.Duration
	// FullAndLogs = Full + LogsSinceFull; FullDiffAndLogs = Full + Diff +
	// LogsSinceDiff.
	FullAndLogs, FullDiffAndLogs time.Duration
}

// DiffShortens reports whether the restore through the differential is
// the shorter one.
func (e RecoveryEstimate) DiffShortens() bool { return e.FullDiffAndLogs < e.FullAndLogs }

// EstimateRecovery estimates both restores of in.
func EstimateRecovery(in RecoveryInput) (RecoveryEstimate, error) {
	var errs []error
	if in.FullBytes < 0 || in.DiffBytes < 0 || in.LogBytesSinceFull < 0 || in.LogBytesSinceDiff < 0 || in.LogsSinceFull < 0 || in.LogsSinceDiff < 0 ||
		in.LogReplay.PerLog < 0 {
		errs = append(errs, errors.New("sizes, counts and the per-log cost must not be negative"))
	}
	if (in.LogBytesSinceFull > 0 && in.LogsSinceFull == 0) || (in.LogBytesSinceDiff > 0 && in.LogsSinceDiff == 0) {
		errs = append(errs, errors.New("log bytes without the number of logs they are in"))
	}
	if in.LogBytesSinceDiff > in.LogBytesSinceFull || in.LogsSinceDiff > in.LogsSinceFull {
		errs = append(errs, fmt.Errorf("%d logs (%d bytes) after the differential but only %d (%d bytes) since its full",
			in.LogsSinceDiff, in.LogBytesSinceDiff, in.LogsSinceFull, in.LogBytesSinceFull))
	}
	if in.Restore.MBps <= 0 || in.LogReplay.Rate.MBps <= 0 {
		errs = append(errs, fmt.Errorf("restore rate %g MB/s and log replay rate %g MB/s must be positive", in.Restore.MBps, in.LogReplay.Rate.MBps))
	}
	if err := errors.Join(errs...); err != nil {
		return RecoveryEstimate{}, fmt.Errorf("recovery estimate: %w", err)
	}
	e := RecoveryEstimate{
		Full: durationFor(in.FullBytes, in.Restore.MBps), Diff: durationFor(in.DiffBytes, in.Restore.MBps),
		LogsSinceFull: in.LogReplay.Duration(in.LogsSinceFull, in.LogBytesSinceFull), LogsSinceDiff: in.LogReplay.Duration(in.LogsSinceDiff, in.LogBytesSinceDiff),
	}
	e.FullAndLogs = e.Full + e.LogsSinceFull
	e.FullDiffAndLogs = e.Full + e.Diff + e.LogsSinceDiff
	return e, nil
}

// SiteLoss is the recover the case study plans for, "complete data center
// failure and loss of all data in a data center" (seed 000, Service-Level
// Agreement): the newest full restored over the network from the remote
// backup server onto a server like the source, then every log backup taken
// since it. The full takes the seed's RestoreTime (network term included);
// each log backup costs PerLog and its bytes the same restore rate.
type SiteLoss struct {
	Hardware Hardware
	Workload Workload
	// Logs log backups of LogBytes in all since the full; PerLog the cost
	// of each RESTORE LOG whatever its size (DefaultLogOverhead until a
	// drill measured it).
	Logs     int
	LogBytes int64
	PerLog   time.Duration
}

// SiteLossEstimate is each part of a SiteLoss recover and the whole.
type SiteLossEstimate struct {
	Full        time.Duration
	FullRate    Rate
	LogsPerLog  time.Duration // Logs x PerLog
	LogsBytes   time.Duration // LogBytes at FullRate
	Logs, Total time.Duration
}

// EstimateSiteLoss estimates s.
func EstimateSiteLoss(s SiteLoss) (SiteLossEstimate, error) {
	full, r, err := RestoreTime(s.Hardware, s.Workload)
	if err != nil {
		return SiteLossEstimate{}, fmt.Errorf("site loss estimate: %w", err)
	}
	if s.Logs < 0 || s.LogBytes < 0 || s.PerLog < 0 {
		return SiteLossEstimate{}, fmt.Errorf("site loss estimate: %d logs of %d bytes at %s a log: none may be negative", s.Logs, s.LogBytes, s.PerLog)
	}
	e := SiteLossEstimate{Full: full, FullRate: r, LogsPerLog: time.Duration(s.Logs) * s.PerLog, LogsBytes: durationFor(s.LogBytes, r.MBps)}
	e.Logs = e.LogsPerLog + e.LogsBytes
	e.Total = e.Full + e.Logs
	return e, nil
}
