package activities

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/metrics"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// verifyTarget resolves the remote server, its verification instance and
// the restored copy's name.
func (a *Activities) verifyTarget(in VerifyInput) (*config.Database, *config.BackupServer, *config.SQLInstance, string, error) {
	d := &a.Cycle
	db, err := d.database(in.Instance, in.Database, in.Entry)
	if err != nil {
		return nil, nil, nil, "", err
	}
	// Only a copy target of the database verifies its sets.
	srv, err := d.verifyServer(db, "verification server", in.Server)
	if err != nil {
		return nil, nil, nil, "", err
	}
	if srv.VerifyInstance == "" {
		return nil, nil, nil, "", nonRetryable(ErrInvalidConfig, fmt.Errorf("backup server %s has no verify_instance to restore %s on", srv.Name, db.ID()))
	}
	inst, err := d.instance(srv.VerifyInstance)
	if err != nil {
		return nil, nil, nil, "", err
	}
	name := db.VerifyDatabaseName(in.Sequence)
	if err := tsql.CheckIdent(name); err != nil {
		return nil, nil, nil, "", nonRetryable(ErrInvalidConfig, fmt.Errorf("verify_name of %s gives %q: %w", db.ID(), name, err))
	}
	return db, srv, inst, name, nil
}

// Restore restores the set from the REMOTE copies on the remote server's
// verification instance: FILELISTONLY, every file moved into the restore
// directories, RESTORE DATABASE ... WITH CHECKSUM, REPLACE, STATS; the
// restore is confirmed in msdb: a new restore-history row whose backup set
// GUID is the one the manifest recorded (else RestoreMismatch). REPLACE only
// ever replaces a copy backupcycle restored (else VerifyDatabaseInUse, and
// nothing is replaced, see owncopy.go); what it is about to restore is
// recorded in the manifest before the RESTORE is sent, and the sessions in
// the copy it replaces are forced out first, each one logged.
func (a *Activities) Restore(ctx context.Context, in VerifyInput) (StepOutput, error) {
	db, srv, inst, verifyDB, err := a.verifyTarget(in)
	if err != nil {
		return StepOutput{}, err
	}
	log := a.loggerFor(ctx).With(zap.String("db", db.Name), zap.Int64("seq", in.Sequence), zap.String("server", srv.Name),
		zap.String("step", StepRestore))
	m, err := a.loadSet(ctx, srv, db, in.Sequence)
	if err != nil {
		return StepOutput{}, err
	}
	if m.State == catalog.StateFailed {
		return StepOutput{}, nonRetryable(ErrCorruptBackup, fmt.Errorf("set %d of %s is marked failed on %s: it is never restored", in.Sequence, db.ID(), srv.Name))
	}
	if err := remoteHolder(m, db, in.Sequence, srv.Name); err != nil {
		return StepOutput{}, err
	}
	want, err := expectedSetGUID(m, db, in.Sequence, srv.Name)
	if err != nil {
		return StepOutput{}, err
	}
	if m.IsDifferential() {
		return a.restoreDifferential(ctx, in, db, srv, inst, verifyDB, m, want)
	}
	layout, err := tsql.Layout(srv.PathsFor(inst.Name), m.Names(), in.Sequence, len(m.Stripes))
	if err != nil {
		return StepOutput{}, nonRetryable(ErrInvalidConfig, err)
	}
	disks := tsql.Paths(layout)
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		return StepOutput{}, err
	}
	defer sqlDB.Close()
	before, err := lastRestoreProof(ctx, sqlDB, verifyDB)
	if err != nil {
		return StepOutput{}, err
	}
	rep := a.newReporter(ctx, StepRestore, in.Sequence)
	// rec is this set's record of a RESTORE into the copy; unconfirmed, an
	// earlier attempt or run sent it (or was about to), and it may still
	// run or have ended unseen.
	var rec *catalog.VerifyCopy
	if m.VerifyCopy.On(inst.Name, verifyDB) && sameGUID(m.VerifyCopy.BackupSetGUID, want) {
		rec = m.VerifyCopy
	}
	sentEarlier := rec != nil && !rec.Confirmed()
	// startedInto is "restore started into X" for this attempt's
	// heartbeats, for people reading the run.
	var intoMu sync.Mutex
	startedInto := ""
	if sentEarlier {
		startedInto = verifyDB
	}
	details := func(p float64, b int64) any {
		intoMu.Lock()
		defer intoMu.Unlock()
		return RestoreHeartbeat{StepProgress: StepProgress{Step: StepRestore, Sequence: in.Sequence, Percent: p, Bytes: b}, StartedInto: startedInto}
	}
	// Heartbeats start with the first wait: the first heartbeat of an
	// attempt is sent at once, later ones are batched by the SDK, so a fresh
	// restore starts them only once "restore started into X" is set.
	stop := func() {}
	beating := false
	beat := func() {
		if !beating {
			beating = true
			stop = rep.every(a.Cycle.poll(), nil, details)
			return
		}
		p, b := rep.get()
		heartbeat(ctx, details(p, b))
	}
	defer func() { stop() }()
	start := time.Now()

	marker, err := tsql.RestoreMarker(verifyDB, disks[0])
	if err != nil {
		return StepOutput{}, nonRetryable(ErrInvalidConfig, err)
	}
	ls := &longStatement{db: sqlDB, op: "RESTORE DATABASE", command: tsql.CommandRestoreDatabase, marker: mssql.Marker{Prefix: marker},
		log: log}

	restored := false
	if isRetry(ctx) || sentEarlier {
		// An earlier attempt's (or run's) RESTORE of this set into this
		// copy may still run (worker stopped, Temporal away): follow it,
		// never start a second one over it.
		found, err := ls.find(ctx)
		if err != nil {
			return StepOutput{}, err
		}
		switch {
		case found.local != nil:
			log.Info("re-attaching to the RESTORE this worker still runs")
			beat()
			res, err := a.wait(ctx, ls, found, rep)
			if err != nil && !restoredUnseen(ctx, sqlDB, verifyDB, before, err) {
				return StepOutput{}, a.restoreFailed(ctx, sqlDB, db, inst.Name, m, err)
			}
			if res.Summary != nil {
				rep.set(100, res.Summary.Bytes())
			}
			restored = true
		case found.session > 0:
			log.Info("re-attaching to the running RESTORE", zap.Int64("session", found.session))
			beat()
			if _, err := a.wait(ctx, ls, found, rep); err != nil {
				return StepOutput{}, err
			}
			// Whether it completed is read from msdb below, by GUID.
			after, err := lastRestoreProof(ctx, sqlDB, verifyDB)
			restored = err == nil && after != nil && (before == nil || after.HistoryID != before.HistoryID)
		case sentEarlier && before != nil && sameGUID(before.BackupSetGUID, want):
			// The recorded RESTORE finished while no worker watched it: the
			// copy online is the database it produced (owner, id, created
			// after the record) and msdb recorded it after the record. It
			// is not restored twice (CHECKDB proves it again before it
			// counts).
			if st, err := databaseState(ctx, sqlDB, verifyDB); err == nil && st != nil && st.State == "ONLINE" &&
				st.OwnerSID == st.LoginSID && finishedBy(rec, st, before) {
				log.Info("restore finished while no worker watched it: not running it again",
					zap.Int64("restore_history_id", before.HistoryID))
				restored = true
			}
		}
		if restored {
			before = nil
		} else if sentEarlier && found.local == nil && found.session == 0 && found.blind {
			// An earlier attempt started a RESTORE into this copy and it
			// is still RESTORING: this login cannot see whether that
			// RESTORE runs on, so no second one is sent over it.
			if st, err := databaseState(ctx, sqlDB, verifyDB); err == nil && st != nil && st.State == "RESTORING" {
				return StepOutput{}, blindError(ls, nil)
			}
		}
	}
	if !restored {
		moves, err := a.hostedMoves(ctx, sqlDB, db, srv, inst.Name, verifyDB, layout, m, log)
		if err != nil {
			return StepOutput{}, err
		}
		// No STATS: a progress message is a network write, and SQL Server
		// stops the RESTORE of a vanished client at its next write; without
		// them it survives a worker restart. Progress is read from
		// sys.dm_exec_requests instead.
		// NEW_BROKER: the copy must not deliver its source's queued Service
		// Broker messages to production routes (tsql.RestoreOptions).
		stmt, err := tsql.RestoreDatabase(tsql.RestoreOptions{Database: verifyDB, Disks: disks, Moves: moves,
			Checksum: true, Replace: true, NewBroker: true})
		if err != nil {
			return StepOutput{}, nonRetryable(ErrInvalidConfig, err)
		}
		ls.text = stmt
		// REPLACE destroys whatever has the name: only ever a copy
		// backupcycle restored.
		old, err := a.guardCopy(ctx, sqlDB, db, inst.Name, verifyDB, "replaced", srv.Name)
		if err != nil {
			return StepOutput{}, err
		}
		// What is about to be restored is recorded first, where it
		// outlives the verification instance and this worker.
		intent, err := copyIntent(ctx, sqlDB, inst.Name, verifyDB, want, old, a.Cycle.now())
		if err != nil {
			return StepOutput{}, err
		}
		if _, err := a.updateManifest(ctx, db, in.Sequence, holders(m, srv.Name), []string{srv.Name}, func(m *catalog.Manifest) error {
			if m == nil {
				return storageError(srv.Name, fmt.Errorf("manifest of seq %d missing: %w", in.Sequence, storage.ErrNotFound))
			}
			m.VerifyCopy = intent
			return nil
		}); err != nil {
			return StepOutput{}, err
		}
		single := false
		if old != nil && old.State == "ONLINE" {
			if single, err = forceOut(ctx, sqlDB, inst.Name, verifyDB, log); err != nil {
				return StepOutput{}, err
			}
		}
		intoMu.Lock()
		startedInto = verifyDB
		intoMu.Unlock()
		beat()
		log.Info("restore starting", zap.String("verify_db", verifyDB), zap.Int("files", len(moves)))
		s, err := ls.start(ctx)
		if err != nil {
			undoSingleUser(ctx, sqlDB, single, old, inst.Name, verifyDB, log)
			return StepOutput{}, err
		}
		res, err := a.wait(ctx, ls, running{local: s}, rep)
		if err != nil && !restoredUnseen(ctx, sqlDB, verifyDB, before, err) {
			undoSingleUser(ctx, sqlDB, single, old, inst.Name, verifyDB, log)
			if apart := a.locationApart(ctx, srv, inst.Name, layout, err); apart != nil {
				return StepOutput{}, apart
			}
			return StepOutput{}, a.restoreFailed(ctx, sqlDB, db, inst.Name, m, err)
		}
		if res.Summary != nil {
			rep.set(100, res.Summary.Bytes())
		}
	}
	after, err := lastRestoreProof(ctx, sqlDB, verifyDB)
	if err != nil {
		return StepOutput{}, err
	}
	if after == nil || (before != nil && after.HistoryID == before.HistoryID) {
		return StepOutput{}, temporal.NewApplicationError(fmt.Sprintf(
			"RESTORE of %s seq %d into %s on %s reported success but msdb.dbo.restorehistory has no new row", db.ID(), in.Sequence, verifyDB, inst.Name),
			ErrRestoreNotRecorded)
	}
	if !sameGUID(after.BackupSetGUID, want) {
		// A re-attached RESTORE that was another cycle's, or a restore that
		// raced ours: the copy is not this set.
		return StepOutput{}, restoreMismatch(verifyDB, inst.Name, in.Sequence, db, want, after.BackupSetGUID,
			fmt.Sprintf("restore_history_id %d, backup set %q", after.HistoryID, after.BackupSetName))
	}
	// The database the RESTORE produced, as the instance shows it now.
	copied, err := databaseState(ctx, sqlDB, verifyDB)
	if err != nil {
		return StepOutput{}, err
	}
	if copied == nil || copied.State != "ONLINE" {
		return StepOutput{}, retryable(ErrSQLHostUnreachable, fmt.Errorf("restored copy %s is gone from %s, or not online (%+v): restore it again", verifyDB, inst.Name, copied))
	}
	base := settleCopy(ctx, sqlDB, ls, copied, inst.Name, verifyDB, log)
	out := StepOutput{VerifyDatabase: verifyDB, Duration: time.Since(start)}
	_, out.Bytes = rep.get()
	now := a.Cycle.now()
	_, err = a.updateManifest(ctx, db, in.Sequence, holders(m, srv.Name), []string{srv.Name}, func(m *catalog.Manifest) error {
		if m == nil {
			return storageError(srv.Name, fmt.Errorf("manifest of seq %d missing: %w", in.Sequence, storage.ErrNotFound))
		}
		m.VerifyDB = verifyDB
		v := m.VerifyCopy
		if !v.On(inst.Name, verifyDB) || !sameGUID(v.BackupSetGUID, want) {
			// A RESTORE found rather than sent (recorded by an older
			// build): its start on the instance's clock is not known.
			v = &catalog.VerifyCopy{VerifyInstance: inst.Name, VerifyDatabase: verifyDB, BackupSetGUID: want, SentAt: now.UTC()}
		}
		v.RestoreHistoryID, v.DatabaseID, v.DatabaseCreated, v.ConfirmedAt = after.HistoryID, copied.ID, copied.Created, copied.Now
		v.CheckDBBaseline = base
		m.VerifyCopy = v
		_ = m.SetTiming(catalog.StepRestore, now.Add(-out.Duration), now)
		return advanceOrKeep(m, catalog.StateRestored, now)
	})
	if err != nil {
		return StepOutput{}, err
	}
	log.Info("restore done", zap.String("verify_db", verifyDB), zap.Duration("duration", out.Duration))
	a.recorder().StepDone(metrics.StepRestore, db.Instance, db.Name, srv.Name, 0, out.Duration)
	return out, nil
}

