package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

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

// clockSlack absorbs datetime's rounding (to 1/300 s) between two values
// one verification instance reported: GETDATE() as the product read it and
// a create_date or restore_date SQL Server stamped.
const clockSlack = time.Second

// legacySlack is how much later than its restore_date a copy restored
// before VerifyCopy was recorded may have been created (see createWindow).
const legacySlack = 2 * time.Second

// createWindow is how late after its restore started the copy of set m,
// restored before the manifest recorded its VerifyCopy, may have been
// created: legacySlack plus the time the restore took, as the manifest
// recorded it. Whether SQL Server stamps create_date when a RESTORE begins
// or once it has allocated the files is not documented; a set recorded
// with its VerifyCopy is judged by the instance's own clock before and
// after its RESTORE instead, whenever it stamped it.
func createWindow(m *catalog.Manifest) time.Duration {
	w := legacySlack
	if t, ok := m.Timings[catalog.StepRestore]; ok && t.DurationSeconds > 0 {
		w += time.Duration(t.DurationSeconds * float64(time.Second))
	}
	return w
}

// RestoreHeartbeat is the Restore activity's heartbeat details: its progress,
// and StartedInto, "restore started into X", sent before the RESTORE is.
// It is for people reading the run: what an earlier attempt left is judged
// from the set's VerifyCopy and what the verification instance says, never
// from heartbeat details (anything that can complete the activity's task
// token can write them).
type RestoreHeartbeat struct {
	StepProgress
	StartedInto string `json:"started_into,omitempty"`
}

