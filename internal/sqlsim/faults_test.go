package sqlsim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mssql "github.com/microsoft/go-mssqldb"
)

func localStripe(e *testEnv, unc string) string {
	return filepath.Join(e.shareDir, unc[strings.LastIndex(unc, `\`)+1:])
}

// TestFlippedByteFailsRestore flips one byte in one stripe, in a block, the
// media header and the trailer: RESTORE fails every time, with 3183 naming
// a page when the byte is in the data.
func TestFlippedByteFailsRestore(t *testing.T) {
	for _, compression := range []bool{false, true} {
		t.Run(fmt.Sprintf("compression=%v", compression), func(t *testing.T) {
			e := newEnv(t)
			e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20, DataFiles: 2})
			paths := stripeNames("Sales", 3)
			opts := "CHECKSUM, INIT, FORMAT, MAXTRANSFERSIZE = 65536"
			if compression {
				opts += ", COMPRESSION"
			}
			mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+disks(paths)+" WITH "+opts)
			from := disks(paths)
			restore := "RESTORE DATABASE [Sales_v] FROM " + from + " WITH " + movesFor(t, e, from, "v") + ", CHECKSUM, REPLACE, RECOVERY"
			victim := localStripe(e, paths[1])
			st, _ := os.Stat(victim)
			for _, tc := range []struct {
				where  string
				offset int64
				want   int32
			}{
				{"block payload", st.Size() / 2, 3183},
				{"media header", 30, 3241},
				{"trailer", st.Size() - 40, 3241},
			} {
				t.Run(tc.where, func(t *testing.T) {
					if err := FlipByte(victim, tc.offset); err != nil {
						t.Fatal(err)
					}
					defer FlipByte(victim, tc.offset) // put it back
					r := mustFail(t, e.db, 3013, restore)
					if r.errs[0].Number != tc.want {
						t.Fatalf("errors %v (%v), want %d first", r.errNums(), r.errs, tc.want)
					}
					if tc.want == 3183 && !strings.Contains(r.errs[0].Message, `RESTORE detected an error on page (`) {
						t.Fatalf("message %q", r.errs[0].Message)
					}
					mustFail(t, e.db, 3013, "RESTORE VERIFYONLY FROM "+from+" WITH CHECKSUM")
				})
			}
			// Intact again: the same restore succeeds.
			mustRun(t, e.db, restore)
			mustRun(t, e.db, "DBCC CHECKDB([Sales_v]) WITH NO_INFOMSGS, ALL_ERRORMSGS")
		})
	}
}

func TestMissingOrForeignStripe(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	a := stripeNames("A", 2)
	b := stripeNames("B", 2)
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+disks(a)+" WITH INIT, FORMAT")
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+disks(b)+" WITH INIT, FORMAT")
	r := mustFail(t, e.db, 3013, "RESTORE VERIFYONLY FROM "+disks(a[:1]))
	if r.errs[0].Number != 3132 || r.errs[0].Message != "The media set has 2 media families but only 1 are provided. All members must be provided." {
		t.Fatalf("missing stripe: %v", r.errs)
	}
	r = mustFail(t, e.db, 3013, "RESTORE VERIFYONLY FROM "+disks([]string{a[0], b[1]}))
	if r.errs[0].Number != 3231 {
		t.Fatalf("foreign stripe: %v", r.errs)
	}
	r = mustFail(t, e.db, 3013, `RESTORE VERIFYONLY FROM DISK = N'\\bak01\backup\nothere.bak'`)
	if r.errs[0].Number != 3201 || !strings.Contains(r.errs[0].Message, "2(The system cannot find the file specified.)") {
		t.Fatalf("missing file: %v", r.errs)
	}
	// HEADERONLY works from any one family, like SQL Server.
	mustRun(t, e.db, "RESTORE HEADERONLY FROM "+disks(a[1:]))
	// A MOVE target in a directory that does not exist: 5133 ... 3013.
	r = mustFail(t, e.db, 3013, "RESTORE DATABASE [X] FROM "+disks(a)+` WITH MOVE N'Sales' TO N'R:\restore\no\x.mdf', MOVE N'Sales_log' TO N'R:\restore\x.ldf'`)
	if r.errs[0].Number != 5133 {
		t.Fatalf("bad MOVE target: %v", r.errs)
	}
	mustFail(t, e.db, 3013, "RESTORE DATABASE [X] FROM "+disks(a)+` WITH MOVE N'NoSuchFile' TO N'R:\restore\x.mdf'`)
	// Without MOVE the files would overwrite the source's: 1834.
	r = mustFail(t, e.db, 3013, "RESTORE DATABASE [X] FROM "+disks(a))
	if r.errs[0].Number != 1834 {
		t.Fatalf("restore onto the source's files: %v", r.errs)
	}
}

func TestCorruptPageCheckDB(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 4 << 20, DataFiles: 2})
	mustRun(t, e.db, "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS, ALL_ERRORMSGS, EXTENDED_LOGICAL_CHECKS, DATA_PURITY")
	r := mustRun(t, e.db, "DBCC CHECKDB(N'Sales')")
	if fmt.Sprint(r.infoNums()) != "[8989 2528]" {
		t.Fatalf("CHECKDB without NO_INFOMSGS: %v", r.infoNums())
	}
	// A backup without CHECKSUM carries the damage into the copy; CHECKDB
	// of the restored copy finds it (the product's verification).
	if err := e.in.CorruptPage("Sales", 3, 100); err != nil {
		t.Fatal(err)
	}
	r = mustFail(t, e.db, 8989, "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS, ALL_ERRORMSGS, EXTENDED_LOGICAL_CHECKS, DATA_PURITY")
	if fmt.Sprint(r.errNums()) != "[8928 8939 8989]" || !strings.Contains(r.errs[0].Message, "Page (3:100)") {
		t.Fatalf("CHECKDB errors %v: %v", r.errNums(), r.errs)
	}
	if r.errs[0].Class != 16 {
		t.Fatalf("class %d, want 16", r.errs[0].Class)
	}
	r = mustFail(t, e.db, 3013, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\c.bak' WITH CHECKSUM, INIT`)
	if r.errs[0].Number != 3043 {
		t.Fatalf("BACKUP WITH CHECKSUM of a damaged page: %v", r.errs)
	}
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\c.bak' WITH INIT`)
	from := `DISK = N'\\bak01\backup\c.bak'`
	mustRun(t, e.db, "RESTORE DATABASE [Copy] FROM "+from+" WITH "+movesFor(t, e, from, "copy")+", REPLACE")
	r = mustFail(t, e.db, 8989, "DBCC CHECKDB([Copy]) WITH NO_INFOMSGS, ALL_ERRORMSGS")
	if !strings.Contains(r.errs[1].Message, "page (3:100)") {
		t.Fatalf("copy CHECKDB %v", r.errs)
	}
	// RESTORE WITH CHECKSUM refuses the damaged page.
	r = mustFail(t, e.db, 3013, "RESTORE DATABASE [Copy2] FROM "+from+" WITH "+movesFor(t, e, from, "copy2")+", CHECKSUM")
	if r.errs[0].Number != 3183 || !strings.Contains(r.errs[0].Message, "(3:100)") {
		t.Fatalf("RESTORE WITH CHECKSUM: %v", r.errs)
	}
}

// TestCancelBackup cancels a running backup from the client: the statement
// ends promptly, its request disappears and the half-written set is not
// usable.
func TestCancelBackup(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 16 << 20})
	e.in.SetThrottle(4 << 20) // ~4 s
	paths := stripeNames("Sales", 2)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	var sawProgress atomic.Bool
	var logged atomic.Value
	done := make(chan error, 1)
	go func() {
		_, err := run(ctx, e.db, func(m mssql.Error) {
			if m.Number == 3211 && !sawProgress.Swap(true) {
				for _, s := range e.in.Statements() {
					if s.Kind == "BACKUP DATABASE" {
						logged.Store(s.Outcome + "/" + s.Database)
					}
				}
				cancel()
			}
		}, "BACKUP DATABASE [Sales] TO "+disks(paths)+" WITH INIT, FORMAT, STATS = 10")
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("cancelled backup did not return")
	}
	if !sawProgress.Load() {
		t.Fatal("no progress before the cancel")
	}
	if got := logged.Load(); got != "running/Sales" {
		t.Fatalf("statement log while the backup ran: %v, want running/Sales", got)
	}
	// The request is gone and the log says it was cancelled.
	waitFor(t, func() bool {
		r := mustRun(t, e.db, "SELECT COUNT(*) FROM sys.dm_exec_requests WHERE command = 'BACKUP DATABASE'")
		return asInt(r.rows[0][0]) == 0
	})
	var outcome string
	for _, s := range e.in.Statements() {
		if s.Kind == "BACKUP DATABASE" {
			outcome = s.Outcome
		}
	}
	if outcome != "cancelled" {
		t.Fatalf("statement log outcome %q, want cancelled", outcome)
	}
	e.in.SetThrottle(0)
	r := mustFail(t, e.db, 3013, "RESTORE VERIFYONLY FROM "+disks(paths))
	if r.errs[0].Number != 3241 {
		t.Fatalf("VERIFYONLY of a cancelled set: %v", r.errs)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCrashDuringBackup crashes the host at 40 %: the client loses its
// connection, the instance restarts with its databases, and the
// half-written stripes fail VERIFYONLY.
func TestCrashDuringBackup(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 16 << 20})
	e.in.SetThrottle(16 << 20)
	if err := e.in.CrashAt(OpBackup, 40); err != nil {
		t.Fatal(err)
	}
	paths := stripeNames("Sales", 2)
	r, err := run(testCtx(t), e.db, nil, "BACKUP DATABASE [Sales] TO "+disks(paths)+" WITH CHECKSUM, INIT, FORMAT, STATS = 10")
	var me mssql.Error
	if err == nil || errors.As(err, &me) {
		t.Fatalf("backup through a crash: err %v, result %+v; want a connection error", err, r)
	}
	db := e.open(t, "master")
	if err := db.PingContext(testCtx(t)); err == nil {
		t.Fatal("a crashed instance accepted a connection")
	}
	// Half-written: more than the header, less than the data.
	st, err := os.Stat(localStripe(e, paths[0]))
	if err != nil || st.Size() < 1<<20 || st.Size() > 8<<20 {
		t.Fatalf("stripe after crash: %v %v", st, err)
	}
	if err := e.in.Start(); err != nil {
		t.Fatal(err)
	}
	e.in.SetThrottle(0)
	db = e.open(t, "master")
	r = mustFail(t, db, 3013, "RESTORE VERIFYONLY FROM "+disks(paths))
	if r.errs[0].Number != 3241 {
		t.Fatalf("VERIFYONLY of crashed set: %v", r.errs)
	}
	r = mustRun(t, db, "SELECT COUNT_BIG(*) FROM [Sales].dbo.Orders")
	if asInt(r.rows[0][0]) <= 0 {
		t.Fatalf("database after restart: %v", r.rows)
	}
	paths2 := []string{`\\bak01\backup\Sales_00000002_1of1.bak`}
	mustRun(t, db, "BACKUP DATABASE [Sales] TO "+disks(paths2)+" WITH CHECKSUM, INIT, FORMAT")
	mustRun(t, db, "RESTORE VERIFYONLY FROM "+disks(paths2))
	// A crash at 100 %, after the last block but before the trailers,
	// leaves an unusable set too.
	e.in.CrashAt(OpBackup, 100)
	e.in.SetThrottle(16 << 20) // so "50 percent processed." arrives before the crash (see run's note)
	paths3 := []string{`\\bak01\backup\Sales_00000003_1of1.bak`}
	if _, err := run(testCtx(t), db, nil, "BACKUP DATABASE [Sales] TO "+disks(paths3)+" WITH INIT, STATS = 50"); err == nil {
		t.Fatal("backup through a crash at 100 % succeeded")
	}
	if err := e.in.Start(); err != nil {
		t.Fatal(err)
	}
	e.in.SetThrottle(0)
	db = e.open(t, "master")
	if r := mustFail(t, db, 3013, "RESTORE VERIFYONLY FROM "+disks(paths3)); r.errs[0].Number != 3241 {
		t.Fatalf("VERIFYONLY after a crash at 100 %%: %v", r.errs)
	}
	crashed := 0
	for _, s := range e.in.Statements() {
		if s.Kind == "BACKUP DATABASE" && s.Outcome == "crashed" {
			crashed++
		}
	}
	if crashed != 2 {
		t.Fatalf("statement log has %d crashed backups, want 2: %+v", crashed, e.in.Statements())
	}
}

// TestCrashDuringRestore: a RESTORE cut by a crash leaves the database
// RESTORING; after the restart a RESTORE WITH REPLACE brings it online.
func TestCrashDuringRestore(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20})
	from := disks(stripeNames("Sales", 2))
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+from+" WITH INIT, FORMAT")
	restore := "RESTORE DATABASE [V] FROM " + from + " WITH " + movesFor(t, e, from, "v") + ", REPLACE, STATS = 10"
	e.in.SetThrottle(8 << 20)
	e.in.CrashAt(OpRestore, 50)
	t0 := time.Now()
	_, err := run(testCtx(t), e.db, nil, restore)
	t.Logf("restore returned after %v: %v", time.Since(t0), err)
	if err == nil {
		t.Fatal("restore through a crash succeeded")
	}
	if err := e.in.Restart(); err != nil {
		t.Fatal(err)
	}
	e.in.SetThrottle(0)
	db := e.open(t, "master")
	r := mustRun(t, db, "SELECT state_desc FROM sys.databases WHERE name = N'V'")
	if len(r.rows) != 1 || r.rows[0][0] != "RESTORING" {
		t.Fatalf("state after crash: %v", r.rows)
	}
	mustFail(t, db, 927, "SELECT COUNT_BIG(*) FROM [V].dbo.Orders")
	if r := mustRun(t, db, "SELECT DATABASEPROPERTYEX(N'V', 'Status')"); fmt.Sprint(r.rows[0][0]) != "RESTORING" {
		t.Fatalf("DATABASEPROPERTYEX status: %v", r.rows)
	}
	// As on SQL Server, a RESTORING database cannot be altered (5052), only
	// restored over or dropped.
	if r := mustFail(t, db, 5069, "ALTER DATABASE [V] SET SINGLE_USER WITH ROLLBACK IMMEDIATE"); r.errs[0].Number != 5052 {
		t.Fatalf("ALTER of a restoring database: %v", r.errs)
	}
	mustRun(t, db, restore)
	mustRun(t, db, "DBCC CHECKDB([V]) WITH NO_INFOMSGS")
}

