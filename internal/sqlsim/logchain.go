package sqlsim

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Recovery models and the log chain, as "Recovery models (SQL Server)"
// (https://learn.microsoft.com/en-us/sql/relational-databases/backup-restore/recovery-models-sql-server),
// "Transaction log backups (SQL Server)"
// (https://learn.microsoft.com/en-us/sql/relational-databases/backup-restore/transaction-log-backups-sql-server)
// and "View or Change the Recovery Model of a Database"
// (https://learn.microsoft.com/en-us/sql/relational-databases/backup-restore/view-or-change-the-recovery-model-of-a-database-sql-server)
// describe them:
//
//   - "Before you can create the first log backup, you must create a full
//     backup": a FULL or BULK_LOGGED database without one behaves as SIMPLE
//     and BACKUP LOG fails with 4214 (MSSQLSERVER_4214). A COPY_ONLY full
//     backup does not start the chain ("Copy-only backups": it "has no
//     effect on the log chain"; observed: a log backup after only a
//     copy-only full fails, "Understanding COPY_ONLY backups", coeo.com).
//   - Under SIMPLE, BACKUP LOG fails with 4208. Switching to SIMPLE ends the
//     chain; after switching back, "take a full or differential database
//     backup to start the log chain" (the emulator has no differential).
//     FULL <-> BULK_LOGGED keeps the chain.
//   - The first log backup after the first full starts at that full's
//     FirstLSN; consecutive log backups chain exactly (next FirstLSN =
//     previous LastLSN); a COPY_ONLY log backup "does not truncate the
//     transaction log ... other log backups behave as if the copy-only
//     backup does not exist" (BACKUP (Transact-SQL)).
//   - A full backup's DatabaseBackupLSN is the CheckpointLSN of the
//     previous conventional full (0 for the first); a log backup's the
//     CheckpointLSN of the last full that had finished when it started
//     (backupset (Transact-SQL): "For tlog and differential backups, this
//     is the checkpoint_lsn of the FULL backup it is based on"; captured
//     HEADERONLY output shows the switch after the full ends).
//
// LSNs are per database and only ever grow; "Arithmetic operations ... are
// not meaningful and must not be used with LSNs" ("Recover to a Log
// Sequence Number"), so the emulator's steps between them carry no meaning.

var recoveryModels = map[string]int64{"FULL": 1, "BULK_LOGGED": 2, "SIMPLE": 3}

// checkRecoveryModel normalises a recovery model name ("" is FULL, the
// model database's default outside Express).
func checkRecoveryModel(m string) (string, error) {
	m = strings.ToUpper(m)
	if m == "" {
		return "", nil
	}
	if _, ok := recoveryModels[m]; !ok {
		return "", fmt.Errorf("recovery model %q is not FULL, BULK_LOGGED or SIMPLE", m)
	}
	if m == "FULL" {
		return "", nil
	}
	return m, nil
}

// recoveryModel is d's recovery model by name; in.mu is held or d is a copy.
func recoveryModel(d *database) string {
	switch {
	case d.system && d.Name != "model":
		return "SIMPLE"
	case d.RecoveryModel == "":
		return "FULL"
	}
	return d.RecoveryModel
}

// advanceLogLocked writes n log records to d's log and returns the LSN of
// the first; in.mu is held.
func (in *Instance) advanceLogLocked(d *database, n uint64) uint64 {
	if d.EndLSN == 0 { // a catalog written before databases had their own LSNs
		d.EndLSN = in.nextLSN(1000)
	}
	l := d.EndLSN
	d.EndLSN += max(n, 1)
	return l
}

// SetRecoveryModel changes db's recovery model as a DBA's ALTER DATABASE
// ... SET RECOVERY would, behind the product's back.
func (in *Instance) SetRecoveryModel(db, model string) error {
	m, err := checkRecoveryModel(model)
	if err != nil {
		return fmt.Errorf("sqlsim: SetRecoveryModel %s: %w", db, err)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	d := in.lookupDBLocked(db)
	if d == nil || d.system {
		return fmt.Errorf("sqlsim: SetRecoveryModel: database %q not found on %s", db, in.cfg.Name)
	}
	in.setRecoveryModelLocked(d, m)
	return in.saveCatalog()
}

func (in *Instance) setRecoveryModelLocked(d *database, m string) {
	if m == "SIMPLE" {
		// "If you ... must remove the log backup chain from a database,
		// switch to the simple recovery model" (BACKUP (Transact-SQL)).
		d.ChainLSN, d.ChainNew = 0, false
	}
	d.RecoveryModel = m
}

// backupRefusal is why d cannot be backed up now, or nil.
func (in *Instance) backupRefusal(d *database, log bool) *tds.Error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if d.Standby {
		// 3036 (Database Engine events and errors 3000 to 3999).
		return sqlErr(3036, 16, "The database \"%s\" is in warm-standby state (set by executing RESTORE WITH STANDBY) and cannot be backed up until the entire restore sequence is completed.", d.Name)
	}
	if !log {
		return nil
	}
	if recoveryModel(d) == "SIMPLE" {
		// 4208; %hs renders as the statement ("The Statement Backup Log is
		// Not Allowed ...", mssqltips.com tip 5968).
		return sqlErr(4208, 16, "The statement BACKUP LOG is not allowed while the recovery model is SIMPLE. Use BACKUP DATABASE or change the recovery model using ALTER DATABASE.")
	}
	if d.ChainLSN == 0 {
		// MSSQLSERVER_4214.
		return sqlErr(4214, 16, "BACKUP LOG cannot be performed because there is no current database backup.")
	}
	return nil
}

