package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities/activitytest"
	"github.com/backupcycle/backupcycle/internal/fleet"
	"github.com/backupcycle/backupcycle/internal/sitetest"
)

// TestCheckFleetCarryHoldsItToTheConfiguration: what a Fleet run hands its
// continuation is held to the configuration in force: its limits, a
// deadline within the window after the night began (never after now plus
// the window), only the run's instances' databases the configuration backs
// up, once each, on their own rotation's servers.
func TestCheckFleetCarryHoldsItToTheConfiguration(t *testing.T) {
	f := activitytest.NewOf(t, sitetest.Options{Database: "Sales", NoSQL: true}, New)
	began := f.Now.Add(-time.Hour)
	in := FleetCarryInput{Instances: []string{"sql01"}, Began: began, Deadline: began.Add(1000 * time.Hour), Pending: []fleet.Item{
		{Instance: "sql01", Database: "Sales", SizeBytes: 5, Servers: []string{"bak02", "elsewhere"}},
		{Instance: "sql01", Database: "Sales", SizeBytes: 5, Servers: []string{"bak02", "elsewhere"}},
		{Instance: "sql01", Database: "Nope", Servers: []string{"bak01", "bak02"}},
		{Instance: "verify01", Database: "Sales", Servers: []string{"bak01", "bak02"}},
		{Instance: "sql01", Database: "Sales", Servers: []string{"bak09"}}, // the same database again
	}}
	v, err := f.Env.ExecuteActivity(f.Acts.CheckFleetCarry, in)
	if err != nil {
		t.Fatal(err)
	}
	var out FleetCarryCheck
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	cfg := f.Base.Cycle.Config
	if out.Limits.Total != cfg.Fleet.MaxConcurrent || out.Limits.Instances["sql01"] != 1 || out.Limits.Servers["bak01"] != cfg.BackupServers[0].MaxConcurrent {
		t.Errorf("limits %+v, want the configuration's", out.Limits)
	}
	if want := began.Add(cfg.Fleet.Window); !out.Deadline.Equal(want) {
		t.Errorf("deadline %s, want the window after the night began, %s", out.Deadline, want)
	}
	if len(out.Pending) != 1 || out.Pending[0].Key() != "sql01/Sales" || strings.Join(out.Pending[0].Servers, ",") != "bak02,bak01" {
		t.Errorf("pending %+v, want sql01/Sales once, on bak02 with its copy target bak01", out.Pending)
	}
	if len(out.NotRun) != 2 || out.NotRun[0].Database != "Nope" || out.NotRun[1].Instance != "verify01" {
		t.Errorf("not run %+v, want Nope (not configured) and verify01's (not this run's instance)", out.NotRun)
	}
	// A night that "began" in the future ends at most a window from now.
	in.Began = f.Now.Add(100 * time.Hour)
	v, err = f.Env.ExecuteActivity(f.Acts.CheckFleetCarry, in)
	if err != nil || v.Get(&out) != nil || out.Deadline.After(f.Now.Add(cfg.Fleet.Window)) {
		t.Errorf("began in the future: deadline %s (%v), want at most %s", out.Deadline, err, f.Now.Add(cfg.Fleet.Window))
	}
}