// hostedMoves are the MOVE clauses that restore set m (its stripes at
// layout on srv) as verifyDB on instance, once the instance showed it can
// host the copy (verifyhost.go): what it cannot is found before SQL Server
// is asked to restore it. A stripe the instance does not find where the
// worker sees it is the configuration's (locationApart), a set the
// instance cannot read its version's or certificate's (unreadable).
func (a *Activities) hostedMoves(ctx context.Context, sqlDB *mssql.DB, db *config.Database, srv *config.BackupServer, instance, verifyDB string,
	layout []tsql.Stripe, m *catalog.Manifest, log *zap.Logger) ([]tsql.Move, error) {
	disks := tsql.Paths(layout)
	facts, factsRead := hostFacts(ctx, sqlDB, instance, log)
	if factsRead {
		if err := checkHostPaths(instance, facts, srv); err != nil {
			return nil, err
		}
	}
	fq, err := tsql.RestoreFileListOnly(disks)
	if err != nil {
		return nil, nonRetryable(ErrInvalidConfig, err)
	}
	files, err := sqlDB.FileListOnly(ctx, fq)
	if err != nil {
		if apart := a.locationApart(ctx, srv, instance, layout, err); apart != nil {
			return nil, apart
		}
		if u := a.unreadable(ctx, sqlDB, db, instance, m, err); u != nil {
			return nil, u
		}
		return nil, sqlError(err)
	}
	if factsRead {
		if err := a.checkVerifyHost(ctx, sqlDB, facts, db, srv, instance, verifyDB, disks, files, log); err != nil {
			return nil, err
		}
	}
	return movesOf(verifyDB, srv, files)
}

