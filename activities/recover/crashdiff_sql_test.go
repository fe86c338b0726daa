package recover

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/recovery"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// diffRestored is a site with diffHistory, the plan's full restored: what
// RestoreDiff is given next (the differential's step).
func diffRestored(t *testing.T) (*fixture, Plan, Target, StepOutput, recovery.Step) {
	f := newFixture(t, sitetest.Options{Extra: "    diff_backup: {every: 6h}\n"})
	p, tg := f.diffHistory()
	var full StepOutput
	f.must(New(nil).RestoreFull, RestoreFullInput{Target: tg, Step: p.Restore.Full(), Moves: p.Moves, Intent: p.Intent}, &full)
	d, _ := p.Restore.Diff()
	return f, p, tg, full, d
}

// diffHistory is a verified full, a verified differential on it and a log
// backup after it, each after a few commits; the plan to the latest point
// restores the three, the differential's step into Sales_diff.
func (f *fixture) diffHistory() (Plan, Target) {
	f.t.Helper()
	f.commit(5)
	f.verified()
	f.commit(5)
	f.cycle(true)
	f.commit(3)
	f.logAndCopy()
	var p Plan
	f.must(New(nil).PlanRecover, PlanInput{Request: Request{Database: "Sales", ToInstance: sitetest.VerifyInstance, As: "Sales_diff", Latest: true}}, &p)
	if _, ok := p.Restore.Diff(); !ok || len(p.Restore.Logs()) != 1 {
		f.t.Fatalf("plan %+v: want the full, the differential and one log", p.Restore.Steps)
	}
	return p, Target{Database: "Sales", Instance: "sql01", To: sitetest.VerifyInstance, Name: "Sales_diff", AsGiven: true}
}

// finish restores the plan's log and recovers the copy, which must hold
// every row the source committed.
func (f *fixture) finishDiff(p Plan, tg Target, full StepOutput) {
	f.t.Helper()
	f.must(New(nil).RestoreLog, RestoreLogInput{Target: tg, Step: p.Restore.Logs()[0], Index: 1, Count: 1, Copy: full.Copy}, nil)
	var fin FinishOutput
	f.must(New(nil).FinishRecover, FinishInput{Target: tg, Copy: full.Copy}, &fin)
	if fin.State != "ONLINE" {
		f.t.Fatalf("finish %+v, want ONLINE", fin)
	}
	if got, want := rows(f.t, f.site.Verify, "Sales_diff", time.Time{}), rows(f.t, f.site.Source, "Sales", time.Time{}); !slices.Equal(got, want) {
		f.t.Fatalf("the copy holds %d rows, the source %d", len(got), len(want))
	}
}

// diffRestores are the RESTORE DATABASE statements of the differential's
// file into the recover's copy the target saw.
func diffRestores(v *sqlsim.Instance, p Plan) []sqlsim.StatementRecord {
	d, _ := p.Restore.Diff()
	var out []sqlsim.StatementRecord
	for _, s := range sitetest.Statements(v, "RESTORE DATABASE") {
		if s.Database == "Sales_diff" && strings.Contains(s.SQL, d.Files[0].Name) {
			out = append(out, s)
		}
	}
	return out
}

// The connection of the differential's RESTORE drops mid-statement: SQL
// Server runs it on (it writes nothing to its client until its end); the
// step finds it on the target, waits for it, confirms in msdb's restore
// history that it completed, and goes on: one RESTORE of the differential,
// not two.
func TestRestoreDiffThroughALostConnection(t *testing.T) {
	f, p, tg, full, d := diffRestored(t)
	v := f.site.Verify
	v.SetThrottle(1 << 20)
	if err := v.DropConnectionAt(sqlsim.OpRestore, 40); err != nil {
		t.Fatal(err)
	}
	var o StepOutput
	err := f.run(New(nil).RestoreDiff, RestoreDiffInput{Target: tg, Step: d, Copy: full.Copy}, &o)
	v.SetThrottle(0)
	if err != nil {
		t.Fatalf("differential whose connection was lost: %v; want it found on the target and awaited", err)
	}
	if v.LostConnections() != 1 {
		t.Fatal("the armed lost connection did not fire")
	}
	if got := diffRestores(v, p); len(got) != 1 || got[0].Outcome != "ok" || o.Skipped {
		t.Fatalf("RESTORE of the differential: %+v (step %+v), want one, ok", got, o)
	}
	f.finishDiff(p, tg, full)
}

// The target crashes in the middle of the differential's RESTORE and is
// back before the step gives up on its lost connection: the statement
// ended unseen and restored nothing (msdb has no row of it). The step
// fails as one the workflow retries (never as evidence, never for good),
// its retry restores the differential, and the copy ends with every row.
func TestRestoreDiffRetriedAfterTheTargetCrashedInIt(t *testing.T) {
	f, p, tg, full, d := diffRestored(t)
	v := f.site.Verify
	back := crashAndBack(t, v, sqlsim.OpRestore, 50)
	in := RestoreDiffInput{Target: tg, Step: d, Copy: full.Copy}
	err := f.run(New(nil).RestoreDiff, in, nil)
	if err := <-back; err != nil {
		t.Fatal(err)
	}
	if err == nil {
		t.Fatal("the differential through a crash of the target succeeded; want the step failed and retried")
	}
	if isNonRetryable(err) {
		t.Fatalf("the differential through a crash of the target: %s %v; want a failure the workflow retries", errType(err), err)
	}
	var o StepOutput
	for try := 0; ; try++ {
		if err = f.run(New(nil).RestoreDiff, in, &o); err == nil {
			break
		}
		if try == 5 || isNonRetryable(err) {
			t.Fatalf("the differential after the crash, retry %d: %v", try, err)
		}
	}
	if got := diffRestores(v, p); len(got) != 2 || got[1].Outcome != "ok" {
		t.Fatalf("RESTOREs of the differential %+v: want the one the crash cut short and one ok", got)
	}
	f.finishDiff(p, tg, full)
}

// isNonRetryable reports an activity error no retry of the workflow's
// makes again.
func isNonRetryable(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && (app.NonRetryable() || slices.Contains(activities.NonRetryableErrorTypes, app.Type()))
}
