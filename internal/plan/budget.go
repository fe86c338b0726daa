package plan

import (
	"fmt"
	"time"
)

// How a step's timeouts follow from its expected duration. A step may take
// SafetyFactor times what the seed's formulas predict plus TimeoutFloor before
// it is stopped (StartToClose): the formulas are lower bounds ("CHECKDB might
// require much more than just the time it takes to read from the disk"), the
// site's throughput is assumed until cycles measure it (Estimate) and varies
// from night to night after that, and a statement that is stopped is
// started over, so stopping a slow but healthy one costs more than waiting.
// The floor keeps small databases from timeouts of seconds that a busy
// server or a slow login would exceed.
const (
	SafetyFactor = 3
	TimeoutFloor = 30 * time.Minute
	// CopyWaitFloor replaces the floor of the copy deadline, which also
	// covers waiting for a remote backup server that is away (a reboot, a
	// network change): the copy resumes when it returns.
	CopyWaitFloor = 2 * time.Hour
	// DefaultHeartbeat is the heartbeat timeout of every activity: a dead
	// worker's activity is retried elsewhere after it, and a stall of the
	// worker, the network or the Temporal server shorter than it (a GC
	// pause, a blip, a frontend restart) does not cancel a statement that
	// runs for hours. MinHeartbeat is the least the plan sets by itself.
	DefaultHeartbeat = 4 * time.Minute
	MinHeartbeat     = 3 * time.Minute
)

// UnknownSizeBytes is the size the timeouts assume when the plan could not
// read the database's size: the timeouts of a 2 TiB database are long enough
// not to stop most real backups, and still bounded.
const UnknownSizeBytes = 2 << 40

// TimeoutSite is the site the timeouts assume: 1 GbE per NIC path (110 MB/s
// sustained), one backup LUN and one data LUN of 200 MB/s each, a restore
// that zeroes its files first (no instant file initialization) and a copy at
// one NIC's speed. It is deliberately modest: a faster site only finishes
// early, a slower one is what the safety factor and the config overrides
// (backup_timeout, restore_timeout, checkdb_timeout, copy_deadline) are for.
func TimeoutSite(nics, remoteNICs int) (source, remote Hardware, copyMBps float64) {
	source = Hardware{NICMBps: 110, NICs: max(nics, 1), BackupLUNReadMBps: 200, BackupLUNWriteMBps: 200, BackupLUNs: 1,
		DataLUNReadMBps: 200, DataLUNWriteMBps: 200, DataLUNs: 1}
	remote = source
	remote.NICs = max(remoteNICs, 1)
	return source, remote, 110
}

// TimeoutCompressionFactor is the compression factor the timeouts assume for
// a compressed backup: half the low end of the seed's "4 to 6", since data
// that is already compressed or encrypted hardly shrinks.
const TimeoutCompressionFactor = 2

// Step is the timeouts of one activity.
type Step struct {
	// StartToClose bounds one attempt; ScheduleToClose every attempt and
	// the waits between them, so that a step that keeps failing (or keeps
	// being stopped) releases the database within a known time.
	StartToClose    time.Duration `json:"start_to_close"`
	ScheduleToClose time.Duration `json:"schedule_to_close"`
}

// Budget is the timeouts of a cycle's long steps and where they came from.
type Budget struct {
	// Expected is the seed's estimate of each step for the size; Size the
	// bytes it was computed for.
	Size     int64         `json:"size_bytes"`
	Expected CycleEstimate `json:"expected"`
	Backup   Step          `json:"backup"`
	Restore  Step          `json:"restore"`
	// CheckDB also bounds the sanity checks: their queries read the
	// restored copy, as CHECKDB does.
	CheckDB Step `json:"checkdb"`
	// Copy: the deadline bounds the whole copy, retries and waiting for the
	// remote server included (StartToClose = ScheduleToClose).
	Copy      Step          `json:"copy"`
	Heartbeat time.Duration `json:"heartbeat"`
	// Rates are the throughputs Expected was computed with, each saying
	// whether it was measured (SourceCycle, SourceCalibration) or assumed
	// (TimeoutSite); zero when the caller did not record them.
	Rates Throughput `json:"rates"`
}

// Overrides are configured timeouts; zero values are derived.
type Overrides struct {
	Backup, Restore, CheckDB time.Duration // StartToClose of one attempt
	CopyDeadline             time.Duration // the whole copy
	Heartbeat                time.Duration
}

// Timeouts derives the step timeouts for a cycle from its expected
// durations: StartToClose = SafetyFactor x expected + TimeoutFloor, or the
// override; ScheduleToClose = StartToClose + max(expected, TimeoutFloor),
// room for one retry that re-attaches to the statement or, after a late
// failure, runs it once more at the expected speed. The copy deadline is
// SafetyFactor x expected + CopyWaitFloor. The heartbeat timeout is the
// override or DefaultHeartbeat (the workflow caps it at each step's
// StartToClose).
func Timeouts(size int64, est CycleEstimate, o Overrides) (Budget, error) {
	for _, v := range []struct {
		name string
		d    time.Duration
	}{{"backup_timeout", o.Backup}, {"restore_timeout", o.Restore}, {"checkdb_timeout", o.CheckDB},
		{"copy_deadline", o.CopyDeadline}, {"heartbeat_timeout", o.Heartbeat}} {
		if v.d < 0 {
			return Budget{}, fmt.Errorf("plan: %s is %s; give a positive duration or leave it out to derive it from the size", v.name, v.d)
		}
	}
	b := Budget{Size: size, Expected: est}
	b.Backup = step(est.Backup, o.Backup)
	b.Restore = step(est.Restore, o.Restore)
	b.CheckDB = step(est.CheckDB, o.CheckDB)
	deadline := o.CopyDeadline
	if deadline == 0 {
		deadline = SafetyFactor*est.Copy + CopyWaitFloor
	}
	b.Copy = Step{StartToClose: deadline, ScheduleToClose: deadline}
	b.Heartbeat = o.Heartbeat
	if b.Heartbeat == 0 {
		b.Heartbeat = DefaultHeartbeat
	}
	return b, nil
}

func step(expected, override time.Duration) Step {
	s := Step{StartToClose: override}
	if s.StartToClose == 0 {
		s.StartToClose = SafetyFactor*expected + TimeoutFloor
	}
	s.ScheduleToClose = s.StartToClose + max(expected, TimeoutFloor)
	return s
}

// SiteEstimate is CycleTime of SiteCycle.
func SiteEstimate(size int64, nics, remoteNICs int, compressed bool, bandwidthLimit int64) (CycleEstimate, error) {
	return CycleTime(SiteCycle(size, nics, remoteNICs, compressed, bandwidthLimit))
}

// SiteCycle is a cycle of size bytes on TimeoutSite with the backup
// server's NIC paths, compressed or not, and the copy capped at
// bandwidthLimit bytes per second (0 = no cap).
func SiteCycle(size int64, nics, remoteNICs int, compressed bool, bandwidthLimit int64) Cycle {
	src, remote, copyMBps := TimeoutSite(nics, remoteNICs)
	if bandwidthLimit > 0 {
		copyMBps = min(copyMBps, float64(bandwidthLimit)/MiB)
	}
	cf := 1.0
	if compressed {
		cf = TimeoutCompressionFactor
	}
	return Cycle{Source: src, Remote: remote, CopyMBps: copyMBps, Workload: Workload{DataBytes: size, CompressionFactor: cf}}
}
