package crashtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/workerhost"
)

// Where BenchmarkFleetOverhead measures besides the embedded server: a
// Temporal frontend (host:port) and its namespace, e.g. the
// production-shaped stack's (`make bench-stack` sets them), and the
// processes whose CPU it reports per cycle, as name=pid pairs separated by
// commas (each pid with its descendants: PostgreSQL's backends).
const (
	envBenchFrontend  = "BACKUPCYCLE_BENCH_FRONTEND"
	envBenchNamespace = "BACKUPCYCLE_BENCH_NAMESPACE"
	envBenchPids      = "BACKUPCYCLE_BENCH_PIDS"
)

// BenchmarkFleetOverhead runs the Fleet over 200 small databases (two
// source instances, two backup servers, one verification instance, all
// emulated in this process, as BenchmarkFleet200) with the production
// worker's options and activity settings (workerhost.WorkerOptions, the
// default poll and heartbeat timeout), on the embedded server and, when
// BACKUPCYCLE_BENCH_FRONTEND names one, on that server too, in one run.
//
// The orchestration overhead of a cycle is its wall time, from the Fleet's
// start of the child to the child's result reaching the Fleet, minus its
// work: the union of the intervals in which the SQL emulators executed a
// statement of the cycle's set (on its source database, on its stripe
// files, on its restored copy) or the worker's storage had a stripe file of
// the set open. Everything else is Temporal and the workflow: the child's
// start, the slots' children, workflow tasks, activity tasks waiting for a
// worker, and what activities do around their statements (connecting,
// catalog reads and writes that the emulators do not time).
//
// Per cycle it reports cycles per minute of the run, the overhead and the
// work (and their ratio, the same-run reference), the history of the cycle
// with its slots (events, bytes), activities, workflow tasks, timers,
// signals and children, and where the overhead goes: activity tasks from
// scheduled to started (the server's matching and the worker's polls),
// from started to closed beyond the work (inside activities), workflow
// tasks from scheduled to completed, children from initiated to started.
// RPCs of the worker and client are counted per method (heartbeats are
// RecordActivityTaskHeartbeat) and the CPU of this process and of the
// BACKUPCYCLE_BENCH_PIDS processes is read from /proc before and after.
func BenchmarkFleetOverhead(b *testing.B) {
	targets := []string{"embedded"}
	if os.Getenv(envBenchFrontend) != "" {
		targets = append(targets, "cluster")
	}
	for _, target := range targets {
		b.Run("server="+target, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchFleetOverhead(b, target == "cluster")
			}
		})
	}
}

// rpcStats counts a client's unary RPCs and their latency per method.
type rpcStats struct {
	mu      sync.Mutex
	calls   map[string]int
	latency map[string]time.Duration
}

func (r *rpcStats) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	began := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	name := method[strings.LastIndex(method, "/")+1:]
	r.mu.Lock()
	r.calls[name]++
	r.latency[name] += time.Since(began)
	r.mu.Unlock()
	return err
}

func (r *rpcStats) snapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.calls {
		out[k] = v
	}
	return out
}

// dialCounting dials the embedded server (cluster false) or the one of
// BACKUPCYCLE_BENCH_FRONTEND, counting RPCs in r.
func dialCounting(b *testing.B, cluster bool, r *rpcStats) client.Client {
	b.Helper()
	opts := client.Options{Logger: quiet,
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(r.intercept)}}}
	if !cluster {
		c, err := sharedTemporal(b).NewClient(context.Background(), opts)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		return c
	}
	opts.HostPort, opts.Namespace = os.Getenv(envBenchFrontend), os.Getenv(envBenchNamespace)
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	c, err := client.Dial(opts)
	if err != nil {
		b.Fatalf("%s=%s: %v", envBenchFrontend, opts.HostPort, err)
	}
	b.Cleanup(c.Close)
	return c
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// treeCPU is the CPU time (user + system) of pid and its descendants,
// those that ended and were reaped included (cutime, cstime).
func treeCPU(pid int) (time.Duration, error) {
	children := map[int][]int{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	stats := map[int][]string{}
	for _, d := range dirs {
		raw, err := os.ReadFile(d)
		if err != nil {
			continue // ended meanwhile
		}
		// Fields after the command, which may hold spaces: state is 3.
		s := string(raw)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		p, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], p)
		stats[p] = f
	}
	if stats[pid] == nil {
		return 0, fmt.Errorf("no process %d", pid)
	}
	var ticks int64
	var walk func(p int)
	walk = func(p int) {
		// utime, stime, cutime, cstime are fields 14 to 17 of stat: 11
		// to 14 here (f[0] is field 3). A process's reaped children are
		// in its cutime and cstime, and no longer in /proc.
		for _, v := range stats[p][11:15] {
			t, _ := strconv.ParseInt(v, 10, 64)
			ticks += t
		}
		for _, c := range children[p] {
			walk(c)
		}
	}
	walk(pid)
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// benchPids are the processes of BACKUPCYCLE_BENCH_PIDS, by name, and this
// process as "self" (on the embedded server: the server, the worker and
// the emulators).
func benchPids(b *testing.B, cluster bool) map[string]int {
	out := map[string]int{"self": os.Getpid()}
	if !cluster {
		return out
	}
	for _, kv := range strings.Split(os.Getenv(envBenchPids), ",") {
		if kv == "" {
			continue
		}
		name, v, ok := strings.Cut(kv, "=")
		pid, err := strconv.Atoi(v)
		if !ok || err != nil {
			b.Fatalf("%s: %q is not name=pid", envBenchPids, kv)
		}
		out[name] = pid
	}
	return out
}

