package crashtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	calibrateacts "github.com/backupcycle/backupcycle/activities/calibrate"
	"github.com/backupcycle/backupcycle/internal/calibrate"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/tsql"
	starter "github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// calibrationFiles lists the calibration files in a backup server's directory.
func (s *site) calibrationFiles(server string) []string {
	s.t.Helper()
	entries, err := os.ReadDir(s.dirs[server])
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	prefix := tsql.CalibrationFilePrefix(s.inst, s.db)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func (s *site) startCalibration(c client.Client, grid *calibrate.Grid) client.WorkflowRun {
	s.t.Helper()
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: workflows.CalibrateWorkflowID(s.inst, s.db), TaskQueue: s.tq,
	}, workflows.CalibrateName, calibrateacts.CalibrateInput{Database: s.db, Instance: s.inst, Grid: grid})
	if err != nil {
		s.t.Fatalf("start calibration: %v", err)
	}
	return run
}

func waitCalibration(t *testing.T, run client.WorkflowRun, limit time.Duration) (calibrate.Report, error) {
	t.Helper()
	return waitFor[calibrate.Report](t, run, limit)
}

// The emulator throttled like a backup server with 4 NICs of 16 MB/s each
// and a per-stream cap of 12 MB/s: one file is capped by its stream, more
// files over more paths add up until every NIC is full. Calibrate finds
// that and proposes spreading over all paths; settings above the memory
// budget are skipped with the reason; every backup is COPY_ONLY and no
// calibration file is left.
func TestCalibrateFindsMoreStripesOverMorePaths(t *testing.T) {
	t.Parallel()
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s := newSite(t, "Sales", 24<<20, "    memory_budget: 200MiB\n", func(o *sitetest.Options) { o.NICs = 4 })
	s.src.SetThrottle(12 << 20)
	for _, p := range sitetest.NICPaths("bak01", 4) {
		s.src.SetShareThrottle(p, 16<<20)
	}
	s.inProcessWorker(c)

	// Through the starter's client, which refuses a second calibration of
	// the database while one runs.
	sc := starter.New(c, config.Temporal{Address: srv.FrontendAddress(), Namespace: srv.Namespace(), TaskQueue: s.tq}, zap.NewNop())
	run, err := sc.StartCalibration(context.Background(), calibrateacts.CalibrateInput{Database: s.db, Instance: s.inst})
	if err != nil {
		t.Fatal(err)
	}
	var busy *starter.CalibrationRunningError
	if _, err := sc.StartCalibration(context.Background(), calibrateacts.CalibrateInput{Database: s.db, Instance: s.inst}); !errors.As(err, &busy) {
		t.Errorf("a second calibration while one runs: %v, want CalibrationRunningError", err)
	}
	rep, err := sc.WaitCalibration(context.Background(), run)
	if err != nil {
		t.Fatalf("calibration: %v", err)
	}
	byStripes := map[int]float64{}
	for _, r := range rep.Results {
		t.Logf("%-18s %-40s %6.1f MB/s %s", r.Phase, r.Point, r.MBps, r.Failed)
		if r.Phase == calibrate.PhaseStripes && r.Failed == "" {
			byStripes[r.Stripes] = r.MBps
		}
	}
	for _, sk := range rep.Skipped {
		t.Logf("skipped %s: %s", sk.Point, sk.Reason)
	}
	if rep.ReadMBps <= 0 {
		t.Errorf("no read speed (BACKUP TO NUL) in the report")
	}
	if !(byStripes[2] > 1.5*byStripes[1] && byStripes[4] > 1.5*byStripes[2]) {
		t.Errorf("MB/s by stripe count %v: 2 files over 2 paths and 4 over 4 should each be clearly faster", byStripes)
	}
	if rep.Proposed == nil || rep.Proposed.Stripes < 4 || rep.Proposed.Stripes%4 != 0 {
		t.Fatalf("proposed %+v, want a multiple of the 4 NIC paths", rep.Proposed)
	}
	if rep.Proposed.MBps < 2.5*byStripes[1] {
		t.Errorf("proposed %s at %.1f MB/s, not clearly faster than 1 file (%.1f)", rep.Proposed.Point, rep.Proposed.MBps, byStripes[1])
	}
	if !strings.Contains(rep.Patch, "stripes: ") {
		t.Errorf("patch %q", rep.Patch)
	}
	overBudget := false
	for _, sk := range rep.Skipped {
		overBudget = overBudget || strings.Contains(sk.Reason, "memory_budget")
	}
	if !overBudget {
		t.Errorf("no grid point skipped for the memory budget: %+v", rep.Skipped)
	}
	for _, st := range sitetest.Statements(s.src, "BACKUP DATABASE") {
		if !strings.Contains(st.SQL, "COPY_ONLY") {
			t.Errorf("a calibration BACKUP without COPY_ONLY: %s", st.SQL)
		}
		if over := memoryOf(st.SQL); over > 200<<20 {
			t.Errorf("a BACKUP above the memory budget ran: %s", st.SQL)
		}
	}
	if left := s.calibrationFiles("bak01"); len(left) > 0 {
		t.Errorf("calibration files left on bak01: %v", left)
	}
	data, err := os.ReadFile(filepath.Join(s.dirs["bak01"], tsql.CalibrationReportName(s.inst, s.db)))
	if err != nil {
		t.Fatalf("report not kept on the backup server: %v", err)
	}
	var kept calibrate.Report
	if err := json.Unmarshal(data, &kept); err != nil || kept.Proposed == nil || kept.Proposed.Point != rep.Proposed.Point {
		t.Errorf("kept report %+v (%v), want the workflow's", kept.Proposed, err)
	}
}

