package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Proof that the verification database holds this set (invariant
// I2): msdb's restore history names the backup set every restore came from,
// by GUID. Restore, CheckDB and SanityChecks compare it with the GUID the
// set's manifest recorded from RESTORE HEADERONLY, so a copy restored from
// another set — another cycle's, another entry point's, a DBA's — never
// passes for this one.

// createSlack is how much later than its restore_date a restored database's
// create_date may be: restore_date is the start of the RESTORE (Microsoft
// Learn, msdb.dbo.restorehistory), create_date when that RESTORE created the
// database, moments later.
const createSlack = 2 * time.Second

// createWindow is how late after its restore started the copy of set m may
// have been created: createSlack plus the time the restore took, as the
// manifest recorded it. Whether SQL Server stamps create_date when a
// RESTORE begins or once it has allocated the files is not documented; a
// multi-terabyte restore without instant file initialization takes minutes
// to allocate, and its own copy must not be taken for another database.
// (A database created after the restore ended is still caught: nothing can
// create one of that name while the restore holds it.)
func createWindow(m *catalog.Manifest) time.Duration {
	w := createSlack
	if t, ok := m.Timings[catalog.StepRestore]; ok && t.DurationSeconds > 0 {
		w += time.Duration(t.DurationSeconds * float64(time.Second))
	}
	return w
}

// RestoreHeartbeat is the Restore activity's heartbeat details: its progress,
// and StartedInto, "restore started into X", recorded before the RESTORE is
// sent. A retry that finds X RESTORING knows it is its own restore cut short
// (the instance or the worker died) and may replace it.
type RestoreHeartbeat struct {
	StepProgress
	StartedInto string `json:"started_into,omitempty"`
}

// restoreStartedInto is the database an earlier attempt of this activity
// started a RESTORE into, "" when none did.
func restoreStartedInto(ctx context.Context) string {
	if !activity.IsActivity(ctx) || !activity.HasHeartbeatDetails(ctx) {
		return ""
	}
	var hb RestoreHeartbeat
	if err := activity.GetHeartbeatDetails(ctx, &hb); err != nil {
		return ""
	}
	return hb.StartedInto
}

// loadSet reads the set's manifest from srv.
func (a *Activities) loadSet(ctx context.Context, srv *config.BackupServer, db *config.Database, seq int64) (*catalog.Manifest, error) {
	st, err := a.Cycle.openStorage(ctx, srv)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	m, err := catalog.Load(ctx, catalog.StorageFS{Storage: st}, setsOf(db), seq)
	if err != nil {
		return nil, storageError(srv.Name, err)
	}
	return m, nil
}

// setToProve loads the set's manifest from srv and the backup set GUID its
// restore must show.
func (a *Activities) setToProve(ctx context.Context, srv *config.BackupServer, db *config.Database, seq int64) (*catalog.Manifest, string, error) {
	m, err := a.loadSet(ctx, srv, db, seq)
	if err != nil {
		return nil, "", err
	}
	want, err := expectedSetGUID(m, db, seq, srv.Name)
	if err != nil {
		return nil, "", err
	}
	return m, want, nil
}

// expectedSetGUID is the backup set GUID the set's manifest recorded; a set
// without one cannot be proven restored.
func expectedSetGUID(m *catalog.Manifest, db *config.Database, seq int64, server string) (string, error) {
	if m.Header == nil || m.Header.BackupSetGUID == "" {
		return "", nonRetryable(ErrRestoreMismatch, fmt.Errorf(
			"manifest of set %d of %s on %s records no backup set GUID: no restore can be proven to be of this set", seq, db.ID(), server))
	}
	return m.Header.BackupSetGUID, nil
}

// sameGUID compares GUID texts as SQL Server does (case-insensitively).
func sameGUID(a, b string) bool {
	return strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
}

// lastRestoreProof reads the newest full restore into verifyDB (nil: none).
func lastRestoreProof(ctx context.Context, sqlDB *mssql.DB, verifyDB string) (*mssql.RestoreProof, error) {
	q, args, err := tsql.RestoreProof(verifyDB)
	if err != nil {
		return nil, nonRetryable(ErrInvalidConfig, err)
	}
	p, err := sqlDB.LastRestoreProof(ctx, q, args...)
	if err != nil {
		return nil, sqlError(err)
	}
	return p, nil
}

// databaseState reads verifyDB's row of sys.databases (nil: no database).
func databaseState(ctx context.Context, sqlDB *mssql.DB, verifyDB string) (*mssql.DatabaseState, error) {
	q, args, err := tsql.DatabaseState(verifyDB)
	if err != nil {
		return nil, nonRetryable(ErrInvalidConfig, err)
	}
	st, err := sqlDB.DatabaseState(ctx, q, args...)
	if err != nil {
		return nil, sqlError(err)
	}
	return st, nil
}

// proofRecord is the manifest's record of a proven restore: msdb's
// restore_date as the verification server reported it (its local time; SQL
// Server's datetime has no zone), that server's offset from UTC read with
// it, and checkedAt on the worker's clock.
func proofRecord(instance, verifyDB string, p *mssql.RestoreProof, offsetMinutes int, checkedAt time.Time) *catalog.Proof {
	r := &catalog.Proof{VerifyInstance: instance, VerifyDatabase: verifyDB, RestoreHistoryID: p.HistoryID,
		BackupSetGUID: p.BackupSetGUID, RestoredAt: p.RestoreDate, CheckedAt: checkedAt}
	r.SetUTCOffset(offsetMinutes)
	return r
}

// restoreMismatch is the non-retryable RestoreMismatch naming the database,
// the expected and the found backup set GUID.
func restoreMismatch(verifyDB, instance string, seq int64, db *config.Database, want, found, why string) error {
	if found == "" {
		found = "none"
	}
	return nonRetryable(ErrRestoreMismatch, fmt.Errorf(
		"verification database %q on %s was not restored from set %d of %s: expected backup set %s, found %s (%s); nothing of it counts for this set",
		verifyDB, instance, seq, db.ID(), want, found, why))
}

// proveRestored checks that verifyDB on instance is, right now, the copy
// restored from the backup set want: its newest restore is of that set, it
// is ONLINE, and it was not created after that restore (dropped and created
// again under the same name). A copy that is gone is retryable
// SQLHostUnreachable (the workflow restores again, as when the instance lost
// it); anything else is RestoreMismatch.
func proveRestored(ctx context.Context, sqlDB *mssql.DB, instance string, db *config.Database, seq int64, verifyDB, want string,
	window time.Duration) (*mssql.RestoreProof, error) {
	st, err := databaseState(ctx, sqlDB, verifyDB)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, retryable(ErrSQLHostUnreachable, fmt.Errorf("restored copy %s is gone from %s: restore it again", verifyDB, instance))
	}
	p, err := lastRestoreProof(ctx, sqlDB, verifyDB)
	if err != nil {
		return nil, err
	}
	switch {
	case p == nil:
		return nil, restoreMismatch(verifyDB, instance, seq, db, want, "", "msdb has no restore into it")
	case !sameGUID(p.BackupSetGUID, want):
		return nil, restoreMismatch(verifyDB, instance, seq, db, want, p.BackupSetGUID,
			fmt.Sprintf("restore_history_id %d, backup set %q", p.HistoryID, p.BackupSetName))
	case st.State != "ONLINE":
		return nil, restoreMismatch(verifyDB, instance, seq, db, want, p.BackupSetGUID,
			fmt.Sprintf("it is %s: another restore into it has started", st.State))
	case st.Created.After(p.RestoreDate.Add(window)):
		return nil, restoreMismatch(verifyDB, instance, seq, db, want, p.BackupSetGUID,
			fmt.Sprintf("it was created at %s, after its last restore at %s", st.Created.Format(time.DateTime), p.RestoreDate.Format(time.DateTime)))
	}
	return p, nil
}

