package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// StopInput names the set of a cancelled or failed cycle and where its
// statements may run: its BACKUP on the source instance (written to
// Server), its RESTORE and CHECKDB on the verification instance of Remote.
type StopInput struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	Entry    string `json:"entry,omitempty"` // Plan.Entry
	Sequence int64  `json:"seq"`
	Server   string `json:"server,omitempty"`
	Remote   string `json:"remote,omitempty"`
	// Replica is the plan's (Plan.Replica): the replica of the
	// database's availability group the BACKUP ran on.
	Replica string `json:"replica,omitempty"`
	// Base is a differential's base set: its RESTORE into the copy is the
	// differential's too (restorediff.go).
	Base int64 `json:"base,omitempty"`
}

// StopOutput says which statements were stopped and which could not be.
type StopOutput struct {
	Stopped []string `json:"stopped,omitempty"`
	// Left are the statements still running, each with why and its fix
	// (the GRANT a login without ALTER ANY CONNECTION needs).
	Left []string `json:"left,omitempty"`
}

// stopWait bounds how long StopStatements waits for one statement to end.
const stopWait = time.Minute

// StopStatements stops the BACKUP, RESTORE and CHECKDB of a set that an
// earlier attempt left running: before a cancelled cycle drops the copy and
// removes the set's files (the cancel came while no attempt ran), and when
// a step failed for good (its last attempt timed out and left the
// statement for a next one that never comes), so that the next night does
// not meet it. An attention when this worker runs the statement, else KILL
// of its session (ALTER ANY CONNECTION; without it the statement is
// reported in Left with the GRANT, and runs to its end). Only the set's own
// statements, sent by this login, are touched (mssql.Find).
func (a *Activities) StopStatements(ctx context.Context, in StopInput) (StopOutput, error) {
	defer a.Cycle.keepAlive(ctx)()
	d := &a.Cycle
	db, err := d.sourceDatabase(in.Instance, in.Database, in.Entry, in.Replica)
	if err != nil {
		return StopOutput{}, err
	}
	log := a.loggerFor(ctx).With(zap.String("db", db.Name), zap.Int64("seq", in.Sequence))
	var out StopOutput
	if in.Server != "" {
		srv, err := d.rotationServer(db, "backup server", in.Server)
		if err != nil {
			return out, err
		}
		inst, err := d.instance(db.Source())
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
			if err := a.stopOn(ctx, inst.Name, "BACKUP DATABASE", tsql.CommandBackupDatabase, mssql.Marker{Prefix: marker}, &out, log); err != nil {
				return out, err
			}
		}
	}
	if in.Remote != "" {
		_, srv, inst, verifyDB, err := a.verifyTarget(VerifyInput{Database: in.Database, Instance: in.Instance, Entry: in.Entry, Sequence: in.Sequence, Server: in.Remote})
		if err != nil {
			return out, err
		}
		cm, err := tsql.CheckDBMarker(verifyDB, in.Sequence)
		if err != nil {
			return out, nonRetryable(ErrInvalidConfig, err)
		}
		for _, names := range setsOf(db).Names() {
			for _, seq := range []int64{in.Sequence, in.Base} {
				if seq <= 0 {
					continue
				}
				rm, err := tsql.SetRestoreMarker(verifyDB, srv.PathsFor(inst.Name), names, seq)
				if err != nil {
					return out, nonRetryable(ErrInvalidConfig, err)
				}
				if err := a.stopOn(ctx, inst.Name, "RESTORE DATABASE", tsql.CommandRestoreDatabase, mssql.Marker{Prefix: rm}, &out, log); err != nil {
					return out, err
				}
			}
		}
		if err := a.stopOn(ctx, inst.Name, mssql.OpCheckDB, tsql.CommandCheckDB, mssql.Marker{Prefix: cm, Whole: true}, &out, log); err != nil {
			return out, err
		}
	}
	return out, nil
}

// stopOn stops the statements op (sys.dm_exec_requests.command like
// command) of instance that m identifies and this login sent.
func (a *Activities) stopOn(ctx context.Context, instance, op, command string, m mssql.Marker, out *StopOutput, log *zap.Logger) error {
	inst, err := a.Cycle.instance(instance)
	if err != nil {
		return err
	}
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	log = log.With(zap.String("statement", op), zap.String("instance", inst.Name))
	what := fmt.Sprintf("%s on %s", op, inst.Name)
	for _, s := range mssql.Running(sqlDB.Target, m) {
		if s.Stop(stopWait) {
			out.Stopped = append(out.Stopped, what)
		} else {
			out.Left = append(out.Left, what+" still runs a minute after its attention")
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
		if mssql.Find([]mssql.Request{r}, m) == nil {
			continue
		}
		session := fmt.Sprintf("%s (session %d)", what, r.SessionID)
		if err := kill(ctx, sqlDB, r.SessionID); err != nil {
			left := session + " still runs: " + killFix(sqlDB.Target.User, err)
			log.Warn("statement left running on the SQL instance: it runs to its end", zap.Int64("session", r.SessionID),
				zap.String("fix", left), zap.Error(err))
			out.Left = append(out.Left, left)
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, stopWait)
		err = sqlDB.WaitRequest(wctx, r.SessionID, a.Cycle.poll(), nil, q, args...)
		cancel()
		if err != nil {
			out.Left = append(out.Left, session+" still runs a minute after its KILL")
			continue
		}
		log.Info("stopped the statement", zap.Int64("session", r.SessionID))
		out.Stopped = append(out.Stopped, what)
	}
	return nil
}

// killFix says why a KILL failed and what fixes it: KILL needs ALTER ANY
// CONNECTION, else error 6102 (KILL (Transact-SQL), "Permissions",
// https://learn.microsoft.com/sql/t-sql/language-elements/kill-transact-sql).
func killFix(login string, err error) string {
	var f *mssql.Failure
	if errors.As(err, &f) && slices.Contains(f.Numbers(), 6102) {
		if grant, gerr := tsql.GrantServerPermission("ALTER ANY CONNECTION", login); gerr == nil {
			return "KILL needs ALTER ANY CONNECTION: " + grant
		}
		return "KILL needs ALTER ANY CONNECTION"
	}
	return "KILL failed: " + err.Error()
}
