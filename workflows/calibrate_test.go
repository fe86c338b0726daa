package workflows

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/backupcycle/backupcycle/activities"
	calibrateacts "github.com/backupcycle/backupcycle/activities/calibrate"
	"github.com/backupcycle/backupcycle/internal/calibrate"
)

// calibrationEnv is a Calibrate workflow over fake activities: rate gives
// each point's MB/s, fail its error.
type calibrationEnv struct {
	env    *testsuite.TestWorkflowEnvironment
	mu     sync.Mutex
	calls  []string // activity names in order
	points []calibrate.Point
}

func newCalibrationEnv(t *testing.T, rate func(calibrate.Point) float64, fail func(calibrate.Point) error) *calibrationEnv {
	var s testsuite.WorkflowTestSuite
	ce := &calibrationEnv{env: s.NewTestWorkflowEnvironment()}
	var a *calibrateacts.Activities
	record := func(name string) {
		ce.mu.Lock()
		ce.calls = append(ce.calls, name)
		ce.mu.Unlock()
	}
	ce.env.RegisterActivity(a)
	ce.env.OnActivity(a.PlanCalibration, mock.Anything, mock.Anything).Return(func(_ context.Context, in calibrateacts.CalibrateInput) (calibrateacts.CalibrationPlan, error) {
		record("plan")
		return calibrateacts.CalibrationPlan{Database: in.Database, Instance: "sql01", Server: "bak01", NICs: 2, SizeBytes: 1 << 30,
			MemoryBudget: 64 << 20, Grid: calibrate.Grid{Stripes: []int{1, 2, 4}, MaxTransferSizes: []int{4 << 20}, BuffersPerStripe: []int{8}},
			PointTimeout: time.Hour, Heartbeat: time.Minute}, nil
	})
	ce.env.OnActivity(a.CleanCalibration, mock.Anything, mock.Anything).Return(func(_ context.Context, in calibrateacts.CleanCalibrationInput) (calibrateacts.CleanCalibrationOutput, error) {
		record("clean")
		return calibrateacts.CleanCalibrationOutput{}, nil
	})
	ce.env.OnActivity(a.CalibratePoint, mock.Anything, mock.Anything).After(10 * time.Minute).Return(func(_ context.Context, in calibrateacts.CalibratePointInput) (calibrate.Result, error) {
		record("point")
		ce.mu.Lock()
		ce.points = append(ce.points, in.Point)
		ce.mu.Unlock()
		if err := fail(in.Point); err != nil {
			return calibrate.Result{}, err
		}
		return calibrate.Result{Point: in.Point, MBps: rate(in.Point), Seconds: 10}, nil
	})
	ce.env.OnActivity(a.SaveCalibration, mock.Anything, mock.Anything).Return(func(_ context.Context, r calibrate.Report) (calibrateacts.SaveCalibrationOutput, error) {
		record("save")
		return calibrateacts.SaveCalibrationOutput{}, nil
	})
	return ce
}

func TestCalibrateRunsTheGridAndCleansUpAround(t *testing.T) {
	ce := newCalibrationEnv(t, func(p calibrate.Point) float64 { return 100 * float64(p.Stripes) }, func(p calibrate.Point) error {
		if p.BufferCount > 0 {
			// SQL Server refused the buffers although the budget allowed them.
			return temporal.NewNonRetryableApplicationError("insufficient memory", activities.ErrInsufficientMemory, nil)
		}
		return nil
	})
	ce.env.ExecuteWorkflow(Calibrate, calibrateacts.CalibrateInput{Database: "Sales"})
	if err := ce.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var rep calibrate.Report
	if err := ce.env.GetWorkflowResult(&rep); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ce.calls, " "); !strings.HasPrefix(got, "plan clean point") || !strings.HasSuffix(got, "save clean") {
		t.Errorf("activities %q: want plan, clean, the points, save, clean", got)
	}
	if rep.Best == nil || rep.Best.Stripes != 4 || rep.ReadMBps != 100 {
		t.Errorf("best %+v read %v, want 4 stripes and the NUL point's 100 MB/s", rep.Best, rep.ReadMBps)
	}
	failed := 0
	for _, r := range rep.Results {
		if r.Failed != "" {
			failed++
			if !strings.Contains(r.Failed, activities.ErrInsufficientMemory) {
				t.Errorf("failed point %+v: want its error type", r)
			}
		}
	}
	if failed != 1 {
		t.Errorf("%d failed points in %+v, want the BUFFERCOUNT one recorded and the calibration finished", failed, rep.Results)
	}
}

func TestCalibrateStopsWhenTheReadFailsAndStillCleansUp(t *testing.T) {
	ce := newCalibrationEnv(t, func(calibrate.Point) float64 { return 100 }, func(p calibrate.Point) error {
		if p.Null {
			return temporal.NewNonRetryableApplicationError("login failed", activities.ErrLoginFailed, nil)
		}
		return nil
	})
	ce.env.ExecuteWorkflow(Calibrate, calibrateacts.CalibrateInput{Database: "Sales"})
	err := ce.env.GetWorkflowError()
	var appErr *temporal.ApplicationError
	if err == nil || !errors.As(err, &appErr) || appErr.Type() != activities.ErrLoginFailed {
		t.Fatalf("workflow error %v, want the read point's LoginFailed", err)
	}
	if got := strings.Join(ce.calls, " "); got != "plan clean point clean" {
		t.Errorf("activities %q, want plan, clean, the read point, clean", got)
	}
}

func TestCalibrateCancelledCleansUp(t *testing.T) {
	ce := newCalibrationEnv(t, func(calibrate.Point) float64 { return 100 }, func(calibrate.Point) error { return nil })
	ce.env.RegisterDelayedCallback(func() { ce.env.CancelWorkflow() }, 25*time.Minute) // in the third point
	ce.env.ExecuteWorkflow(Calibrate, calibrateacts.CalibrateInput{Database: "Sales"})
	if err := ce.env.GetWorkflowError(); !temporal.IsCanceledError(err) {
		t.Fatalf("workflow error %v, want cancelled", err)
	}
	if n := len(ce.calls); n < 4 || ce.calls[n-1] != "clean" || ce.calls[n-2] != "point" {
		t.Errorf("activities %v: a cancelled calibration must end with the cleanup", ce.calls)
	}
}
