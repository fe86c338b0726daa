package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDiffBackupKeysInheritAndDefault(t *testing.T) {
	c, err := Parse([]byte(base), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if db := c.Databases[0]; db.DiffBackups() || db.DiffBackup.Every != 0 {
		t.Fatalf("differentials without diff_backup: %+v", db.DiffBackup)
	}
	yaml := "defaults:\n  owns_backup_chain: true\n  diff_backup: {every: 6h}\n" + base
	c, err = Parse([]byte(yaml), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if db := c.Databases[0]; !db.DiffBackups() || db.DiffBackup.Every != 6*time.Hour || db.CopyOnly {
		t.Fatalf("inherited: %+v, copy_only %v", db.DiffBackup, db.CopyOnly)
	}
	// Per database, and off for one database.
	c, err = Parse([]byte(base+"    owns_backup_chain: true\n    diff_backup: {every: 4h}\n"), "config.yaml")
	if err != nil || c.Databases[0].DiffBackup.Every != 4*time.Hour {
		t.Fatalf("own diff_backup: %v, %+v", err, c.Databases)
	}
	c, err = Parse([]byte(yaml+"    diff_backup: {every: 0s}\n"), "config.yaml")
	if err != nil || c.Databases[0].DiffBackups() {
		t.Fatalf("every 0 for one database: %v", err)
	}
	// Off for a database that does not own the chain, on under defaults.
	c, err = Parse([]byte(yaml+"    owns_backup_chain: false\n    diff_backup: {every: 0s}\n"), "config.yaml")
	if err != nil || c.Databases[0].DiffBackups() || !c.Databases[0].CopyOnly {
		t.Fatalf("diff_backup off with owns_backup_chain false: %v", err)
	}
}

func TestDiffBackupKeysRefused(t *testing.T) {
	own := "defaults:\n  owns_backup_chain: true\n"
	for _, tc := range []struct{ yaml, msg string }{
		{base + "    diff_backup: {every: 6h}\n", "config.yaml:28: databases[0] (Sales): diff_backup takes differential backups"},
		{"defaults:\n  diff_backup: {every: 6h}\n" + base, "defaults: diff_backup takes differential backups"},
		{own + "  diff_backup: {every: 6h}\n" + base + "    owns_backup_chain: false\n", "databases[0] (Sales): diff_backup"},
		{own + base + "    diff_backup: {every: 5m}\n", "diff_backup.every 5m0s is below 15m0s"},
		{own + base + "    diff_backup: {every: -1h}\n", "diff_backup.every -1h0m0s is below 15m0s"},
		{own + base + "    diff_backup: {often: true}\n", "often"},
		{own + base + "    copy_only: true\n    diff_backup: {every: 6h}\n", "copy_only: true and owns_backup_chain: true contradict"},
	} {
		_, err := Parse([]byte(tc.yaml), "config.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("want an error containing %q, got %v", tc.msg, err)
		}
	}
}

// A database of an availability group takes no differentials: a secondary
// takes only COPY_ONLY full backups ("Offload supported backups to
// secondary replicas of an availability group"), and the group's
// preferred replica may be one. Refused at load, naming the way out.
func TestGroupDatabaseWithDiffBackupRefused(t *testing.T) {
	y := strings.Replace(groupBase(t), "databases:\n", "availability_groups:\n  - {name: agsales, replicas: [sql01, sql02], backup_servers: [bak01, bak02]}\n"+
		"defaults:\n  owns_backup_chain: true\n  diff_backup: {every: 6h}\ndatabases:\n", 1)
	y = strings.Replace(y, "    instance: sql01\n    backup_servers: [bak01, bak02]\n", "    instance: agsales\n    backup_servers: [bak01, bak02]\n", 1)
	es := parseErrs(t, y)
	if !slices.ContainsFunc(es, func(e Error) bool {
		return strings.Contains(e.Msg, "availability group agsales") && strings.Contains(e.Msg, "diff_backup: {every: 0s}")
	}) {
		t.Fatalf("a group's database with diff_backup from defaults: %v", es)
	}
	if _, err := Parse([]byte(y+"    diff_backup: {every: 0s}\n"), "config.yaml"); err != nil {
		t.Fatalf("diff_backup turned off for the group's database: %v", err)
	}
}