// movesOf are the MOVE clauses that put the files of a set (its RESTORE
// FILELISTONLY) restored as name into srv's restore directories.
func movesOf(name string, srv *config.BackupServer, files []mssql.FileListEntry) ([]tsql.Move, error) {
	rows := make([]tsql.FileListRow, len(files))
	for i, f := range files {
		rows[i] = tsql.FileListRow{LogicalName: f.LogicalName, PhysicalName: f.PhysicalName, Type: f.Type, FileID: f.FileID}
	}
	moves, err := tsql.Moves(name, rows, srv.RestoreDataDir, srv.RestoreLogDir)
	if err != nil {
		return nil, nonRetryable(ErrInvalidConfig, fmt.Errorf("backup server %s: %w", srv.Name, err))
	}
	return moves, nil
}

// settleCopy makes the restored copy st MULTI_USER when it is not, and
// reads what it says before any CHECKDB of it, recorded with the restore:
// the baseline CheckDB judges a CHECKDB that ended unseen by (nil when not
// read: such a CHECKDB then runs again).
func settleCopy(ctx context.Context, sqlDB *mssql.DB, ls *longStatement, st *mssql.DatabaseState, instance, verifyDB string,
	log *zap.Logger) *CheckDBBaseline {
	if err := multiUser(ctx, sqlDB, st, instance, verifyDB, log); err != nil {
		log.Warn("verification copy left as restored", zap.String("verify_db", verifyDB), zap.String("user_access", st.UserAccess), zap.Error(err))
	}
	base, err := checkDBBaseline(ctx, ls, verifyDB)
	if err != nil {
		log.Warn("CHECKDB baseline not read: a CHECKDB of the copy that ends unseen runs again", zap.String("verify_db", verifyDB), zap.Error(err))
		return nil
	}
	return base
}

