package workerhost

import (
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/metrics/endpoint"
	"github.com/backupcycle/backupcycle/internal/version"
	"github.com/backupcycle/backupcycle/starter/client"
)

// NewActivities builds the activities' dependencies: the one place a worker
// wires configuration and clients into them. live is the configuration the
// cycle activities read (nil leaves them failing with their "not wired"
// error instead of touching anything); mx, when metrics are served,
// receives the product's measurements.
func NewActivities(log *zap.Logger, live *LiveConfig, c *client.Client, mx *endpoint.Endpoint) *activities.Activities {
	acts := activities.New(log)
	// The health check reports what `worker --version` prints.
	acts.Version = version.String()
	if mx != nil {
		acts.Metrics = mx.Product()
	}
	if live != nil {
		acts.Cycle = activities.CycleDeps{
			Live: live,
			// Live progress for the `progress` query and the Web UI.
			Signal: c.SDK().SignalWorkflow,
			// The drill and differential schedules a fleet run keeps for
			// the databases a selection picks.
			Schedules: c,
			// A free slot's index in the plan: fewer child starts fail.
			FreeSlots: FreeSlots(c.SDK()),
		}
	}
	return acts
}
