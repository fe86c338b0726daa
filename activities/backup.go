package activities

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/metrics"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// BackupHeartbeat is what Backup records in its heartbeats.
type BackupHeartbeat struct {
	Started bool    `json:"started"`
	Percent float64 `json:"percent"`
	Bytes   int64   `json:"bytes"`
}

// Backup runs BACKUP DATABASE ... WITH CHECKSUM, INIT, FORMAT to the
// stripes of one sequence on one backup server, heartbeating percent and the
// bytes on the share. A retry first looks for its statement still running
// (sys.dm_exec_requests) and waits for it, and recognises a backup that
// finished unseen (RESTORE HEADERONLY), instead of starting another one.
func (a *Activities) Backup(ctx context.Context, in BackupInput) (BackupOutput, error) {
	d := &a.Cycle
	db, err := d.sourceDatabase(in.Instance, in.Database, in.Entry, in.Replica)
	if err != nil {
		return BackupOutput{}, err
	}
	inst, err := d.instance(db.Source())
	if err != nil {
		return BackupOutput{}, err
	}
	// Only a server of the database's rotation, in the mode and with at
	// most the stripes the configuration allows (inputs.go).
	srv, err := d.rotationServer(db, "backup server", in.Server)
	if err != nil {
		return BackupOutput{}, err
	}
	log := a.loggerFor(ctx).With(zap.String("db", db.Name), zap.Int64("seq", in.Sequence), zap.String("server", srv.Name),
		zap.String("step", StepBackup))
	// The plan's mode: no COMPRESSION where the edition refuses it, COPY_ONLY
	// for a read-only source (backupMode), never wider than configured.
	mode, err := runMode(db, in.Mode)
	if err != nil {
		return BackupOutput{}, err
	}
	mts := int(db.MaxTransferSize)
	if mode.MaxTransferSize > 0 { // a TDE database on 2016/2017 (backupMode)
		mts = mode.MaxTransferSize
	}
	if err := checkStripes(db, in.Stripes, mts); err != nil {
		return BackupOutput{}, err
	}
	// done records the MAXTRANSFERSIZE sent in a finished backup's output
	// (the manifest's options).
	done := func(out BackupOutput, err error) (BackupOutput, error) {
		if err == nil {
			out.MaxTransferSize = mts
		}
		return out, err
	}
	statement := func(names tsql.SetNames) ([]tsql.Stripe, string, error) {
		layout, err := tsql.Layout(srv.PathsFor(inst.Name), names, in.Sequence, in.Stripes)
		if err != nil {
			return nil, "", nonRetryable(ErrInvalidConfig, err)
		}
		stmt, err := tsql.BackupDatabase(tsql.BackupOptions{
			Database: db.Name, Disks: tsql.Paths(layout), Checksum: true, Init: true, Format: true,
			Compression: &mode.Compression, CopyOnly: mode.CopyOnly, Differential: mode.Differential != nil,
			BufferCount: db.BufferCount, MaxTransferSize: mts, BlockSize: int(db.BlockSize),
			Name: tsql.BackupSetName(in.Sequence), Encryption: db.Encryption.Backup(),
		})
		if err != nil {
			return nil, "", nonRetryable(ErrInvalidConfig, err)
		}
		return layout, stmt, nil
	}
	layout, stmt, err := statement(tsql.NamesOf(db.Instance, db.Name))
	if err != nil {
		return BackupOutput{}, err
	}
	st, err := d.openStorage(ctx, srv)
	if err != nil {
		return BackupOutput{}, unconfirmed(ctx, in.Sequence, err)
	}
	defer st.Close()
	sqlDB, err := d.openSQL(ctx, inst, "master")
	if err != nil {
		return BackupOutput{}, err
	}
	defer sqlDB.Close()
	// SQL Server's paths and the worker's location must be one directory
	// before anything is written (probe.go).
	if err := a.checkBackupPaths(ctx, sqlDB, st, inst, srv, log); err != nil {
		return BackupOutput{}, unconfirmed(ctx, in.Sequence, err)
	}
	// Claim the number on this server before anything is written: INIT,
	// FORMAT would overwrite whatever holds these file names.
	names, resumed, err := a.claimSet(ctx, st, db, srv.Name, in.Sequence, mode.Differential)
	if err != nil {
		return BackupOutput{}, unconfirmed(ctx, in.Sequence, err)
	}
	if names.Legacy {
		// This run's claim was written by the build before file names were
		// made case-safe (a cycle in flight across the upgrade): its set
		// keeps the names the claim gave it.
		if layout, stmt, err = statement(names); err != nil {
			return BackupOutput{}, err
		}
	}

	rep := a.newReporter(ctx, StepBackup, in.Sequence)
	sizes := func() int64 {
		var n int64
		for _, s := range layout {
			if fi, err := st.Stat(ctx, s.Name); err == nil {
				n += fi.Size
			}
		}
		return n
	}
	start := time.Now()
	stop := rep.every(d.poll(), sizes, func(p float64, b int64) any {
		return BackupHeartbeat{Started: true, Percent: p, Bytes: b}
	})
	defer stop()

	marker, err := tsql.BackupMarker(db.Name, layout[0].Path)
	if err != nil {
		return BackupOutput{}, nonRetryable(ErrInvalidConfig, err)
	}
	ls := &longStatement{db: sqlDB, op: "BACKUP DATABASE", command: tsql.CommandBackupDatabase, text: stmt,
		marker: mssql.Marker{Prefix: marker}, log: log}

	// A retry, or the same set again (the workflow waited for files an
	// earlier BACKUP held): is our BACKUP still running, or did it finish
	// unseen?
	var res mssql.Result
	attached, blind := false, false
	if isRetry(ctx) || resumed {
		found, err := ls.find(ctx)
		if err != nil {
			return BackupOutput{}, err
		}
		switch {
		case found.local != nil:
			log.Info("re-attaching to the BACKUP this worker still runs")
			start = found.local.Started()
			res, err = a.wait(ctx, ls, found, rep)
			if isEndedUnseen(err) {
				return done(a.backupEndedUnseen(ctx, sqlDB, st, db, srv.Name, layout, in.Sequence, err, rep, log))
			}
			if err != nil {
				return BackupOutput{}, a.backupFailed(ctx, err, db, layout, rep, log)
			}
			attached = true
		default:
			if found.session > 0 {
				log.Info("re-attaching to the running BACKUP", zap.Int64("session", found.session))
				if _, err := a.wait(ctx, ls, found, rep); err != nil {
					return BackupOutput{}, err
				}
			}
			out, ok, err := a.finishedUnseen(ctx, sqlDB, st, db, layout, in.Sequence, log)
			if err != nil {
				return BackupOutput{}, unconfirmed(ctx, in.Sequence, err)
			}
			if ok {
				a.recorder().StepDone(metrics.StepBackup, db.Instance, db.Name, srv.Name, out.Bytes, out.Duration)
				return done(out, nil)
			}
			if blind = found.blind; blind {
				// The login cannot see an earlier BACKUP of this set; its
				// files tell: SQL Server holds them open while it runs.
				if err := filesHeld(ctx, sqlDB, layout); err != nil {
					log.Warn("an earlier BACKUP of this set still holds its files and this login cannot see it (VIEW SERVER STATE): "+
						"no second BACKUP is sent", zap.Error(err))
					return BackupOutput{}, blindError(ls, err)
				}
			}
		}
	}
	if !attached {
		log.Info("backup starting", zap.Int("stripes", len(layout)))
		s, err := ls.start(ctx)
		if err != nil {
			return BackupOutput{}, err
		}
		res, err = a.wait(ctx, ls, running{local: s}, rep)
		if blind && errors.Is(err, mssql.ErrDeviceInUse) {
			// SQL Server refused a second BACKUP on files the first holds
			// (3201, OS error 32): say why it could not be re-attached.
			return BackupOutput{}, retryable(ErrBackupDeviceInUse, fmt.Errorf(
				"set %d of %s: an earlier BACKUP of this set still holds its files on %s and login %q cannot see it to wait for it "+
					"(grant VIEW SERVER STATE, on SQL Server 2022 VIEW SERVER PERFORMANCE STATE; `starter preflight` checks it): "+
					"the cycle waits and tries the same set again: %w", in.Sequence, db.ID(), srv.Name, inst.User, err))
		}
		if isEndedUnseen(err) {
			return done(a.backupEndedUnseen(ctx, sqlDB, st, db, srv.Name, layout, in.Sequence, err, rep, log))
		}
		if err != nil {
			return BackupOutput{}, a.backupFailed(ctx, err, db, layout, rep, log)
		}
	}
	out, err := finishedBackup(ctx, st, srv, inst.Name, layout, time.Since(start))
	if err != nil {
		return BackupOutput{}, err
	}
	if res.Summary != nil {
		out.Pages = res.Summary.Pages
	}
	// The last percent_complete seen may be well below 100: the step is
	// done. No signal: the result shows 100 % and the bytes (a signal is a
	// workflow task of its own).
	rep.set(100, out.Bytes)
	log.Info("backup done", zap.Int64("bytes", out.Bytes), zap.Duration("duration", out.Duration))
	a.recorder().StepDone(metrics.StepBackup, db.Instance, db.Name, srv.Name, out.Bytes, out.Duration)
	return done(out, nil)
}

