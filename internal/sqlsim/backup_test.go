package sqlsim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	mssql "github.com/microsoft/go-mssqldb"
)

func stripeNames(db string, n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf(`\\bak01\backup\%s_00000001_%dof%d.bak`, db, i, n))
	}
	return out
}

func disks(paths []string) string {
	var parts []string
	for _, p := range paths {
		parts = append(parts, "DISK = "+ql(p))
	}
	return strings.Join(parts, ", ")
}

// moves builds MOVE clauses from FILELISTONLY rows into R:\restore.
func movesFor(t *testing.T, e *testEnv, from string, prefix string) string {
	t.Helper()
	r := mustRun(t, e.db, "RESTORE FILELISTONLY FROM "+from)
	var parts []string
	for _, row := range r.rows {
		parts = append(parts, fmt.Sprintf("MOVE %s TO %s", ql(row[0].(string)), ql(fmt.Sprintf(`R:\restore\%s_%d.dat`, prefix, asInt(row[6])))))
	}
	return strings.Join(parts, ", ")
}

// TestBackupRestoreCycle is the product's cycle: backup to two stripes with
// progress, read the headers, verify, restore under a new name, CHECKDB,
// compare row counts, find the restore in msdb.
func TestBackupRestoreCycle(t *testing.T) {
	for _, compression := range []bool{false, true} {
		t.Run(fmt.Sprintf("compression=%v", compression), func(t *testing.T) {
			e := newEnv(t)
			e.create(t, DatabaseSpec{Name: "Sales", Size: 32 << 20, DataFiles: 3})
			paths := stripeNames("Sales", 2)
			opts := "CHECKSUM, INIT, FORMAT, STATS = 10, BUFFERCOUNT = 8, MAXTRANSFERSIZE = 131072, BLOCKSIZE = 65536"
			if compression {
				opts += ", COMPRESSION"
			}
			r := mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+disks(paths)+" WITH "+opts)
			var percents []string
			for _, m := range r.infos {
				if m.Number == 3211 {
					percents = append(percents, m.Message)
				}
			}
			if len(percents) != 10 || percents[0] != "10 percent processed." || percents[9] != "100 percent processed." {
				t.Fatalf("progress messages = %q", percents)
			}
			last := r.infos[len(r.infos)-1]
			if last.Number != 3014 || !strings.HasPrefix(last.Message, "BACKUP DATABASE successfully processed ") {
				t.Fatalf("last message = %d %q", last.Number, last.Message)
			}
			if n := strings.Count(strings.Join(r.events, " "), "info:4035"); n != 4 {
				t.Fatalf("4035 messages = %d, want one per file (4): %v", n, r.events)
			}
			var size int64
			for _, p := range paths {
				st, err := os.Stat(filepath.Join(e.shareDir, filepath.Base(strings.ReplaceAll(p, `\`, "/"))))
				if err != nil {
					t.Fatalf("stripe %s: %v", p, err)
				}
				size += st.Size()
			}
			raw := int64(32<<20) + 64*PageSize
			if compression && size > raw/2 {
				t.Fatalf("compressed set is %d bytes for ~%d of pages: not compressed", size, raw)
			}
			if !compression && size < raw {
				t.Fatalf("uncompressed set is %d bytes, smaller than the data %d", size, raw)
			}

			from := disks(paths)
			r = mustRun(t, e.db, "RESTORE HEADERONLY FROM "+from)
			if len(r.rows) != 1 || r.cols[9] != "DatabaseName" || r.rows[0][9] != "Sales" {
				t.Fatalf("HEADERONLY cols %v rows %v", r.cols, r.rows)
			}
			col := func(name string) any { return r.value(t, name) }
			if col("Compressed") != compression || col("HasBackupChecksums") != true || col("BackupType") != int64(1) {
				t.Fatalf("HEADERONLY Compressed=%v HasBackupChecksums=%v BackupType=%v", col("Compressed"), col("HasBackupChecksums"), col("BackupType"))
			}
			if asInt(col("CompressedBackupSize")) <= 0 || len(col("BackupSetGUID").([]byte)) != 16 {
				t.Fatalf("HEADERONLY sizes/guid: %v %v", col("CompressedBackupSize"), col("BackupSetGUID"))
			}
			setGUID := col("BackupSetGUID")
			r = mustRun(t, e.db, "RESTORE VERIFYONLY FROM "+from+" WITH CHECKSUM")
			if r.infos[len(r.infos)-1].Number != 3262 {
				t.Fatalf("VERIFYONLY messages %v", r.infoNums())
			}
			r = mustRun(t, e.db, "RESTORE DATABASE [Sales_verify] FROM "+from+" WITH "+movesFor(t, e, from, "Sales_verify")+", CHECKSUM, REPLACE, RECOVERY, STATS = 25")
			if got := r.infoNums(); got[len(got)-1] != 3014 || got[0] != 3211 {
				t.Fatalf("RESTORE messages %v", got)
			}
			// The restored copy answers like the source.
			r = mustRun(t, e.db, "DBCC CHECKDB([Sales_verify]) WITH NO_INFOMSGS, ALL_ERRORMSGS, EXTENDED_LOGICAL_CHECKS, DATA_PURITY")
			if len(r.infos) != 0 {
				t.Fatalf("CHECKDB of a clean copy printed %v", r.infos)
			}
			for _, q := range []string{"SELECT COUNT_BIG(*) FROM [%s].[dbo].[Orders]", "SELECT COUNT_BIG(*) FROM [%s].[dbo].[Customers]", "SELECT MAX([OrderID]) FROM [%s].[dbo].[Orders]"} {
				a := mustRun(t, e.db, fmt.Sprintf(q, "Sales")).rows[0][0]
				b := mustRun(t, e.db, fmt.Sprintf(q, "Sales_verify")).rows[0][0]
				if fmt.Sprint(a) != fmt.Sprint(b) {
					t.Fatalf("%s: source %v, copy %v", q, a, b)
				}
			}
			r = mustRun(t, e.db, "SELECT TOP (1) restore_history_id, restore_date, destination_database_name, restore_type FROM msdb.dbo.restorehistory WHERE destination_database_name = @p1 AND restore_type = 'D' ORDER BY restore_history_id DESC", "Sales_verify")
			if len(r.rows) != 1 || r.rows[0][2] != "Sales_verify" || r.rows[0][3] != "D" {
				t.Fatalf("restorehistory = %v", r.rows)
			}
			// The restore names its backup set: the GUID HEADERONLY reported.
			g := mustRun(t, e.db, "SELECT backup_set_uuid FROM msdb.dbo.backupset WHERE backup_set_id = "+
				"(SELECT TOP (1) backup_set_id FROM msdb.dbo.restorehistory WHERE destination_database_name = @p1 ORDER BY restore_history_id DESC)", "Sales_verify")
			if len(g.rows) != 1 || fmt.Sprint(g.rows[0][0]) != fmt.Sprint(setGUID) {
				t.Fatalf("backup set of the restore = %v, HEADERONLY said %v", g.rows, setGUID)
			}
			// The restored files are where MOVE put them.
			r = mustRun(t, e.db, "SELECT physical_name FROM [Sales_verify].sys.database_files ORDER BY file_id")
			if len(r.rows) != 4 || !strings.HasPrefix(r.rows[0][0].(string), `R:\restore\Sales_verify_`) {
				t.Fatalf("restored files = %v", r.rows)
			}
			// Restoring again over it needs REPLACE; dropping it works (the product's batch).
			mustFail(t, e.db, 3013, "RESTORE DATABASE [Sales_verify] FROM "+from+" WITH "+movesFor(t, e, from, "Sales_verify"))
			mustRun(t, e.db, "IF DB_ID(N'Sales_verify') IS NOT NULL\nBEGIN\n    ALTER DATABASE [Sales_verify] SET SINGLE_USER WITH ROLLBACK IMMEDIATE;\n    DROP DATABASE [Sales_verify];\nEND")
			if r := mustRun(t, e.db, "SELECT DB_ID(N'Sales_verify')"); r.rows[0][0] != nil {
				t.Fatalf("database still there: %v", r.rows)
			}
			if ents, _ := os.ReadDir(e.restoreDir); len(ents) != 0 {
				t.Fatalf("DROP left files: %v", ents)
			}
		})
	}
}

// TestBackupProgressStreams checks that "N percent processed." arrives
// while the backup still runs (another connection still sees it in
// sys.dm_exec_requests), not in one lump at the end.
func TestBackupProgressStreams(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20})
	e.in.SetThrottle(20 << 20) // ~0.5 s for the whole set
	other := e.open(t, "master")
	running := -1
	r, err := run(testCtx(t), e.db, func(m mssql.Error) {
		if m.Number == 3211 && running < 0 {
			q := mustRun(t, other, "SELECT COUNT(*) FROM sys.dm_exec_requests WHERE command = N'BACKUP DATABASE'")
			running = int(asInt(q.rows[0][0]))
		}
	}, "BACKUP DATABASE [Sales] TO DISK = N'\\\\bak01\\backup\\s.bak' WITH INIT, STATS = 5")
	if err != nil || len(r.errs) > 0 {
		t.Fatalf("backup: %v %v", err, r.errs)
	}
	if running != 1 {
		t.Fatalf("at the first progress message %d backups were running, want 1: messages not streamed", running)
	}
	if n := len(r.infos); n < 20 {
		t.Fatalf("%d messages, want 20 progress messages and more", n)
	}
}

func TestBackupErrors(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MemoryBudget = 64 << 20 })
	e.create(t, DatabaseSpec{Name: "Sales", Size: 4 << 20})
	for _, tc := range []struct {
		name  string
		sql   string
		want  []int32
		setup func()
	}{
		{"unknown database", "BACKUP DATABASE [Nope] TO DISK = N'x.bak' WITH INIT", []int32{911, 3013}, nil},
		{"unknown share", `BACKUP DATABASE [Sales] TO DISK = N'\\bak09\backup\x.bak' WITH INIT`, []int32{3201, 3013}, nil},
		{"missing directory", `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\no\such\dir\x.bak' WITH INIT`, []int32{3201, 3013}, nil},
		{"memory (seed 004)", `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\m.bak' WITH INIT, BUFFERCOUNT = 3000, MAXTRANSFERSIZE = 2097152`, []int32{701, 3013}, nil},
		{"unreachable share", `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\u.bak' WITH INIT`, []int32{3201, 3013},
			func() { e.in.SetShareUnreachable(`\\BAK01\backup`, true) }},
		{"disk full", `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\f.bak' WITH INIT`, []int32{3202, 3013},
			func() { e.in.SetShareUnreachable(`\\bak01\backup`, false); e.in.SetShareQuota(`\\bak01\backup`, 1<<20) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup()
			}
			r := mustFail(t, e.db, 3013, tc.sql)
			if fmt.Sprint(r.errNums()) != fmt.Sprint(tc.want) {
				t.Fatalf("errors %v, want %v (%v)", r.errNums(), tc.want, r.errs)
			}
		})
	}
	e.in.SetShareQuota(`\\bak01\backup`, 0)
	r := mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\ok.bak' WITH INIT`)
	if r.infos[len(r.infos)-1].Number != 3014 {
		t.Fatalf("backup after clearing faults: %v", r.infoNums())
	}
	// No INIT/FORMAT onto an existing media set is refused, never overwritten.
	before, _ := os.ReadFile(filepath.Join(e.shareDir, "ok.bak"))
	mustFail(t, e.db, 3013, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\ok.bak'`)
	after, _ := os.ReadFile(filepath.Join(e.shareDir, "ok.bak"))
	if string(before) != string(after) {
		t.Fatal("the existing media set was changed")
	}
	// TO DISK = 'NUL' reads everything and writes nothing.
	r = mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = 'NUL' WITH COPY_ONLY`)
	if r.infos[len(r.infos)-1].Number != 3014 {
		t.Fatalf("backup to NUL: %v", r.infoNums())
	}
}

// TestShareThrottle: a share's limit paces all its streams together; the
// backup is still running at its first progress message and completes.
func TestShareThrottle(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20})
	e.in.SetShareThrottle(`\\BAK01\Backup`, 8<<20)
	other := e.open(t, "master")
	running := -1
	r, err := run(testCtx(t), e.db, func(m mssql.Error) {
		if m.Number == 3211 && running < 0 {
			q := mustRun(t, other, "SELECT COUNT(*) FROM sys.dm_exec_requests WHERE command = N'BACKUP DATABASE' AND percent_complete < 100")
			running = int(asInt(q.rows[0][0]))
		}
	}, "BACKUP DATABASE [Sales] TO "+disks(stripeNames("Sales", 4))+" WITH INIT, FORMAT, STATS = 10")
	if err != nil || len(r.errs) > 0 {
		t.Fatalf("backup: %v %v", err, r.errs)
	}
	if running != 1 {
		t.Fatalf("backup not seen running at its first progress message (%d)", running)
	}
	e.in.SetShareThrottle(`\\bak01\backup`, 0)
	mustRun(t, e.db, "RESTORE VERIFYONLY FROM "+disks(stripeNames("Sales", 4)))
}
