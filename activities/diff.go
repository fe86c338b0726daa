package activities

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Differential backups (diff_backup): a BackupCycle with Differential
// takes BACKUP DATABASE ... WITH DIFFERENTIAL, CHECKSUM on the newest
// verified full, writes it to the servers of that base, copies it like a
// full and proves it on top of its base on the verification instance
// (restorediff.go). SQL Server's differential base is "the most recent
// full backup" that is not COPY_ONLY ("Differential Backups (SQL Server)",
// https://learn.microsoft.com/sql/relational-databases/backup-restore/differential-backups-sql-server;
// "a copy-only backup cannot serve as a differential base", "Copy-Only
// Backups"): only such a full of the product's, verified, is a base, and
// only while no later full backup moved the base on.

// SkipNoDifferentialBase is the reason a differential cycle ends skipped
// when no differential can be proven now (Plan.NoDifferentialBase): no
// verified full to base it on, or a later full backup is the base.
const SkipNoDifferentialBase = "no-differential-base"

// diffBase is the base a differential of d is taken on, from the manifests
// of its servers: the newest verified full that is not COPY_ONLY, and the
// servers holding it; why says, when there is none to take it on now, why
// not (and what makes one).
func diffBase(d catalog.DB, all []*catalog.Manifest) (base *catalog.Manifest, holders []string, why string) {
	conventional := func(m *catalog.Manifest) bool {
		return d.Owns(m) && m.Trusted() && !m.IsDifferential() && m.Header != nil && !m.Options.CopyOnly
	}
	for _, m := range all {
		if conventional(m) && m.Verified() && m.Header.BackupSetGUID != "" && (base == nil || m.Newer(base)) {
			base = m
		}
	}
	if base == nil {
		return nil, nil, fmt.Sprintf("no verified full backup of %s that is not COPY_ONLY on its backup servers: a differential is taken only "+
			"on a verified full, its base; the next full cycle makes one", d)
	}
	for _, m := range all {
		switch {
		case m.Sequence == base.Sequence && d.Owns(m) && m.Verified() && m.Trusted():
			for _, s := range m.Servers {
				if !slices.Contains(holders, s) {
					holders = append(holders, s)
				}
			}
		case conventional(m) && m.Newer(base):
			// Its BACKUP completed (it has a header): SQL Server made it
			// the base, whatever became of the set since.
			next := "the next full cycle"
			if !m.State.Terminal() {
				next = fmt.Sprintf("`starter run --database %s --resume %d`, or %s", d.Database, m.Sequence, next)
			}
			return nil, nil, fmt.Sprintf("set %d of %s, a full backup taken after the newest verified one (set %d), is %s: it is the "+
				"database's differential base now, and a differential on it is proven only once a full is verified again (%s)",
				m.Sequence, d, base.Sequence, m.State, next)
		case d.Owns(m) && m.Trusted() && m.IsDifferential() && m.Differential.Sequence == base.Sequence &&
			m.Failure != nil && m.Failure.Evidence == catalog.EvidenceForeignBase:
			return nil, nil, fmt.Sprintf("differential set %d of %s found the differential base moved past set %d to a full backup this "+
				"product did not take (%s): differentials wait for the next verified full (the next full cycle)", m.Sequence, d,
				base.Sequence, m.Failure.Reason)
		}
	}
	return base, holders, ""
}

// diffRotation is where a differential on base is written: the servers of
// db's rotation whose copy target holds the base (the verification
// instance restores the base and the differential from that target), the
// base's primary first, servers known unreachable last.
func diffRotation(db *config.Database, base *catalog.Manifest, holders []string, unreachable map[string]bool) ([]string, string) {
	var ok []string
	for _, s := range db.BackupServers {
		if t := db.CopyTarget(s); t != "" && slices.Contains(holders, s) && slices.Contains(holders, t) {
			ok = append(ok, s)
		}
	}
	if len(ok) == 0 {
		return nil, fmt.Sprintf("set %d of %s, the newest verified full, is held on %s, and no server of the rotation %v with its copy target "+
			"holds it: a differential is written beside its base and proven from its copy", base.Sequence, db.ID(),
			strings.Join(holders, ", "), db.BackupServers)
	}
	slices.SortStableFunc(ok, func(a, b string) int {
		rank := func(s string) int {
			switch {
			case unreachable[s]:
				return 2
			case s == base.PrimaryServer:
				return 0
			}
			return 1
		}
		return rank(a) - rank(b)
	})
	return ok, ""
}

// differentialAllowed refuses a differential the configuration does not
// take (the plan's input says what to take, the configuration whether).
func differentialAllowed(cfg *config.Config, db *config.Database) error {
	if !db.DiffBackups() || db.CopyOnly {
		return nonRetryable(ErrInvalidConfig, fmt.Errorf(
			"a differential of %s was asked for, but the configuration takes none (diff_backup: {every: 6h} with owns_backup_chain: true)", db.ID()))
	}
	if g, ok := cfg.AvailabilityGroup(db.Instance); ok {
		return nonRetryable(ErrInvalidConfig, fmt.Errorf(
			"%s is a database of availability group %s, which may be backed up COPY_ONLY on a secondary where SQL Server takes no "+
				"differential backups: set diff_backup: {every: 0s} for it", db.ID(), g.Name))
	}
	return nil
}

// foreignBase says which full backup a differential's header names as its
// base (guid) instead of the planned one: a set of the database the
// product holds (not verified), else what the source's msdb knows of it.
func (a *Activities) foreignBase(ctx context.Context, sqlDB *mssql.DB, db *config.Database, guid string) string {
	for _, name := range db.BackupServers {
		l, err := a.listManifests(ctx, name, db)
		if err != nil {
			continue
		}
		for _, m := range l.Manifests {
			if m.Trusted() && m.Header != nil && sameGUID(m.Header.BackupSetGUID, guid) {
				return fmt.Sprintf("backup set %s, the product's set %d of %s, which is %s on %s", guid, m.Sequence, db.ID(), m.State, name)
			}
		}
	}
	q, args, err := tsql.BackupSetByGUID(guid)
	if err != nil {
		return "backup set " + guid
	}
	r, found, err := sqlDB.BackupSet(ctx, q, args...)
	if err != nil || !found {
		return fmt.Sprintf("backup set %s, which the source's msdb does not show (its history deleted, or no SELECT on msdb.dbo.backupset)", guid)
	}
	return fmt.Sprintf("backup set %s, a full backup by %s finished %s (source's clock) to %s", guid, tsql.Printable(r.User),
		r.Finish.Format(time.DateTime), tsql.Printable(strings.Join(r.Devices, ", ")))
}
