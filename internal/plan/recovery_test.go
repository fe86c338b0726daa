package plan

import (
	"strings"
	"testing"
	"time"
)

// Two restores to the newest point: the full and every log since it, or
// the full, the newest differential and the logs since that; the same
// full in both, each part at its rate.
func TestEstimateRecovery(t *testing.T) {
	full, restore, logs := StepRate{MBps: 100, Source: SourceCycle}, StepRate{MBps: 100, Source: SourceCycle}, LogReplay{Rate: StepRate{MBps: 20, Source: SourceDrill}}
	// A database whose day of logs (60 GiB) is far more than its
	// changed extents (8 GiB): the differential shortens the restore.
	e, err := EstimateRecovery(RecoveryInput{FullBytes: 500 << 30, DiffBytes: 8 << 30, LogsSinceFull: 96, LogsSinceDiff: 10, LogBytesSinceFull: 60 << 30, LogBytesSinceDiff: 6 << 30,
		Restore: restore, LogReplay: logs})
	if err != nil {
		t.Fatal(err)
	}
	if e.Full != durationFor(500<<30, full.MBps) || e.LogsSinceFull != durationFor(60<<30, 20) || e.Diff != durationFor(8<<30, 100) ||
		e.LogsSinceDiff != durationFor(6<<30, 20) {
		t.Fatalf("parts %+v", e)
	}
	if e.FullAndLogs != e.Full+e.LogsSinceFull || e.FullDiffAndLogs != e.Full+e.Diff+e.LogsSinceDiff || !e.DiffShortens() {
		t.Fatalf("totals %s vs %s, want the differential shorter", e.FullAndLogs, e.FullDiffAndLogs)
	}
	// The case study's VLDB: most of it changes between fulls, so its
	// differential nearly matches the full while its logs replay fast.
	e, err = EstimateRecovery(RecoveryInput{FullBytes: 2 << 40, DiffBytes: 1800 << 30, LogsSinceFull: 96, LogsSinceDiff: 10, LogBytesSinceFull: 200 << 30,
		LogBytesSinceDiff: 20 << 30, Restore: restore, LogReplay: LogReplay{Rate: StepRate{MBps: 400, Source: SourceDrill}}})
	if err != nil {
		t.Fatal(err)
	}
	if e.DiffShortens() || e.FullDiffAndLogs-e.FullAndLogs < time.Hour {
		t.Fatalf("VLDB: %s with the differential vs %s without, want it longer", e.FullDiffAndLogs, e.FullAndLogs)
	}
	for _, bad := range []RecoveryInput{
		{FullBytes: 1 << 30, Restore: StepRate{}, LogReplay: logs},
		{FullBytes: 1 << 30, Restore: restore, LogReplay: LogReplay{}},
		{FullBytes: 1 << 30, LogsSinceFull: 1, LogsSinceDiff: 1, LogBytesSinceFull: 1, LogBytesSinceDiff: 2, Restore: restore, LogReplay: logs},
		{FullBytes: 1 << 30, LogsSinceFull: 1, LogsSinceDiff: 2, Restore: restore, LogReplay: logs},
		{FullBytes: 1 << 30, LogBytesSinceFull: 1 << 20, Restore: restore, LogReplay: logs},
		{FullBytes: 1 << 30, Restore: restore, LogReplay: LogReplay{PerLog: -time.Second, Rate: logs.Rate}},
		{FullBytes: -1, Restore: restore, LogReplay: logs},
	} {
		if _, err := EstimateRecovery(bad); err == nil || !strings.Contains(err.Error(), "recovery estimate") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// The case study's own site after losing its data center: 2 TB restored
// over 8 NICs of 30 MB/s (the rate its measured 2 h 25 min imply), then a
// day of minute log backups at its backup window's 0.5 GB a minute, at the
// assumed second a log: within its four hours, with a quarter hour to spare.
func TestEstimateSiteLossOfTheCaseStudy(t *testing.T) {
	hw := Hardware{NICMBps: 30, NICs: 8, BackupLUNReadMBps: 60, BackupLUNWriteMBps: 60, BackupLUNs: 32,
		DataLUNReadMBps: 200, DataLUNWriteMBps: 200, DataLUNs: 8}
	e, err := EstimateSiteLoss(SiteLoss{Hardware: hw, Workload: Workload{DataBytes: 2 << 40, CompressionFactor: 1},
		Logs: 1440, LogBytes: 1440 * (512 << 20), PerLog: DefaultLogOverhead})
	if err != nil {
		t.Fatal(err)
	}
	if e.FullRate.MBps != 240 || e.FullRate.Bottleneck != "network" || e.Full.Round(time.Second) != 2*time.Hour+25*time.Minute+38*time.Second {
		t.Errorf("full %s at %+v, want 2h25m38s at 240 MB/s limited by network", e.Full, e.FullRate)
	}
	if e.LogsPerLog != 24*time.Minute || e.LogsBytes.Round(time.Second) != 51*time.Minute+12*time.Second {
		t.Errorf("logs %s a log + %s of bytes, want 24m0s + 51m12s", e.LogsPerLog, e.LogsBytes)
	}
	if e.Total != e.Full+e.Logs || e.Total >= 4*time.Hour || e.Total < 3*time.Hour+30*time.Minute {
		t.Errorf("total %s, want full + logs, within the case study's 4 h", e.Total)
	}
	if _, err := EstimateSiteLoss(SiteLoss{Hardware: hw, Workload: Workload{DataBytes: 1}, Logs: -1}); err == nil {
		t.Error("negative logs estimated")
	}
}
