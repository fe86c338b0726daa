// Package workflows holds the Temporal workflow code of backupcycle:
// deterministic, no I/O. Everything that touches the outside world runs in an
// activity (package activities).
package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"

	"github.com/backupcycle/backupcycle/internal/tsql"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// TaskQueue is the default task queue the worker polls and starters use.
const TaskQueue = "backupcycle"

// Workflow type names, as registered with the worker and shown in the Web UI.
const (
	HealthCheckName = "HealthCheck"
	BackupCycleName = "BackupCycle"
	FleetName       = "Fleet"
)

// Custom search attributes: the Web UI and `starter status` filter cycles by
// them, e.g. BackupDatabase = 'Sales' AND BackupOutcome = 'verified'.
var (
	AttrDatabase = temporal.NewSearchAttributeKeyKeyword("BackupDatabase")
	AttrInstance = temporal.NewSearchAttributeKeyKeyword("BackupInstance")
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
	AttrInstance.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	AttrSequence.GetName(): enumspb.INDEXED_VALUE_TYPE_INT,
	AttrStep.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	AttrServer.GetName():   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	AttrOutcome.GetName():  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9._]+`)

// CycleWorkflowID is the workflow id of every cycle of one (instance,
// database): backup-<instance>-<database> (backup-<database> without an
// instance: the id of no database, see BackupCycle's launcher). One id per
// database lets Temporal refuse a second cycle while one runs. Characters
// outside [A-Za-z0-9._] become "_" for a readable Web UI list; when that
// changed anything, a short hash of the real names keeps two databases from
// sharing an id.
func CycleWorkflowID(instance, database string) string {
	return workflowID("backup", instance, database)
}

// workflowID is <prefix>-<instance>-<database>, escaped (see CycleWorkflowID).
func workflowID(prefix, instance, database string) string {
	parts := []string{database}
	if instance != "" {
		parts = []string{instance, database}
	}
	id, changed := prefix, false
	for _, p := range parts {
		safe := unsafeID.ReplaceAllString(p, "_")
		changed = changed || safe != p
		id += "-" + safe
	}
	if changed {
		sum := sha256.Sum256([]byte(instance + "\x00" + database))
		id += "-" + hex.EncodeToString(sum[:4])
	}
	return id
}

// CycleSummary is the one-line summary the Web UI shows for a cycle:
// "Sales@sql01 → bak01, verify on bak02" (the primary and the remote copy
// target, when known); a name with invisible characters is shown escaped
// (tsql.Printable).
func CycleSummary(instance, database, primary, remote string) string {
	s := tsql.Printable(database)
	if instance != "" {
		s += "@" + instance
	}
	if primary != "" {
		s += " → " + primary
	}
	if remote != "" {
		s += ", verify on " + remote
	}
	return s
}

// DiffStartID is the id under which a scheduled differential of
// (instance, database) starts (Temporal appends each run's start time); it
// runs the cycle under CycleWorkflowID, one cycle of a database at a time.
func DiffStartID(instance, database string) string { return pathID("diff", instance, database) }

// DrillIDPrefix and DiffIDPrefix start the ids DrillWorkflowID and
// DiffStartID give the databases of instance: every id of that instance's
// drills (or differential schedules) starts with it.
func DrillIDPrefix(instance string) string { return pathPrefix("drill", instance) }
func DiffIDPrefix(instance string) string  { return pathPrefix("diff", instance) }

func pathPrefix(prefix, instance string) string {
	return prefix + "/" + unsafeID.ReplaceAllString(instance, "_") + "/"
}

// pathID is <prefix>/<instance>/<name>, characters outside
// [A-Za-z0-9._] escaped as CycleWorkflowID escapes them, with a short hash
// of the real names when that changed anything.
func pathID(prefix, instance, name string) string {
	si, sn := unsafeID.ReplaceAllString(instance, "_"), unsafeID.ReplaceAllString(name, "_")
	id := pathPrefix(prefix, instance) + sn
	if si != instance || sn != name {
		sum := sha256.Sum256([]byte(instance + "\x00" + name))
		id += "-" + hex.EncodeToString(sum[:4])
	}
	return id
}
