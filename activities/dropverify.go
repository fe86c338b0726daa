package activities

import (
	"context"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// DropVerifyDB drops the restored copy (idempotent).
func (a *Activities) DropVerifyDB(ctx context.Context, in VerifyInput) error {
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
	if _, err := sqlDB.Run(ctx, "DROP DATABASE", stmt, nil); err != nil {
		return sqlError(err)
	}
	return nil
}
