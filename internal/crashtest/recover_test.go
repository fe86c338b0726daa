package crashtest

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/backupcycle/backupcycle/activities/logs"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/workflows"
)

// TestRecoverSurvivesAWorkerKilledMidChain kills the worker process
// (SIGKILL) while a RESTORE LOG of a recover runs on the target, in the
// middle of the chain, and starts another: the recover completes, the
// RESTORE LOG the dead worker left running is re-attached to (waited for,
// not sent again), and msdb on the target lists every log backup of the
// plan exactly once; the recovered database holds every row the source
// committed.
func TestRecoverSurvivesAWorkerKilledMidChain(t *testing.T) {
	t.Parallel()
	s := newSite(t, "Sales", 4<<20, "    owns_backup_chain: true\n    log_backup: {every: 1m}\n", func(o *sitetest.Options) {
		o.CommitLog, o.ManifestKeys = true, []string{"k1"}
	})
	srv := sharedTemporal(t)
	c := dial(t, srv)
	w1 := s.startWorkerProcess(srv.FrontendAddress())
	if _, err := wait(t, s.start(c, "full"), 3*time.Minute); err != nil {
		t.Fatalf("the verified full: %v", err)
	}
	// Five log backups, a few commits before each, taken and copied by
	// the log chain's activities.
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(quiet)
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(logs.New(newActivities(s.cfg, c)))
	var sizes []int64
	const n = 5
	for range n {
		for range 3 {
			if err := s.src.CommitNow("Sales"); err != nil {
				t.Fatal(err)
			}
		}
		v, err := env.ExecuteActivity(logs.New(nil).BackupLog, logs.BackupLogInput{Database: "Sales", Instance: s.inst})
		var out logs.BackupLogOutput
		if err == nil {
			err = v.Get(&out)
		}
		if err != nil || out.Number == 0 {
			t.Fatalf("BackupLog: %+v, %v", out, err)
		}
		if _, err := env.ExecuteActivity(logs.New(nil).CopyLogs, logs.CopyLogsInput{Database: "Sales", Instance: s.inst, Chain: out.Chain}); err != nil {
			t.Fatalf("CopyLogs: %v", err)
		}
		sizes = append(sizes, out.Bytes)
	}

	// Once the first log is restored, the target reads the backup
	// servers slowly: the second takes 20 s or more, so that its RESTORE LOG
	// still runs when the next worker's attempt (after the heartbeat
	// timeout) looks for it.
	throttle := func(rate int64) {
		for _, srv := range sitetest.Servers {
			s.verify.SetShareThrottle(sitetest.UNC(srv), rate)
		}
	}
	logsOK := func() (ok int, runningNow bool) {
		for _, st := range statements(s.verify, "RESTORE LOG") {
			if st.Outcome == "ok" {
				ok++
			}
			runningNow = runningNow || st.Outcome == "running"
		}
		return ok, runningNow
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if ok, _ := logsOK(); ok >= 1 {
				throttle(max(sizes[1]/20, 1))
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	in := workflows.RecoverInput{Database: "Sales", Instance: s.inst, ToInstance: sitetest.VerifyInstance, As: "Sales_dr", Latest: true}
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: workflows.RecoverWorkflowID(in.ToInstance, in.Name()),
		TaskQueue: s.tq}, workflows.RecoverName, in)
	if err != nil {
		t.Fatal(err)
	}
	// Mid-chain: a log restored, the next one running.
	defer func() {
		if t.Failed() {
			for _, st := range s.verify.Statements() {
				if strings.HasPrefix(st.Kind, "RESTORE") {
					t.Logf("%s %s %s %s", st.Kind, st.Outcome, st.End.Sub(st.Start), st.SQL)
				}
			}
			if v, err := c.QueryWorkflow(context.Background(), run.GetID(), "", workflows.RecoverQuery); err == nil {
				var st workflows.RecoverStatus
				_ = v.Get(&st)
				t.Logf("recover: %+v", st)
			}
		}
	}()
	until(t, "a RESTORE LOG running after one completed", 2*time.Minute, func() bool {
		ok, runningNow := logsOK()
		return ok >= 1 && runningNow
	})
	w1.kill()
	killedAt := len(statements(s.verify, "RESTORE LOG"))
	s.startWorkerProcess(srv.FrontendAddress())
	// The slow RESTORE LOG the dead worker left ends; the rest goes fast.
	until(t, "the RESTORE LOG the dead worker left to end", 2*time.Minute, func() bool {
		_, runningNow := logsOK()
		return !runningNow
	})
	throttle(0)
	res, err := waitFor[workflows.RecoverStatus](t, run, 3*time.Minute)
	if err != nil {
		t.Fatalf("recover after the worker was killed: %v", err)
	}
	if res.Outcome != workflows.RecoverRecovered || res.LogsDone != n || res.LogsRestored != n || res.State != "ONLINE" {
		t.Fatalf("result %+v", res)
	}
	if res.Reattached == 0 {
		t.Errorf("result %+v: the RESTORE LOG the dead worker left was not re-attached to", res)
	}
	var ok []string
	for _, st := range statements(s.verify, "RESTORE LOG") {
		if st.Outcome == "ok" {
			ok = append(ok, st.SQL)
		}
	}
	if len(ok) != n || len(slices.Compact(slices.Sorted(slices.Values(ok)))) != n {
		t.Fatalf("%d RESTORE LOG statements succeeded (%d sent before the kill), want each of the %d logs once:\n%s", len(ok), killedAt, n,
			strings.Join(ok, "\n"))
	}
	got, want := s.commitIDs(s.verify, "Sales_dr"), s.commitIDs(s.src, "Sales")
	if !slices.Equal(got, want) {
		t.Fatalf("the recovered database holds %d rows, the source %d", len(got), len(want))
	}
	t.Logf("recovered after the kill: %d logs in %s (%s per log), re-attached %d, skipped %d", res.LogsDone, res.Times.Total.Round(time.Millisecond),
		(res.Times.Logs / time.Duration(res.LogsDone)).Round(time.Millisecond), res.Reattached, res.Skipped)
}

// commitIDs are the ids of dbo.CommitLog in db on in, in order.
func (s *site) commitIDs(in *sqlsim.Instance, db string) []int64 {
	s.t.Helper()
	conn, err := sql.Open("sqlserver", in.DSN("sa", sqlPassword, "master"))
	if err != nil {
		s.t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query("SELECT id FROM [" + db + "].dbo.CommitLog")
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			s.t.Fatal(err)
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}
