package recover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/logchain"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/recovery"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The restoring steps. Each re-derives from the configuration what its
// input names (the database, the target, never the source itself; the
// backup's files by their names and servers), checks every file's SHA-256
// against its manifest or chain record before SQL Server reads it, and
// looks at what an earlier attempt left before it sends anything: its
// statement still running (waited for, not sent twice), msdb's restore
// history and the target's redo LSN (a backup restored already is not
// restored again).

// session is one step's connection to the target.
type session struct {
	db    *config.Database
	inst  *config.SQLInstance
	sqlDB *mssql.DB
	log   *zap.Logger
	stop  func()
}

func (s *session) close() {
	s.sqlDB.Close()
	s.stop()
}

// open checks t against the configuration and connects to the target.
func (a *Activities) open(ctx context.Context, t Target, step string) (*session, error) {
	d := &a.Base.Cycle
	db, err := d.Database(t.Instance, t.Database)
	if err != nil {
		return nil, err
	}
	if err := tsql.CheckIdent(t.Name); err != nil {
		return nil, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("recover: the name on the target: %w", err))
	}
	inst, _, err := a.checkTarget(t, db)
	if err != nil {
		return nil, err
	}
	stop := d.KeepAlive(ctx)
	sqlDB, err := d.ConnectSQL(ctx, inst, "master")
	if err != nil {
		stop()
		return nil, err
	}
	log := activities.Logger(a.Base, ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance), zap.String("step", step),
		zap.String("target", inst.Name), zap.String("name", t.Name))
	return &session{db: db, inst: inst, sqlDB: sqlDB, log: log, stop: stop}, nil
}

// openStep is open for a step restoring s, after checkStep.
func (a *Activities) openStep(ctx context.Context, t Target, step string, s recovery.Step, kind recovery.Kind) (*session, error) {
	ses, err := a.open(ctx, t, step)
	if err != nil {
		return nil, err
	}
	if err := checkStep(ses.db, s, kind); err != nil {
		ses.close()
		return nil, err
	}
	return ses, nil
}

// checkStep refuses a step whose files are not the database's backup of
// that kind and number, or are read from a server the database does not
// use: an input names only what the configuration allows.
func checkStep(db *config.Database, s recovery.Step, kind recovery.Kind) error {
	bad := func(format string, args ...any) error {
		return activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("recover of %s: "+format, append([]any{db.ID()}, args...)...))
	}
	if s.Kind != kind || len(s.Files) == 0 || len(s.Servers) == 0 {
		return bad("the step is a %q with %d files on %d servers, want a %q with its files and servers", s.Kind, len(s.Files), len(s.Servers), kind)
	}
	if s.Dir != "" {
		if err := CheckStagingDir(s.Dir); err != nil {
			return bad("%v", err)
		}
	}
	own := db.ServersAndTargets()
	for _, srv := range s.Servers {
		if !slices.Contains(own, srv) {
			return bad("backup server %s is not one of the database's (%s)", srv, strings.Join(db.BackupServers, ", "))
		}
	}
	n := len(s.Files)
	matches := func(name func(i int) string) bool {
		for i, f := range s.Files {
			if f.Name != name(i+1) {
				return false
			}
		}
		return true
	}
	if kind == recovery.KindLog {
		names := tsql.NamesOf(db.Instance, db.Name)
		if !matches(func(i int) string { return names.LogStripe(s.Chain, s.Number, i, n) }) {
			return bad("the files of %s are not named as its log backup's", s.Name())
		}
		return nil
	}
	d := activities.SetsOf(db)
	for _, names := range d.Names() {
		if matches(func(i int) string { return names.Stripe(s.Sequence, i, n) }) {
			return nil
		}
	}
	return bad("the files of %s are not named as its stripes", s.Name())
}

// candidate is one server's way to the step's files.
type candidate struct {
	server string
	disks  []string
}

