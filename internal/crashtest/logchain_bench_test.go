package crashtest

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"

	"github.com/backupcycle/backupcycle/internal/workerhost"
	"github.com/backupcycle/backupcycle/workflows"
)

// logBenchTick is the benchmark's log backup interval: log_backup.every is
// a minute, the worker ticks every second (workerhost.FastLogs), so a
// second of the run is a minute of production.
const logBenchTick = time.Second

// histStats sums the histories of some workflow runs: per activity type
// too, how long its tasks waited for a worker (scheduled to started: the
// server and the worker's polls) and ran (started to closed).
type histStats struct {
	runs, events, bytes, actions int
	activities                   map[string]*activityTimes
}

type activityTimes struct {
	n            int
	queued, work time.Duration
}

func (h *histStats) add(o histStats) {
	h.runs, h.events, h.bytes, h.actions = h.runs+o.runs, h.events+o.events, h.bytes+o.bytes, h.actions+o.actions
	h.activities = addActivityTimes(h.activities, o.activities)
}

// addActivityTimes adds src's times to dst's, per activity type, and
// returns dst (made when nil).
func addActivityTimes(dst, src map[string]*activityTimes) map[string]*activityTimes {
	if dst == nil {
		dst = map[string]*activityTimes{}
	}
	for k, v := range src {
		a := activityOf(dst, k)
		a.n, a.queued, a.work = a.n+v.n, a.queued+v.queued, a.work+v.work
	}
	return dst
}

// activityOf is m's entry of activity type name, added when missing.
func activityOf(m map[string]*activityTimes, name string) *activityTimes {
	a := m[name]
	if a == nil {
		a = &activityTimes{}
		m[name] = a
	}
	return a
}

// activitySummary is "type n×, queued q, ran w" per activity type, means.
func (h histStats) activitySummary() string {
	var names []string
	for k := range h.activities {
		names = append(names, k)
	}
	sort.Strings(names)
	out := ""
	for _, k := range names {
		a := h.activities[k]
		out += fmt.Sprintf("; %s %d×: queued %s, ran %s", k, a.n, (a.queued / time.Duration(a.n)).Round(time.Millisecond),
			(a.work / time.Duration(a.n)).Round(time.Millisecond))
	}
	return out
}

// actionOf counts what Temporal Cloud bills as actions, as far as the
// history shows them: a run started (continue-as-new included), an
// activity scheduled and each retry, a timer, a child workflow started, a
// signal sent or received, a search attribute upsert, a marker (versions,
// side effects). Heartbeats and queries are not in the history.
func actionOf(e *historypb.HistoryEvent) int {
	switch e.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, enumspb.EVENT_TYPE_TIMER_STARTED,
		enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED, enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
		enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED, enumspb.EVENT_TYPE_MARKER_RECORDED:
		return 1
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
		return int(max(e.GetActivityTaskStartedEventAttributes().GetAttempt()-1, 0))
	}
	return 0
}

// histories reads the history of every run the query lists (closed or
// open; each run of a continue-as-new chain is listed on its own).
func histories(b *testing.B, c client.Client, query string) histStats {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var execs [][2]string
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{PageSize: 500, Query: query, NextPageToken: token})
		if err != nil {
			b.Fatalf("list %s: %v", query, err)
		}
		for _, e := range resp.GetExecutions() {
			execs = append(execs, [2]string{e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()})
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	var total histStats
	for _, x := range execs {
		it := c.GetWorkflowHistory(ctx, x[0], x[1], false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		h := histStats{runs: 1, activities: map[string]*activityTimes{}}
		scheduled := map[int64]*historypb.HistoryEvent{}
		started := map[int64]time.Time{}
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				b.Fatalf("history of %s: %v", x[0], err)
			}
			h.events++
			h.bytes += proto.Size(e)
			h.actions += actionOf(e)
			at := e.GetEventTime().AsTime()
			var sched int64
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				scheduled[e.GetEventId()] = e
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
				started[e.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = at
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
				sched = e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
				sched = e.GetActivityTaskFailedEventAttributes().GetScheduledEventId()
			}
			if se, ok := scheduled[sched]; ok && !started[sched].IsZero() {
				a := activityOf(h.activities, se.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName())
				a.n++
				a.queued += started[sched].Sub(se.GetEventTime().AsTime())
				a.work += at.Sub(started[sched])
			}
		}
		total.add(h)
	}
	return total
}