// undoSingleUser makes the copy MULTI_USER again when this attempt set it
// SINGLE_USER (forceOut) and its RESTORE failed before touching it: the
// copy old is still there, online, as it was. Best effort: the next
// RESTORE replaces it anyway.
func undoSingleUser(ctx context.Context, sqlDB *mssql.DB, single bool, old *mssql.DatabaseState, instance, verifyDB string, log *zap.Logger) {
	if !single || ctx.Err() != nil {
		return
	}
	st, err := databaseState(ctx, sqlDB, verifyDB)
	if err != nil || st == nil || st.State != "ONLINE" || st.ID != old.ID || !st.Created.Equal(old.Created) {
		return
	}
	if err := multiUser(ctx, sqlDB, st, instance, verifyDB, log); err != nil {
		log.Warn("verification copy left SINGLE_USER after its replacement failed", zap.String("verify_db", verifyDB), zap.Error(err))
	}
}

// locationApart is the configuration error behind a RESTORE that does not
// find a stripe the worker sees: the instance's paths to the server (where the
// verification instance looks) and its location (where the worker copied
// the set) are different directories. nil when err is something else or
// the worker misses a stripe too (the set is incomplete: CorruptBackup).
// A worker that cannot reach the server to look has confirmed nothing: the
// server's failure, retried, never evidence against the set.
func (a *Activities) locationApart(ctx context.Context, srv *config.BackupServer, verifyInstance string, layout []tsql.Stripe, err error) error {
	if ctx.Err() != nil || !mssql.MissingFile(err) || len(layout) == 0 {
		return nil
	}
	st, oerr := a.Cycle.openStorage(ctx, srv)
	if oerr != nil {
		return oerr // InvalidConfig or BackupTargetUnreachable: no evidence
	}
	defer st.Close()
	for _, s := range layout {
		_, serr := st.Stat(ctx, s.Name)
		switch {
		case errors.Is(serr, storage.ErrNotFound), errors.Is(serr, fs.ErrNotExist):
			return nil
		case serr != nil:
			return retryable(ErrBackupTargetUnreachable, fmt.Errorf(
				"backup server %s: verification instance %s does not find a stripe of the set (%v), and the worker cannot reach the server to confirm it: %w",
				srv.Name, verifyInstance, err, serr))
		}
	}
	key := srv.PathsKey(verifyInstance)
	return nonRetryable(ErrInvalidConfig, fmt.Errorf(
		"backup server %s: verification instance %s does not find the set's stripes under %s %s (e.g. %s), "+
			"but the worker sees all of them in location %s: %s and location must be the same directory, "+
			"as SQL Server and as the worker reach it; fix the one that points elsewhere (the verification instance "+
			"must reach every path it has to the servers it verifies): %w",
		srv.Name, verifyInstance, key, strings.Join(srv.PathsFor(verifyInstance), ", "), layout[0].Path, srv.Location, key, err))
}

// restoredUnseen reports a RESTORE that outlived its lost connection (see
// followLost) and completed: msdb has a restore-history row for verifyDB
// newer than before (whose set is checked by the caller).
func restoredUnseen(ctx context.Context, sqlDB *mssql.DB, verifyDB string, before *mssql.RestoreProof, err error) bool {
	if !isEndedUnseen(err) {
		return false
	}
	after, perr := lastRestoreProof(ctx, sqlDB, verifyDB)
	return perr == nil && after != nil && (before == nil || after.HistoryID != before.HistoryID)
}

// restoreFailed classifies a RESTORE that did not complete: a verification
// instance that cannot read set m is InvalidConfig (unreadable), neither
// evidence nor an outage; an attempt that ended with its statement left
// running (or cancelled) passes as it is.
func (a *Activities) restoreFailed(ctx context.Context, sqlDB *mssql.DB, db *config.Database, verify string, m *catalog.Manifest, err error) error {
	if ctx.Err() != nil {
		return err
	}
	if u := a.unreadable(ctx, sqlDB, db, verify, m, err); u != nil {
		return u
	}
	return sqlError(err)
}