// candidates are the step's files as the target reaches them through each
// of its servers, in order.
func (a *Activities) candidates(s recovery.Step, inst string) ([]candidate, error) {
	var out []candidate
	for _, name := range s.Servers {
		srv, err := a.Base.Cycle.Server(name)
		if err != nil {
			return nil, err
		}
		out = append(out, candidate{server: name, disks: diskPaths(srv.PathsFor(inst), s.Dir, s.Files)})
	}
	return out, nil
}

// checked is the first candidate whose files all have the recorded size
// and SHA-256: a file that is not the one the backup wrote is never
// restored. A server that cannot be read gives way to the next; none
// left is HashMismatch when a file differed, else the last read error.
func (a *Activities) checked(ctx context.Context, s recovery.Step, cands []candidate, log *zap.Logger) (candidate, error) {
	var mismatch, last error
	for _, c := range cands {
		err := a.checkFiles(ctx, s, c.server)
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return candidate{}, ctx.Err()
		}
		log.Warn("backup files not usable on this server: trying the next", zap.String("server", c.server), zap.Error(err))
		var hm *hashMismatch
		if errors.As(err, &hm) {
			mismatch = err
		} else {
			last = err
		}
	}
	if mismatch != nil {
		return candidate{}, activities.NonRetryable(activities.ErrHashMismatch, mismatch)
	}
	return candidate{}, last
}

// hashMismatch is a file whose bytes are not the recorded ones.
type hashMismatch struct{ msg string }

func (h *hashMismatch) Error() string { return h.msg }

func (a *Activities) checkFiles(ctx context.Context, s recovery.Step, server string) error {
	d := &a.Base.Cycle
	srv, err := d.Server(server)
	if err != nil {
		return err
	}
	st, err := d.OpenServer(ctx, srv)
	if err != nil {
		return err
	}
	defer st.Close()
	files := st
	if s.Dir != "" {
		files = storage.Under(st, s.Dir)
	}
	for _, f := range s.Files {
		if f.SHA256 == "" {
			return &hashMismatch{fmt.Sprintf("%s: %s has no SHA-256 recorded: it cannot be checked, and is not restored", s.Name(), f.Name)}
		}
		size, sum, err := activities.HashFile(ctx, files, f.Name)
		if err != nil {
			return activities.StorageError(server, err)
		}
		if size != f.Size || sum != f.SHA256 {
			return &hashMismatch{fmt.Sprintf("%s: %s on %s has %d bytes with SHA-256 %s, its record says %d bytes, %s: it is not restored",
				s.Name(), f.Name, server, size, sum, f.Size, f.SHA256)}
		}
	}
	return nil
}

// awaitEarlier waits for a statement an earlier attempt of this step left
// running (on any of the step's servers' paths): reattached reports one.
func (a *Activities) awaitEarlier(ctx context.Context, ses *session, op, command string, markers []string, step string, n int64) (bool, error) {
	if !activities.IsRetry(ctx) {
		return false, nil
	}
	for _, m := range markers {
		waited, _, err := activities.AwaitEarlier(a.Base, ctx, activities.Statement{DB: ses.sqlDB, Op: op, Command: command, Marker: m,
			Log: ses.log, Step: step, Number: n})
		if err != nil && !activities.IsEndedUnseen(err) {
			return false, activities.SQLError(err)
		}
		if waited {
			ses.log.Info("re-attached to the "+op+" an earlier attempt left running", zap.Int64("seq", n))
			return true, nil
		}
	}
	return false, nil
}

