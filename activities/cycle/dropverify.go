package cycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// CleanupConnectTimeout bounds the login of DropVerifyDB after a verified
// set (VerifyInput.Cleanup), or the instance's connect_timeout when that is
// shorter: the drop is housekeeping, and an instance that does not answer
// by then is left to the next cycle rather than holding this one.
const CleanupConnectTimeout = 5 * time.Second

// DropVerifyDB drops the restored copy (idempotent), never a database of
// that name backupcycle did not restore (VerifyDatabaseInUse). What it may
// drop is judged from the database's sets and the verification instance
// (owncopy.go); in.OwnRestore ("this run sent a RESTORE into it") is not
// trusted for that: a RESTORING database is dropped only when a set's
// record shows it is the product's own RESTORE cut short.
//
// With in.Cleanup (the set is verified) a verification instance that
// cannot be reached is not retried: the error is non-retryable
// SQLHostUnreachable and says what became of the copy.
func (a *Activities) DropVerifyDB(ctx context.Context, in activities.VerifyInput) error {
	defer a.Cycle.KeepAlive(ctx)()
	db, srv, inst, verifyDB, err := activities.VerifyTarget(a.Activities, in)
	if err != nil {
		return err
	}
	log := activities.Logger(a.Activities, ctx).With(zap.String("db", db.Name), zap.Int64("seq", in.Sequence), zap.String("server", srv.Name),
		zap.String("instance", inst.Name), zap.String("step", activities.StepDropVerifyDB))
	if in.Cleanup {
		short := *inst
		if short.ConnectTimeout <= 0 || short.ConnectTimeout > CleanupConnectTimeout {
			short.ConnectTimeout = CleanupConnectTimeout
		}
		inst = &short
	}
	err = a.dropCopy(ctx, db, srv, inst, verifyDB, log)
	if in.Cleanup && err == nil && strings.Contains(db.VerifyName, "{seq}") {
		a.dropLeftCopies(ctx, db, srv, inst, in.Sequence, log)
	}
	if !in.Cleanup || activities.ErrorType(err) != activities.ErrSQLHostUnreachable {
		return err
	}
	left := leftCopy(db, inst.Name, verifyDB)
	log.Warn("verification instance unreachable: copy left", zap.String("left", left), zap.Error(err))
	// The message only: the cause's chain would repeat it in the warning.
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s; %s", errorMessage(err), left), activities.ErrSQLHostUnreachable, nil)
}

// errorMessage is the message of the ApplicationError in err's chain, or
// err's text.
func errorMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	return err.Error()
}

// leftCopy says what becomes of a copy a verified cycle could not drop.
// With one name for every set the next cycle's RESTORE replaces it (it is
// the product's own) and that cycle's drop removes it; a name per set
// ({seq}) is never restored into again: the next verified set's cleanup
// drops it (dropLeftCopies).
func leftCopy(db *config.Database, instance, verifyDB string) string {
	if strings.Contains(db.VerifyName, "{seq}") {
		return fmt.Sprintf("the copy %s is left on %s: the next verified set's cleanup drops it (verify_name has {seq}: no later cycle restores into that name)",
			verifyDB, instance)
	}
	return fmt.Sprintf("the copy %s is left on %s: the next cycle replaces it and drops it", verifyDB, instance)
}

// dropLeftCopies drops, after a verified set's own copy, the copies of
// earlier sets that a cleanup left on inst (it did not answer then): with
// {seq} in verify_name no later cycle restores into their names. A name is
// one a set's manifest records the product restoring there, and its
// database is dropped only when the instance proves it is that copy
// (guardCopy, as for the set's own); anything else stays. Failures are
// logged: they do not hold the verified cycle, and the next one tries again.
func (a *Activities) dropLeftCopies(ctx context.Context, db *config.Database, srv *config.BackupServer, inst *config.SQLInstance, seq int64,
	log *zap.Logger) {
	names := a.recordedCopies(ctx, db, inst.Name, seq)
	if len(names) == 0 {
		return
	}
	sqlDB, err := a.Cycle.ConnectSQL(ctx, inst, "master")
	if err != nil {
		log.Warn("copies earlier cleanups left: not looked for", zap.Error(err))
		return
	}
	defer sqlDB.Close()
	for _, name := range names {
		if st, err := activities.DatabaseState(ctx, sqlDB, name); err != nil || st == nil {
			continue
		}
		if err := a.dropOn(ctx, sqlDB, db, srv, inst, name, log); err != nil {
			log.Warn("copy an earlier cleanup left: not dropped", zap.String("copy", name), zap.Error(err))
			continue
		}
		log.Info("copy an earlier cleanup left: dropped", zap.String("copy", name))
	}
}

// recordedCopies are the names of the copies db's sets before seq record
// restoring on instance under their own verify_name, each once.
func (a *Activities) recordedCopies(ctx context.Context, db *config.Database, instance string, seq int64) []string {
	var names []string
	for _, name := range slices.Concat(db.BackupServers, []string{db.CopyTo}) {
		if name == "" {
			continue
		}
		if srv, err := a.Cycle.Server(name); err != nil || srv.VerifyInstance != instance {
			continue
		}
		l, err := activities.ListManifests(a.Activities, ctx, name, db)
		if err != nil {
			continue
		}
		for _, m := range l.Manifests {
			// Only the workers' own record says which database they
			// restored: a planted one could name a DBA's database.
			if own := db.VerifyDatabaseName(m.Sequence); m.Trusted() && m.Sequence < seq && m.VerifyCopy.On(instance, own) && !slices.Contains(names, own) {
				names = append(names, own)
			}
		}
	}
	return names
}

// dropCopy drops verifyDB on inst when it is the product's own copy.
func (a *Activities) dropCopy(ctx context.Context, db *config.Database, srv *config.BackupServer, inst *config.SQLInstance, verifyDB string,
	log *zap.Logger) error {
	sqlDB, err := a.Cycle.ConnectSQL(ctx, inst, "master")
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	return a.dropOn(ctx, sqlDB, db, srv, inst, verifyDB, log)
}

// dropOn is dropCopy over an open connection to inst.
func (a *Activities) dropOn(ctx context.Context, sqlDB *mssql.DB, db *config.Database, srv *config.BackupServer, inst *config.SQLInstance,
	verifyDB string, log *zap.Logger) error {
	stmt, err := tsql.DropDatabase(verifyDB)
	if err != nil {
		return activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	st, err := activities.GuardCopy(a.Activities, ctx, sqlDB, db, inst.Name, verifyDB, "dropped", srv.Name)
	if err != nil || st == nil {
		return err
	}
	// The drop forces the sessions in an online copy out (tsql.DropDatabase):
	// say whose.
	var sessions []mssql.Session
	if st.State == "ONLINE" {
		sessions = activities.SessionsIn(ctx, sqlDB, inst.Name, verifyDB, log)
	}
	if _, err := sqlDB.Run(ctx, "DROP DATABASE", stmt, nil); err != nil {
		return activities.SQLError(err)
	}
	activities.LogDisconnected(log, sessions, inst.Name, verifyDB, "dropped")
	return nil
}
