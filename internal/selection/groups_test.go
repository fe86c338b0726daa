package selection

import (
	"slices"
	"testing"

	"github.com/backupcycle/backupcycle/internal/config"
)

// groupConfig: replicas sql01 and sql02 of availability group ag1 (AG_1 on
// SQL Server), both selecting USER_DATABASES; an entry for Sales on sql01.
const groupConfig = `sql_instances:
  - {name: sql01, address: "sql01:1433", user: u, password_env: P, databases: [USER_DATABASES], backup_servers: [bak01, bak02]}
  - {name: sql02, address: "sql02:1433", user: u, password_env: P, databases: [USER_DATABASES], backup_servers: [bak01, bak02]}
  - {name: verify, address: "verify:1433", user: u, password_env: P}
availability_groups:
  - {name: ag1, availability_group: AG_1, replicas: [sql01, sql02]}
backup_servers:
  - {name: bak01, unc_paths: ['\\b1\x'], location: /tmp/b1, verify_instance: verify, restore_data_dir: /d, restore_log_dir: /l}
  - {name: bak02, unc_paths: ['\\b2\x'], location: /tmp/b2, verify_instance: verify, restore_data_dir: /d, restore_log_dir: /l}
databases:
  - {name: sales, instance: sql01, backup_servers: [bak01, bak02], stripes: 4}
`

// On a replica, a database in the configured group is the group's, with
// the entry any replica (or the group) has for it; one outside any group,
// or in another group, stays the instance's.
func TestGroupDatabases(t *testing.T) {
	cfg, err := config.Parse([]byte(groupConfig), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := Names{Databases: []Database{
		{Name: "master", ID: 1, State: "ONLINE", IsSystem: true},
		{Name: "Sales", ID: 5, State: "ONLINE", InAvailabilityGroup: true, AvailabilityGroup: "ag_1"},
		{Name: "Local", ID: 6, State: "ONLINE"},
		{Name: "Other", ID: 7, State: "ONLINE", InAvailabilityGroup: true, AvailabilityGroup: "AG_2"},
		{Name: "Hidden", ID: 8, State: "ONLINE", InAvailabilityGroup: true}, // the login may not see its group
	}, IDs: map[string]int64{"sales": 5, "Sales": 5, "Local": 6, "Other": 7, "Hidden": 8}}

	db, err := n.Resolve(cfg, "sql02", "Sales")
	if err != nil {
		t.Fatal(err)
	}
	if db.Instance != "ag1" || db.Name != "Sales" || db.Entry != "sales" || db.Stripes != 4 || !slices.Equal(db.Aliases, []string{"sql01", "sql02"}) {
		t.Errorf("Sales through sql02: %+v, want the group's, with sql01's entry", db)
	}
	for name, want := range map[string]string{"Local": "sql02", "Other": "sql02", "Hidden": "ag1"} {
		db, err := n.Resolve(cfg, "sql02", name)
		if err != nil || db.Instance != want {
			t.Errorf("%s through sql02: %q (%v), want %s", name, db.Instance, err, want)
		}
	}
	res, err := ForInstance(cfg, "sql02", n)
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string]string{}
	for _, s := range res.Selected {
		groups[s.Name] = s.Group
		if s.Name == "Sales" && (!s.Configured || s.Entry != "sales") {
			t.Errorf("Sales selected on sql02: %+v, want configured by sql01's entry", s)
		}
	}
	if groups["Sales"] != "ag1" || groups["Hidden"] != "ag1" || groups["Local"] != "" || groups["Other"] != "" {
		t.Errorf("groups of the selected databases: %v", groups)
	}
	// By the configuration alone: the group's name finds the entry.
	if db, err := Lookup(cfg, "ag1", "Sales"); err != nil || db.Instance != "ag1" || db.Stripes != 4 {
		t.Errorf("Lookup(ag1, Sales): %+v, %v", db, err)
	}
	if db, err := Configured(cfg, "ag1", "Local", ""); err != nil || db.Instance != "ag1" || !slices.Equal(db.BackupServers, []string{"bak01", "bak02"}) {
		t.Errorf("Configured(ag1, Local), selected by the replicas: %+v, %v", db, err)
	}
}
