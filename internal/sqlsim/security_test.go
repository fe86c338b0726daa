package sqlsim

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
)

// secretFunction is the kind of function a database owner can put in the
// database a sanity check calls: run as the caller, it runs a command on
// the verification host and reads the logins' password hashes.
const secretFunction = `CREATE FUNCTION dbo.fn_IntegrityOK() RETURNS nvarchar(400) AS
BEGIN
    EXEC master..xp_cmdshell 'whoami', NO_OUTPUT;
    RETURN (SELECT TOP (1) name FROM sys.sql_logins WHERE password_hash IS NOT NULL)
END`

// sandboxEnv is an instance with database Sales, a user without login
// that reads it (db_datareader only), and the function above.
func sandboxEnv(t *testing.T) (*testEnv, *sql.DB) {
	t.Helper()
	e := newEnv(t)
	e.in.SetXPCmdShell(true)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	sales := e.open(t, "Sales")
	mustRun(t, sales, "CREATE USER [sanity] WITHOUT LOGIN WITH DEFAULT_SCHEMA = [dbo]")
	mustRun(t, sales, "ALTER ROLE [db_datareader] ADD MEMBER [sanity]")
	mustRun(t, sales, secretFunction)
	return e, sales
}

// asSanity runs query as the user sanity in one batch, then REVERT.
func asSanity(query string) string {
	return "EXECUTE AS USER = N'sanity';\n" + query + ";\nREVERT"
}

// A user without login reads its database (db_datareader) and nothing
// beyond it: another database is 916 (its server principal is a SID),
// xp_cmdshell is 229 or 916, sys.sql_logins shows sa alone and no hash.
func TestExecuteAsUserIsSandboxed(t *testing.T) {
	e, sales := sandboxEnv(t)
	e.create(t, DatabaseSpec{Name: "HR", Size: 2 << 20})

	if got := scalar(t, sales, asSanity("SELECT USER_NAME()")); got != "sanity" {
		t.Errorf("USER_NAME() under EXECUTE AS USER: %v", got)
	}
	if got := scalar(t, sales, asSanity("SELECT COUNT_BIG(*) FROM dbo.Orders")); asInt(got) <= 0 {
		t.Errorf("db_datareader reads dbo.Orders: %v", got)
	}
	if got := scalar(t, sales, "SELECT USER_NAME()"); got != "dbo" {
		t.Errorf("after REVERT: %v, want dbo", got)
	}
	r := wantErrs(t, sales, []int32{916}, asSanity("SELECT COUNT_BIG(*) FROM HR.dbo.Orders"))
	if !strings.Contains(r.errs[0].Message, `"S-1-9-3-`) {
		t.Errorf("916 names %q, want the user's SID", r.errs[0].Message)
	}
	wantErrs(t, sales, []int32{229}, asSanity("EXEC xp_cmdshell 'whoami'"))
	wantErrs(t, sales, []int32{916}, asSanity("EXEC master..xp_cmdshell 'whoami'"))
	r = mustRun(t, sales, asSanity("SELECT name, password_hash FROM sys.sql_logins"))
	if len(r.rows) != 1 || r.rows[0][0] != "sa" || r.rows[0][1] != nil {
		t.Errorf("sys.sql_logins as the user: %v, want sa's row without hash", r.rows)
	}
	// The function: as the user, its xp_cmdshell is refused.
	mustRun(t, sales, "GRANT EXECUTE ON OBJECT::[dbo].[fn_IntegrityOK] TO [sanity]")
	wantErrs(t, sales, []int32{916}, asSanity("SELECT dbo.fn_IntegrityOK()"))
	if runs := e.in.XPCmdShellRuns(); len(runs) != 0 {
		t.Errorf("xp_cmdshell ran: %v", runs)
	}
	// As sysadmin the same call runs the command and reads a hash: what
	// the sanity checks must never do.
	if got := scalar(t, sales, "SELECT dbo.fn_IntegrityOK()"); got != "sa" {
		t.Errorf("the function as sysadmin: %v, want a login with a visible hash", got)
	}
	if runs := e.in.XPCmdShellRuns(); len(runs) != 1 || runs[0].Login != "sa" || runs[0].Command != "whoami" {
		t.Errorf("xp_cmdshell as sysadmin: %v", runs)
	}
}

