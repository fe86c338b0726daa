package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	calibrateacts "github.com/backupcycle/backupcycle/activities/calibrate"
	"github.com/backupcycle/backupcycle/internal/calibrate"
)

// CalibrateName is the calibration workflow's type name.
const CalibrateName = "Calibrate"

// CalibrationQuery answers where a calibration is: the point running and
// the results so far.
const CalibrationQuery = "calibration"

// CalibrateWorkflowID is the one id of every calibration of (instance,
// database): calibrate-<instance>-<database>, escaped as CycleWorkflowID.
// Two calibrations of one database would share its backup server's NICs
// and measure each other.
func CalibrateWorkflowID(instance, database string) string {
	return workflowID("calibrate", instance, database)
}

// CalibrationProgress is the CalibrationQuery's answer.
type CalibrationProgress struct {
	Phase   string             `json:"phase"`
	Index   int                `json:"index"` // the point running, from 1
	Point   string             `json:"point,omitempty"`
	Percent float64            `json:"percent"`
	Results []calibrate.Result `json:"results,omitempty"`
	Done    bool               `json:"done"`
}

// Calibrate measures which BACKUP settings the database's backup server
// sustains (seeds 001 and 004): the read speed (a backup to NUL), then
// stripe counts over the NIC paths, MAXTRANSFERSIZE and BUFFERCOUNT, every
// one a COPY_ONLY backup whose files are deleted as soon as it ends. A
// point above the memory budget is skipped with its reason, never run. The
// report proposes a configuration patch and is kept beside the manifests.
// Calibration files never outlive the workflow: they are removed before the
// first point, after each point, and on the way out, cancelled or failed.
func Calibrate(ctx workflow.Context, in calibrateacts.CalibrateInput) (calibrate.Report, error) {
	var a *calibrateacts.Activities
	log := workflow.GetLogger(ctx)
	progress := CalibrationProgress{Phase: "plan"}
	if err := workflow.SetQueryHandler(ctx, CalibrationQuery, func() (CalibrationProgress, error) { return progress, nil }); err != nil {
		return calibrate.Report{}, fmt.Errorf("register %s query: %w", CalibrationQuery, err)
	}
	signals := workflow.GetSignalChannel(ctx, activities.ProgressSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var p activities.StepProgress
			if !signals.Receive(ctx, &p) {
				return
			}
			if p.Sequence == int64(progress.Index) {
				progress.Percent = p.Percent
			}
		}
	})

	var p calibrateacts.CalibrationPlan
	err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         retry(5*time.Second, 5),
		Summary:             "plan the calibration of " + in.Database,
	}), a.PlanCalibration, in).Get(ctx, &p)
	if err != nil {
		return calibrate.Report{}, err
	}
	for _, w := range p.Warnings {
		log.Warn("calibration plan: " + w)
	}
	token := runToken(workflow.GetInfo(ctx).WorkflowExecution.RunID)
	clean := func(ctx workflow.Context) error {
		return workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 10 * time.Minute,
			HeartbeatTimeout:    time.Minute,
			RetryPolicy:         retry(5*time.Second, 10),
			Summary:             "remove the calibration files of " + p.Database + " on " + p.Server,
		}), a.CleanCalibration, calibrateacts.CleanCalibrationInput{
			Database: p.Database, Instance: p.Instance, Server: p.Server, Token: token,
		}).Get(ctx, nil)
	}
	// Leftovers of a calibration that was terminated go first.
	if err := clean(ctx); err != nil {
		return calibrate.Report{}, err
	}
	defer func() {
		// Also when cancelled or failed: a context of its own.
		dctx, cancel := workflow.NewDisconnectedContext(ctx)
		defer cancel()
		if err := clean(dctx); err != nil {
			log.Error("calibration files not removed; the next calibration of the database removes them", "error", err)
		}
	}()

	e, err := calibrate.NewExplorer(p.Grid, p.MemoryBudget, 1, p.NICs)
	if err != nil {
		return calibrate.Report{}, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrInvalidConfig, err)
	}
	report := calibrate.Report{
		Instance: p.Instance, Database: p.Database, Server: p.Server, NICs: p.NICs, SizeBytes: p.SizeBytes,
		Compression: p.Compression, MemoryBudget: p.MemoryBudget, Grid: p.Grid, Started: workflow.Now(ctx),
	}
	for index := 1; ; index++ {
		pt, phase, ok := e.Next()
		if !ok {
			break
		}
		progress.Phase, progress.Index, progress.Point, progress.Percent = phase, index, pt.String(), 0
		var r calibrate.Result
		err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: p.PointTimeout,
			HeartbeatTimeout:    p.Heartbeat,
			// A cancel stops the BACKUP before its files are removed.
			WaitForCancellation: true,
			RetryPolicy:         retry(10*time.Second, 3, activities.ErrInsufficientMemory),
			Summary:             fmt.Sprintf("calibrate %s: %s (%s)", p.Database, pt, phase),
		}), a.CalibratePoint, calibrateacts.CalibratePointInput{
			Database: p.Database, Instance: p.Instance, Server: p.Server, Token: token, Index: index,
			Point: pt, Compression: p.Compression,
		}).Get(ctx, &r)
		if err != nil {
			if cancelled(ctx, err) {
				return report, err
			}
			if fatalToCalibration(pt, err) {
				return report, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("calibration of %s stopped at %s: %s", p.Database, pt, failureText(err)), errorType(err), err)
			}
			r = calibrate.Result{Failed: failureText(err)}
			log.Warn("calibration point failed", "point", pt.String(), "error", err)
		}
		r.Point = pt
		e.Record(r)
		progress.Results = e.Results()
	}
	report.Finish(e)
	report.Finished = workflow.Now(ctx)
	progress.Phase, progress.Done = "done", true
	err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         retry(5*time.Second, 10),
		Summary:             "keep the calibration report of " + p.Database + " on " + p.Server,
	}), a.SaveCalibration, report).Get(ctx, nil)
	if err != nil {
		return report, err
	}
	return report, nil
}

// fatalToCalibration: failures that every other point would meet too (the
// instance, the login, the database, the configuration, or the read itself)
// end the calibration; any other failure is that point's result.
func fatalToCalibration(pt calibrate.Point, err error) bool {
	if pt.Null {
		return true
	}
	switch errorType(err) {
	case activities.ErrSQLHostUnreachable, activities.ErrLoginFailed, activities.ErrDatabaseNotFound,
		activities.ErrDatabaseUnavailable, activities.ErrInvalidConfig, activities.ErrBackupTargetUnreachable:
		return true
	}
	var te *temporal.TimeoutError
	return errors.As(err, &te)
}

// failureText is a failed point's type and message, capped for the report.
func failureText(err error) string {
	msg := err.Error()
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		msg = appErr.Type() + ": " + appErr.Message()
	}
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	return msg
}

// runToken is the short form of a run id that names a calibration's files.
func runToken(runID string) string {
	t := strings.ReplaceAll(runID, "-", "")
	if len(t) > 12 {
		t = t[:12]
	}
	if t == "" {
		t = "run"
	}
	return t
}