// RestoreFull restores the plan's full into the target NORECOVERY, with
// MOVE into the plan's directories, CHECKSUM, REPLACE when asked (or over
// the database an earlier attempt of this recover left RESTORING), and the
// BACKUP's own BUFFERCOUNT and MAXTRANSFERSIZE. A full this recover
// restored already (msdb has its restore after the plan's record, into
// the database the RESTORE created) is not restored again.
func (a *Activities) RestoreFull(ctx context.Context, in RestoreFullInput) (StepOutput, error) {
	ses, err := a.openStep(ctx, in.Target, StepFull, in.Step, recovery.KindFull)
	if err != nil {
		return StepOutput{}, err
	}
	defer ses.close()
	v := in.Intent
	if v == nil || !v.On(ses.inst.Name, in.Name) || !activities.SameGUID(v.BackupSetGUID, in.Step.GUID) || v.InstanceTime.IsZero() || len(in.Moves) == 0 {
		return StepOutput{}, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
			"RestoreFull of %s into %s on %s: the input lacks the plan's record of the target or its MOVE clauses (run the Recover workflow)",
			in.Step.Name(), in.Name, ses.inst.Name))
	}
	began := time.Now()
	out := StepOutput{Bytes: in.Step.Bytes}
	cands, err := a.candidates(in.Step, ses.inst.Name)
	if err != nil {
		return out, err
	}
	markers, err := restoreMarkers(in.Name, cands)
	if err != nil {
		return out, err
	}
	if out.Reattached, err = a.awaitEarlier(ctx, ses, "RESTORE DATABASE", tsql.CommandRestoreDatabase, markers, StepFull, in.Step.Sequence); err != nil {
		return out, err
	}
	st, err := activities.DatabaseState(ctx, ses.sqlDB, in.Name)
	if err != nil {
		return out, err
	}
	last, err := activities.LastRestore(ctx, ses.sqlDB, in.Name)
	if err != nil {
		return out, err
	}
	if restoredBy(v, st, last) {
		// The RESTORE of an earlier attempt completed (seen or not).
		out.Skipped = !out.Reattached
		ses.log.Info("the full was restored by an earlier attempt: not restored again", zap.Int64("seq", in.Step.Sequence),
			zap.Int64("restore_history_id", last.HistoryID))
		return a.confirmFull(ctx, ses, in, out, began)
	}
	replace := in.Replace
	if st != nil && !replace {
		// Only a database this recover's RESTORE created and left
		// RESTORING (cut short, msdb recorded nothing) is restored over
		// without Replace.
		if _, gerr := activities.GuardOwnCopy(ctx, ses.sqlDB, ses.inst.Name, in.Name, "replaced", false, v); gerr != nil {
			return out, activities.NonRetryable(activities.ErrTargetDatabaseExists, fmt.Errorf(
				"database %q exists on %s and this recover did not create it: nothing was restored; give --replace to restore over it (%w)",
				in.Name, ses.inst.Name, gerr))
		}
		replace = true
	}
	c, err := a.checked(ctx, in.Step, cands, ses.log)
	if err != nil {
		return out, err
	}
	out.Server = c.server
	stmt, err := tsql.RestoreDatabase(tsql.RestoreOptions{Database: in.Name, Disks: c.disks, Moves: in.Moves, Checksum: true, Replace: replace,
		NoRecovery: true, BufferCount: in.BufferCount, MaxTransferSize: in.MaxTransferSize})
	if err != nil {
		return out, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	marker, _ := tsql.RestoreMarker(in.Name, c.disks[0])
	ses.log.Info("restoring the full", zap.Int64("seq", in.Step.Sequence), zap.String("server", c.server), zap.Bool("replace", replace))
	_, err = activities.RunStatement(a.Base, ctx, activities.Statement{DB: ses.sqlDB, Op: "RESTORE DATABASE", Command: tsql.CommandRestoreDatabase,
		Text: stmt, Marker: marker, Log: ses.log.With(zap.Int64("seq", in.Step.Sequence)), Step: StepFull, Number: in.Step.Sequence, Signal: true})
	if err != nil && !activities.IsEndedUnseen(err) {
		return out, a.restoreFailed(ctx, ses, in.Name, in.Step, err)
	}
	return a.confirmFull(ctx, ses, in, out, began)
}

// restoreMarkers are the texts a RESTORE DATABASE of name from each
// candidate's files starts with, to find an earlier attempt's statement.
func restoreMarkers(name string, cands []candidate) ([]string, error) {
	var markers []string
	for _, c := range cands {
		m, err := tsql.RestoreMarker(name, c.disks[0])
		if err != nil {
			return nil, activities.NonRetryable(activities.ErrInvalidConfig, err)
		}
		markers = append(markers, m)
	}
	return markers, nil
}

