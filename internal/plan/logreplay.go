package plan

import (
	"slices"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// Each RESTORE LOG costs the same whatever its size: the statement opens
// its backup files on the share and reads their headers, and SQL Server
// records every restore in msdb ("restorehistory (Transact-SQL)": one row
// for each restore operation,
// https://learn.microsoft.com/sql/relational-databases/system-tables/restorehistory-transact-sql);
// the product adds its own round trip per log (an activity, a workflow
// task). A chain of minute logs is mostly that cost: replaying it is
// n_logs x PerLog + its bytes at Rate, not its bytes alone.

// DefaultLogOverhead is the per-log cost assumed until a drill has
// restored logs: an assumption, not a measurement. The dev stack measures
// about 40 ms a log (the product's round trip and the emulator's
// statement); on SQL Server each RESTORE LOG also opens its files over
// the network and writes msdb's history, so a second is assumed, which
// over-predicts a quiet site's short chains rather than under-predicting
// a long one. The first drill that restores logs replaces it.
const DefaultLogOverhead = time.Second

// LogReplay is how long RESTORE LOG of a chain takes: PerLog for each log
// backup and its file bytes at Rate.
type LogReplay struct {
	PerLog time.Duration `json:"per_log"`
	Rate   StepRate      `json:"rate"`
	// From is where PerLog came from: SourceDrill (the drill that ended
	// At) or SourceAssumed (DefaultLogOverhead).
	From Source    `json:"from"`
	At   time.Time `json:"at,omitzero"`
}

// Duration is the replay of logs log backups of bytes in all.
func (l LogReplay) Duration(logs int, bytes int64) time.Duration {
	if logs <= 0 {
		return 0
	}
	d := time.Duration(logs) * l.PerLog
	if l.Rate.MBps > 0 {
		d += durationFor(bytes, l.Rate.MBps)
	}
	return d
}

// fastestJitter bounds how much faster than the others one log of a chain
// of like logs restores (a workflow task, the share, the instance): a
// per-log cost within it of the fastest log is taken as it is.
const fastestJitter = 2

// minBytesShare: the fastest log bounds the per-log cost only when the
// logs' bytes at the restore rate are at least 1/minBytesShare of the
// logs step. Below that the bytes cannot explain the rest of the step,
// and a fastest log far under the others is jitter (a busy host): taken
// as the per-log cost, it would leave the rest to a byte rate near zero.
const minBytesShare = 10

// logSample is one drill's measured replay: its log backups, their bytes,
// its logs step and the fastest log in it (0: not recorded).
type logSample struct {
	logs    int
	bytes   int64
	took    time.Duration
	fastest time.Duration
	at      time.Time
}

// LogReplayFrom is the log replay of the newest drill (any order) that
// restored logs: its logs step less its log bytes at the restore rate,
// over its logs, is the per-log cost; when that is more than
// fastestJitter times the fastest log it took while the bytes are a
// visible part of the step (minBytesShare), the logs' bytes replay slower
// than the restore rate, and the fastest log is the per-log cost (a log
// costs no more than the shortest one took) and the rest of the step the
// bytes', at the rate it shows; where the bytes at the
// restore rate alone take longer than the drill did, there is no per-log
// cost to see and the drill's bytes over its time is the rate. The
// restore rate is a RESTORE DATABASE's, measured or assumed: one drill
// cannot tell a log's cost from its bytes', and the restore's rate is the
// nearest measured one. A drill recorded before it kept its log bytes
// gets them from bytes (nil, or false: unknown, the drill is passed
// over). No drill: DefaultLogOverhead at the restore rate.
func LogReplayFrom(drills []catalog.DrillResult, restore StepRate, bytes func(catalog.DrillResult) (int64, bool)) LogReplay {
	var samples []logSample
	for _, d := range drills {
		// The chain and logs are recorded once the Recover ended.
		if d.Chain == 0 || d.FirstLog <= 0 || d.LastLog < d.FirstLog || d.Steps.Logs <= 0 {
			continue
		}
		s := logSample{logs: int(d.LastLog - d.FirstLog + 1), bytes: d.LogBytes, took: d.Steps.Logs, fastest: d.LogFastest, at: d.At}
		if s.bytes <= 0 {
			n, ok := int64(0), false
			if bytes != nil {
				n, ok = bytes(d)
			}
			if !ok {
				continue
			}
			s.bytes = n
		}
		samples = append(samples, s)
	}
	if len(samples) == 0 || restore.MBps <= 0 {
		return LogReplay{PerLog: DefaultLogOverhead, Rate: restore, From: SourceAssumed}
	}
	s := slices.MaxFunc(samples, func(a, b logSample) int { return a.at.Compare(b.at) })
	out := LogReplay{Rate: restore, From: SourceDrill, At: s.at}
	drillRate := func(took time.Duration) StepRate {
		return StepRate{MBps: float64(s.bytes) / MiB / took.Seconds(), Source: SourceDrill, At: s.at, Bytes: s.bytes, Seconds: took.Seconds()}
	}
	rest := s.took - durationFor(s.bytes, restore.MBps)
	switch {
	case rest <= 0:
		out.Rate = drillRate(s.took)
	case s.fastest > 0 && rest/time.Duration(s.logs) > fastestJitter*s.fastest && s.took > time.Duration(s.logs)*s.fastest &&
		durationFor(s.bytes, restore.MBps) >= s.took/minBytesShare:
		out.PerLog = s.fastest
		out.Rate = drillRate(s.took - time.Duration(s.logs)*s.fastest)
	default:
		out.PerLog = rest / time.Duration(s.logs)
	}
	return out
}

// RecoveryRates are what a restore's steps are predicted at: RESTORE
// DATABASE's and CHECKDB's rates (measured or assumed), the log replay,
// and the recovery (RESTORE WITH RECOVERY) as the newest drill measured
// it (0: none).
type RecoveryRates struct {
	Restore, CheckDB StepRate
	Logs             LogReplay
	Recovery         time.Duration
	RecoveryAt       time.Time
}

// WithDrills is r with the log replay (LogReplayFrom, at r's restore
// rate) and the recovery of drills; bytes as LogReplayFrom's.
func (r RecoveryRates) WithDrills(drills []catalog.DrillResult, bytes func(catalog.DrillResult) (int64, bool)) RecoveryRates {
	r.Logs = LogReplayFrom(drills, r.Restore, bytes)
	for _, d := range drills {
		if d.Steps.Recovery > 0 && d.At.After(r.RecoveryAt) {
			r.Recovery, r.RecoveryAt = d.Steps.Recovery, d.At
		}
	}
	return r
}

// RestoreSizes are what one restore reads: the full's and the
// differential's data (BackupSize; 0: none), the log backups and their
// file bytes.
type RestoreSizes struct {
	FullBytes, DiffBytes int64
	Logs                 int
	LogBytes             int64
}

// PredictRecovery predicts each step of the restore of s at r: the full
// and the differential at the restore rate, the logs by r.Logs, the
// recovery as measured, and a CHECKDB of the copy at its rate.
func PredictRecovery(s RestoreSizes, r RecoveryRates) catalog.RecoveryPrediction {
	p := catalog.RecoveryPrediction{
		Full: durationFor(s.FullBytes, r.Restore.MBps), Diff: durationFor(s.DiffBytes, r.Restore.MBps),
		Recovery: r.Recovery, CheckDB: durationFor(s.FullBytes, r.CheckDB.MBps),
		FullBytes: s.FullBytes, DiffBytes: s.DiffBytes,
		RestoreMBps: r.Restore.MBps, RestoreFrom: string(r.Restore.Source), CheckDBMBps: r.CheckDB.MBps, CheckDBFrom: string(r.CheckDB.Source),
	}
	if r.Restore.MBps <= 0 {
		p.Full, p.Diff = 0, 0
	}
	if r.CheckDB.MBps <= 0 {
		p.CheckDB = 0
	}
	if r.Recovery > 0 {
		p.RecoveryFrom = string(SourceDrill)
	}
	if s.Logs > 0 {
		p.LogCount, p.LogBytes = s.Logs, s.LogBytes
		p.LogOverhead, p.LogMBps, p.LogFrom = r.Logs.PerLog, r.Logs.Rate.MBps, string(r.Logs.From)
		p.Logs = r.Logs.Duration(s.Logs, s.LogBytes)
	}
	return p
}
