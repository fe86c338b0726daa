package activities

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// AllocateSequence returns a new, never used, backup sequence number of the
// (instance, database): the larger of the allocator's next value (the seed's
// DBBackup.Sequence table in the database, created if absent, or the UTC
// time of the call) and one more than the highest number found on any
// backup server. The allocator lives in the source database, so restoring
// that database from an older backup, switching sequence modes or a worker
// whose clock is behind would otherwise hand out numbers already used; the
// table is moved past the highest number so the next cycle starts there.
func (a *Activities) AllocateSequence(ctx context.Context, in SequenceInput) (int64, error) {
	defer a.Cycle.keepAlive(ctx)()
	d := &a.Cycle
	db, err := d.database(in.Instance, in.Database)
	if err != nil {
		return 0, err
	}
	log := a.loggerFor(ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance))
	highest, unread := a.highestSequence(ctx, db)
	if len(unread) > 0 {
		// Their sets stay safe: Backup and CopyToRemote refuse a number
		// already used on the server they write to (SequenceInUse).
		log.Warn("backup servers not read for the highest sequence", zap.Strings("servers", unread), zap.Int64("highest_seen", highest))
	}
	if db.Sequence == config.SequenceUTC {
		n, err := utcSequence(d.now())
		if err != nil {
			return 0, err
		}
		if n <= highest {
			log.Warn("UTC sequence not above the highest used: taking the next free number",
				zap.Int64("utc", n), zap.Int64("highest", highest))
			n = highest + 1
		}
		return n, nil
	}
	inst, err := d.instance(db.Instance)
	if err != nil {
		return 0, err
	}
	setup, err := tsql.SequenceSetup(db.Name)
	if err != nil {
		return 0, nonRetryable(ErrInvalidConfig, err)
	}
	next, err := tsql.SequenceNext(db.Name)
	if err != nil {
		return 0, nonRetryable(ErrInvalidConfig, err)
	}
	raise, err := tsql.SequenceRaise(db.Name)
	if err != nil {
		return 0, nonRetryable(ErrInvalidConfig, err)
	}
	sqlDB, err := d.openSQL(ctx, inst, "master")
	if err != nil {
		return 0, err
	}
	defer sqlDB.Close()
	for _, stmt := range setup {
		if _, err := sqlDB.Run(ctx, "create the backup sequence table", stmt, nil); err != nil {
			return 0, sqlError(err)
		}
	}
	n, err := allocate(ctx, sqlDB.QueryValue, db, next)
	if err != nil {
		return 0, err
	}
	if n <= highest {
		// Write the floor back, so the table never hands out a used
		// number again; a concurrent allocation that already moved past
		// it leaves no row, and the plain increment is taken again.
		floor := highest + 1
		log.Warn("sequence table behind the backup servers (database restored from an older backup?): moving it past the highest used number",
			zap.Int64("table", n), zap.Int64("highest", highest))
		v, found, err := sqlDB.QueryValue(ctx, "raise the backup sequence number", raise, floor)
		if err != nil {
			return 0, sqlError(err)
		}
		if got, ok := v.(int64); found && ok && got == floor {
			n = floor
		} else if n, err = allocate(ctx, sqlDB.QueryValue, db, next); err != nil {
			return 0, err
		}
		if n <= highest {
			return 0, temporal.NewApplicationError(fmt.Sprintf(
				"sequence table of %s returned %d, not above the highest used number %d", db.ID(), n, highest), "SQLError")
		}
	}
	log.Info("sequence allocated", zap.Int64("seq", n), zap.Int64("highest_seen", highest))
	return n, nil
}

// allocate runs the table's increment once.
func allocate(ctx context.Context, query func(context.Context, string, string, ...any) (any, bool, error), db *config.Database, stmt string) (int64, error) {
	v, ok, err := query(ctx, "allocate a backup sequence number", stmt)
	if err != nil {
		return 0, sqlError(err)
	}
	n, isInt := v.(int64)
	if !ok || !isInt || n <= 0 {
		return 0, temporal.NewApplicationError(fmt.Sprintf("sequence table of %s returned %v, want a positive number", db.ID(), v), "SQLError")
	}
	return n, nil
}

// highestSequence is the highest set number of (instance, database) on
// every backup server the database uses (rotation and copy targets), from
// manifests and stripe file names alike, and the servers it could not read.
func (a *Activities) highestSequence(ctx context.Context, db *config.Database) (int64, []string) {
	var highest int64
	var unread []string
	for _, name := range sequenceServers(db) {
		srv, err := a.Cycle.server(name)
		if err != nil {
			unread = append(unread, name)
			continue
		}
		st, err := a.Cycle.openStorage(ctx, srv)
		if err != nil {
			unread = append(unread, name)
			continue
		}
		files, err := st.List(ctx, tsql.DBPrefix(db.Instance, db.Name))
		st.Close()
		if err != nil {
			unread = append(unread, name)
			continue
		}
		owner := tsql.OwnerOf(db.Instance, db.Name)
		for _, f := range files {
			p, ok := tsql.ParseStripeFileName(f.Name)
			if !ok {
				p, ok = tsql.ParseManifestFileName(f.Name)
			}
			if ok && p.Owner() == owner && p.Sequence > highest {
				highest = p.Sequence
			}
		}
	}
	return highest, unread
}

// sequenceServers are the rotation and every copy target of db, once each.
func sequenceServers(db *config.Database) []string {
	out := slices.Clone(db.BackupServers)
	for _, s := range db.BackupServers {
		if t := db.CopyTarget(s); t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// utcSequence is yyyymmddhhmmss of t in UTC.
func utcSequence(t time.Time) (int64, error) {
	var n int64
	_, err := fmt.Sscan(t.UTC().Format("20060102150405"), &n)
	return n, err
}
