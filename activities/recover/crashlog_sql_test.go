package recover

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// The target crashes in the middle of a RESTORE LOG and is back before the
// step gives up on its lost connection: the statement ended unseen and
// applied nothing (msdb has no row of it, the redo LSN stands where the
// log before left it). The step must not take that for STOPAT reached
// inside the log: it fails, is retried as the workflow retries it, applies
// the log, and the recover ends with exactly the rows committed at or
// before the point. (It reported the point reached after such a crash: the
// workflow then recovered the copy without that log's rows and reported a
// point it did not reach.)
func TestRecoverRetriesALogTheTargetCrashedIn(t *testing.T) {
	f := newFixture(t, sitetest.Options{})
	hist := f.history(3)
	// After log 2's end, before log 3 starts: logs 1..3, STOPAT reached in
	// log 3.
	point := hist[1].Finish.Add(hist[2].Start.Sub(hist[1].Finish) / 2)
	var p Plan
	f.must(New(nil).PlanRecover, PlanInput{Request: Request{Database: "Sales", ToInstance: sitetest.VerifyInstance, As: "Sales_pit", AsOf: point}}, &p)
	if len(p.Restore.Logs()) != 3 || p.Restore.StopAt.IsZero() {
		t.Fatalf("plan: %d logs, STOPAT %s; want 3 logs to a point", len(p.Restore.Logs()), p.Restore.StopAt)
	}
	tg := Target{Database: "Sales", Instance: "sql01", To: sitetest.VerifyInstance, Name: "Sales_pit", AsGiven: true}
	var full StepOutput
	f.must(New(nil).RestoreFull, RestoreFullInput{Target: tg, Step: p.Restore.Full(), Moves: p.Moves, Intent: p.Intent}, &full)
	logIn := func(i int) RestoreLogInput {
		return RestoreLogInput{Target: tg, Step: p.Restore.Logs()[i], Index: i + 1, Count: 3, StopAt: p.Restore.StopAt,
			StopAtOffsetMinutes: p.Restore.StopAtOffsetMinutes, Copy: full.Copy}
	}
	var o StepOutput
	f.must(New(nil).RestoreLog, logIn(0), &o)

	// The crash, and the instance back at once (within the step's wait for
	// its lost connection).
	v := f.site.Verify
	back := crashAndBack(t, v, sqlsim.OpRestore, 50)
	o = StepOutput{}
	err := f.run(New(nil).RestoreLog, logIn(1), &o)
	if err := <-back; err != nil {
		t.Fatal(err)
	}
	t.Logf("log 2 through the crash: %+v, %v", o, err)
	if err == nil && o.Reached {
		t.Fatalf("log 2 through a crash of the target: %+v: reports STOPAT reached inside a log it did not apply", o)
	}
	// The workflow retries a failed step.
	for try := 0; err != nil; try++ {
		if try == 5 {
			t.Fatalf("log 2 after the crash, 5 retries: %v", err)
		}
		o = StepOutput{}
		err = f.run(New(nil).RestoreLog, logIn(1), &o)
	}
	if o.Reached {
		t.Fatalf("log 2: %+v, want applied to its end (the point lies after it)", o)
	}
	f.must(New(nil).RestoreLog, logIn(2), &o)
	if !o.Reached {
		t.Fatalf("log 3: %+v, want STOPAT reached in it", o)
	}
	var fin FinishOutput
	f.must(New(nil).FinishRecover, FinishInput{Target: tg, Copy: full.Copy}, &fin)
	if fin.State != "ONLINE" || len(fin.LogsRestored) != 3 {
		t.Fatalf("finish %+v, want ONLINE with 3 logs", fin)
	}
	wall := point.Add(time.Duration(p.Restore.StopAtOffsetMinutes) * time.Minute).UTC()
	if got, want := rows(t, v, "Sales_pit", time.Time{}), rows(t, f.site.Source, "Sales", wall); !slices.Equal(got, want) {
		t.Fatalf("the copy holds %d rows, the source committed %d by %s", len(got), len(want), point)
	}
}

// SQL Server refusing the STOPAT of a RESTORE LOG as before what the copy
// already reached (4335: the source's clock went back, which the plan
// checks, or a point it could not see) refuses it on every attempt: the
// step fails at once naming why, not after retrying for half an hour.
func TestRestoreLogStopAtTooEarlyIsNotRetried(t *testing.T) {
	f := newFixture(t, sitetest.Options{})
	hist := f.history(2)
	var p Plan
	f.must(New(nil).PlanRecover, PlanInput{Request: Request{Database: "Sales", ToInstance: sitetest.VerifyInstance, As: "Sales_early",
		AsOf: hist[0].Finish.Add(hist[1].Start.Sub(hist[0].Finish) / 2)}}, &p)
	tg := Target{Database: "Sales", Instance: "sql01", To: sitetest.VerifyInstance, Name: "Sales_early", AsGiven: true}
	var full StepOutput
	f.must(New(nil).RestoreFull, RestoreFullInput{Target: tg, Step: p.Restore.Full(), Moves: p.Moves, Intent: p.Intent}, &full)
	// A STOPAT before the full's end, on the source's clock.
	early := p.Restore.Full().Finish.Add(-time.Minute)
	err := f.run(New(nil).RestoreLog, RestoreLogInput{Target: tg, Step: p.Restore.Logs()[0], Index: 1, Count: len(p.Restore.Logs()), StopAt: early,
		StopAtOffsetMinutes: p.Restore.StopAtOffsetMinutes, Copy: full.Copy}, nil)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != activities.ErrRecoveryPointUnreachable || !app.NonRetryable() || !strings.Contains(err.Error(), "4335") {
		t.Fatalf("STOPAT before the full's end: %v, want a non-retryable RecoveryPointUnreachable naming 4335", err)
	}
}