// TestPollRequestsDuringBackup: 8 connections poll sys.dm_exec_requests
// (the product's query and the CROSS APPLY text form) during a backup.
func TestPollRequestsDuringBackup(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 16 << 20})
	e.in.SetThrottle(12 << 20)
	e.db.SetMaxOpenConns(20)
	backupDone := make(chan error, 1)
	go func() {
		_, err := run(testCtx(t), e.db, nil, "BACKUP DATABASE [Sales] TO "+disks(stripeNames("Sales", 2))+" WITH INIT, FORMAT, STATS = 10")
		backupDone <- err
	}()
	product := "SELECT session_id, command, percent_complete, database_id, estimated_completion_time, start_time " +
		"FROM sys.dm_exec_requests WHERE database_id = DB_ID(@p1) AND command IN (@p2, @p3, @p4) ORDER BY start_time"
	withText := "SELECT r.session_id, r.command, r.percent_complete, t.text FROM sys.dm_exec_requests AS r " +
		"CROSS APPLY sys.dm_exec_sql_text(r.sql_handle) AS t WHERE r.command = N'BACKUP DATABASE'"
	var seen, seenText, polls atomic.Int64
	var maxPct atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				polls.Add(1)
				if i%2 == 0 {
					rows, err := e.db.Query(product, "Sales", "BACKUP DATABASE", "RESTORE DATABASE", "DBCC TABLE CHECK")
					if err != nil {
						t.Error(err)
						return
					}
					for rows.Next() {
						var sid int64
						var cmd string
						var pct float64
						var dbid, eta int64
						var start time.Time
						if err := rows.Scan(&sid, &cmd, &pct, &dbid, &eta, &start); err != nil {
							t.Error(err)
						}
						if cmd == "BACKUP DATABASE" && dbid == 5 {
							seen.Add(1)
							if int64(pct) > maxPct.Load() {
								maxPct.Store(int64(pct))
							}
						}
					}
					rows.Close()
				} else {
					var sid int64
					var cmd, text string
					var pct float64
					err := e.db.QueryRow(withText).Scan(&sid, &cmd, &pct, &text)
					if err == nil && strings.Contains(text, "BACKUP DATABASE [Sales]") {
						seenText.Add(1)
					}
				}
			}
		}()
	}
	err := <-backupDone
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if seen.Load() == 0 || seenText.Load() == 0 || maxPct.Load() <= 0 {
		t.Fatalf("polls %d: saw the backup %d times (with text %d), max percent %d", polls.Load(), seen.Load(), seenText.Load(), maxPct.Load())
	}
	t.Logf("%d polls, backup seen %d times, max percent %d", polls.Load(), seen.Load(), maxPct.Load())
}

