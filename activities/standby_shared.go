package activities

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The own-copy guard and restore plumbing the log proof (package
// activities/logs) shares with the cycle: the standby copy and the proofs'
// scratch copy are judged by the same rules as the cycle's copy
// (owncopy.go), against the records the proof steps keep in the database's
// proof record (catalog.LogProofRecord) instead of in a set's manifest.

// GuardOwnCopy is the guard before name on instance is replaced or dropped
// (action): the database's state (nil when there is none) when one of recs
// (newest first) shows it is a copy the product restored, else
// VerifyDatabaseInUse and nothing is done. afterLogs: the copy takes log
// backups, so a RESTORE LOG cut short leaves it RESTORING after the
// RESTORE DATABASE its record confirmed; it is still the product's when
// that record shows it (same database id, its newest full restore the
// recorded one).
func GuardOwnCopy(ctx context.Context, sqlDB *mssql.DB, instance, name, action string, afterLogs bool, recs ...*catalog.VerifyCopy) (*mssql.DatabaseState, error) {
	st, err := databaseState(ctx, sqlDB, name)
	if err != nil || st == nil {
		return nil, err
	}
	last, err := lastRestoreProof(ctx, sqlDB, name)
	if err != nil {
		return nil, err
	}
	var cr []copyRecord
	for _, v := range recs {
		if v != nil && v.On(instance, name) {
			cr = append(cr, copyRecord{vc: v})
		}
	}
	_, why := ownCopy(st, last, cr)
	if why != "" && afterLogs && st.State == "RESTORING" && st.OwnerSID != "" && st.OwnerSID == st.LoginSID {
		for _, r := range cr {
			if r.vc.Confirmed() && finishedBy(r.vc, st, last) {
				why = ""
				break
			}
		}
	}
	if why == "" {
		return st, nil
	}
	return nil, nonRetryable(ErrVerifyDatabaseInUse, fmt.Errorf(
		"database %q on %s exists and was not restored by backupcycle: nothing was %s; drop or rename it, or choose another name in the configuration (found: %s)",
		name, instance, action, why))
}

// CopyIntent is the own-copy record written before a RESTORE of backup
// set guid into name on instance, st the database the name holds (nil for
// none).
func CopyIntent(a *Activities, ctx context.Context, sqlDB *mssql.DB, instance, name, guid string, st *mssql.DatabaseState) (*catalog.VerifyCopy, error) {
	return copyIntent(ctx, sqlDB, instance, name, guid, st, a.Cycle.now())
}

// ConfirmCopy records in v what msdb and sys.databases say after the
// RESTORE DATABASE of v's set into its database: its restore-history row,
// the id and create_date of the database it produced and the instance's
// clock. It fails
// when the newest full restore into the database is not of v's set.
func ConfirmCopy(ctx context.Context, sqlDB *mssql.DB, v *catalog.VerifyCopy) error {
	last, err := lastRestoreProof(ctx, sqlDB, v.VerifyDatabase)
	if err != nil {
		return err
	}
	if last == nil || !sameGUID(last.BackupSetGUID, v.BackupSetGUID) {
		found := "none"
		if last != nil {
			found = last.BackupSetGUID
		}
		return nonRetryable(ErrRestoreMismatch, fmt.Errorf("%s on %s: the newest restore is of backup set %s, not %s",
			v.VerifyDatabase, v.VerifyInstance, found, v.BackupSetGUID))
	}
	st, err := databaseState(ctx, sqlDB, v.VerifyDatabase)
	if err != nil {
		return err
	}
	if st == nil {
		return retryable(ErrSQLHostUnreachable, fmt.Errorf("%s is gone from %s after its RESTORE", v.VerifyDatabase, v.VerifyInstance))
	}
	v.RestoreHistoryID, v.DatabaseID, v.DatabaseCreated, v.ConfirmedAt = last.HistoryID, st.ID, st.Created, st.Now
	return nil
}

// RestoreMoves are the MOVE clauses that restore the set on disks as name
// into the server's restore directories (RESTORE FILELISTONLY read on the
// verification instance), unreadable files classified as the cycle's
// restore does.
func RestoreMoves(ctx context.Context, sqlDB *mssql.DB, srv *config.BackupServer, name string, disks []string) ([]tsql.Move, error) {
	fq, err := tsql.RestoreFileListOnly(disks)
	if err != nil {
		return nil, nonRetryable(ErrInvalidConfig, err)
	}
	files, err := sqlDB.FileListOnly(ctx, fq)
	if err != nil {
		return nil, sqlError(err)
	}
	return movesOf(name, srv, files)
}

// DropOwnCopy drops name on instance when recs show it is the product's
// (GuardOwnCopy); nothing when there is no such database.
func DropOwnCopy(a *Activities, ctx context.Context, sqlDB *mssql.DB, instance, name string, afterLogs bool, log *zap.Logger, recs ...*catalog.VerifyCopy) error {
	st, err := GuardOwnCopy(ctx, sqlDB, instance, name, "dropped", afterLogs, recs...)
	if err != nil || st == nil {
		return err
	}
	return DropCopy(ctx, sqlDB, instance, name, st, log)
}

// DropCopy drops name on instance (st: its state, the caller's guard
// having shown it is the product's), logging the sessions an online copy
// had: the drop forces them out (tsql.DropDatabase).
func DropCopy(ctx context.Context, sqlDB *mssql.DB, instance, name string, st *mssql.DatabaseState, log *zap.Logger) error {
	stmt, err := tsql.DropDatabase(name)
	if err != nil {
		return nonRetryable(ErrInvalidConfig, err)
	}
	var sessions []mssql.Session
	if st.State == "ONLINE" {
		sessions = sessionsIn(ctx, sqlDB, instance, name, log)
	}
	if _, err := sqlDB.Run(ctx, "DROP DATABASE", stmt, nil); err != nil {
		return sqlError(err)
	}
	logDisconnected(log, sessions, instance, name, "dropped")
	return nil
}
