package logs

import "context"

// LogPlan reads what the configuration in force says of the database's log
// backups: whether they are on, how often, how they are proven, which
// backup server holds the chain and which receives its copy. Every run of
// the chain's workflow starts with it, so a changed configuration takes
// effect at the latest when the run continues as new.
func (a *Activities) LogPlan(ctx context.Context, in LogPlanInput) (LogPlan, error) {
	d := &a.Base.Cycle
	db, err := d.Database(in.Instance, in.Database)
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
