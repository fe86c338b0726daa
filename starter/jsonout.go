package main

// The --json shapes of every command, in one style: snake_case keys,
// durations as seconds (numbers, keys ending in _seconds), timestamps as RFC
// 3339 strings (omitted when unknown). The workflows' own types marshal
// durations as nanoseconds, so each is mapped here rather than printed as is.

import (
	"encoding/json"
	"io"
	"sort"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// rfc3339 is t in UTC, or "" when t is zero (then omitempty drops it).
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func rfc3339s(ts []time.Time) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, rfc3339(t))
	}
	return out
}

func secs(d time.Duration) float64 { return d.Seconds() }

type startedJSON struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Database   string `json:"database,omitempty"`
	Instance   string `json:"instance,omitempty"`
	Namespace  string `json:"namespace"`
	TaskQueue  string `json:"task_queue"`
}

type timingsJSON struct {
	Backup  float64 `json:"backup_seconds"`
	Copy    float64 `json:"copy_seconds"`
	Restore float64 `json:"restore_seconds"`
	CheckDB float64 `json:"checkdb_seconds"`
	Sanity  float64 `json:"sanity_seconds"`
	Total   float64 `json:"total_seconds"`
}

func timingsOf(t activities.Timings) timingsJSON {
	return timingsJSON{Backup: secs(t.Backup), Copy: secs(t.Copy), Restore: secs(t.Restore), CheckDB: secs(t.CheckDB),
		Sanity: secs(t.Sanity), Total: secs(t.Total)}
}

