package config

import (
	"fmt"
	"strings"
	"time"
)

// Log proof modes (log_proof).
const (
	// LogProofStandby keeps a standby copy on the verification instance,
	// restored from the newest verified full WITH STANDBY, and applies each
	// log backup as it arrives.
	LogProofStandby = "standby"
	// LogProofNightly restores, once a day, the previous verified full and
	// every log since to a scratch copy, recovers it, checks it and drops
	// it.
	LogProofNightly = "nightly"
)

// Log backup limits and defaults.
const (
	// MinLogBackupEvery: a BACKUP LOG writes to the error log and the
	// event log every time ("Transaction log backups": trace flag 3226
	// suppresses those entries); more often than a minute buys little.
	MinLogBackupEvery   = time.Minute
	DefaultStandbyLag   = 15 * time.Minute
	DefaultNightlyLag   = 26 * time.Hour
	DefaultPITEvery     = 24 * time.Hour
	MinPITEvery         = time.Hour
	DefaultStandbyName  = "{db}_standby"
	standbyPlaceholders = "{db}, {instance}"
)

// LogBackups reports whether the product takes the database's log backups.
func (p *Policy) LogBackups() bool { return p.LogBackup.Every > 0 }

// ProofMode is log_proof, LogProofNightly when log backups are on and it
// is not set; "" without log backups.
func (p *Policy) ProofMode() string {
	switch {
	case !p.LogBackups():
		return ""
	case p.LogProof == "":
		return LogProofNightly
	}
	return p.LogProof
}

// ProofLag is log_proof_lag, or its default for the proof mode.
func (p *Policy) ProofLag() time.Duration {
	switch {
	case p.LogProofLag > 0:
		return p.LogProofLag
	case p.ProofMode() == LogProofStandby:
		return DefaultStandbyLag
	}
	return DefaultNightlyLag
}

// PITEvery is how often the point-in-time proof runs; 0 without log
// backups.
func (p *Policy) PITEvery() time.Duration {
	switch {
	case !p.LogBackups():
		return 0
	case p.PITProof.Every > 0:
		return p.PITProof.Every
	}
	return DefaultPITEvery
}

// StandbyDatabaseName is the name of db's standby copy: standby_name with
// {db} and {instance} replaced.
func (db *Database) StandbyDatabaseName() string {
	return strings.NewReplacer("{db}", db.Name, "{instance}", db.Instance).Replace(db.StandbyName)
}

// logKeys are the keys checkLogs judges together.
var logKeys = []string{"log_backup", "log_backup.every", "log_proof", "log_proof_lag", "standby_name", "adopt_foreign_logs",
	"pit_proof", "pit_proof.every", "pit_proof.checkdb", "owns_backup_chain", "rpo", "verify_name"}

// checkLogs checks the log backup keys of defaults and of every database
// (a database is judged when it sets one of logKeys; what it inherits is
// judged under defaults).
func (d *decoder) checkLogs(c *Config) {
	d.checkLog(&c.Defaults, "defaults", "defaults")
	for i := range c.Databases {
		path := fmt.Sprintf("databases[%d]", i)
		for _, k := range logKeys {
			if d.given(join(path, k)) {
				db := &c.Databases[i]
				d.checkLog(&db.Policy, path, labelled(path, db.Name))
				if db.Name != "" && db.LogBackups() && db.ProofMode() == LogProofStandby && strings.EqualFold(db.StandbyDatabaseName(), db.Name) {
					kp := join(path, "standby_name")
					d.errf(d.line(kp), kp, "%s: standby_name %q names the standby copy like the database itself: use e.g. %q", labelled(path, db.Name), db.StandbyName, DefaultStandbyName)
				}
				break
			}
		}
		// A group's database gets no log chain (each replica's msdb holds
		// its own log backup history, which the chain reads): refused here
		// rather than a chain that fails every night.
		if db := &c.Databases[i]; db.LogBackups() {
			if g, ok := c.AvailabilityGroup(db.Instance); ok {
				l, kp := d.everyLine(path, "log_backup")
				d.errf(l, kp, "%s: log_backup: %s is a database of availability group %s, whose log backups this product does not take: "+
					"keep the group's own log backup job and set log_backup: {every: 0s} for it (its verified full backups go on)",
					labelled(path, db.Name), db.Name, g.Name)
			}
		}
	}
}

// everyLine is where an error about a section with an every: key (log_backup,
// diff_backup) of the database entry at path goes: the section when the
// entry gives it, else the entry (the value came from defaults:).
func (d *decoder) everyLine(path, key string) (int, string) {
	kp := join(path, key)
	if !d.given(kp) && !d.given(join(kp, "every")) {
		return d.line(path), kp
	}
	return d.line(kp), kp
}

