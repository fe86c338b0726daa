package activities

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// StopInput names the set of a cancelled cycle and where its statements may
// run: its BACKUP on the source instance (written to Server), its RESTORE
// and CHECKDB on the verification instance of Remote.
type StopInput struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	Entry    string `json:"entry,omitempty"` // Plan.Entry
	Sequence int64  `json:"seq"`
	Server   string `json:"server,omitempty"`
	Remote   string `json:"remote,omitempty"`
}

// StopOutput says which statements were stopped and which could not be.
type StopOutput struct {
	Stopped []string `json:"stopped,omitempty"`
	Left    []string `json:"left,omitempty"` // still running: the login may not KILL
}

// stopWait bounds how long StopStatements waits for one statement to end.
const stopWait = time.Minute

// StopStatements stops the BACKUP, RESTORE and CHECKDB of a cancelled
// cycle's set that an earlier attempt left running (a cancel that came while
// no attempt ran): an attention when this worker runs it, else KILL of its
// session (ALTER ANY CONNECTION; without it the statement is reported in
// Left and runs to its end). Before the cancel path drops the copy and
// removes the set's files.
func (a *Activities) StopStatements(ctx context.Context, in StopInput) (StopOutput, error) {
	defer a.Cycle.keepAlive(ctx)()
	d := &a.Cycle
	db, err := d.database(in.Instance, in.Database, in.Entry)
	if err != nil {
		return StopOutput{}, err
	}
	log := a.loggerFor(ctx).With(zap.String("db", db.Name), zap.Int64("seq", in.Sequence), zap.String("step", StepCancelled))
	var out StopOutput
	if in.Server != "" {
		srv, err := d.server(in.Server)
		if err != nil {
			return out, err
		}
		inst, err := d.instance(db.Instance)
		if err != nil {
			return out, err
		}
		// The set's files have one of the database's namings (a set
		// resumed from before file names were made case-safe keeps its
		// own): its statement is the one whose text names them.
		for _, names := range setsOf(db).Names() {
			marker, err := tsql.SetBackupMarker(srv.PathsFor(inst.Name), names, in.Sequence)
			if err != nil {
				return out, nonRetryable(ErrInvalidConfig, err)
			}
			if err := a.stopOn(ctx, inst.Name, tsql.CommandBackupDatabase, marker, &out, log); err != nil {
				return out, err
			}
		}
	}
	if in.Remote != "" {
		_, srv, inst, verifyDB, err := a.verifyTarget(VerifyInput{Database: in.Database, Instance: in.Instance, Entry: in.Entry, Sequence: in.Sequence, Server: in.Remote})
		if err != nil {
			return out, err
		}
		cm, err := tsql.CheckDBMarker(verifyDB)
		if err != nil {
			return out, nonRetryable(ErrInvalidConfig, err)
		}
		for _, names := range setsOf(db).Names() {
			rm, err := tsql.SetRestoreMarker(verifyDB, srv.PathsFor(inst.Name), names, in.Sequence)
			if err != nil {
				return out, nonRetryable(ErrInvalidConfig, err)
			}
			if err := a.stopOn(ctx, inst.Name, tsql.CommandRestoreDatabase, rm, &out, log); err != nil {
				return out, err
			}
		}
		if err := a.stopOn(ctx, inst.Name, tsql.CommandCheckDB, cm, &out, log); err != nil {
			return out, err
		}
	}
	return out, nil
}

// stopOn stops the statements of instance whose text starts with marker.
func (a *Activities) stopOn(ctx context.Context, instance, command, marker string, out *StopOutput, log *zap.Logger) error {
	inst, err := a.Cycle.instance(instance)
	if err != nil {
		return err
	}
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	what := fmt.Sprintf("%s on %s", command, inst.Name)
	for _, s := range mssql.RunningWithPrefix(sqlDB.Target, marker) {
		if s.Stop(stopWait) {
			out.Stopped = append(out.Stopped, what)
		} else {
			out.Left = append(out.Left, what)
		}
	}
	q, args, err := tsql.RunningStatements(command)
	if err != nil {
		return nonRetryable(ErrInvalidConfig, err)
	}
	reqs, err := sqlDB.Requests(ctx, q, args...)
	if err != nil {
		return sqlError(err)
	}
	for _, r := range reqs {
		if mssql.Find([]mssql.Request{r}, marker) == nil {
			continue
		}
		if err := kill(ctx, sqlDB, r.SessionID); err != nil {
			log.Warn("cannot stop the cancelled cycle's statement: it runs to its end (KILL needs ALTER ANY CONNECTION)",
				zap.String("statement", command), zap.String("instance", inst.Name), zap.Int64("session", r.SessionID), zap.Error(err))
			out.Left = append(out.Left, what)
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, stopWait)
		err = sqlDB.WaitRequest(wctx, r.SessionID, a.Cycle.poll(), nil, q, args...)
		cancel()
		if err != nil {
			out.Left = append(out.Left, what)
			continue
		}
		log.Info("stopped the cancelled cycle's statement", zap.String("statement", command), zap.String("instance", inst.Name),
			zap.Int64("session", r.SessionID))
		out.Stopped = append(out.Stopped, what)
	}
	return nil
}