// db_datareader is needed to read, EXECUTE to call a function: 229 each.
func TestSandboxPermissions(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	sales := e.open(t, "Sales")
	mustRun(t, sales, "CREATE USER [sanity] WITHOUT LOGIN")
	mustRun(t, sales, "CREATE FUNCTION dbo.fn_Orders() RETURNS bigint AS BEGIN RETURN (SELECT COUNT_BIG(*) FROM dbo.Orders) END")
	r := wantErrs(t, sales, []int32{229}, asSanity("SELECT COUNT_BIG(*) FROM dbo.Orders"))
	if !strings.Contains(r.errs[0].Message, "The SELECT permission was denied on the object 'Orders'") {
		t.Errorf("229: %s", r.errs[0].Message)
	}
	r = wantErrs(t, sales, []int32{229}, asSanity("SELECT dbo.fn_Orders()"))
	if !strings.Contains(r.errs[0].Message, "The EXECUTE permission was denied on the object 'fn_Orders', database 'Sales', schema 'dbo'") {
		t.Errorf("229: %s", r.errs[0].Message)
	}
	mustRun(t, sales, "GRANT EXECUTE ON [dbo].[fn_Orders] TO [sanity]")
	// The function reads dbo.Orders through its ownership chain: no
	// SELECT needed.
	if got := scalar(t, sales, asSanity("SELECT dbo.fn_Orders()")); asInt(got) <= 0 {
		t.Errorf("fn_Orders as the user: %v", got)
	}
	wantErrs(t, sales, []int32{15023}, "CREATE USER [sanity] WITHOUT LOGIN")
	wantErrs(t, sales, []int32{15517}, "EXECUTE AS USER = N'nobody'")
	if got := scalar(t, sales, "SELECT DATABASE_PRINCIPAL_ID(N'sanity')"); got == nil {
		t.Error("DATABASE_PRINCIPAL_ID of the user is NULL")
	}
	mustRun(t, sales, "DROP USER [sanity]")
	if got := scalar(t, sales, "SELECT DATABASE_PRINCIPAL_ID(N'sanity')"); got != nil {
		t.Errorf("DATABASE_PRINCIPAL_ID after DROP USER: %v", got)
	}
	wantErrs(t, sales, []int32{15151}, "DROP USER [sanity]")
	mustRun(t, sales, "DROP USER IF EXISTS [sanity]")
}

