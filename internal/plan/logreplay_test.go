package plan

import (
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// tinyLogs is a drill's measured replay of a chain of minute logs: 500 log
// backups of 128 KiB in 20 s (40 ms a log), the fastest in 30 ms.
func tinyLogs(at time.Time) catalog.DrillResult {
	return catalog.DrillResult{WorkflowID: "drill/sql01/Sales", RunID: "tiny", Outcome: catalog.DrillPassed, Sequence: 1, Chain: 1, FirstLog: 1, LastLog: 500,
		LogBytes: 500 * 128 << 10, LogFastest: 30 * time.Millisecond, Steps: catalog.DrillStepTimes{Logs: 20 * time.Second, Recovery: 2 * time.Second},
		StartedAt: at.Add(-time.Minute), At: at}
}

// A chain of many small logs costs a RESTORE LOG each, whatever their
// bytes: the bytes-only estimate (the logs' bytes at the restore rate)
// predicts 0.6 s for what a drill measured at 20 s; with the
// drill's per-log cost the prediction is the drill's time, and a chain of
// twice as many logs twice that.
func TestLogReplayPerLogCostFromADrill(t *testing.T) {
	restore := StepRate{MBps: 100, Source: SourceCycle}
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	d := tinyLogs(at)
	bytesOnly, err := EstimateRecovery(RecoveryInput{FullBytes: 1 << 30, LogsSinceFull: 500, LogBytesSinceFull: d.LogBytes,
		Restore: restore, LogReplay: LogReplay{Rate: restore}})
	if err != nil {
		t.Fatal(err)
	}
	if bytesOnly.LogsSinceFull > time.Second {
		t.Fatalf("bytes-only: %s", bytesOnly.LogsSinceFull)
	}
	lr := LogReplayFrom([]catalog.DrillResult{d}, restore, nil)
	if lr.From != SourceDrill || !lr.At.Equal(at) {
		t.Fatalf("log replay %+v, want the drill's", lr)
	}
	// 20 s less 62.5 MiB at 100 MB/s = 19.375 s over 500 logs: 38.75 ms a log.
	if lr.PerLog != 38750*time.Microsecond || lr.Rate.MBps != 100 || lr.Rate.Source != SourceCycle {
		t.Fatalf("per log %s at %+v", lr.PerLog, lr.Rate)
	}
	e, err := EstimateRecovery(RecoveryInput{FullBytes: 1 << 30, LogsSinceFull: 500, LogBytesSinceFull: d.LogBytes, Restore: restore, LogReplay: lr})
	if err != nil {
		t.Fatal(err)
	}
	if e.LogsSinceFull != d.Steps.Logs {
		t.Errorf("the drill's own chain predicted at %s, measured %s", e.LogsSinceFull, d.Steps.Logs)
	}
	if bytesOnly.LogsSinceFull*10 > d.Steps.Logs {
		t.Errorf("the bytes-only estimate %s is not far under the measured %s", bytesOnly.LogsSinceFull, d.Steps.Logs)
	}
	if got := lr.Duration(1000, 2*d.LogBytes); got != 2*d.Steps.Logs {
		t.Errorf("1000 such logs: %s", got)
	}
}

// Where the split at the restore rate leaves a log more than twice the
// fastest log's time and the bytes are a visible part of the step, the
// fastest is the per-log cost and the drill's remaining
// time its bytes' rate; where the bytes at the restore rate alone take
// longer than the drill, its logs' bytes over its time is the rate. The
// newest drill that restored logs counts; an old record without its log
// bytes asks for them; none: DefaultLogOverhead at the restore rate.
func TestLogReplayFrom(t *testing.T) {
	restore := StepRate{MBps: 100, Source: SourceCycle}
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	// Ten logs of 1 GiB in 200 s, the fastest 18 s: at 100 MB/s the
	// bytes take 102.4 s; the rest over ten is 9.76 s a log, under 18 s.
	big := catalog.DrillResult{Outcome: catalog.DrillPassed, Chain: 1, FirstLog: 1, LastLog: 10, LogBytes: 10 << 30, LogFastest: 18 * time.Second,
		Steps: catalog.DrillStepTimes{Logs: 200 * time.Second}, At: at}
	lr := LogReplayFrom([]catalog.DrillResult{big}, restore, nil)
	if lr.PerLog != 9760*time.Millisecond || lr.Rate.MBps != 100 {
		t.Errorf("big logs: %s a log at %+v", lr.PerLog, lr.Rate)
	}
	// The fastest took 4 s, under half of that: it is the most a log
	// costs, and the other 160 s are the bytes (10 GiB at 64 MB/s).
	big.LogFastest = 4 * time.Second
	lr = LogReplayFrom([]catalog.DrillResult{big}, restore, nil)
	if lr.PerLog != 4*time.Second || lr.Rate.Source != SourceDrill || lr.Rate.MBps != 64 || lr.Duration(10, 10<<30) != 200*time.Second {
		t.Errorf("fastest 5 s: %s a log at %+v", lr.PerLog, lr.Rate)
	}
	// Minute logs on a busy host: the fastest restored in 5 ms, far under
	// the others, but their bytes are no visible part of the step: jitter,
	// not a cost, and the per-log cost stays the step's share.
	noisy := tinyLogs(at)
	noisy.LogFastest = 5 * time.Millisecond
	if lr := LogReplayFrom([]catalog.DrillResult{noisy}, restore, nil); lr.PerLog != 38750*time.Microsecond || lr.Rate != restore {
		t.Errorf("noisy minute logs: %s a log at %+v", lr.PerLog, lr.Rate)
	}
	// 10 GiB in 50 s: faster than the restore rate; no per-log cost.
	fast := big
	fast.Steps.Logs, fast.LogFastest = 50*time.Second, 0
	lr = LogReplayFrom([]catalog.DrillResult{fast}, restore, nil)
	if lr.PerLog != 0 || lr.Rate.Source != SourceDrill || lr.Rate.MBps != 204.8 {
		t.Errorf("fast logs: %s a log at %+v", lr.PerLog, lr.Rate)
	}
	// The newest drill counts, whatever the order.
	newer := tinyLogs(at.Add(time.Hour))
	if lr := LogReplayFrom([]catalog.DrillResult{newer, big}, restore, nil); !lr.At.Equal(newer.At) {
		t.Errorf("newest: %+v", lr)
	}
	// A drill without logs, or one whose recover did not end, measured none.
	none := []catalog.DrillResult{{Outcome: catalog.DrillPassed, Sequence: 1, Steps: catalog.DrillStepTimes{Full: time.Minute}, At: at},
		{Outcome: catalog.DrillFailed, Steps: catalog.DrillStepTimes{Logs: time.Minute}, At: at}}
	lr = LogReplayFrom(none, restore, nil)
	if lr.From != SourceAssumed || lr.PerLog != DefaultLogOverhead || lr.Rate != restore {
		t.Errorf("no drill: %+v", lr)
	}
	// An old record: its bytes from the chain records, when known.
	old := tinyLogs(at)
	old.LogBytes, old.LogFastest = 0, 0
	asked := 0
	lr = LogReplayFrom([]catalog.DrillResult{old}, restore, func(d catalog.DrillResult) (int64, bool) {
		asked++
		return 500 * 128 << 10, d.Chain == 1 && d.LastLog == 500
	})
	if asked != 1 || lr.PerLog != 38750*time.Microsecond || lr.From != SourceDrill {
		t.Errorf("old record: %+v (asked %d)", lr, asked)
	}
	if lr := LogReplayFrom([]catalog.DrillResult{old}, restore, nil); lr.From != SourceAssumed {
		t.Errorf("old record, bytes unknown: %+v", lr)
	}
}

// The prediction of one restore: each step from its bytes at the rates
// known before it runs, the recovery as the newest drill measured it.
func TestPredictRecovery(t *testing.T) {
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	r := RecoveryRates{Restore: StepRate{MBps: 100, Source: SourceCycle}, CheckDB: StepRate{MBps: 200, Source: SourceAssumed}}
	r = r.WithDrills([]catalog.DrillResult{tinyLogs(at)}, nil)
	if r.Recovery != 2*time.Second || !r.RecoveryAt.Equal(at) || r.Logs.PerLog != 38750*time.Microsecond {
		t.Fatalf("rates %+v", r)
	}
	p := PredictRecovery(RestoreSizes{FullBytes: 1000 << 20, DiffBytes: 100 << 20, Logs: 500, LogBytes: 500 * 128 << 10}, r)
	if p.Full != 10*time.Second || p.Diff != time.Second || p.Logs != 20*time.Second || p.Recovery != 2*time.Second || p.CheckDB != 5*time.Second ||
		p.Restore() != 33*time.Second {
		t.Errorf("prediction %+v", p)
	}
	if p.RestoreFrom != "cycle" || p.LogFrom != "drill" || p.CheckDBFrom != "assumed" || p.RecoveryFrom != "drill" || p.LogOverhead != 38750*time.Microsecond ||
		p.LogCount != 500 || p.FullBytes != 1000<<20 {
		t.Errorf("prediction's sources %+v", p)
	}
	// No logs: none predicted.
	if p := PredictRecovery(RestoreSizes{FullBytes: 1000 << 20}, r); p.Logs != 0 || p.LogCount != 0 {
		t.Errorf("no logs: %+v", p)
	}
}
