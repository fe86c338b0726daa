package config

import (
	"slices"
	"strings"
	"testing"
)

// groupBase is base with a second source instance, sql02; groups and
// entries are appended.
func groupBase(t *testing.T) string {
	return edit(t, "  - name: verify\n", "  - name: sql02\n    address: sql02:1433\n    user: backup\n    password_env: SQL02_PASSWORD\n  - name: verify\n")
}

// A group loads with its replicas and keys its entries; each mistake is
// refused at its line, naming the fix.
func TestAvailabilityGroups(t *testing.T) {
	y := groupBase(t) + `availability_groups:
  - name: agsales
    availability_group: AG_Sales
    replicas: [sql01, sql02]
    aliases: [listener01]
    backup_servers: [bak01, bak02]
`
	// The entry of base (Sales on sql01) applies to the group's database;
	// a second entry on the group is another database.
	y = strings.Replace(y, "    instance: sql01\n    backup_servers: [bak01, bak02]\n",
		"    instance: agsales\n    backup_servers: [bak01, bak02]\n", 1)
	c, err := Parse([]byte(y), "config.yaml")
	if err != nil {
		t.Fatalf("valid group: %v", err)
	}
	g, ok := c.AvailabilityGroup("agsales")
	if !ok || g.SQLName() != "AG_Sales" || g.MaxConcurrent != 1 || !slices.Equal(g.Former(), []string{"sql01", "sql02", "listener01"}) {
		t.Errorf("group: %+v", g)
	}
	if r, ok := c.GroupOf("sql02"); !ok || r.Name != "agsales" {
		t.Errorf("GroupOf(sql02): %v", r)
	}
	if got := c.Sources("agsales"); !slices.Equal(got, []string{"sql01", "sql02"}) {
		t.Errorf("Sources(agsales) = %v", got)
	}
	if db := c.Databases[0]; db.Instance != "agsales" || !slices.Equal(db.Aliases, []string{"sql01", "sql02", "listener01"}) {
		t.Errorf("entry on the group: %+v", db)
	}

	// groups puts the availability_groups section before databases:, so
	// that entries appended to the result are databases.
	groups := func(s string) string {
		return strings.Replace(groupBase(t), "databases:\n", "availability_groups:\n"+s+"databases:\n", 1)
	}
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"replica not configured", groups("  - {name: ag1, replicas: [sql01, sql03]}\n"), `replica "sql03" is not defined in sql_instances`},
		{"no replicas", groups("  - {name: ag1}\n"), `missing required key "replicas"`},
		{"instance in two groups", groups("  - {name: ag1, replicas: [sql01]}\n  - {name: ag2, replicas: [sql02, sql01]}\n"),
			"sql01 is already a replica of availability_groups[0]"},
		{"group named as an instance, in another case", groups("  - {name: SQL02, replicas: [sql01]}\n"),
			`name "SQL02" is also the name of sql_instances "sql02"`},
		{"two groups differing in case", groups("  - {name: agA, replicas: [sql01]}\n  - {name: aga, replicas: [sql02]}\n"),
			`name "aga" differs only in case from "agA"`},
		{"alias is a configured instance", groups("  - {name: ag1, replicas: [sql01], aliases: [sql02]}\n"),
			`alias "sql02" is a configured instance`},
		{"alias is a group", groups("  - {name: ag1, replicas: [sql01], aliases: [AG2]}\n  - {name: ag2, replicas: [sql02]}\n"),
			`alias "AG2" is the name of availability group ag2`},
		{"entries on the group and on its replica", groups("  - {name: ag1, replicas: [sql01, sql02]}\n") +
			"  - {name: sales, instance: ag1, backup_servers: [bak01, bak02]}\n",
			"keep one entry, with instance: ag1"},
		{"group entry verified on a replica", groups("  - {name: ag1, replicas: [sql01, verify]}\n") +
			"  - {name: Other, instance: ag1, backup_servers: [bak01, bak02]}\n",
			"verifies on verify, the source instance itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := parseErrs(t, tc.yaml)
			if !slices.ContainsFunc(es, func(e Error) bool { return strings.Contains(e.Msg, tc.want) }) {
				t.Errorf("want an error containing %q; got %v", tc.want, es)
			}
		})
	}

	// Replicas with different rotations and no rotation on the group:
	// the rotation of the group's selected databases is ambiguous.
	y = strings.Replace(groupBase(t), "    password_env: SQL01_PASSWORD\n", "    password_env: SQL01_PASSWORD\n    backup_servers: [bak01, bak02]\n", 1)
	y = strings.Replace(y, "    password_env: SQL02_PASSWORD\n", "    password_env: SQL02_PASSWORD\n    backup_servers: [bak02, bak01]\n", 1)
	y += "availability_groups:\n  - {name: ag1, replicas: [sql01, sql02]}\n"
	if es := parseErrs(t, y); !slices.ContainsFunc(es, func(e Error) bool { return strings.Contains(e.Msg, "set backup_servers (and copy_to) on the group") }) {
		t.Errorf("replicas with different rotations: %v", es)
	}
}

// A database of an availability group with log_backup (its own or from
// defaults:) is refused at load, naming the way out, rather than a log
// chain that fails every night; log_backup {every: 0s} turns it off for it.
func TestGroupDatabaseWithLogBackupRefused(t *testing.T) {
	y := strings.Replace(groupBase(t), "databases:\n", "availability_groups:\n  - {name: agsales, replicas: [sql01, sql02], backup_servers: [bak01, bak02]}\ndatabases:\n", 1)
	y = strings.Replace(y, "    instance: sql01\n    backup_servers: [bak01, bak02]\n", "    instance: agsales\n    backup_servers: [bak01, bak02]\n", 1)
	if _, err := Parse([]byte(y), "config.yaml"); err != nil {
		t.Fatalf("group without log backups: %v", err)
	}
	logs := strings.Replace(y, "databases:\n", "defaults:\n  owns_backup_chain: true\n  log_backup: {every: 1m}\ndatabases:\n", 1)
	if strings.Contains(y, "defaults:\n") {
		logs = strings.Replace(y, "defaults:\n", "defaults:\n  owns_backup_chain: true\n  log_backup: {every: 1m}\n", 1)
	}
	es := parseErrs(t, logs)
	if !slices.ContainsFunc(es, func(e Error) bool {
		return strings.Contains(e.Msg, "availability group agsales") && strings.Contains(e.Msg, "log_backup: {every: 0s}")
	}) {
		t.Fatalf("a group's database with log_backup from defaults: %v", es)
	}
	off := logs + "    log_backup: {every: 0s}\n"
	if _, err := Parse([]byte(off), "config.yaml"); err != nil {
		t.Fatalf("log_backup turned off for the group's database: %v", err)
	}
}
