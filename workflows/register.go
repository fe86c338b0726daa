package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	calibrateacts "github.com/backupcycle/backupcycle/activities/calibrate"
	cycleacts "github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/activities/drill"
	fleetacts "github.com/backupcycle/backupcycle/activities/fleet"
	"github.com/backupcycle/backupcycle/activities/health"
	"github.com/backupcycle/backupcycle/activities/logs"
	"github.com/backupcycle/backupcycle/activities/recover"
)

// Register registers every workflow and activity of the product on a worker.
// It is the one list: a new workflow adds its line to RegisterWorkflows, new
// activities are methods of *cycle.Activities for the BackupCycle (or, for
// the log chain, of *logs.Activities; for the recover, of
// *recover.Activities; for the Fleet, of *fleet.Activities; for a
// calibration, of *calibrate.Activities; for the HealthCheck, of
// *health.Activities) and come for free.
func Register(r worker.Registry, acts *activities.Activities) {
	RegisterWith(r, acts, Overrides{})
}

// RegisterWithLogs is Register with the log chain's activities given: a
// value whose methods carry the names of *logs.Activities' (the
// development worker's, which shortens log_backup.every).
func RegisterWithLogs(r worker.Registry, acts *activities.Activities, logActs any) {
	RegisterWith(r, acts, Overrides{Logs: logActs})
}

// Overrides are activities registered instead of the product's own: values
// whose methods carry the names of *logs.Activities' (Logs) and of
// *drill.Activities' (Drill); nil registers the product's. The development
// worker's shorten log_backup.every and compare restored copies with the
// source.
type Overrides struct {
	Logs, Drill any
}

// RegisterWith is Register with the activities of o in place of the
// product's.
func RegisterWith(r worker.Registry, acts *activities.Activities, o Overrides) {
	if o.Logs == nil {
		o.Logs = logs.New(acts)
	}
	if o.Drill == nil {
		o.Drill = drill.New(acts)
	}
	RegisterWorkflows(r)
	// The BackupCycle's, under their method names (package activities/cycle;
	// the steps still methods of *activities.Activities are promoted there).
	r.RegisterActivity(cycleacts.New(acts))
	// The log chain's, over the same dependencies (package activities/logs).
	r.RegisterActivity(o.Logs)
	// The recover's (package activities/recover).
	r.RegisterActivity(recover.New(acts))
	// The drill's (package activities/drill).
	r.RegisterActivity(o.Drill)
	// The Fleet's (package activities/fleet).
	r.RegisterActivity(fleetacts.New(acts))
	// The calibration's (package activities/calibrate).
	r.RegisterActivity(calibrateacts.New(acts))
	// The HealthCheck's (package activities/health).
	r.RegisterActivity(health.New(acts))
}

// RegisterWorkflows registers the workflows only, under their stable names;
// a worker.WorkflowReplayer satisfies WorkflowRegistry, so replay tests use it.
func RegisterWorkflows(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(HealthCheck, workflow.RegisterOptions{Name: HealthCheckName})
	r.RegisterWorkflowWithOptions(BackupCycle, workflow.RegisterOptions{Name: BackupCycleName})
	r.RegisterWorkflowWithOptions(Fleet, workflow.RegisterOptions{Name: FleetName})
	r.RegisterWorkflowWithOptions(Calibrate, workflow.RegisterOptions{Name: CalibrateName})
	r.RegisterWorkflowWithOptions(ConcurrencySlot, workflow.RegisterOptions{Name: SlotName})
	r.RegisterWorkflowWithOptions(LogChain, workflow.RegisterOptions{Name: LogChainName})
	r.RegisterWorkflowWithOptions(LogProof, workflow.RegisterOptions{Name: LogProofName})
	r.RegisterWorkflowWithOptions(ScratchProof, workflow.RegisterOptions{Name: ScratchProofName})
	r.RegisterWorkflowWithOptions(Recover, workflow.RegisterOptions{Name: RecoverName})
	r.RegisterWorkflowWithOptions(Drill, workflow.RegisterOptions{Name: DrillName})
}
