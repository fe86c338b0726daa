package activities

import (
	"context"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// DropVerifyDB drops the restored copy (idempotent), never a database of
// that name backupcycle did not restore (VerifyDatabaseInUse).
func (a *Activities) DropVerifyDB(ctx context.Context, in VerifyInput) error {
	defer a.Cycle.keepAlive(ctx)()
	_, _, inst, verifyDB, err := a.verifyTarget(in)
	if err != nil {
		return err
	}
	stmt, err := tsql.DropDatabase(verifyDB)
	if err != nil {
		return nonRetryable(ErrInvalidConfig, err)
	}
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	// Only ever a copy backupcycle restored: a database of that name that
	// someone else made is never dropped.
	if err := checkOwnCopy(ctx, sqlDB, inst.Name, verifyDB, in.OwnRestore, "dropped"); err != nil {
		return err
	}
	if _, err := sqlDB.Run(ctx, "DROP DATABASE", stmt, nil); err != nil {
		return sqlError(err)
	}
	return nil
}