// TestHostileNames backs up and restores a database whose name and logical
// file names need quoting, with names given as literals and as parameters.
func TestHostileNames(t *testing.T) {
	e := newEnv(t)
	name := "Sales]; DROP DATABASE x--"
	e.create(t, DatabaseSpec{Name: name, Size: 2 << 20, LogicalName: "O'Brien [data]"})
	e.create(t, DatabaseSpec{Name: "x", Size: 1 << 20})
	path := `\\bak01\backup\Sales]; DROP DATABASE x--_00000001_1of1.bak`
	mustRun(t, e.db, "BACKUP DATABASE "+qi(name)+" TO DISK = "+ql(path)+" WITH CHECKSUM, INIT, FORMAT")
	// Parameters through sp_executesql.
	r := mustRun(t, e.db, "RESTORE FILELISTONLY FROM DISK = @p1", path)
	if r.rows[0][0] != "O'Brien [data]" {
		t.Fatalf("logical name %v", r.rows[0][0])
	}
	verify := "V'erify]]"
	mustRun(t, e.db, "RESTORE DATABASE "+qi(verify)+" FROM DISK = @p1 WITH MOVE @p2 TO @p3, MOVE @p4 TO @p5, CHECKSUM, REPLACE",
		path, "O'Brien [data]", `R:\restore\v'1.mdf`, "O'Brien [data]_log", `R:\restore\v'2.ldf`)
	mustRun(t, e.db, "DBCC CHECKDB("+qi(verify)+") WITH NO_INFOMSGS")
	r = mustRun(t, e.db, "SELECT name FROM sys.databases WHERE name IN (@p1, @p2, N'x') ORDER BY database_id", name, verify)
	if len(r.rows) != 3 {
		t.Fatalf("databases %v (x must still exist)", r.rows)
	}
	r = mustRun(t, e.db, "SELECT COUNT_BIG(*) FROM "+qi(verify)+".[dbo].[Orders]")
	if asInt(r.rows[0][0]) <= 0 {
		t.Fatal("no rows in the restored copy")
	}
	mustRun(t, e.db, "DROP DATABASE "+qi(verify))
}

