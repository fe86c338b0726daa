package sqlsim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// commitMany commits n workload rows as fast as they go.
func commitMany(t *testing.T, e *testEnv, db string, n int) {
	t.Helper()
	for range n {
		if err := e.in.CommitNow(db); err != nil {
			t.Fatal(err)
		}
	}
}

// A full backup taken while the workload commits holds exactly the rows
// committed before its end: the pages it copied plus the log written
// meanwhile ("Full database backups": "a full database backup includes
// part of the transaction log so that the full database backup can be
// recovered").
func TestWorkloadFullBackupHoldsRowsToItsEnd(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20, CommitRate: 400, CommitLogRows: 50000})
	time.Sleep(150 * time.Millisecond)
	before := len(commitRows(t, e.db, "Sales"))
	if before == 0 {
		t.Fatal("the workload committed nothing in 150 ms at 400 rows a second")
	}
	e.in.SetThrottle(16 << 20)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full.bak' WITH INIT, CHECKSUM`)
	e.in.SetThrottle(0)
	r := mustRun(t, e.db, `SELECT backup_start_date, backup_finish_date FROM msdb.dbo.backupset WHERE database_name = N'Sales'`)
	start, finish := r.rows[0][0].(time.Time), r.rows[0][1].(time.Time)
	time.Sleep(50 * time.Millisecond)
	e.in.StopWorkload("Sales")
	src := commitRows(t, e.db, "Sales")
	mustRun(t, e.db, `RESTORE DATABASE [C] FROM DISK = N'\\bak01\backup\full.bak' WITH `+restoreMoves("c"))
	cp := commitRows(t, e.db, "C")
	if len(cp) <= before {
		t.Fatalf("the copy has %d rows, no more than the %d committed before a backup of %v", len(cp), before, finish.Sub(start))
	}
	sameRows(t, "copy against the source's first rows", cp, src[:len(cp)])
	// backup_finish_date is a datetime (1/300 s), stamped right after the
	// backup's LastLSN; the slack absorbs a busy machine.
	slack := 50 * time.Millisecond
	if last := cp[len(cp)-1].at; last.After(finish.Add(slack)) {
		t.Fatalf("the copy holds a row committed at %v, after the backup finished at %v", last, finish)
	}
	for _, row := range src[len(cp):] {
		if row.at.Before(finish.Add(-slack)) {
			t.Fatalf("row %d committed at %v, before the backup finished at %v, is not in the copy", row.id, row.at, finish)
		}
	}
	// Rows committed during the backup count.
	if cp[len(cp)-1].at.Before(start) {
		t.Fatalf("the copy ends at %v, before the backup started at %v", cp[len(cp)-1].at, start)
	}
}

// A crash during RESTORE LOG leaves the database RESTORING where the
// previous log left it; the same RESTORE LOG then succeeds ("RESTORE
// Statements - Arguments": a restore sequence can be restarted from the
// interrupted step).
func TestCrashDuringRestoreLog(t *testing.T) {
	e := newEnv(t)
	logDB(t, e, "Sales", 2<<20, 30000)
	commitMany(t, e, "Sales", 5)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full.bak' WITH INIT`)
	commitMany(t, e, "Sales", 10)
	mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\l1.trn' WITH INIT`)
	// Eight blocks of 64 KB, so that progress messages come before the
	// crash at 50 %.
	commitMany(t, e, "Sales", 20000)
	mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\l2.trn' WITH INIT, MAXTRANSFERSIZE = 65536`)
	all := commitRows(t, e.db, "Sales")
	logs := backupRows(t, e.db, "Sales")[1:]
	mustRun(t, e.db, `RESTORE DATABASE [V] FROM DISK = N'\\bak01\backup\full.bak' WITH NORECOVERY, `+restoreMoves("v"))
	mustRun(t, e.db, `RESTORE LOG [V] FROM DISK = N'\\bak01\backup\l1.trn' WITH NORECOVERY`)
	e.in.SetThrottle(512 << 10)
	e.in.CrashAt(OpRestore, 50)
	_, err := run(testCtx(t), e.db, nil, `RESTORE LOG [V] FROM DISK = N'\\bak01\backup\l2.trn' WITH RECOVERY, STATS = 10`)
	if err == nil {
		t.Fatal("RESTORE LOG through a crash succeeded")
	}
	if err := e.in.Restart(); err != nil {
		t.Fatal(err)
	}
	e.in.SetThrottle(0)
	db := e.open(t, "master")
	if st, _ := dbState(t, db, "V"); st != "RESTORING" {
		t.Fatalf("after a crash in RESTORE LOG: %s", st)
	}
	if got := redoStartLSN(t, db, "V"); got != logs[0].last {
		t.Fatalf("redo_start_lsn after the crash = %s, want the first log's end %s", got, logs[0].last)
	}
	mustFail(t, db, 927, `SELECT COUNT_BIG(*) FROM [V].dbo.CommitLog`)
	mustRun(t, db, `RESTORE LOG [V] FROM DISK = N'\\bak01\backup\l2.trn' WITH RECOVERY`)
	sameRows(t, "after re-applying the log", commitRows(t, db, "V"), all)
}

