package endpoint

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// A database with drill exports its newest drill's end, measured time to
// recover and outcome, and its drill.max_age; 0 and no outcome before the
// first drill; a database without drill exports none of them.
func TestDrillGauges(t *testing.T) {
	dir := t.TempDir()
	bak02 := filepath.Join(dir, "bak02")
	cfg := siteConfig(t, dir, `  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
    rto: 1h
    drill: {every: 24h, max_age: 36h}
  - name: HR
    instance: sql01
    backup_servers: [bak01, bak02]
`)
	sales, hr := labels("instance", "sql01", "database", "Sales"), labels("instance", "sql01", "database", "HR")
	e := newEndpoint(t)
	e.Product().Refresh(context.Background(), cfg, nil)
	f := scrapeHandler(t, e)
	if v := f.value(t, LastDrill, sales); v != 0 {
		t.Errorf("before any drill: %s = %v, want 0", LastDrill, v)
	}
	if v := f.value(t, DrillMaxAge, sales); v != (36 * time.Hour).Seconds() {
		t.Errorf("%s = %v, want %v", DrillMaxAge, v, (36 * time.Hour).Seconds())
	}
	for _, name := range []string{LastDrillOK, LastDrillRTO} {
		if ms := f.find(name, sales); len(ms) != 0 {
			t.Errorf("before any drill: %s = %v, want absent", name, ms)
		}
	}

	at := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	r := catalog.NewDrillRecord("sql01", "Sales", at)
	r.Add(catalog.DrillResult{WorkflowID: "drill/sql01/Sales", RunID: "r1", Instance: "verify", Database: "Sales_drill", From: "any",
		Point: "latest", Outcome: catalog.DrillPassed, RTO: 95 * time.Second, StartedAt: at.Add(-2 * time.Minute), At: at})
	save := func() {
		t.Helper()
		if err := catalog.SaveDrill(context.Background(), dirFS(t, bak02), nil, r); err != nil {
			t.Fatal(err)
		}
	}
	save()
	e.Product().Refresh(context.Background(), cfg, nil)
	f = scrapeHandler(t, e)
	for name, want := range map[string]float64{LastDrill: float64(at.Unix()), LastDrillRTO: 95, LastDrillOK: 1} {
		if v := f.value(t, name, sales); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	for _, name := range []string{LastDrill, LastDrillOK, LastDrillRTO, DrillMaxAge} {
		if ms := f.find(name, hr); len(ms) != 0 {
			t.Errorf("HR has no drill, yet %s: %v", name, ms)
		}
	}

	later := at.Add(time.Hour)
	r.Add(catalog.DrillResult{WorkflowID: "drill/sql01/Sales", RunID: "r2", Instance: "verify", Database: "Sales_drill", From: "any",
		Point: "latest", Outcome: catalog.DrillFailed, ErrorType: "HashMismatch", StartedAt: later.Add(-time.Minute), At: later})
	save()
	e.Product().Refresh(context.Background(), cfg, nil)
	f = scrapeHandler(t, e)
	if v := f.value(t, LastDrillOK, sales); v != 0 {
		t.Errorf("after a failed drill: %s = %v, want 0", LastDrillOK, v)
	}
	if v := f.value(t, LastDrill, sales); v != float64(later.Unix()) {
		t.Errorf("after a failed drill: %s = %v, want %d", LastDrill, v, later.Unix())
	}
	if ms := f.find(ImmutableProven, sales); len(ms) != 0 {
		t.Errorf("no drill from the immutable copy, yet %s: %v", ImmutableProven, ms)
	}

	// A passed drill from the immutable copy, then a failed one: the
	// copy stays proven as of the passed one.
	proven, failed := later.Add(time.Hour), later.Add(2*time.Hour)
	for _, d := range []struct {
		run     string
		at      time.Time
		outcome string
	}{{"r3", proven, catalog.DrillPassed}, {"r4", failed, catalog.DrillFailed}} {
		r.Add(catalog.DrillResult{WorkflowID: "drill/sql01/Sales", RunID: d.run, Instance: "verify", Database: "Sales_drill", From: "immutable",
			Point: "latest", Outcome: d.outcome, StartedAt: d.at.Add(-time.Minute), At: d.at,
			Immutable: &catalog.DrillImmutable{Store: "vault01", Sequence: 1, Staging: "bak02", Dir: "staging/sql01@Sales"}})
	}
	save()
	e.Product().Refresh(context.Background(), cfg, nil)
	f = scrapeHandler(t, e)
	if v := f.value(t, ImmutableProven, sales); v != float64(proven.Unix()) {
		t.Errorf("%s = %v, want %d (the passed drill from the immutable copy)", ImmutableProven, v, proven.Unix())
	}
	if ms := f.find(ImmutableProven, hr); len(ms) != 0 {
		t.Errorf("HR has no drill, yet %s: %v", ImmutableProven, ms)
	}
}