// memoryOf is BUFFERCOUNT x MAXTRANSFERSIZE of a BACKUP statement's text
// (SQL Server's defaults when left out: 1 MiB; BUFFERCOUNT is then small).
func memoryOf(stmt string) int64 {
	var bc, mts int64 = 0, 1 << 20
	for _, part := range strings.Split(stmt, ",") {
		part = strings.TrimSpace(part)
		var v int64
		if n, _ := fmt.Sscanf(part, "BUFFERCOUNT = %d", &v); n == 1 {
			bc = v
		}
		if n, _ := fmt.Sscanf(part, "MAXTRANSFERSIZE = %d", &v); n == 1 {
			mts = v
		}
	}
	return bc * mts
}

// A worker killed in the middle of a calibration BACKUP: the point is
// retried on another worker, which stops what the dead one left and
// deletes its files; when the calibration ends no calibration file is
// left. A calibration cancelled mid-point leaves none either.
func TestCalibrateWorkerKilledLeavesNoFile(t *testing.T) {
	t.Parallel()
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s := newSite(t, "Sales", 32<<20, "", func(o *sitetest.Options) { o.NICs = 2 })
	s.src.SetThrottle(4 << 20) // 8 s for one file
	w := s.startWorkerProcess(srv.FrontendAddress())
	grid := &calibrate.Grid{Stripes: []int{2, 4}}

	run := s.startCalibration(c, grid)
	until(t, "a calibration BACKUP writing its files", 2*time.Minute, func() bool {
		return running(s.src, "BACKUP DATABASE") && len(s.calibrationFiles("bak01")) > 0
	})
	w.kill()
	t.Logf("killed the worker with %v on bak01", s.calibrationFiles("bak01"))
	s.startWorkerProcess(srv.FrontendAddress())
	rep, err := waitCalibration(t, run, 4*time.Minute)
	if err != nil {
		t.Fatalf("calibration after the worker was killed: %v", err)
	}
	if rep.Best == nil {
		t.Errorf("no result after the restart: %+v", rep.Results)
	}
	if left := s.calibrationFiles("bak01"); len(left) > 0 {
		t.Errorf("calibration files left after a worker was killed mid-calibration: %v", left)
	}
	if running(s.src, "BACKUP DATABASE") {
		t.Errorf("a calibration BACKUP still runs: %v", outcomes(s.src, "BACKUP DATABASE"))
	}
	runs := history(t, c, run)
	if runs.started["CalibratePoint"] <= len(rep.Results) {
		t.Errorf("%d CalibratePoint attempts for %d results: the killed worker's point was not retried", runs.started["CalibratePoint"], len(rep.Results))
	}
	record(t, runs.events, "calibrate_worker_killed")

	// Cancelled in the middle of a point.
	run = s.startCalibration(c, grid)
	until(t, "a calibration BACKUP writing its files", 2*time.Minute, func() bool {
		return running(s.src, "BACKUP DATABASE") && len(s.calibrationFiles("bak01")) > 0
	})
	if err := c.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()); err != nil {
		t.Fatal(err)
	}
	if _, err := waitCalibration(t, run, 2*time.Minute); err == nil {
		t.Fatal("a cancelled calibration ended without error")
	}
	until(t, "the cancelled calibration's files to go", time.Minute, func() bool {
		return len(s.calibrationFiles("bak01")) == 0 && !running(s.src, "BACKUP DATABASE")
	})
}

// A calibration waits while another backup of the database runs (SQL
// Server would make it wait anyway, and time the wait): its first BACKUP
// starts after the other one ended.
func TestCalibrateWaitsForAnotherBackup(t *testing.T) {
	t.Parallel()
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s := newSite(t, "Sales", 16<<20, "", func(o *sitetest.Options) { o.NICs = 2 })
	s.src.SetThrottle(4 << 20) // the other backup takes about 4 s
	db, err := sql.Open("sqlserver", s.src.DSN("sa", sqlPassword, "master"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	other := make(chan error, 1)
	go func() {
		_, err := db.Exec(`BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\other-tool.bak' WITH COPY_ONLY, INIT, FORMAT`)
		other <- err
	}()
	until(t, "the other backup to run", time.Minute, func() bool { return running(s.src, "BACKUP DATABASE") })
	s.inProcessWorker(c)
	run := s.startCalibration(c, &calibrate.Grid{Stripes: []int{2}})
	if err := <-other; err != nil {
		t.Fatalf("the other backup: %v", err)
	}
	if _, err := waitCalibration(t, run, 3*time.Minute); err != nil {
		t.Fatalf("calibration: %v", err)
	}
	sts := sitetest.Statements(s.src, "BACKUP DATABASE")
	if len(sts) < 2 || !strings.Contains(sts[0].SQL, "other-tool.bak") {
		t.Fatalf("BACKUP statements %+v, want the other tool's first", sts)
	}
	for _, st := range sts[1:] {
		if st.Start.Before(sts[0].End) {
			t.Errorf("calibration BACKUP started at %s, before the other backup ended at %s: %s", st.Start, sts[0].End, st.SQL)
		}
	}
}