// TestRequestsDuringRestoreAndCheckDB: sys.dm_exec_requests shows a running
// RESTORE (under the session's database, master, not the target) and a
// running CHECKDB ('DBCC TABLE CHECK', under the checked database), with a
// growing percent_complete.
func TestRequestsDuringRestoreAndCheckDB(t *testing.T) {
	e := newEnv(t)
	vol1, vol2 := t.TempDir(), t.TempDir()
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20, DataFiles: 2, Volumes: []string{vol1, vol2}})
	if files, _ := e.in.DatabaseFiles("Sales"); !strings.HasPrefix(files[0], vol1) || !strings.HasPrefix(files[1], vol2) {
		t.Fatalf("files not spread over the volumes: %v", files)
	}
	from := disks(stripeNames("Sales", 2))
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+from+" WITH INIT, FORMAT")
	moves := movesFor(t, e, from, "v")
	query := "SELECT session_id, command, percent_complete, database_id, estimated_completion_time, start_time " +
		"FROM sys.dm_exec_requests WHERE database_id = DB_ID(@p1) AND command IN (@p2, @p3, @p4) ORDER BY start_time"
	e.in.SetThrottle(6 << 20)
	for _, tc := range []struct{ stmt, db, command string }{
		{"RESTORE DATABASE [V] FROM " + from + " WITH " + moves + ", REPLACE, STATS = 10", "master", "RESTORE DATABASE"},
		{"DBCC CHECKDB([Sales]) WITH NO_INFOMSGS", "Sales", "DBCC TABLE CHECK"},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := run(testCtx(t), e.db, nil, tc.stmt)
			done <- err
		}()
		var seen int
		var maxPct float64
	poll:
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				break poll
			case <-time.After(50 * time.Millisecond):
			}
			r := mustRun(t, e.db, query, tc.db, "BACKUP DATABASE", "RESTORE DATABASE", "DBCC TABLE CHECK")
			for _, row := range r.rows {
				if row[1] == tc.command {
					seen++
					maxPct = max(maxPct, row[2].(float64))
				}
			}
		}
		if seen == 0 || maxPct <= 0 {
			t.Fatalf("%s: seen %d times, max percent %v", tc.command, seen, maxPct)
		}
	}
	// msdb history and the restored database survive a restart.
	e.in.SetThrottle(0)
	if err := e.in.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := e.in.Start(); err != nil {
		t.Fatal(err)
	}
	db := e.open(t, "master")
	r := mustRun(t, db, "SELECT COUNT(*) FROM msdb.dbo.restorehistory WHERE destination_database_name = N'V'")
	if asInt(r.rows[0][0]) != 1 {
		t.Fatalf("restorehistory after restart: %v", r.rows)
	}
	mustRun(t, db, "DBCC CHECKDB([V]) WITH NO_INFOMSGS")
}