// finishedUnseen reports a backup set already complete on our stripes: a
// BACKUP that finished while no worker watched it is not run again. A
// complete set whose stripes the worker cannot reach now is
// BackupUnconfirmed: retried, never backed up over.
func (a *Activities) finishedUnseen(ctx context.Context, sqlDB *mssql.DB, st storage.Storage, db *config.Database,
	layout []tsql.Stripe, seq int64, log *zap.Logger) (BackupOutput, bool, error) {
	start := time.Now()
	hq, err := tsql.RestoreHeaderOnly(tsql.Paths(layout))
	if err != nil {
		return BackupOutput{}, false, nil
	}
	hs, err := sqlDB.HeaderOnly(ctx, hq)
	if errors.Is(err, mssql.ErrBackupTargetUnreachable) {
		// SQL Server cannot reach the stripes now (the share lost, 3201
		// with 53): whether they hold a finished backup is not known, and
		// a BACKUP sent now would write over them once the share is back.
		// Stripes the worker sees were written by an earlier BACKUP.
		for _, s := range layout {
			if _, serr := st.Stat(ctx, s.Name); serr == nil {
				return BackupOutput{}, false, unconfirmedError(seq, err)
			}
		}
		return BackupOutput{}, false, retryable(ErrBackupTargetUnreachable, err)
	}
	if err != nil || len(hs) == 0 || hs[0].BackupName != tsql.BackupSetName(seq) || hs[0].BackupFinishDate.IsZero() {
		return BackupOutput{}, false, nil // not ours or not complete: back up again
	}
	out, err := finishedBackup(ctx, st, nil, "", layout, time.Since(start))
	if errorTypeOf(err) == ErrBackupUnconfirmed {
		return BackupOutput{}, false, err
	}
	if err != nil {
		// The worker does not see a stripe SQL Server read: the BACKUP
		// again says which location is wrong.
		return BackupOutput{}, false, nil
	}
	out.Reattached = true
	if !hs[0].BackupStartDate.IsZero() {
		out.Duration = hs[0].BackupFinishDate.Sub(hs[0].BackupStartDate)
	}
	log.Info("backup finished while no worker watched it: not running it again")
	return out, true, nil
}

