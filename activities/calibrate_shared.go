package activities

import (
	"context"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
)

// The helpers the calibration's activities (package activities/calibrate)
// share with the cycle's: its plan reads the source as the cycle's plan
// does, its BACKUPs run and are stopped as the cycle's statements are.
// Exported as functions or methods of CycleDeps (an exported method of
// Activities would be registered as an activity).

// RotationServer is the backup server name of the database's rotation
// (InvalidConfig naming input when it is not one of them).
func (d *CycleDeps) RotationServer(db *config.Database, input, name string) (*config.BackupServer, error) {
	return d.rotationServer(db, input, name)
}

// SourceInstance is the SQL instance to ask about db's source (its
// replica, or the first of its availability group's).
func (d *CycleDeps) SourceInstance(db *config.Database) (*config.SQLInstance, error) {
	return d.sourceInstance(db)
}

// ReadSource asks the source instance what the plan needs; a failure is a
// warning, the facts unknown.
func ReadSource(a *Activities, ctx context.Context, db *config.Database) (SourceFacts, []string) {
	return a.readSource(ctx, db)
}

// ModeOf is how a cycle of db backs up given what its source said
// (compression, COPY_ONLY), with warnings for what the source overrides.
func ModeOf(db *config.Database, src SourceFacts) (BackupMode, []string) { return backupMode(db, src) }

// StopOn stops the statements op (sys.dm_exec_requests.command like
// command) of instance that m identifies and this login sent, recording
// them in out.
func StopOn(a *Activities, ctx context.Context, instance, op, command string, m mssql.Marker, out *StopOutput, log *zap.Logger) error {
	return a.stopOn(ctx, instance, op, command, m, out, log)
}

// RunStatementBeating is RunStatement with the step's progress heartbeated
// (and signalled, with Signal) every poll from before the statement is
// sent until it ends. sent is false when it was not sent (err says why):
// it left nothing behind.
func RunStatementBeating(a *Activities, ctx context.Context, s Statement) (res mssql.Result, sent bool, err error) {
	rep := s.reporter(a, ctx)
	stop := rep.every(a.Cycle.poll(), nil, nil)
	defer stop()
	ls := s.long()
	st, err := ls.start(ctx)
	if err != nil {
		return mssql.Result{}, false, err
	}
	res, err = a.wait(ctx, ls, running{local: st}, rep)
	return res, true, err
}