// BenchmarkLogChain runs the log chains of a fleet's databases on the
// embedded Temporal server and one worker: 20 databases, and 200 with
// BACKUPCYCLE_BENCH_LONG=1 (`make bench-long`). The Fleet backs every
// database up first (the full each chain starts from): its histories are
// the reference of the same run. Then every database's LogChain ticks once
// a second (log_backup.every 1m, scaled 60x) for a minute or two. It
// reports whether the chains kept up (the share of the ticks asked for
// that took a log backup, the lag of the newest log backup early and late
// in the run, and the databases the log backups per second sustained
// would serve at one a minute), Temporal actions per log backup and
// history bytes per database per day of one-minute log backups, each also
// as a ratio to one nightly cycle of the same run.
func BenchmarkLogChain(b *testing.B) {
	sizes := []int{20}
	if os.Getenv("BACKUPCYCLE_BENCH_LONG") != "" {
		sizes = append(sizes, 200)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("dbs=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchLogChains(b, n, time.Duration(min(max(n/2, 60), 120))*logBenchTick)
			}
		})
	}
}

func benchLogChains(b *testing.B, n int, run time.Duration) {
	srv := sharedTemporal(b)
	c := dial(b, srv)
	s := newFleetSite(b, n/2, "")
	// Every database takes log backups (the nightly proof: no workflow of
	// its own); the fulls of the fleet start the chains.
	s.cfg.Defaults.OwnsBackupChain, s.cfg.Defaults.CopyOnly = true, false
	s.cfg.Defaults.LogBackup.Every = time.Minute
	for j := range s.cfg.BackupServers {
		s.cfg.BackupServers[j].MaxConcurrent = 4
	}
	for j := range s.cfg.SQLInstances {
		s.cfg.SQLInstances[j].MaxConcurrent = 4
	}
	stop, dbs := runLogFleet(b, c, s)
	defer stop()
	if len(dbs) != n {
		b.Fatalf("%d cycles verified, want %d", len(dbs), n)
	}
	ref := histories(b, c, fmt.Sprintf("TaskQueue = '%s'", s.tq))

	starting := time.Now()
	for _, d := range dbs {
		if _, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: workflows.LogChainWorkflowID(d.instance, d.database),
			TaskQueue: s.tq}, workflows.LogChainName, workflows.LogChainInput{Database: d.database, Instance: d.instance}); err != nil {
			b.Fatal(err)
		}
	}
	// The run is timed from the last start: starting them all may itself
	// take a while on a busy server.
	began := time.Now()
	b.ReportMetric(began.Sub(starting).Seconds(), "start-all-s")
	// Sample the chains: the lag of each one's newest log backup.
	status := func() (logs int64, lags []time.Duration) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for _, d := range dbs {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				v, err := c.QueryWorkflow(context.Background(), workflows.LogChainWorkflowID(d.instance, d.database), "", workflows.LogChainQuery)
				var st workflows.LogChainStatus
				if err == nil {
					err = v.Get(&st)
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil || st.LastLogStart.IsZero():
					lags = append(lags, time.Since(starting))
				default:
					logs += st.LastLog
					lags = append(lags, time.Since(st.LastLogStart))
				}
			}()
		}
		wg.Wait()
		return logs, lags
	}
	var early, late []time.Duration
	var maxLag time.Duration
	for first := true; first || time.Since(began) < run; first = false {
		time.Sleep(5 * logBenchTick)
		_, lags := status()
		elapsed := time.Since(began)
		for _, l := range lags {
			maxLag = max(maxLag, l)
		}
		switch {
		case elapsed > run/6 && elapsed < run/2: // past the chains' first log backups
			early = append(early, lags...)
		case elapsed >= 2*run/3:
			late = append(late, lags...)
		}
	}
	logs, _ := status()
	ticking := time.Since(began)
	if logs == 0 {
		var st workflows.LogChainStatus
		v, err := c.QueryWorkflow(context.Background(), workflows.LogChainWorkflowID(dbs[0].instance, dbs[0].database), "", workflows.LogChainQuery)
		if err == nil {
			err = v.Get(&st)
		}
		b.Fatalf("no log backup taken in %s: the chain of %s/%s says %+v (%v)", ticking, dbs[0].instance, dbs[0].database, st, err)
	}
	for _, d := range dbs {
		_ = c.CancelWorkflow(context.Background(), workflows.LogChainWorkflowID(d.instance, d.database), "")
	}
	time.Sleep(2 * time.Second)
	chains := histories(b, c, fmt.Sprintf("TaskQueue = '%s' AND WorkflowType = '%s'", s.tq, workflows.LogChainName))

	perCycle := func(v int) float64 { return float64(v) / float64(n) }
	actionsPerLog := float64(chains.actions) / float64(logs)
	bytesPerDBDay := float64(chains.bytes) / float64(logs) * (24 * 60) // one log backup a minute
	b.ReportMetric(float64(logs)/float64(n)/ticking.Minutes()/60*100, "%-of-ticks")
	// The log backups per second it sustained, as the databases that many
	// log backups serve at the real cadence of one a minute.
	b.ReportMetric(float64(logs)/ticking.Seconds()*60, "dbs-at-1m")
	b.ReportMetric(median(early).Seconds(), "lag-early-s")
	b.ReportMetric(median(late).Seconds(), "lag-late-s")
	b.ReportMetric(maxLag.Seconds(), "lag-max-s")
	b.ReportMetric(actionsPerLog, "actions/log")
	b.ReportMetric(actionsPerLog/perCycle(ref.actions), "log/cycle-actions")
	b.ReportMetric(bytesPerDBDay/1024, "KiB/db/day")
	b.ReportMetric(bytesPerDBDay/perCycle(ref.bytes), "day/cycle-bytes")
	b.ReportMetric(float64(chains.events)/float64(logs), "events/log")
	b.Logf("%d databases: fleet %d runs, %.0f actions and %.1f KiB of history per cycle; chains %d runs, %d log backups in %s (%d events, %.1f KiB)%s",
		n, ref.runs, perCycle(ref.actions), perCycle(ref.bytes)/1024, chains.runs, logs, ticking.Round(time.Second), chains.events,
		float64(chains.bytes)/1024, chains.activitySummary())
}

// dbRef is a database of a fleet site: its instance key and name.
type dbRef struct{ instance, database string }

// runLogFleet starts a worker for s (the log chain's activities ticking
// every logBenchTick) and runs the Fleet once: the fulls the chains start
// from. It returns the worker's stop and the databases verified.
func runLogFleet(b *testing.B, c client.Client, s *fleetSite) (stop func(), dbs []dbRef) {
	b.Helper()
	acts := newActivities(s.cfg, c)
	w := worker.New(c, s.tq, workerOptions())
	workflows.RegisterWithLogs(w, acts, workerhost.FastLogs(logBenchTick)(acts))
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	fleet, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "fleet-" + s.tq, TaskQueue: s.tq},
		workflows.FleetName, workflows.FleetInput{})
	if err != nil {
		w.Stop()
		b.Fatal(err)
	}
	var res workflows.FleetResult
	if err := fleet.Get(context.Background(), &res); err != nil {
		w.Stop()
		b.Fatal(err)
	}
	for _, o := range res.Outcomes {
		if o.Outcome == workflows.OutcomeVerified {
			dbs = append(dbs, dbRef{o.Instance, o.Database})
		}
	}
	return w.Stop, dbs
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
