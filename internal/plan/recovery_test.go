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