// restoredBy reports whether the database st, whose newest full restore
// is last, is the one the RESTORE recorded in v produced: msdb recorded a
// restore of v's set into it after that RESTORE was about to be sent (a
// higher restore_history_id than its newest then: the instance's wall
// clock may have run back since), and its id was no other database's then.
func restoredBy(v *catalog.VerifyCopy, st *mssql.DatabaseState, last *mssql.RestoreProof) bool {
	return st != nil && last != nil && activities.SameGUID(last.BackupSetGUID, v.BackupSetGUID) &&
		activities.RecordedAfter(v, last) && !slices.Contains(v.OtherDatabaseIDs, st.ID)
}

// confirmFull records what msdb and the target say after the full: the
// confirmed record the later steps are given, and where roll forward
// continues.
func (a *Activities) confirmFull(ctx context.Context, ses *session, in RestoreFullInput, out StepOutput, began time.Time) (StepOutput, error) {
	cp := *in.Intent
	if err := activities.ConfirmCopy(ctx, ses.sqlDB, &cp); err != nil {
		return out, err
	}
	rs, err := activities.RestoringState(ctx, ses.sqlDB, in.Name)
	if err != nil {
		return out, err
	}
	if rs.State != "RESTORING" || rs.RedoLSN == "" {
		return out, activities.NonRetryable(activities.ErrRestoreMismatch, fmt.Errorf(
			"%s on %s is %s after the full's RESTORE ... NORECOVERY (redo LSN %q): it no longer takes log backups; something recovered it since",
			in.Name, ses.inst.Name, rs.State, rs.RedoLSN))
	}
	out.Copy, out.RedoLSN, out.Took = &cp, rs.RedoLSN, time.Since(began)
	ses.log.Info("full restored", zap.Int64("seq", in.Step.Sequence), zap.String("redo_lsn", rs.RedoLSN), zap.Duration("took", out.Took),
		zap.Bool("skipped", out.Skipped), zap.Bool("reattached", out.Reattached))
	return out, nil
}

// ours checks that the target is still the database the full restored
// (copy): the same restore-history row and database id, not dropped and
// restored again by anyone meanwhile.
func ours(ctx context.Context, ses *session, name string, cp *catalog.VerifyCopy) (*mssql.DatabaseState, error) {
	if cp == nil || !cp.Confirmed() || !cp.On(ses.inst.Name, name) {
		return nil, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
			"recover of %s into %s on %s: the input lacks the record of the full's restore (run the Recover workflow)", ses.db.ID(), name, ses.inst.Name))
	}
	st, err := activities.DatabaseState(ctx, ses.sqlDB, name)
	if err != nil {
		return nil, err
	}
	last, err := activities.LastRestore(ctx, ses.sqlDB, name)
	if err != nil {
		return nil, err
	}
	switch {
	case st == nil:
		return nil, activities.NonRetryable(activities.ErrRestoreMismatch, fmt.Errorf("%s is gone from %s since its full was restored", name, ses.inst.Name))
	case last == nil || last.HistoryID != cp.RestoreHistoryID || st.ID != cp.DatabaseID:
		return nil, activities.NonRetryable(activities.ErrRestoreMismatch, fmt.Errorf(
			"%s on %s is no longer the database this recover restored (restore_history_id %d, database_id %d): it was restored or created again since",
			name, ses.inst.Name, cp.RestoreHistoryID, cp.DatabaseID))
	}
	return st, nil
}

