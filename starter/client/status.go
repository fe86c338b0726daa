package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/backupcycle/backupcycle/workflows"
)

// StatusFilter selects the cycles CycleStatus returns.
type StatusFilter struct {
	Database string // BackupDatabase; "" for every database
	Instance string // BackupInstance; "" for every instance
	// Limit is the most cycles returned, newest first (0: DefaultStatusLimit).
	Limit int
	// ProgressTimeout bounds the `progress` query of each running cycle
	// (0: DefaultProgressTimeout); a query needs a worker to answer.
	ProgressTimeout time.Duration
}

// Defaults of StatusFilter.
const (
	DefaultStatusLimit     = 20
	DefaultProgressTimeout = 3 * time.Second
)

// CycleSummary is one BackupCycle as visibility (and, while it runs, its
// `progress` query) shows it.
type CycleSummary struct {
	WorkflowID string
	RunID      string
	Status     string // Running, Completed, Failed, Terminated, ...
	Database   string
	Instance   string // BackupInstance: set from the cycle's plan on
	Step       string // the step it is at, or the step a failed cycle failed at
	Sequence   int64
	Server     string
	Outcome    string
	Start      time.Time
	Close      time.Time // zero while running
	// Progress is the answer of the progress query (running cycles only).
	Progress *workflows.Progress
	// ProgressErr says why a running cycle's progress is missing.
	ProgressErr string
	// Pending are the running cycle's activities Temporal has scheduled or
	// started, with their attempt and last failure: a step stuck in
	// retries shows here (its progress stays at 0 %).
	Pending []PendingActivity
	// PendingErr says why Pending could not be read.
	PendingErr string
}

// PendingActivity is one activity of a running workflow that Temporal has
// scheduled or started (DescribeWorkflowExecution's PendingActivities).
type PendingActivity struct {
	ActivityID string
	Type       string // the activity type, e.g. Restore
	State      string // Scheduled, Started, CancelRequested, Paused
	// Attempt is the current attempt, 1 for the first; MaximumAttempts 0
	// means no limit (the step's deadline ends the retries).
	Attempt         int32
	MaximumAttempts int32
	// LastFailure is the message of the previous attempt's failure and
	// LastFailureType its error type (an application error type such as
	// SQLHostUnreachable, or "timeout: StartToClose"); both "" when no
	// attempt failed yet.
	LastFailure     string
	LastFailureType string
	Scheduled       time.Time
	LastStarted     time.Time
	LastHeartbeat   time.Time
	// NextAttempt is when the next attempt starts, while it waits for its
	// retry interval (zero while an attempt runs).
	NextAttempt time.Time
	// Expiration is when the retries end (zero: no deadline).
	Expiration time.Time
}