// filesHeld reports (as RESTORE HEADERONLY's error) the stripes of a set
// held open by a BACKUP still writing them: SQL Server opens them
// exclusively, so reading their header fails with 3201 and operating system
// error 32 (ERROR_SHARING_VIOLATION) until it ends. nil when they are free
// (missing, incomplete or complete).
func filesHeld(ctx context.Context, sqlDB *mssql.DB, layout []tsql.Stripe) error {
	hq, err := tsql.RestoreHeaderOnly(tsql.Paths(layout))
	if err != nil {
		return nil
	}
	if _, err := sqlDB.HeaderOnly(ctx, hq); errors.Is(err, mssql.ErrDeviceInUse) {
		return err
	}
	return nil
}

// backupEndedUnseen reads what a BACKUP that outlived its connection left
// (see followLost): a complete set on its stripes is the step's result;
// otherwise it ended without completing, nothing of it runs any more, and
// the lost connection is the failure.
func (a *Activities) backupEndedUnseen(ctx context.Context, sqlDB *mssql.DB, st storage.Storage, db *config.Database, server string,
	layout []tsql.Stripe, seq int64, err error, rep *reporter, log *zap.Logger) (BackupOutput, error) {
	out, ok, ferr := a.finishedUnseen(ctx, sqlDB, st, db, layout, seq, log)
	if errorTypeOf(ferr) == ErrBackupTargetUnreachable {
		// This attempt's own BACKUP ended unseen, and its stripes cannot
		// be read now: it may have completed.
		return BackupOutput{}, unconfirmedError(seq, ferr)
	}
	if ferr != nil {
		return BackupOutput{}, ferr
	}
	if !ok {
		return BackupOutput{}, a.backupFailed(ctx, err, db, layout, rep, log)
	}
	rep.set(100, out.Bytes)
	a.recorder().StepDone(metrics.StepBackup, db.Instance, db.Name, server, out.Bytes, out.Duration)
	return out, nil
}

