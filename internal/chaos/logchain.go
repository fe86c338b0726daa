package chaos

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim"

	"github.com/backupcycle/backupcycle/internal/config"
)

// The log chain in the fleet: sql01's DBA takes log backups (log_backup,
// log_proof: standby) while the emulator's workload commits a row every
// few milliseconds, and every worker keeps its LogChain running (as the
// production worker does at start). The configuration says every: 1m, the
// least it accepts; the workers and the checker take it as LogEvery, and
// log_proof_lag as ProofLag, so that a run sees many log backups.

// LogTarget is the database with log backups.
var LogTarget = Target{Sql01, SharedDB}

// Scaled log chain settings and the workload's rate.
const (
	LogEvery   = 5 * time.Second
	ProofLag   = 90 * time.Second
	PITEvery   = time.Minute // the product's point-in-time proof (pit_proof.every)
	CommitRate = 20          // rows a second
)

// logYAML is the log keys of LogTarget's databases: entry.
// A DBA's log backup to a share the worker reaches is adopted into the
// chain (adopt_foreign_logs); one to a disk it does not reach breaks it.
// Its drills (recoverentry.go) recover it on verify01 to a point of the
// last 10 minutes of the proven window and run CHECKDB on the copy; their
// schedule is paused, triggered by the simulation only.
const logYAML = "    owns_backup_chain: true\n    log_backup: {every: 1m}\n    log_proof: standby\n    log_proof_lag: 15m\n    adopt_foreign_logs: true\n" +
	"    drill: {every: 24h, within: 10m, checkdb: true}\n"

// ScaleLogChain sets LogTarget's log_backup.every, log_proof_lag and
// pit_proof.every to the simulation's (below what the configuration accepts, set on the loaded
// configuration).
func ScaleLogChain(cfg *config.Config) {
	for i := range cfg.Databases {
		db := &cfg.Databases[i]
		if db.Instance == LogTarget.Instance && db.Name == LogTarget.Database && db.LogBackups() {
			db.LogBackup.Every, db.LogProofLag, db.PITProof.Every = LogEvery, ProofLag, PITEvery
		}
	}
}

// pitInstance names the checker's own instance (Fleet.pit).
const pitInstance = "pit01"

// startPit starts the checker's instance: the newest build on UTC, the
// backup servers' shares and a disk of its own.
func (f *Fleet) startPit() error {
	f.passwords[passwordEnv(pitInstance)] = secret("Sql-")
	sh := map[string]string{UNC(Bak01): f.dirs[Bak01], UNC(Bak02): f.dirs[Bak02], pitDisk: f.dirs["pit"]}
	for _, d := range []string{"data", "log"} {
		if err := os.MkdirAll(filepath.Join(f.dirs["pit"], d), 0o755); err != nil {
			return err
		}
	}
	dataDir := filepath.Join(f.Root, pitInstance)
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	in, err := sqlsim.New(sqlsim.Config{Name: pitInstance, DataDir: dataDir, Logins: map[string]string{"sa": f.passwords[passwordEnv(pitInstance)]},
		Shares: sh, ProductVersion: baseEstate.Build[0], TimeZone: time.UTC})
	if err != nil {
		return err
	}
	if err := in.Start(); err != nil {
		return err
	}
	f.pit = in
	return nil
}

// PitDB opens the harness's connection to the checker's instance.
func (f *Fleet) PitDB() (*sql.DB, error) {
	if f.pit == nil {
		return nil, fmt.Errorf("chaos: no %s", pitInstance)
	}
	db, err := sql.Open("sqlserver", f.pit.DSN("sa", f.passwords[passwordEnv(pitInstance)], "master"))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2)
	return db, nil
}
