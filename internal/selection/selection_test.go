package selection

import (
	"reflect"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/config"
)

func online(names ...string) []Database {
	var out []Database
	for i, n := range names {
		out = append(out, Database{Name: n, ID: int64(i + 1), State: "ONLINE", IsSystem: SystemDatabase(n)})
	}
	return out
}

func reasons(skipped []Skip) map[string]string {
	m := map[string]string{}
	for _, s := range skipped {
		m[s.Name] = s.Reason
	}
	return m
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"Sales*", "Sales", true},
		{"Sales*", "SalesEU", true},
		{"sales*", "SALESEU", true}, // case-insensitive, as the default collation
		{"Sales*", "PreSales", false},
		{"*Sales*", "PreSalesEU", true},
		{"Sales?", "SalesX", true},
		{"Sales?", "Sales", false},
		{"Sales?", "SalesXY", false},
		{"*", "", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbYcZ", false},
		{"Ärger", "ärger", true},
		{"Sales_EU", "SalesXEU", false}, // _ is not a wildcard here (it is in LIKE)
		{"[Sales]", "[Sales]", true},    // brackets are literal
		{strings.Repeat("*a", 30) + "b", strings.Repeat("a", 60), false},
	} {
		if got := Match(c.pattern, c.name); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

func TestResolveKeywordsWildcardsExclusions(t *testing.T) {
	dbs := online("master", "model", "msdb", "tempdb", "Sales", "SalesEU", "DBA", "HR", "Archive")
	cases := []struct {
		patterns []string
		want     []string
	}{
		{[]string{"USER_DATABASES"}, []string{"Archive", "DBA", "HR", "Sales", "SalesEU"}},
		{[]string{"USER_DATABASES", "-DBA"}, []string{"Archive", "HR", "Sales", "SalesEU"}},
		// An exclusion wins wherever it stands, as in DatabaseBackup.
		{[]string{"-dba", "USER_DATABASES"}, []string{"Archive", "HR", "Sales", "SalesEU"}},
		{[]string{"SYSTEM_DATABASES"}, []string{"master", "model", "msdb"}},
		{[]string{"ALL_DATABASES", "-SYSTEM_DATABASES", "-Sales*"}, []string{"Archive", "DBA", "HR"}},
		{[]string{"Sales*"}, []string{"Sales", "SalesEU"}},
		{[]string{"sales", "HR"}, []string{"HR", "Sales"}},
		{[]string{"ALL_DATABASES"}, []string{"Archive", "DBA", "HR", "master", "model", "msdb", "Sales", "SalesEU"}},
		{nil, nil},
	}
	for _, c := range cases {
		got, _ := Resolve(c.patterns, dbs)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Resolve(%q) = %q, want %q", c.patterns, got, c.want)
		}
	}
}

func TestResolveSkipsWithReasons(t *testing.T) {
	dbs := online("tempdb", "Sales", "DBA", "Other")
	dbs = append(dbs,
		Database{Name: "Sales_snap", ID: 20, State: "ONLINE", IsSnapshot: true},
		Database{Name: "SalesOld", ID: 21, State: "OFFLINE"},
		Database{Name: "SalesNew", ID: 22, State: "RESTORING"},
		Database{Name: "SalesRO", ID: 23, State: "ONLINE", ReadOnly: true},
	)
	selected, skipped := Resolve([]string{"ALL_DATABASES", "-DBA", "Missing", "tempdb"}, dbs)
	if want := []string{"Other", "Sales", "SalesRO"}; !reflect.DeepEqual(selected, want) {
		t.Fatalf("selected %q, want %q", selected, want)
	}
	r := reasons(skipped)
	for name, want := range map[string]string{
		"tempdb":     "tempdb cannot be backed up",
		"Sales_snap": "database snapshot",
		"SalesOld":   "state OFFLINE",
		"SalesNew":   "state RESTORING",
		"DBA":        `excluded by "-DBA"`,
		"Missing":    "no such database",
	} {
		if !strings.Contains(r[name], want) {
			t.Errorf("%s: reason %q, want it to contain %q", name, r[name], want)
		}
	}
	if len(skipped) != 6 {
		t.Errorf("skipped %d, want 6: %+v", len(skipped), skipped)
	}
}