// stillRestored checks, after a step ran on the copy, that nothing restored
// it again meanwhile: the same restore (id) of the same set.
func stillRestored(ctx context.Context, sqlDB *mssql.DB, instance string, db *config.Database, seq int64, verifyDB, want string,
	window time.Duration, before *mssql.RestoreProof, step string) (*mssql.RestoreProof, error) {
	after, err := proveRestored(ctx, sqlDB, instance, db, seq, verifyDB, want, window)
	if err != nil {
		return nil, err
	}
	if after.HistoryID != before.HistoryID {
		return nil, restoreMismatch(verifyDB, instance, seq, db, want, after.BackupSetGUID,
			fmt.Sprintf("it was restored again (restore_history_id %d, was %d) while %s ran", after.HistoryID, before.HistoryID, step))
	}
	return after, nil
}

// checkReplaceable is the guard before RESTORE ... WITH REPLACE: an
// existing verifyDB may only be replaced when backupcycle restored it — its
// newest restore is of a backup set named by this product (tsql.BackupSetName)
// and it was not created after that restore — or when it is RESTORING from a
// restore this activity's earlier attempt started (startedByUs). Anything
// else is VerifyDatabaseInUse, and nothing is replaced.
func checkReplaceable(ctx context.Context, sqlDB *mssql.DB, instance, verifyDB string, startedByUs bool) error {
	return checkOwnCopy(ctx, sqlDB, instance, verifyDB, startedByUs, "replaced")
}

// checkOwnCopy is checkReplaceable for any destructive action on verifyDB
// ("replaced", "dropped"): nil when it does not exist or backupcycle
// restored it.
func checkOwnCopy(ctx context.Context, sqlDB *mssql.DB, instance, verifyDB string, startedByUs bool, action string) error {
	st, err := databaseState(ctx, sqlDB, verifyDB)
	if err != nil || st == nil {
		return err
	}
	if st.State == "RESTORING" && startedByUs {
		return nil
	}
	p, err := lastRestoreProof(ctx, sqlDB, verifyDB)
	if err != nil {
		return err
	}
	// A RESTORE that failed or was cut short (corrupt media, a crash, an
	// instance down past the retries) leaves the database RESTORING and
	// created anew, with no new restore-history row. When the last restore
	// that did finish into this name was backupcycle's, that is our own
	// unfinished copy: nobody can use a RESTORING database, and refusing it
	// would stop every later cycle. (Seen in the fault simulation.)
	if st.State == "RESTORING" && p != nil && tsql.IsBackupSetName(p.BackupSetName) {
		return nil
	}
	var why string
	switch {
	case p == nil:
		why = fmt.Sprintf("%s, created %s, never restored", st.State, st.Created.Format(time.DateTime))
	case !tsql.IsBackupSetName(p.BackupSetName):
		why = fmt.Sprintf("%s, last restored from backup set %q (%s)", st.State, p.BackupSetName, p.BackupSetGUID)
	case st.Created.After(p.RestoreDate.Add(createSlack)):
		why = fmt.Sprintf("%s, created %s, after backupcycle's last restore at %s", st.State, st.Created.Format(time.DateTime),
			p.RestoreDate.Format(time.DateTime))
	default:
		return nil
	}
	return nonRetryable(ErrVerifyDatabaseInUse, fmt.Errorf(
		"database %q on %s exists and was not restored by backupcycle: nothing was %s; drop or rename it, or set verify_name (found: %s)",
		verifyDB, instance, action, why))
}
