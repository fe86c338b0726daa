package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	mssqldb "github.com/microsoft/go-mssqldb"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/drill"
	"github.com/backupcycle/backupcycle/activities/logs"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/workerhost"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// The demo's point-in-time proof. The product's ScratchProof workflow
// restores the newest verified full and the logs to a random instant T of
// the proven window into a scratch copy (PITProof), checks it and drops it.
// The development worker runs that proof every pitEvery (the configuration
// keeps pit_proof.every at its default, a day), and before the workflow
// drops a copy that passed, compares its dbo.CommitLog row by row with the
// source's: exactly the rows committed at or before T ("Restore a SQL
// Server Database to a Point in Time (Full Recovery Model)"). The demo
// prints the first comparison.

// pitEveryTicks is the development worker's point-in-time proof cadence in
// log ticks.
const pitEveryTicks = 10

// devLogs are the development worker's log chain activities: the tick
// shortened (workerhost.FastLogActivities), the point-in-time proof every
// pitEvery, each copy it restores compared with the source.
type devLogs struct {
	*workerhost.FastLogActivities
	pitEvery time.Duration
	site     *devenv.Site
	keys     func() (*catalog.Keys, error)
	checks   *pitChecks
}

// rowCheck is a restored copy's dbo.CommitLog compared row by row with the
// source's: it must hold exactly the rows committed at or before at.
type rowCheck struct {
	at time.Time // on the source's clock
	// rows the copy held, all of them committed at or before at (when
	// missing and extra are empty); later the source's rows after at.
	rows, later    int
	missing, extra []string
	err            error // the comparison could not be made
}

// siteRows reads dbo.CommitLog on the site's instances.
type siteRows struct{ site *devenv.Site }

// compare compares the copy on sqlverify with the source's rows committed
// at or before at (the source's clock).
func (s siteRows) compare(ctx context.Context, copy string, at time.Time) rowCheck {
	c := rowCheck{at: at}
	got, err := s.commitRows(ctx, s.site.Verify, copy)
	if err != nil {
		c.err = fmt.Errorf("read the copy %s on %s: %w", copy, devenv.VerifyInstance, err)
		return c
	}
	src, err := s.commitRows(ctx, s.site.Source, devenv.Database)
	if err != nil {
		c.err = fmt.Errorf("read %s on %s: %w", devenv.Database, devenv.SourceInstance, err)
		return c
	}
	want := map[string]bool{}
	for _, r := range src {
		if r.At.After(at) {
			c.later++
			continue
		}
		want[r.Key()] = true
	}
	have := map[string]bool{}
	for _, r := range got {
		have[r.Key()] = true
		if !want[r.Key()] {
			c.extra = append(c.extra, r.Key())
		}
	}
	for k := range want {
		if !have[k] {
			c.missing = append(c.missing, k)
		}
	}
	sort.Strings(c.missing)
	c.rows = len(got)
	return c
}

// show prints the rows line of the comparison, point naming at and after
// referring to it; a copy that does not hold exactly the rows committed
// by then fails the demo.
func (c rowCheck) show(w io.Writer, what, point, after string) error {
	switch {
	case c.err != nil:
		if errors.Is(c.err, errNoCommitLog) {
			fmt.Fprintf(w, "  rows:    not compared: %v\n", c.err)
			return nil
		}
		return fmt.Errorf("%s: the copy's rows were not compared: %w", what, c.err)
	case len(c.missing)+len(c.extra) > 0:
		return fmt.Errorf("%s to %s: the copy holds %d rows, %d of the source's committed by then missing %v, %d it should not have %v",
			what, c.at.Format("2006-01-02T15:04:05.000"), c.rows, len(c.missing), head(c.missing), len(c.extra), head(c.extra))
	}
	fmt.Fprintf(w, "  rows:    the copy held exactly the %d rows of dbo.CommitLog committed at or before %s, compared row by row with %s's %s (%d committed after %s are not in it)\n",
		c.rows, point, devenv.SourceInstance, devenv.Database, c.later, after)
	return nil
}