// backupLSNs are the LSNs and chain facts of a backup being taken.
type backupLSNs struct {
	first, last, checkpoint, databaseBackup uint64
	hdrType                                 int    // HEADERONLY BackupType
	typ                                     string // backupset.type
	model                                   string
	beginsChain                             bool
	logEnd                                  time.Time
	recs                                    []logRec // a log backup's records
	redo                                    []logRec // a full backup's redo part
	forks                                   forkRange
	// A differential's base (differential.go).
	diffBaseLSN  uint64
	diffBaseGUID guid
}

// beginBackup fixes where a backup of d starts: a data backup checkpoints
// (FirstLSN, then CheckpointLSN; captured HEADERONLY output shows them
// adjacent) and learns its LastLSN at the end (endDataBackup); a log backup
// holds the log from the chain's point to the end of the log now.
func (in *Instance) beginBackup(d *database, log bool, start time.Time) (backupLSNs, *tds.Error) {
	if !log {
		in.mu.Lock()
		defer in.mu.Unlock()
		first := in.advanceLogLocked(d, 2)
		d.CheckpointLSN = first + 1
		return backupLSNs{first: first, last: first + 2, checkpoint: first + 1, databaseBackup: d.FullCheckpointLSN,
			hdrType: 1, typ: "D", model: recoveryModel(d), forks: in.backupForksLocked(d, false)}, nil
	}
	in.rowsMu.RLock()
	defer in.rowsMu.RUnlock()
	in.mu.Lock()
	if d.ChainLSN == 0 || recoveryModel(d) == "SIMPLE" { // switched meanwhile
		in.mu.Unlock()
		return backupLSNs{}, in.backupRefusal(d, true)
	}
	l := backupLSNs{first: d.ChainLSN, checkpoint: d.CheckpointLSN, databaseBackup: d.FullCheckpointLSN, hdrType: 2, typ: "L",
		model: recoveryModel(d), beginsChain: d.ChainNew, logEnd: wallClock(in.serverTime(start)), forks: in.backupForksLocked(d, true)}
	l.last = in.advanceLogLocked(d, 1) // the backup's own record comes after its range
	in.mu.Unlock()
	rows, err := in.readRowsOf(d)
	if err != nil {
		return backupLSNs{}, sqlErr(3203, 16, "Read on \"%s\" failed: %s", d.Files[0].Physical, osErrText(err))
	}
	l.recs = lsnRange(rows, l.first, l.last)
	return l, nil
}

// readRowsOf reads d's dbo.CommitLog rows with in.rowsMu held.
func (in *Instance) readRowsOf(d *database) ([]logRec, error) {
	st := in.commitLog(d)
	if st == nil {
		return nil, nil
	}
	return in.readCommitRowsLocked(d, st)
}

// lsnRange are the records with first <= LSN < last: a backup's LastLSN is
// "the next log record after the backup set" (backupset (Transact-SQL)).
func lsnRange(rows []logRec, first, last uint64) []logRec {
	var out []logRec
	for _, r := range rows {
		if r.LSN >= first && r.LSN < last {
			out = append(out, r)
		}
	}
	return out
}

// endDataBackup ends a data backup of d that began at first: its LastLSN
// is the end of the log once the copy is done, and the commits since first
// go with it, so a RESTORE of it brings the database to LastLSN.
func (in *Instance) endDataBackup(d *database, first uint64) (uint64, []logRec) {
	in.rowsMu.RLock()
	defer in.rowsMu.RUnlock()
	in.mu.Lock()
	last := in.advanceLogLocked(d, 1)
	in.mu.Unlock()
	rows, err := in.readRowsOf(d)
	if err != nil {
		return last, nil
	}
	return last, lsnRange(rows, first, last)
}

// endBackupLocked moves d's chain after a successful backup; in.mu is held.
func (in *Instance) endBackupLocked(d *database, log, copyOnly bool, l backupLSNs, last uint64) {
	if copyOnly {
		return
	}
	if log {
		d.ChainLSN, d.ChainNew = last, false
		in.chainOnCurrentForkLocked(d)
		return
	}
	if l.typ != "I" { // a differential is no full: later backups keep their DatabaseBackupLSN
		d.FullCheckpointLSN = l.checkpoint
	}
	if d.ChainLSN == 0 && recoveryModel(d) != "SIMPLE" {
		d.ChainLSN, d.ChainNew = l.first, true
		in.chainOnCurrentForkLocked(d)
	}
}

