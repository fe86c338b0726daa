package sqlsim

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// openAs opens a connection pool for login user.
func (e *testEnv) openAs(t testing.TB, user, pass, db string) *sql.DB {
	t.Helper()
	conn, err := sql.Open("sqlserver", e.in.DSN(user, pass, db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// wantErrs runs a statement that must fail with exactly the error numbers
// want, in order, and returns the result.
func wantErrs(t *testing.T, db *sql.DB, want []int32, query string) *result {
	t.Helper()
	r, err := run(testCtx(t), db, nil, query)
	if err != nil {
		t.Fatalf("%s: %v", short(query), err)
	}
	if !slices.Equal(r.errNums(), want) {
		t.Fatalf("%s: errors %v (%v), want %v", short(query), r.errNums(), r.errs, want)
	}
	return r
}

// scalar runs a one-value query and returns the value.
func scalar(t *testing.T, db *sql.DB, query string) any {
	t.Helper()
	r := mustRun(t, db, query)
	if len(r.rows) != 1 || len(r.rows[0]) != 1 {
		t.Fatalf("%s: rows %v, want one value", query, r.rows)
	}
	return r.rows[0][0]
}

const pw = "Pa55word!"

// permEnv is an instance with the Sales database, its sequence table and
// a login per permission set.
func permEnv(t *testing.T, mod ...func(*Config)) *testEnv {
	t.Helper()
	logins := []Login{
		{Name: "nobody", Password: pw, Databases: map[string][]string{"Sales": nil}},
		{Name: "stranger", Password: pw},
		{Name: "BkOp", Password: pw, Databases: map[string][]string{"Sales": {"db_backupoperator"}}},
		{Name: "creator", Password: pw, Server: []string{"dbcreator"}},
		{Name: "anydb", Password: pw, Server: []string{"CREATE ANY DATABASE"}},
		{Name: "viewer", Password: pw, Server: []string{"VIEW SERVER STATE"}},
		{Name: "perf", Password: pw, Server: []string{"VIEW SERVER PERFORMANCE STATE"}},
		{Name: "procadm", Password: pw, Server: []string{"processadmin"}},
		{Name: "srvadm", Password: pw, Server: []string{"serveradmin"}},
		{Name: "secadm", Password: pw, Server: []string{"securityadmin"}},
		{Name: "ctrl", Password: pw, Server: []string{"CONTROL SERVER"}},
		{Name: "reader", Password: pw, Databases: map[string][]string{"Sales": {"SELECT"}, "msdb": {"db_datareader"}}},
		{Name: "writer", Password: pw, Databases: map[string][]string{"Sales": {"UPDATE"}}},
		{Name: "owner", Password: pw, Databases: map[string][]string{"Sales": {"db_owner"}}},
	}
	e := newEnv(t, append([]func(*Config){func(c *Config) { c.Principals = logins }}, mod...)...)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 4 << 20})
	mustRun(t, e.db, "USE [Sales]; CREATE SCHEMA DBBackup")
	mustRun(t, e.db, "CREATE TABLE [Sales].[DBBackup].[Sequence] (ID int NOT NULL, Number bigint NOT NULL, CONSTRAINT PK_Sequence PRIMARY KEY (ID))")
	mustRun(t, e.db, "INSERT INTO [Sales].[DBBackup].[Sequence] (ID, Number) VALUES (1, 0)")
	return e
}

// TestPermissionModel: each statement the cycle sends fails without the
// permission SQL Server requires, with SQL Server's error numbers, and
// works with it.
func TestPermissionModel(t *testing.T) {
	e := permEnv(t)
	as := func(user string) *sql.DB { return e.openAs(t, user, pw, "") }
	nobody, stranger, bkop, creator, anydb := as("nobody"), as("stranger"), as("bkop"), as("creator"), as("anydb")
	reader, writer, owner, procadm := as("reader"), as("writer"), as("owner"), as("procadm")
	set := disks(stripeNames("Sales", 2))
	backup := "BACKUP DATABASE [Sales] TO " + set + " WITH INIT, FORMAT, COPY_ONLY"

	// BACKUP: BACKUP DATABASE in the database (db_backupoperator).
	r := wantErrs(t, nobody, []int32{262, 3013}, backup)
	if r.errs[0].Message != "BACKUP DATABASE permission denied in database 'Sales'." || r.errs[0].Class != 14 {
		t.Fatalf("262: %+v", r.errs[0])
	}
	mustRun(t, bkop, backup)

	// RESTORE HEADERONLY/FILELISTONLY/VERIFYONLY: CREATE DATABASE.
	for _, q := range []string{"RESTORE HEADERONLY FROM ", "RESTORE FILELISTONLY FROM ", "RESTORE VERIFYONLY FROM "} {
		r := wantErrs(t, bkop, []int32{262, 3013}, q+set)
		if r.errs[0].Message != "CREATE DATABASE permission denied in database 'master'." {
			t.Fatalf("%s: %q", q, r.errs[0].Message)
		}
		mustRun(t, creator, q+set)
		mustRun(t, anydb, q+set)
	}

	// RESTORE DATABASE: a new database needs CREATE DATABASE, and its
	// restorer owns it; an existing one only sysadmin, dbcreator or owner.
	restore := "RESTORE DATABASE [Sales_verify] FROM " + set + " WITH " + movesFor(t, e, set, "v") + ", RECOVERY"
	wantErrs(t, bkop, []int32{262, 3013}, restore)
	mustRun(t, anydb, restore)
	over := "RESTORE DATABASE [Sales] FROM " + set + " WITH " + movesFor(t, e, set, "s") + ", REPLACE"
	r = wantErrs(t, anydb, []int32{3110, 3013}, over)
	if r.errs[0].Message != "User does not have permission to RESTORE database 'Sales'." {
		t.Fatalf("3110: %q", r.errs[0].Message)
	}
	wantErrs(t, owner, []int32{3110, 3013}, over) // db_owner membership does not count for RESTORE

	// DBCC CHECKDB: db_owner or the owner.
	r = wantErrs(t, bkop, []int32{7983}, "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS")
	if r.errs[0].Message != "User 'BkOp' does not have permission to run DBCC checkdb for database 'Sales'." {
		t.Fatalf("7983: %q", r.errs[0].Message)
	}
	wantErrs(t, stranger, []int32{916}, "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS")
	mustRun(t, owner, "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS")
	mustRun(t, anydb, "DBCC CHECKDB([Sales_verify]) WITH NO_INFOMSGS")                  // it restored it: it owns it
	wantErrs(t, creator, []int32{916}, "DBCC CHECKDB([Sales_verify]) WITH NO_INFOMSGS") // no user there

	// DROP DATABASE: ALTER ANY DATABASE (dbcreator), db_owner or ownership.
	wantErrs(t, reader, []int32{3701}, "DROP DATABASE [Sales_verify]")
	mustRun(t, anydb, "DROP DATABASE [Sales_verify]")
	mustRun(t, anydb, restore)
	mustRun(t, creator, "DROP DATABASE [Sales_verify]")

	// KILL: ALTER ANY CONNECTION (processadmin).
	victim, err := nobody.Conn(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	var spid int64
	if err := victim.QueryRowContext(testCtx(t), "SELECT @@SPID").Scan(&spid); err != nil {
		t.Fatal(err)
	}
	r = wantErrs(t, reader, []int32{6102}, fmt.Sprintf("KILL %d", spid))
	if r.errs[0].Message != "User does not have permission to use the KILL statement." {
		t.Fatalf("6102: %q", r.errs[0].Message)
	}
	mustRun(t, procadm, fmt.Sprintf("KILL %d", spid))
	if err := victim.PingContext(testCtx(t)); err == nil {
		t.Fatal("the killed session still answers")
	}

	// msdb history: SELECT in msdb.
	for _, tbl := range []string{"backupset", "restorehistory"} {
		r := wantErrs(t, nobody, []int32{229}, "SELECT COUNT(*) FROM msdb.dbo."+tbl)
		if want := "The SELECT permission was denied on the object '" + tbl + "', database 'msdb', schema 'dbo'."; r.errs[0].Message != want {
			t.Fatalf("229: %q", r.errs[0].Message)
		}
		mustRun(t, reader, "SELECT COUNT(*) FROM msdb.dbo."+tbl)
	}

	// The sequence table: UPDATE, and SELECT because the UPDATE reads it.
	inc := "UPDATE [Sales].[DBBackup].[Sequence] SET Number = Number + 1 OUTPUT inserted.Number WHERE ID = 1"
	r = wantErrs(t, nobody, []int32{229}, inc)
	if r.errs[0].Message != "The UPDATE permission was denied on the object 'Sequence', database 'Sales', schema 'DBBackup'." {
		t.Fatalf("229 UPDATE: %q", r.errs[0].Message)
	}
	r = wantErrs(t, writer, []int32{229}, inc)
	if !strings.HasPrefix(r.errs[0].Message, "The SELECT permission was denied") {
		t.Fatalf("UPDATE ... WHERE without SELECT: %q", r.errs[0].Message)
	}
	mustRun(t, writer, "UPDATE [Sales].[DBBackup].[Sequence] SET Number = 7") // reads nothing: UPDATE alone does
	wantErrs(t, nobody, []int32{229}, "SELECT Number FROM [Sales].[DBBackup].[Sequence]")
	wantErrs(t, stranger, []int32{916}, "SELECT Number FROM [Sales].[DBBackup].[Sequence]")
	if n := asInt(mustRun(t, owner, inc).rows[0][0]); n != 8 {
		t.Fatalf("owner's increment returned %d, want 8", n)
	}
	wantErrs(t, stranger, []int32{916}, "USE [Sales]")

	// File sizes: sys.master_files needs CREATE DATABASE, ALTER ANY
	// DATABASE or VIEW ANY DEFINITION; [db].sys.database_files any user of db.
	count := func(db *sql.DB, q string) int64 { return asInt(scalar(t, db, q)) }
	if n := count(bkop, "SELECT COUNT(*) FROM sys.master_files WHERE database_id = DB_ID('Sales')"); n != 0 {
		t.Errorf("a db_backupoperator sees %d rows of sys.master_files", n)
	}
	if n := count(creator, "SELECT COUNT(*) FROM sys.master_files WHERE database_id = DB_ID('Sales')"); n != 2 {
		t.Errorf("dbcreator sees %d rows of sys.master_files for Sales, want 2", n)
	}
	if n := count(bkop, "SELECT COUNT(*) FROM [Sales].sys.database_files"); n != 2 {
		t.Errorf("a user of Sales sees %d rows of its sys.database_files, want 2", n)
	}
	wantErrs(t, stranger, []int32{916}, "SELECT COUNT(*) FROM [Sales].sys.database_files")
	mustRun(t, sqlOpen(t, e, "reader", "Sales"), "SELECT Number FROM DBBackup.Sequence")
}

func sqlOpen(t *testing.T, e *testEnv, user, db string) *sql.DB { return e.openAs(t, user, pw, db) }

// TestRequestsVisibility: sys.dm_exec_requests (and the sql text) show
// other sessions only with VIEW SERVER STATE; on SQL Server 2022 VIEW
// SERVER PERFORMANCE STATE is enough, on 2019 it is not.
func TestRequestsVisibility(t *testing.T) {
	for _, major := range []int{16, 15} {
		t.Run(fmt.Sprint(major), func(t *testing.T) {
			e := permEnv(t, func(c *Config) { c.MajorVersion = major })
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := e.db.ExecContext(ctx, "WAITFOR DELAY '00:00:20' -- marker-7f3a")
				done <- err
			}()
			waitFor(t, func() bool { return len(statementsOf(e.in, "WAITFOR")) > 0 })
			q := "SELECT r.session_id, t.text FROM sys.dm_exec_requests r CROSS APPLY sys.dm_exec_sql_text(r.sql_handle) t"
			sees := func(user string) bool {
				r := mustRun(t, e.openAs(t, user, pw, ""), q)
				seen := false
				for _, row := range r.rows {
					seen = seen || strings.Contains(row[1].(string), "marker-7f3a")
				}
				if len(r.rows) == 0 {
					t.Fatalf("%s does not even see its own request", user)
				}
				return seen
			}
			if sees("nobody") {
				t.Fatal("a login without VIEW SERVER STATE sees another session's request")
			}
			if !sees("viewer") {
				t.Fatal("VIEW SERVER STATE does not show other sessions")
			}
			if got, want := sees("perf"), major >= 16; got != want {
				t.Fatalf("VIEW SERVER PERFORMANCE STATE on %d shows other sessions: %v, want %v", major, got, want)
			}
			// A GRANT takes effect at once, on open connections too.
			nobody := e.openAs(t, "nobody", pw, "")
			e.in.SetLogin(Login{Name: "nobody", Password: pw, Server: []string{"VIEW SERVER STATE"}})
			r := mustRun(t, nobody, q)
			if len(r.rows) < 2 {
				t.Fatalf("after SetLogin: %v", r.rows)
			}
			cancel()
			<-done
		})
	}
}

// TestPermissionFunctions: HAS_PERMS_BY_NAME, IS_SRVROLEMEMBER, IS_MEMBER
// and SUSER_SNAME answer for the session's login.
func TestPermissionFunctions(t *testing.T) {
	e := permEnv(t)
	q := func(user, expr string) any { return scalar(t, e.openAs(t, user, pw, ""), "SELECT "+expr) }
	for _, c := range []struct {
		user, expr string
		want       any
	}{
		{"bkop", "HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER STATE')", int64(0)},
		{"viewer", "HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER STATE')", int64(1)},
		{"viewer", "HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER PERFORMANCE STATE')", int64(1)},
		{"perf", "HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER STATE')", int64(0)},
		{"bkop", "HAS_PERMS_BY_NAME('Sales', 'DATABASE', 'BACKUP DATABASE')", int64(1)},
		{"nobody", "HAS_PERMS_BY_NAME('Sales', 'DATABASE', 'BACKUP DATABASE')", int64(0)},
		{"nobody", "HAS_PERMS_BY_NAME('Sales', 'DATABASE', 'CONNECT')", int64(1)},
		{"stranger", "HAS_PERMS_BY_NAME('Sales', 'DATABASE', 'CONNECT')", int64(0)},
		{"bkop", "HAS_PERMS_BY_NAME('NoSuchDb', 'DATABASE', 'BACKUP DATABASE')", nil},
		{"bkop", "HAS_PERMS_BY_NAME('master', 'DATABASE', 'CREATE DATABASE')", int64(0)},
		{"creator", "HAS_PERMS_BY_NAME('master', 'DATABASE', 'CREATE DATABASE')", int64(1)},
		{"creator", "HAS_PERMS_BY_NAME(NULL, NULL, 'ALTER ANY DATABASE')", int64(1)},
		{"anydb", "HAS_PERMS_BY_NAME(NULL, NULL, 'ALTER ANY DATABASE')", int64(0)},
		{"writer", "HAS_PERMS_BY_NAME('[Sales].[DBBackup].[Sequence]', 'OBJECT', 'UPDATE')", int64(1)},
		{"writer", "HAS_PERMS_BY_NAME('[Sales].[DBBackup].[Sequence]', 'OBJECT', 'SELECT')", int64(0)},
		{"owner", "HAS_PERMS_BY_NAME('Sales', 'DATABASE', 'ALTER')", int64(1)},
		{"bkop", "HAS_PERMS_BY_NAME(NULL, NULL, 'NO SUCH PERMISSION')", nil},
		{"procadm", "HAS_PERMS_BY_NAME(NULL, NULL, 'ALTER ANY CONNECTION')", int64(1)},
		// serveradmin is granted VIEW SERVER STATE and ALTER SERVER STATE,
		// securityadmin ALTER ANY LOGIN ("Permissions of Fixed Server
		// Roles"); CONTROL SERVER covers every server permission without
		// sysadmin membership, and db_owner holds CONTROL of its database.
		{"srvadm", "HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER STATE')", int64(1)},
		{"srvadm", "HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER PERFORMANCE STATE')", int64(1)},
		{"srvadm", "HAS_PERMS_BY_NAME(NULL, NULL, 'ALTER SERVER STATE')", int64(1)},
		{"srvadm", "HAS_PERMS_BY_NAME(NULL, NULL, 'ALTER ANY LOGIN')", int64(0)},
		{"srvadm", "IS_SRVROLEMEMBER('serveradmin')", int64(1)},
		{"secadm", "HAS_PERMS_BY_NAME(NULL, NULL, 'ALTER ANY LOGIN')", int64(1)},
		{"secadm", "IS_SRVROLEMEMBER('securityadmin')", int64(1)},
		{"ctrl", "HAS_PERMS_BY_NAME(NULL, NULL, 'CONTROL SERVER')", int64(1)},
		{"ctrl", "HAS_PERMS_BY_NAME(NULL, NULL, 'ALTER ANY LOGIN')", int64(1)},
		{"ctrl", "IS_SRVROLEMEMBER('sysadmin')", int64(0)},
		{"sa", "HAS_PERMS_BY_NAME(NULL, NULL, 'CONTROL SERVER')", int64(1)},
		{"bkop", "HAS_PERMS_BY_NAME(NULL, NULL, 'CONTROL SERVER')", int64(0)},
		{"owner", "HAS_PERMS_BY_NAME('Sales', 'DATABASE', 'CONTROL')", int64(1)},
		{"bkop", "HAS_PERMS_BY_NAME('Sales', 'DATABASE', 'CONTROL')", int64(0)},
		{"sa", "IS_SRVROLEMEMBER('sysadmin')", int64(1)},
		{"bkop", "IS_SRVROLEMEMBER('sysadmin')", int64(0)},
		{"creator", "IS_SRVROLEMEMBER('dbcreator')", int64(1)},
		{"creator", "IS_SRVROLEMEMBER('no_such_role')", nil},
		{"bkop", "SUSER_SNAME()", "BkOp"},
		{"bkop", "@@LANGUAGE", "us_english"},
	} {
		pass := pw
		if c.user == "sa" {
			pass = testPass
		}
		got := scalar(t, e.openAs(t, c.user, pass, ""), "SELECT "+c.expr)
		if fmt.Sprint(normValue(got)) != fmt.Sprint(c.want) {
			t.Errorf("%s: %s = %v, want %v", c.user, c.expr, got, c.want)
		}
	}
	if got := q("owner", "IS_MEMBER('db_owner')"); asInt(got) != 0 {
		t.Errorf("IS_MEMBER in master for a db_owner of Sales: %v", got)
	}
	if got := scalar(t, e.openAs(t, "owner", pw, "Sales"), "SELECT IS_MEMBER('db_owner')"); asInt(got) != 1 {
		t.Errorf("IS_MEMBER('db_owner') in Sales: %v", got)
	}
}

// TestEditionsAndVersions: SERVERPROPERTY and @@VERSION follow
// Config.Edition and Config.MajorVersion.
func TestEditionsAndVersions(t *testing.T) {
	for _, c := range []struct {
		edition string
		major   int
		engine  int64
		name    string
		version string
	}{
		{"Express", 13, 4, "Express Edition (64-bit)", "13.0.6300.2"},
		{"Web", 14, 2, "Web Edition (64-bit)", "14.0.3456.2"},
		{"Standard", 15, 2, "Standard Edition (64-bit)", "15.0.4385.2"},
		{"Enterprise", 16, 3, "Enterprise Edition: Core-based Licensing (64-bit)", "16.0.4135.4"},
		{"", 0, 3, "Developer Edition (64-bit)", "16.0.4135.4"},
	} {
		e := newEnv(t, func(cfg *Config) { cfg.Edition, cfg.MajorVersion = c.edition, c.major })
		r := mustRun(t, e.db, "SELECT CAST(SERVERPROPERTY('EngineEdition') AS int), CAST(SERVERPROPERTY('Edition') AS nvarchar(128)), "+
			"CAST(SERVERPROPERTY('ProductMajorVersion') AS int), CAST(SERVERPROPERTY('ProductVersion') AS nvarchar(32)), @@VERSION")
		row := r.rows[0]
		major := c.major
		if major == 0 {
			major = 16
		}
		if asInt(row[0]) != c.engine || row[1] != c.name || asInt(row[2]) != int64(major) || row[3] != c.version ||
			!strings.Contains(row[4].(string), c.version) {
			t.Errorf("%s %d: %v", c.edition, c.major, row)
		}
	}
	if _, err := New(Config{DataDir: t.TempDir(), Edition: "Home"}); err == nil {
		t.Error("an unknown edition was accepted")
	}
	if _, err := New(Config{DataDir: t.TempDir(), MajorVersion: 12}); err == nil {
		t.Error("SQL Server 2014 was accepted")
	}
}

// TestReadOnlyDatabase: ALTER DATABASE SET READ_ONLY shows in
// DATABASEPROPERTYEX and sys.databases, refuses writes with 3906, still
// backs up, and needs exclusive access (5070) unless WITH ROLLBACK.
func TestReadOnlyDatabase(t *testing.T) {
	e := permEnv(t)
	owner := e.openAs(t, "owner", pw, "")
	wantErrs(t, e.openAs(t, "reader", pw, ""), []int32{5011, 5069}, "ALTER DATABASE [Sales] SET READ_ONLY")
	state := func() (string, bool) {
		r := mustRun(t, e.db, "SELECT CAST(DATABASEPROPERTYEX('Sales', 'Updateability') AS nvarchar(20)), is_read_only FROM sys.databases WHERE name = 'Sales'")
		return r.rows[0][0].(string), r.rows[0][1].(bool)
	}
	if u, ro := state(); u != "READ_WRITE" || ro {
		t.Fatalf("new database: %s %v", u, ro)
	}
	// Another session in the database: exclusive access is needed.
	inSales, err := e.openAs(t, "sa", testPass, "Sales").Conn(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer inSales.Close()
	if err := inSales.PingContext(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	r := wantErrs(t, owner, []int32{5070, 5069}, "ALTER DATABASE [Sales] SET READ_ONLY")
	if !strings.Contains(r.errs[0].Message, "other users are using the database 'Sales'") {
		t.Fatalf("5070: %q", r.errs[0].Message)
	}
	mustRun(t, owner, "ALTER DATABASE [Sales] SET READ_ONLY WITH ROLLBACK IMMEDIATE")
	if u, ro := state(); u != "READ_ONLY" || !ro {
		t.Fatalf("after SET READ_ONLY: %s %v", u, ro)
	}
	r = wantErrs(t, owner, []int32{3906}, "UPDATE [Sales].[DBBackup].[Sequence] SET Number = Number + 1 WHERE ID = 1")
	if r.errs[0].Message != `Failed to update database "Sales" because the database is read-only.` {
		t.Fatalf("3906: %q", r.errs[0].Message)
	}
	wantErrs(t, owner, []int32{3906}, "INSERT INTO [Sales].[DBBackup].[Sequence] (ID, Number) VALUES (2, 0)")
	mustRun(t, owner, "SELECT Number FROM [Sales].[DBBackup].[Sequence]")
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+disks(stripeNames("Sales", 1))+" WITH INIT, FORMAT, COPY_ONLY")
	mustRun(t, owner, "ALTER DATABASE [Sales] SET READ_WRITE")
	if u, ro := state(); u != "READ_WRITE" || ro {
		t.Fatalf("after SET READ_WRITE: %s %v", u, ro)
	}
	mustRun(t, owner, "UPDATE [Sales].[DBBackup].[Sequence] SET Number = Number + 1 WHERE ID = 1")
	// The state survives a restart.
	mustRun(t, owner, "ALTER DATABASE [Sales] SET READ_ONLY")
	if err := e.in.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := e.db.ExecContext(testCtx(t), "SELECT 1"); return err == nil })
	if u, _ := state(); u != "READ_ONLY" {
		t.Fatalf("after a restart: %s", u)
	}
}

// TestSetLoginErrors: SetLogin refuses what it cannot honour.
func TestSetLoginErrors(t *testing.T) {
	e := newEnv(t)
	if err := e.in.SetLogin(Login{}); err == nil {
		t.Error("a login without a name was accepted")
	}
	if err := e.in.SetLogin(Login{Name: "x", DefaultLanguage: "Klingon"}); err == nil {
		t.Error("an unknown default language was accepted")
	}
	if err := e.in.SetLogin(Login{Name: "late", Password: pw, Databases: map[string][]string{"master": nil}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.openAs(t, "late", pw, "").PingContext(ctx); err != nil {
		t.Fatalf("login added at run time: %v", err)
	}
}