// RestoreDiff restores the plan's differential into the target the full
// left RESTORING, NORECOVERY, WITH CHECKSUM, its files hash-checked as the
// full's are. A differential SQL Server takes only on top of its own base
// ("Differential Backups (SQL Server)"): the plan chose it on the full's
// backup set GUID, and SQL Server refuses any other with 3136. One an
// earlier attempt restored (the redo LSN at or past its LastLSN) is not
// restored again.
func (a *Activities) RestoreDiff(ctx context.Context, in RestoreDiffInput) (StepOutput, error) {
	ses, err := a.openStep(ctx, in.Target, StepDiff, in.Step, recovery.KindDiff)
	if err != nil {
		return StepOutput{}, err
	}
	defer ses.close()
	if _, err := ours(ctx, ses, in.Name, in.Copy); err != nil {
		return StepOutput{}, err
	}
	log := ses.log.With(zap.Int64("seq", in.Step.Sequence))
	began := time.Now()
	out := StepOutput{Bytes: in.Step.Bytes}
	cands, err := a.candidates(in.Step, ses.inst.Name)
	if err != nil {
		return out, err
	}
	markers, err := restoreMarkers(in.Name, cands)
	if err != nil {
		return out, err
	}
	if out.Reattached, err = a.awaitEarlier(ctx, ses, "RESTORE DATABASE", tsql.CommandRestoreDatabase, markers, StepDiff, in.Step.Sequence); err != nil {
		return out, err
	}
	rs, err := activities.RestoringState(ctx, ses.sqlDB, in.Name)
	if err != nil {
		return out, err
	}
	if rs.State != "RESTORING" || rs.RedoLSN == "" {
		return out, activities.NonRetryable(activities.ErrRestoreMismatch, fmt.Errorf(
			"%s on %s is %s (redo LSN %q): it no longer takes a differential; something recovered it since its full", in.Name, ses.inst.Name, rs.State, rs.RedoLSN))
	}
	done, err := restoredSince(ctx, ses.sqlDB, in.Name, in.Copy.RestoreHistoryID, in.Step)
	if err != nil {
		return out, err
	}
	if done || !logchain.LSN(rs.RedoLSN).Less(logchain.LSN(in.Step.LastLSN)) {
		out.Skipped = !out.Reattached
		out.RedoLSN, out.Took = rs.RedoLSN, time.Since(began)
		log.Info("differential restored already: not restored again", zap.Bool("in_msdb", done), zap.String("redo_lsn", rs.RedoLSN))
		return out, nil
	}
	c, err := a.checked(ctx, in.Step, cands, log)
	if err != nil {
		return out, err
	}
	out.Server = c.server
	stmt, err := tsql.RestoreDatabase(tsql.RestoreOptions{Database: in.Name, Disks: c.disks, Checksum: true, NoRecovery: true})
	if err != nil {
		return out, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	marker, _ := tsql.RestoreMarker(in.Name, c.disks[0])
	log.Info("restoring the differential", zap.String("server", c.server))
	_, err = activities.RunStatement(a.Base, ctx, activities.Statement{DB: ses.sqlDB, Op: "RESTORE DATABASE", Command: tsql.CommandRestoreDatabase,
		Text: stmt, Marker: marker, Log: log, Step: StepDiff, Number: in.Step.Sequence, Signal: true})
	if err != nil && !activities.IsEndedUnseen(err) {
		return out, a.restoreFailed(ctx, ses, in.Name, in.Step, err)
	}
	if err := completed(ctx, ses, in.Name, in.Copy.RestoreHistoryID, in.Step, err); err != nil {
		return out, err
	}
	if rs, err = activities.RestoringState(ctx, ses.sqlDB, in.Name); err != nil {
		return out, err
	}
	if rs.State != "RESTORING" || logchain.LSN(rs.RedoLSN).Less(logchain.LSN(in.Step.LastLSN)) {
		return out, activities.NonRetryable(activities.ErrRestoreMismatch, fmt.Errorf(
			"%s on %s is %s at redo LSN %s after the RESTORE of %s, which ends at LSN %s", in.Name, ses.inst.Name, rs.State, rs.RedoLSN,
			in.Step.Name(), in.Step.LastLSN))
	}
	out.RedoLSN, out.Took = rs.RedoLSN, time.Since(began)
	log.Info("differential restored", zap.String("redo_lsn", rs.RedoLSN), zap.Duration("took", out.Took))
	return out, nil
}

// RestoreLog applies one log backup to the target, NORECOVERY, with the
// plan's STOPAT (written on the source's clock, as every log of the
// sequence must give it). A log msdb says was restored into the database
// since its full, or one the redo LSN has passed, is not applied again.
func (a *Activities) RestoreLog(ctx context.Context, in RestoreLogInput) (StepOutput, error) {
	ses, err := a.openStep(ctx, in.Target, StepLogs, in.Step, recovery.KindLog)
	if err != nil {
		return StepOutput{}, err
	}
	defer ses.close()
	if _, err := ours(ctx, ses, in.Name, in.Copy); err != nil {
		return StepOutput{}, err
	}
	log := ses.log.With(zap.Int64("seq", in.Step.Number), zap.Int64("chain", in.Step.Chain), zap.Int("index", in.Index), zap.Int("count", in.Count))
	began := time.Now()
	out := StepOutput{Bytes: in.Step.Bytes}
	cands, err := a.candidates(in.Step, ses.inst.Name)
	if err != nil {
		return out, err
	}
	var stopAt time.Time
	if !in.StopAt.IsZero() {
		// STOPAT names the instant on the wall clock of the server that
		// wrote the log (the source's).
		stopAt = in.StopAt.UTC().Add(time.Duration(in.StopAtOffsetMinutes) * time.Minute)
	}
	stmtFor := func(disks []string) (string, string, error) {
		stmt, err := tsql.RestoreLog(tsql.RestoreLogOptions{Database: in.Name, Disks: disks, Recovery: tsql.LogNoRecovery, StopAt: stopAt, Checksum: true})
		if err != nil {
			return "", "", activities.NonRetryable(activities.ErrInvalidConfig, err)
		}
		marker, _, _ := strings.Cut(stmt, " WITH ")
		return stmt, marker, nil
	}
	var markers []string
	for _, c := range cands {
		_, m, err := stmtFor(c.disks)
		if err != nil {
			return out, err
		}
		markers = append(markers, m)
	}
	if out.Reattached, err = a.awaitEarlier(ctx, ses, "RESTORE LOG", tsql.CommandRestoreLog, markers, StepLogs, in.Step.Number); err != nil {
		return out, err
	}
	done, err := restoredSince(ctx, ses.sqlDB, in.Name, in.Copy.RestoreHistoryID, in.Step)
	if err != nil {
		return out, err
	}
	rs, err := activities.RestoringState(ctx, ses.sqlDB, in.Name)
	if err != nil {
		return out, err
	}
	if rs.State != "RESTORING" || rs.RedoLSN == "" {
		return out, activities.NonRetryable(activities.ErrRestoreMismatch, fmt.Errorf(
			"%s on %s is %s (redo LSN %q): it no longer takes log backups; something recovered it since its full", in.Name, ses.inst.Name, rs.State, rs.RedoLSN))
	}
	redo := logchain.LSN(rs.RedoLSN)
	if done || !redo.Less(logchain.LSN(in.Step.LastLSN)) {
		out.Skipped = !out.Reattached
		out.RedoLSN, out.Reached, out.Took = rs.RedoLSN, !stopAt.IsZero() && redo.Less(logchain.LSN(in.Step.LastLSN)), time.Since(began)
		log.Info("log backup restored already: not applied again", zap.Bool("in_msdb", done), zap.String("redo_lsn", rs.RedoLSN))
		return out, nil
	}
	if redo.Less(logchain.LSN(in.Step.FirstLSN)) {
		return out, activities.NonRetryable(activities.ErrRestoreMismatch, fmt.Errorf(
			"%s on %s stands at LSN %s, before %s begins (LSN %s): the log before it was not applied", in.Name, ses.inst.Name, rs.RedoLSN,
			in.Step.Name(), in.Step.FirstLSN))
	}
	c, err := a.checked(ctx, in.Step, cands, log)
	if err != nil {
		return out, err
	}
	out.Server = c.server
	stmt, marker, err := stmtFor(c.disks)
	if err != nil {
		return out, err
	}
	_, err = activities.RunStatement(a.Base, ctx, activities.Statement{DB: ses.sqlDB, Op: "RESTORE LOG", Command: tsql.CommandRestoreLog,
		Text: stmt, Marker: marker, Log: log, Step: StepLogs, Number: in.Step.Number})
	switch {
	case err == nil, activities.IsEndedUnseen(err), mssql.HasNumber(err, 4326):
		// 4326: applied already (an attempt that ended unseen).
	case mssql.HasNumber(err, 4335):
		// "The specified STOPAT time is too early. All or part of the
		// database is already rolled forward beyond that point" ("Database
		// Engine events and errors (4000 to 4999)",
		// https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-4000-to-4999):
		// the same on every attempt.
		return out, activities.NonRetryable(activities.ErrRecoveryPointUnreachable, fmt.Errorf(
			"%s into %s on %s: SQL Server refuses STOPAT %s as before the point the copy already reached (the source's clock went back since "+
				"the full?); recover to a later point or to the latest: %w", in.Step.Name(), in.Name, ses.inst.Name, stopAt.Format("2006-01-02T15:04:05.000"), err))
	default:
		return out, a.restoreFailed(ctx, ses, in.Name, in.Step, err)
	}
	// One cut short applied nothing, and the redo LSN it left short of the
	// log's end is no STOPAT reached inside it.
	if err := completed(ctx, ses, in.Name, in.Copy.RestoreHistoryID, in.Step, err); err != nil {
		return out, err
	}
	if rs, err = activities.RestoringState(ctx, ses.sqlDB, in.Name); err != nil {
		return out, err
	}
	// Stopped inside this log (its redo point short of its end): the
	// point is reached, no later log applies.
	out.RedoLSN, out.Reached, out.Took = rs.RedoLSN, !stopAt.IsZero() && logchain.LSN(rs.RedoLSN).Less(logchain.LSN(in.Step.LastLSN)), time.Since(began)
	log.Info("log backup applied", zap.String("server", c.server), zap.String("redo_lsn", rs.RedoLSN), zap.Bool("reached", out.Reached),
		zap.Duration("took", out.Took))
	return out, nil
}

// restoreFailed is the error of the RESTORE of step s into name that
// SQL Server failed with err. A backup the target's version cannot read
// (3169, or 3241 from a newer build than the target's: the step's
// recorded build, else the source's now) is InvalidConfig naming the
// versions, never CorruptBackup: it says nothing about the backup, and a
// recover to another instance restores it. Anything else is as
// activities.SQLError classifies it.
func (a *Activities) restoreFailed(ctx context.Context, ses *session, name string, s recovery.Step, err error) error {
	why, fix, verr := activities.VersionRefusal(a.Base, ctx, ses.sqlDB, ses.db, ses.inst.Name, s.SoftwareVersion, false, err)
	switch {
	case verr != nil:
		return verr
	case why == "":
		return activities.SQLError(err)
	}
	return activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
		"%s into %s on %s: the instance cannot read it, which says nothing about the backup: %s; %s, or recover to an instance that can (--to-instance): %w",
		s.Name(), name, ses.inst.Name, why, fix, err))
}

