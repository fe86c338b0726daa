package config

import (
	"strings"
	"testing"
	"time"
)

func TestLogBackupKeysInheritAndDefault(t *testing.T) {
	c, err := Parse([]byte(base), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if db := c.Databases[0]; db.LogBackups() || db.ProofMode() != "" || db.PITEvery() != 0 {
		t.Fatalf("log backups without log_backup: %+v", db.Policy)
	}
	yaml := "defaults:\n  owns_backup_chain: true\n  log_backup: {every: 1m}\n" + base
	c, err = Parse([]byte(yaml), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	db := c.Databases[0]
	if db.LogBackup.Every != time.Minute || db.ProofMode() != LogProofNightly || db.ProofLag() != DefaultNightlyLag || db.PITEvery() != DefaultPITEvery {
		t.Fatalf("inherited: every %s mode %s lag %s pit %s", db.LogBackup.Every, db.ProofMode(), db.ProofLag(), db.PITEvery())
	}
	if db.StandbyDatabaseName() != "Sales_standby" {
		t.Fatal(db.StandbyDatabaseName())
	}
	own := yaml + "    log_proof: standby\n    standby_name: \"ls_{instance}_{db}\"\n    adopt_foreign_logs: true\n    pit_proof: {every: 12h, checkdb: true}\n"
	c, err = Parse([]byte(own), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	db = c.Databases[0]
	if db.ProofMode() != LogProofStandby || db.ProofLag() != DefaultStandbyLag || !db.AdoptForeignLogs || db.PITEvery() != 12*time.Hour || !db.PITProof.CheckDB ||
		db.StandbyDatabaseName() != "ls_"+db.Instance+"_Sales" {
		t.Fatalf("own keys: %+v", db.Policy)
	}
	// Off for one database.
	c, err = Parse([]byte(yaml+"    log_backup: {every: 0s}\n"), "config.yaml")
	if err != nil || c.Databases[0].LogBackups() {
		t.Fatalf("every 0 for one database: %v", err)
	}
}

func TestLogBackupKeysRefused(t *testing.T) {
	own := "defaults:\n  owns_backup_chain: true\n"
	for _, tc := range []struct{ yaml, msg string }{
		{own + base + "    log_backup: {every: 30s}\n", "log_backup.every 30s is below 1m0s"},
		{own + base + "    rpo: 1h\n    log_backup: {every: 2h}\n", "longer than rpo 1h0m0s"},
		{base + "    log_backup: {every: 1m}\n", "set owns_backup_chain: true"},
		{own + base + "    log_proof: standby\n", "log_proof standby needs log backups: set log_backup: {every: 1m}"},
		{own + base + "    log_backup: {every: 1m}\n    log_proof: hourly\n", `log_proof "hourly": use standby`},
		{own + base + "    log_backup: {every: 5m}\n    log_proof: standby\n    log_proof_lag: 1m\n", "log_proof_lag 1m0s is shorter than log_backup.every 5m0s"},
		{own + base + "    log_backup: {every: 5m}\n    log_proof_lag: 2h\n", "under a day, but log_proof nightly"},
		{own + base + "    adopt_foreign_logs: true\n", "adopt_foreign_logs needs log backups"},
		{own + base + "    pit_proof: {every: 24h}\n", "pit_proof needs log backups"},
		{own + base + "    log_backup: {every: 1m}\n    pit_proof: {every: 10m}\n", "pit_proof.every 10m0s is below 1h0m0s"},
		{own + base + "    standby_name: \"{db}_verify\"\n", "standby_name \"{db}_verify\" is verify_name"},
		{own + base + "    standby_name: \"{db}\"\n", "has no fixed prefix or suffix"},
		{own + base + "    standby_name: \"{db}_{seq}\"\n", "only {db}, {instance} are replaced"},
		{"defaults:\n  standby_name: standby\n" + base, "does not contain {db}"},
		{own + "  log_backup: {every: 1m}\n  log_proof: standby\n" + base + "    standby_name: Sales\n", "names the standby copy like the database itself"},
		// Sales on sql01 and on verify (as a source), each its own verify
		// name, one standby name on the one verification instance.
		{own + "  log_backup: {every: 1m}\n  log_proof: standby\n  verify_name: \"{instance}_{db}_verify\"\n" +
			strings.Replace(base, "  - name: verify\n", "  - name: sql02\n    address: sql02:1433\n    user: backup\n    password_env: SQL01_PASSWORD\n  - name: verify\n", 1) +
			"  - name: Sales\n    instance: sql02\n    backup_servers: [bak01, bak02]\n",
			`its standby copy "Sales_standby" on verify would collide with databases[0] (Sales)'s: set standby_name (e.g. "{instance}_{db}_standby")`},
	} {
		_, err := Parse([]byte(tc.yaml), "config.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("want an error containing %q, got %v", tc.msg, err)
		}
	}
}
