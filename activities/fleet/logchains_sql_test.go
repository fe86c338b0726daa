package fleet

import (
	"slices"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/activities/activitytest"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// PlanFleet names a log chain for every resolved database with
// log_backup: the entry's (Sales) and the ones the instance's selection
// picks (Archive, inheriting defaults:), under their sys.databases
// spelling; a database the selection leaves out has none, and neither has
// one whose entry turns log backups off. Likewise the drill and
// differential schedules the run keeps: the selected databases' only.
func TestPlanFleetListsTheLogChainsOfSelectedDatabases(t *testing.T) {
	f := activitytest.NewOf(t, sitetest.Options{Database: "Sales", LogicalName: "Sales'data"}, New)
	for _, name := range []string{"Archive", "Other", "ArchNoLog"} {
		if err := f.Site.Source.CreateDatabase(sqlsim.DatabaseSpec{Name: name, Size: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	f.Reconfigure(func(y string) string {
		y = "defaults:\n  owns_backup_chain: true\n  log_backup: {every: 1m}\n  drill: {every: 24h}\n  diff_backup: {every: 6h}\n" + y
		y = strings.Replace(y, "    encrypt: disable\n", "    encrypt: disable\n    databases: [\"arch*\"]\n    backup_servers: [bak01, bak02]\n", 1)
		return y + "  - {name: ArchNoLog, instance: sql01, backup_servers: [bak01, bak02], log_backup: {every: 0s}}\n"
	})

	var fp FleetPlan
	f.Must(f.Acts.PlanFleet, FleetInput{}, &fp)
	var got []string
	for _, c := range fp.LogChains {
		got = append(got, c.Instance+"/"+c.Database)
	}
	slices.Sort(got)
	if want := []string{"sql01/Archive", "sql01/Sales"}; !slices.Equal(got, want) {
		t.Fatalf("PlanFleet's log chains %v, want %v (items %+v)", got, want, fp.Items)
	}
	// The drill and differential schedules of the databases only the
	// selection picks (the entries' the worker keeps itself).
	for what, refs := range map[string][]FleetLogChain{"drills": fp.Drills, "differentials": fp.Diffs} {
		if len(refs) != 1 || refs[0] != (FleetLogChain{Instance: "sql01", Database: "Archive"}) {
			t.Errorf("PlanFleet's %s %v, want sql01/Archive alone", what, refs)
		}
	}
}
