package config

import (
	"strings"
	"testing"
	"time"
)

func TestDrillKeysInheritAndDefault(t *testing.T) {
	c, err := Parse([]byte("defaults:\n  drill: {every: 24h, checkdb: true}\n"+base), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	db := &c.Databases[0]
	if !db.Drills() || db.Drill.Every != 24*time.Hour || !db.Drill.CheckDB || db.DrillMaxAge() != 48*time.Hour {
		t.Errorf("inherited drill: %+v, max age %s", db.Drill, db.DrillMaxAge())
	}
	if n, in := db.DrillDatabaseName(), c.DrillInstance(db); n != "Sales_drill" || in != "verify" {
		t.Errorf("drill copy %q on %q, want Sales_drill on verify (bak02's verify_instance)", n, in)
	}
	c, err = Parse([]byte(base+"    drill: {every: 12h, max_age: 30h, from: remote, name: \"{db}_rehearsal\", instance: verify}\n"), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if db := &c.Databases[0]; db.DrillMaxAge() != 30*time.Hour || db.Drill.From != DrillFromRemote || db.DrillDatabaseName() != "Sales_rehearsal" {
		t.Errorf("own drill: %+v", db.Drill)
	}
	if s := c.Databases[0].StagingServer(); s != "bak02" {
		t.Errorf("staging server %q, want bak02 (the copy target of bak01)", s)
	}
	c, err = Parse([]byte(withVault(t, vault, "    immutable_copy: vault01\n    drill: {every: 24h, from: immutable, staging: bak01}\n")), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if db := &c.Databases[0]; db.Drill.From != DrillFromImmutable || db.StagingServer() != "bak01" {
		t.Errorf("drill from immutable: %+v, staging %q", db.Drill, db.StagingServer())
	}
	if c, err = Parse([]byte(base), "config.yaml"); err != nil || c.Databases[0].Drills() {
		t.Errorf("no drill: %v, %+v", err, c.Databases[0].Drill)
	}
}

func TestDrillKeysRefused(t *testing.T) {
	own := "defaults:\n  owns_backup_chain: true\n"
	for _, tc := range []struct{ yaml, msg string }{
		{base + "    drill: {every: 10m}\n", "config.yaml:28: databases[0] (Sales): drill.every 10m0s is below 1h0m0s"},
		{base + "    drill: {checkdb: true}\n", "config.yaml:28: databases[0] (Sales): drill needs every"},
		{base + "    drill: {every: 24h, point: earliest}\n", `drill.point "earliest": use latest`},
		{base + "    drill: {every: 24h, within: 6h}\n", "drill.within picks a point in time, which needs log backups"},
		{own + base + "    log_backup: {every: 1m}\n    drill: {every: 24h, within: 6h, point: latest}\n", "drill.point and drill.within both given"},
		{base + "    drill: {every: 24h, from: primary}\n", `drill.from "primary": use any`},
		{base + "    drill: {every: 24h, max_age: 12h}\n", "drill.max_age 12h0m0s is shorter than drill.every 24h0m0s"},
		{base + "    drill: {every: 24h, instance: nowhere}\n", `drill.instance "nowhere" is not defined in sql_instances`},
		{base + "    drill: {every: 24h, instance: sql01}\n", "drill.instance sql01 is a source instance"},
		{base + "    drill: {every: 24h, name: \"{db}\"}\n", "has no fixed prefix or suffix"},
		{base + "    drill: {every: 24h, name: \"{db}_{seq}\"}\n", "only {db} and {instance} are replaced"},
		{base + "    drill: {every: 24h, name: \"{db}_verify\"}\n", "is verify_name or standby_name"},
		{base + "    drill: {every: 24h, name: Sales}\n", "names the drill copy like the database itself"},
		{"defaults:\n  drill: {every: 24h, name: drill}\n" + base, `drill.name "drill" does not contain {db}`},
		{base + "    drill: {every: 24h, name: x_drill}\n  - name: HR\n    instance: sql01\n    backup_servers: [bak01, bak02]\n    drill: {every: 24h, name: x_drill}\n",
			`its drill copy "x_drill" on verify would collide with databases[0] (Sales)'s`},
		{base + "    drill: {every: 24h, often: true}\n", "often"},
		{base + "    drill: {every: 24h, from: immutable}\n", "drill.from immutable restores from the immutable copy, and the database has no immutable_copy"},
		{own + withVault(t, vault, "    immutable_copy: vault01\n    log_backup: {every: 1m}\n    drill: {every: 24h, within: 6h, from: immutable}\n"),
			"drill.within picks a point in time, and drill.from immutable restores the newest set"},
		{base + "    drill: {every: 24h, staging: nowhere}\n", `drill.staging "nowhere" is not one of the database's backup servers`},
	} {
		_, err := Parse([]byte(tc.yaml), "config.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("want an error containing %q, got %v", tc.msg, err)
		}
	}
}
