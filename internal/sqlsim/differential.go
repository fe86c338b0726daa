package sqlsim

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Differential backups, as "Differential Backups (SQL Server)"
// (https://learn.microsoft.com/en-us/sql/relational-databases/backup-restore/differential-backups-sql-server),
// "Copy-Only Backups"
// (https://learn.microsoft.com/en-us/sql/relational-databases/backup-restore/copy-only-backups-sql-server),
// backupset (Transact-SQL) and RESTORE HEADERONLY describe them:
//
//   - A differential "captures only the data that has changed since that
//     full backup", its base: "Full backups, except for copy-only backups,
//     can serve as the base for a series of differential backups". A
//     COPY_ONLY full "cannot serve as a differential base ... differential
//     backups behave as if the copy-only backup does not exist". BACKUP
//     (Transact-SQL) says COPY_ONLY is ignored WITH DIFFERENTIAL; the
//     emulator refuses the pair (3031, options.go), the stricter choice.
//   - Without a base, BACKUP ... WITH DIFFERENTIAL fails with 3035
//     (Database Engine events and errors 3000 to 3999).
//   - msdb.dbo.backupset.type is 'I', HEADERONLY BackupType 5 ("Database
//     Differential" in captured output); differential_base_lsn holds the
//     base's CheckpointLSN (captured output; the documentation says its
//     FirstLSN, which the emulator cannot tell apart in practice) and
//     differential_base_guid "the unique identifier of the differential
//     base", taken here to be the base's backup_set_uuid.
//   - RESTORE DATABASE of a differential applies only on top of its base,
//     restored WITH NORECOVERY: another base, or none, fails with 3136, a
//     recovered database with 3117 (errors 3000 to 3999). The database is
//     then at the differential's LastLSN, where the log backups after it
//     continue. Restoring a differential after a log or another
//     differential of the same sequence is not emulated.
//
// The emulator's differential holds the commits since its base as log
// records (the pages a real one copies hold nothing else that the emulator
// models), plus, like a full, the records written while it ran.

// beginDiffBackup fixes where a differential of d starts, as beginBackup
// does for a full, and reads the commits since its base.
func (in *Instance) beginDiffBackup(d *database) (backupLSNs, *tds.Error) {
	in.rowsMu.RLock()
	defer in.rowsMu.RUnlock()
	in.mu.Lock()
	if d.DiffBaseGUID == (guid{}) {
		in.mu.Unlock()
		return backupLSNs{}, sqlErr(3035, 16, "Cannot perform a differential backup for database \"%s\", because a current database backup does not exist. Perform a full database backup by reissuing BACKUP DATABASE, omitting the WITH DIFFERENTIAL option.", d.Name)
	}
	first := in.advanceLogLocked(d, 2)
	d.CheckpointLSN = first + 1
	l := backupLSNs{first: first, last: first + 2, checkpoint: first + 1, databaseBackup: d.FullCheckpointLSN,
		hdrType: 5, typ: "I", model: recoveryModel(d), forks: in.backupForksLocked(d, false),
		diffBaseLSN: d.DiffBaseLSN, diffBaseGUID: d.DiffBaseGUID}
	in.mu.Unlock()
	rows, err := in.readRowsOf(d)
	if err != nil {
		return backupLSNs{}, sqlErr(3203, 16, "Read on \"%s\" failed: %s", d.Files[0].Physical, osErrText(err))
	}
	l.recs = lsnRange(rows, l.diffBaseLSN, first)
	return l, nil
}

// diffBaseColumns are differential_base_lsn and differential_base_guid:
// NULL but for a differential.
func diffBaseColumns(lsn uint64, g guid) (any, any) {
	if g == (guid{}) {
		return nil, nil
	}
	return lsnText(lsn), [16]byte(g)
}

func errDiffBase() *tds.Error {
	return sqlErr(3136, 16, "This differential backup cannot be restored because the database has not been restored to the correct earlier state.")
}