// LogPlan is the fast tick's plan with the point-in-time proof every
// pitEvery.
func (d *devLogs) LogPlan(ctx context.Context, in logs.LogPlanInput) (logs.LogPlan, error) {
	p, err := d.FastLogActivities.LogPlan(ctx, in)
	if p.PITEvery > 0 {
		p.PITEvery = d.pitEvery
	}
	return p, err
}

// PITProof is the product's point-in-time proof, its copy then compared
// with the source while it is still there (the workflow drops it next).
func (d *devLogs) PITProof(ctx context.Context, in logs.PITProofInput) (logs.ProofOutput, error) {
	out, err := d.FastLogActivities.PITProof(ctx, in)
	if err == nil && out.OK && in.Database == devenv.Database {
		d.checks.add(d.compare(ctx, out))
	}
	return out, err
}

// pitCheck is one point-in-time copy compared with the source; its at is
// T on the source's clock, the STOPAT sent.
type pitCheck struct {
	proof logs.ProofOutput
	rowCheck
}

// pitChecks are the comparisons this process made.
type pitChecks struct {
	mu  sync.Mutex
	all []pitCheck
}

func (p *pitChecks) add(c pitCheck) {
	p.mu.Lock()
	p.all = append(p.all, c)
	p.mu.Unlock()
}

func (p *pitChecks) first() (pitCheck, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.all) == 0 {
		return pitCheck{}, false
	}
	return p.all[0], true
}

// compare reads the STOPAT the proof sent from its record and compares the
// copy's rows with the source's committed at or before it.
func (d *devLogs) compare(ctx context.Context, out logs.ProofOutput) pitCheck {
	stopAt, err := d.stopAt(ctx, out)
	if err != nil {
		return pitCheck{proof: out, rowCheck: rowCheck{err: err}}
	}
	return pitCheck{proof: out, rowCheck: siteRows{d.site}.compare(ctx, out.Copy, stopAt)}
}

// stopAt is the STOPAT of the proof out in the database's proof record on
// the backup servers (the newest record that holds it).
func (d *devLogs) stopAt(ctx context.Context, out logs.ProofOutput) (time.Time, error) {
	keys, err := d.keys()
	if err != nil {
		return time.Time{}, err
	}
	var found *catalog.PITProof
	var at time.Time
	for _, s := range devenv.BackupServers {
		st, err := local.Open(ctx, d.site.BackupDirs[s])
		if err != nil {
			continue
		}
		rec, err := catalog.LoadLogProof(ctx, catalog.StorageFS{Storage: st}, keys, devenv.SourceInstance, devenv.Database)
		if err != nil || rec == nil || !rec.Trusted() || !rec.UpdatedAt.After(at) {
			continue
		}
		for i := range rec.PIT {
			if p := rec.PIT[i]; p.Sequence == out.Sequence && p.Target.Equal(out.Target) {
				found, at = &rec.PIT[i], rec.UpdatedAt
			}
		}
	}
	if found == nil {
		return time.Time{}, fmt.Errorf("no proof record on %v holds the proof to %s", devenv.BackupServers, out.Target.Format(time.RFC3339Nano))
	}
	return wall(found.StopAt), nil
}

// errNoCommitLog: Sales has no dbo.CommitLog, as databases created by
// the demo before it had one.
var errNoCommitLog = errors.New("no dbo.CommitLog: the state directory is of an earlier demo (make clean starts over with it)")

// commitRows reads database's dbo.CommitLog on in as AdminLogin.
func (s siteRows) commitRows(ctx context.Context, in *sqlsim.Instance, database string) ([]sqlsim.CommitRow, error) {
	db, err := sql.Open("sqlserver", s.site.AdminDSN(in, "master"))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := sqlsim.ReadCommitLog(ctx, db, database)
	var me mssqldb.Error
	if errors.As(err, &me) && me.Number == 208 { // Invalid object name
		return nil, fmt.Errorf("%s: %w", database, errNoCommitLog)
	}
	return rows, err
}

