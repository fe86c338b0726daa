package activities

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/metrics"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// A differential is proven on top of its base: the base full restored
// from its remote copy WITH NORECOVERY (CHECKSUM, REPLACE, NEW_BROKER),
// then the differential WITH RECOVERY (CHECKSUM), both into the copy
// verify_name gives; CHECKDB and the sanity checks follow as for a full.
// "A differential backup ... can be restored only on top of its base"
// after it was restored WITH NORECOVERY ("Differential Backups (SQL
// Server)"; "RESTORE Statements", NORECOVERY).
//
// The copy is the product's by the same record as a full's (owncopy.go):
// the differential's VerifyCopy names the base's RESTORE DATABASE (its
// backup set and restore-history row, which the copy's newest full restore
// stays), written before it is sent and confirmed once msdb shows it; the
// differential's restore-history row (restore_type 'I') after it, with the
// differential's backup set GUID, is the set's proof (proveRestored). A
// crash between the two leaves the copy RESTORING with a confirmed record
// of a differential's base: the retry restores the differential only.

// restoreDifferential is Restore for differential set m (want its backup
// set GUID) held on srv.
func (a *Activities) restoreDifferential(ctx context.Context, in VerifyInput, db *config.Database, srv *config.BackupServer,
	inst *config.SQLInstance, verifyDB string, m *catalog.Manifest, want string) (StepOutput, error) {
	log := a.loggerFor(ctx).With(zap.String("db", db.Name), zap.Int64("seq", in.Sequence), zap.String("server", srv.Name),
		zap.String("step", StepRestore), zap.Int64("base", m.Differential.Sequence))
	base, err := a.diffBaseOn(ctx, srv, db, m)
	if err != nil {
		return StepOutput{}, err
	}
	baseGUID := base.Header.BackupSetGUID
	baseLayout, err := tsql.Layout(srv.PathsFor(inst.Name), base.Names(), base.Sequence, len(base.Stripes))
	if err != nil {
		return StepOutput{}, nonRetryable(ErrInvalidConfig, err)
	}
	layout, err := tsql.Layout(srv.PathsFor(inst.Name), m.Names(), in.Sequence, len(m.Stripes))
	if err != nil {
		return StepOutput{}, nonRetryable(ErrInvalidConfig, err)
	}
	baseDisks, disks := tsql.Paths(baseLayout), tsql.Paths(layout)
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		return StepOutput{}, err
	}
	defer sqlDB.Close()
	rep := a.newReporter(ctx, StepRestore, in.Sequence)
	stop := rep.every(a.Cycle.poll(), nil, func(p float64, b int64) any {
		return RestoreHeartbeat{StepProgress: StepProgress{Step: StepRestore, Sequence: in.Sequence, Percent: p, Bytes: b}, StartedInto: verifyDB}
	})
	defer stop()
	start := time.Now()

	statement := func(first string) (*longStatement, error) {
		marker, err := tsql.RestoreMarker(verifyDB, first)
		if err != nil {
			return nil, nonRetryable(ErrInvalidConfig, err)
		}
		return &longStatement{db: sqlDB, op: "RESTORE DATABASE", command: tsql.CommandRestoreDatabase, marker: mssql.Marker{Prefix: marker}, log: log}, nil
	}
	baseLS, err := statement(baseDisks[0])
	if err != nil {
		return StepOutput{}, err
	}
	diffLS, err := statement(disks[0])
	if err != nil {
		return StepOutput{}, err
	}
	var rec *catalog.VerifyCopy
	if m.VerifyCopy.On(inst.Name, verifyDB) && sameGUID(m.VerifyCopy.BackupSetGUID, baseGUID) {
		rec = m.VerifyCopy
	}
	if isRetry(ctx) || rec != nil {
		// An earlier attempt's RESTORE of the base or of the differential
		// may still run: follow it, never start a second one over it.
		for _, ls := range []*longStatement{baseLS, diffLS} {
			found, err := ls.find(ctx)
			if err != nil {
				return StepOutput{}, err
			}
			if found.local != nil || found.session > 0 {
				log.Info("waiting for the RESTORE an earlier attempt left running", zap.Int64("session", found.session))
				if _, err := a.wait(ctx, ls, found, rep); err != nil && !isEndedUnseen(err) {
					return StepOutput{}, err
				}
			} else if found.blind && rec != nil && !rec.Confirmed() {
				if st, err := databaseState(ctx, sqlDB, verifyDB); err == nil && st != nil && st.State == "RESTORING" {
					return StepOutput{}, blindError(ls, nil)
				}
			}
		}
	}
	st, lastFull, lastDiff, err := copyRestores(ctx, sqlDB, verifyDB)
	if err != nil {
		return StepOutput{}, err
	}
	ours := rec != nil && st != nil && st.OwnerSID != "" && st.OwnerSID == st.LoginSID && finishedBy(rec, st, lastFull)
	diffAfter := lastDiff != nil && lastFull != nil && lastDiff.HistoryID > lastFull.HistoryID
	switch {
	case ours && st.State == "ONLINE" && diffAfter && sameGUID(lastDiff.BackupSetGUID, want):
		log.Info("base and differential restored while no worker watched: not restored again")
	case ours && st.State == "RESTORING" && !diffAfter:
		log.Info("base restored already (RESTORING): restoring the differential")
		if rec, err = a.confirmBase(ctx, sqlDB, db, in.Sequence, srv.Name, m, rec, lastFull, st); err != nil {
			return StepOutput{}, err
		}
		if err := a.restoreDiffOnBase(ctx, diffLS, db, inst.Name, verifyDB, disks, m, rep, log); err != nil {
			return StepOutput{}, err
		}
	default:
		if rec, err = a.restoreBase(ctx, sqlDB, baseLS, db, srv, inst.Name, verifyDB, in.Sequence, m, base, baseLayout, rep, log); err != nil {
			return StepOutput{}, err
		}
		if err := a.restoreDiffOnBase(ctx, diffLS, db, inst.Name, verifyDB, disks, m, rep, log); err != nil {
			return StepOutput{}, err
		}
	}
	// The copy is the base's restore (the record) with this differential
	// on it, recovered.
	st, lastFull, lastDiff, err = copyRestores(ctx, sqlDB, verifyDB)
	if err != nil {
		return StepOutput{}, err
	}
	switch {
	case st == nil || st.State != "ONLINE":
		return StepOutput{}, retryable(ErrSQLHostUnreachable, fmt.Errorf("restored copy %s is gone from %s, or not online (%+v): restore it again", verifyDB, inst.Name, st))
	case lastFull == nil || lastFull.HistoryID != rec.RestoreHistoryID || !sameGUID(lastFull.BackupSetGUID, baseGUID):
		return StepOutput{}, restoreMismatch(verifyDB, inst.Name, in.Sequence, db, baseGUID, guidOf(lastFull), "its newest full restore is not the base's this step recorded")
	case lastDiff == nil || lastDiff.HistoryID < lastFull.HistoryID || !sameGUID(lastDiff.BackupSetGUID, want):
		return StepOutput{}, restoreMismatch(verifyDB, inst.Name, in.Sequence, db, want, guidOf(lastDiff), "its newest differential restore after the base's is not this set's")
	}
	cb := settleCopy(ctx, sqlDB, diffLS, st, inst.Name, verifyDB, log)
	out := StepOutput{VerifyDatabase: verifyDB, Duration: time.Since(start)}
	_, out.Bytes = rep.get()
	now := a.Cycle.now()
	if _, err := a.updateManifest(ctx, db, in.Sequence, holders(m, srv.Name), []string{srv.Name}, func(m *catalog.Manifest) error {
		if m == nil {
			return storageError(srv.Name, fmt.Errorf("manifest of seq %d missing: %w", in.Sequence, storage.ErrNotFound))
		}
		v := *rec
		v.CheckDBBaseline = cb
		m.VerifyDB, m.VerifyCopy = verifyDB, &v
		_ = m.SetTiming(catalog.StepRestore, now.Add(-out.Duration), now)
		return advanceOrKeep(m, catalog.StateRestored, now)
	}); err != nil {
		return StepOutput{}, err
	}
	log.Info("differential restored on its base", zap.String("verify_db", verifyDB), zap.Duration("duration", out.Duration))
	a.recorder().StepDone(metrics.StepRestore, db.Instance, db.Name, srv.Name, 0, out.Duration)
	return out, nil
}