// checkLog checks one policy's log keys. Errors go to the key that is
// wrong, or to the key that needs the other one.
func (d *decoder) checkLog(p *Policy, path, owner string) {
	at := func(k string) (int, string) { return d.line(join(path, k)), join(path, k) }
	every := p.LogBackup.Every
	switch {
	case every < 0 || every > 0 && every < MinLogBackupEvery:
		l, kp := at("log_backup.every")
		d.errf(l, kp, "%s: log_backup.every %s is below %s: use 1m or more (or 0 for no log backups)", owner, every, MinLogBackupEvery)
	case every > 0 && p.RPO > 0 && every > p.RPO:
		l, kp := at("log_backup.every")
		d.errf(l, kp, "%s: log_backup.every %s is longer than rpo %s: a log backup at least once per rpo is needed to meet it; lower every or raise rpo", owner, every, p.RPO)
	}
	if every > 0 && !p.OwnsBackupChain {
		l, kp := at("log_backup")
		d.errf(l, kp, "%s: log_backup takes the database's log backups, which truncate its log and make the log chain this product's: "+
			"set owns_backup_chain: true (and stop other tools' log backups of it), or remove log_backup", owner)
	}
	switch p.LogProof {
	case "", LogProofStandby, LogProofNightly:
		if p.LogProof != "" && every <= 0 {
			l, kp := at("log_proof")
			d.errf(l, kp, "%s: log_proof %s needs log backups: set log_backup: {every: 1m}, or remove log_proof", owner, p.LogProof)
		}
	default:
		l, kp := at("log_proof")
		d.errf(l, kp, "%s: log_proof %q: use standby (a standby copy takes each log as it comes) or nightly (once a day, the previous full and every log since)", owner, p.LogProof)
	}
	switch lag := p.LogProofLag; {
	case lag < 0:
		l, kp := at("log_proof_lag")
		d.errf(l, kp, "%s: log_proof_lag must not be negative: e.g. 15m (standby) or 26h (nightly), or leave it out", owner)
	case lag > 0 && every <= 0:
		l, kp := at("log_proof_lag")
		d.errf(l, kp, "%s: log_proof_lag needs log backups: set log_backup: {every: 1m}, or remove log_proof_lag", owner)
	case lag > 0 && lag < every:
		l, kp := at("log_proof_lag")
		d.errf(l, kp, "%s: log_proof_lag %s is shorter than log_backup.every %s: no log could be proven in time; raise log_proof_lag", owner, lag, every)
	case lag > 0 && p.ProofMode() == LogProofNightly && lag < 24*time.Hour:
		l, kp := at("log_proof_lag")
		d.errf(l, kp, "%s: log_proof_lag %s is under a day, but log_proof nightly proves the logs once a day: use 26h, or log_proof: standby", owner, lag)
	}
	if p.AdoptForeignLogs && every <= 0 {
		l, kp := at("adopt_foreign_logs")
		d.errf(l, kp, "%s: adopt_foreign_logs needs log backups: set log_backup: {every: 1m}, or remove adopt_foreign_logs", owner)
	}
	if p.PITProof.Every != 0 || p.PITProof.CheckDB {
		l, kp := at("pit_proof")
		switch {
		case every <= 0:
			d.errf(l, kp, "%s: pit_proof needs log backups: set log_backup: {every: 1m}, or remove pit_proof", owner)
		case p.PITProof.Every < 0 || p.PITProof.Every > 0 && p.PITProof.Every < MinPITEvery:
			d.errf(d.line(join(path, "pit_proof.every")), join(path, "pit_proof.every"), "%s: pit_proof.every %s is below %s: each proof restores the full and its logs; use e.g. 24h", owner, p.PITProof.Every, MinPITEvery)
		}
	}
	d.checkStandbyName(p, path, owner)
}

// checkStandbyName holds standby_name to verify_name's rules (a fixed
// prefix or suffix, {db} in defaults) and keeps it apart from verify_name:
// the standby copy lives beside the cycle's copy on the same instance.
func (d *decoder) checkStandbyName(p *Policy, path, owner string) {
	if path != "defaults" && !d.given(join(path, "standby_name")) && !d.given(join(path, "verify_name")) {
		return
	}
	l, kp := d.line(join(path, "standby_name")), join(path, "standby_name")
	rest := strings.NewReplacer("{db}", "", "{instance}", "").Replace(p.StandbyName)
	switch {
	case strings.ContainsAny(rest, "{}"):
		d.errf(l, kp, "%s: standby_name %q: only %s are replaced", owner, p.StandbyName, standbyPlaceholders)
	case strings.ContainsRune(rest, 0):
		d.errf(l, kp, "%s: standby_name contains a NUL byte", owner)
	case strings.TrimSpace(rest) == "":
		d.errf(l, kp, "%s: standby_name %q has no fixed prefix or suffix, so the standby copy could be named like a production database: add one, e.g. %q", owner, p.StandbyName, DefaultStandbyName)
	case path == "defaults" && !strings.Contains(p.StandbyName, "{db}"):
		d.errf(l, kp, "%s: standby_name %q does not contain {db}, so every database's standby copy would get one name: use e.g. %q", owner, p.StandbyName, DefaultStandbyName)
	case p.StandbyName == p.VerifyName:
		d.errf(l, kp, "%s: standby_name %q is verify_name: the standby copy and the cycle's copy live side by side on the verification instance and need names of their own; use e.g. %q", owner, p.StandbyName, DefaultStandbyName)
	}
}