// wall is t's wall clock labelled UTC: datetime and datetime2 carry no
// zone, and the source's rows and STOPAT are both on its clock.
func wall(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// showPITProof waits for the first point-in-time proof this worker
// compared and prints it: the point the chain is proven to, T, what was
// restored, and the rows compared. A copy that does not hold exactly the
// rows committed by T fails the demo.
func showPITProof(ctx context.Context, c *client.Client, stdout io.Writer, checks *pitChecks, pitEvery time.Duration) error {
	sid := workflows.ScratchProofWorkflowID(devenv.SourceInstance, devenv.Database)
	var sp workflows.ScratchProofStatus
	if v, err := c.SDK().QueryWorkflow(ctx, sid, "", workflows.ScratchProofQuery); err == nil && v.Get(&sp) == nil && sp.PITEvery != pitEvery {
		fmt.Fprintf(stdout, "point-in-time proof of %s: not waited for: the proof workflow of this state directory, started by an earlier demo, proves every %s, not %s (make clean starts over)\n",
			devenv.Database, sp.PITEvery, pitEvery)
		return nil
	}
	fmt.Fprintf(stdout, "point-in-time proof of %s: waiting for one (this worker runs it every %s; pit_proof.every is a day)...\n", devenv.Database, pitEvery)
	wait := 3*pitEvery + 2*time.Minute
	deadline := time.Now().Add(wait)
	var chk pitCheck
	for {
		var ok bool
		if chk, ok = checks.first(); ok {
			break
		}
		if time.Now().After(deadline) {
			why := "no proof yet"
			if v, err := c.SDK().QueryWorkflow(ctx, sid, "", workflows.ScratchProofQuery); err == nil && v.Get(&sp) == nil {
				why = fmt.Sprintf("next %s proof at %s", sp.Next, sp.NextAt.UTC().Format(time.RFC3339))
				if sp.LastPIT != nil && sp.LastPIT.Skipped != "" {
					why += ", the last one skipped: " + sp.LastPIT.Skipped
				}
				if sp.LastError != "" {
					why += ", last error: " + sp.LastError
				}
			}
			return fmt.Errorf("point-in-time proof of %s: none passed within %s (%s)", devenv.Database, wait, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	pid := workflows.LogProofWorkflowID(devenv.SourceInstance, devenv.Database)
	var lp workflows.LogProofStatus
	if v, err := c.SDK().QueryWorkflow(ctx, pid, "", workflows.LogProofQuery); err == nil && v.Get(&lp) == nil && lp.Through > 0 {
		fmt.Fprintf(stdout, "  proven to %s by the standby copy (log %d of chain %d)\n", lp.ThroughStart.UTC().Format(time.RFC3339), lp.Through, lp.Chain)
	}
	p := chk.proof
	fmt.Fprintf(stdout, "  restored set %d and logs %d-%d into %s on %s WITH STOPAT T = %s (%s), a random instant of the proven window: %s (took %s)\n",
		p.Sequence, p.FirstLog, p.LastLog, p.Copy, p.Instance, chk.at.Format("2006-01-02T15:04:05.000"),
		p.Target.UTC().Format("2006-01-02T15:04:05.000Z"), p.Detail, round(p.Took))
	return chk.show(stdout, "point-in-time proof of "+devenv.Database, "T", "T")
}

func head(s []string) []string { return s[:min(len(s), 3)] }

// devOverrides is Run.Overrides of the development worker: the log
// chain's activities with the fast tick (every; none when 0) and the
// point-in-time proof's comparison, the drill's with its comparison.
func devOverrides(site *devenv.Site, live *workerhost.LiveConfig, every time.Duration, pit *pitChecks, drills *drillChecks) func(*activities.Activities) workflows.Overrides {
	return func(acts *activities.Activities) workflows.Overrides {
		o := workflows.Overrides{Drill: &devDrill{Activities: drill.New(acts), rows: siteRows{site}, checks: drills}}
		if every > 0 {
			o.Logs = &devLogs{FastLogActivities: workerhost.NewFastLogs(acts, every), pitEvery: pitEveryTicks * every, site: site,
				keys: func() (*catalog.Keys, error) { return live.Config().ManifestKeyRing() }, checks: pit}
		}
		return o
	}
}
