package fleet

import (
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/activitytest"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// TestSelectedNamesAreChecked: a database picked by a pattern of the
// instance's selection (no databases: entry, so loading the configuration
// never saw its name) whose name is 128 characters derives a verification
// database name over SQL Server's limit ("{db}_verify"). PlanFleet leaves
// it out with the name error, and PlanCycle refuses it (InvalidConfig,
// not retried) before any sequence is allocated or any BACKUP runs.
func TestSelectedNamesAreChecked(t *testing.T) {
	f := activitytest.NewOf(t, sitetest.Options{Database: "Sales", LogicalName: "Sales'data"}, New)
	long := "Long" + strings.Repeat("x", tsql.MaxIdentLen-4)
	if err := f.Site.Source.CreateDatabase(sqlsim.DatabaseSpec{Name: long, LogicalName: "Long", Size: 2 << 20}); err != nil {
		t.Fatal(err)
	}
	f.Reconfigure(func(y string) string {
		// The selection of sql01 picks it by a pattern.
		return strings.Replace(y, "    encrypt: disable\n", "    encrypt: disable\n    databases: [\"Long*\"]\n    backup_servers: [bak01, bak02]\n", 1)
	})

	var fp FleetPlan
	f.Must(f.Acts.PlanFleet, FleetInput{}, &fp)
	var reason, typ string
	for _, n := range fp.NotRun {
		if n.Database == long {
			reason, typ = n.Reason, n.Type
		}
	}
	for _, it := range fp.Items {
		if it.Database == long {
			t.Fatalf("PlanFleet planned %s, whose verification database name is over the limit", long)
		}
	}
	if typ != activities.ErrInvalidConfig || !strings.Contains(reason, "verify_name") {
		t.Fatalf("PlanFleet's reason for %s: %q (type %q); want InvalidConfig naming verify_name", long, reason, typ)
	}

	err := f.Run(f.Base.PlanCycle, activities.PlanInput{Instance: "sql01", Database: long}, nil)
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activities.ErrInvalidConfig || !ae.NonRetryable() || !strings.Contains(err.Error(), "verify_name") {
		t.Fatalf("PlanCycle of %s: %v; want a non-retryable InvalidConfig naming verify_name", long, err)
	}
	if n := len(sitetest.Statements(f.Site.Source, "BACKUP DATABASE")); n != 0 {
		t.Errorf("%d BACKUP statements ran", n)
	}
}