// EXECUTE AS lasts across batches of the session, until REVERT or a
// connection reset (a pooled connection taken again).
func TestExecuteAsLastsUntilRevertOrReset(t *testing.T) {
	e, sales := sandboxEnv(t)
	_ = e
	ctx := testCtx(t)
	sales.SetMaxOpenConns(1)
	c, err := sales.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	user := func() string {
		t.Helper()
		var u string
		if err := c.QueryRowContext(ctx, "SELECT USER_NAME()").Scan(&u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	if _, err := c.ExecContext(ctx, "EXECUTE AS USER = N'sanity'"); err != nil {
		t.Fatal(err)
	}
	if u := user(); u != "sanity" {
		t.Errorf("next batch runs as %q, want sanity", u)
	}
	if _, err := c.ExecContext(ctx, "REVERT"); err != nil {
		t.Fatal(err)
	}
	if u := user(); u != "dbo" {
		t.Errorf("after REVERT: %q", u)
	}
	if _, err := c.ExecContext(ctx, "EXECUTE AS USER = N'sanity'"); err != nil {
		t.Fatal(err)
	}
	c.Close() // back to the pool: the next use resets the session
	var u string
	if err := sales.QueryRowContext(ctx, "SELECT USER_NAME()").Scan(&u); err != nil || u != "dbo" {
		t.Errorf("after a reset: %q, %v; want dbo", u, err)
	}
}

// A module WITH EXECUTE AS OWNER runs as dbo, which a database restored on
// another instance maps to a login only when one there has the owner's
// SID: else 15517. A login created there WITH that SID fixes it; even
// then dbo's context stays in the database (it is not TRUSTWORTHY after a
// restore).
func TestExecuteAsOwnerAfterRestoreElsewhere(t *testing.T) {
	src := newEnv(t)
	if err := src.in.SetLogin(Login{Name: "appowner", Password: pw}); err != nil {
		t.Fatal(err)
	}
	src.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20, Owner: "appowner"})
	sales := src.open(t, "Sales")
	mustRun(t, sales, "CREATE FUNCTION dbo.fn_IntegrityOK() RETURNS int WITH EXECUTE AS OWNER AS BEGIN RETURN 1 END")
	if got := scalar(t, sales, "SELECT dbo.fn_IntegrityOK()"); asInt(got) != 1 {
		t.Fatalf("on the source: %v", got)
	}
	mustRun(t, src.db, "ALTER DATABASE [Sales] SET TRUSTWORTHY ON")
	paths := stripeNames("Sales", 1)
	mustRun(t, src.db, "BACKUP DATABASE [Sales] TO "+disks(paths)+" WITH CHECKSUM, INIT, FORMAT")

	verify := src.peer(t, "verify01")
	from := disks(paths)
	mustRun(t, verify.db, "RESTORE DATABASE [Sales_verify] FROM "+from+" WITH "+movesFor(t, verify, from, "v")+", CHECKSUM, RECOVERY")
	if got := scalar(t, verify.db, "SELECT is_trustworthy_on FROM sys.databases WHERE name = N'Sales_verify'"); got != false {
		t.Errorf("is_trustworthy_on of the restored copy: %v, want false", got)
	}
	copyDB := verify.open(t, "Sales_verify")
	r := wantErrs(t, copyDB, []int32{15517}, "SELECT dbo.fn_IntegrityOK()")
	if !strings.Contains(r.errs[0].Message, `the principal "dbo" does not exist`) {
		t.Errorf("15517: %s", r.errs[0].Message)
	}
	// A login of the same name is another SID: still orphaned.
	if err := verify.in.SetLogin(Login{Name: "appowner", Password: pw}); err != nil {
		t.Fatal(err)
	}
	wantErrs(t, copyDB, []int32{15517}, "SELECT dbo.fn_IntegrityOK()")
	sid, _ := src.in.LoginSID("appowner")
	if err := verify.in.SetLogin(Login{Name: "appowner", Password: pw, SID: sid}); err != nil {
		t.Fatal(err)
	}
	if got := scalar(t, copyDB, "SELECT dbo.fn_IntegrityOK()"); asInt(got) != 1 {
		t.Errorf("with the owner's SID: %v", got)
	}
	// TRUSTWORTHY needs sysadmin, even of the copy's owner.
	if err := verify.in.SetLogin(Login{Name: "restorer", Password: pw, Server: []string{"CREATE ANY DATABASE"}}); err != nil {
		t.Fatal(err)
	}
	restorer := verify.openAs(t, "restorer", pw, "master")
	mustRun(t, restorer, "RESTORE DATABASE [Mine] FROM "+from+" WITH "+movesFor(t, verify, from, "m"))
	wantErrs(t, restorer, []int32{15247, 5069}, "ALTER DATABASE [Mine] SET TRUSTWORTHY ON")
}

// RESTORE keeps the source's Service Broker identifier with delivery off;
// NEW_BROKER gives the copy an identifier of its own.
func TestRestoreServiceBroker(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20, BrokerEnabled: true, PageVerify: "TORN_PAGE_DETECTION"})
	paths := stripeNames("Sales", 1)
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+disks(paths)+" WITH INIT, FORMAT")
	from := disks(paths)
	broker := func(db string) (bool, string, string) {
		t.Helper()
		r := mustRun(t, e.db, "SELECT is_broker_enabled, service_broker_guid, page_verify_option_desc FROM sys.databases WHERE name = "+ql(db))
		if len(r.rows) != 1 {
			t.Fatalf("%s: %v", db, r.rows)
		}
		return r.rows[0][0] == true, fmt.Sprint(r.rows[0][1]), fmt.Sprint(r.rows[0][2])
	}
	on, guid, verify := broker("Sales")
	if !on || verify != "TORN_PAGE_DETECTION" {
		t.Fatalf("source: broker %v, page_verify %s", on, verify)
	}
	mustRun(t, e.db, "RESTORE DATABASE [Plain] FROM "+from+" WITH "+movesFor(t, e, from, "p"))
	if on, g, v := broker("Plain"); on || g != guid || v != "TORN_PAGE_DETECTION" {
		t.Errorf("restored without broker option: enabled %v, guid %s (source %s), page_verify %s", on, g, guid, v)
	}
	mustRun(t, e.db, "RESTORE DATABASE [Copy] FROM "+from+" WITH "+movesFor(t, e, from, "c")+", NEW_BROKER")
	if on, g, _ := broker("Copy"); !on || g == guid {
		t.Errorf("restored WITH NEW_BROKER: enabled %v, guid %s, want a new one (source %s)", on, g, guid)
	}
	wantErrs(t, e.db, []int32{3031}, "RESTORE DATABASE [X] FROM "+from+" WITH NEW_BROKER, ENABLE_BROKER")
	mustRun(t, e.db, "ALTER DATABASE [Copy] SET PAGE_VERIFY CHECKSUM")
	if _, _, v := broker("Copy"); v != "CHECKSUM" {
		t.Errorf("after SET PAGE_VERIFY CHECKSUM: %s", v)
	}
}