func cpuOf(b *testing.B, pids map[string]int) map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, pid := range pids {
		d, err := treeCPU(pid)
		if err != nil {
			b.Fatalf("CPU of %s: %v", name, err)
		}
		out[name] = d
	}
	return out
}

// cycleHistory is what the histories of cycles (and of the slots they
// held) show, summed.
type cycleHistory struct {
	events, bytes                int
	activities, retries          int
	actQueued, actRan            time.Duration
	wfTasks                      int
	wfQueued, wfRan              time.Duration
	timers, signals, markers     int
	upserts, children, childFail int
	childStart                   time.Duration
	wall                         time.Duration // first to last event of the cycles
	byType                       map[string]*activityTimes
}

func (h *cycleHistory) add(o cycleHistory) {
	h.events += o.events
	h.bytes += o.bytes
	h.activities += o.activities
	h.retries += o.retries
	h.actQueued += o.actQueued
	h.actRan += o.actRan
	h.wfTasks += o.wfTasks
	h.wfQueued += o.wfQueued
	h.wfRan += o.wfRan
	h.timers += o.timers
	h.signals += o.signals
	h.markers += o.markers
	h.upserts += o.upserts
	h.children += o.children
	h.childFail += o.childFail
	h.childStart += o.childStart
	h.wall += o.wall
	h.byType = addActivityTimes(h.byType, o.byType)
}

// readHistory reads one run's history; slots lists the children it started
// (workflow id and run id).
func readHistory(ctx context.Context, c client.Client, id, run string) (h cycleHistory, slots [][2]string, err error) {
	h.byType = map[string]*activityTimes{}
	it := c.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	events := map[int64]*historypb.HistoryEvent{}
	var first, last time.Time
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return h, nil, fmt.Errorf("history of %s: %w", id, err)
		}
		events[e.GetEventId()] = e
		h.events++
		h.bytes += proto.Size(e)
		at := e.GetEventTime().AsTime()
		if first.IsZero() {
			first = at
		}
		last = at
		since := func(scheduled int64) time.Duration { return at.Sub(events[scheduled].GetEventTime().AsTime()) }
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			h.activities++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := e.GetActivityTaskStartedEventAttributes()
			h.retries += int(max(a.GetAttempt()-1, 0))
			h.actQueued += since(a.GetScheduledEventId())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			var sched, started int64
			if a := e.GetActivityTaskCompletedEventAttributes(); a != nil {
				sched, started = a.GetScheduledEventId(), a.GetStartedEventId()
			} else {
				a := e.GetActivityTaskFailedEventAttributes()
				sched, started = a.GetScheduledEventId(), a.GetStartedEventId()
			}
			ran := since(started)
			h.actRan += ran
			t := activityOf(h.byType, events[sched].GetActivityTaskScheduledEventAttributes().GetActivityType().GetName())
			t.n++
			t.queued += events[started].GetEventTime().AsTime().Sub(events[sched].GetEventTime().AsTime())
			t.work += ran
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			h.wfTasks++
			h.wfQueued += since(e.GetWorkflowTaskStartedEventAttributes().GetScheduledEventId())
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			h.wfRan += since(e.GetWorkflowTaskCompletedEventAttributes().GetStartedEventId())
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			h.timers++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			h.signals++
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			h.markers++
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
			h.upserts++
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			h.children++
		case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
			a := e.GetChildWorkflowExecutionStartedEventAttributes()
			h.childStart += since(a.GetInitiatedEventId())
			slots = append(slots, [2]string{a.GetWorkflowExecution().GetWorkflowId(), a.GetWorkflowExecution().GetRunId()})
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED:
			h.childFail++
			h.childStart += since(e.GetStartChildWorkflowExecutionFailedEventAttributes().GetInitiatedEventId())
		}
	}
	h.wall = last.Sub(first)
	return h, slots, nil
}

// cycleHistories sums the histories of the cycles ids and of the slots
// they held (events and bytes only: a slot does nothing).
func cycleHistories(b *testing.B, c client.Client, ids []string) cycleHistory {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var total cycleHistory
	var firstErr error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			h, slots, err := readHistory(ctx, c, id, "")
			for _, s := range slots {
				if err != nil {
					break
				}
				var sh cycleHistory
				sh, _, err = readHistory(ctx, c, s[0], s[1])
				h.events, h.bytes = h.events+sh.events, h.bytes+sh.bytes
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			total.add(h)
		}()
	}
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	return total
}

