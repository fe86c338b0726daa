package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	calibrateacts "github.com/backupcycle/backupcycle/activities/calibrate"
	"github.com/backupcycle/backupcycle/internal/calibrate"
	"github.com/backupcycle/backupcycle/workflows"
)

// fakeCalibration stands in for Calibrate: it answers the query with its
// results as they come and returns a report.
func fakeCalibration(ctx workflow.Context, in calibrateacts.CalibrateInput) (calibrate.Report, error) {
	e, err := calibrate.NewExplorer(calibrate.Grid{Stripes: []int{1, 2, 4}, MaxTransferSizes: []int{4 << 20}, BuffersPerStripe: []int{8, 512}}, 256<<20, 1, 2)
	if err != nil {
		return calibrate.Report{}, err
	}
	prog := workflows.CalibrationProgress{}
	if err := workflow.SetQueryHandler(ctx, workflows.CalibrationQuery, func() (workflows.CalibrationProgress, error) { return prog, nil }); err != nil {
		return calibrate.Report{}, err
	}
	rep := calibrate.Report{Instance: in.Instance, Database: in.Database, Server: "bak01", NICs: 2, SizeBytes: 3 << 30, Started: workflow.Now(ctx)}
	for {
		p, _, ok := e.Next()
		if !ok {
			break
		}
		_ = workflow.Sleep(ctx, 300*time.Millisecond)
		mbps := 80 * float64(p.Stripes)
		if p.Null {
			mbps = 900
		}
		e.Record(calibrate.Result{Point: p, MBps: mbps, Seconds: 12})
		prog.Results = e.Results()
	}
	rep.Finish(e)
	rep.Finished = workflow.Now(ctx)
	return rep, nil
}

func TestCalibrateCommand(t *testing.T) {
	const tq = "tq-calibrate"
	startWorker(t, tq, func(w sdkworker.Worker) {
		w.RegisterWorkflowWithOptions(fakeCalibration, workflow.RegisterOptions{Name: workflows.CalibrateName})
	})
	dir := t.TempDir()
	code, out, errs := on(t, tq, "--config", site, "calibrate", "--database", "Sales", "--out", dir)
	if code != exitOK {
		t.Fatalf("calibrate: exit %d, stderr %q\n%s", code, errs, out)
	}
	for _, want := range []string{
		"calibration of Sales started: workflow calibrate-sql01-Sales",
		"read speed (BACKUP TO DISK = 'NUL'): 900.0 MB/s",
		"stripes            4 stripes",
		"skipped: BUFFERCOUNT 2048 x MAXTRANSFERSIZE 1024 KiB = 2048 MiB of buffers is above memory_budget (256 MiB)",
		"best: 4 stripes",
		"configuration patch (merge into the database's entry):\ndatabases:\n  - name: \"Sales\"\n    instance: \"sql01\"\n    stripes: 4\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "calibration-sql01-Sales.json"))
	if err != nil {
		t.Fatal(err)
	}
	checkJSONStyle(t, "calibration report", string(data))
	var rep calibrate.Report
	if err := json.Unmarshal(data, &rep); err != nil || rep.Proposed == nil || rep.Proposed.Stripes != 4 {
		t.Errorf("report file: %v %+v", err, rep.Proposed)
	}
	img, err := os.ReadFile(filepath.Join(dir, "calibration-sql01-Sales.png"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(img)); err != nil {
		t.Errorf("chart: %v", err)
	}

	code, out, errs = on(t, tq, "--config", site, "calibrate", "--database", "Sales", "--out", "", "--json")
	if code != exitOK {
		t.Fatalf("calibrate --json: exit %d, stderr %q", code, errs)
	}
	checkJSONStyle(t, "calibrate --json", out)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"calibrate"}, "--database NAME is required"},
		{[]string{"--config", site, "calibrate", "--database", "Nope"}, "Nope"},
		{[]string{"--config", site, "calibrate", "--database", "Sales", "--server", "bak99"}, `--server "bak99" is not defined`},
		{[]string{"--config", site, "calibrate", "--database", "Sales", "--out", filepath.Join(dir, "missing")}, "is not a directory"},
	} {
		code, out, errs := on(t, tq, c.args...)
		if code == exitOK || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q\n%s", c.args, code, errs, c.want, out)
		}
	}
}
