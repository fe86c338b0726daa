package sqlsim

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"
)

// logDB creates a database of size bytes with the workload table for rows
// rows.
func logDB(t *testing.T, e *testEnv, name string, size, rows int64) {
	t.Helper()
	e.create(t, DatabaseSpec{Name: name, Size: size, CommitLog: true, CommitLogRows: rows})
}

// commit commits n workload rows a few milliseconds apart.
func commit(t *testing.T, e *testEnv, db string, n int) {
	t.Helper()
	for range n {
		if err := e.in.CommitNow(db); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Millisecond)
	}
}

// backupRow is msdb.dbo.backupset as the chain tests read it.
type backupRow struct {
	id                                int64
	typ                               string
	first, last, checkpoint, dbBackup string
	copyOnly, begins                  bool
	user, name                        string
}

func backupRows(t *testing.T, db *sql.DB, dbName string) []backupRow {
	t.Helper()
	r := mustRun(t, db, `SELECT backup_set_id, type, first_lsn, last_lsn, checkpoint_lsn, database_backup_lsn, is_copy_only, begins_log_chain,
		user_name, name FROM msdb.dbo.backupset WHERE database_name = `+ql(dbName)+` ORDER BY backup_set_id`)
	var out []backupRow
	for _, row := range r.rows {
		b := backupRow{id: asInt(row[0]), typ: fmt.Sprint(row[1]), first: lsnString(row[2]), last: lsnString(row[3]),
			checkpoint: lsnString(row[4]), dbBackup: lsnString(row[5]), copyOnly: row[6].(bool), begins: row[7].(bool)}
		if row[8] != nil {
			b.user = row[8].(string)
		}
		if row[9] != nil {
			b.name = row[9].(string)
		}
		out = append(out, b)
	}
	return out
}

func lsnString(v any) string {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case nil:
		return "NULL"
	}
	return fmt.Sprint(v)
}

func lastLogBackupLSN(t *testing.T, db *sql.DB, dbName string) string {
	t.Helper()
	r := mustRun(t, db, `SELECT last_log_backup_lsn FROM sys.database_recovery_status WHERE database_id = DB_ID(`+ql(dbName)+`)`)
	if len(r.rows) != 1 {
		t.Fatalf("sys.database_recovery_status: %d rows for %s", len(r.rows), dbName)
	}
	return lsnString(r.rows[0][0])
}

