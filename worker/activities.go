package main

import (
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/metrics/endpoint"
	"github.com/backupcycle/backupcycle/starter/client"
)

// newActivities builds the activities' dependencies: the one place the
// worker wires configuration and clients into them. In --dev cfg is the
// emulated site's configuration (internal/devenv); nil leaves the cycle
// activities failing with their "not wired" error instead of touching anything.
// mx, when --metrics-addr is given, receives the product's measurements.
func newActivities(log *zap.Logger, cfg *config.Config, c *client.Client, mx *endpoint.Endpoint) *activities.Activities {
	acts := activities.New(log)
	if mx != nil {
		acts.Metrics = mx.Product()
	}
	if cfg != nil {
		acts.Cycle = activities.CycleDeps{
			Config: cfg,
			// Live progress for the `progress` query and the Web UI.
			Signal: c.SDK().SignalWorkflow,
		}
	}
	return acts
}
