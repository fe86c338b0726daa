package status

import (
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// The last drill: green when it passed within rto and max_age; red when it
// failed, missed rto, is too old or there is none; an unauthenticated
// record counts for nothing; a database without drill is not judged.
func TestLastDrillJudged(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	rec := func(outcome string, rto time.Duration, at time.Time, trusted bool) FoundDrill {
		r := catalog.NewDrillRecord("sql01", "Sales", at)
		r.Add(catalog.DrillResult{WorkflowID: "w", RunID: at.String(), Instance: "verify", Database: "Sales_drill", Outcome: outcome, RTO: rto,
			ErrorType: map[bool]string{true: "", false: "HashMismatch"}[outcome == catalog.DrillPassed], StartedAt: at.Add(-rto), At: at})
		r.Auth = catalog.AuthUnsigned
		if trusted {
			r.Auth = catalog.AuthSigned
		}
		return FoundDrill{Server: "bak02", Record: r}
	}
	db := func() []Database {
		return []Database{{Instance: "sql01", Database: "Sales", Configured: true, Objectives: Objectives{RTO: Duration(time.Hour),
			DrillObjectives: DrillObjectives{DrillEvery: Duration(24 * time.Hour), DrillMaxAge: Duration(48 * time.Hour)}}},
			{Instance: "sql01", Database: "HR", Configured: true}}
	}
	for _, tc := range []struct {
		name   string
		found  []FoundDrill
		reason string
	}{
		{"passed", []FoundDrill{rec(catalog.DrillPassed, 20*time.Minute, now.Add(-3*time.Hour), true)}, ""},
		{"newest of two servers", []FoundDrill{rec(catalog.DrillFailed, 0, now.Add(-30*time.Hour), true),
			rec(catalog.DrillPassed, 20*time.Minute, now.Add(-3*time.Hour), true)}, ""},
		{"failed", []FoundDrill{rec(catalog.DrillFailed, 0, now.Add(-3*time.Hour), true)}, "the last recovery drill failed (HashMismatch)"},
		{"rto", []FoundDrill{rec(catalog.DrillPassed, 90*time.Minute, now.Add(-3*time.Hour), true)}, "took 1h30m to recover, above the RTO of 1h"},
		{"old", []FoundDrill{rec(catalog.DrillPassed, 20*time.Minute, now.Add(-50*time.Hour), true)}, "is 50h old, above drill.max_age 48h"},
		{"none", nil, "no recovery drill recorded"},
		{"unauthenticated", []FoundDrill{rec(catalog.DrillPassed, time.Minute, now, false)}, "1 drill record(s) not authenticated"},
	} {
		dbs := db()
		judgeDrills(now, dbs, tc.found)
		d := dbs[0]
		got := strings.Join(d.Reasons, "; ")
		if tc.reason == "" && (d.OutOfObjectives || d.LastDrill == nil) || tc.reason != "" && (!d.OutOfObjectives || !strings.Contains(got, tc.reason)) {
			t.Errorf("%s: out %v, reasons %q, want %q", tc.name, d.OutOfObjectives, got, tc.reason)
		}
		if dbs[1].OutOfObjectives || dbs[1].LastDrill != nil {
			t.Errorf("%s: HR has no drill, yet %+v", tc.name, dbs[1])
		}
	}
}
