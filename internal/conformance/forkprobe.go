package conformance

import (
	"context"
	"fmt"
	"strings"

	"github.com/backupcycle/backupcycle/internal/logchain"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The log chain after a restore of the source. "If you recover a database
// to an earlier recovery point and start using the database from that
// point, a new recovery path originates" ("Recovery Paths"); backupset and
// RESTORE HEADERONLY name each backup's recovery forks. Whether the first
// log backup after RESTORE ... WITH RECOVERY is allowed without a new full
// backup, and which forks and fork point it carries, the documentation
// does not say. The product reads them (logchain.Fork) to tell another
// tool's log backups of the path a restore left from those of the chain's
// own, and to see that the source was restored to a point before its
// chain's end.

// forkObs is the probe's scratch: a full backup (not copy-only, so that
// it starts the log chain), a log backup, the database restored over
// itself from that full, and the next log backup, each as RESTORE
// HEADERONLY and msdb read it.
type forkObs struct {
	Full, Before, After mssql.BackupHeader
	// AfterErr is the error of the log backup after the restore (or of
	// reading it); MsdbAfter the fork msdb records for it.
	AfterErr  error
	MsdbAfter mssql.RecoveryFork
	MsdbFound bool
}

// probeFork backs the scratch database up (full, then log), restores it
// over itself from that full WITH RECOVERY, backs its log up again and
// reads the forks. It runs last: it replaces the scratch database.
func (r *runner) probeFork(ctx context.Context) {
	if v := r.vanishBackup; v != nil && v.StillRuns {
		r.skip[IDLogForkAfterRestore] = "the BACKUP whose client vanished still runs on the scratch database"
		return
	}
	o := &forkObs{}
	step := func(what string, err error) bool {
		if err != nil {
			r.skip[IDLogForkAfterRestore] = what + ": " + err.Error()
		}
		return err == nil
	}
	fix, err := tsql.SimpleRecoveryFix(r.p.Scratch) // SET RECOVERY FULL: a log chain needs it
	if !step("ALTER DATABASE ... SET RECOVERY FULL", err) {
		return
	}
	if _, err := r.src.Run(ctx, "ALTER DATABASE", fix, nil); !step(fix, err) {
		return
	}
	full, logs := r.p.ForkBackup, r.p.ForkLogs
	stmt, err := tsql.BackupDatabase(tsql.BackupOptions{Database: r.p.Scratch, Disks: []string{r.p.sourcePath(full)}, Checksum: true,
		Init: true, Format: true, Compression: new(bool), Name: r.p.setName() + " fork"})
	if !step("BACKUP DATABASE", err) {
		return
	}
	r.made.file(full)
	if _, err := r.src.Run(ctx, "BACKUP DATABASE", stmt, nil); !step("BACKUP DATABASE (not copy-only) of the scratch database", err) {
		return
	}
	if o.Full, err = r.readHeader(ctx, full); !step("RESTORE HEADERONLY of its full backup", err) {
		return
	}
	r.probeDifferential(ctx, o.Full)
	if o.Before, err = r.backupLog(ctx, logs[0], 1); !step("BACKUP LOG before the restore", err) {
		return
	}
	restore, err := tsql.RestoreDatabase(tsql.RestoreOptions{Database: r.p.Scratch, Disks: []string{r.p.sourcePath(full)}, Replace: true})
	if !step("RESTORE DATABASE", err) {
		return
	}
	if _, err := r.src.Run(ctx, "RESTORE DATABASE", restore, nil); !step("RESTORE DATABASE ... WITH REPLACE of the scratch database", err) {
		return
	}
	if o.After, o.AfterErr = r.backupLog(ctx, logs[1], 2); o.AfterErr == nil {
		q, args, err := tsql.BackupSetFork(o.After.BackupSetGUID)
		if !step("msdb lookup", err) {
			return
		}
		o.MsdbAfter, o.MsdbFound, err = r.src.BackupSetFork(ctx, q, args...)
		if !step("msdb.dbo.backupset of the log backup after the restore", err) {
			return
		}
	}
	r.fork = o
}

// backupLog takes log backup n of the scratch database to file, with the
// product's statement, and reads its header.
func (r *runner) backupLog(ctx context.Context, file string, n int64) (mssql.BackupHeader, error) {
	stmt, err := tsql.BackupLog(tsql.BackupLogOptions{Database: r.p.Scratch, Disks: []string{r.p.sourcePath(file)}, Chain: 1, Number: n,
		Compression: new(bool)})
	if err != nil {
		return mssql.BackupHeader{}, err
	}
	r.made.file(file)
	if _, err := r.src.Run(ctx, "BACKUP LOG", stmt, nil); err != nil {
		return mssql.BackupHeader{}, err
	}
	return r.readHeader(ctx, file)
}

// readHeader is RESTORE HEADERONLY of file on the backup server, as the source
// reads it.
func (r *runner) readHeader(ctx context.Context, file string) (mssql.BackupHeader, error) {
	q, err := tsql.RestoreHeaderOnly([]string{r.p.sourcePath(file)})
	if err != nil {
		return mssql.BackupHeader{}, err
	}
	hs, err := r.src.HeaderOnly(ctx, q)
	if err != nil {
		return mssql.BackupHeader{}, err
	}
	if len(hs) == 0 {
		return mssql.BackupHeader{}, fmt.Errorf("RESTORE HEADERONLY of %s returned no row", file)
	}
	return hs[0], nil
}

// judgeLogFork: the log backup after the restore is not on the path of the
// one before it (logchain.Fork, the product's rule), starts on the
// restored full's fork, and msdb records the forks HEADERONLY gives.
// Facts: the forks and LSNs of the full and both log backups.
func judgeLogFork(o forkObs) Probe {
	p := newProbe(IDLogForkAfterRestore)
	fork := func(h mssql.BackupHeader) map[string]string {
		return map[string]string{"first_recovery_fork": h.Fork.First, "recovery_fork": h.Fork.Last, "fork_point_lsn": h.Fork.Point,
			"first_lsn": h.FirstLSN, "last_lsn": h.LastLSN}
	}
	p.Facts["full"], p.Facts["log_before"] = fork(o.Full), fork(o.Before)
	if o.AfterErr != nil {
		p.Verdict = Fails
		if errs := sqlErrors(o.AfterErr); len(errs) > 0 {
			p.Observed = "the log backup after the restore failed: " + strings.Join(errs, "; ")
		} else {
			p.Verdict, p.Observed, p.Why = Inconclusive, notMeasured, "the log backup after the restore could not run: "+o.AfterErr.Error()
		}
		return p
	}
	p.Facts["log_after"] = fork(o.After)
	after := logchain.Fork{First: o.After.Fork.First, Last: o.After.Fork.Last, Point: logchain.LSN(o.After.Fork.Point)}
	p.Observed = fmt.Sprintf("the full backup is on fork %s (LSN %s to %s); the log backup before the restore on %s..%s (LSN %s to %s); "+
		"the one after it on %s..%s, fork point %s (LSN %s to %s); msdb records %s..%s, fork point %s",
		o.Full.Fork.Last, o.Full.FirstLSN, o.Full.LastLSN, o.Before.Fork.First, o.Before.Fork.Last, o.Before.FirstLSN, o.Before.LastLSN,
		o.After.Fork.First, o.After.Fork.Last, orNULL(o.After.Fork.Point), o.After.FirstLSN, o.After.LastLSN,
		o.MsdbAfter.First, o.MsdbAfter.Last, orNULL(o.MsdbAfter.Point))
	switch {
	case !after.Known() || o.Before.Fork.Last == "":
		p.Verdict = Fails
		p.Observed += "; RESTORE HEADERONLY gives no recovery fork"
	case !o.MsdbFound || !strings.EqualFold(o.MsdbAfter.First, o.After.Fork.First) || !strings.EqualFold(o.MsdbAfter.Last, o.After.Fork.Last) ||
		o.MsdbAfter.Point != o.After.Fork.Point:
		p.Verdict = Fails
		p.Observed += "; msdb.dbo.backupset does not record the forks RESTORE HEADERONLY gives"
	case after.Continues(o.Before.Fork.Last, logchain.LSN(o.Before.LastLSN)):
		p.Verdict = Fails
		p.Observed += "; by its forks the log backup after the restore continues the one before it"
	case !strings.EqualFold(o.After.Fork.First, o.Full.Fork.Last):
		p.Verdict = Fails
		p.Observed += "; it does not start on the restored full's fork"
	default:
		p.Verdict = Holds
	}
	return p
}

func orNULL(s string) string {
	if s == "" {
		return "NULL"
	}
	return s
}

// diffObs is the differential probe's scratch: the full backup it is
// taken on and its header.
type diffObs struct {
	Full, Diff mssql.BackupHeader
}

// probeDifferential takes a differential of the scratch database with the
// product's statement (WITH DIFFERENTIAL, CHECKSUM) on full, the full
// backup the fork probe just took, and reads its header: which full a
// differential names as its base, the product's rule for telling its own
// base from another tool's full (activities/diff.go), is not settled by
// the documentation ("Differential Backups (SQL Server)" names no GUID;
// RESTORE HEADERONLY calls DifferentialBaseGUID "the unique identifier of
// the differential base").
func (r *runner) probeDifferential(ctx context.Context, full mssql.BackupHeader) {
	stmt, err := tsql.BackupDatabase(tsql.BackupOptions{Database: r.p.Scratch, Disks: []string{r.p.sourcePath(r.p.ForkDiff)}, Checksum: true,
		Init: true, Format: true, Compression: new(bool), Differential: true, Name: r.p.setName() + " differential"})
	if err != nil {
		r.skip[IDDifferentialBase] = err.Error()
		return
	}
	r.made.file(r.p.ForkDiff)
	if _, err := r.src.Run(ctx, "BACKUP DATABASE", stmt, nil); err != nil {
		r.skip[IDDifferentialBase] = "BACKUP DATABASE ... WITH DIFFERENTIAL of the scratch database: " + err.Error()
		return
	}
	h, err := r.readHeader(ctx, r.p.ForkDiff)
	if err != nil {
		r.skip[IDDifferentialBase] = "RESTORE HEADERONLY of the differential: " + err.Error()
		return
	}
	r.diff = &diffObs{Full: full, Diff: h}
}

// judgeDifferentialBase: the differential names the full as its base, as
// the product compares them (by GUID, case-insensitively).
// Facts: the full's GUID, the differential's type, base GUID and LSN.
func judgeDifferentialBase(o diffObs) Probe {
	p := newProbe(IDDifferentialBase)
	p.Facts["full_backup_set_guid"], p.Facts["backup_type"] = o.Full.BackupSetGUID, o.Diff.BackupType
	p.Facts["differential_base_guid"], p.Facts["differential_base_lsn"] = o.Diff.DifferentialBaseGUID, o.Diff.DifferentialBaseLSN
	p.Observed = fmt.Sprintf("the full backup is backup set %s; the differential is of type %d and names base %s at LSN %s",
		o.Full.BackupSetGUID, o.Diff.BackupType, orNULL(o.Diff.DifferentialBaseGUID), orNULL(o.Diff.DifferentialBaseLSN))
	if o.Diff.BackupType == tsql.BackupTypeDifferential && o.Diff.DifferentialBaseLSN != "" &&
		strings.EqualFold(strings.TrimSpace(o.Diff.DifferentialBaseGUID), strings.TrimSpace(o.Full.BackupSetGUID)) {
		p.Verdict = Holds
		return p
	}
	p.Verdict = Fails
	return p
}