// FinishRecover ends the restore sequence: RESTORE DATABASE ... WITH
// RECOVERY (unless NoRecovery), which brings the database online at the
// point reached; a database an earlier attempt recovered is left as it
// is. It reports the log backups msdb says were restored into it.
func (a *Activities) FinishRecover(ctx context.Context, in FinishInput) (FinishOutput, error) {
	ses, err := a.open(ctx, in.Target, StepFinish)
	if err != nil {
		return FinishOutput{}, err
	}
	defer ses.close()
	st, err := ours(ctx, ses, in.Name, in.Copy)
	if err != nil {
		return FinishOutput{}, err
	}
	began := time.Now()
	if st.State == "RESTORING" && !in.NoRecovery {
		stmt, err := tsql.RecoverDatabase(in.Name)
		if err != nil {
			return FinishOutput{}, activities.NonRetryable(activities.ErrInvalidConfig, err)
		}
		if _, err := ses.sqlDB.Run(ctx, "RESTORE DATABASE WITH RECOVERY", stmt, nil); err != nil && !mssql.HasNumber(err, 3153) {
			// 3153: recovered already (an attempt that ended unseen).
			return FinishOutput{}, activities.SQLError(err)
		}
	}
	rs, err := activities.RestoringState(ctx, ses.sqlDB, in.Name)
	if err != nil {
		return FinishOutput{}, err
	}
	applied, err := restoredLogs(ctx, ses.sqlDB, in.Name, in.Copy.RestoreHistoryID)
	if err != nil {
		return FinishOutput{}, err
	}
	out := FinishOutput{State: rs.State, RedoLSN: rs.RedoLSN, Took: time.Since(began)}
	for _, l := range applied {
		out.LogsRestored = append(out.LogsRestored, l.BackupSetGUID)
	}
	ses.log.Info("recover finished", zap.String("state", out.State), zap.Int("logs", len(out.LogsRestored)))
	return out, nil
}

