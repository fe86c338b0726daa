package sqlsim

import (
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Restore sequences: RESTORE DATABASE ... WITH NORECOVERY | STANDBY, then
// RESTORE LOG in order, then RECOVERY ("Apply Transaction Log Backups",
// https://learn.microsoft.com/en-us/sql/relational-databases/backup-restore/apply-transaction-log-backups-sql-server;
// "RESTORE Statements - Arguments",
// https://learn.microsoft.com/en-us/sql/t-sql/statements/restore-statements-arguments-transact-sql).
// A database in the sequence knows where roll forward continues (RedoLSN,
// sys.master_files.redo_start_lsn). A log backup applies when it includes
// that LSN: one that begins after it leaves a gap (4305), one that ends at
// or before it was applied already (4326) (Database Engine events and errors
// 4000 to 4999). A recovered database takes no more logs (3117).
//
// STOPAT = T redoes the commits at or before T ("The recovery point is the
// latest transaction commit that occurred at or before the datetime
// value", "Restore a SQL Server Database to a Point in Time"). When T lies
// past the log's end "the database is left in the unrecovered state, just
// as if RESTORE LOG ran with NORECOVERY" (RESTORE Arguments), with the
// informational 4322; when the database is already rolled forward past T,
// 4335. STOPATMARK = 'lsn:N' stops after the record at LSN N ("Recover to a
// Log Sequence Number"); named marks are not emulated.

// stopTarget is a RESTORE's STOPAT / STOPATMARK.
type stopTarget struct {
	at    time.Time // wall clock; zero for none
	lsn   uint64    // STOPATMARK = 'lsn:N'; 0 for none
	given bool
}

func (t stopTarget) includes(r logRec) bool {
	if t.lsn != 0 {
		return r.LSN <= t.lsn
	}
	return !t.given || !r.committedAt().After(t.at)
}

// stopLayouts are the datetime literal forms STOPAT accepts here.
var stopLayouts = []string{"2006-01-02 15:04:05.9999999", "2006-01-02T15:04:05.9999999", "2006-01-02 15:04:05", "2006-01-02T15:04:05",
	"2006-01-02 15:04", "20060102 15:04:05.9999999", "20060102 15:04:05"}

func (x *execCtx) stopTarget(s *restoreStmt) (stopTarget, error) {
	var t stopTarget
	if e, ok := s.opts["STOPAT"]; ok && e != nil {
		v, err := (&env{x: x}).eval(e)
		if err != nil {
			return t, err
		}
		if tv, ok := v.(time.Time); ok {
			t.at, t.given = wallClock(tv), true
			return t, nil
		}
		txt := strings.TrimSpace(toString(v))
		for _, l := range stopLayouts {
			if tv, err := time.ParseInLocation(l, txt, time.UTC); err == nil {
				t.at, t.given = tv, true
				return t, nil
			}
		}
		// 241 "Conversion failed when converting date and/or time from
		// character string."
		return t, sqlErr(241, 16, "Conversion failed when converting date and/or time from character string.")
	}
	if e, ok := s.opts["STOPATMARK"]; ok && e != nil {
		v, err := (&env{x: x}).eval(e)
		if err != nil {
			return t, err
		}
		mark := toString(v)
		if !strings.HasPrefix(strings.ToLower(mark), "lsn:") {
			return t, errNotSupported("RESTORE WITH STOPATMARK of a named mark")
		}
		n, ok := parseLSNText(mark[4:])
		if !ok {
			// "The named mark does not identify a valid LSN." (4334)
			return t, opError(restoreOpName(s.kind), sqlErr(4334, 16, "The named mark does not identify a valid LSN."))
		}
		t.lsn, t.given = n, true
	}
	return t, nil
}

func parseLSNText(s string) (uint64, bool) {
	var n uint64
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// standbyFile creates the undo file of RESTORE ... WITH STANDBY ("the
// undo file is automatically deleted by the next RESTORE operation"; an
// existing file of that name is overwritten).
func (x *execCtx) standbyFile(op string, s *restoreStmt) (string, error) {
	v, err := (&env{x: x}).eval(s.opts["STANDBY"])
	if err != nil {
		return "", err
	}
	t, oserr := x.in.resolve(toString(v))
	if oserr == "" && !t.null {
		err := os.WriteFile(t.local, []byte("sqlsim standby undo file\n"), 0o644)
		if err == nil {
			return t.local, nil
		}
		oserr = osErrText(err)
	}
	if oserr == "" {
		oserr = osPathNotFound
	}
	return "", opError(op, sqlErr(3201, 16, "Cannot open backup device '%s'. Operating system error %s.", toString(v), oserr))
}

// endState is what a step of a restore sequence leaves d in: ONLINE
// (recovered), RESTORING, or STANDBY with its undo file; in.mu is held.
func (in *Instance) endStateLocked(d *database, recovered bool, standby string) {
	if d.StandbyFile != "" && d.StandbyFile != standby {
		os.Remove(d.StandbyFile)
	}
	d.StandbyFile, d.Standby = standby, standby != ""
	switch {
	case recovered:
		d.State, d.Standby, d.StandbyFile, d.Stopped = "", false, "", false
		// A recovered database writes on from the recovery point; its log
		// chain goes on from there (a restored copy's log backups need no
		// new full backup: not documented, what log shipping's role
		// switches rely on).
		d.EndLSN = max(d.EndLSN, d.RedoLSN) + 1
		if recoveryModel(d) != "SIMPLE" {
			d.ChainLSN, d.ChainNew = d.RedoLSN, false
		}
		in.forkOnRecoveryLocked(d)
	case d.Standby:
		d.State = ""
	default:
		d.State = "RESTORING"
	}
}

// backupSetIDLocked is the msdb backup_set_id of the set a RESTORE read,
// recorded now if this instance has no row for it ("When a restore is
// performed, if the backup set was not already recorded in the msdb
// database, the backup history tables might be modified", BACKUP
// (Transact-SQL)); in.mu is held.
func (in *Instance) backupSetIDLocked(st *stripe) int64 {
	h, t := st.hdr, st.trl
	for _, b := range in.cat.BackupSets {
		if guid(b.GUID) == h.BackupSetGUID {
			return b.ID
		}
	}
	typ := "D"
	switch h.Type {
	case 2:
		typ = "L"
	case 5:
		typ = "I"
	}
	id := in.cat.NextBackupSetID
	in.cat.NextBackupSetID++
	in.cat.BackupSets = append(in.cat.BackupSets, backupSetRow{ID: id, GUID: h.BackupSetGUID, MediaGUID: h.MediaSetGUID,
		Database: h.Database, Start: h.Start, Finish: t.Finish, FirstLSN: h.FirstLSN, LastLSN: setLastLSN(h, t),
		CopyOnly: h.CopyOnly, Checksums: h.Checksums, Compressed: h.Compressed, Size: t.SetRawBytes,
		CompSize: t.SetStored, Server: h.Server, Name: h.Name, Description: h.Description, FamilyGUID: headerFamilyGUID(h),
		Type: typ, CheckpointLSN: h.CheckpointLSN, DatabaseBackupLSN: h.DatabaseLSN, User: h.User, BeginsLogChain: h.BeginsLogChain,
		RecoveryModel: h.RecoveryModel, Forks: headerForks(h), DiffBaseLSN: h.DiffBaseLSN, DiffBaseGUID: h.DiffBaseGUID,
		SoftwareVersion: h.SoftwareVersion})
	return id
}

// restoreLog is RESTORE LOG d FROM ... [WITH NORECOVERY | STANDBY = f |
// RECOVERY] [, STOPAT = t | STOPATMARK = 'lsn:n'].
func (x *execCtx) restoreLog(s *restoreStmt, op string, stripes []*stripe) error {
	began := x.in.serverTime(time.Now())
	st0 := stripes[0]
	h := st0.hdr
	v, err := (&env{x: x}).eval(s.db)
	if err != nil {
		return err
	}
	name := toString(v)
	stop, err := x.stopTarget(s)
	if err != nil {
		return err
	}
	_, noRecovery := s.opts["NORECOVERY"]
	_, standby := s.opts["STANDBY"]
	d := x.in.lookupDB(name)
	if d == nil {
		return opError(op, sqlErr(3118, 16, "The database \"%s\" does not exist. RESTORE can only create a database when restoring either a full backup or a file backup of the primary file.", name))
	}
	if h.Type != 2 {
		return opError(op, errNotSupported("RESTORE LOG from a backup set that is not a log backup"))
	}
	x.in.mu.Lock()
	inSequence := d.State == "RESTORING" || d.Standby
	p, pTime, stopped, fam, redoFork := d.RedoLSN, d.RedoTime, d.Stopped, x.in.familyGUID(d), x.in.redoFork(d)
	busy := x.in.dbInUseLocked(d, x.s)
	x.in.mu.Unlock()
	if !inSequence {
		// 3117 (Database Engine events and errors 3000 to 3999).
		return opError(op, sqlErr(3117, 16, "The log or differential backup cannot be restored because no files are ready to rollforward."))
	}
	if headerFamilyGUID(h) != fam {
		return opError(op, errNotSupported("RESTORE LOG of another database's log backup"))
	}
	// Roll forward stopped at a STOPAT point inside an earlier log: a log
	// that begins there or later holds nothing before the point and is
	// too recent, as for a gap (only the logs "up to and including the log
	// backup that contains your target point in time" apply, "Restore a
	// SQL Server Database to a Point in Time (Full Recovery Model)"); the
	// point lies strictly inside that log, though redo may stand at its
	// end here when no commit followed the point in it.
	tooRecent := h.FirstLSN > p || stopped && h.FirstLSN >= p
	if stopped && !tooRecent {
		return opError(op, errNotSupported("RESTORE LOG of the log holding a STOPAT point reached WITH NORECOVERY again, to another point"))
	}
	if busy {
		return opError(op, sqlErr(3101, 16, "Exclusive access could not be obtained because the database is in use."))
	}
	if !headerForks(h).continues(redoFork, p) {
		return opError(op, errRecoveryPath())
	}
	last := setLastLSN(h, st0.trl)
	if tooRecent {
		return opError(op, sqlErr(4305, 16, "The log in this backup set begins at LSN %s, which is too recent to apply to the database. An earlier log backup that includes LSN %s can be restored.", lsnText(h.FirstLSN), lsnText(p)))
	}
	if last <= p {
		return opError(op, sqlErr(4326, 16, "The log in this backup set terminates at LSN %s, which is too early to apply to the database. A more recent log backup that includes LSN %s can be restored.", lsnText(last), lsnText(p)))
	}
	if stop.given && stop.lsn == 0 && stop.at.Before(pTime) {
		return opError(op, sqlErr(4335, 16, "The specified STOPAT time is too early. All or part of the database is already rolled forward beyond that point."))
	}
	// Read the log records (checksums verified like any RESTORE).
	var recs []logRec
	sink := x.logRecSink(st0.path, &recs)
	if err := x.restoreData(s, op, stripes, nil, sink); err != nil {
		return err
	}
	if x.isCrashed() {
		// Crashed before the end: nothing of this log counts, the database
		// stays RESTORING where the previous step left it; the same RESTORE
		// LOG can be run again.
		return tds.ErrKillConnection
	}
	// Redo from the restore point up to the stop.
	var apply []logRec
	reached, next := false, last
	for _, r := range sortRecs(recs) {
		if r.LSN < p || r.LSN >= last {
			continue
		}
		if !stop.includes(r) {
			reached, next = true, r.LSN
			break
		}
		apply = append(apply, r)
	}
	logEnd := h.LogEnd
	switch {
	case stop.lsn != 0 && stop.lsn < last:
		reached = true
		if next == last {
			next = stop.lsn + 1
		}
	case stop.given && stop.lsn == 0 && !logEnd.IsZero() && stop.at.Before(logEnd):
		reached = true // no commit between the last one redone and T: T is inside this log
	}
	if err := x.in.applyLogRecs(d, apply); err != nil {
		return opError(op, errWriteFailed(d.Files[0].Physical, osErrText(err)))
	}
	beyond := stop.given && !reached
	recover := !noRecovery && !standby && !beyond
	if reached && recover {
		if err := x.in.truncateCommitRows(d, next); err != nil {
			return opError(op, errWriteFailed(d.Files[0].Physical, osErrText(err)))
		}
	}
	undo := ""
	if standby {
		if undo, err = x.standbyFile(op, s); err != nil {
			return err
		}
	}
	pages := h.TotalPages
	x.in.mu.Lock()
	d.RedoLSN, d.RedoFork = next, headerForks(h).at(next)
	d.DiffApplied = true
	switch {
	case reached:
		d.RedoTime = stop.at
		d.Stopped = !recover
	case !logEnd.IsZero():
		d.RedoTime = logEnd
	}
	if h.RecoveryModel != "" {
		d.RecoveryModel, _ = checkRecoveryModel(h.RecoveryModel)
	}
	x.in.endStateLocked(d, recover, undo)
	setID := x.in.backupSetIDLocked(st0)
	row := restoreHistoryRow{ID: x.in.cat.NextRestoreID, Date: began, Database: d.Name, User: x.s.login.User, BackupSetID: setID,
		Type: "L", Recovery: recover}
	if stop.given && stop.lsn == 0 {
		row.StopAt = stop.at
	}
	x.in.cat.RestoreHistory = append(x.in.cat.RestoreHistory, row)
	x.in.cat.NextRestoreID++
	serr := x.in.saveCatalog()
	x.in.mu.Unlock()
	if serr != nil {
		x.in.log.Error("save catalog", zap.Error(serr))
	}
	for _, f := range h.Files {
		if f.Log {
			x.info(4035, 0, fmt.Sprintf("Processed %d pages for database '%s', file '%s' on file 1.", pages, d.Name, f.Logical))
		}
	}
	if beyond {
		// 4322: STOPAT after the end of this log: more logs can follow.
		x.info(4322, 0, "This backup set contains records that were logged before the designated point in time. The database is being left in the restoring state so that more roll forward can be performed.")
	}
	x.info(3014, 0, fmt.Sprintf("RESTORE LOG successfully processed %d pages in %.3f seconds (%.3f MB/sec).", pages, 0.001, 0.0))
	return nil
}

// logRecSink is a restoreData sink that collects the records of a set
// written as log pages (a log backup, a differential) into recs.
func (x *execCtx) logRecSink(path string, recs *[]logRec) func(blockHeader, []byte) error {
	return func(bh blockHeader, pages []byte) error {
		for i := 0; i+PageSize <= len(pages); i += PageSize {
			pg := pages[i : i+PageSize]
			if readPageHeader(pg).Type != pageLog {
				return &backupErr{errs: []*tds.Error{errIncorrectlyFormed(path)}}
			}
			x.in.mu.Lock() // the workers run in parallel
			*recs = append(*recs, logPageRecs(pg)...)
			x.in.mu.Unlock()
		}
		return nil
	}
}

func sortRecs(recs []logRec) []logRec {
	out := append([]logRec(nil), recs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].LSN < out[j-1].LSN; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// recoverOnly is RESTORE DATABASE d WITH RECOVERY without FROM: it ends a
// restore sequence at the point reached ("RESTORE DATABASE x WITH
// RECOVERY", Apply Transaction Log Backups); on a recovered database 3153
// "The database is already fully recovered." msdb gets no restorehistory
// row (none is documented for it).
func (x *execCtx) recoverOnly(s *restoreStmt, op string) error {
	if _, ok := s.opts["RECOVERY"]; !ok {
		return errNotSupported("RESTORE DATABASE without FROM except WITH RECOVERY")
	}
	v, err := (&env{x: x}).eval(s.db)
	if err != nil {
		return err
	}
	name := toString(v)
	d := x.in.lookupDB(name)
	if d == nil || d.system {
		return opError(op, errNoDatabase(name))
	}
	x.in.mu.Lock()
	inSequence := d.State == "RESTORING" || d.Standby
	p := d.RedoLSN
	busy := x.in.dbInUseLocked(d, x.s)
	x.in.mu.Unlock()
	if !inSequence {
		return opError(op, sqlErr(3153, 16, "The database is already fully recovered."))
	}
	if busy {
		return opError(op, sqlErr(3101, 16, "Exclusive access could not be obtained because the database is in use."))
	}
	start := time.Now()
	// Commits redone past the restore point by a step a crash cut short
	// are undone.
	if err := x.in.truncateCommitRows(d, p); err != nil {
		return opError(op, errWriteFailed(d.Files[0].Physical, osErrText(err)))
	}
	x.in.mu.Lock()
	x.in.endStateLocked(d, true, "")
	serr := x.in.saveCatalog()
	x.in.mu.Unlock()
	if serr != nil {
		return serr
	}
	x.info(3014, 0, fmt.Sprintf("RESTORE DATABASE successfully processed 0 pages in %.3f seconds (0.000 MB/sec).", max(time.Since(start).Seconds(), 0.001)))
	return nil
}