// TestSingleUserDrop: another session inside the database blocks DROP
// (3702) until SET SINGLE_USER WITH ROLLBACK IMMEDIATE moves it out.
func TestSingleUserDrop(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "V", Size: 1 << 20})
	other := e.open(t, "V")
	other.SetMaxOpenConns(1)
	if err := other.Ping(); err != nil {
		t.Fatal(err)
	}
	e.db.SetMaxOpenConns(1)
	mustFail(t, e.db, 3702, "DROP DATABASE [V]")
	mustFail(t, e.db, 5069, "ALTER DATABASE [Nope] SET SINGLE_USER WITH ROLLBACK IMMEDIATE")
	mustRun(t, e.db, "IF DB_ID(N'V') IS NOT NULL\nBEGIN\n    ALTER DATABASE [V] SET SINGLE_USER WITH ROLLBACK IMMEDIATE;\n    DROP DATABASE [V];\nEND")
	// Idempotent: a second run is a no-op.
	mustRun(t, e.db, "IF DB_ID(N'V') IS NOT NULL\nBEGIN\n    ALTER DATABASE [V] SET SINGLE_USER WITH ROLLBACK IMMEDIATE;\n    DROP DATABASE [V];\nEND")
	mustRun(t, e.db, "DROP DATABASE IF EXISTS [V]")
}

// TestStopDuringBackup: Stop ends a running backup (its connection is
// closed) and returns; the instance starts again with its databases.
func TestStopDuringBackup(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 16 << 20})
	e.in.SetThrottle(2 << 20) // ~8 s if nothing stopped it
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var once sync.Once
		r, err := run(testCtx(t), e.db, func(mssql.Error) { once.Do(func() { close(started) }) },
			`BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\stop.bak' WITH INIT, STATS = 1`)
		// Stop either drops the connection (an error) or ends the statement
		// with an error message first; which one the client sees is a race.
		if err == nil && r != nil && len(r.errs) > 0 {
			err = r.errs[len(r.errs)-1]
		}
		done <- err
	}()
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- e.in.Stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // a hang guard, not a speed check
		t.Fatal("Stop did not return while a backup ran")
	}
	if err := <-done; err == nil {
		t.Fatal("the backup survived Stop")
	}
	e.in.SetThrottle(0)
	if err := e.in.Start(); err != nil {
		t.Fatal(err)
	}
	mustRun(t, e.open(t, "master"), "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS")
}
