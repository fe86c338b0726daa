package logs

import (
	"context"
	"fmt"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/config"
)

// LogPlan reads what the configuration in force says of the database's log
// backups: whether they are on, how often, how they are proven, which
// backup server holds the chain and which receives its copy. Every run of
// the chain's workflow starts with it, so a changed configuration takes
// effect at the latest when the run continues as new.
func (a *Activities) LogPlan(ctx context.Context, in LogPlanInput) (LogPlan, error) {
	d := &a.Base.Cycle
	db, err := logDatabase(d, in.Instance, in.Database)
	if err != nil {
		return LogPlan{}, err
	}
	p := LogPlan{Database: db.Name, Instance: db.Instance, Enabled: db.LogBackups(), Every: db.LogBackup.Every, ProofMode: db.ProofMode(),
		PITEvery: db.PITEvery()}
	if !p.Enabled {
		return p, nil
	}
	p.Server = chainServer(db)
	p.CopyTo = db.CopyTarget(p.Server)
	for _, s := range []string{p.Server, p.CopyTo} {
		srv, err := d.Server(s)
		if err != nil {
			return LogPlan{}, err
		}
		if srv.TaskQueue != "" && p.CopyQueue == "" {
			p.CopyQueue = srv.TaskQueue
		}
	}
	return p, nil
}

// logDatabase is the configured database whose log chain a step runs. A
// database of an availability group is refused: SQL Server takes its log
// backups on any replica of the group ("Offload supported backups to
// secondary replicas of an availability group"), but the chain would have
// to follow the preferred backup replica across fail-overs (each replica
// records its own backups in its msdb, where the chain looks for other
// tools' log backups and its own re-attaches), which it does not yet. The
// refusal names the group and what to do instead.
func logDatabase(d *activities.CycleDeps, instance, name string) (*config.Database, error) {
	db, err := d.Database(instance, name)
	if err != nil {
		return nil, err
	}
	if g, ok := d.AvailabilityGroup(db.Instance); ok && db.LogBackups() {
		return nil, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
			"database %s is a database of availability group %s, and log_backup is not supported for availability-group databases: remove log_backup for it in %s (from its databases: entry, or from defaults: when it inherits it) and keep its log backups with the job that takes them on the group's replicas; its verified full backups go on as before",
			db.Name, g.Name, d.ConfigFile()))
	}
	return db, nil
}
