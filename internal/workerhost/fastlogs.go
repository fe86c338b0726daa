package workerhost

import (
	"context"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/logs"
)

// FastLogActivities are the log chain's activities with log_backup.every
// shortened, for the development worker and the benchmarks only: the
// configuration keeps a valid every (1m at least,
// config.MinLogBackupEvery) and the chains tick every `every` instead, so
// minutes of log backups take seconds. Only the tick changes; each log
// backup is the product's own.
type FastLogActivities struct {
	*logs.Activities
	every time.Duration
}

// NewFastLogs are acts' log chain activities ticking every `every`.
func NewFastLogs(acts *activities.Activities, every time.Duration) *FastLogActivities {
	return &FastLogActivities{Activities: logs.New(acts), every: every}
}

// FastLogs is Run.LogActivities for chains that tick every `every` (nil
// for 0: as configured).
func FastLogs(every time.Duration) func(*activities.Activities) any {
	if every <= 0 {
		return nil
	}
	return func(acts *activities.Activities) any { return NewFastLogs(acts, every) }
}

// LogPlan is logs.Activities.LogPlan with the shortened tick.
func (d *FastLogActivities) LogPlan(ctx context.Context, in logs.LogPlanInput) (logs.LogPlan, error) {
	p, err := d.Activities.LogPlan(ctx, in)
	if p.Every > 0 {
		p.Every = d.every
	}
	return p, err
}

// BackupLog is logs.Activities.BackupLog with the shortened tick.
func (d *FastLogActivities) BackupLog(ctx context.Context, in logs.BackupLogInput) (logs.BackupLogOutput, error) {
	out, err := d.Activities.BackupLog(ctx, in)
	if out.Every > 0 {
		out.Every = d.every
	}
	return out, err
}
