package workflows

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	fleetacts "github.com/backupcycle/backupcycle/activities/fleet"
)

// A Fleet run starts the log chain of every database its plan lists with
// log_backup (selected ones included), each under the database's one
// chain id, and goes on with the night's cycles: a chain that already
// runs (here: listed twice, so the second start meets the first) is left
// alone, not started again and not a failure.
func TestFleetEnsuresTheLogChainsOfItsPlan(t *testing.T) {
	p, f := twoSiteFleet(2)
	p.LogChains = []fleetacts.FleetLogChain{{Instance: "sql01", Database: "db00"}, {Instance: "sql02", Database: "Selected db"},
		{Instance: "sql01", Database: "db00"}}
	env := fleetEnv(t, p, f)
	var mu sync.Mutex
	var ids []string
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in LogChainInput) (LogChainStatus, error) {
		mu.Lock()
		ids = append(ids, workflow.GetInfo(ctx).WorkflowExecution.ID+" "+in.Instance+"/"+in.Database)
		mu.Unlock()
		// A chain runs on: it holds its cursor.
		return LogChainStatus{}, workflow.Sleep(ctx, 1000*time.Hour)
	}, workflow.RegisterOptions{Name: LogChainName})
	env.ExecuteWorkflow(FleetName, FleetInput{})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("fleet: %v", err)
	}
	var res FleetResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Counts[OutcomeVerified] != 2 {
		t.Fatalf("fleet counts %v: want both cycles verified", res.Counts)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(ids)
	want := []string{LogChainWorkflowID("sql01", "db00") + " sql01/db00", LogChainWorkflowID("sql02", "Selected db") + " sql02/Selected db"}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("log chains started %q, want one each: %q", ids, want)
	}
}

// A Fleet run keeps the drill and differential schedules of the databases
// its plan resolved through a selection (the worker's start keeps only the
// entries'): one KeepSelectedSchedules with the plan's lists. One that
// fails is logged, and the night's cycles go on.
func TestFleetKeepsTheSchedulesOfSelectedDatabases(t *testing.T) {
	for _, fail := range []bool{false, true} {
		p, f := twoSiteFleet(2)
		p.Drills = []fleetacts.FleetLogChain{{Instance: "sql02", Database: "Selected db"}}
		p.Diffs = []fleetacts.FleetLogChain{{Instance: "sql02", Database: "Selected db"}, {Instance: "sql01", Database: "Archive"}}
		env := fleetEnv(t, p, f)
		var acts *fleetacts.Activities
		var got []fleetacts.SelectedSchedules
		env.RegisterActivity(acts.KeepSelectedSchedules)
		env.OnActivity(acts.KeepSelectedSchedules, mock.Anything, mock.Anything).Return(
			func(_ context.Context, in fleetacts.SelectedSchedules) ([]string, error) {
				got = append(got, in)
				if fail {
					return nil, temporal.NewNonRetryableApplicationError("no client", activities.ErrInvalidConfig, nil)
				}
				return []string{"drill/sql02/Selected_db-x"}, nil
			})
		env.ExecuteWorkflow(FleetName, FleetInput{})
		res := fleetResult(t, env)
		if res.Counts[OutcomeVerified] != 2 {
			t.Fatalf("failing %v: fleet counts %v, want both cycles verified", fail, res.Counts)
		}
		if len(got) != 1 || !slices.Equal(got[0].Drills, p.Drills) || !slices.Equal(got[0].Diffs, p.Diffs) {
			t.Fatalf("failing %v: KeepSelectedSchedules called with %+v, want the plan's drills and diffs once", fail, got)
		}
	}
}
