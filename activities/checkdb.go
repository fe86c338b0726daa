package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// CheckDB runs DBCC CHECKDB ... WITH NO_INFOMSGS, ALL_ERRORMSGS,
// EXTENDED_LOGICAL_CHECKS, DATA_PURITY on the restored copy. Any error is a
// corrupt backup (CheckDBFailed, with every message). A lost instance or a
// vanished copy is SQLHostUnreachable: the workflow restores again.
//
// Before and after the CHECKDB the copy is proven to be the one restored
// from this set (msdb: same restore, this set's backup set GUID), so a
// CHECKDB that ran on another cycle's restore never counts (RestoreMismatch);
// on success the proof goes into the manifest (catalog.Proof).
func (a *Activities) CheckDB(ctx context.Context, in VerifyInput) (StepOutput, error) {
	db, srv, inst, verifyDB, err := a.verifyTarget(in)
	if err != nil {
		return StepOutput{}, err
	}
	stmt, err := tsql.CheckDB(verifyDB)
	if err != nil {
		return StepOutput{}, nonRetryable(ErrInvalidConfig, err)
	}
	m, want, err := a.setToProve(ctx, srv, db, in.Sequence)
	if err != nil {
		return StepOutput{}, err
	}
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		return StepOutput{}, err
	}
	defer sqlDB.Close()
	rep := a.newReporter(ctx, StepCheckDB, in.Sequence)
	stop := rep.every(a.Cycle.poll(), nil, nil)
	defer stop()
	start := time.Now()
	before, err := proveRestored(ctx, sqlDB, inst.Name, db, in.Sequence, verifyDB, want, createWindow(m))
	if err != nil {
		return StepOutput{}, err
	}
	_, err = sqlDB.Run(ctx, "DBCC CHECKDB", stmt, nil)
	if errors.Is(err, mssql.ErrDatabaseNotFound) {
		return StepOutput{}, retryable(ErrSQLHostUnreachable, fmt.Errorf("restored copy %s is gone from %s: restore it again: %w", verifyDB, inst.Name, err))
	}
	if err != nil {
		return StepOutput{}, sqlError(err)
	}
	proof, err := stillRestored(ctx, sqlDB, inst.Name, db, in.Sequence, verifyDB, want, createWindow(m), before, "CHECKDB")
	if err != nil {
		return StepOutput{}, err
	}
	out := StepOutput{VerifyDatabase: verifyDB, Duration: time.Since(start)}
	now := a.Cycle.now()
	if _, err := a.updateManifest(ctx, db, in.Sequence, holders(m, srv.Name), []string{srv.Name}, func(m *catalog.Manifest) error {
		if m == nil {
			return storageError(srv.Name, fmt.Errorf("manifest of seq %d missing: %w", in.Sequence, storage.ErrNotFound))
		}
		_ = m.SetTiming(catalog.StepCheckDB, now.Add(-out.Duration), now)
		if err := advanceOrKeep(m, catalog.StateChecked, now); err != nil {
			return err
		}
		// RestoredAt is msdb's restore_date: the verification server's
		// local time (SQL Server's datetime has no zone).
		m.Proof = &catalog.Proof{VerifyInstance: inst.Name, VerifyDatabase: verifyDB, RestoreHistoryID: proof.HistoryID,
			BackupSetGUID: proof.BackupSetGUID, RestoredAt: proof.RestoreDate, CheckedAt: now}
		return nil
	}); err != nil {
		return StepOutput{}, err
	}
	return out, nil
}