// backupFailed classifies a BACKUP that did not complete. An attempt that
// ended with its statement left running, or was cancelled, says nothing about
// the SQL host nor the set. Damage in the source database itself (see
// mssql.SourceDamage) is an alarm about the production database.
func (a *Activities) backupFailed(ctx context.Context, err error, db *config.Database, layout []tsql.Stripe, rep *reporter,
	log *zap.Logger) error {
	pct, _ := rep.get()
	if ctx.Err() != nil {
		log.Warn("backup attempt ended", zap.Float64("percent", pct), zap.Error(err))
		return err
	}
	if file, ok := mssql.SourceDamage(err, tsql.Paths(layout)); ok {
		return a.sourceDamaged(err, db, file, pct, log)
	}
	log.Warn("backup failed", zap.Float64("percent", pct), zap.Error(err))
	return sqlError(err, BackupFailure{Started: true, Percent: pct})
}

// sourceDamaged is the non-retryable SourceDatabaseDamaged of a BACKUP that
// met damage in the source database: logged at error level with the file
// and the fix, counted for the alarm (metrics.Recorder.SourceDamaged). No
// backup set is corrupt; this one is only incomplete.
func (a *Activities) sourceDamaged(err error, db *config.Database, file string, pct float64, log *zap.Logger) error {
	where := "a page or file of it"
	if file != "" {
		where = file
	}
	check, _ := tsql.QuoteIdent(db.Name)
	msg := fmt.Sprintf("%v: the source database %s on %s is damaged (%s): the production database needs attention, not the backup servers; "+
		"run DBCC CHECKDB (%s) WITH NO_INFOMSGS, ALL_ERRORMSGS there, read msdb.dbo.suspect_pages and check the disk under %s; "+
		"this BACKUP stopped and its set is incomplete", err, db.Name, db.Instance, where, check, where)
	log.Error("source database damaged", zap.String("file", file), zap.Float64("percent", pct), zap.Error(err))
	a.recorder().SourceDamaged(db.Instance, db.Name)
	return temporal.NewNonRetryableApplicationError(msg, ErrSourceDatabaseDamaged, err, BackupFailure{Started: true, Percent: pct})
}

// unconfirmed is err as a retry reports it before it has seen the set's
// headers: when an earlier attempt started the set's BACKUP (its heartbeats
// say so), that BACKUP may have completed, and a backup server that cannot
// be reached now (by the worker or by SQL Server) tells nothing of it:
// BackupUnconfirmed, retried, instead of BackupTargetUnreachable, which the
// cycle takes for a BACKUP that failed and its set for incomplete.
func unconfirmed(ctx context.Context, seq int64, err error) error {
	if errorTypeOf(err) != ErrBackupTargetUnreachable || !activity.IsActivity(ctx) || !activity.HasHeartbeatDetails(ctx) {
		return err
	}
	var hb BackupHeartbeat
	if activity.GetHeartbeatDetails(ctx, &hb) != nil || !hb.Started {
		return err
	}
	return unconfirmedError(seq, err)
}

// unconfirmedError is BackupUnconfirmed for err, a backup server not
// reachable after a BACKUP of set seq that may have completed.
func unconfirmedError(seq int64, err error) error {
	return temporal.NewApplicationErrorWithCause(fmt.Sprintf(
		"set %d: a BACKUP of it may have completed, and its backup server cannot be reached now to tell: the step is retried and recognises a finished backup: %v",
		seq, err), ErrBackupUnconfirmed, err)
}

// finishedBackup checks that the worker sees every stripe SQL Server wrote
// and measures them. It runs only once a BACKUP completed: a backup server
// the worker cannot reach now (the share lost, the attempt's context ended)
// is BackupUnconfirmed, which the step retries, not BackupTargetUnreachable,
// which the cycle takes for a BACKUP that failed and its set for incomplete.
func finishedBackup(ctx context.Context, st storage.Storage, srv *config.BackupServer, instance string, layout []tsql.Stripe, took time.Duration) (BackupOutput, error) {
	out := BackupOutput{Duration: took}
	for _, s := range layout {
		fi, err := st.Stat(ctx, s.Name)
		if errors.Is(err, storage.ErrNotFound) {
			name, key := "the backup server", "unc_paths"
			if srv != nil {
				name, key = "backup server "+srv.Name, srv.PathsKey(instance)
			}
			return BackupOutput{}, nonRetryable(ErrInvalidConfig, fmt.Errorf(
				"%s: SQL Server wrote %s (%s) but the worker does not see %s in %s (location): "+
					"%s and location must be the same directory, as SQL Server and as the worker reach it; fix the one that points elsewhere",
				name, s.Path, key, s.Name, st.Location(), key))
		}
		if err != nil {
			name := ""
			if srv != nil {
				name = srv.Name
			}
			serr := storageError(name, err)
			if errorTypeOf(serr) == ErrBackupTargetUnreachable {
				return BackupOutput{}, retryable(ErrBackupUnconfirmed, fmt.Errorf(
					"SQL Server completed the BACKUP, and the worker could not check %s on %s: the step is retried and recognises the finished backup: %w",
					s.Name, st.Location(), err))
			}
			return BackupOutput{}, serr
		}
		out.Stripes = append(out.Stripes, Stripe{Name: s.Name, Path: s.Path, Size: fi.Size})
		out.Bytes += fi.Size
	}
	return out, nil
}

