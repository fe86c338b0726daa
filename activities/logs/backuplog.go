package logs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/logchain"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// logFiles is how many files a BACKUP LOG writes: a tick's log is small.
const logFiles = 1

// BackupLog takes the next log backup of the database's chain: it checks
// the recovery model, reads the chain record on the chain's backup server
// (starting a new chain on the newest full backup when there is none or
// the last one broke), names other tools' log backups msdb lists since the
// chain's last one (a break, or adopted with adopt_foreign_logs), claims
// the next number in the record (never one another run holds), runs BACKUP
// LOG with its marker (re-attaching to one an earlier attempt left running,
// recognising one that finished unseen), and records its LSNs, instants
// (with the source's offset from UTC) and files (size, SHA-256). A BACKUP
// LOG that fails with 4208 or 4214 breaks the chain: the record says why,
// and the output asks for a full backup.
func (a *Activities) BackupLog(ctx context.Context, in BackupLogInput) (BackupLogOutput, error) {
	d := &a.Base.Cycle
	db, err := logDatabase(d, in.Instance, in.Database)
	if err != nil {
		return BackupLogOutput{}, err
	}
	if !db.LogBackups() {
		if in.Tail {
			return BackupLogOutput{}, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
				"a tail-log backup of %s needs its log chain, and it has none: set log_backup for it in %s (or recover without --tail-log, "+
					"to the newest log backup held)", db.ID(), d.ConfigFile()))
		}
		return BackupLogOutput{}, nil // off: the workflow ends
	}
	out := BackupLogOutput{Every: db.LogBackup.Every}
	inst, err := d.Instance(db.Source())
	if err != nil {
		return out, err
	}
	server := chainServer(db)
	srv, err := d.Server(server)
	if err != nil {
		return out, err
	}
	out.Server = server
	log := activities.Logger(a.Base, ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance),
		zap.String("server", server), zap.String("step", StepBackupLog))
	stopBeat := d.KeepAlive(ctx)
	defer stopBeat()

	st, err := d.OpenServer(ctx, srv)
	if err != nil {
		return out, err
	}
	defer st.Close()
	fsys := catalog.StorageFS{Storage: st}
	keys, err := d.ManifestKeys()
	if err != nil {
		return out, err
	}
	sqlDB, err := d.ConnectSQL(ctx, inst, "master")
	if err != nil {
		return out, err
	}
	defer sqlDB.Close()

	rec, err := newest(ctx, fsys, keys, db, server)
	if err != nil {
		return out, err
	}
	// SIMPLE has no log backups; the chain (if any) ended with the switch.
	q, args, err := tsql.RecoveryModel(db.Name)
	if err != nil {
		return out, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	rs, err := sqlDB.RecoveryStatus(ctx, q, args...)
	if err != nil {
		return out, activities.SQLError(err)
	}
	if !rs.Found {
		return out, activities.NonRetryable(activities.ErrDatabaseNotFound, fmt.Errorf(
			"database %s is not on %s: check the database name in the config (names are exact)", db.Name, inst.Name))
	}
	if strings.EqualFold(rs.Model, "SIMPLE") {
		fix, _ := tsql.SimpleRecoveryFix(db.Name)
		if rec != nil && rec.Break == nil {
			rec.Break = &catalog.ChainBreak{Reason: string(logchain.BreakSimple), At: d.Clock().UTC(),
				Detail: fmt.Sprintf("%s was found in the SIMPLE recovery model", db.Name)}
			if err := save(ctx, d, fsys, server, rec); err != nil {
				return out, err
			}
		}
		return out, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
			"database %s on %s is in the SIMPLE recovery model, which has no log backups: run %s (then the next full backup starts the log chain), or remove log_backup from its configuration in %s",
			db.Name, inst.Name, fix, d.ConfigFile()))
	}

	if rec == nil || rec.Break != nil {
		var prev int64
		var br *catalog.ChainBreak
		if rec != nil {
			prev, br = rec.Chain, rec.Break
		}
		started, err := a.startChain(ctx, fsys, sqlDB, inst, db, prev, br, log)
		if err != nil {
			return out, err
		}
		if started == nil && in.Tail {
			return out, activities.NonRetryable(activities.ErrRecoveryPointUnreachable, fmt.Errorf(
				"no tail-log backup of %s was taken: its log chain is broken or not started (%s), so no restore reaches the tail; "+
					"recover without --tail-log", db.ID(), breakText(br)))
		}
		if started == nil {
			out.Chain, out.NeedFull = prev, true
			if br != nil {
				out.Break = &Break{Reason: br.Reason, Detail: br.Detail, At: br.At}
			} else {
				out.Break = &Break{Reason: "no_chain", Detail: "no full backup of the database to start a log chain from", At: d.Clock().UTC()}
			}
			return out, nil
		}
		rec = started
	}
	out.Chain = rec.Chain
	wid, rid := activities.RunOf(ctx)

	// Fulls taken while the chain ran, once verified.
	fulls, err := a.appendFulls(ctx, fsys, sqlDB, inst, db, rec, server, log)
	if err != nil {
		return out, err
	}
	// Other tools' log backups since the chain's last one, on its
	// recovery path.
	fork, err := a.chainFork(ctx, sqlDB, rec, log)
	if err != nil {
		return out, err
	}
	rec, stop, err := a.foreignLogs(ctx, sqlDB, st, fsys, db, inst, rec, &fork, &out, log)
	if err != nil || stop {
		return out, err
	}

	end, _ := chainEnd(rec) // where this log backup must start
	// A number whose files are there already may hold this chain's own
	// log backup, finished by an attempt whose record of it was lost: it
	// is adopted, and the chain goes on after it.
	own := func(part *catalog.ChainRecord, l *catalog.LogBackup) (bool, error) {
		f, ok, err := a.adoptOwn(ctx, sqlDB, st, srv, inst, db, server, part, l, end, fork, log)
		if ok {
			end, fork = l.LastLSN, f
		}
		return ok, err
	}
	// The number: a claim this chain's workflow left pending (an attempt,
	// or a run that continued as new, cut short), else the next one.
	n, rec, resumed, err := a.claim(ctx, st, fsys, d, server, rec, wid, rid, own)
	if err != nil {
		return out, err
	}
	fileNames, layout := logLayout(srv, inst, rec, n)
	stmt, err := tsql.BackupLog(tsql.BackupLogOptions{Database: db.Name, Disks: layout, Chain: rec.Chain, Number: n,
		Compression: &db.Compression, BufferCount: db.BufferCount, MaxTransferSize: int(db.MaxTransferSize), NoRecovery: in.Tail,
		Encryption: db.Encryption.Backup()})
	if err != nil {
		return out, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	marker, err := tsql.LogBackupMarker(db.Name, layout[0])
	if err != nil {
		return out, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	s := activities.Statement{DB: sqlDB, Op: "BACKUP LOG", Command: tsql.CommandBackupLog, Text: stmt, Marker: marker,
		Log: log.With(zap.Int64("seq", n)), Step: StepBackupLog, Number: n}

	// A claim of an earlier attempt may have finished unseen: its files
	// say so, and only an instance that reads them can tell (else the claim
	// is kept for the next attempt; a file in use is one its BACKUP LOG
	// still writes). A fresh number has no files.
	hs, done, ferr := a.finished(ctx, sqlDB, layout, rec.Chain, n)
	if ferr != nil && resumed && !errors.Is(ferr, mssql.ErrDeviceInUse) {
		return out, keepClaim(n, ferr, log)
	}
	if !done && resumed {
		waited, _, werr := activities.AwaitEarlier(a.Base, ctx, s)
		if werr != nil && !activities.IsEndedUnseen(werr) {
			return out, a.backupLogFailed(ctx, d, fsys, server, rec, n, werr, &out, log)
		}
		if waited {
			out.Reattached = true
			if hs, done, ferr = a.finished(ctx, sqlDB, layout, rec.Chain, n); ferr != nil {
				return out, keepClaim(n, ferr, log)
			}
		}
	} else if done {
		out.Reattached = true
	}
	if !done {
		log.Info("log backup starting", zap.Int64("chain", rec.Chain), zap.Int64("seq", n))
		_, rerr := activities.RunStatement(a.Base, ctx, s)
		if rerr != nil && !activities.IsEndedUnseen(rerr) {
			return out, a.backupLogFailed(ctx, d, fsys, server, rec, n, rerr, &out, log)
		}
		if hs, done, ferr = a.finished(ctx, sqlDB, layout, rec.Chain, n); ferr != nil {
			// It may well have finished: a later attempt reads its header.
			return out, keepClaim(n, ferr, log)
		}
		if !done {
			if rerr == nil {
				rerr = errors.New("BACKUP LOG reported success")
			}
			return out, a.backupLogFailed(ctx, d, fsys, server, rec, n, &notWritten{rerr}, &out, log)
		}
	}
	// Its dates are on the source's clock when it ran: msdb's offset for
	// it, not the server's now (a restart in another zone since).
	off, err := activities.BackupOffset(ctx, sqlDB, hs.BackupSetGUID)
	if err != nil {
		return out, err
	}
	l := rec.Log(n)
	if out.Bytes, err = a.written(ctx, st, srv, inst, server, l, hs, off, fileNames, layout); err != nil {
		return out, err
	}
	if off := offPath(n, hs.Fork, fork, end); off != "" {
		// Not a log of this chain: recorded with why, never restored with it.
		l.State, l.Failure = catalog.LogFailed, truncate(off, 1024)
		rec.Break = &catalog.ChainBreak{Reason: string(logchain.BreakGap), At: l.UpdatedAt, Detail: off}
		out.Break, out.NeedFull = &Break{Reason: rec.Break.Reason, Detail: off, At: l.UpdatedAt}, true
		if err := save(ctx, d, fsys, server, rec); err != nil {
			return out, err
		}
		log.Warn("log chain broken: the database was restored", zap.Int64("chain", rec.Chain), zap.Int64("seq", n))
		return out, nil
	}
	gap := gapBefore(end, *l, fulls)
	if gap != "" {
		rec.Break = &catalog.ChainBreak{Reason: string(logchain.BreakGap), At: l.UpdatedAt, Detail: fmt.Sprintf(
			"log %d begins at LSN %s, but the chain stood at LSN %s, and no full backup of the chain begins a restore there (%s): "+
				"another backup restarted SQL Server's log chain", n, l.FirstLSN, end, gap)}
		out.Break, out.NeedFull = &Break{Reason: rec.Break.Reason, Detail: rec.Break.Detail, At: rec.Break.At}, true
	}
	if err := save(ctx, d, fsys, server, rec); err != nil {
		return out, err
	}
	if gap != "" {
		log.Warn("log chain broken: a log backup does not start where the chain stood", zap.Int64("chain", rec.Chain), zap.Int64("seq", n))
	}
	out.Number, out.FirstLSN, out.LastLSN = n, l.FirstLSN, l.LastLSN
	out.Start, out.Finish, out.Files = l.BackupStartUTC, l.BackupFinishUTC, len(l.Files)
	log.Info("log backup done", zap.Int64("chain", rec.Chain), zap.Int64("seq", n), zap.String("last_lsn", l.LastLSN),
		zap.Int64("bytes", out.Bytes), zap.Bool("reattached", out.Reattached))
	activities.Recorder(a.Base).StepDone(StepBackupLog, db.Instance, db.Name, server, out.Bytes, l.BackupFinishUTC.Sub(l.BackupStartUTC))
	return out, nil
}

// breakText says why a chain ended, for people.
func breakText(b *catalog.ChainBreak) string {
	if b == nil {
		return "no full backup of the database starts one"
	}
	return fmt.Sprintf("%s at %s: %s", b.Reason, b.At.UTC().Format(time.RFC3339), b.Detail)
}

// finished reads the log backup's header: complete and of this number
// (its NAME), or not (the files are missing, damaged, incomplete or hold
// another backup). err when the instance could not say: it or the backup
// server is away, or refused the read for another reason; that is no
// answer about the log backup.
func (a *Activities) finished(ctx context.Context, sqlDB *mssql.DB, layout []string, chain, n int64) (mssql.BackupHeader, bool, error) {
	hq, err := tsql.RestoreHeaderOnly(layout)
	if err != nil {
		return mssql.BackupHeader{}, false, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	hs, err := sqlDB.HeaderOnly(ctx, hq)
	switch {
	case errors.Is(err, mssql.ErrCorruptBackup):
		return mssql.BackupHeader{}, false, nil
	case err != nil:
		return mssql.BackupHeader{}, false, err
	}
	if len(hs) == 0 || hs[0].BackupName != tsql.BackupLogName(chain, n) || hs[0].BackupFinishDate.IsZero() ||
		!logchain.LSN(hs[0].FirstLSN).Valid() || !logchain.LSN(hs[0].LastLSN).Valid() {
		return mssql.BackupHeader{}, false, nil
	}
	return hs[0], true, nil
}

// notWritten: the instance answered that the log backup's files hold no
// complete log backup of its number after its BACKUP LOG ended (err):
// evidence that it did not complete.
type notWritten struct{ err error }

func (e *notWritten) Error() string {
	return e.err.Error() + ", but its files hold no complete log backup of this number"
}
func (e *notWritten) Unwrap() error { return e.err }

// keepClaim ends an attempt that cannot tell whether log n's BACKUP LOG
// completed: the number stays claimed (pending) by the chain's workflow,
// and its next attempt, or its next tick, reads the files (an outage is no
// evidence against a log backup, and a finished one is never lost).
func keepClaim(n int64, err error, log *zap.Logger) error {
	log.Warn("log backup's outcome not known: the number stays claimed, the next attempt reads its files", zap.Int64("seq", n), zap.Error(err))
	return activities.SQLError(err)
}

// answered reports whether err says how a BACKUP LOG ended: SQL Server's
// own errors for it, or its files read after it ended. A lost connection,
// an unreachable instance or backup server, or a header that could not be
// read say nothing: the log backup may have completed.
func answered(err error) bool {
	var nw *notWritten
	var f *mssql.Failure
	return errors.As(err, &nw) || errors.As(err, &f) && len(f.Errors) > 0 && !errors.Is(f.Kind, mssql.ErrUnreachable)
}

// backupLogFailed records a BACKUP LOG that did not complete. 4208 and
// 4214 break the chain (a full backup starts the next one: the output
// asks for it, and no error is returned). A statement left running, or
// one whose end nobody could see (the instance or the backup server away:
// not answered), keeps its claim for the next attempt, which reads its
// files. A BACKUP LOG that SQL Server failed, or whose files hold no log
// backup once it ended, marks the number failed (never used again) and
// returns the classified error.
func (a *Activities) backupLogFailed(ctx context.Context, d *activities.CycleDeps, fsys catalog.FS, server string,
	rec *catalog.ChainRecord, n int64, err error, out *BackupLogOutput, log *zap.Logger) error {
	if ctx.Err() != nil {
		return err
	}
	var te interface{ Type() string }
	if errors.As(err, &te) && (te.Type() == activities.ErrStatementLeftRunning || te.Type() == activities.ErrStatementMayStillRun) {
		return err
	}
	if !answered(err) {
		return keepClaim(n, err, log)
	}
	l := rec.Log(n)
	now := d.Clock().UTC()
	l.State, l.Failure, l.UpdatedAt = catalog.LogFailed, truncate(err.Error(), 1024), now
	if num, ok := errorNumber(err); ok {
		if reason, broke := logchain.BreakOf(num); broke {
			rec.Break = &catalog.ChainBreak{Reason: string(reason), At: now,
				Detail: fmt.Sprintf("BACKUP LOG of log %d failed with error %d: %s", n, num, truncate(err.Error(), 512))}
			if serr := save(ctx, d, fsys, server, rec); serr != nil {
				return serr
			}
			log.Warn("log chain broken: a full backup starts the next one", zap.Int64("chain", rec.Chain), zap.Int32("error", num))
			out.Break = &Break{Reason: rec.Break.Reason, Detail: rec.Break.Detail, At: now}
			out.NeedFull = true
			return nil
		}
	}
	if serr := save(ctx, d, fsys, server, rec); serr != nil {
		log.Warn("failed log backup not recorded", zap.Error(serr))
	}
	log.Warn("log backup failed", zap.Int64("seq", n), zap.Error(err))
	return activities.SQLError(err)
}

// errorNumber is the first SQL Server error number err carries.
func errorNumber(err error) (int32, bool) {
	var f *mssql.Failure
	if errors.As(err, &f) {
		for _, e := range f.Errors {
			if _, ok := logchain.BreakOf(e.Number); ok {
				return e.Number, true
			}
		}
		if len(f.Errors) > 0 {
			return f.Errors[0].Number, true
		}
	}
	return 0, false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// claim is the number this run writes: the newest log of rec when it is a
// pending claim of this chain's workflow id (only one run of that id is
// open at a time, so a claim of an earlier run of it is this chain's own
// unfinished log backup), else the next number, claimed and saved before
// anything is written (a new part when rec is full). A fresh number whose
// file names are taken on the server (a record put back from an older
// copy, a file someone left) is recorded failed and skipped: BACKUP LOG
// WITH FORMAT, INIT would write over that file, unless own adopts it
// (this chain's own log backup of that number, finished: it is recorded
// written, and the next number is claimed). part is the record part that
// holds n; resumed: the claim was there already.
func (a *Activities) claim(ctx context.Context, st storage.Storage, fsys catalog.FS, d *activities.CycleDeps, server string,
	rec *catalog.ChainRecord, wid, rid string, own func(*catalog.ChainRecord, *catalog.LogBackup) (bool, error)) (n int64,
	part *catalog.ChainRecord, resumed bool, err error) {
	if k := len(rec.Logs); k > 0 {
		last := &rec.Logs[k-1]
		if last.State == catalog.LogPending && last.WorkflowID != "" && last.WorkflowID == wid {
			last.RunID, last.UpdatedAt = rid, d.Clock().UTC()
			return last.Number, rec, true, save(ctx, d, fsys, server, rec)
		}
	}
	part = rec
	for skipped := 0; skipped <= maxTakenNumbers; {
		n = part.NextNumber()
		if catalog.PartOf(n) != part.Part {
			part = catalog.NewChainRecord(rec.SourceInstance, rec.Database, rec.Chain, catalog.PartOf(n), d.Clock())
		}
		l, err := part.Claim(n, wid, rid, d.Clock())
		if err != nil {
			return 0, nil, false, activities.NonRetryable(activities.ErrInvalidConfig, err)
		}
		taken, err := catalog.ListStorage(ctx, st, part.Names().LogBackupPrefix(part.Chain, n), "")
		if err != nil {
			return 0, nil, false, activities.StorageError(server, err)
		}
		adopted := false
		if len(taken) > 0 {
			if adopted, err = own(part, l); err != nil {
				return 0, nil, false, err
			}
			if !adopted {
				l.State, l.Failure = catalog.LogFailed, fmt.Sprintf("%s is already on %s: left untouched, the number is skipped",
					taken[0].Name, server)
				skipped++
			}
		}
		if err := save(ctx, d, fsys, server, part); err != nil {
			return 0, nil, false, err
		}
		if len(taken) == 0 {
			return n, part, false, nil
		}
	}
	return 0, nil, false, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
		"the next %d log backup numbers of chain %d all have files on %s already: move the files of %s aside for a person to look at",
		maxTakenNumbers+1, rec.Chain, server, part.Names().ChainPrefix(rec.Chain)))
}

// maxTakenNumbers bounds how many numbers in a row claim skips because
// their files are there already.
const maxTakenNumbers = 16

// startChain starts chain prev+1 on the newest verified full backup of db
// that finished after the break (any verified full when there was no
// chain), on any server of the rotation: a chain starts where a restore
// can, and a full that is only written may still fail its verification.
// nil when there is none yet.
func (a *Activities) startChain(ctx context.Context, fsys catalog.FS, sqlDB *mssql.DB, inst *config.SQLInstance, db *config.Database,
	prev int64, br *catalog.ChainBreak, log *zap.Logger) (*catalog.ChainRecord, error) {
	d := &a.Base.Cycle
	fulls, err := a.verifiedFulls(ctx, sqlDB, inst, db, log)
	if err != nil {
		return nil, err
	}
	var best *catalog.ChainFull
	for i := range fulls {
		if f := &fulls[i]; br == nil || f.FinishUTC.After(br.At) {
			best = f // oldest first: the last that qualifies is the newest
		}
	}
	if best == nil {
		return nil, nil
	}
	r := catalog.NewChainRecord(db.Instance, db.Name, prev+1, 1, d.Clock())
	r.Fulls = []catalog.ChainFull{*best}
	if err := save(ctx, d, fsys, chainServer(db), r); err != nil {
		return nil, err
	}
	log.Info("log chain started", zap.Int64("chain", r.Chain), zap.Int64("full", best.Sequence))
	return r, nil
}

// verifiedFulls are db's verified full backups (not its differentials) on
// the servers of its rotation (trusted manifests with their header), oldest
// first (by LSN),
// as a chain records them: the checkpoint LSN, which the manifest does not
// hold, read from the full's own header. A full whose files no longer hold
// the manifest's backup is left out; a server that cannot be read is
// skipped (another holds the set, or the next tick reads it).
func (a *Activities) verifiedFulls(ctx context.Context, sqlDB *mssql.DB, inst *config.SQLInstance, db *config.Database,
	log *zap.Logger) ([]catalog.ChainFull, error) {
	d := &a.Base.Cycle
	seen := map[string]bool{}
	var out []catalog.ChainFull
	for _, s := range db.BackupServers {
		l, err := activities.ListManifests(a.Base, ctx, s, db)
		if err != nil {
			log.Warn("manifests not read while looking for the log chain's full backups", zap.String("server", s), zap.Error(err))
			continue
		}
		srv, err := d.Server(s)
		if err != nil {
			return nil, err
		}
		for _, m := range l.Manifests {
			h := m.Header
			// A differential is no full of the chain: a restore takes it
			// on top of its base, whose logs the chain holds anyway.
			if !m.Trusted() || !m.Verified() || m.IsDifferential() || h == nil || seen[h.BackupSetGUID] {
				continue
			}
			layout, err := tsql.Layout(srv.PathsFor(inst.Name), m.Names(), m.Sequence, len(m.Stripes))
			if err != nil {
				return nil, activities.NonRetryable(activities.ErrInvalidConfig, err)
			}
			hq, err := tsql.RestoreHeaderOnly(tsql.Paths(layout))
			if err != nil {
				return nil, activities.NonRetryable(activities.ErrInvalidConfig, err)
			}
			hs, err := sqlDB.HeaderOnly(ctx, hq)
			if err != nil || len(hs) == 0 || hs[0].BackupSetGUID != h.BackupSetGUID {
				log.Warn("a verified full backup's files do not hold it: not in the log chain", zap.Int64("seq", m.Sequence),
					zap.String("server", s), zap.Error(err))
				continue
			}
			seen[h.BackupSetGUID] = true
			out = append(out, catalog.ChainFull{Sequence: m.Sequence, BackupSetGUID: h.BackupSetGUID, FirstLSN: h.FirstLSN,
				LastLSN: h.LastLSN, CheckpointLSN: hs[0].CheckpointLSN, DatabaseBackupLSN: h.DatabaseBackupLSN,
				FinishUTC: h.BackupFinishUTC, CopyOnly: m.Options.CopyOnly})
		}
	}
	slices.SortFunc(out, func(x, y catalog.ChainFull) int { return logchain.LSN(x.LastLSN).Cmp(logchain.LSN(y.LastLSN)) })
	return out, nil
}

// appendFulls records in the chain's newest part the verified fulls taken
// while the chain ran (after the newest one it holds), so that a restore
// can start from the newest full (logchain.Chain.FirstAfter) rather than
// from the one that started the chain. It reads the whole chain (earlier
// parts hold the earlier fulls) and returns every full the chain holds.
func (a *Activities) appendFulls(ctx context.Context, fsys catalog.FS, sqlDB *mssql.DB, inst *config.SQLInstance, db *config.Database,
	rec *catalog.ChainRecord, server string, log *zap.Logger) ([]catalog.ChainFull, error) {
	d := &a.Base.Cycle
	keys, err := d.ManifestKeys()
	if err != nil {
		return nil, err
	}
	l, err := catalog.ListChains(ctx, fsys, keys, catalog.Of(db.Instance, db.Name))
	if err != nil {
		return nil, activities.StorageError(server, err)
	}
	var held []catalog.ChainFull
	for _, p := range l.Records {
		if p.Chain == rec.Chain && p.Part < rec.Part && p.Trusted() {
			held = append(held, p.Fulls...)
		}
	}
	held = append(held, rec.Fulls...)
	if len(held) == 0 {
		return nil, nil
	}
	after := held[len(held)-1]
	fulls, err := a.verifiedFulls(ctx, sqlDB, inst, db, log)
	if err != nil {
		return nil, err
	}
	added := 0
	for _, f := range fulls {
		if !logchain.LSN(after.LastLSN).Less(logchain.LSN(f.LastLSN)) || !f.FinishUTC.After(after.FinishUTC) {
			continue
		}
		if len(rec.Fulls) >= catalog.MaxFullsPerPart {
			log.Warn("the chain record part holds as many fulls as it may: a later full is recorded with the next part", zap.Int64("seq", f.Sequence))
			break
		}
		rec.Fulls = append(rec.Fulls, f)
		held = append(held, f)
		after = f
		added++
		log.Info("full backup added to the log chain", zap.Int64("chain", rec.Chain), zap.Int64("full", f.Sequence))
	}
	if added == 0 {
		return held, nil
	}
	return held, save(ctx, d, fsys, server, rec)
}

// chainEnd is the LSN the chain's next log backup starts at: the last
// written log's LastLSN, else the base full's LastLSN; set is the backup
// set GUID of that log or full.
func chainEnd(rec *catalog.ChainRecord) (lsn, set string) {
	for i := len(rec.Logs) - 1; i >= 0; i-- {
		if l := rec.Logs[i]; l.State == catalog.LogWritten || l.State == catalog.LogCopied {
			return l.LastLSN, l.BackupSetGUID
		}
	}
	if len(rec.Fulls) > 0 {
		return rec.Fulls[0].LastLSN, rec.Fulls[0].BackupSetGUID
	}
	return "", ""
}

// gapBefore says why log l breaks the chain ("" when it does not): it
// begins after end, where the chain stood (SQL Server's log chain was
// restarted behind the product's back: a switch to SIMPLE and back, then
// a full backup), and no full of the chain is contained in it, from which
// a restore could go on. A log that a full of the chain leads into
// leaves a hole only for restores from earlier fulls (logchain.Chain.Gaps
// names it); the chain goes on.
func gapBefore(end string, l catalog.LogBackup, fulls []catalog.ChainFull) string {
	if end == "" || !logchain.LSN(end).Less(logchain.LSN(l.FirstLSN)) {
		return ""
	}
	cl := logchain.Log{FirstLSN: logchain.LSN(l.FirstLSN), LastLSN: logchain.LSN(l.LastLSN)}
	for _, f := range fulls {
		if cl.Contains(logchain.LSN(f.LastLSN)) {
			return ""
		}
	}
	return fmt.Sprintf("the chain's fulls end at %s", fullEnds(fulls))
}

func fullEnds(fulls []catalog.ChainFull) string {
	var b strings.Builder
	for i, f := range fulls {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d: LSN %s", f.Sequence, f.LastLSN)
	}
	return b.String()
}

// A chain record can lose a log backup that was taken: an attempt cut
// short by a heartbeat timeout or a crash after its BACKUP LOG, whose
// write of the record was lost or landed late over the record of later
// logs. The log is then in msdb and on the backup server, named as the
// chain's own, but not in the record; without it the next log begins past
// where the record says the chain stands, and the chain would look broken
// although every log exists. adoptOwn takes it back.

// logLayout are the file names of log n of rec's chain on the backup
// server and the paths SQL Server writes them to.
func logLayout(srv *config.BackupServer, inst *config.SQLInstance, rec *catalog.ChainRecord, n int64) (fileNames, layout []string) {
	names := rec.Names()
	paths := srv.PathsFor(inst.Name)
	layout = make([]string, logFiles)
	fileNames = make([]string, logFiles)
	for i := range layout {
		fileNames[i] = names.LogStripe(rec.Chain, n, i+1, logFiles)
		layout[i] = tsql.JoinPath(paths[i%len(paths)], fileNames[i])
	}
	return fileNames, layout
}

// written records in l the finished log backup its header hs describes
// (off: the source's offset from UTC its dates are on) with its files,
// hashed on the backup server; it returns their bytes.
func (a *Activities) written(ctx context.Context, st storage.Storage, srv *config.BackupServer, inst *config.SQLInstance, server string,
	l *catalog.LogBackup, hs mssql.BackupHeader, off int, fileNames, layout []string) (int64, error) {
	l.State, l.BackupSetGUID, l.Failure = catalog.LogWritten, hs.BackupSetGUID, ""
	l.FirstLSN, l.LastLSN, l.DatabaseBackupLSN = hs.FirstLSN, hs.LastLSN, hs.DatabaseBackupLSN
	l.BackupStart, l.BackupFinish = hs.BackupStartDate, hs.BackupFinishDate
	l.SetUTCOffset(off)
	// The build that wrote this log, from its own header: a source patched
	// since the chain's full writes its logs with the new one.
	l.SoftwareVersion = hs.SoftwareVersion
	l.Encryption = cycle.HeaderEncryption(hs)
	l.Files = nil
	var bytes int64
	for _, name := range fileNames {
		size, sum, err := hashFile(ctx, st, name)
		if errors.Is(err, storage.ErrNotFound) {
			return 0, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
				"backup server %s: SQL Server wrote %s (%s) but the worker does not see %s in %s (location): they must be the same directory",
				server, layout[0], srv.PathsKey(inst.Name), name, st.Location()))
		}
		if err != nil {
			return 0, activities.StorageError(server, err)
		}
		l.Files = append(l.Files, catalog.Stripe{Name: name, Size: size, SHA256: sum})
		bytes += size
	}
	l.Servers = []string{server}
	l.UpdatedAt = a.Base.Cycle.Clock().UTC()
	return bytes, nil
}

