package config

import (
	"fmt"
	"time"
)

// timeoutKeys are the policy's timeout overrides; left out, the cycle's
// plan derives them from the database's size.
var timeoutKeys = []string{"copy_deadline", "backup_timeout", "restore_timeout", "checkdb_timeout", "heartbeat_timeout"}

func (p *Policy) timeout(key string) *int64 {
	switch key {
	case "copy_deadline":
		return (*int64)(&p.CopyDeadline)
	case "backup_timeout":
		return (*int64)(&p.BackupTimeout)
	case "restore_timeout":
		return (*int64)(&p.RestoreTimeout)
	case "checkdb_timeout":
		return (*int64)(&p.CheckDBTimeout)
	case "heartbeat_timeout":
		return (*int64)(&p.HeartbeatTimeout)
	}
	panic("config: unknown timeout key " + key) // a programming error in this package
}

// minHeartbeat is the shortest heartbeat_timeout that does not warn: a
// heartbeat timeout ends the running attempt, so one shorter than the
// stalls a site sees (a Temporal restart, a network blip of a minute or
// two) turns each of them into a retry.
const minHeartbeat = 3 * time.Minute

// checkTimeouts checks the timeout overrides written at path.
func (d *decoder) checkTimeouts(p *Policy, path, owner string, only func(string) bool) {
	for _, k := range timeoutKeys {
		kp := join(path, k)
		if !only(k) || !d.given(kp) {
			continue
		}
		if *p.timeout(k) <= 0 {
			d.errf(d.line(kp), kp, "%s: %s must be a positive duration, e.g. 12h; leave it out to derive it from the database's size", owner, k)
			continue
		}
		if k == "heartbeat_timeout" && p.HeartbeatTimeout < minHeartbeat {
			d.warnf(d.line(kp), kp, "%s: heartbeat_timeout %s is under 3 minutes: a Temporal outage or a network stall longer than that ends "+
				"the running attempt (its BACKUP, RESTORE or CHECKDB runs on and the retry re-attaches, but every stall costs a retry "+
				"and the copy restarts from its checkpoint); 3m to 5m suits minutes-long stalls (4m when left out)",
				owner, p.HeartbeatTimeout)
		}
	}
}

// checkChains settles copy_only from owns_backup_chain. A full backup that
// is not COPY_ONLY becomes the differential base of the database: the
// differential backups another tool takes afterwards contain the changes
// since *this* backup and cannot be restored on top of that tool's own full
// backup ("A copy-only backup cannot serve as a differential base", Base of
// a Differential Backup; Copy-Only Backups,
// https://learn.microsoft.com/sql/relational-databases/backup-restore/copy-only-backups-sql-server).
// So backups are COPY_ONLY unless the configuration says this product owns
// the backup chain, and copy_only: false alone is refused.
func (d *decoder) checkChains(c *Config) {
	d.checkChain(&c.Defaults, "defaults", "defaults", true)
	for i := range c.Databases {
		path := fmt.Sprintf("databases[%d]", i)
		own := d.given(join(path, "copy_only")) || d.given(join(path, "owns_backup_chain"))
		d.checkChain(&c.Databases[i].Policy, path, labelled(path, c.Databases[i].Name), own)
	}
}

// checkChain sets p.CopyOnly; report is false for a database that sets
// neither key (an inherited contradiction is reported under defaults).
func (d *decoder) checkChain(p *Policy, path, owner string, report bool) {
	cp := join(path, "copy_only")
	given := d.given(cp)
	from := ""
	if !given && path != "defaults" && d.given("defaults.copy_only") {
		given, from = true, " (from defaults)"
	}
	switch {
	case p.OwnsBackupChain && given && p.CopyOnly:
		if report {
			d.errf(d.line(cp), cp, "%s: copy_only: true%s and owns_backup_chain: true contradict each other: owning the backup chain means full backups that are not COPY_ONLY; remove copy_only", owner, from)
		}
	case p.OwnsBackupChain:
		p.CopyOnly = false
	case given && !p.CopyOnly:
		if report {
			d.errf(d.line(cp), cp, "%s: copy_only: false%s makes every cycle's full backup the differential base of the database, so differential backups taken by another tool afterwards depend on this product's sets: set owns_backup_chain: true if this product owns the backup chain, else remove copy_only (COPY_ONLY backups leave the chain alone)", owner, from)
		}
	default:
		p.CopyOnly = true
	}
}
