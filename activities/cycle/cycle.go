// Package cycle holds the BackupCycle workflow's steps, one file per step
// (README "Where a cycle step lives"). They run over the dependencies every
// workflow's activities share (*activities.Activities) and call what the
// root package exports for them (activities/cycle_shared.go, shared.go).
package cycle

import "github.com/backupcycle/backupcycle/activities"

// Activities are the BackupCycle's steps; the worker registers them
// (workflows.Register) under their method names, the activity types the
// recorded histories name. *activities.Activities is embedded: its
// dependencies (Cycle, Log, Metrics) are the steps' own, and the steps
// still in package activities are its methods, promoted here, so
// registering Activities registers every step of the cycle.
type Activities struct {
	*activities.Activities
}

// New returns the cycle's steps over base's dependencies.
func New(base *activities.Activities) *Activities {
	return &Activities{Activities: base}
}
