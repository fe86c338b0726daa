// Package workflows holds the Temporal workflow code of backupcycle:
// deterministic, no I/O. Everything that touches the outside world runs in an
// activity (package activities).
package workflows

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// TaskQueue is the default task queue the worker polls and starters use.
const TaskQueue = "backupcycle"

// Workflow type names, as registered with the worker and shown in the Web UI.
const (
	HealthCheckName = "HealthCheck"
	BackupCycleName = "BackupCycle"
)

// Custom search attributes: the Web UI and `starter status` filter cycles by
// them, e.g. BackupDatabase = 'Sales' AND BackupOutcome = 'verified'.
var (
	AttrDatabase = temporal.NewSearchAttributeKeyKeyword("BackupDatabase")
	AttrSequence = temporal.NewSearchAttributeKeyInt64("BackupSequence")
	AttrStep     = temporal.NewSearchAttributeKeyKeyword("BackupStep")
	AttrServer   = temporal.NewSearchAttributeKeyKeyword("BackupServer")
	AttrOutcome  = temporal.NewSearchAttributeKeyKeyword("BackupOutcome")
)

// SearchAttributeTypes is what a server must have registered for these
// workflows to run: the embedded devserver registers it at start, and
// `worker --config` checks it against a real cluster.
var SearchAttributeTypes = map[string]enumspb.IndexedValueType{
	AttrDatabase.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	AttrSequence.GetName(): enumspb.INDEXED_VALUE_TYPE_INT,
	AttrStep.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	AttrServer.GetName():   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	AttrOutcome.GetName():  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}