// restoreDiff is RESTORE DATABASE d FROM <differential> [WITH NORECOVERY |
// STANDBY = f | RECOVERY].
func (x *execCtx) restoreDiff(s *restoreStmt, op string, stripes []*stripe, began time.Time) error {
	st0 := stripes[0]
	h := st0.hdr
	v, err := (&env{x: x}).eval(s.db)
	if err != nil {
		return err
	}
	name := toString(v)
	if _, ok := s.opts["STOPAT"]; ok {
		return opError(op, errNotSupported("RESTORE DATABASE WITH STOPAT of a differential backup"))
	}
	if _, ok := s.opts["STOPATMARK"]; ok {
		return opError(op, errNotSupported("RESTORE DATABASE WITH STOPATMARK of a differential backup"))
	}
	_, noRecovery := s.opts["NORECOVERY"]
	_, standby := s.opts["STANDBY"]
	d := x.in.lookupDB(name)
	if d == nil {
		return opError(op, errDiffBase())
	}
	x.in.mu.Lock()
	inSequence := d.State == "RESTORING" || d.Standby
	base, applied, fam := d.DiffBaseGUID, d.DiffApplied, x.in.familyGUID(d)
	p := d.RedoLSN
	busy := x.in.dbInUseLocked(d, x.s)
	x.in.mu.Unlock()
	if !inSequence {
		return opError(op, sqlErr(3117, 16, "The log or differential backup cannot be restored because no files are ready to rollforward."))
	}
	if base != h.DiffBaseGUID || headerFamilyGUID(h) != fam {
		return opError(op, errDiffBase())
	}
	if applied {
		return opError(op, errNotSupported("RESTORE DATABASE of a differential after a log or differential backup of the same restore sequence"))
	}
	if busy {
		return opError(op, sqlErr(3101, 16, "Exclusive access could not be obtained because the database is in use."))
	}
	if err := x.restoreRefusals(op, stripes); err != nil {
		return err
	}
	x.in.mu.Lock()
	x.req.target = d.Name
	x.in.mu.Unlock()
	defer func() {
		x.in.mu.Lock()
		x.req.target = ""
		x.in.mu.Unlock()
	}()
	var recs []logRec
	sink := x.logRecSink(st0.path, &recs)
	start := time.Now()
	if err := x.restoreData(s, op, stripes, nil, sink); err != nil {
		return err
	}
	if x.isCrashed() {
		// Nothing of the differential counts: the database stays where
		// its base left it, and the same RESTORE can run again.
		return tds.ErrKillConnection
	}
	// What the base restored already is skipped: the changes since its
	// checkpoint overlap the base's own redo part.
	last := setLastLSN(h, st0.trl)
	var apply []logRec
	seen := map[uint64]bool{}
	for _, r := range sortRecs(append(recs, st0.trl.Redo...)) {
		if r.LSN < p || r.LSN >= last || seen[r.LSN] {
			continue
		}
		seen[r.LSN] = true
		apply = append(apply, r)
	}
	if err := x.in.applyLogRecs(d, apply); err != nil {
		return opError(op, errWriteFailed(d.Files[0].Physical, osErrText(err)))
	}
	undo := ""
	if standby {
		if undo, err = x.standbyFile(op, s); err != nil {
			return err
		}
	}
	recover := !noRecovery && !standby
	x.in.mu.Lock()
	d.RedoLSN, d.RedoTime, d.RedoFork, d.DiffApplied = last, wallClock(st0.trl.Finish), headerForks(h).Last, true
	d.EndLSN = max(d.EndLSN, last)
	x.in.endStateLocked(d, recover, undo)
	setID := x.in.backupSetIDLocked(st0)
	x.in.cat.RestoreHistory = append(x.in.cat.RestoreHistory, restoreHistoryRow{ID: x.in.cat.NextRestoreID, Date: began,
		Database: d.Name, User: x.s.login.User, BackupSetID: setID, Type: "I", Recovery: recover})
	x.in.cat.NextRestoreID++
	serr := x.in.saveCatalog()
	x.in.mu.Unlock()
	if serr != nil {
		x.in.log.Error("save catalog", zap.Error(serr))
	}
	for _, f := range h.Files {
		if !f.Log {
			x.info(4035, 0, fmt.Sprintf("Processed %d pages for database '%s', file '%s' on file 1.", h.TotalPages, d.Name, f.Logical))
			break
		}
	}
	secs := max(time.Since(start).Seconds(), 0.001)
	x.info(3014, 0, fmt.Sprintf("RESTORE DATABASE successfully processed %d pages in %.3f seconds (%.3f MB/sec).",
		h.TotalPages, secs, float64(h.TotalPages*PageSize)/(1<<20)/secs))
	return nil
}
