package workflows

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/drill"
	"github.com/backupcycle/backupcycle/activities/recover"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/recovery"
)

func drillPlan() drill.Plan {
	return drill.Plan{Database: "Sales", Instance: "sql01", Target: "sql02", Name: "Sales_drill", From: "remote", Only: []string{"bak02"},
		Servers: []string{"bak02"}, Latest: true, Point: "latest", CheckDB: true, Fulls: []string{"F"},
		Scratch: &catalog.VerifyCopy{VerifyInstance: "sql02", VerifyDatabase: "Sales_drill", InstanceTime: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}}
}

// registerDrill registers the Drill workflow, started under id, on a
// configuration that names the database Sales on sql01.
func registerDrill(r *recoverEnv, id string) {
	r.env.RegisterWorkflowWithOptions(Drill, workflow.RegisterOptions{Name: DrillName})
	r.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	var acts *drill.Activities
	r.env.OnActivity(acts.ResolveDrill, mock.Anything, mock.Anything).Return(func(_ context.Context, in drill.Request) (drill.Request, error) {
		in.Database, in.Instance = "Sales", "sql01"
		return in, nil
	})
}

// A start under another id than the database's drill id (a schedule
// appends its time to it; a Web UI start may spell the database in
// another case) runs the drill as a child under drill/sql01/Sales, which
// is what keeps two drills of a database from running at once; the
// start's result is the child's, naming it.
func TestDrillStartedUnderAnotherIDRunsUnderTheDatabases(t *testing.T) {
	r := newRecoverEnv(t)
	r.steps(t)
	env := r.env
	registerDrill(r, "drill/sql01/Sales-2026-03-01T09:00:00Z")
	var acts *drill.Activities
	env.OnActivity(acts.PrepareDrill, mock.Anything, mock.Anything).Return(func(_ context.Context, in drill.Request) (drill.Plan, error) {
		if in.Database != "Sales" || in.Instance != "sql01" {
			t.Errorf("PrepareDrill input %+v, want the configuration's names", in)
		}
		return drillPlan(), nil
	})
	env.OnActivity(acts.CheckDrill, mock.Anything, mock.Anything).Return(drill.CheckOutput{Sanity: []string{"rows"}}, nil)
	env.OnActivity(acts.DropDrill, mock.Anything, mock.Anything).Return(drill.DropOutput{Dropped: true}, nil)
	env.OnActivity(acts.RecordDrill, mock.Anything, mock.Anything).Return([]string{"bak02"}, nil)
	var child string
	env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, _ converter.EncodedValues) {
		if info.WorkflowType.Name == DrillName {
			child = info.WorkflowExecution.ID
		}
	})
	env.ExecuteWorkflow(DrillName, DrillInput{Database: "sales", Instance: "sql01"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var st DrillStatus
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if child != "drill/sql01/Sales" || st.RunBy != child || st.Result.Outcome != catalog.DrillPassed || st.Skipped != "" {
		t.Errorf("child %q, result run by %q, outcome %q, skipped %q: want the drill run as drill/sql01/Sales", child, st.RunBy, st.Result.Outcome, st.Skipped)
	}
}

// A drill: the plan, the Recover as a child into the scratch name from
// the servers asked, the checks, the drop, the record with the measured
// times; and when the checks fail, the copy is still dropped and the
// failure recorded with its type.
func TestDrillRecoversChecksDropsAndRecords(t *testing.T) {
	for _, failChecks := range []bool{false, true} {
		r := newRecoverEnv(t)
		r.steps(t)
		env := r.env
		registerDrill(r, DrillWorkflowID("sql01", "Sales"))
		var acts *drill.Activities
		dp := drillPlan()
		dp.Predicted = &catalog.RecoveryPrediction{Full: 8 * time.Minute, Logs: 2 * time.Minute, LogCount: 3, CheckDB: time.Minute}
		env.OnActivity(acts.PrepareDrill, mock.Anything, mock.Anything).Return(dp, nil)
		env.OnActivity(acts.CheckDrill, mock.Anything, mock.Anything).After(2 * time.Minute).Return(
			func(_ context.Context, in drill.CheckInput) (drill.CheckOutput, error) {
				if in.Name != "Sales_drill" || in.Sequence != 7 || !in.CheckDB || in.Scratch == nil {
					t.Errorf("CheckDrill input %+v", in)
				}
				if failChecks {
					return drill.CheckOutput{}, temporal.NewNonRetryableApplicationError("sanity check \"rows\" did not hold", activities.ErrSanityCheckFailed, nil)
				}
				return drill.CheckOutput{Sanity: []string{"rows"}, CheckDB: true}, nil
			})
		dropped := 0
		env.OnActivity(acts.DropDrill, mock.Anything, mock.Anything).Return(func(_ context.Context, in drill.Copy) (drill.DropOutput, error) {
			dropped++
			if in.Name != "Sales_drill" || in.Target != "sql02" || len(in.Fulls) != 1 {
				t.Errorf("DropDrill input %+v", in)
			}
			return drill.DropOutput{Dropped: true}, nil
		})
		var rec drill.RecordInput
		env.OnActivity(acts.RecordDrill, mock.Anything, mock.Anything).Return(func(_ context.Context, in drill.RecordInput) ([]string, error) {
			rec = in
			return in.Servers, nil
		})
		env.ExecuteWorkflow(DrillName, DrillInput{Database: "Sales", From: "remote"})
		err := env.GetWorkflowError()
		if failChecks {
			var ae *temporal.ApplicationError
			if !errors.As(err, &ae) || ae.Type() != activities.ErrSanityCheckFailed {
				t.Fatalf("failed checks: workflow error %v", err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		res := rec.Result
		if dropped != 1 || !res.Dropped {
			t.Errorf("failChecks %v: dropped %d times, record %+v", failChecks, dropped, res)
		}
		if res.Sequence != 7 || res.Chain != 2 || res.FirstLog != 11 || res.LastLog != 13 || res.RecoveryPointFrom != "stopat" ||
			res.RTO <= 10*time.Minute || res.Steps.Full != 10*time.Minute || res.Point != "latest" || res.Instance != "sql02" ||
			res.Database != "Sales_drill" || res.From != "remote" || rec.Scratch == nil || rec.Scratch.BackupSetGUID != "F" {
			t.Errorf("failChecks %v: recorded %+v (scratch %+v)", failChecks, res, rec.Scratch)
		}
		want, wantType := catalog.DrillPassed, ""
		if failChecks {
			want, wantType = catalog.DrillFailed, activities.ErrSanityCheckFailed
		}
		if res.Outcome != want || res.ErrorType != wantType || res.Steps.Checks != 2*time.Minute || !failChecks && len(res.Sanity) != 1 {
			t.Errorf("failChecks %v: outcome %s [%s], checks %s, sanity %v", failChecks, res.Outcome, res.ErrorType, res.Steps.Checks, res.Sanity)
		}
		// The prediction PrepareDrill made, each step's error against the
		// measured times, CHECKDB's only when it ran clean; the logs'
		// bytes and fastest log for the next prediction.
		full, okFull := catalog.ErrorOf(res.PredictionError, catalog.PredictFull)
		logs, okLogs := catalog.ErrorOf(res.PredictionError, catalog.PredictLogs)
		cdb, okCheckDB := catalog.ErrorOf(res.PredictionError, catalog.PredictCheckDB)
		if res.Predicted == nil || *res.Predicted != *dp.Predicted || !okFull || full.Error != 2*time.Minute || full.Ratio != 1.25 ||
			!okLogs || logs.Measured != res.Steps.Logs || okCheckDB == failChecks || !failChecks && cdb.Error != time.Minute ||
			res.LogBytes != 3e7 || res.LogFastest < time.Minute {
			t.Errorf("failChecks %v: predicted %+v, errors %+v, log bytes %d, fastest %s", failChecks, res.Predicted, res.PredictionError,
				res.LogBytes, res.LogFastest)
		}
	}
}

// A Recover that fails still drops whatever the drill created and records
// the failure.
func TestDrillDropsAfterAFailedRecover(t *testing.T) {
	r := newRecoverEnv(t)
	env := r.env
	registerDrill(r, DrillWorkflowID("sql01", "Sales"))
	var ra *recover.Activities
	env.OnActivity(ra.PlanRecover, mock.Anything, mock.Anything).Return(recoverPlan(), nil)
	env.OnActivity(ra.RestoreFull, mock.Anything, mock.Anything).Return(recover.StepOutput{},
		temporal.NewNonRetryableApplicationError("the full's files fail their hash", activities.ErrHashMismatch, nil))
	var acts *drill.Activities
	dp := drillPlan()
	dp.Predicted = &catalog.RecoveryPrediction{Full: time.Minute}
	env.OnActivity(acts.PrepareDrill, mock.Anything, mock.Anything).Return(dp, nil)
	dropped := false
	env.OnActivity(acts.DropDrill, mock.Anything, mock.Anything).Return(func(context.Context, drill.Copy) (drill.DropOutput, error) {
		dropped = true
		return drill.DropOutput{Dropped: true}, nil
	})
	var rec drill.RecordInput
	env.OnActivity(acts.RecordDrill, mock.Anything, mock.Anything).Return(func(_ context.Context, in drill.RecordInput) ([]string, error) {
		rec = in
		return in.Servers, nil
	})
	env.ExecuteWorkflow(DrillName, DrillInput{Database: "Sales"})
	if env.GetWorkflowError() == nil {
		t.Fatal("the drill passed with a failed Recover")
	}
	if !dropped || rec.Result.Outcome != catalog.DrillFailed || rec.Result.ErrorType != activities.ErrHashMismatch || rec.Result.RTO != 0 {
		t.Errorf("dropped %v, recorded %+v", dropped, rec.Result)
	}
	// Its prediction is kept; nothing was measured to set beside it.
	if rec.Result.Predicted == nil || *rec.Result.Predicted != *dp.Predicted || rec.Result.PredictionError != nil {
		t.Errorf("a failed Recover recorded prediction %+v, errors %+v", rec.Result.Predicted, rec.Result.PredictionError)
	}
}

// The Recover's own prediction, of the restore it chose and made before
// it restored anything, replaces the one the drill made in its plan (a log
// backup may have been taken between the two).
func TestDrillRecordsTheRecoversPrediction(t *testing.T) {
	r := newRecoverEnv(t)
	env := r.env
	registerDrill(r, DrillWorkflowID("sql01", "Sales"))
	var ra *recover.Activities
	p := recoverPlan()
	p.Predicted = &catalog.RecoveryPrediction{Full: 9 * time.Minute, Logs: 3 * time.Minute, LogCount: 4}
	env.OnActivity(ra.PlanRecover, mock.Anything, mock.Anything).Return(p, nil)
	r.restores(t)
	var acts *drill.Activities
	dp := drillPlan()
	dp.Predicted = &catalog.RecoveryPrediction{Full: 9 * time.Minute, Logs: 2 * time.Minute, LogCount: 3}
	env.OnActivity(acts.PrepareDrill, mock.Anything, mock.Anything).Return(dp, nil)
	env.OnActivity(acts.CheckDrill, mock.Anything, mock.Anything).Return(drill.CheckOutput{Sanity: []string{"rows"}}, nil)
	env.OnActivity(acts.DropDrill, mock.Anything, mock.Anything).Return(drill.DropOutput{Dropped: true}, nil)
	var rec drill.RecordInput
	env.OnActivity(acts.RecordDrill, mock.Anything, mock.Anything).Return(func(_ context.Context, in drill.RecordInput) ([]string, error) {
		rec = in
		return in.Servers, nil
	})
	env.ExecuteWorkflow(DrillName, DrillInput{Database: "Sales"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	logs, ok := catalog.ErrorOf(rec.Result.PredictionError, catalog.PredictLogs)
	if rec.Result.Predicted == nil || *rec.Result.Predicted != *p.Predicted || !ok || logs.Predicted != 3*time.Minute {
		t.Errorf("recorded prediction %+v, errors %+v", rec.Result.Predicted, rec.Result.PredictionError)
	}
}

// A drill from the immutable copy stages its objects before the Recover
// and removes them after it; staging that finds an object changed fails
// the drill without a Recover, and the staged files are still removed,
// the copy still dropped and the drill recorded with its source.
func TestDrillFromImmutableUnstagesAfterAFailedStaging(t *testing.T) {
	r := newRecoverEnv(t)
	env := r.env
	registerDrill(r, DrillWorkflowID("sql01", "Sales"))
	var acts *drill.Activities
	dp := drillPlan()
	dp.From, dp.Servers = "immutable", []string{"bak01", "bak02"}
	dp.Immutable = &drill.Immutable{Store: "vault01", Staging: "bak02", Dir: "staging/sql01@Sales", Sequence: 3,
		Files: []recovery.File{{Name: "sql01@Sales_00000003_1of1.bak", SHA256: "ab"}, {Name: "sql01@Sales_00000003.manifest.json"}}}
	env.OnActivity(acts.PrepareDrill, mock.Anything, mock.Anything).Return(dp, nil)
	var steps []string
	env.OnActivity(acts.StageDrill, mock.Anything, mock.Anything).Return(func(_ context.Context, in drill.StageInput) (drill.StageOutput, error) {
		steps = append(steps, "stage "+in.Immutable.Dir)
		return drill.StageOutput{}, temporal.NewNonRetryableApplicationError("object sql01@Sales_00000003_1of1.bak on the immutable copy vault01 is not the file its manifest records",
			activities.ErrHashMismatch, nil)
	})
	env.OnActivity(acts.DropDrill, mock.Anything, mock.Anything).Return(func(context.Context, drill.Copy) (drill.DropOutput, error) {
		steps = append(steps, "drop")
		return drill.DropOutput{Why: "there is none"}, nil
	})
	env.OnActivity(acts.UnstageDrill, mock.Anything, mock.Anything).Return(func(_ context.Context, in drill.StageInput) (drill.UnstageOutput, error) {
		steps = append(steps, "unstage "+in.Immutable.Dir)
		return drill.UnstageOutput{Removed: 1}, nil
	})
	var rec drill.RecordInput
	env.OnActivity(acts.RecordDrill, mock.Anything, mock.Anything).Return(func(_ context.Context, in drill.RecordInput) ([]string, error) {
		steps = append(steps, "record")
		rec = in
		return in.Servers, nil
	})
	env.ExecuteWorkflow(DrillName, DrillInput{Database: "Sales", From: "immutable"})
	var appErr *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Type() != activities.ErrHashMismatch {
		t.Fatalf("workflow error %v, want HashMismatch", err)
	}
	want := []string{"stage staging/sql01@Sales", "drop", "unstage staging/sql01@Sales", "record"}
	if !slices.Equal(steps, want) {
		t.Errorf("steps %v, want %v (no Recover)", steps, want)
	}
	var st DrillStatus
	v, err := env.QueryWorkflow(DrillQuery)
	if err == nil {
		err = v.Get(&st)
	}
	if err != nil || st.RecoverID != "" || st.Step != drill.StepDone {
		t.Errorf("drill query %+v, %v: want done, naming no Recover (none ran)", st, err)
	}
	res := rec.Result
	if im := res.Immutable; res.Outcome != catalog.DrillFailed || res.ErrorType != activities.ErrHashMismatch || im == nil || im.Store != "vault01" ||
		!im.Removed || im.Sequence != 3 || !slices.Equal(im.Objects, []string{"sql01@Sales_00000003_1of1.bak", "sql01@Sales_00000003.manifest.json"}) ||
		!slices.Equal(rec.Servers, []string{"bak01", "bak02"}) {
		t.Errorf("recorded %+v (immutable %+v) on %v", res, im, rec.Servers)
	}
}

// No backup server readable at the drill's prepare step (NoBackupServerReachable)
// for 4m20s: the drill's status says what it waits for, and it goes on
// within seconds of a server's return (the activity's own retries had grown
// to 160 s apart by then).
func TestDrillResumesSoonAfterTheServerReturns(t *testing.T) {
	r := newRecoverEnv(t)
	env := r.env
	registerDrill(r, DrillWorkflowID("sql01", "Sales"))
	r.steps(t)
	var acts *drill.Activities
	back := time.Date(2026, 3, 1, 9, 4, 20, 0, time.UTC)
	var prepared time.Time
	env.OnActivity(acts.PrepareDrill, mock.Anything, mock.Anything).Return(func(context.Context, drill.Request) (drill.Plan, error) {
		if env.Now().Before(back) {
			return drill.Plan{}, temporal.NewApplicationError("no backup server of sql01/Sales could be read: bak02: connection refused",
				activities.ErrNoBackupServerReachable)
		}
		prepared = env.Now()
		return drillPlan(), nil
	})
	env.OnActivity(acts.CheckDrill, mock.Anything, mock.Anything).Return(drill.CheckOutput{}, nil)
	env.OnActivity(acts.DropDrill, mock.Anything, mock.Anything).Return(drill.DropOutput{Dropped: true}, nil)
	env.OnActivity(acts.RecordDrill, mock.Anything, mock.Anything).Return([]string{"bak02"}, nil)
	var away DrillStatus
	env.RegisterDelayedCallback(func() {
		if v, err := env.QueryWorkflow(DrillQuery); err == nil {
			_ = v.Get(&away)
		}
	}, 3*time.Minute)
	env.ExecuteWorkflow(DrillName, DrillInput{Database: "Sales"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("drill: %v", err)
	}
	if prepared.IsZero() || prepared.Sub(back) > 15*time.Second {
		t.Errorf("prepared %s after the server returned, want within 15s", prepared.Sub(back))
	}
	if away.Step != drill.StepPrepare || !strings.Contains(away.Waiting, "bak02") {
		t.Errorf("status while no server is readable: step %q, waiting %q; want the prepare step waiting for bak02", away.Step, away.Waiting)
	}
}