func benchFleetOverhead(b *testing.B, cluster bool) {
	rpcs := &rpcStats{calls: map[string]int{}, latency: map[string]time.Duration{}}
	c := dialCounting(b, cluster, rpcs)
	s := newFleet200(b)
	// The production worker's activities (workerhost.NewActivities):
	// default poll and heartbeat timeout, progress signals, free slots.
	acts := activities.New(zap.NewNop())
	acts.Cycle = activities.CycleDeps{Config: s.cfg, Signal: c.SignalWorkflow, FreeSlots: workerhost.FreeSlots(c)}
	s.startWorker(b, c, acts, workerhost.WorkerOptions(s.cfg))
	pids := benchPids(b, cluster)

	rpcBefore := rpcs.snapshot()
	cpuBefore := cpuOf(b, pids)
	res, run, wall := runFleet(b, c, s)
	cpuAfter := cpuOf(b, pids)
	rpcAfter := rpcs.snapshot()

	ids, overhead, work := verifiedCycles(b, s, res)
	n := len(ids)
	h := cycleHistories(b, c, ids)
	fleetH, _, err := readHistory(context.Background(), c, run.GetID(), run.GetRunID())
	if err != nil {
		b.Fatal(err)
	}

	per := func(d time.Duration) float64 { return d.Seconds() / float64(n) }
	count := func(k int) float64 { return float64(k) / float64(n) }
	b.ReportMetric(float64(n)/wall.Minutes(), "cycles/min")
	b.ReportMetric(per(overhead), "overhead-s/cycle")
	b.ReportMetric(per(work), "work-s/cycle")
	b.ReportMetric(float64(overhead)/float64(work), "overhead/work")
	b.ReportMetric(count(h.events+fleetH.events), "events/cycle")
	b.ReportMetric(float64(h.bytes+fleetH.bytes)/1024/float64(n), "history-KiB/cycle")
	b.ReportMetric(count(h.activities), "activities/cycle")
	b.ReportMetric(count(h.wfTasks), "wf-tasks/cycle")
	b.ReportMetric(count(h.timers), "timers/cycle")
	b.ReportMetric(count(h.signals), "signals/cycle")
	b.ReportMetric(count(h.children), "children/cycle")
	b.ReportMetric(per(h.actQueued), "act-queued-s/cycle")
	b.ReportMetric(per(h.actRan-work), "act-beyond-work-s/cycle")
	b.ReportMetric(per(h.wfQueued+h.wfRan), "wf-task-s/cycle")
	b.ReportMetric(per(h.childStart), "child-start-s/cycle")
	var calls int
	for k, v := range rpcAfter {
		calls += v - rpcBefore[k]
	}
	b.ReportMetric(count(calls), "rpcs/cycle")
	b.ReportMetric(count(rpcAfter["RecordActivityTaskHeartbeat"]-rpcBefore["RecordActivityTaskHeartbeat"]), "heartbeats/cycle")
	for name := range pids {
		b.ReportMetric(per(cpuAfter[name]-cpuBefore[name]), "cpu-"+name+"-s/cycle")
	}

	// The detail behind the metrics, for finding where the time goes.
	var methods []string
	for k := range rpcAfter {
		if rpcAfter[k] > rpcBefore[k] {
			methods = append(methods, k)
		}
	}
	sort.Strings(methods)
	var line strings.Builder
	for _, k := range methods {
		fmt.Fprintf(&line, " %s %.1f (%s);", k, count(rpcAfter[k]-rpcBefore[k]), (rpcs.latency[k] / time.Duration(max(rpcAfter[k], 1))).Round(100*time.Microsecond))
	}
	b.Logf("RPCs per cycle (mean latency):%s", line.String())
	b.Logf("per cycle: wall %.2fs (cycle's own history %.2fs), workflow tasks %.1f (queued %.3fs, ran %.3fs), upserts %.1f, markers %.1f, "+
		"children %.1f (%.1f failed starts), retries %.2f, fleet history %d events", per(overhead+work), per(h.wall), count(h.wfTasks),
		per(h.wfQueued), per(h.wfRan), count(h.upserts), count(h.markers), count(h.children), count(h.childFail), count(h.retries), fleetH.events)
	b.Logf("activities (per cycle: n, queued, ran)%s", perCycleSummary(h.byType, n))
}

// perCycleSummary is "type n, queued q, ran r" per activity type, per cycle.
func perCycleSummary(byType map[string]*activityTimes, cycles int) string {
	var names []string
	for k := range byType {
		names = append(names, k)
	}
	sort.Strings(names)
	var out strings.Builder
	for _, k := range names {
		a := byType[k]
		fmt.Fprintf(&out, "; %s %.2f, %s, %s", k, float64(a.n)/float64(cycles),
			(a.queued / time.Duration(cycles)).Round(time.Millisecond), (a.work / time.Duration(cycles)).Round(time.Millisecond))
	}
	return out.String()
}
