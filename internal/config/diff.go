package config

import (
	"fmt"
	"time"
)

// DiffBackup is `diff_backup:`: the product's own differential backups of
// the database, taken, copied and proven like its full backups (each one
// restored on top of its base on the verification instance). A
// differential holds the changes since the database's differential base,
// "the most recent full backup" that is not COPY_ONLY ("Differential
// Backups (SQL Server)",
// https://learn.microsoft.com/sql/relational-databases/backup-restore/differential-backups-sql-server;
// "a copy-only backup cannot serve as a differential base", "Copy-Only
// Backups"), so only a database whose full backups are this product's
// (owns_backup_chain) can have its differentials proven on them.
type DiffBackup struct {
	Every time.Duration `yaml:"every"` // a differential this often; 0: none
}

// MinDiffBackupEvery: each differential is restored on top of its whole
// base to be proven; more often than this the verification instance does
// little else.
const MinDiffBackupEvery = 15 * time.Minute

// DiffBackups reports whether the product takes the database's
// differential backups.
func (p *Policy) DiffBackups() bool { return p.DiffBackup.Every > 0 }

// diffKeys are the keys checkDiffs judges together.
var diffKeys = []string{"diff_backup", "diff_backup.every", "owns_backup_chain", "copy_only"}

// checkDiffs checks the differential backup keys of defaults and of every
// database (a database is judged when it sets one of diffKeys; what it
// inherits is judged under defaults), and refuses them for a database of
// an availability group.
func (d *decoder) checkDiffs(c *Config) {
	d.checkDiff(&c.Defaults, "defaults", "defaults")
	for i := range c.Databases {
		path := fmt.Sprintf("databases[%d]", i)
		db := &c.Databases[i]
		for _, k := range diffKeys {
			if d.given(join(path, k)) {
				d.checkDiff(&db.Policy, path, labelled(path, db.Name))
				break
			}
		}
		// A group's database may back up on a secondary, which takes
		// only COPY_ONLY full backups ("BACKUP DATABASE supports only
		// copy-only full backups of databases, files, or filegroups when
		// it's executed on secondary replicas", Offload supported backups
		// to secondary replicas of an availability group): no
		// differential there, and none whose base a fail-over moves.
		if db.DiffBackups() {
			if g, ok := c.AvailabilityGroup(db.Instance); ok {
				l, kp := d.everyLine(path, "diff_backup")
				d.errf(l, kp, "%s: diff_backup: %s is a database of availability group %s, which may be backed up COPY_ONLY on a secondary "+
					"where SQL Server takes no differential backups: set diff_backup: {every: 0s} for it (its verified full backups go on)",
					labelled(path, db.Name), db.Name, g.Name)
			}
		}
	}
}

// checkDiff checks one policy's differential backup keys; errors go to the
// key that is wrong, or to the key that needs the other one.
func (d *decoder) checkDiff(p *Policy, path, owner string) {
	at := func(k string) (int, string) {
		kp := join(path, k)
		if !d.given(kp) {
			kp = join(path, "diff_backup")
		}
		if !d.given(kp) {
			return d.line(path), kp
		}
		return d.line(kp), kp
	}
	every := p.DiffBackup.Every
	if every < 0 || every > 0 && every < MinDiffBackupEvery {
		l, kp := at("diff_backup.every")
		d.errf(l, kp, "%s: diff_backup.every %s is below %s: each differential is proven by restoring its base and it on the verification instance; use e.g. 6h (or 0s for none)",
			owner, every, MinDiffBackupEvery)
	}
	if every > 0 && !p.OwnsBackupChain {
		l, kp := at("diff_backup")
		d.errf(l, kp, "%s: diff_backup takes differential backups, which restore only on top of the database's newest full backup that is not COPY_ONLY: "+
			"set owns_backup_chain: true (this product's full backups become that base; stop other tools' full backups of it), or remove diff_backup", owner)
	}
}