// StatusQuery is the visibility query CycleStatus runs for f. A database
// name with a backslash matches nothing through the embedded server's
// visibility query (checked on v1.32 SQLite, whatever the escaping): for
// such names CycleStatus lists all cycles and filters them itself.
func StatusQuery(f StatusFilter) string {
	q := fmt.Sprintf("WorkflowType = %s", quoteQuery(workflows.BackupCycleName))
	if f.Database != "" && !strings.Contains(f.Database, `\`) {
		q += fmt.Sprintf(" AND %s = %s", workflows.AttrDatabase.GetName(), quoteQuery(f.Database))
	}
	if f.Instance != "" && !strings.Contains(f.Instance, `\`) {
		q += fmt.Sprintf(" AND %s = %s", workflows.AttrInstance.GetName(), quoteQuery(f.Instance))
	}
	return q
}

// quoteQuery makes a string literal of the visibility query language (SQL
// like: backslash escapes, the quote escaped), so a database named
// `Sales' OR 'x` stays one value.
func quoteQuery(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// CycleStatus lists the latest cycles, newest first, with their search
// attributes, and asks every running one for its progress.
func (c *Client) CycleStatus(ctx context.Context, f StatusFilter) ([]CycleSummary, error) {
	if f.Limit <= 0 {
		f.Limit = DefaultStatusLimit
	}
	if f.ProgressTimeout <= 0 {
		f.ProgressTimeout = DefaultProgressTimeout
	}
	query := StatusQuery(f)
	var out []CycleSummary
	var token []byte
	for len(out) < f.Limit {
		resp, err := c.sdk.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.namespace, Query: query, PageSize: int32(f.Limit), NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("list backup cycles on namespace %q with query %q: %w", c.namespace, query, err)
		}
		for _, e := range resp.GetExecutions() {
			if len(out) == f.Limit {
				break
			}
			if s := summarize(e); (f.Database == "" || s.Database == f.Database) && (f.Instance == "" || s.Instance == f.Instance) {
				out = append(out, s)
			}
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	for i := range out {
		s := &out[i]
		if s.Status != statusName(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING) {
			continue
		}
		if pending, err := c.PendingActivities(ctx, s.WorkflowID, s.RunID); err != nil {
			s.PendingErr = err.Error()
		} else {
			s.Pending = pending
		}
		qctx, cancel := context.WithTimeout(ctx, f.ProgressTimeout)
		p, err := c.CycleProgress(qctx, s.WorkflowID, s.RunID)
		cancel()
		if err != nil {
			s.ProgressErr = err.Error()
			continue
		}
		s.Progress = &p
	}
	return out, nil
}

// PendingActivities describes a workflow run and returns its pending
// activities with their retry state. Unlike the progress query it needs no
// worker: Temporal keeps the attempt count and the last failure itself.
func (c *Client) PendingActivities(ctx context.Context, workflowID, runID string) ([]PendingActivity, error) {
	d, err := c.sdk.DescribeWorkflowExecution(ctx, workflowID, runID)
	if err != nil {
		return nil, fmt.Errorf("describe workflow %s on namespace %q: %w", workflowID, c.namespace, err)
	}
	var out []PendingActivity
	for _, a := range d.GetPendingActivities() {
		p := PendingActivity{
			ActivityID:      a.GetActivityId(),
			Type:            a.GetActivityType().GetName(),
			State:           a.GetState().String(),
			Attempt:         a.GetAttempt(),
			MaximumAttempts: a.GetMaximumAttempts(),
			Scheduled:       stampOf(a.GetScheduledTime()),
			LastStarted:     stampOf(a.GetLastStartedTime()),
			LastHeartbeat:   stampOf(a.GetLastHeartbeatTime()),
			NextAttempt:     stampOf(a.GetNextAttemptScheduleTime()),
			Expiration:      stampOf(a.GetExpirationTime()),
		}
		if f := a.GetLastFailure(); f != nil {
			p.LastFailure, p.LastFailureType = failureText(f)
		}
		out = append(out, p)
	}
	return out, nil
}

// failureText is a failure's message and type: the application error type
// the activity returned, or what timed out.
func failureText(f *failurepb.Failure) (string, string) {
	msg := f.GetMessage()
	switch {
	case f.GetApplicationFailureInfo() != nil:
		return msg, f.GetApplicationFailureInfo().GetType()
	case f.GetTimeoutFailureInfo() != nil:
		typ := "timeout: " + f.GetTimeoutFailureInfo().GetTimeoutType().String()
		if c := f.GetCause(); c != nil && c.GetMessage() != "" {
			// A heartbeat timeout carries the last error the activity saw.
			msg += ": " + c.GetMessage()
		}
		return msg, typ
	case f.GetCanceledFailureInfo() != nil:
		return msg, "canceled"
	}
	return msg, ""
}

func stampOf(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

// CycleProgress asks a running cycle for its progress (needs a worker).
func (c *Client) CycleProgress(ctx context.Context, workflowID, runID string) (workflows.Progress, error) {
	var p workflows.Progress
	v, err := c.sdk.QueryWorkflow(ctx, workflowID, runID, workflows.ProgressQuery)
	if err != nil {
		var late *serviceerror.DeadlineExceeded
		if ctx.Err() != nil || errors.As(err, &late) || strings.Contains(err.Error(), "before a worker could process it") {
			return p, fmt.Errorf("no answer to the %s query within the timeout (is a worker polling task queue %q?)", workflows.ProgressQuery, c.taskQueue)
		}
		return p, fmt.Errorf("%s query of %s: %w", workflows.ProgressQuery, workflowID, err)
	}
	if err := v.Get(&p); err != nil {
		return p, fmt.Errorf("decode the %s query answer of %s: %w", workflows.ProgressQuery, workflowID, err)
	}
	return p, nil
}

func summarize(e *workflowpb.WorkflowExecutionInfo) CycleSummary {
	s := CycleSummary{WorkflowID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId(), Status: statusName(e.GetStatus())}
	if e.GetStartTime() != nil {
		s.Start = e.GetStartTime().AsTime()
	}
	if e.GetCloseTime() != nil {
		s.Close = e.GetCloseTime().AsTime()
	}
	fields := e.GetSearchAttributes().GetIndexedFields()
	dc := converter.GetDefaultDataConverter()
	get := func(name string, v any) {
		if p, ok := fields[name]; ok {
			_ = dc.FromPayload(p, v) // a malformed attribute shows as empty
		}
	}
	get(workflows.AttrDatabase.GetName(), &s.Database)
	get(workflows.AttrInstance.GetName(), &s.Instance)
	get(workflows.AttrStep.GetName(), &s.Step)
	get(workflows.AttrSequence.GetName(), &s.Sequence)
	get(workflows.AttrServer.GetName(), &s.Server)
	get(workflows.AttrOutcome.GetName(), &s.Outcome)
	return s
}

// statusName is the status as the Web UI shows it: Running, Completed, ...
func statusName(st enumspb.WorkflowExecutionStatus) string { return st.String() }
