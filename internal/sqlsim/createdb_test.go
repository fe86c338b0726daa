package sqlsim

import (
	"strings"
	"testing"
)

// A login with CREATE ANY DATABASE creates a database of its own, owns it
// (a table, rows doubled by INSERT ... SELECT, an indexed view, CHECKDB,
// BACKUP, DROP), and SQL Server's errors come where SQL Server raises them.
func TestCreateDatabaseAndIndexedView(t *testing.T) {
	e := permEnv(t)
	anydb := e.openAs(t, "anydb", pw, "")
	stranger := e.openAs(t, "stranger", pw, "")

	r := wantErrs(t, stranger, []int32{262}, "CREATE DATABASE [Scratch]")
	if r.errs[0].Message != "CREATE DATABASE permission denied in database 'master'." {
		t.Fatalf("262: %q", r.errs[0].Message)
	}
	mustRun(t, anydb, "CREATE DATABASE [Scratch]")
	wantErrs(t, anydb, []int32{1801}, "CREATE DATABASE [scratch]") // names compare by the server collation
	wantErrs(t, anydb, []int32{40515}, "CREATE DATABASE [Other] ON PRIMARY (NAME = N'x', FILENAME = N'x.mdf')")

	// The size of model: 8 MB of data and 8 MB of log, mostly unused.
	var dataPages, logPages int64
	for _, row := range mustRun(t, e.db, "SELECT type, size FROM sys.master_files WHERE database_id = DB_ID(N'Scratch')").rows {
		if asInt(row[0]) == 1 {
			logPages += asInt(row[1])
		} else {
			dataPages += asInt(row[1])
		}
	}
	if dataPages*PageSize != modelDataBytes || logPages*PageSize != modelLogBytes {
		t.Errorf("data %d pages, log %d pages; want model's 8 MB each", dataPages, logPages)
	}

	mustRun(t, anydb, "CREATE TABLE [Scratch].[dbo].[fill] (id int NOT NULL, pad nvarchar(4000) NOT NULL, CONSTRAINT pk_fill PRIMARY KEY CLUSTERED (id))")
	mustRun(t, anydb, "INSERT INTO [Scratch].[dbo].[fill] (id, pad) VALUES (1, N'"+strings.Repeat("x", 4000)+"')")
	for n := 1; n < 8; n *= 2 {
		mustRun(t, anydb, "INSERT INTO [Scratch].[dbo].[fill] (id, pad) SELECT id + @p1, pad FROM [Scratch].[dbo].[fill]", n)
	}
	if c := asInt(scalar(t, anydb, "SELECT COUNT_BIG(*) FROM [Scratch].[dbo].[fill]")); c != 8 {
		t.Fatalf("rows after doubling: %d, want 8", c)
	}
	wantErrs(t, anydb, []int32{2627}, "INSERT INTO [Scratch].[dbo].[fill] (id, pad) SELECT id, pad FROM [Scratch].[dbo].[fill]")
	wantErrs(t, anydb, []int32{121}, "INSERT INTO [Scratch].[dbo].[fill] (id) SELECT id, pad FROM [Scratch].[dbo].[fill]")

	// CREATE VIEW: first in its batch, no database prefix, two-part names
	// when schema bound.
	wantErrs(t, anydb, []int32{166}, "CREATE VIEW [Scratch].[dbo].[v] AS SELECT id FROM dbo.fill")
	wantErrs(t, anydb, []int32{111}, "EXEC [Scratch].sys.sp_executesql N'SELECT 1; CREATE VIEW dbo.v AS SELECT id FROM dbo.fill'")
	wantErrs(t, anydb, []int32{4512}, "EXEC [Scratch].sys.sp_executesql N'CREATE VIEW dbo.v WITH SCHEMABINDING AS SELECT id FROM fill'")
	mustRun(t, anydb, "EXEC [Scratch].sys.sp_executesql N'CREATE VIEW dbo.loose AS SELECT id FROM dbo.fill'")
	wantErrs(t, anydb, []int32{1939}, "CREATE UNIQUE CLUSTERED INDEX ix ON [Scratch].[dbo].[loose] (id)")
	mustRun(t, anydb, "EXEC [Scratch].sys.sp_executesql N'CREATE VIEW dbo.fill_ids WITH SCHEMABINDING AS SELECT id FROM dbo.fill'")
	wantErrs(t, anydb, []int32{1940}, "CREATE NONCLUSTERED INDEX ix ON [Scratch].[dbo].[fill_ids] (id)")
	wantErrs(t, anydb, []int32{1941}, "CREATE CLUSTERED INDEX ix ON [Scratch].[dbo].[fill_ids] (id)")
	wantErrs(t, anydb, []int32{1911}, "CREATE UNIQUE CLUSTERED INDEX ix ON [Scratch].[dbo].[fill_ids] (pad)")
	mustRun(t, anydb, "CREATE UNIQUE CLUSTERED INDEX ix_fill_ids ON [Scratch].[dbo].[fill_ids] (id)")
	wantErrs(t, anydb, []int32{1902}, "CREATE UNIQUE CLUSTERED INDEX ix2 ON [Scratch].[dbo].[fill_ids] (id)")

	// The creator owns it: CHECKDB, BACKUP and DROP need nothing more.
	mustRun(t, anydb, "DBCC CHECKDB([Scratch]) WITH NO_INFOMSGS, EXTENDED_LOGICAL_CHECKS")
	mustRun(t, anydb, `BACKUP DATABASE [Scratch] TO DISK = N'\\bak01\backup\scratch.bak' WITH COPY_ONLY, INIT, FORMAT`)
	mustRun(t, anydb, "DROP DATABASE [Scratch]")
	if v := scalar(t, e.db, "SELECT DB_ID(N'Scratch')"); v != nil {
		t.Fatalf("Scratch still exists: %v", v)
	}
}

