package workflows

import (
	"reflect"
	"slices"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
)

// namesRegistry records the activity type names a registration gives:
// each exported method of a registered struct under its method name, as
// the SDK's RegisterActivity names them.
type namesRegistry struct {
	worker.Registry // nil: Register calls only the two methods below
	names           []string
}

func (r *namesRegistry) RegisterWorkflowWithOptions(any, workflow.RegisterOptions) {}

func (r *namesRegistry) RegisterActivity(a any) {
	t := reflect.TypeOf(a)
	for i := range t.NumMethod() {
		if m := t.Method(i); m.IsExported() {
			r.names = append(r.names, m.Name)
		}
	}
}

// TestRegisterKeepsActivityTypeNames: a history records each activity by
// its type name, so a running workflow finds its activities only under the
// names they had when it started. Moving activities between packages must
// keep every name, once, and add no prefix.
func TestRegisterKeepsActivityTypeNames(t *testing.T) {
	var r namesRegistry
	Register(&r, activities.New(nil))
	slices.Sort(r.names)
	want := []string{
		"AllocateSequence", "ApplyLogs", "ApplyRetention", "Backup", "BackupLog", "CalibratePoint", "CheckDB", "CheckDrill",
		"CheckFleetCarry", "CleanCalibration", "CopyImmutable", "CopyLogs", "CopyToRemote", "DropDrill", "DropProofCopy",
		"DropVerifyDB", "FinishRecover", "Health", "KeepSelectedSchedules", "LogPlan", "MarkCancelled", "MarkFailed",
		"MarkVerified", "NightlyProof", "PITProof", "PlanCalibration", "PlanCycle", "PlanFleet", "PlanRecover",
		"PrepareDrill", "RecordDrill", "RecordSetEvidence", "ResolveDrill", "Restore", "RestoreDiff", "RestoreFull",
		"RestoreLog", "ResumeSet", "SanityChecks", "SaveCalibration", "StageDrill", "StopStatements", "UnstageDrill", "WriteManifest",
	}
	if !slices.Equal(r.names, want) {
		t.Errorf("registered activity types\n%q\nwant\n%q", r.names, want)
	}
}