func deviceNames(outs []*stripeOut) []string {
	var out []string
	for _, so := range outs {
		out = append(out, so.t.raw)
	}
	return out
}

// produceLog writes a log backup's records as log pages, pagesPerBlock to
// a block.
func produceLog(recs []logRec, pagesPerBlock int64) blockProducer {
	return func(ctx context.Context, pool *sync.Pool, fail func(error), emit func(*block) bool) {
		pages := (int64(len(recs)) + logRowsPage - 1) / logRowsPage
		var seq uint32
		for p := int64(0); p < pages; p += pagesPerBlock {
			cnt := min(pagesPerBlock, pages-p)
			buf := pool.Get().([]byte)[:cnt*PageSize]
			for i := range cnt {
				pg := buf[i*PageSize : (i+1)*PageSize]
				chunk := recs[(p+i)*logRowsPage : min(int64(len(recs)), (p+i+1)*logRowsPage)]
				clear(pg)
				putPageHeader(pg, pageHeader{PageID: uint32(p + i), FileID: logFileID, Type: pageLog, LSN: chunk[0].LSN})
				binary.LittleEndian.PutUint32(pg[pageHeaderSize:], uint32(len(chunk)))
				for j, r := range chunk {
					off := pageHeaderSize + 4 + j*commitRowSize
					binary.LittleEndian.PutUint64(pg[off:], uint64(r.ID))
					binary.LittleEndian.PutUint64(pg[off+8:], uint64(r.At))
					binary.LittleEndian.PutUint64(pg[off+16:], r.LSN)
				}
				sealPage(pg)
			}
			if !emit(&block{seq: seq, fileID: logFileID, pageID: uint32(p), raw: buf}) {
				return
			}
			seq++
		}
	}
}

// logPageRecs reads the records of a log backup's page.
func logPageRecs(pg []byte) []logRec {
	n := int(binary.LittleEndian.Uint32(pg[pageHeaderSize:]))
	n = min(n, logRowsPage)
	out := make([]logRec, 0, n)
	for j := range n {
		off := pageHeaderSize + 4 + j*commitRowSize
		out = append(out, logRec{ID: int64(binary.LittleEndian.Uint64(pg[off:])), At: int64(binary.LittleEndian.Uint64(pg[off+8:])),
			LSN: binary.LittleEndian.Uint64(pg[off+16:])})
	}
	return out
}

// commitLogRelation is SELECT from dbo.CommitLog: the committed rows (of a
// STANDBY database, those rolled forward so far).
func (x *execCtx) commitLogRelation(d *database, rel *relation) (*relation, error) {
	rows, err := x.in.commitRows(d)
	if err != nil {
		return nil, err
	}
	x.in.mu.Lock()
	limit := uint64(0)
	if d.Standby {
		limit = d.RedoLSN
	}
	x.in.mu.Unlock()
	for _, r := range rows {
		if limit != 0 && r.LSN >= limit {
			continue
		}
		rel.rows = append(rel.rows, []any{r.ID, r.committedAt()})
	}
	return rel, nil
}

// recoveryStatusView is sys.database_recovery_status: last_log_backup_lsn
// is "The starting log sequence number of the next log backup. If NULL, a
// transaction log back up cannot be performed because either the database
// is in SIMPLE recovery or there is no current database backup"
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-database-recovery-status-transact-sql).
func (x *execCtx) recoveryStatusView(qual string) *relation {
	rel := &relation{cols: []relCol{col(qual, "database_id", tds.TypeInt, 0), col(qual, "database_guid", tds.TypeUniqueIdentifier, 0),
		col(qual, "family_guid", tds.TypeUniqueIdentifier, 0), col(qual, "last_log_backup_lsn", tds.TypeNumeric, 0),
		col(qual, "recovery_fork_guid", tds.TypeUniqueIdentifier, 0), col(qual, "first_recovery_fork_guid", tds.TypeUniqueIdentifier, 0),
		col(qual, "fork_point_lsn", tds.TypeNumeric, 0)}}
	rel.cols[3].col.Precision, rel.cols[6].col.Precision = 25, 25
	for _, d := range x.in.allDatabases() {
		var last any
		if d.ChainLSN != 0 && recoveryModel(&d) != "SIMPLE" && d.State == "" {
			last = lsnText(d.ChainLSN)
		}
		fork, first, point := x.in.recoveryStatusForks(&d)
		rel.rows = append(rel.rows, []any{int64(d.ID), [16]byte(x.in.familyGUID(&d)), [16]byte(x.in.familyGUID(&d)), last, fork, first, point})
	}
	return rel
}
