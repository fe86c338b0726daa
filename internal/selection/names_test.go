package selection

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/config"
)

// SQL Server ignores trailing blanks when it compares names: "HR " names
// HR, which the selection excludes with -HR. A start of "HR " (or of any
// name with a leading or trailing blank) is refused rather than run with
// the defaults past the exclusion.
func TestBlankPaddedNamesRefused(t *testing.T) {
	cfg := cfgWith(t, config.Database{Name: "Sales", Instance: "sql01", BackupServers: []string{"bak01", "bak02"}})
	cfg.SQLInstances[0].Databases = []string{"USER_DATABASES", "-HR"}
	cfg.SQLInstances[0].BackupServers = []string{"bak01", "bak02"}
	if _, err := Lookup(cfg, "sql01", "HR"); err == nil {
		t.Fatalf("HR is excluded by -HR but resolved")
	}
	for _, name := range []string{"HR ", " HR", "HR\t", "Sales "} {
		db, err := Lookup(cfg, "sql01", name)
		if err == nil || !strings.Contains(err.Error(), "blank") {
			t.Errorf("Lookup(%q) = %+v, %v; want an error naming the blank", name, db, err)
		}
	}
}

// On a case-insensitive instance the entry "sales" is the database Sales:
// a start of any spelling runs as Sales with the entry's settings, and the
// fleet selects Sales as configured. On a case-sensitive instance with Sales
// and sales, the entry Sales names only Sales, and SALES names nothing.
func TestResolveByTheInstancesCollation(t *testing.T) {
	entry := config.Database{Name: "sales", Instance: "sql01", BackupServers: []string{"bak01", "bak02"},
		SanityChecks: []config.SanityCheck{{Name: "orders"}}, Policy: config.DefaultPolicy()}
	cfg := cfgWith(t, entry)
	cfg.SQLInstances[0].BackupServers = []string{"bak02", "bak01"}

	ci := resolved(cfg, online("master", "Sales", "HR"), strings.EqualFold, "SALES", "Sales", "hr")
	for _, start := range []string{"SALES", "Sales", "sales"} {
		db, err := ci.Resolve(cfg, "sql01", start)
		if err != nil || db.Name != "Sales" || db.Entry != "sales" || len(db.SanityChecks) != 1 || db.BackupServers[0] != "bak01" {
			t.Errorf("case-insensitive: start of %s: %+v %v; want Sales with the entry sales's settings", start, db, err)
		}
	}
	if db, err := ci.Resolve(cfg, "sql01", "hr"); err != nil || db.Name != "HR" || db.Entry != "" || db.BackupServers[0] != "bak02" {
		t.Errorf("case-insensitive: start of hr: %+v %v; want HR with the defaults", db, err)
	}
	r, err := ForInstance(cfg, "sql01", ci)
	if err != nil {
		t.Fatal(err)
	}
	want := []Selected{{Name: "HR"}, {Name: "Sales", Configured: true, Entry: "sales"}}
	if !reflect.DeepEqual(r.Selected, want) {
		t.Errorf("case-insensitive fleet: %+v, want %+v", r.Selected, want)
	}

	cfg = cfgWith(t, config.Database{Name: "Sales", Instance: "sql01", BackupServers: []string{"bak01", "bak02"}})
	cfg.SQLInstances[0].BackupServers = []string{"bak02", "bak01"}
	cs := resolved(cfg, online("master", "Sales", "sales"), func(a, b string) bool { return a == b }, "SALES", "sales")
	if db, err := cs.Resolve(cfg, "sql01", "sales"); err != nil || db.Name != "sales" || db.Entry != "" || db.BackupServers[0] != "bak02" {
		t.Errorf("case-sensitive: start of sales: %+v %v; want sales with the defaults, not the entry Sales", db, err)
	}
	_, err = cs.Resolve(cfg, "sql01", "SALES")
	var missing *NoSuchDatabaseError
	if !errors.As(err, &missing) || !strings.Contains(err.Error(), `'Sales' and 'sales'`) {
		t.Errorf("case-sensitive: start of SALES: %v; want no such database, naming Sales and sales", err)
	}
	r, err = ForInstance(cfg, "sql01", cs)
	if err != nil {
		t.Fatal(err)
	}
	want = []Selected{{Name: "Sales", Configured: true}, {Name: "sales"}}
	if !reflect.DeepEqual(r.Selected, want) {
		t.Errorf("case-sensitive fleet: %+v, want %+v", r.Selected, want)
	}
}