// diffBaseOn is the base of differential m as srv holds it: a verified
// full copied there whose backup set is the one m names. Anything else
// leaves the differential unproven and says nothing about it
// (DifferentialBaseUnusable).
func (a *Activities) diffBaseOn(ctx context.Context, srv *config.BackupServer, db *config.Database, m *catalog.Manifest) (*catalog.Manifest, error) {
	b := m.Differential
	unusable := func(why string, args ...any) error {
		return nonRetryable(ErrDifferentialBaseUnusable, fmt.Errorf("differential set %d of %s: its base, set %d, %s: the differential stays %s "+
			"and is proven once its base restores again (`starter run --database %s --resume %d`), or the next full cycle takes a new base",
			m.Sequence, db.ID(), b.Sequence, fmt.Sprintf(why, args...), m.State, db.Name, m.Sequence))
	}
	base, err := a.loadSet(ctx, srv, db, b.Sequence)
	if err != nil {
		// Missing or unreadable there: the base's trouble, not the
		// differential's (a CorruptBackup here would condemn it).
		if errors.Is(err, storage.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errorTypeOf(err) == ErrCorruptBackup {
			return nil, unusable("cannot be read on %s (%v)", srv.Name, err)
		}
		return nil, err
	}
	switch {
	case base.IsDifferential() || base.Header == nil || !sameGUID(base.Header.BackupSetGUID, b.BackupSetGUID):
		return nil, unusable("on %s is not the full backup set %s", srv.Name, b.BackupSetGUID)
	case !base.Verified():
		return nil, unusable("is %s on %s, not verified", base.State, srv.Name)
	}
	if err := remoteHolder(base, db, base.Sequence, srv.Name); err != nil {
		return nil, unusable("is not a copy %s holds (%v)", srv.Name, err)
	}
	return base, nil
}

// restoreBase restores the base into verifyDB WITH NORECOVERY, the copy's
// record (VerifyCopy, naming the base's backup set) written into the
// differential's manifest before the RESTORE is sent and confirmed after:
// it returns the confirmed record.
func (a *Activities) restoreBase(ctx context.Context, sqlDB *mssql.DB, ls *longStatement, db *config.Database, srv *config.BackupServer,
	instance, verifyDB string, seq int64, m, base *catalog.Manifest, layout []tsql.Stripe, rep *reporter, log *zap.Logger) (*catalog.VerifyCopy, error) {
	disks := tsql.Paths(layout)
	moves, err := a.hostedMoves(ctx, sqlDB, db, srv, instance, verifyDB, layout, base, log)
	if err != nil {
		return nil, baseUnusable(db, m, base, err)
	}
	stmt, err := tsql.RestoreDatabase(tsql.RestoreOptions{Database: verifyDB, Disks: disks, Moves: moves,
		Checksum: true, Replace: true, NoRecovery: true, NewBroker: true})
	if err != nil {
		return nil, nonRetryable(ErrInvalidConfig, err)
	}
	ls.text = stmt
	old, err := a.guardCopy(ctx, sqlDB, db, instance, verifyDB, "replaced", srv.Name)
	if err != nil {
		return nil, err
	}
	intent, err := copyIntent(ctx, sqlDB, instance, verifyDB, base.Header.BackupSetGUID, old, a.Cycle.now())
	if err != nil {
		return nil, err
	}
	if err := a.recordCopy(ctx, db, seq, srv.Name, m, intent); err != nil {
		return nil, err
	}
	single := false
	if old != nil && old.State == "ONLINE" {
		if single, err = forceOut(ctx, sqlDB, instance, verifyDB, log); err != nil {
			return nil, err
		}
	}
	log.Info("restoring the differential's base", zap.String("verify_db", verifyDB), zap.Int("files", len(moves)))
	s, err := ls.start(ctx)
	if err != nil {
		undoSingleUser(ctx, sqlDB, single, old, instance, verifyDB, log)
		return nil, err
	}
	if _, err := a.wait(ctx, ls, running{local: s}, rep); err != nil && !isEndedUnseen(err) {
		undoSingleUser(ctx, sqlDB, single, old, instance, verifyDB, log)
		if apart := a.locationApart(ctx, srv, instance, layout, err); apart != nil {
			return nil, apart
		}
		return nil, baseUnusable(db, m, base, a.restoreFailed(ctx, sqlDB, db, instance, base, err))
	}
	st, lastFull, _, err := copyRestores(ctx, sqlDB, verifyDB)
	if err != nil {
		return nil, err
	}
	return a.confirmBase(ctx, sqlDB, db, seq, srv.Name, m, intent, lastFull, st)
}

// confirmBase completes the record of the base's RESTORE (NORECOVERY)
// from what msdb and sys.databases show (the copy RESTORING, its newest
// full restore the base's) and saves it in the differential's manifest.
func (a *Activities) confirmBase(ctx context.Context, sqlDB *mssql.DB, db *config.Database, seq int64, server string, m *catalog.Manifest,
	rec *catalog.VerifyCopy, lastFull *mssql.RestoreProof, st *mssql.DatabaseState) (*catalog.VerifyCopy, error) {
	switch {
	case st == nil:
		return nil, retryable(ErrSQLHostUnreachable, fmt.Errorf("%s is gone from %s after its base's RESTORE: restore it again", rec.VerifyDatabase, rec.VerifyInstance))
	case lastFull == nil || !sameGUID(lastFull.BackupSetGUID, rec.BackupSetGUID):
		return nil, restoreMismatch(rec.VerifyDatabase, rec.VerifyInstance, seq, db, rec.BackupSetGUID, guidOf(lastFull), "after the base's RESTORE")
	case st.State != "RESTORING":
		return nil, restoreMismatch(rec.VerifyDatabase, rec.VerifyInstance, seq, db, rec.BackupSetGUID, lastFull.BackupSetGUID,
			fmt.Sprintf("it is %s after its base's RESTORE ... NORECOVERY: something recovered it", st.State))
	}
	if rec.Confirmed() {
		return rec, nil
	}
	v := *rec
	v.RestoreHistoryID, v.DatabaseID, v.ConfirmedAt = lastFull.HistoryID, st.ID, st.Now
	if err := a.recordCopy(ctx, db, seq, server, m, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// recordCopy saves v as the differential's VerifyCopy on every holder.
func (a *Activities) recordCopy(ctx context.Context, db *config.Database, seq int64, server string, m *catalog.Manifest, v *catalog.VerifyCopy) error {
	_, err := a.updateManifest(ctx, db, seq, holders(m, server), []string{server}, func(m *catalog.Manifest) error {
		if m == nil {
			return storageError(server, fmt.Errorf("manifest of seq %d missing: %w", seq, storage.ErrNotFound))
		}
		m.VerifyCopy = v
		return nil
	})
	return err
}

// restoreDiffOnBase restores differential m WITH RECOVERY into verifyDB,
// which its base left RESTORING. Its files' damage is evidence against
// it (CorruptBackup).
func (a *Activities) restoreDiffOnBase(ctx context.Context, ls *longStatement, db *config.Database, instance, verifyDB string, disks []string,
	m *catalog.Manifest, rep *reporter, log *zap.Logger) error {
	stmt, err := tsql.RestoreDatabase(tsql.RestoreOptions{Database: verifyDB, Disks: disks, Checksum: true})
	if err != nil {
		return nonRetryable(ErrInvalidConfig, err)
	}
	ls.text = stmt
	log.Info("restoring the differential on its base", zap.String("verify_db", verifyDB))
	s, err := ls.start(ctx)
	if err != nil {
		return err
	}
	if _, err := a.wait(ctx, ls, running{local: s}, rep); err != nil && !isEndedUnseen(err) {
		return a.restoreFailed(ctx, ls.db, db, instance, m, err)
	}
	return nil
}

// baseUnusable is err of a differential's base, as classified for the
// base: media damage is the base's, never evidence against the
// differential (DifferentialBaseUnusable); anything else passes.
func baseUnusable(db *config.Database, m, base *catalog.Manifest, err error) error {
	if errorTypeOf(err) != ErrCorruptBackup {
		return err
	}
	return nonRetryable(ErrDifferentialBaseUnusable, fmt.Errorf(
		"differential set %d of %s: its base, set %d, does not restore from its copy on this server (%w): the differential stays %s; "+
			"the next full cycle takes a new base", m.Sequence, db.ID(), base.Sequence, err, m.State))
}

// copyRestores reads the copy's row of sys.databases (nil: none), its
// newest full restore and its newest differential restore (nil: none).
func copyRestores(ctx context.Context, sqlDB *mssql.DB, verifyDB string) (*mssql.DatabaseState, *mssql.RestoreProof, *mssql.RestoreProof, error) {
	st, err := databaseState(ctx, sqlDB, verifyDB)
	if err != nil {
		return nil, nil, nil, err
	}
	full, err := lastRestoreProof(ctx, sqlDB, verifyDB)
	if err != nil {
		return nil, nil, nil, err
	}
	diff, err := lastDiffRestoreProof(ctx, sqlDB, verifyDB)
	if err != nil {
		return nil, nil, nil, err
	}
	return st, full, diff, nil
}

func guidOf(p *mssql.RestoreProof) string {
	if p == nil {
		return ""
	}
	return p.BackupSetGUID
}
