package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/calibrate"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
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

// calibrations reads the calibration reports of db on servers (each by its
// names: a listing of the database's sets does not show them), as the
// plan's measured backup rates (calibrate.Report.Throughput). A report that
// cannot be read is only logged: the plan falls back to what else it knows.
func (a *Activities) calibrations(ctx context.Context, db *config.Database, servers []string) []plan.Throughput {
	var out []plan.Throughput
	for _, name := range servers {
		srv, err := a.Cycle.server(name)
		if err != nil {
			continue
		}
		st, err := a.Cycle.openStorage(ctx, srv)
		if err != nil {
			continue
		}
		r, ok, err := LoadCalibration(ctx, st, db.Instance, db.Name)
		st.Close()
		if err != nil {
			a.loggerFor(ctx).Warn("calibration report not read", zap.String("db", db.Name), zap.String("server", name), zap.Error(err))
			continue
		}
		if ok {
			if tp := r.Throughput(); tp.Any() {
				out = append(out, tp)
			}
		}
	}
	return out
}

// LoadCalibration reads the newest calibration report of a database from a
// backup server (under the current naming, else the legacy one); ok is
// false when there is none.
func LoadCalibration(ctx context.Context, st storage.Storage, instance, db string) (r calibrate.Report, ok bool, err error) {
	for _, name := range tsql.CalibrationReportNames(instance, db) {
		data, err := storage.ReadFile(ctx, st, name)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return r, false, err
		}
		if err := json.Unmarshal(data, &r); err != nil {
			return r, false, fmt.Errorf("calibration report %s: %w", name, err)
		}
		return r, true, nil
	}
	return r, false, nil
}
