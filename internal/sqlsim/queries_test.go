package sqlsim

import (
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestServerQueries(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 4 << 20, DataFiles: 2})
	ctx := testCtx(t)
	if err := e.db.PingContext(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	var version string
	if err := e.db.QueryRowContext(ctx, "SELECT @@VERSION").Scan(&version); err != nil || !strings.HasPrefix(version, "Microsoft SQL Server 2022") {
		t.Fatalf("@@VERSION = %q, %v", version, err)
	}
	for prop, want := range map[string]string{"ProductVersion": "16.0.4135.4", "Edition": "Developer Edition (64-bit)",
		"MachineName": "sql01", "ServerName": "sql01", "EngineEdition": "3"} {
		var v any
		if err := e.db.QueryRowContext(ctx, "SELECT SERVERPROPERTY(@p1)", prop).Scan(&v); err != nil {
			t.Fatalf("SERVERPROPERTY(%s): %v", prop, err)
		}
		if fmt.Sprint(v) != want {
			t.Errorf("SERVERPROPERTY(%s) = %v, want %s", prop, v, want)
		}
	}
	// The product's database lookup (tsql.DatabaseExists).
	var id int64
	if err := e.db.QueryRowContext(ctx, "SELECT database_id FROM sys.databases WHERE name = @p1", "sales").Scan(&id); err != nil || id != 5 {
		t.Fatalf("database_id of sales = %d, %v; want 5 (names compare case-insensitively)", id, err)
	}
	if err := e.db.QueryRowContext(ctx, "SELECT database_id FROM sys.databases WHERE name = @p1", "Nope").Scan(&id); err != sql.ErrNoRows {
		t.Fatalf("unknown database: %v, want no rows", err)
	}
	r := mustRun(t, e.db, "SELECT name, state_desc, recovery_model_desc FROM sys.databases WHERE database_id > 4 ORDER BY name")
	if len(r.rows) != 1 || r.rows[0][0] != "Sales" || r.rows[0][1] != "ONLINE" || r.rows[0][2] != "FULL" {
		t.Fatalf("sys.databases rows = %v", r.rows)
	}
	r = mustRun(t, e.db, "SELECT file_id, type_desc, name, physical_name, size FROM [Sales].sys.database_files ORDER BY file_id")
	if len(r.rows) != 3 || r.rows[0][2] != "Sales" || r.rows[1][1] != "LOG" || r.rows[2][2] != "Sales_2" {
		t.Fatalf("database_files = %v", r.rows)
	}
	// Unlike sys.master_files, sys.database_files has no database_id.
	mustFail(t, e.db, 207, "SELECT database_id FROM [Sales].sys.database_files")
	r = mustRun(t, e.db, "SELECT COUNT(*) FROM sys.master_files WHERE database_id = DB_ID(N'Sales')")
	if asInt(r.rows[0][0]) != 3 {
		t.Fatalf("master_files count = %v", r.rows)
	}
	r = mustRun(t, e.db, "select 1;")
	if asInt(r.rows[0][0]) != 1 {
		t.Fatalf("select 1 = %v", r.rows)
	}
	// Sanity-query shapes (tsql.SanityStatement).
	r = mustRun(t, e.db, "SELECT COUNT_BIG(*) FROM [Sales].[dbo].[Orders]")
	orders := asInt(r.rows[0][0])
	if orders <= 0 {
		t.Fatalf("COUNT_BIG(Orders) = %v", r.rows)
	}
	r = mustRun(t, e.db, "SELECT MAX([OrderDate]) FROM [Sales].[dbo].[Orders]")
	if ts, ok := r.rows[0][0].(time.Time); !ok || time.Since(ts) > time.Hour {
		t.Fatalf("MAX(OrderDate) = %v", r.rows)
	}
	sales := e.open(t, "Sales")
	r = mustRun(t, sales, "SELECT COUNT(*) AS n FROM dbo.Customers")
	if asInt(r.rows[0][0]) <= 0 || r.cols[0] != "n" {
		t.Fatalf("COUNT(*) Customers = %v %v", r.cols, r.rows)
	}
	r = mustRun(t, sales, "SELECT 1 WHERE EXISTS (SELECT 1 FROM sys.tables WHERE name = 'Orders')")
	if len(r.rows) != 1 {
		t.Fatalf("EXISTS = %v", r.rows)
	}
	// Errors with SQL Server's numbers.
	for _, tc := range []struct {
		sql  string
		want int32
	}{
		{"SELEKT 1", 102},
		{"frobnicate", 2812},
		{"DELETE FROM dbo.Orders", 40515},
		{"SELECT COUNT_BIG(*) FROM dbo.Nope", 208},
		{"SELECT nope FROM sys.databases", 207},
		{"SELECT * FROM [Nowhere].dbo.T", 911},
		{"SELECT 'unclosed", 105},
		{"DROP DATABASE [Nowhere]", 3701},
		{"BACKUP DATABASE [Nowhere] TO DISK = N'x.bak'", 3013},
	} {
		mustFail(t, e.db, tc.want, tc.sql)
	}
	_, err := e.db.ExecContext(ctx, "SELEKT 1")
	if errNumber(err) != 102 {
		t.Fatalf("plain Exec error = %v, want 102", err)
	}
}

