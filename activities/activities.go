// Package activities holds the Temporal activity implementations: thin
// adapters from Temporal to the internal/ packages (heartbeats, error
// classification), and what every workflow's activities share. The
// BackupCycle's steps are methods of *cycle.Activities (package
// activities/cycle), which embeds *Activities: the steps still here are
// its methods, promoted there. Each other workflow's activities have a
// package of their own.
package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/metrics"
	"github.com/backupcycle/backupcycle/internal/storage/limit"
)

// Activities carries what activities need at run time. The worker builds one
// and registers all its exported methods (through cycle.New); each issue adds its dependencies
// here (SQL connections, storage backends, ...) instead of globals.
type Activities struct {
	// Log is the worker's logger; never nil after New.
	Log *zap.Logger
	// Version is what Health reports; empty means the build's module version
	// and VCS revision.
	Version string
	// Cycle holds the BackupCycle activities' dependencies (cycle_deps.go).
	Cycle CycleDeps
	// Metrics receives the product's measurements (bytes, step durations,
	// sets verified and failed) when a step succeeds or a set is marked;
	// nil records nothing.
	Metrics metrics.Recorder

	// bandwidth is each backup server's bandwidth_limit, shared by every
	// copy this worker runs into that server.
	bandwidth limit.Servers
	// probes are the backup paths SQL Server was seen to share with the
	// worker's locations lately (probe.go).
	probes probeCache
}

// New returns Activities with a logger (zap.NewNop when log is nil).
func New(log *zap.Logger) *Activities {
	if log == nil {
		log = zap.NewNop()
	}
	return &Activities{Log: log}
}

// loggerFor returns the worker logger tagged with the running activity and
// its workflow, so activity logs can be matched to the run in the Web UI.
// Unexported on purpose: every exported method of Activities is registered
// as an activity.
func (a *Activities) loggerFor(ctx context.Context) *zap.Logger {
	l := a.Log
	if l == nil {
		l = zap.NewNop()
	}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		l = l.With(zap.String("workflow_id", info.WorkflowExecution.ID),
			zap.String("activity", info.ActivityType.Name))
	}
	return l
}

// recorder is Metrics, or a Recorder that records nothing.
func (a *Activities) recorder() metrics.Recorder {
	if a.Metrics == nil {
		return metrics.Nop{}
	}
	return a.Metrics
}
