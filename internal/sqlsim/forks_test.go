package sqlsim

import (
	"bytes"
	"fmt"
	"testing"

	mssql "github.com/microsoft/go-mssqldb"
)

// forks is one row's recovery fork columns (raw uniqueidentifier bytes;
// nil for NULL) and fork point.
type forks struct {
	first, last []byte
	point       string
}

func forkOf(v any) []byte {
	b, _ := v.([]byte)
	return b
}

func msdbForks(t *testing.T, e *testEnv, id int64) forks {
	t.Helper()
	r := mustRun(t, e.db, `SELECT first_recovery_fork_guid, last_recovery_fork_guid, fork_point_lsn FROM msdb.dbo.backupset WHERE backup_set_id = `+fmt.Sprint(id))
	return forks{forkOf(r.rows[0][0]), forkOf(r.rows[0][1]), lsnString(r.rows[0][2])}
}

func headerOnlyForks(t *testing.T, e *testEnv, file string) forks {
	t.Helper()
	r := mustRun(t, e.db, `RESTORE HEADERONLY FROM DISK = N'\\bak01\backup\`+file+`'`)
	return forks{forkOf(r.value(t, "FirstRecoveryForkID")), forkOf(r.value(t, "RecoveryForkID")), lsnString(r.value(t, "ForkPointLSN"))}
}

func statusForks(t *testing.T, e *testEnv, db string) (cur []byte, f forks) {
	t.Helper()
	r := mustRun(t, e.db, `SELECT recovery_fork_guid, first_recovery_fork_guid, fork_point_lsn FROM sys.database_recovery_status WHERE database_id = DB_ID(`+ql(db)+`)`)
	return forkOf(r.rows[0][0]), forks{first: forkOf(r.rows[0][1]), point: lsnString(r.rows[0][2])}
}

// Every RESTORE ... WITH RECOVERY starts a new recovery fork at the point
// it reached ("Recovery Paths"): sys.database_recovery_status names it and
// where it began; the next log backup crosses from the restored backup's
// fork to the new one (backupset and HEADERONLY: FirstRecoveryForkID,
// RecoveryForkID, ForkPointLSN); RESTORE LOG of a backup off the
// restoring copy's recovery path fails with 4330.
func TestRecoveryForks(t *testing.T) {
	e := newEnv(t)
	logDB(t, e, "Sales", 2<<20, 5000)
	commit(t, e, "Sales", 3)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full.bak' WITH INIT, CHECKSUM`)
	commit(t, e, "Sales", 3)
	mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\l1.trn' WITH INIT`)
	commit(t, e, "Sales", 3)
	mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\l2.trn' WITH INIT`)
	rows := backupRows(t, e.db, "Sales")
	full, l1, l2 := rows[0], rows[1], rows[2]

	a, st := statusForks(t, e, "Sales")
	if len(a) != 16 || st.first != nil || st.point != "NULL" {
		t.Fatalf("a database never restored: fork %x, first %x, point %s", a, st.first, st.point)
	}
	for _, id := range []int64{full.id, l1.id, l2.id} {
		if f := msdbForks(t, e, id); !bytes.Equal(f.first, a) || !bytes.Equal(f.last, a) || f.point != "NULL" {
			t.Fatalf("backup set %d on fork %x: %x..%x point %s", id, a, f.first, f.last, f.point)
		}
	}
	if h := headerOnlyForks(t, e, "l2.trn"); !bytes.Equal(h.first, a) || !bytes.Equal(h.last, a) || h.point != "NULL" {
		t.Fatalf("HEADERONLY of l2: %x..%x point %s", h.first, h.last, h.point)
	}

	// The source restored from the full: a new fork at the full's end.
	mustRun(t, e.db, `RESTORE DATABASE [Sales] FROM DISK = N'\\bak01\backup\full.bak' WITH REPLACE`)
	b, st := statusForks(t, e, "Sales")
	if bytes.Equal(b, a) || !bytes.Equal(st.first, a) || st.point != full.last {
		t.Fatalf("after RESTORE WITH RECOVERY: fork %x (was %x), first %x, point %s, want a new fork from %x at %s", b, a, st.first, st.point, a, full.last)
	}
	commit(t, e, "Sales", 2)
	mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\l3.trn' WITH INIT`)
	l3 := backupRows(t, e.db, "Sales")[3]
	if l3.first != full.last {
		t.Fatalf("the first log after the restore starts at %s, want the restored full's end %s", l3.first, full.last)
	}
	want := forks{a, b, full.last}
	for what, got := range map[string]forks{"backupset": msdbForks(t, e, l3.id), "HEADERONLY": headerOnlyForks(t, e, "l3.trn")} {
		if !bytes.Equal(got.first, want.first) || !bytes.Equal(got.last, want.last) || got.point != want.point {
			t.Fatalf("%s of the log crossing the fork: %x..%x point %s, want %x..%x point %s", what, got.first, got.last, got.point, a, b, full.last)
		}
	}
	if cur, st := statusForks(t, e, "Sales"); !bytes.Equal(cur, b) || st.first != nil || st.point != "NULL" {
		t.Fatalf("after the crossing log: fork %x first %x point %s", cur, st.first, st.point)
	}
	// msdb looked up by the set's GUID as a client spells it.
	var u mssql.UniqueIdentifier
	r := mustRun(t, e.db, `SELECT backup_set_uuid FROM msdb.dbo.backupset WHERE backup_set_id = `+fmt.Sprint(l3.id))
	if err := u.Scan(r.rows[0][0]); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, e.db, `SELECT last_recovery_fork_guid FROM msdb.dbo.backupset WHERE backup_set_uuid = @p1`, u.String())
	if len(r.rows) != 1 || !bytes.Equal(forkOf(r.rows[0][0]), b) {
		t.Fatalf("backup_set_uuid = '%s': %v", u.String(), r.rows)
	}

	// A copy rolled forward through l1 is on the old path past the fork
	// point: l3 is not for it (4330). A copy of the full alone takes l3
	// and is then on the new path, where l2 is not.
	mustRun(t, e.db, `RESTORE DATABASE [C] FROM DISK = N'\\bak01\backup\full.bak' WITH NORECOVERY, `+restoreMoves("c"))
	mustRun(t, e.db, `RESTORE LOG [C] FROM DISK = N'\\bak01\backup\l1.trn' WITH NORECOVERY`)
	if res := mustFail(t, e.db, 3013, `RESTORE LOG [C] FROM DISK = N'\\bak01\backup\l3.trn' WITH NORECOVERY`); res.errs[0].Number != 4330 {
		t.Fatalf("RESTORE LOG of a log on another recovery path: %v, want 4330", res.errNums())
	}
	mustRun(t, e.db, `RESTORE LOG [C] FROM DISK = N'\\bak01\backup\l2.trn' WITH NORECOVERY`)
	mustRun(t, e.db, `RESTORE DATABASE [D] FROM DISK = N'\\bak01\backup\full.bak' WITH NORECOVERY, `+restoreMoves("d"))
	mustRun(t, e.db, `RESTORE LOG [D] FROM DISK = N'\\bak01\backup\l3.trn' WITH NORECOVERY`)
	r = mustRun(t, e.db, `SELECT redo_start_fork_guid FROM sys.master_files WHERE file_id = 1 AND database_id = DB_ID(N'D')`)
	if !bytes.Equal(forkOf(r.rows[0][0]), b) {
		t.Fatalf("D's redo_start_fork_guid %x, want the new fork %x", r.rows[0][0], b)
	}
	if res := mustFail(t, e.db, 3013, `RESTORE LOG [D] FROM DISK = N'\\bak01\backup\l2.trn' WITH NORECOVERY`); res.errs[0].Number != 4330 {
		t.Fatalf("RESTORE LOG of the old path's log on the new one: %v, want 4330", res.errNums())
	}
	// Recovering the copy starts a fork of its own.
	mustRun(t, e.db, `RESTORE DATABASE [D] WITH RECOVERY`)
	if d, st := statusForks(t, e, "D"); bytes.Equal(d, b) || !bytes.Equal(st.first, b) {
		t.Fatalf("the recovered copy: fork %x first %x, want a new fork from %x", d, st.first, b)
	}
}