// A log backup file that is gone: its RESTORE fails with 3201, and the
// next log leaves a gap (4305).
func TestMissingLogBackup(t *testing.T) {
	e := newEnv(t)
	logDB(t, e, "Sales", 2<<20, 5000)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full.bak' WITH INIT`)
	for _, f := range []string{"l1", "l2"} {
		commitMany(t, e, "Sales", 4)
		mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\`+f+`.trn' WITH INIT`)
	}
	if err := os.Remove(filepath.Join(e.shareDir, "l1.trn")); err != nil {
		t.Fatal(err)
	}
	mustRun(t, e.db, `RESTORE DATABASE [V] FROM DISK = N'\\bak01\backup\full.bak' WITH NORECOVERY, `+restoreMoves("v"))
	if r := mustFail(t, e.db, 3013, `RESTORE LOG [V] FROM DISK = N'\\bak01\backup\l1.trn' WITH NORECOVERY`); r.errs[0].Number != 3201 {
		t.Fatalf("missing log file: %v", r.errNums())
	}
	r := mustFail(t, e.db, 3013, `RESTORE LOG [V] FROM DISK = N'\\bak01\backup\l2.trn' WITH NORECOVERY`)
	if r.errs[0].Number != 4305 || !strings.HasSuffix(r.errs[1].Message, "RESTORE LOG is terminating abnormally.") {
		t.Fatalf("the log after a missing one: %v %v", r.errNums(), r.errs)
	}
}

// The workload commits at its rate, pauses with the instance and resumes
// after a restart, and stops on StopWorkload.
func TestWorkloadRateAndRestart(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20, CommitRate: 100, CommitLogRows: 10000})
	time.Sleep(500 * time.Millisecond)
	n1 := len(commitRows(t, e.db, "Sales"))
	if n1 < 20 || n1 > 80 {
		t.Fatalf("%d rows after 500 ms at 100 a second", n1)
	}
	e.in.Crash()
	if err := e.in.Start(); err != nil {
		t.Fatal(err)
	}
	db := e.open(t, "master")
	time.Sleep(300 * time.Millisecond)
	n2 := len(commitRows(t, db, "Sales"))
	if n2 <= n1 {
		t.Fatalf("no commits after the restart: %d then %d rows", n1, n2)
	}
	e.in.StopWorkload("Sales")
	n3 := len(commitRows(t, db, "Sales"))
	time.Sleep(100 * time.Millisecond)
	if n4 := len(commitRows(t, db, "Sales")); n4 != n3 {
		t.Fatalf("commits after StopWorkload: %d then %d rows", n3, n4)
	}
	rows := commitRows(t, db, "Sales")
	for i := 1; i < len(rows); i++ {
		if rows[i].id != rows[i-1].id+1 || rows[i].at.Before(rows[i-1].at) {
			t.Fatalf("rows %v and %v are not in commit order", rows[i-1], rows[i])
		}
	}
}