func TestLoginFailures(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	for _, tc := range []struct {
		dsn  string
		want int32
	}{
		{e.in.DSN("sa", "wrong", "master"), 18456},
		{e.in.DSN("mallory", testPass, "master"), 18456},
		{e.in.DSN("sa", testPass, "Nowhere"), 18456}, // after 4060, as SQL Server sends them: TestLoginDatabaseUnavailable
	} {
		db, err := sql.Open("sqlserver", tc.dsn)
		if err != nil {
			t.Fatal(err)
		}
		err = db.PingContext(ctx)
		db.Close()
		if errNumber(err) != tc.want {
			t.Fatalf("login %s: %v, want error %d", tc.dsn, err, tc.want)
		}
	}
}

// TestSequenceTable runs the statements of tsql.SequenceSetup/SequenceNext
// and the seed's forms, then allocates numbers from 8 connections at once.
func TestSequenceTable(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	setup := []string{
		"IF NOT EXISTS (SELECT 1 FROM [Sales].sys.schemas WHERE name = N'DBBackup') EXEC [Sales].sys.sp_executesql N'CREATE SCHEMA [DBBackup]'",
		"IF OBJECT_ID(N'[Sales].[DBBackup].[Sequence]', N'U') IS NULL CREATE TABLE [Sales].[DBBackup].[Sequence] (Number int NOT NULL, ID int NOT NULL, CONSTRAINT PK_Seq PRIMARY KEY CLUSTERED (ID ASC), CONSTRAINT CK_Seq CHECK (ID = 1))",
		"IF NOT EXISTS (SELECT 1 FROM [Sales].[DBBackup].[Sequence] WHERE ID = 1) INSERT INTO [Sales].[DBBackup].[Sequence] (Number, ID) VALUES (0, 1)",
	}
	for round := 0; round < 2; round++ { // idempotent
		for _, s := range setup {
			mustRun(t, e.db, s)
		}
	}
	next := "UPDATE [Sales].[DBBackup].[Sequence] SET Number = Number + 1 OUTPUT inserted.Number WHERE ID = 1"
	r := mustRun(t, e.db, next)
	if len(r.rows) != 1 || asInt(r.rows[0][0]) != 1 {
		t.Fatalf("first number = %v", r.rows)
	}
	// The seed's variable form.
	r = mustRun(t, e.db, "DECLARE @SeqNumber AS int; UPDATE Sales.DBBackup.Sequence SET @SeqNumber = Number = Number + 1 WHERE ID = 1; SELECT @SeqNumber AS n")
	if asInt(r.rows[0][0]) != 2 {
		t.Fatalf("seed form number = %v", r.rows)
	}
	// Constraints hold: the seed's INSERT has one column and two values (110),
	// a second row violates the CHECK (547), a duplicate key the PK (2627).
	mustFail(t, e.db, 110, "INSERT INTO Sales.DBBackup.Sequence (Number) VALUES (1,1)")
	mustFail(t, e.db, 547, "INSERT INTO Sales.DBBackup.Sequence (Number, ID) VALUES (1, 2)")
	mustFail(t, e.db, 2627, "INSERT INTO Sales.DBBackup.Sequence (Number, ID) VALUES (1, 1)")
	mustFail(t, e.db, 2714, "CREATE TABLE [Sales].[DBBackup].[Sequence] (Number int)")
	mustRun(t, e.db, "ALTER TABLE Sales.DBBackup.Sequence WITH CHECK ADD CONSTRAINT CK_Seq2 CHECK (ID=1); ALTER TABLE Sales.DBBackup.Sequence CHECK CONSTRAINT CK_Seq2")

	var mu sync.Mutex
	got := map[int64]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				var n int64
				if err := e.db.QueryRow(next).Scan(&n); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if got[n] {
					t.Errorf("number %d handed out twice", n)
				}
				got[n] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != 80 {
		t.Fatalf("got %d distinct numbers, want 80", len(got))
	}
	r = mustRun(t, e.db, "SELECT Number FROM [Sales].[DBBackup].[Sequence] WHERE ID = 1")
	if asInt(r.rows[0][0]) != 82 {
		t.Fatalf("final number = %v, want 82", r.rows)
	}
	// Survives a restart (the table lives in the database's metadata pages).
	if err := e.in.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := e.in.Start(); err != nil {
		t.Fatal(err)
	}
	db := e.open(t, "master")
	r = mustRun(t, db, "SELECT Number FROM [Sales].[DBBackup].[Sequence] WHERE ID = 1")
	if asInt(r.rows[0][0]) != 82 {
		t.Fatalf("number after restart = %v, want 82", r.rows)
	}
}