// The recovery models and the start and end of a log chain ("Recovery
// models (SQL Server)", MSSQLSERVER_4214, error 4208).
func TestRecoveryModelsAndLogChainStart(t *testing.T) {
	e := newEnv(t)
	logDB(t, e, "Sales", 2<<20, 5000)
	r := mustRun(t, e.db, `SELECT recovery_model, recovery_model_desc FROM sys.databases WHERE name = N'Sales'`)
	if asInt(r.rows[0][0]) != 1 || r.rows[0][1] != "FULL" {
		t.Fatalf("recovery model %v, want 1 FULL", r.rows[0])
	}
	// FULL without a full backup is pseudo-simple.
	if got := lastLogBackupLSN(t, e.db, "Sales"); got != "NULL" {
		t.Fatalf("last_log_backup_lsn before any backup = %s, want NULL", got)
	}
	bl := `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\s%d.trn' WITH INIT`
	res := mustFail(t, e.db, 3013, fmt.Sprintf(bl, 1))
	if n := res.errNums(); len(n) != 2 || n[0] != 4214 {
		t.Fatalf("BACKUP LOG without a full: errors %v, want [4214 3013]", n)
	}
	if e0 := res.errs[0]; e0.Class != 16 || e0.State != 1 || e0.Message != "BACKUP LOG cannot be performed because there is no current database backup." {
		t.Fatalf("4214: class %d state %d %q", e0.Class, e0.State, e0.Message)
	}
	if m := res.errs[1].Message; m != "BACKUP LOG is terminating abnormally." {
		t.Fatalf("3013 text %q", m)
	}
	// A copy-only full does not start the chain.
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\copy.bak' WITH COPY_ONLY, INIT`)
	mustFail(t, e.db, 3013, fmt.Sprintf(bl, 2))
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full1.bak' WITH INIT`)
	rows := backupRows(t, e.db, "Sales")
	full := rows[len(rows)-1]
	if got := lastLogBackupLSN(t, e.db, "Sales"); got != full.first {
		t.Fatalf("last_log_backup_lsn after the first full = %s, want its first_lsn %s", got, full.first)
	}
	mustRun(t, e.db, fmt.Sprintf(bl, 3))
	// SIMPLE: 4208, the chain ends.
	mustRun(t, e.db, `ALTER DATABASE [Sales] SET RECOVERY SIMPLE`)
	r = mustRun(t, e.db, `SELECT recovery_model, recovery_model_desc, DATABASEPROPERTYEX(N'Sales', 'Recovery') FROM sys.databases WHERE name = N'Sales'`)
	if asInt(r.rows[0][0]) != 3 || r.rows[0][1] != "SIMPLE" || r.rows[0][2] != "SIMPLE" {
		t.Fatalf("after SET RECOVERY SIMPLE: %v", r.rows[0])
	}
	res = mustFail(t, e.db, 3013, fmt.Sprintf(bl, 4))
	if e0 := res.errs[0]; e0.Number != 4208 || e0.Class != 16 ||
		e0.Message != "The statement BACKUP LOG is not allowed while the recovery model is SIMPLE. Use BACKUP DATABASE or change the recovery model using ALTER DATABASE." {
		t.Fatalf("BACKUP LOG under SIMPLE: %d %q", e0.Number, e0.Message)
	}
	// STOPAT of a SIMPLE database's backup: 3145.
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\simple.bak' WITH INIT`)
	if res := mustFail(t, e.db, 3013, `RESTORE DATABASE [Q] FROM DISK = N'\\bak01\backup\simple.bak' WITH STOPAT = '2099-01-01 00:00:00', `+restoreMoves("q")); res.errs[0].Number != 3145 {
		t.Fatalf("STOPAT under SIMPLE: %v", res.errNums())
	}
	// Back to FULL: still no chain until a full backup.
	mustRun(t, e.db, `ALTER DATABASE [Sales] SET RECOVERY FULL`)
	if res := mustFail(t, e.db, 3013, fmt.Sprintf(bl, 5)); res.errs[0].Number != 4214 {
		t.Fatalf("after SIMPLE -> FULL: %v, want 4214", res.errNums())
	}
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full2.bak' WITH INIT`)
	mustRun(t, e.db, fmt.Sprintf(bl, 6))
	// A DBA's switch to BULK_LOGGED keeps the chain.
	if err := e.in.SetRecoveryModel("Sales", "BULK_LOGGED"); err != nil {
		t.Fatal(err)
	}
	commit(t, e, "Sales", 2)
	mustRun(t, e.db, fmt.Sprintf(bl, 7))
	rows = backupRows(t, e.db, "Sales")
	prev, cur := rows[len(rows)-2], rows[len(rows)-1]
	if prev.typ != "L" || cur.typ != "L" || cur.first != prev.last {
		t.Fatalf("log backups across FULL -> BULK_LOGGED do not chain: %+v then %+v", prev, cur)
	}
	// A DBA's switch to SIMPLE breaks it.
	if err := e.in.SetRecoveryModel("Sales", "SIMPLE"); err != nil {
		t.Fatal(err)
	}
	if err := e.in.SetRecoveryModel("Sales", "FULL"); err != nil {
		t.Fatal(err)
	}
	if res := mustFail(t, e.db, 3013, fmt.Sprintf(bl, 8)); res.errs[0].Number != 4214 {
		t.Fatalf("after a DBA's FULL -> SIMPLE -> FULL: %v, want 4214", res.errNums())
	}
}