// A data file the disk returns damaged fails the BACKUP with 3203 naming
// that file and the OS error; FailQueries answers a batch with the error
// given.
func TestDataFileReadErrorAndQueryFault(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	if err := e.in.SetDataFileReadError("Sales", 1, 23); err != nil {
		t.Fatal(err)
	}
	r := wantErrs(t, e.db, []int32{3203, 3013}, "BACKUP DATABASE [Sales] TO "+disks(stripeNames("Sales", 1))+" WITH CHECKSUM, INIT, FORMAT")
	files, _ := e.in.DatabaseFiles("Sales")
	if m := r.errs[0].Message; !strings.Contains(m, "23(Data error (cyclic redundancy check).)") || strings.Contains(m, "bak01") {
		t.Errorf("3203: %s (files %v)", m, files)
	}
	_ = e.in.SetDataFileReadError("Sales", 1, 0)
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+disks(stripeNames("Sales", 1))+" WITH CHECKSUM, INIT, FORMAT")

	const clr = `Execution of user code in the .NET Framework is disabled. Enable "clr enabled" configuration option.`
	e.in.FailQueries("dbo.fn_Clr", 6263, 16, clr)
	r = wantErrs(t, e.db, []int32{6263}, "SELECT dbo.fn_Clr()")
	if r.errs[0].Message != clr {
		t.Errorf("6263: %s", r.errs[0].Message)
	}
	e.in.FailQueries("dbo.fn_Clr", 0, 0, "")
	wantErrs(t, e.db, []int32{4121}, "SELECT dbo.fn_Clr()")
}

// msdb's Agent tables: sysadmin reads them; a login without SELECT in
// msdb gets 229.
func TestAgentJobs(t *testing.T) {
	e := newEnv(t)
	if err := e.in.AddAgentJob("DatabaseIntegrityCheck - USER_DATABASES", AgentJobStep{Name: "check", Subsystem: "CmdExec",
		Command: `sqlcmd -Q "EXECUTE dbo.DatabaseIntegrityCheck @Databases = 'USER_DATABASES'"`}); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, e.db, "SELECT j.name, s.command FROM msdb.dbo.sysjobs AS j JOIN msdb.dbo.sysjobsteps AS s ON s.job_id = j.job_id")
	if len(r.rows) != 1 || !strings.Contains(fmt.Sprint(r.rows[0][1]), "USER_DATABASES") {
		t.Errorf("jobs: %v", r.rows)
	}
	if err := e.in.SetLogin(Login{Name: "plain", Password: pw}); err != nil {
		t.Fatal(err)
	}
	wantErrs(t, e.openAs(t, "plain", pw, "master"), []int32{229}, "SELECT command FROM msdb.dbo.sysjobsteps")
}

// READ_ONLY is the database's own option: a restored copy of a read-only
// database is read-only, refuses a new user (3906), and its owner may make
// it writable.
func TestRestoredCopyKeepsReadOnly(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Archive", Size: 2 << 20})
	mustRun(t, e.db, "ALTER DATABASE [Archive] SET READ_ONLY")
	paths := stripeNames("Archive", 1)
	mustRun(t, e.db, "BACKUP DATABASE [Archive] TO "+disks(paths)+" WITH COPY_ONLY, INIT, FORMAT")
	from := disks(paths)
	mustRun(t, e.db, "RESTORE DATABASE [Archive_copy] FROM "+from+" WITH "+movesFor(t, e, from, "a"))
	if got := scalar(t, e.db, "SELECT is_read_only FROM sys.databases WHERE name = N'Archive_copy'"); got != true {
		t.Fatalf("is_read_only of the copy: %v", got)
	}
	cp := e.open(t, "Archive_copy")
	wantErrs(t, cp, []int32{3906}, "CREATE USER [sanity] WITHOUT LOGIN")
	mustRun(t, cp, "ALTER DATABASE [Archive_copy] SET READ_WRITE WITH ROLLBACK IMMEDIATE")
	mustRun(t, cp, "CREATE USER [sanity] WITHOUT LOGIN")
}

// CREATE FUNCTION must be the first statement of its batch (111).
func TestCreateFunctionFirstInBatch(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	wantErrs(t, e.open(t, "Sales"), []int32{111}, "SELECT 1; CREATE FUNCTION dbo.f() RETURNS int AS BEGIN RETURN 1 END")
}