// claimSet makes sure set number seq of db on a backup server is this run's
// before its BACKUP writes there: a manifest of another run, or stripe files
// without this run's claim, mean the number is used (a database restored
// from an older backup, a second entry point, another worker's clock):
// SequenceInUse, and nothing of theirs is touched. Every naming of the
// database's sets is checked (a set written before file names were made
// case-safe holds the number too). Otherwise it records the claim, a
// pending manifest naming this run (and, for a differential, the base its
// plan chose: base), which a retry recognises. names is the naming of the
// set's files: the claim's. resumed: the claim was already this run's (an
// earlier attempt or activity of this run began the set).
func (a *Activities) claimSet(ctx context.Context, st storage.Storage, db *config.Database, server string, seq int64,
	base *catalog.DiffBase) (names tsql.SetNames, resumed bool, err error) {
	sets := setsOf(db)
	keys, err := a.Cycle.manifestKeys()
	if err != nil {
		return names, false, err
	}
	m, err := a.Cycle.loadManifest(ctx, st, db, seq)
	switch {
	case err == nil:
		if err := ownedByThisRun(ctx, m, server); err != nil {
			return names, false, err
		}
		if m.State != catalog.StatePending {
			return names, false, nonRetryable(ErrSequenceInUse, fmt.Errorf(
				"set %d of %s on %s is already %s: a BACKUP never writes over it; this cycle takes a new number", seq, db.ID(), server, m.State))
		}
		return m.Names(), true, nil // our own claim: a retry
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, storage.ErrNotFound):
		// A manifest that cannot be read still protects its set, and so
		// does anything else under its name (a link, a directory).
		for _, n := range sets.Names() {
			if _, serr := st.Stat(ctx, n.Manifest(seq)); serr == nil || errors.Is(serr, storage.ErrNotRegular) {
				return names, false, nonRetryable(ErrSequenceInUse, fmt.Errorf("set %d of %s on %s has a manifest that cannot be read (%v): it is left for a human; this cycle takes a new number", seq, db.ID(), server, err))
			}
		}
		return names, false, storageError(server, err)
	}
	files, err := setFiles(ctx, st, sets.Names(), seq)
	if err != nil {
		return names, false, storageError(server, err)
	}
	if len(files) > 0 {
		return names, false, nonRetryable(ErrSequenceInUse, fmt.Errorf(
			"set %d of %s: %s already holds %s, written by another run: it is left untouched; this cycle takes a new number", seq, db.ID(), server, files[0].Name))
	}
	wid, rid := runOf(ctx)
	claim := catalog.NewPending(db.Instance, db.Name, seq, a.Cycle.now(), wid, rid)
	claim.PrimaryServer, claim.Entry = server, db.Entry
	if base != nil {
		b := *base
		claim.Differential = &b
	}
	// The claim is created exclusively (Create never replaces; on SMB one
	// CREATE request): of two runs racing for the number, one gets
	// ErrExists and reads the other's claim.
	err = createClaim(ctx, st, keys, claim)
	if errors.Is(err, storage.ErrExists) {
		m, lerr := a.Cycle.loadManifest(ctx, st, db, seq)
		if lerr != nil {
			return names, false, nonRetryable(ErrSequenceInUse, fmt.Errorf(
				"set %d of %s on %s: another run claimed the number at the same time (%v): this cycle takes a new number", seq, db.ID(), server, lerr))
		}
		return m.Names(), false, ownedByThisRun(ctx, m, server)
	}
	if err != nil {
		return names, false, storageError(server, err)
	}
	return claim.Names(), false, nil
}

// createClaim writes m, signed with keys, as a new file, never over an
// existing one.
func createClaim(ctx context.Context, st storage.Storage, keys *catalog.Keys, m *catalog.Manifest) error {
	data, err := catalog.EncodeSigned(m, keys)
	if err != nil {
		return err
	}
	w, err := st.Create(ctx, m.FileName())
	if err != nil {
		return err
	}
	if _, err := w.WriteAt(data, 0); err != nil {
		_ = w.Close()
		return err
	}
	if err := w.Sync(); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}
