package sqlsim

import (
	"bytes"
	"testing"
)

// A differential needs a conventional full as its base (3035 without one);
// a COPY_ONLY full is never its base ("Copy-Only Backups"); msdb and
// HEADERONLY carry the base (type 'I', BackupType 5, differential_base_lsn
// = the base's checkpoint_lsn, differential_base_guid = its
// backup_set_uuid; NULL for the other types) (backupset (Transact-SQL),
// RESTORE HEADERONLY, "Differential Backups (SQL Server)").
func TestDifferentialBackupBase(t *testing.T) {
	e := newEnv(t)
	logDB(t, e, "Sales", 2<<20, 5000)
	res := wantErrs(t, e.db, []int32{3035, 3013}, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\nobase.dif' WITH INIT, DIFFERENTIAL`)
	if e0 := res.errs[0]; e0.Class != 16 || e0.Message != `Cannot perform a differential backup for database "Sales", because a current database backup does not exist. Perform a full database backup by reissuing BACKUP DATABASE, omitting the WITH DIFFERENTIAL option.` {
		t.Fatalf("3035: class %d %q", e0.Class, e0.Message)
	}
	// A COPY_ONLY full alone is no base either.
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\copy0.bak' WITH INIT, COPY_ONLY`)
	wantErrs(t, e.db, []int32{3035, 3013}, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\nobase.dif' WITH INIT, DIFFERENTIAL`)

	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full.bak' WITH INIT, CHECKSUM`)
	commit(t, e, "Sales", 3)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\copy.bak' WITH INIT, COPY_ONLY`)
	commit(t, e, "Sales", 3)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\d1.dif' WITH INIT, CHECKSUM, DIFFERENTIAL`)

	r := mustRun(t, e.db, `SELECT type, backup_set_uuid, checkpoint_lsn, database_backup_lsn, differential_base_lsn, differential_base_guid, is_copy_only
		FROM msdb.dbo.backupset WHERE database_name = N'Sales' ORDER BY backup_set_id`)
	if len(r.rows) != 4 {
		t.Fatalf("%d backup sets, want 4: %v", len(r.rows), r.rows)
	}
	full, cp, diff := r.rows[1], r.rows[2], r.rows[3]
	if diff[0] != "I" || diff[6] != false {
		t.Fatalf("the differential's row: type %v is_copy_only %v, want I false", diff[0], diff[6])
	}
	if !bytes.Equal(diff[5].([]byte), full[1].([]byte)) || bytes.Equal(diff[5].([]byte), cp[1].([]byte)) {
		t.Fatalf("differential_base_guid %x: want the conventional full's %x, not the copy-only's %x", diff[5], full[1], cp[1])
	}
	if lsnString(diff[4]) != lsnString(full[2]) || lsnString(diff[3]) != lsnString(full[2]) {
		t.Fatalf("differential_base_lsn %v, database_backup_lsn %v: want the base's checkpoint_lsn %v", diff[4], diff[3], full[2])
	}
	for _, row := range [][]any{full, cp} {
		if row[4] != nil || row[5] != nil {
			t.Fatalf("a full's differential base columns %v %v, want NULL", row[4], row[5])
		}
	}

	r = mustRun(t, e.db, `RESTORE HEADERONLY FROM DISK = N'\\bak01\backup\d1.dif'`)
	if r.value(t, "BackupType") != int64(5) || r.value(t, "BackupTypeDescription") != "Database Differential" {
		t.Fatalf("HEADERONLY BackupType %v %v, want 5 Database Differential", r.value(t, "BackupType"), r.value(t, "BackupTypeDescription"))
	}
	if !bytes.Equal(r.value(t, "DifferentialBaseGUID").([]byte), full[1].([]byte)) || lsnString(r.value(t, "DifferentialBaseLSN")) != lsnString(full[2]) {
		t.Fatalf("HEADERONLY DifferentialBaseGUID %x LSN %v, want %x %v", r.value(t, "DifferentialBaseGUID"), r.value(t, "DifferentialBaseLSN"), full[1], full[2])
	}
	r = mustRun(t, e.db, `RESTORE HEADERONLY FROM DISK = N'\\bak01\backup\full.bak'`)
	if r.value(t, "DifferentialBaseGUID") != nil || r.value(t, "DifferentialBaseLSN") != nil {
		t.Fatalf("a full's HEADERONLY differential base %v %v, want NULL", r.value(t, "DifferentialBaseGUID"), r.value(t, "DifferentialBaseLSN"))
	}
	mustRun(t, e.db, `RESTORE VERIFYONLY FROM DISK = N'\\bak01\backup\d1.dif' WITH CHECKSUM`)
}

// RESTORE DATABASE of a differential applies on top of its own base
// restored WITH NORECOVERY and leaves the database at its LastLSN, where the
// logs after it continue; without the base (another full, a COPY_ONLY one,
// none) it fails with 3136, on a recovered database with 3117 ("RESTORE
// Statements", Database Engine events and errors 3000 to 3999).
func TestDifferentialRestore(t *testing.T) {
	e := newEnv(t)
	logDB(t, e, "Sales", 2<<20, 5000)
	commit(t, e, "Sales", 2)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full.bak' WITH INIT, CHECKSUM`)
	commit(t, e, "Sales", 3)
	mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\l1.trn' WITH INIT, CHECKSUM`)
	commit(t, e, "Sales", 2)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\copy.bak' WITH INIT, COPY_ONLY`)
	commit(t, e, "Sales", 2)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\d1.dif' WITH INIT, CHECKSUM, DIFFERENTIAL`)
	atDiff := commitRows(t, e.db, "Sales")
	commit(t, e, "Sales", 4)
	mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\l2.trn' WITH INIT, CHECKSUM`)
	all := commitRows(t, e.db, "Sales")
	if len(all) <= len(atDiff) || len(atDiff) < 9 {
		t.Fatalf("%d rows at the differential, %d in all", len(atDiff), len(all))
	}
	diffErr := func(db string, want []int32, with string) {
		t.Helper()
		res := wantErrs(t, e.db, want, `RESTORE DATABASE `+qi(db)+` FROM DISK = N'\\bak01\backup\d1.dif' WITH `+with)
		msg := map[int32]string{
			3136: "This differential backup cannot be restored because the database has not been restored to the correct earlier state.",
			3117: "The log or differential backup cannot be restored because no files are ready to rollforward.",
		}[want[0]]
		if e0 := res.errs[0]; e0.Class != 16 || e0.Message != msg {
			t.Fatalf("%d: class %d %q", want[0], e0.Class, e0.Message)
		}
	}
	// No base at all.
	diffErr("Copy", []int32{3136, 3013}, "NORECOVERY")
	// A COPY_ONLY full is no base.
	mustRun(t, e.db, `RESTORE DATABASE [Copy] FROM DISK = N'\\bak01\backup\copy.bak' WITH NORECOVERY, `+restoreMoves("copy"))
	diffErr("Copy", []int32{3136, 3013}, "NORECOVERY")
	// The base, recovered: too late.
	mustRun(t, e.db, `RESTORE DATABASE [Copy] FROM DISK = N'\\bak01\backup\full.bak' WITH REPLACE, RECOVERY, `+restoreMoves("copy"))
	diffErr("Copy", []int32{3117, 3013}, "NORECOVERY")

	// Full + differential: the rows committed before the differential.
	mustRun(t, e.db, `RESTORE DATABASE [Copy] FROM DISK = N'\\bak01\backup\full.bak' WITH REPLACE, NORECOVERY, `+restoreMoves("copy"))
	mustRun(t, e.db, `RESTORE DATABASE [Copy] FROM DISK = N'\\bak01\backup\d1.dif' WITH RECOVERY`)
	sameRows(t, "full and differential", commitRows(t, e.db, "Copy"), atDiff)
	r := mustRun(t, e.db, `SELECT TOP 1 h.restore_type FROM msdb.dbo.restorehistory h WHERE h.destination_database_name = N'Copy' ORDER BY h.restore_history_id DESC`)
	if r.rows[0][0] != "I" {
		t.Fatalf("restorehistory restore_type %v, want I", r.rows[0][0])
	}

	// Full + differential + the log after it (l1 is skipped): every row.
	mustRun(t, e.db, `RESTORE DATABASE [Copy] FROM DISK = N'\\bak01\backup\full.bak' WITH REPLACE, NORECOVERY, `+restoreMoves("copy"))
	mustRun(t, e.db, `RESTORE DATABASE [Copy] FROM DISK = N'\\bak01\backup\d1.dif' WITH NORECOVERY`)
	wantErrs(t, e.db, []int32{4326, 3013}, `RESTORE LOG [Copy] FROM DISK = N'\\bak01\backup\l1.trn' WITH NORECOVERY`)
	mustRun(t, e.db, `RESTORE LOG [Copy] FROM DISK = N'\\bak01\backup\l2.trn' WITH RECOVERY`)
	sameRows(t, "full, differential and log", commitRows(t, e.db, "Copy"), all)

	// A newer full is a new base: the old differential no longer fits it.
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full2.bak' WITH INIT, CHECKSUM`)
	mustRun(t, e.db, `RESTORE DATABASE [Copy] FROM DISK = N'\\bak01\backup\full2.bak' WITH REPLACE, NORECOVERY, `+restoreMoves("copy"))
	diffErr("Copy", []int32{3136, 3013}, "NORECOVERY")
}
