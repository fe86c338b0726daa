package activities

import (
	"context"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// DropVerifyDB drops the restored copy (idempotent), never a database of
// that name backupcycle did not restore (VerifyDatabaseInUse). What it may
// drop is judged from the database's sets and the verification instance
// (owncopy.go); in.OwnRestore ("this run sent a RESTORE into it") is not
// trusted for that: a RESTORING database is dropped only when a set's
// record shows it is the product's own RESTORE cut short.
func (a *Activities) DropVerifyDB(ctx context.Context, in VerifyInput) error {
	defer a.Cycle.keepAlive(ctx)()
	db, srv, inst, verifyDB, err := a.verifyTarget(in)
	if err != nil {
		return err
	}
	log := a.loggerFor(ctx).With(zap.String("db", db.Name), zap.Int64("seq", in.Sequence), zap.String("server", srv.Name),
		zap.String("step", StepDropVerifyDB))
	stmt, err := tsql.DropDatabase(verifyDB)
	if err != nil {
		return nonRetryable(ErrInvalidConfig, err)
	}
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	st, err := a.guardCopy(ctx, sqlDB, db, inst.Name, verifyDB, "dropped", srv.Name)
	if err != nil || st == nil {
		return err
	}
	// The drop forces the sessions in an online copy out (tsql.DropDatabase):
	// say whose.
	var sessions []mssql.Session
	if st.State == "ONLINE" {
		sessions = sessionsIn(ctx, sqlDB, inst.Name, verifyDB, log)
	}
	if _, err := sqlDB.Run(ctx, "DROP DATABASE", stmt, nil); err != nil {
		return sqlError(err)
	}
	logDisconnected(log, sessions, inst.Name, verifyDB, "dropped")
	return nil
}