type stripeJSON struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Size   int64  `json:"size_bytes,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

type setRefJSON struct {
	Server   string `json:"server"`
	Sequence int64  `json:"sequence"`
	State    string `json:"state,omitempty"`
}

type cycleResultJSON struct {
	Database       string       `json:"database"`
	Instance       string       `json:"instance"`
	Sequence       int64        `json:"sequence"`
	Server         string       `json:"server"`
	Remote         string       `json:"remote"`
	VerifyDatabase string       `json:"verify_database"`
	Manifest       string       `json:"manifest"`
	Stripes        []stripeJSON `json:"stripes"`
	Locations      []string     `json:"locations"`
	Timings        timingsJSON  `json:"timings"`
	Failed         []int64      `json:"failed,omitempty"`
	Deleted        []setRefJSON `json:"deleted,omitempty"`
	Warnings       []string     `json:"warnings,omitempty"`
	Skipped        string       `json:"skipped,omitempty"`
	SkipReason     string       `json:"skip_reason,omitempty"` // not-preferred-replica
	HeldBy         string       `json:"held_by,omitempty"`
	RunBy          string       `json:"run_by,omitempty"`
}

type cycleRunJSON struct {
	WorkflowID string          `json:"workflow_id"`
	RunID      string          `json:"run_id"`
	Result     cycleResultJSON `json:"result"`
}

func cycleRunOf(r client.CycleRun) cycleRunJSON {
	res := r.Result
	out := cycleResultJSON{Database: res.Database, Instance: res.Instance, Sequence: res.Sequence, Server: res.Server, Remote: res.Remote,
		VerifyDatabase: res.VerifyDatabase, Manifest: res.Manifest, Stripes: []stripeJSON{}, Locations: res.Locations,
		Timings: timingsOf(res.Timings), Failed: res.Failed, Warnings: res.Warnings, Skipped: res.Skipped, SkipReason: res.SkipReason, HeldBy: res.HeldBy, RunBy: res.RunBy}
	if out.Locations == nil {
		out.Locations = []string{}
	}
	for _, s := range res.Stripes {
		out.Stripes = append(out.Stripes, stripeJSON(s))
	}
	for _, d := range res.Deleted {
		out.Deleted = append(out.Deleted, setRefJSON(d))
	}
	return cycleRunJSON{WorkflowID: r.WorkflowID, RunID: r.RunID, Result: out}
}

type progressJSON struct {
	Step     string      `json:"step"`
	Sequence int64       `json:"sequence,omitempty"`
	Server   string      `json:"server,omitempty"`
	Percent  float64     `json:"percent"`
	Bytes    int64       `json:"bytes"`
	Outcome  string      `json:"outcome"`
	Timings  timingsJSON `json:"timings"`
	Failed   []int64     `json:"failed,omitempty"`
	Error    string      `json:"error,omitempty"`
}

func progressOf(p *workflows.Progress) *progressJSON {
	if p == nil {
		return nil
	}
	return &progressJSON{Step: p.Step, Sequence: p.Sequence, Server: p.Server, Percent: p.Percent, Bytes: p.Bytes,
		Outcome: p.Outcome, Timings: timingsOf(p.Timings), Failed: p.Failed, Error: p.Error}
}

type pendingJSON struct {
	ActivityID      string `json:"activity_id"`
	Type            string `json:"type"`
	State           string `json:"state"`
	Attempt         int32  `json:"attempt"`
	MaximumAttempts int32  `json:"maximum_attempts"` // 0: no limit
	LastFailure     string `json:"last_failure,omitempty"`
	LastFailureType string `json:"last_failure_type,omitempty"`
	ScheduledAt     string `json:"scheduled_at,omitempty"`
	LastStartedAt   string `json:"last_started_at,omitempty"`
	LastHeartbeatAt string `json:"last_heartbeat_at,omitempty"`
	NextAttemptAt   string `json:"next_attempt_at,omitempty"`
	ExpiresAt       string `json:"expires_at,omitempty"`
}

type cycleStatusJSON struct {
	WorkflowID    string        `json:"workflow_id"`
	RunID         string        `json:"run_id"`
	Status        string        `json:"status"`
	Database      string        `json:"database"`
	Instance      string        `json:"instance,omitempty"`
	Step          string        `json:"step,omitempty"`
	Sequence      int64         `json:"sequence,omitempty"`
	Server        string        `json:"server,omitempty"`
	Outcome       string        `json:"outcome,omitempty"`
	StartedAt     string        `json:"started_at,omitempty"`
	ClosedAt      string        `json:"closed_at,omitempty"`
	Duration      *float64      `json:"duration_seconds,omitempty"` // closed cycles
	Progress      *progressJSON `json:"progress,omitempty"`
	ProgressError string        `json:"progress_error,omitempty"`
	Pending       []pendingJSON `json:"pending_activities,omitempty"`
	PendingError  string        `json:"pending_error,omitempty"`
}

type statusJSON struct {
	Namespace string            `json:"namespace"`
	Cycles    []cycleStatusJSON `json:"cycles"`
}

func cycleStatusOf(s client.CycleSummary) cycleStatusJSON {
	out := cycleStatusJSON{WorkflowID: s.WorkflowID, RunID: s.RunID, Status: s.Status, Database: s.Database, Instance: s.Instance,
		Step: s.Step, Sequence: s.Sequence, Server: s.Server, Outcome: s.Outcome, StartedAt: rfc3339(s.Start), ClosedAt: rfc3339(s.Close),
		Progress: progressOf(s.Progress), ProgressError: s.ProgressErr, PendingError: s.PendingErr}
	if !s.Close.IsZero() && !s.Start.IsZero() {
		d := secs(s.Close.Sub(s.Start))
		out.Duration = &d
	}
	for _, p := range s.Pending {
		out.Pending = append(out.Pending, pendingJSON{ActivityID: p.ActivityID, Type: p.Type, State: p.State, Attempt: p.Attempt,
			MaximumAttempts: p.MaximumAttempts, LastFailure: p.LastFailure, LastFailureType: p.LastFailureType,
			ScheduledAt: rfc3339(p.Scheduled), LastStartedAt: rfc3339(p.LastStarted), LastHeartbeatAt: rfc3339(p.LastHeartbeat),
			NextAttemptAt: rfc3339(p.NextAttempt), ExpiresAt: rfc3339(p.Expiration)})
	}
	return out
}

type outcomeJSON struct {
	Instance   string   `json:"instance"`
	Database   string   `json:"database"`
	Outcome    string   `json:"outcome"`
	Type       string   `json:"type,omitempty"`
	Sequence   int64    `json:"sequence,omitempty"`
	WorkflowID string   `json:"workflow_id,omitempty"`
	SizeBytes  int64    `json:"size_bytes,omitempty"`
	Duration   *float64 `json:"duration_seconds,omitempty"`
	Reason     string   `json:"reason,omitempty"`
}

// countJSON is one outcome's count: a list, so outcome names such as
// not-reached stay values, not keys.
type countJSON struct {
	Outcome string `json:"outcome"`
	Count   int    `json:"count"`
}

func outcomesOf(outs []workflows.DatabaseOutcome) []outcomeJSON {
	res := make([]outcomeJSON, 0, len(outs))
	for _, o := range outs {
		j := outcomeJSON{Instance: o.Instance, Database: o.Database, Outcome: o.Outcome, Type: o.Type, Sequence: o.Sequence,
			WorkflowID: o.WorkflowID, SizeBytes: o.SizeBytes, Reason: o.Reason}
		if o.Duration > 0 {
			d := secs(o.Duration)
			j.Duration = &d
		}
		res = append(res, j)
	}
	return res
}

func countsOf(m map[string]int) []countJSON {
	out := make([]countJSON, 0, len(m))
	for k, v := range m {
		out = append(out, countJSON{Outcome: k, Count: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Outcome < out[j].Outcome })
	return out
}

type fleetResultJSON struct {
	WorkflowID string        `json:"workflow_id"`
	RunID      string        `json:"run_id"`
	BeganAt    string        `json:"began_at,omitempty"`
	EndedAt    string        `json:"ended_at,omitempty"`
	Duration   float64       `json:"duration_seconds"`
	Counts     []countJSON   `json:"counts"`
	Outcomes   []outcomeJSON `json:"outcomes"`
}

type fleetStatusJSON struct {
	WorkflowID string        `json:"workflow_id"`
	BeganAt    string        `json:"began_at,omitempty"`
	DeadlineAt string        `json:"deadline_at,omitempty"`
	Running    []string      `json:"running"`
	Pending    []string      `json:"pending"`
	Counts     []countJSON   `json:"counts"`
	Outcomes   []outcomeJSON `json:"outcomes"`
	Usage      string        `json:"usage"`
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type scheduleJSON struct {
	ScheduleID     string   `json:"schedule_id"`
	Database       string   `json:"database"`
	Cron           []string `json:"cron"`
	Jitter         float64  `json:"jitter_seconds"`
	TimeZone       string   `json:"time_zone,omitempty"`
	Paused         bool     `json:"paused"`
	Note           string   `json:"note,omitempty"`
	Overlap        string   `json:"overlap"`
	CatchupWindow  float64  `json:"catchup_window_seconds"`
	NextRuns       []string `json:"next_runs"`
	LastRunAt      string   `json:"last_run_at,omitempty"`
	LastWorkflowID string   `json:"last_workflow_id,omitempty"`
	Running        int      `json:"running"`
}

func scheduleOf(s client.ScheduleSummary) scheduleJSON {
	return scheduleJSON{ScheduleID: s.ScheduleID, Database: s.Database, Cron: orEmpty(s.Cron), Jitter: secs(s.Jitter), TimeZone: s.TimeZone,
		Paused: s.Paused, Note: s.Note, Overlap: s.Overlap.String(), CatchupWindow: secs(s.CatchupWindow), NextRuns: rfc3339s(s.NextRuns),
		LastRunAt: rfc3339(s.LastRun), LastWorkflowID: s.LastWorkflowID, Running: s.Running}
}

type appliedJSON struct {
	ScheduleID string   `json:"schedule_id"`
	Database   string   `json:"database"`
	Action     string   `json:"action"` // created or updated
	NextRuns   []string `json:"next_runs"`
}

type applyJSON struct {
	Applied []appliedJSON `json:"applied"`
	// Orphans are schedules of databases no longer in the configuration.
	Orphans []scheduleJSON `json:"orphans"`
}

type cancelJSON struct {
	Cancelled []cancelledJSON `json:"cancelled"`
}

type cancelledJSON struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Type       string `json:"workflow_type"`
	Database   string `json:"database,omitempty"`
	Instance   string `json:"instance,omitempty"`
	// Status is the run's status after --wait (Canceled, or Completed when
	// it finished first); "CancelRequested" without --wait.
	Status string `json:"status"`
}