// RESTORE ... WITH NORECOVERY leaves the copy RESTORING (recorded in msdb
// with recovery 0): it cannot be used or altered, only dropped; the
// product's drop batch drops it, reporting the ALTER's error.
func TestRestoreWithNoRecoveryLeavesItRestoring(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 1 << 20})
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\s.bak' WITH INIT, FORMAT, COPY_ONLY`)
	mustRun(t, e.db, `RESTORE DATABASE [Sales_r] FROM DISK = N'\\bak01\backup\s.bak' WITH MOVE N'Sales' TO N'R:\restore\r.mdf', `+
		`MOVE N'Sales_log' TO N'R:\restore\r.ldf', CHECKSUM, NORECOVERY`)
	if st := scalar(t, e.db, "SELECT state_desc FROM sys.databases WHERE name = N'Sales_r'"); st != "RESTORING" {
		t.Fatalf("state %v, want RESTORING", st)
	}
	if rec := scalar(t, e.db, "SELECT TOP (1) recovery FROM msdb.dbo.restorehistory WHERE destination_database_name = N'Sales_r'"); rec != false {
		t.Fatalf("restorehistory.recovery %v, want 0", rec)
	}
	wantErrs(t, e.db, []int32{927}, "DBCC CHECKDB([Sales_r]) WITH NO_INFOMSGS")
	wantErrs(t, e.db, []int32{40515}, `RESTORE HEADERONLY FROM DISK = N'\\bak01\backup\s.bak' WITH NORECOVERY`)
	wantErrs(t, e.db, []int32{5052, 5069}, "IF DB_ID(N'Sales_r') IS NOT NULL\nBEGIN\n    ALTER DATABASE [Sales_r] SET SINGLE_USER WITH ROLLBACK IMMEDIATE;\n    DROP DATABASE [Sales_r];\nEND")
	if v := scalar(t, e.db, "SELECT DB_ID(N'Sales_r')"); v != nil {
		t.Fatalf("the RESTORING copy is still there: %v", v)
	}
}
