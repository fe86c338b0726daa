package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"

	"github.com/backupcycle/backupcycle/activities/drill"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// The demo's recovery drill. After the point-in-time proof the demo starts
// a Drill of Sales (the site's drill: a random point of the last hour of
// the proven window, on sqlverify): its Recover child restores Sales_drill,
// the sanity checks run on it, the copy is dropped and the drill recorded
// on the backup servers. Before the workflow drops the copy, the
// development worker compares its dbo.CommitLog with the source's rows
// committed at or before the recovery point, as for the point-in-time
// proof (rowCheck).

// drillTimeout bounds the demo's drill (the emulator recovers in a second).
const drillTimeout = 10 * time.Minute

// devDrill is the product's drill activities, each of Sales's copies
// compared with the source before the workflow drops it.
type devDrill struct {
	*drill.Activities
	rows   siteRows
	checks *drillChecks
}

// CheckDrill is the product's checks of the drill copy, then its rows
// compared with the source's committed at or before the recovery point.
func (d *devDrill) CheckDrill(ctx context.Context, in drill.CheckInput) (drill.CheckOutput, error) {
	out, err := d.Activities.CheckDrill(ctx, in)
	if err == nil && in.Database == devenv.Database && in.Target == devenv.VerifyInstance {
		// The emulated sql01 runs on UTC (the site gives it no time
		// zone): the recovery point in UTC is its wall clock.
		c := d.rows.compare(ctx, in.Name, wall(in.RecoveryPoint.UTC()))
		d.checks.set(activity.GetInfo(ctx).WorkflowExecution.RunID, c)
	}
	return out, err
}

// drillChecks are the comparisons this process made, by the drill's run.
type drillChecks struct {
	mu    sync.Mutex
	byRun map[string]rowCheck
}

func (d *drillChecks) set(run string, c rowCheck) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byRun == nil {
		d.byRun = map[string]rowCheck{}
	}
	d.byRun[run] = c
}

func (d *drillChecks) get(run string) (rowCheck, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.byRun[run]
	return c, ok
}

// showDrill runs a drill of Sales and prints it: the outcome, the measured
// time to recover against rto, the recovery point, what was restored, the
// copy's rows compared with the source's, the run in the Web UI. A drill
// that does not pass, or whose copy was not compared, fails the demo.
func showDrill(ctx context.Context, c *client.Client, stdout io.Writer, checks *drillChecks, rto time.Duration, workflowURL func(id, run string) string) error {
	what := "recovery drill of " + devenv.Database
	fmt.Fprintf(stdout, "%s: recovering it as %s_drill on %s to a random point of the last hour of the proven window, checking it, dropping it...\n",
		what, devenv.Database, devenv.VerifyInstance)
	ctx, cancel := context.WithTimeout(ctx, drillTimeout)
	defer cancel()
	in := workflows.DrillInput{Database: devenv.Database, Instance: devenv.SourceInstance}
	run, err := c.StartDrill(ctx, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		// The worker's schedule of Sales's drills started one (a catch-up
		// after a stop): one drill at a time, so this one follows it.
		_ = c.SDK().GetWorkflow(ctx, workflows.DrillWorkflowID(in.Instance, in.Database), started.RunId).Get(ctx, nil)
		run, err = c.StartDrill(ctx, in)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	res, err := c.WaitDrill(ctx, run)
	u := workflowURL(res.WorkflowID, res.RunID)
	if err != nil {
		if u != "" {
			fmt.Fprintf(stdout, "  Web UI:   %s\n", u)
		}
		return fmt.Errorf("%s: %w", what, shortCycleError(res.WorkflowID, err))
	}
	st := res.Result
	r := st.Result
	if r.Outcome != catalog.DrillPassed {
		return fmt.Errorf("%s: outcome %s: %s [%s]", what, r.Outcome, r.Error, r.ErrorType)
	}
	point := r.RecoveryPoint.UTC().Format("2006-01-02T15:04:05.000Z")
	fmt.Fprintf(stdout, "  DRILL PASSED: recovered as %s on %s to %s (%s), checked, dropped, recorded on %s\n",
		r.Database, r.Instance, point, r.RecoveryPointFrom, strings.Join(st.Recorded, ", "))
	line := "  rto:      time to recover " + round(r.RTO)
	switch {
	case rto <= 0:
		line += " (no rto configured)"
	case r.RTO > rto:
		line += fmt.Sprintf(", ABOVE %s's rto of %s", devenv.Database, status.Duration(rto))
	default:
		line += fmt.Sprintf(", within %s's rto of %s", devenv.Database, status.Duration(rto))
	}
	fmt.Fprintln(stdout, line)
	restored := fmt.Sprintf("set %d", r.Sequence)
	if r.LastLog > 0 {
		restored += fmt.Sprintf(" and logs %d-%d of chain %d", r.FirstLog, r.LastLog, r.Chain)
	}
	fmt.Fprintf(stdout, "  restored: %s, read from %s; sanity checks %s hold\n", restored, strings.Join(r.Servers, ", "), strings.Join(r.Sanity, ", "))
	chk, ok := checks.get(res.RunID)
	if !ok {
		return fmt.Errorf("%s: the copy's rows were not compared (no check of run %s in this worker)", what, res.RunID)
	}
	if err := chk.show(stdout, what, point, "it"); err != nil {
		return err
	}
	if u != "" {
		fmt.Fprintf(stdout, "  Web UI:   %s (its Recover child %s shows from there)\n", u, st.RecoverID)
	}
	return nil
}
