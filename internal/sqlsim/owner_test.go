package sqlsim

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"
)

// TestOwnerSID: sys.databases.owner_sid is the SID of the login that
// created the database by RESTORE (sysadmin or not), 0x01 for sa and for
// databases sa made; SUSER_SID() is the session's login's, SUSER_SID(name)
// another login's, NULL for no login.
func TestOwnerSID(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	if err := e.in.SetLogin(Login{Name: "dba", Password: testPass, Sysadmin: true}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\o.bak' WITH INIT, FORMAT`)
	ctx := testCtx(t)
	if err := e.in.RestoreDatabase(ctx, RestoreSpec{Database: "ByDBA", Stripes: []string{`\\bak01\backup\o.bak`}, Login: "dba",
		Move: map[string]string{"Sales": `R:\restore\dba.mdf`, "Sales_log": `R:\restore\dba.ldf`}}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, e.db, `RESTORE DATABASE [BySA] FROM DISK = N'\\bak01\backup\o.bak' WITH MOVE N'Sales' TO N'R:\restore\sa.mdf', MOVE N'Sales_log' TO N'R:\restore\sa.ldf'`)
	r := mustRun(t, e.db, "SELECT name, owner_sid, SUSER_SID() AS me, SUSER_SID(N'dba') AS dba, SUSER_SID(N'nobody') AS nobody FROM sys.databases ORDER BY name")
	sids := map[string][]byte{}
	var me, dba []byte
	for _, row := range r.rows {
		sids[row[0].(string)], _ = row[1].([]byte)
		me, _ = row[2].([]byte)
		dba, _ = row[3].([]byte)
		if row[4] != nil {
			t.Errorf("SUSER_SID of no login: %v, want NULL", row[4])
		}
	}
	if !bytes.Equal(me, []byte{1}) || len(dba) != 16 {
		t.Fatalf("SUSER_SID() as sa %x, SUSER_SID('dba') %x", me, dba)
	}
	for name, want := range map[string][]byte{"master": {1}, "Sales": {1}, "BySA": {1}, "ByDBA": dba} {
		if !bytes.Equal(sids[name], want) {
			t.Errorf("owner_sid of %s = %x, want %x", name, sids[name], want)
		}
	}
}

// TestSingleUserClosesOtherConnections: SET SINGLE_USER WITH ROLLBACK
// IMMEDIATE closes the connections of the other sessions in the database,
// whose next request fails; a RESTORE ... REPLACE then gets the database.
// Without it, a session in the database makes the RESTORE fail with 3101.
func TestSingleUserClosesOtherConnections(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\s.bak' WITH INIT, FORMAT`)
	restore := `RESTORE DATABASE [Copy] FROM DISK = N'\\bak01\backup\s.bak' WITH MOVE N'Sales' TO N'R:\restore\c.mdf', MOVE N'Sales_log' TO N'R:\restore\c.ldf', REPLACE`
	mustRun(t, e.db, restore)
	reader := e.open(t, "Copy")
	ctx := testCtx(t)
	conn, err := reader.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	e.db.SetMaxOpenConns(1)
	if r := mustFail(t, e.db, 3013, restore); r.errs[0].Number != 3101 {
		t.Fatalf("RESTORE over a database in use: %v, want 3101", r.errNums())
	}
	mustRun(t, e.db, "ALTER DATABASE [Copy] SET SINGLE_USER WITH ROLLBACK IMMEDIATE")
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := conn.ExecContext(qctx, "SELECT 1"); err == nil {
		t.Fatal("the reader's connection still works after SINGLE_USER WITH ROLLBACK IMMEDIATE")
	}
	mustRun(t, e.db, restore)
	r := mustRun(t, e.db, "SELECT user_access_desc FROM sys.databases WHERE name = N'Copy'")
	if fmt.Sprint(r.rows[0][0]) != "MULTI_USER" {
		t.Fatalf("user access of the restored copy: %v, want the source's MULTI_USER", r.rows)
	}
}

// TestRestoreGivesTheBackupsUserAccess: the copy has the user access the
// source had when it was backed up (a database option travels with the
// database), whatever the replaced database had.
func TestRestoreGivesTheBackupsUserAccess(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	mustRun(t, e.db, "ALTER DATABASE [Sales] SET RESTRICTED_USER WITH ROLLBACK IMMEDIATE")
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\r.bak' WITH INIT, FORMAT`)
	mustRun(t, e.db, `RESTORE DATABASE [Copy] FROM DISK = N'\\bak01\backup\r.bak' WITH MOVE N'Sales' TO N'R:\restore\r.mdf', MOVE N'Sales_log' TO N'R:\restore\r.ldf'`)
	r := mustRun(t, e.db, "SELECT user_access_desc FROM sys.databases WHERE name = N'Copy'")
	if fmt.Sprint(r.rows[0][0]) != "RESTRICTED_USER" {
		t.Fatalf("user access of the copy: %v, want RESTRICTED_USER as backed up", r.rows)
	}
}

// TestDatabaseIDsAreReused: a new database gets the lowest free
// database_id, so a newer database may have a lower id than an older one.
func TestDatabaseIDsAreReused(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"A", "B", "C"} {
		e.create(t, DatabaseSpec{Name: n, Size: 1 << 20})
	}
	id := func(name string) int64 {
		t.Helper()
		r := mustRun(t, e.db, "SELECT database_id FROM sys.databases WHERE name = @p1", name)
		if len(r.rows) != 1 {
			t.Fatalf("no database %s", name)
		}
		return asInt(r.rows[0][0])
	}
	b, c := id("B"), id("C")
	mustRun(t, e.db, "DROP DATABASE [B]")
	e.create(t, DatabaseSpec{Name: "D", Size: 1 << 20})
	if d := id("D"); d != b || d >= c {
		t.Fatalf("database created after B was dropped got id %d (B had %d, C has %d), want B's", d, b, c)
	}
}

// TestStampCreateLate: with the fault armed, the RESTORE's database is
// created minutes after its restore_date, and the instance's clock has
// moved on with it.
func TestStampCreateLate(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\l.bak' WITH INIT, FORMAT`)
	e.in.StampCreateLate(5 * time.Minute)
	mustRun(t, e.db, `RESTORE DATABASE [Late] FROM DISK = N'\\bak01\backup\l.bak' WITH MOVE N'Sales' TO N'R:\restore\l.mdf', MOVE N'Sales_log' TO N'R:\restore\l.ldf'`)
	r := mustRun(t, e.db, "SELECT d.create_date, rh.restore_date, GETDATE() FROM sys.databases AS d JOIN msdb.dbo.restorehistory AS rh ON rh.destination_database_name = d.name WHERE d.name = N'Late'")
	if len(r.rows) != 1 {
		t.Fatalf("rows %v", r.rows)
	}
	created, restored, now := r.rows[0][0].(time.Time), r.rows[0][1].(time.Time), r.rows[0][2].(time.Time)
	if created.Sub(restored) < 5*time.Minute || now.Before(created) {
		t.Fatalf("create_date %s, restore_date %s, GETDATE() %s: want the copy created 5 min after the restore began, before now", created, restored, now)
	}
}
