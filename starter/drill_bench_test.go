package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/drill"
	"github.com/backupcycle/backupcycle/activities/logs"
	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/workflows"
)

// BenchmarkDrillOf500Logs drills the demo's Sales to its latest point
// through a chain of 500 log backups, on the embedded Temporal server with
// the real workflows and activities: the wall time of `starter drill`, the
// measured time to recover, the time per log backup restored, and the
// orchestration's share of the Recover: its wall time less the time its
// activities ran (dispatch, workflow tasks, history writes), read from
// the Recover's own history. BACKUPCYCLE_BENCH_LOGS sets another number
// of log backups; BACKUPCYCLE_BENCH_CPUPROFILE a file for the CPU
// profile of the drill (worker, emulator and Temporal, one process).
func BenchmarkDrillOf500Logs(b *testing.B) {
	n := 500
	if v := os.Getenv("BACKUPCYCLE_BENCH_LOGS"); v != "" {
		if k, err := strconv.Atoi(v); err != nil || k < 1 {
			b.Fatalf("BACKUPCYCLE_BENCH_LOGS=%q: give a number of log backups", v)
		} else {
			n = k
		}
	}
	const tq = "tq-bench-drill"
	state := b.TempDir()
	if err := os.Chmod(filepath.Dir(state), 0o711); err != nil {
		b.Fatal(err)
	}
	site, err := devenv.Start(context.Background(), devenv.Options{StateDir: state, DatabaseSize: devenv.MinDatabaseSize,
		TemporalAddress: srv.FrontendAddress(), LogBackups: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { site.Stop() })
	withDrill(b, site, "drill: {every: 24h}\n    rto: 1h")

	c := sdk(b)
	acts := activities.New(zap.NewNop())
	acts.Cycle = activities.CycleDeps{Config: site.Config, Signal: c.SignalWorkflow}
	env := verifiedSiteWorker(b, c, tq, site, acts, drill.New(acts))

	// n log backups, a commit before each, then one copy of them all.
	var chain int64
	for range n {
		if err := site.Source.CommitNow(devenv.Database); err != nil {
			b.Fatal(err)
		}
		v, err := env.ExecuteActivity(logs.New(nil).BackupLog, logs.BackupLogInput{Database: devenv.Database, Instance: devenv.SourceInstance})
		var out logs.BackupLogOutput
		if err == nil {
			err = v.Get(&out)
		}
		if err != nil || out.Number == 0 {
			b.Fatalf("BackupLog: %+v, %v", out, err)
		}
		chain = out.Chain
	}
	if _, err := env.ExecuteActivity(logs.New(nil).CopyLogs, logs.CopyLogsInput{Database: devenv.Database, Instance: devenv.SourceInstance,
		Chain: chain}); err != nil {
		b.Fatalf("CopyLogs: %v", err)
	}

	if f := os.Getenv("BACKUPCYCLE_BENCH_CPUPROFILE"); f != "" {
		// The drill alone, not the log backups before it.
		w, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(w); err != nil {
			b.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); w.Close() }()
	}
	b.ResetTimer()
	began := time.Now()
	code, out, errs := on(b, tq, "drill", "--config", site.ConfigFile, "--database", devenv.Database, "--latest", "--wait")
	wall := time.Since(began)
	b.StopTimer()
	if code != exitOK {
		b.Fatalf("drill --wait: exit %d\n%s%s", code, out, errs)
	}
	var st workflows.DrillStatus
	id := workflows.DrillWorkflowID(devenv.SourceInstance, devenv.Database)
	if err := c.GetWorkflow(context.Background(), id, "").Get(context.Background(), &st); err != nil {
		b.Fatal(err)
	}
	if st.Recover == nil || st.Recover.LogsDone != n {
		b.Fatalf("the drill restored %+v, want %d log backups", st.Recover, n)
	}

	// The Recover's history: its wall time, and the time its activities ran.
	var first, last time.Time
	var ran time.Duration
	started := map[int64]time.Time{}
	iter := c.GetWorkflowHistory(context.Background(), st.RecoverID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	events := 0
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			b.Fatal(err)
		}
		events++
		at := e.GetEventTime().AsTime()
		if first.IsZero() {
			first = at
		}
		last = at
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			started[e.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = at
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			ran += at.Sub(started[e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()])
		}
	}
	total := last.Sub(first)
	logs := st.Recover.Times.Logs
	b.ReportMetric(wall.Seconds(), "wall_s")
	b.ReportMetric(st.Result.RTO.Seconds(), "rto_s")
	b.ReportMetric(float64(logs.Milliseconds())/float64(n), "ms/log")
	b.ReportMetric(float64(total-ran)/float64(total)*100, "orchestration_%")
	b.ReportMetric(float64(total-ran)/float64(time.Millisecond)/float64(n), "orchestration_ms/log")
	b.Logf("drill of %d log backups: wall %s, time to recover %s (logs %s, %s a log), Recover history %d events, %s of its %s outside its activities (%.0f%%)",
		n, wall.Round(time.Millisecond), st.Result.RTO.Round(time.Millisecond), logs.Round(time.Millisecond),
		(logs / time.Duration(n)).Round(time.Microsecond), events, (total - ran).Round(time.Millisecond), total.Round(time.Millisecond),
		float64(total-ran)/float64(total)*100)
}