func TestResolveNotSelectedAndStableOrder(t *testing.T) {
	// Input order must not matter: the result is by name.
	a, as := Resolve([]string{"S*"}, online("Sb", "sa", "Zed", "SC"))
	b, bs := Resolve([]string{"S*"}, online("SC", "Zed", "sa", "Sb"))
	if want := []string{"sa", "Sb", "SC"}; !reflect.DeepEqual(a, want) || !reflect.DeepEqual(b, want) {
		t.Fatalf("got %q and %q, want %q", a, b, want)
	}
	if !reflect.DeepEqual(as, bs) || len(as) != 1 || !strings.Contains(as[0].Reason, "not selected") {
		t.Errorf("skipped %+v / %+v", as, bs)
	}
}

// resolved is what an instance holding dbs answers for the names a start
// resolves (Asked), comparing names with same (strings.EqualFold for a
// case-insensitive instance, == for a case-sensitive one).
func resolved(cfg *config.Config, dbs []Database, same func(a, b string) bool, names ...string) Names {
	n := Names{Databases: dbs, IDs: map[string]int64{}}
	for _, name := range Asked(cfg, "sql01", names...) {
		for _, d := range dbs {
			if same(d.Name, name) {
				n.IDs[name] = d.ID
			}
		}
	}
	return n
}

func cfgWith(t *testing.T, dbs ...config.Database) *config.Config {
	t.Helper()
	return &config.Config{
		File:         "c.yaml",
		Defaults:     config.DefaultPolicy(),
		SQLInstances: []config.SQLInstance{{Name: "sql01", Databases: []string{"USER_DATABASES", "-DBA"}}},
		Databases:    dbs,
	}
}

func TestForInstanceAddsConfiguredDatabases(t *testing.T) {
	cfg := cfgWith(t,
		config.Database{Name: "DBA", Instance: "sql01", BackupServers: []string{"bak01", "bak02"}}, // excluded, but configured by name
		config.Database{Name: "Gone", Instance: "sql01", BackupServers: []string{"bak01", "bak02"}},
		config.Database{Name: "Sales", Instance: "sql01", BackupServers: []string{"bak01", "bak02"}},
	)
	r, err := ForInstance(cfg, "sql01", resolved(cfg, online("master", "DBA", "Sales", "New"), strings.EqualFold))
	if err != nil {
		t.Fatal(err)
	}
	want := []Selected{{Name: "DBA", Configured: true}, {Name: "New"}, {Name: "Sales", Configured: true}}
	if !reflect.DeepEqual(r.Selected, want) {
		t.Fatalf("selected %+v, want %+v", r.Selected, want)
	}
	rs := reasons(r.Skipped)
	if _, ok := rs["DBA"]; ok {
		t.Errorf("DBA is configured by name but reported skipped: %+v", r.Skipped)
	}
	if !strings.Contains(rs["Gone"], "no such database") || !strings.Contains(rs["master"], "not selected") {
		t.Errorf("skipped %+v", r.Skipped)
	}
	if _, err := ForInstance(cfg, "nope", Names{}); err == nil {
		t.Error("an unknown instance resolved")
	}
}

func TestDatabaseFor(t *testing.T) {
	sales := config.Database{Name: "Sales", Instance: "sql01", BackupServers: []string{"bak01", "bak02"}, CopyTo: "",
		SanityChecks: []config.SanityCheck{{Name: "orders"}}, Policy: config.DefaultPolicy()}
	sales.Policy.Stripes = 8
	cfg := cfgWith(t, sales)
	cfg.Defaults.Stripes = 2

	got, err := DatabaseFor(cfg, "sql01", "Sales", "")
	if err != nil || !reflect.DeepEqual(got, sales) {
		t.Fatalf("the configured entry must come back unchanged: %+v, %v", got, err)
	}
	got, err = DatabaseFor(cfg, "sql01", "New", "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "New" || got.Instance != "sql01" || got.Stripes != 2 || !reflect.DeepEqual(got.BackupServers, []string{"bak01", "bak02"}) || len(got.SanityChecks) != 0 {
		t.Errorf("inherited %+v", got)
	}

	other := sales
	other.Name, other.BackupServers = "HR", []string{"bak02", "bak01"}
	if _, err := DatabaseFor(cfgWith(t, sales, other), "sql01", "New", ""); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("differing rotations: %v", err)
	}
	if _, err := DatabaseFor(cfgWith(t), "sql01", "New", ""); err == nil || !strings.Contains(err.Error(), "add a databases: entry") {
		t.Errorf("no rotation: %v", err)
	}
}
