package status

import (
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
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

// When the immutable copy was last proven restorable: the newest passed
// drill from it among the records, whatever drills came after it. With
// drill.from immutable it must be within drill.max_age; a drill from the
// backup servers does not prove the immutable copy.
func TestImmutableProvenJudged(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	drill := func(run string, at time.Time, outcome string, immutable bool) catalog.DrillResult {
		r := catalog.DrillResult{WorkflowID: "drill/sql01/Sales", RunID: run, Instance: "verify", Database: "Sales_drill", Outcome: outcome,
			Sequence: 7, StartedAt: at.Add(-time.Minute), At: at, From: "any"}
		if outcome != catalog.DrillPassed {
			r.ErrorType, r.Sequence = "HashMismatch", 0
		}
		if immutable {
			r.From, r.Immutable = config.DrillFromImmutable, &catalog.DrillImmutable{Store: "vault01", Sequence: 7, Staging: "bak02", Dir: "staging/x"}
		}
		return r
	}
	found := func(ds ...catalog.DrillResult) []FoundDrill {
		r := catalog.NewDrillRecord("sql01", "Sales", now)
		for _, d := range ds {
			r.Add(d)
		}
		r.Auth = catalog.AuthSigned
		return []FoundDrill{{Server: "bak02", Record: r}}
	}
	for _, tc := range []struct {
		name     string
		from     string
		found    []FoundDrill
		provenAt time.Time // zero: none
		reason   string
	}{
		{"proven, then a passed drill from the servers", config.DrillFromImmutable,
			found(drill("1", now.Add(-30*time.Hour), catalog.DrillPassed, true), drill("2", now.Add(-2*time.Hour), catalog.DrillPassed, false)),
			now.Add(-30 * time.Hour), ""},
		{"a failed drill from it after the passed one", config.DrillFromImmutable,
			found(drill("1", now.Add(-30*time.Hour), catalog.DrillPassed, true), drill("2", now.Add(-2*time.Hour), catalog.DrillFailed, true)),
			now.Add(-30 * time.Hour), "the last recovery drill failed (HashMismatch)"},
		{"proven too long ago", config.DrillFromImmutable,
			found(drill("1", now.Add(-50*time.Hour), catalog.DrillPassed, true), drill("2", now.Add(-2*time.Hour), catalog.DrillPassed, false)),
			now.Add(-50 * time.Hour), "the immutable copy was last proven restorable 50h ago, above drill.max_age 48h"},
		{"never", config.DrillFromImmutable, found(drill("2", now.Add(-2*time.Hour), catalog.DrillPassed, false)),
			time.Time{}, "the immutable copy was never proven restorable"},
		{"not asked: shown, not judged", config.DrillFromAny,
			found(drill("1", now.Add(-50*time.Hour), catalog.DrillPassed, true), drill("2", now.Add(-2*time.Hour), catalog.DrillPassed, false)),
			now.Add(-50 * time.Hour), ""},
	} {
		dbs := []Database{{Instance: "sql01", Database: "Sales", Configured: true, Objectives: Objectives{
			DrillObjectives: DrillObjectives{DrillEvery: Duration(24 * time.Hour), DrillMaxAge: Duration(48 * time.Hour), DrillFrom: tc.from}}}}
		judgeDrills(now, dbs, tc.found)
		d := dbs[0]
		got := strings.Join(d.Reasons, "; ")
		if tc.reason == "" && d.OutOfObjectives || tc.reason != "" && (!d.OutOfObjectives || !strings.Contains(got, tc.reason)) {
			t.Errorf("%s: out %v, reasons %q, want %q", tc.name, d.OutOfObjectives, got, tc.reason)
		}
		p := d.ImmutableProven
		switch {
		case tc.provenAt.IsZero() && p != nil:
			t.Errorf("%s: proven %+v, want none", tc.name, p)
		case !tc.provenAt.IsZero() && (p == nil || !p.At.Equal(tc.provenAt) || p.RunID != "1" || p.Store != "vault01" || p.Sequence != 7 ||
			time.Duration(p.Age) != now.Sub(tc.provenAt)):
			t.Errorf("%s: proven %+v, want the drill of %s", tc.name, p, tc.provenAt)
		}
	}
}