// restoredLogs are the log backups msdb says were restored into name
// after restore-history row after.
func restoredLogs(ctx context.Context, sqlDB *mssql.DB, name string, after int64) ([]mssql.RestoredLog, error) {
	return restoredOfType(ctx, sqlDB, name, after, tsql.RestoreTypeLog)
}

// restoredSince reports whether msdb says step s (a log or a
// differential) was restored into name after restore-history row after
// (the recover's full): a RESTORE that completed, seen or not. It asks
// for s's backup set alone: a step reads the same whatever the number of
// logs restored before it, and a retry on another worker finds it as
// the first attempt would.
func restoredSince(ctx context.Context, sqlDB *mssql.DB, name string, after int64, s recovery.Step) (bool, error) {
	typ := tsql.RestoreTypeLog
	if s.Kind == recovery.KindDiff {
		typ = tsql.RestoreTypeDifferential
	}
	if strings.TrimSpace(s.GUID) == "" {
		// No GUID recorded: msdb cannot name it; the redo LSN decides.
		return false, nil
	}
	q, args, err := tsql.RestoredBackup(name, after, typ, s.GUID)
	if err != nil {
		return false, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("%s: %w", s.Name(), err))
	}
	rs, err := sqlDB.RestoredLogs(ctx, q, args...)
	if err != nil {
		return false, activities.SQLError(err)
	}
	return slices.ContainsFunc(rs, func(r mssql.RestoredLog) bool { return activities.SameGUID(r.BackupSetGUID, s.GUID) }), nil
}