// loadSet reads the set's manifest from srv: one that is not
// authenticated says nothing the cycle may restore, check or prove by.
func (a *Activities) loadSet(ctx context.Context, srv *config.BackupServer, db *config.Database, seq int64) (*catalog.Manifest, error) {
	st, err := a.Cycle.openStorage(ctx, srv)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	m, err := a.Cycle.loadManifest(ctx, st, db, seq)
	if err != nil {
		return nil, storageError(srv.Name, err)
	}
	if !m.Trusted() {
		return nil, untrusted(m, srv.Name)
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
	if err := remoteHolder(m, db, seq, srv.Name); err != nil {
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
	return restoreProofBy(ctx, sqlDB, verifyDB, tsql.RestoreProof)
}

// lastDiffRestoreProof reads the newest differential restored into
// verifyDB (nil: none).
func lastDiffRestoreProof(ctx context.Context, sqlDB *mssql.DB, verifyDB string) (*mssql.RestoreProof, error) {
	return restoreProofBy(ctx, sqlDB, verifyDB, tsql.DifferentialRestoreProof)
}

// restoreProofBy reads the first row of a restore proof query (nil: none).
func restoreProofBy(ctx context.Context, sqlDB *mssql.DB, verifyDB string, query func(string) (string, []any, error)) (*mssql.RestoreProof, error) {
	q, args, err := query(verifyDB)
	if err != nil {
		return nil, nonRetryable(ErrInvalidConfig, err)
	}
	p, err := sqlDB.LastRestoreProof(ctx, q, args...)
	if err != nil {
		return nil, sqlError(err)
	}
	return p, nil
}

// databaseState reads verifyDB's row of sys.databases with this login's
// SID and the server's GETDATE() (nil: no database).
func databaseState(ctx context.Context, sqlDB *mssql.DB, verifyDB string) (*mssql.DatabaseState, error) {
	q, args, err := tsql.CopyState(verifyDB)
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
// restored from the backup set want, as set m recorded it: its newest
// restore is of that set, it is ONLINE, and it is the database that restore
// produced (not dropped and created again under the same name): the
// restore-history row, database_id and owner m's VerifyCopy recorded,
// created before that restore was confirmed. A set restored before
// VerifyCopy was recorded is judged by createWindow. A copy that is gone
// is retryable SQLHostUnreachable (the workflow restores again, as when the
// instance lost it); anything else is RestoreMismatch.
//
// A differential's copy was created by its base's restore (copyGUID), which
// its VerifyCopy records and which stays the copy's newest full restore;
// the proof is then the newest differential restored after it, which must
// be of this set (want).
func proveRestored(ctx context.Context, sqlDB *mssql.DB, instance string, db *config.Database, seq int64, verifyDB, want string,
	m *catalog.Manifest) (*mssql.RestoreProof, error) {
	p, err := proveCopy(ctx, sqlDB, instance, db, seq, verifyDB, copyGUID(m, want), m)
	if err != nil || !m.IsDifferential() {
		return p, err
	}
	d, err := lastDiffRestoreProof(ctx, sqlDB, verifyDB)
	switch {
	case err != nil:
		return nil, err
	case d == nil || d.HistoryID < p.HistoryID:
		return nil, restoreMismatch(verifyDB, instance, seq, db, want, "", fmt.Sprintf("msdb has no differential restored into it after its base (restore_history_id %d)", p.HistoryID))
	case !sameGUID(d.BackupSetGUID, want):
		return nil, restoreMismatch(verifyDB, instance, seq, db, want, d.BackupSetGUID,
			fmt.Sprintf("restore_history_id %d, backup set %q", d.HistoryID, d.BackupSetName))
	}
	return d, nil
}

// copyGUID is the backup set whose RESTORE DATABASE created the copy of set
// m (want its own GUID): the set itself, or a differential's base.
func copyGUID(m *catalog.Manifest, want string) string {
	if m.IsDifferential() {
		return m.Differential.BackupSetGUID
	}
	return want
}

// proveCopy is proveRestored's check of the copy's full restore: the set
// of backup set want created it, as m recorded it.
func proveCopy(ctx context.Context, sqlDB *mssql.DB, instance string, db *config.Database, seq int64, verifyDB, want string,
	m *catalog.Manifest) (*mssql.RestoreProof, error) {
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
	}
	if v := m.VerifyCopy; v.On(instance, verifyDB) && v.Confirmed() {
		switch {
		case p.HistoryID != v.RestoreHistoryID:
			return nil, restoreMismatch(verifyDB, instance, seq, db, want, p.BackupSetGUID,
				fmt.Sprintf("it was restored again (restore_history_id %d; this set's restore was %d)", p.HistoryID, v.RestoreHistoryID))
		case !confirmedDatabase(v, st):
			return nil, restoreMismatch(verifyDB, instance, seq, db, want, p.BackupSetGUID,
				fmt.Sprintf("it is database_id %d created at %s, not the database this set's restore produced (database_id %d, %s)",
					st.ID, st.Created.Format(time.DateTime), v.DatabaseID, producedWhen(v)))
		case st.OwnerSID != st.LoginSID:
			return nil, restoreMismatch(verifyDB, instance, seq, db, want, p.BackupSetGUID,
				fmt.Sprintf("it is owned by SID %s, not by this login (%s)", st.OwnerSID, st.LoginSID))
		}
		return p, nil
	}
	if st.Created.After(p.RestoreDate.Add(createWindow(m))) {
		return nil, restoreMismatch(verifyDB, instance, seq, db, want, p.BackupSetGUID,
			fmt.Sprintf("it was created at %s, after its last restore at %s", st.Created.Format(time.DateTime), p.RestoreDate.Format(time.DateTime)))
	}
	return p, nil
}

// producedWhen says when the database v's restore produced was created,
// as v records it.
func producedWhen(v *catalog.VerifyCopy) string {
	if !v.DatabaseCreated.IsZero() {
		return "created at " + v.DatabaseCreated.Format(time.DateTime)
	}
	return "created before " + v.ConfirmedAt.Format(time.DateTime)
}

// stillRestored checks, after a step ran on the copy, that nothing restored
// it again meanwhile: the same restore (id) of the same set.
func stillRestored(ctx context.Context, sqlDB *mssql.DB, instance string, db *config.Database, seq int64, verifyDB, want string,
	m *catalog.Manifest, before *mssql.RestoreProof, step string) (*mssql.RestoreProof, error) {
	after, err := proveRestored(ctx, sqlDB, instance, db, seq, verifyDB, want, m)
	if err != nil {
		return nil, err
	}
	if after.HistoryID != before.HistoryID {
		return nil, restoreMismatch(verifyDB, instance, seq, db, want, after.BackupSetGUID,
			fmt.Sprintf("it was restored again (restore_history_id %d, was %d) while %s ran", after.HistoryID, before.HistoryID, step))
	}
	return after, nil
}
