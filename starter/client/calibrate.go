package client

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.uber.org/zap"

	calibrateacts "github.com/backupcycle/backupcycle/activities/calibrate"
	"github.com/backupcycle/backupcycle/internal/calibrate"
	"github.com/backupcycle/backupcycle/internal/logging"
	"github.com/backupcycle/backupcycle/workflows"
)

// CalibrationRunningError: the database already has a calibration running.
type CalibrationRunningError struct {
	WorkflowID, RunID string
	Err               error
}

func (e *CalibrationRunningError) Error() string {
	return fmt.Sprintf("a calibration of this database is already running (workflow %s, run %s): wait for it or cancel it; two would measure each other",
		e.WorkflowID, e.RunID)
}

func (e *CalibrationRunningError) Unwrap() error { return e.Err }

// StartCalibration starts the Calibrate workflow for a database.
func (c *Client) StartCalibration(ctx context.Context, in calibrateacts.CalibrateInput) (sdkclient.WorkflowRun, error) {
	if in.Database == "" {
		return nil, errors.New("calibrate: no database given; name one with --database")
	}
	id := workflows.CalibrateWorkflowID(in.Instance, in.Database)
	run, err := c.sdk.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                c.taskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		StaticSummary:                            "calibration of " + workflows.CycleSummary(in.Instance, in.Database, in.Server, ""),
	}, workflows.CalibrateName, in)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return nil, &CalibrationRunningError{WorkflowID: id, RunID: started.RunId, Err: err}
		}
		return nil, fmt.Errorf("start %s on namespace %q: %w", workflows.CalibrateName, c.namespace, err)
	}
	c.log.Info("calibration started", zap.String(logging.KeyWorkflowID, run.GetID()), zap.String(logging.KeyRunID, run.GetRunID()))
	return run, nil
}

// WaitCalibration waits for a calibration and returns its report.
func (c *Client) WaitCalibration(ctx context.Context, run sdkclient.WorkflowRun) (calibrate.Report, error) {
	var r calibrate.Report
	if err := run.Get(ctx, &r); err != nil {
		if ctx.Err() != nil {
			return r, fmt.Errorf("stopped waiting for calibration %s: %w (it goes on in Temporal; `starter cancel --workflow-id %s` stops it)", run.GetID(), ctx.Err(), run.GetID())
		}
		return r, fmt.Errorf("calibration %s failed: %w", run.GetID(), err)
	}
	return r, nil
}

// CalibrationStatus asks a running calibration where it is.
func (c *Client) CalibrationStatus(ctx context.Context, workflowID string) (workflows.CalibrationProgress, error) {
	var p workflows.CalibrationProgress
	v, err := c.sdk.QueryWorkflow(ctx, workflowID, "", workflows.CalibrationQuery)
	if err != nil {
		return p, fmt.Errorf("%s query of %s: %w", workflows.CalibrationQuery, workflowID, err)
	}
	if err := v.Get(&p); err != nil {
		return p, fmt.Errorf("decode the %s query answer of %s: %w", workflows.CalibrationQuery, workflowID, err)
	}
	return p, nil
}