// Log backups chain exactly, a copy-only log leaves the chain alone, and
// msdb shows who took each (backupset (Transact-SQL), "Copy-only backups").
func TestLogBackupChainInMsdbAndHeaders(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Logins["tool"] = testPass })
	logDB(t, e, "Sales", 2<<20, 5000)
	commit(t, e, "Sales", 3)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full.bak' WITH INIT, CHECKSUM`)
	commit(t, e, "Sales", 3)
	mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\l1a.trn', DISK = N'\\bak01\backup\l1b.trn'
		WITH CHECKSUM, INIT, FORMAT, STATS = 50, NAME = N'log one', DESCRIPTION = N'first', MAXTRANSFERSIZE = 65536, BUFFERCOUNT = 4`)
	commit(t, e, "Sales", 2)
	// Another tool, another login, copy-only.
	tool, err := sql.Open("sqlserver", e.in.DSN("tool", testPass, "master"))
	if err != nil {
		t.Fatal(err)
	}
	defer tool.Close()
	mustRun(t, tool, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\tool.trn' WITH COPY_ONLY, INIT, NAME = N'other tool'`)
	commit(t, e, "Sales", 2)
	mustRun(t, tool, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\tool2.trn' WITH INIT, NAME = N'other tool'`)
	commit(t, e, "Sales", 2)
	mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\l3.trn' WITH INIT`)
	rows := backupRows(t, e.db, "Sales")
	if len(rows) != 5 {
		t.Fatalf("%d backupset rows, want 5: %+v", len(rows), rows)
	}
	full, l1, cp, l2, l3 := rows[0], rows[1], rows[2], rows[3], rows[4]
	if full.typ != "D" || full.dbBackup != "0" {
		t.Fatalf("first full: %+v (database_backup_lsn of the first full is 0)", full)
	}
	if l1.typ != "L" || l1.first != full.first || !l1.begins || l1.dbBackup != full.checkpoint || l1.name != "log one" || l1.user != "sa" {
		t.Fatalf("first log %+v after full %+v", l1, full)
	}
	if !cp.copyOnly || cp.first != l1.last || cp.user != "tool" || cp.begins {
		t.Fatalf("copy-only log %+v", cp)
	}
	if l2.first != l1.last || l2.copyOnly || l2.user != "tool" || l2.begins {
		t.Fatalf("the log after a copy-only one must start at the previous regular log's end %s: %+v", l1.last, l2)
	}
	if l3.first != l2.last {
		t.Fatalf("a foreign tool's log backup is part of the chain: %+v after %+v", l3, l2)
	}
	r := mustRun(t, e.db, `SELECT family_sequence_number, physical_device_name FROM msdb.dbo.backupmediafamily WHERE media_set_id = `+fmt.Sprint(l1.id)+` ORDER BY family_sequence_number`)
	if len(r.rows) != 2 || r.rows[0][1] != `\\bak01\backup\l1a.trn` || r.rows[1][1] != `\\bak01\backup\l1b.trn` {
		t.Fatalf("backupmediafamily of the striped log backup: %v", r.rows)
	}
	// HEADERONLY of a log backup.
	r = mustRun(t, e.db, `RESTORE HEADERONLY FROM DISK = N'\\bak01\backup\l1a.trn'`)
	col := func(name string) any { return r.value(t, name) }
	if asInt(col("BackupType")) != 2 || col("BackupTypeDescription") != "Transaction Log" || lsnString(col("FirstLSN")) != l1.first ||
		lsnString(col("LastLSN")) != l1.last || lsnString(col("DatabaseBackupLSN")) != full.checkpoint || col("BeginsLogChain") != true ||
		col("RecoveryModel") != "FULL" || col("BackupName") != "log one" {
		t.Fatalf("HEADERONLY of a log backup: %v %v", r.cols, r.rows[0])
	}
	if lastLogBackupLSN(t, e.db, "Sales") != l3.last {
		t.Fatalf("last_log_backup_lsn %s, want the last log's last_lsn %s", lastLogBackupLSN(t, e.db, "Sales"), l3.last)
	}
}

