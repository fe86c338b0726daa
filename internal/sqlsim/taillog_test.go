package sqlsim

import (
	"testing"
	"time"
)

// A tail-log backup WITH NORECOVERY takes the database exclusively (3101
// while another session is in it), leaves it RESTORING (927 for every later
// BACKUP and use), and holds every transaction committed before it: the
// full, the logs and the tail restore exactly the source's rows ("Tail-Log
// Backups (SQL Server)"; BACKUP (Transact-SQL), NORECOVERY).
func TestTailLogBackupNoRecovery(t *testing.T) {
	e := newEnv(t)
	logDB(t, e, "Sales", 2<<20, 5000)
	commit(t, e, "Sales", 4)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full.bak' WITH INIT, CHECKSUM`)
	commit(t, e, "Sales", 3)
	mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\l1.trn' WITH INIT, CHECKSUM`)
	commit(t, e, "Sales", 5) // only in the tail
	all := commitRows(t, e.db, "Sales")

	tail := `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\tail.trn' WITH INIT, CHECKSUM, NORECOVERY`
	user := e.open(t, "Sales")
	mustRun(t, user, "SELECT 1")
	res := wantErrs(t, e.db, []int32{3101, 3013}, tail)
	if e0 := res.errs[0]; e0.Class != 16 || e0.Message != "Exclusive access could not be obtained because the database is in use." {
		t.Fatalf("3101: class %d %q", e0.Class, e0.Message)
	}
	if st, _ := dbState(t, e.db, "Sales"); st != "ONLINE" {
		t.Fatalf("after a refused tail-log backup: %s, want ONLINE", st)
	}
	user.Close()
	// The closed session ends when the server reads the disconnect.
	for i := 0; asInt(mustRun(t, e.db, `SELECT COUNT(*) FROM sys.dm_exec_sessions WHERE database_id = DB_ID(N'Sales')`).rows[0][0]) > 0; i++ {
		if i == 200 {
			t.Fatal("the closed session is still in Sales")
		}
		time.Sleep(10 * time.Millisecond)
	}

	mustRun(t, e.db, tail)
	if st, _ := dbState(t, e.db, "Sales"); st != "RESTORING" {
		t.Fatalf("after BACKUP LOG WITH NORECOVERY: %s, want RESTORING", st)
	}
	rows := backupRows(t, e.db, "Sales")
	l1, tl := rows[len(rows)-2], rows[len(rows)-1]
	if tl.typ != "L" || tl.first != l1.last {
		t.Fatalf("the tail %+v does not continue the chain after %+v", tl, l1)
	}
	for _, q := range []string{
		`BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\again.trn' WITH INIT`,
		`BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\again.bak' WITH INIT`,
		`SELECT COUNT(*) FROM [Sales].dbo.CommitLog`,
	} {
		res, err := run(testCtx(t), e.db, nil, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.errs) == 0 || res.errs[0].Number != 927 || res.errs[0].Class != 14 ||
			res.errs[0].Message != "Database 'Sales' cannot be opened. It is in the middle of a restore." {
			t.Fatalf("%s on the RESTORING source: %v %q", q, res.errNums(), res.errs[0].Message)
		}
	}

	mustRun(t, e.db, `RESTORE DATABASE [Copy] FROM DISK = N'\\bak01\backup\full.bak' WITH NORECOVERY, `+restoreMoves("copy"))
	mustRun(t, e.db, `RESTORE LOG [Copy] FROM DISK = N'\\bak01\backup\l1.trn' WITH NORECOVERY`)
	mustRun(t, e.db, `RESTORE LOG [Copy] FROM DISK = N'\\bak01\backup\tail.trn' WITH RECOVERY`)
	sameRows(t, "full, log and tail", commitRows(t, e.db, "Copy"), all)

	// The source itself: restored over WITH REPLACE, and online again.
	mustRun(t, e.db, `RESTORE DATABASE [Sales] FROM DISK = N'\\bak01\backup\full.bak' WITH REPLACE, NORECOVERY`)
	mustRun(t, e.db, `RESTORE LOG [Sales] FROM DISK = N'\\bak01\backup\l1.trn' WITH NORECOVERY`)
	mustRun(t, e.db, `RESTORE LOG [Sales] FROM DISK = N'\\bak01\backup\tail.trn' WITH RECOVERY`)
	sameRows(t, "the source restored over", commitRows(t, e.db, "Sales"), all)
	if n := len(all); n < 12 {
		t.Fatalf("%d rows, want the 12 committed", n)
	}
}
