package activities

import (
	"github.com/backupcycle/backupcycle/internal/plan"
)

// measuredEstimate is the expected duration of each step of a cycle of
// size bytes: the rates measured on the database's last verified sets
// (plan.FromManifests) where they fit the run, TimeoutSite's elsewhere
// (plan.Estimate). The measured copy rate is capped at the remote
// server's bandwidth limit, which may have been lowered since.
func measuredEstimate(size int64, nics, remoteNICs int, compressed bool, bandwidthLimit int64,
	measured plan.Throughput) (plan.CycleEstimate, plan.Throughput, error) {
	if bandwidthLimit > 0 && measured.Copy.Measured() {
		measured.Copy.MBps = min(measured.Copy.MBps, float64(bandwidthLimit)/plan.MiB)
	}
	return plan.Estimate(plan.SiteCycle(size, nics, remoteNICs, compressed, bandwidthLimit), compressed, measured)
}

// measuredSteps names the steps whose rate was measured (or assumed), for
// the plan's log line.
func measuredSteps(r plan.Throughput, measured bool) []string {
	out := []string{}
	for _, s := range []struct {
		name string
		rate plan.StepRate
	}{{"backup", r.Backup}, {"copy", r.Copy}, {"restore", r.Restore}, {"checkdb", r.CheckDB}} {
		if s.rate.Measured() == measured {
			out = append(out, s.name)
		}
	}
	return out
}
