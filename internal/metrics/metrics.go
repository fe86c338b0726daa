// Package metrics names what backupcycle measures and holds the two ways
// code reports a measurement: CycleEnded, which workflow code calls through
// the Temporal SDK's metrics handler, and Recorder, which the activities
// call. It imports only the Temporal SDK so that workflow code stays free
// of an exporter; internal/metrics/endpoint is the worker's Prometheus
// endpoint that implements Recorder and serves them all.
package metrics

import (
	"time"

	"go.temporal.io/sdk/client"
)

// CycleCounter counts finished cycles through the SDK's metrics handler.
// Prometheus shows it as backupcycle_cycles_total (a monotonic counter gets
// the _total suffix), with the handler's tags (namespace, task_queue,
// workflow_type) and TagOutcome and TagType.
const CycleCounter = "backupcycle_cycles"

// Tags of CycleCounter.
const (
	TagOutcome = "outcome"
	TagType    = "type"
)

// Outcomes of a cycle, the values of TagOutcome.
const (
	OutcomeVerified  = "verified"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
	// OutcomeSkipped is a cycle that did not run: another cycle of the same
	// database held it, or the window ended first.
	OutcomeSkipped = "skipped"
)

// NoType is the TagType of an outcome without an error type (verified).
const NoType = "none"

// CycleEnded counts one finished cycle by outcome (OutcomeVerified,
// OutcomeFailed, ...) and errorType (the ApplicationError type of a
// failure, activities/errors.go; "" becomes NoType).
//
// Workflow code calls it once per cycle, when the outcome is known, with
// the workflow's own handler:
//
//	metrics.CycleEnded(workflow.GetMetricsHandler(ctx), metrics.OutcomeFailed, errType)
//
// That handler records nothing while the workflow replays, so a cycle
// counts once however often its history is replayed; it adds no command to
// the history, so calling it needs no workflow.GetVersion. A nil h records
// nothing.
func CycleEnded(h client.MetricsHandler, outcome, errorType string) {
	if h == nil {
		return
	}
	if errorType == "" {
		errorType = NoType
	}
	h.WithTags(map[string]string{TagOutcome: outcome, TagType: errorType}).Counter(CycleCounter).Inc(1)
}

// Steps whose duration is measured (the activities' step names).
const (
	StepBackup  = "backup"
	StepCopy    = "copy"
	StepRestore = "restore"
	StepCheckDB = "checkdb"
	// StepImmutable is the copy of a verified set to its object store.
	StepImmutable = "immutable-copy"
)

// Recorder receives the activities' measurements at the moment a step of a
// set succeeds or a set is marked failed. The worker's implementation is
// internal/metrics/endpoint.Product; Nop records nothing.
type Recorder interface {
	// StepDone records a finished step (StepBackup, StepCopy, StepRestore,
	// StepCheckDB) of a set of instance/database, how long it took and, for
	// the backup and the copy, the bytes of the set written to server.
	StepDone(step, instance, database, server string, bytes int64, took time.Duration)
	// Verified records a set just marked verified: when its BACKUP finished
	// and its measured time to recover (restore + CHECKDB; 0 unknown).
	Verified(instance, database string, takenAt time.Time, timeToRecover time.Duration)
	// SetFailed records a set marked failed at step on evidence (the
	// manifest's step and catalog.Evidence).
	SetFailed(step, evidence string)
	// SourceDamaged records a BACKUP of instance/database that met damage
	// in the database itself (a page failing its checksum, a data file
	// the disk could not read): the production database needs attention.
	SourceDamaged(instance, database string)
	// ImmutableProbed records an object store's immutability probe: false
	// when a locked object could be deleted, shortened or overwritten
	// there with the worker's credentials.
	ImmutableProbed(server string, immutable bool, at time.Time)
	// EvidenceNotRecorded counts a proof of instance/database whose
	// evidence record could not be appended to server's ledger (the
	// proof itself stands).
	EvidenceNotRecorded(instance, database, server string)
}

// Nop is a Recorder that records nothing.
type Nop struct{}

// StepDone does nothing.
func (Nop) StepDone(string, string, string, string, int64, time.Duration) {}

// Verified does nothing.
func (Nop) Verified(string, string, time.Time, time.Duration) {}

// SetFailed does nothing.
func (Nop) SetFailed(string, string) {}

// SourceDamaged does nothing.
func (Nop) SourceDamaged(string, string) {}

// ImmutableProbed does nothing.
func (Nop) ImmutableProbed(string, bool, time.Time) {}

// EvidenceNotRecorded does nothing.
func (Nop) EvidenceNotRecorded(string, string, string) {}