// completed checks the RESTORE of step s (a log or a differential) into
// name once RunStatement returned err. A RESTORE whose connection was
// lost (activities.IsEndedUnseen) ran on and has ended since, the target
// may have crashed and come back meanwhile: only msdb's restore history
// tells whether it completed. One that did not restored nothing: the step
// fails (retryable, as the lost connection) and its retry restores it;
// one that did is not restored again (restoredSince, on the retry too).
func completed(ctx context.Context, ses *session, name string, after int64, s recovery.Step, err error) error {
	if !activities.IsEndedUnseen(err) {
		return nil
	}
	done, aerr := restoredSince(ctx, ses.sqlDB, name, after, s)
	switch {
	case aerr != nil:
		return aerr
	case !done:
		return activities.SQLError(fmt.Errorf("%s into %s on %s did not complete (msdb has no restore of it): %w", s.Name(), name, ses.inst.Name, err))
	}
	ses.log.Info("the RESTORE that outlived its connection completed (msdb has its restore)", zap.String("backup", s.Name()))
	return nil
}

// restoredOfType are the backups of restore type typ msdb says were
// restored into name after restore-history row after.
func restoredOfType(ctx context.Context, sqlDB *mssql.DB, name string, after int64, typ string) ([]mssql.RestoredLog, error) {
	q, args, err := tsql.RestoredBackups(name, after, typ)
	if err != nil {
		return nil, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	l, err := sqlDB.RestoredLogs(ctx, q, args...)
	if err != nil {
		return nil, activities.SQLError(err)
	}
	return l, nil
}