type commitRow struct {
	id int64
	at time.Time
}

func commitRows(t *testing.T, db *sql.DB, dbName string) []commitRow {
	t.Helper()
	r := mustRun(t, db, `SELECT id, committed_at FROM `+qi(dbName)+`.dbo.CommitLog ORDER BY id`)
	var out []commitRow
	for _, row := range r.rows {
		out = append(out, commitRow{asInt(row[0]), row[1].(time.Time)})
	}
	return out
}

func sameRows(t *testing.T, what string, got, want []commitRow) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d (got ids %v..., want last %v)", what, len(got), len(want), firstIDs(got), lastRow(want))
	}
	for i := range got {
		if got[i].id != want[i].id || !got[i].at.Equal(want[i].at) {
			t.Fatalf("%s: row %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

func firstIDs(r []commitRow) []int64 {
	var out []int64
	for _, x := range r[:min(len(r), 5)] {
		out = append(out, x.id)
	}
	return out
}

func lastRow(r []commitRow) any {
	if len(r) == 0 {
		return nil
	}
	return r[len(r)-1]
}

func restoreMoves(name string) string {
	return fmt.Sprintf(`MOVE N'Sales' TO N'R:\restore\%s.mdf', MOVE N'Sales_log' TO N'R:\restore\%s.ldf'`, name, name)
}

func redoStartLSN(t *testing.T, db *sql.DB, dbName string) string {
	t.Helper()
	r := mustRun(t, db, `SELECT redo_start_lsn FROM sys.master_files WHERE file_id = 1 AND database_id = DB_ID(`+ql(dbName)+`)`)
	return lsnString(r.rows[0][0])
}

func dbState(t *testing.T, db *sql.DB, dbName string) (string, bool) {
	t.Helper()
	r := mustRun(t, db, `SELECT state_desc, is_in_standby FROM sys.databases WHERE name = `+ql(dbName))
	return r.rows[0][0].(string), r.rows[0][1].(bool)
}

// A point-in-time restore holds exactly the rows committed at or before
// STOPAT, across several log backups ("Restore a SQL Server Database to a
// Point in Time (Full Recovery Model)"), and the order errors of RESTORE
// LOG are SQL Server's (4305, 4326, 3117, 3153).
func TestPointInTimeRestoreRowByRow(t *testing.T) {
	e := newEnv(t)
	logDB(t, e, "Sales", 2<<20, 5000)
	commit(t, e, "Sales", 5)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full.bak' WITH INIT, CHECKSUM`)
	atFull := commitRows(t, e.db, "Sales")
	for i, f := range []string{"l1", "l2", "l3"} {
		commit(t, e, "Sales", 6+i)
		mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\`+f+`a.trn', DISK = N'\\bak01\backup\`+f+`b.trn' WITH INIT, CHECKSUM`)
	}
	all := commitRows(t, e.db, "Sales")
	logs := backupRows(t, e.db, "Sales")[1:]
	dev := func(f string) string {
		return `DISK = N'\\bak01\backup\` + f + `a.trn', DISK = N'\\bak01\backup\` + f + `b.trn'`
	}
	// The full backup alone holds the rows committed before it.
	mustRun(t, e.db, `RESTORE DATABASE [F] FROM DISK = N'\\bak01\backup\full.bak' WITH `+restoreMoves("f"))
	sameRows(t, "full backup", commitRows(t, e.db, "F"), atFull)

	// STOPAT inside the second log: exactly the rows committed at or
	// before T (T is a row's own commit time: inclusive).
	target := all[len(atFull)+6+3] // the fourth row of log 2
	stopAt := target.at.Format("2006-01-02 15:04:05.9999999")
	var want []commitRow
	for _, r := range all {
		if !r.at.After(target.at) {
			want = append(want, r)
		}
	}
	mustRun(t, e.db, `RESTORE DATABASE [P] FROM DISK = N'\\bak01\backup\full.bak' WITH NORECOVERY, `+restoreMoves("p"))
	if st, _ := dbState(t, e.db, "P"); st != "RESTORING" {
		t.Fatalf("after WITH NORECOVERY: %s", st)
	}
	if got := redoStartLSN(t, e.db, "P"); got != logs[0].first && got >= logs[0].last {
		t.Fatalf("redo_start_lsn %s is not inside the first log [%s, %s)", got, logs[0].first, logs[0].last)
	}
	// A gap: the third log before the first.
	if res := mustFail(t, e.db, 3013, `RESTORE LOG [P] FROM `+dev("l3")+` WITH NORECOVERY`); res.errs[0].Number != 4305 ||
		!strings.Contains(res.errs[0].Message, "which is too recent to apply to the database") {
		t.Fatalf("log 3 after the full: %v %q", res.errNums(), res.errs[0].Message)
	}
	// STOPAT past the first log's end: rolled forward, left RESTORING (4322).
	res := mustRun(t, e.db, `RESTORE LOG [P] FROM `+dev("l1")+` WITH STOPAT = '`+stopAt+`'`)
	if !containsNum(res.infoNums(), 4322) {
		t.Fatalf("STOPAT past the log's end: infos %v, want 4322", res.infoNums())
	}
	if st, _ := dbState(t, e.db, "P"); st != "RESTORING" {
		t.Fatalf("after a STOPAT past the log's end: %s, want RESTORING", st)
	}
	if got := redoStartLSN(t, e.db, "P"); got != logs[0].last {
		t.Fatalf("redo_start_lsn after log 1 = %s, want its last_lsn %s", got, logs[0].last)
	}
	// Log 1 again: too early.
	if res := mustFail(t, e.db, 3013, `RESTORE LOG [P] FROM `+dev("l1")+` WITH NORECOVERY`); res.errs[0].Number != 4326 {
		t.Fatalf("log 1 twice: %v", res.errNums())
	}
	mustRun(t, e.db, `RESTORE LOG [P] FROM `+dev("l2")+` WITH RECOVERY, STOPAT = '`+stopAt+`'`)
	if st, _ := dbState(t, e.db, "P"); st != "ONLINE" {
		t.Fatalf("after STOPAT inside log 2 WITH RECOVERY: %s", st)
	}
	sameRows(t, "STOPAT inside log 2", commitRows(t, e.db, "P"), want)
	if res := mustFail(t, e.db, 3013, `RESTORE LOG [P] FROM `+dev("l3")); res.errs[0].Number != 3117 {
		t.Fatalf("RESTORE LOG on a recovered database: %v", res.errNums())
	}
	if res := mustFail(t, e.db, 3013, `RESTORE DATABASE [P] WITH RECOVERY`); res.errs[0].Number != 3153 {
		t.Fatalf("RECOVERY of a recovered database: %v", res.errNums())
	}
	r := mustRun(t, e.db, `SELECT restore_type, backup_set_id, recovery, stop_at FROM msdb.dbo.restorehistory WHERE destination_database_name = N'P' ORDER BY restore_history_id`)
	if len(r.rows) != 3 || r.rows[1][0] != "L" || asInt(r.rows[1][1]) != logs[0].id || r.rows[1][2] != false ||
		r.rows[2][0] != "L" || asInt(r.rows[2][1]) != logs[1].id || r.rows[2][2] != true || r.rows[2][3] == nil {
		t.Fatalf("restorehistory of P: %v", r.rows)
	}

	// STANDBY between logs: ONLINE, in standby, readable, read-only.
	mustRun(t, e.db, `RESTORE DATABASE [S] FROM DISK = N'\\bak01\backup\full.bak' WITH NORECOVERY, `+restoreMoves("s"))
	mustRun(t, e.db, `RESTORE LOG [S] FROM `+dev("l1")+` WITH NORECOVERY`)
	mustRun(t, e.db, `RESTORE LOG [S] FROM `+dev("l2")+` WITH STANDBY = N'R:\restore\s_undo.tuf'`)
	if st, sb := dbState(t, e.db, "S"); st != "ONLINE" || !sb {
		t.Fatalf("after WITH STANDBY: state %s, is_in_standby %v", st, sb)
	}
	var upTo2 []commitRow
	for i := range all {
		if i < len(atFull)+6+7 {
			upTo2 = append(upTo2, all[i])
		}
	}
	sameRows(t, "standby after log 2", commitRows(t, e.db, "S"), upTo2)
	if res := mustFail(t, e.db, 3013, `BACKUP DATABASE [S] TO DISK = N'\\bak01\backup\s.bak' WITH INIT`); res.errs[0].Number != 3036 {
		t.Fatalf("BACKUP of a standby database: %v", res.errNums())
	}
	// A STOPAT before the point the database has reached: 4335.
	early := all[0].at.Format("2006-01-02 15:04:05.9999999")
	if res := mustFail(t, e.db, 3013, `RESTORE LOG [S] FROM `+dev("l3")+` WITH NORECOVERY, STOPAT = '`+early+`'`); res.errs[0].Number != 4335 {
		t.Fatalf("STOPAT before the restore point: %v", res.errNums())
	}
	// STOPAT on RESTORE DATABASE before the data backup's end: 4338.
	if res := mustFail(t, e.db, 3013, `RESTORE DATABASE [Q] FROM DISK = N'\\bak01\backup\full.bak' WITH STOPAT = '`+early+`', `+restoreMoves("q")); res.errs[0].Number != 4338 {
		t.Fatalf("RESTORE DATABASE WITH STOPAT before the backup's end: %v", res.errNums())
	}
	mustRun(t, e.db, `RESTORE LOG [S] FROM `+dev("l3")+` WITH NORECOVERY`)
	if st, sb := dbState(t, e.db, "S"); st != "RESTORING" || sb {
		t.Fatalf("after log 3 WITH NORECOVERY: %s %v", st, sb)
	}
	mustRun(t, e.db, `RESTORE DATABASE [S] WITH RECOVERY`)
	sameRows(t, "all logs", commitRows(t, e.db, "S"), all)
	// The recovered copy writes on and its log chain goes on.
	commit(t, e, "S", 2)
	if n := len(commitRows(t, e.db, "S")); n != len(all)+2 {
		t.Fatalf("the recovered copy has %d rows after 2 more commits, want %d", n, len(all)+2)
	}
}

func containsNum(nums []int32, n int32) bool {
	for _, x := range nums {
		if x == n {
			return true
		}
	}
	return false
}

// A log backup runs while a full backup does ("You can back up the log
// while any full backup is running", SQL Server transaction log
// architecture and management guide); it is based on the previous full
// until that one has finished, and the chain goes on through both.
func TestLogBackupDuringFullBackup(t *testing.T) {
	e := newEnv(t)
	logDB(t, e, "Sales", 8<<20, 5000)
	commit(t, e, "Sales", 3)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full1.bak' WITH INIT`)
	commit(t, e, "Sales", 3)
	e.in.SetThrottle(8 << 20)
	done := make(chan error, 1)
	go func() {
		_, err := run(testCtx(t), e.db, nil, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full2.bak' WITH INIT, STATS = 10`)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the full backup ended before the log backup could run beside it: %v", err)
	default:
	}
	mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\during.trn' WITH INIT`)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.in.SetThrottle(0)
	commit(t, e, "Sales", 3)
	mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\after.trn' WITH INIT`)
	rows := backupRows(t, e.db, "Sales")
	if len(rows) != 4 {
		t.Fatalf("%d backupset rows: %+v", len(rows), rows)
	}
	full1, during, full2, after := rows[0], rows[1], rows[2], rows[3]
	if during.typ != "L" || full2.typ != "D" {
		t.Fatalf("rows out of order: %+v", rows)
	}
	if during.dbBackup != full1.checkpoint || after.dbBackup != full2.checkpoint || after.first != during.last || full2.dbBackup != full1.checkpoint {
		t.Fatalf("database_backup_lsn / chain: full1 %+v, log during %+v, full2 %+v, log after %+v", full1, during, full2, after)
	}
	// Restore the second full and the log after it: the log taken during
	// it ended before its end and is too early (4326).
	mustRun(t, e.db, `RESTORE DATABASE [V] FROM DISK = N'\\bak01\backup\full2.bak' WITH NORECOVERY, `+restoreMoves("v"))
	if r := mustFail(t, e.db, 3013, `RESTORE LOG [V] FROM DISK = N'\\bak01\backup\during.trn' WITH NORECOVERY`); r.errs[0].Number != 4326 {
		t.Fatalf("the log taken during the full, after it: %v", r.errNums())
	}
	mustRun(t, e.db, `RESTORE LOG [V] FROM DISK = N'\\bak01\backup\after.trn' WITH RECOVERY`)
	sameRows(t, "full 2 + the log after it", commitRows(t, e.db, "V"), commitRows(t, e.db, "Sales"))
}

// A point-in-time restore that gives STOPAT on every RESTORE LOG WITH
// NORECOVERY stops in the log that holds T; a log after it no longer
// applies: SQL Server refuses it as too recent (4305) and RESTORE
// DATABASE ... WITH RECOVERY ends the sequence at T ("restore every
// subsequent log backup, up to and including the log backup that contains
// your target point in time", "Restore a SQL Server Database to a Point in
// Time (Full Recovery Model)"). T at a commit inside the log, and T after
// the log's last commit but before its backup began.
func TestRestoreLogAfterTheStopPointIsTooRecent(t *testing.T) {
	e := newEnv(t)
	logDB(t, e, "Sales", 2<<20, 5000)
	commit(t, e, "Sales", 5)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full.bak' WITH INIT, CHECKSUM`)
	var ends []commitRow // each log's last row
	for _, f := range []string{"l1", "l2", "l3"} {
		commit(t, e, "Sales", 6)
		rows := commitRows(t, e.db, "Sales")
		ends = append(ends, rows[len(rows)-1])
		time.Sleep(20 * time.Millisecond) // the backup begins after its last commit
		mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\`+f+`.trn' WITH INIT, CHECKSUM`)
	}
	all := commitRows(t, e.db, "Sales")
	for i, at := range []time.Time{all[len(all)-9].at, ends[1].at.Add(time.Millisecond)} {
		name := fmt.Sprintf("P%d", i)
		stopAt := at.Format("2006-01-02 15:04:05.9999999")
		var want []commitRow
		for _, r := range all {
			if !r.at.After(at) {
				want = append(want, r)
			}
		}
		mustRun(t, e.db, `RESTORE DATABASE `+qi(name)+` FROM DISK = N'\\bak01\backup\full.bak' WITH NORECOVERY, `+restoreMoves(name))
		for _, f := range []string{"l1", "l2"} {
			mustRun(t, e.db, `RESTORE LOG `+qi(name)+` FROM DISK = N'\\bak01\backup\`+f+`.trn' WITH NORECOVERY, STOPAT = '`+stopAt+`'`)
		}
		res := mustFail(t, e.db, 3013, `RESTORE LOG `+qi(name)+` FROM DISK = N'\\bak01\backup\l3.trn' WITH NORECOVERY, STOPAT = '`+stopAt+`'`)
		if res.errs[0].Number != 4305 || !strings.Contains(res.errs[0].Message, "which is too recent to apply to the database") {
			t.Fatalf("STOPAT %s: the log after the one holding it: %v %q", stopAt, res.errNums(), res.errs[0].Message)
		}
		if st, _ := dbState(t, e.db, name); st != "RESTORING" {
			t.Fatalf("STOPAT %s: after the refused log: %s", stopAt, st)
		}
		mustRun(t, e.db, `RESTORE DATABASE `+qi(name)+` WITH RECOVERY`)
		sameRows(t, "STOPAT "+stopAt+" reached in log 2", commitRows(t, e.db, name), want)
	}
}