// adoptOwn records l, a number just claimed whose files are on the
// backup server already, as written when they hold this chain's own log
// backup of that number and it continues the chain: its header names it
// (tsql.BackupLogName) and is complete, msdb lists that backup set for
// the database with the same LSNs and file, it begins at or before end
// (where the chain stands) and ends at or after it, on the chain's
// recovery fork. Anything else (another file, one msdb does not know, a
// log that leaves a hole) is not adopted (false), and the number is
// skipped as before. It returns the recovery fork the adopted log ends on.
func (a *Activities) adoptOwn(ctx context.Context, sqlDB *mssql.DB, st storage.Storage, srv *config.BackupServer, inst *config.SQLInstance,
	db *config.Database, server string, part *catalog.ChainRecord, l *catalog.LogBackup, end, fork string, log *zap.Logger) (string, bool, error) {
	if end == "" {
		return "", false, nil
	}
	fileNames, layout := logLayout(srv, inst, part, l.Number)
	hs, done, err := a.finished(ctx, sqlDB, layout, part.Chain, l.Number)
	switch {
	case errors.Is(err, mssql.ErrDeviceInUse):
		return "", false, nil // written now by someone: not a finished log of ours
	case err != nil:
		return "", false, activities.SQLError(err)
	case !done:
		return "", false, nil
	}
	first, last, at := logchain.LSN(hs.FirstLSN), logchain.LSN(hs.LastLSN), logchain.LSN(end)
	if at.Less(first) || last.Less(at) || offPath(l.Number, hs.Fork, fork, end) != "" {
		return "", false, nil
	}
	q, args, err := tsql.LogBackupsAfter(db.Name, hs.FirstLSN)
	if err != nil {
		return "", false, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	rows, err := sqlDB.LogBackupHistory(ctx, q, args...)
	if err != nil {
		return "", false, activities.SQLError(err)
	}
	var row *mssql.LogBackupRow
	for i, r := range rows {
		if strings.EqualFold(r.GUID, hs.BackupSetGUID) && r.Name == hs.BackupName && r.FirstLSN == hs.FirstLSN && r.LastLSN == hs.LastLSN &&
			!r.CopyOnly && strings.EqualFold(r.Path, layout[0]) {
			row = &rows[i]
			break
		}
	}
	if row == nil {
		return "", false, nil
	}
	off, err := rowOffset(ctx, sqlDB, row)
	if err != nil {
		return "", false, err
	}
	if _, err := a.written(ctx, st, srv, inst, server, l, hs, off, fileNames, layout); err != nil {
		return "", false, err
	}
	log.Warn("log backup taken by an earlier attempt whose record of it was lost: adopted into the chain", zap.Int64("chain", part.Chain),
		zap.Int64("seq", l.Number), zap.String("first_lsn", l.FirstLSN), zap.String("last_lsn", l.LastLSN))
	return hs.Fork.Last, true, nil
}

// rowOffset is the offset from UTC msdb recorded for the backup set of
// row, or the server's offset now when it records none (127, unknown).
func rowOffset(ctx context.Context, sqlDB *mssql.DB, row *mssql.LogBackupRow) (int, error) {
	if off, ok := row.UTCOffsetMinutes(); ok {
		return off, nil
	}
	return activities.ServerOffset(ctx, sqlDB)
}