// A crash of the instance loses no committed transaction and reuses no
// LSN: the log goes on after the last commit hardened before the crash
// ("every record in the SQL Server transaction log is uniquely identified
// by a log sequence number"; "if LSN2 is greater than LSN1, the change
// described by the log record referred to by LSN2 occurred after",
// "SQL Server transaction log architecture and management guide",
// https://learn.microsoft.com/en-us/sql/relational-databases/sql-server-transaction-log-architecture-and-management-guide).
// So the log backup after the restart holds the commits made before it,
// and a copy restored from the full and that log holds every row.
func TestCommitsBeforeACrashKeepTheirPlaceInTheLog(t *testing.T) {
	e := newEnv(t)
	logDB(t, e, "Sales", 2<<20, 5000)
	commitMany(t, e, "Sales", 10)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full.bak' WITH INIT`)
	commitMany(t, e, "Sales", 30)
	e.in.Crash()
	if err := e.in.Start(); err != nil {
		t.Fatal(err)
	}
	db := e.open(t, "master")
	commitMany(t, e, "Sales", 5)
	rows, err := e.in.commitRows(e.in.lookupDB("Sales"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].LSN <= rows[i-1].LSN {
			t.Fatalf("row %d committed after the restart has LSN %d, row %d before it %d", rows[i].ID, rows[i].LSN, rows[i-1].ID, rows[i-1].LSN)
		}
	}
	mustRun(t, db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\l1.trn' WITH INIT`)
	mustRun(t, db, `RESTORE DATABASE [V] FROM DISK = N'\\bak01\backup\full.bak' WITH NORECOVERY, `+restoreMoves("v"))
	mustRun(t, db, `RESTORE LOG [V] FROM DISK = N'\\bak01\backup\l1.trn' WITH RECOVERY`)
	sameRows(t, "the copy restored from the full and the log after the crash", commitRows(t, db, "V"), commitRows(t, db, "Sales"))
}

// A DBA restores the database the workload writes over itself (RESTORE
// ... WITH REPLACE from an older full) while it runs: the database then
// holds the full's rows and nothing committed after it, the workload goes
// on committing into it, and a restart of the instance resumes it as it
// resumes any other.
func TestWorkloadGoesOnAfterRestoreReplace(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20, CommitRate: 100, CommitLogRows: 10000})
	time.Sleep(200 * time.Millisecond)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full.bak' WITH INIT`)
	time.Sleep(200 * time.Millisecond)
	// The backup's rows, read from a copy restored under another name.
	mustRun(t, e.db, `RESTORE DATABASE [C] FROM DISK = N'\\bak01\backup\full.bak' WITH `+restoreMoves("c"))
	inFull := commitRows(t, e.db, "C")
	if before := commitRows(t, e.db, "Sales"); len(before) <= len(inFull) {
		t.Fatalf("no commits after the backup: %d rows, the full %d", len(before), len(inFull))
	}
	mustRun(t, e.db, `RESTORE DATABASE [Sales] FROM DISK = N'\\bak01\backup\full.bak' WITH REPLACE`)
	time.Sleep(200 * time.Millisecond)
	after := commitRows(t, e.db, "Sales")
	if len(after) <= len(inFull) {
		t.Fatalf("no commits after RESTORE WITH REPLACE: %d rows, the full %d", len(after), len(inFull))
	}
	sameRows(t, "the restored database's first rows against the full's", after[:len(inFull)], inFull)

	e.in.Crash()
	if err := e.in.Start(); err != nil {
		t.Fatal(err)
	}
	db := e.open(t, "master")
	n1 := len(commitRows(t, db, "Sales"))
	time.Sleep(300 * time.Millisecond)
	if n2 := len(commitRows(t, db, "Sales")); n2 <= n1 {
		t.Fatalf("no commits after a restart of the instance that restored the database over itself: %d then %d rows", n1, n2)
	}
}