// TestMetadataUnderLoad: sequence increments rewrite the metadata pages
// while other connections read them, back them up WITH CHECKSUM and run
// CHECKDB; nobody may see a half-written metadata set.
func TestMetadataUnderLoad(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	mustRun(t, e.db, "CREATE TABLE Sales.dbo.Seq (Number bigint NOT NULL, ID int NOT NULL, CONSTRAINT PK PRIMARY KEY (ID)); INSERT INTO Sales.dbo.Seq VALUES (0, 1)")
	e.db.SetMaxOpenConns(16)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errc := make(chan error, 100)
	loop := func(query string, wantErrFree bool) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			r, err := run(testCtx(t), e.db, nil, query)
			if err == nil && len(r.errs) > 0 {
				err = fmt.Errorf("%s: %v", short(query), r.errs)
			}
			if err != nil {
				errc <- err
				return
			}
		}
	}
	for _, q := range []string{
		"UPDATE Sales.dbo.Seq SET Number = Number + 1 OUTPUT inserted.Number WHERE ID = 1",
		"UPDATE Sales.dbo.Seq SET Number = Number + 1 OUTPUT inserted.Number WHERE ID = 1",
		"SELECT COUNT_BIG(*) FROM Sales.dbo.Orders",
		"SELECT Number FROM Sales.dbo.Seq",
		"BACKUP DATABASE Sales TO DISK = 'NUL' WITH CHECKSUM, COPY_ONLY, MAXTRANSFERSIZE = 65536",
		"DBCC CHECKDB(Sales) WITH NO_INFOMSGS",
	} {
		wg.Add(1)
		go loop(q, true)
	}
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	r := mustRun(t, e.db, "SELECT Number FROM Sales.dbo.Seq")
	if asInt(r.rows[0][0]) < 10 {
		t.Fatalf("only %v increments in the run", r.rows)
	}
}
