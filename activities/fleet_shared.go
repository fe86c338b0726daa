package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/fleet"
)

// The helpers the Fleet's activities (package activities/fleet) share with
// the cycle's, exported as functions or methods of CycleDeps (an exported
// method of Activities would be registered as an activity).

// fleetLimits are the configuration's max_concurrent settings a fleet run
// obeys; a cycle's concurrency slots (slotsOf) are the same limits.
func fleetLimits(cfg *config.Config) fleet.Limits {
	l := fleet.Limits{Total: cfg.Fleet.MaxConcurrent, Instances: map[string]int{}, Servers: map[string]int{}}
	for _, s := range cfg.SQLInstances {
		l.Instances[s.Name] = s.MaxConcurrent
	}
	// A group's cycles back up on one of its replicas each: they count
	// against the group's own limit.
	for _, g := range cfg.AvailabilityGroups {
		l.Instances[g.Name] = g.MaxConcurrent
	}
	for _, s := range cfg.BackupServers {
		l.Servers[s.Name] = s.MaxConcurrent
	}
	return l
}

// FleetLimits are the configuration's max_concurrent settings a fleet run
// obeys.
func FleetLimits(cfg *config.Config) fleet.Limits { return fleetLimits(cfg) }

// errorTypeOf is the ApplicationError type in err's chain, or "".
func errorTypeOf(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

// ErrorType is the ApplicationError type in err's chain, or "".
func ErrorType(err error) string { return errorTypeOf(err) }

// Configured is the configuration in force, or the non-retryable
// InvalidConfig of a worker started without one.
func (d *CycleDeps) Configured() (*config.Config, error) {
	cfg := d.config()
	if cfg == nil {
		return nil, errNotWired
	}
	return cfg, nil
}

// CheckNames checks every name a cycle of db derives (checkNames): a name
// over its limit is InvalidConfig.
func (d *CycleDeps) CheckNames(db *config.Database) error { return d.checkNames(db) }

// ListServer reads manifests on a backup server with list (catalog.List of
// one database, catalog.ListInstances of a fleet's), authenticated with the
// manifest keys, failures classified.
func ListServer(a *Activities, ctx context.Context, server string,
	list func(context.Context, catalog.FS, *catalog.Keys) (catalog.Listing, error)) (catalog.Listing, error) {
	return a.listServer(ctx, server, list)
}
