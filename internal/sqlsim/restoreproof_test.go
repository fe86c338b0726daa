package sqlsim

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	mssql "github.com/microsoft/go-mssqldb"
)

// restoreProofQuery is the product's proof that a database was restored
// from a given backup set, exactly as written for SQL Server.
const restoreProofQuery = "SELECT TOP (1) rh.restore_history_id, rh.restore_date, bs.backup_set_uuid, bs.name " +
	"FROM msdb.dbo.restorehistory AS rh JOIN msdb.dbo.backupset AS bs ON bs.backup_set_id = rh.backup_set_id " +
	"WHERE rh.destination_database_name = @p1 AND rh.restore_type = 'D' ORDER BY rh.restore_history_id DESC"

// peer starts a second instance (the verification server) that sees e's
// backup share under the same UNC path.
func (e *testEnv) peer(t *testing.T, name string) *testEnv {
	t.Helper()
	p := newEnv(t, func(c *Config) {
		c.Name = name
		c.Shares[`\\bak01\backup`] = e.shareDir
	})
	p.shareDir = e.shareDir
	return p
}

// mediaGUID reads the backup set GUID from a stripe's media header.
func mediaGUID(t *testing.T, e *testEnv, unc string) string {
	t.Helper()
	f, err := os.Open(localStripe(e, unc))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, _, err := readMediaHeader(f)
	if err != nil {
		t.Fatal(err)
	}
	return h.BackupSetGUID.String()
}

type proofRow struct {
	id   int64
	date time.Time
	guid string
	name sql.NullString
}

func proof(t *testing.T, db *sql.DB, database string) (proofRow, bool) {
	t.Helper()
	var p proofRow
	var g mssql.UniqueIdentifier
	err := db.QueryRowContext(testCtx(t), restoreProofQuery, database).Scan(&p.id, &p.date, &g, &p.name)
	if err == sql.ErrNoRows {
		return p, false
	}
	if err != nil {
		t.Fatalf("restore proof of %s: %v", database, err)
	}
	p.guid = strings.ToLower(g.String())
	return p, true
}

// wall is t as the server's datetime columns show it: the wall clock of
// the server's zone (Config.TimeZone, UTC in these tests), labelled UTC by
// the driver.
func wall(t time.Time) time.Time {
	return t.UTC()
}

// TestRestoreProof: on the verification instance, the product's query
// (exactly as written) returns the newest full restore into a database with
// the GUID and NAME = of the backup set it came from, also when the backup
// was taken on another instance; restore_date is the start of the RESTORE.
func TestRestoreProof(t *testing.T) {
	src := newEnv(t)
	src.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	verify := src.peer(t, "verify01")
	sets := [][]string{stripeNames("Sales", 2), {`\\bak01\backup\Sales_00000002_1of1.bak`}}
	for i, s := range sets {
		mustRun(t, src.db, "BACKUP DATABASE [Sales] TO "+disks(s)+" WITH INIT, FORMAT, NAME = @p1", fmt.Sprintf("backupcycle seq %08d", i+1))
	}
	if _, ok := proof(t, verify.db, "Sales_verify"); ok {
		t.Fatal("a proof before any restore")
	}
	restore := func(set int, db string) {
		t.Helper()
		from := disks(sets[set])
		mustRun(t, verify.db, "RESTORE DATABASE "+qi(db)+" FROM "+from+" WITH "+movesFor(t, verify, from, db)+", REPLACE")
	}
	check := func(db string, set int, wantID int64) proofRow {
		t.Helper()
		p, ok := proof(t, verify.db, db)
		want := mediaGUID(t, src, sets[set][0])
		if !ok || p.id != wantID || p.guid != want || p.name.String != fmt.Sprintf("backupcycle seq %08d", set+1) {
			t.Fatalf("proof of %s = %+v, %v; want id %d, set %s named seq %d", db, p, ok, wantID, want, set+1)
		}
		return p
	}
	restore(0, "Sales_verify")
	check("Sales_verify", 0, 1)
	restore(1, "Other_copy")
	check("Sales_verify", 0, 1) // a restore into another database is not this one's
	before := time.Now()
	restore(1, "Sales_verify")
	after := time.Now()
	p := check("Sales_verify", 1, 3)
	// restore_date is the start of the restore operation; datetime keeps
	// 1/300 s.
	if p.date.Before(wall(before).Add(-4*time.Millisecond)) || p.date.After(wall(after).Add(4*time.Millisecond)) {
		t.Fatalf("restore_date %v outside the RESTORE's run [%v, %v]", p.date, wall(before), wall(after))
	}
	// The backup set row the restore wrote on verify01 carries the set's name
	// from the media, like msdb on SQL Server.
	r := mustRun(t, verify.db, "SELECT name, database_name, server_name FROM msdb.dbo.backupset ORDER BY backup_set_id")
	if len(r.rows) != 2 || r.rows[0][0] != "backupcycle seq 00000001" || r.rows[1][1] != "Sales" || r.rows[1][2] != "sql01" {
		t.Fatalf("backupset on the verification instance: %v", r.rows)
	}
	// A backup without NAME = has a NULL name.
	mustRun(t, src.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\noname.bak' WITH INIT`)
	if r := mustRun(t, src.db, "SELECT TOP (1) name FROM msdb.dbo.backupset ORDER BY backup_set_id DESC"); r.rows[0][0] != nil {
		t.Fatalf("name of a backup without NAME = %v", r.rows)
	}
	// The proof survives a restart of the verification instance.
	if err := verify.in.Restart(); err != nil {
		t.Fatal(err)
	}
	verify.db = verify.open(t, "master")
	check("Sales_verify", 1, 3)
}

// TestJoins: INNER, LEFT and CROSS joins of catalog views, msdb tables and
// user tables, with the errors SQL Server gives for ambiguous or unbound
// names.
func TestJoins(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 1 << 20})
	sales := e.open(t, "Sales")
	mustRun(t, sales, "CREATE TABLE dbo.A (id int NOT NULL, name nvarchar(20) NULL); CREATE TABLE dbo.B (a_id int NOT NULL, qty int NULL)")
	mustRun(t, sales, "INSERT INTO dbo.A VALUES (1, N'one'), (2, N'two'), (3, NULL); INSERT INTO dbo.B VALUES (1, 10), (1, 11), (3, 30), (4, 40)")
	r := mustRun(t, sales, "SELECT a.id, b.qty FROM dbo.A AS a INNER JOIN dbo.B b ON b.a_id = a.id WHERE b.qty > 10 ORDER BY b.qty")
	if fmt.Sprint(r.rows) != "[[1 11] [3 30]]" {
		t.Fatalf("inner join: %v", r.rows)
	}
	r = mustRun(t, sales, "SELECT a.id, b.qty FROM dbo.A a LEFT OUTER JOIN dbo.B AS b ON a.id = b.a_id ORDER BY a.id, b.qty")
	if fmt.Sprint(r.rows) != "[[1 10] [1 11] [2 <nil>] [3 30]]" {
		t.Fatalf("left join: %v", r.rows)
	}
	r = mustRun(t, sales, "SELECT COUNT(*) FROM dbo.A CROSS JOIN dbo.B")
	if asInt(r.rows[0][0]) != 12 {
		t.Fatalf("cross join count: %v", r.rows)
	}
	r = mustRun(t, sales, "SELECT a.*, qty FROM dbo.A a JOIN dbo.B b ON b.a_id = a.id AND a.name IS NOT NULL JOIN dbo.A a2 ON a2.id = b.a_id ORDER BY qty")
	if fmt.Sprint(r.cols) != "[id name qty]" || fmt.Sprint(r.rows) != "[[1 one 10] [1 one 11]]" {
		t.Fatalf("three-way join: %v %v", r.cols, r.rows)
	}
	// An integer key that is NULL matches nothing; LEFT keeps its row.
	mustRun(t, sales, "CREATE TABLE dbo.C (q int NULL); INSERT INTO dbo.C VALUES (NULL), (30), (10)")
	r = mustRun(t, sales, "SELECT c.q, b.a_id FROM dbo.C c LEFT JOIN dbo.B b ON b.qty = c.q ORDER BY c.q")
	if fmt.Sprint(r.rows) != "[[<nil> <nil>] [10 1] [30 3]]" {
		t.Fatalf("left join on a NULL key: %v", r.rows)
	}
	r = mustRun(t, e.db, "SELECT d.name, rh.restore_history_id FROM sys.databases d LEFT JOIN msdb.dbo.restorehistory rh ON rh.destination_database_name = d.name WHERE d.database_id > 4")
	if fmt.Sprint(r.rows) != "[[Sales <nil>]]" {
		t.Fatalf("catalog left join: %v", r.rows)
	}
	for _, tc := range []struct {
		sql  string
		want int32
	}{
		{"SELECT id FROM dbo.A a JOIN dbo.A b ON a.id = b.id", 209},
		{"SELECT x.id FROM dbo.A a JOIN dbo.B b ON b.a_id = a.id", 4104},
		{"SELECT a.id FROM dbo.A a JOIN dbo.B b ON b.nope = a.id", 207},
		{"SELECT a.id FROM dbo.A a JOIN dbo.Nope b ON b.a_id = a.id", 208},
		{"SELECT a.id FROM dbo.A a JOIN dbo.B b", 102},
		{"SELECT a.id FROM dbo.A a RIGHT JOIN dbo.B b ON b.a_id = a.id", 40515},
		{"SELECT a.id FROM dbo.A a, dbo.B b", 40515},
		{"SELECT COUNT(*) FROM dbo.Orders o JOIN dbo.A a ON a.id = 1", 40515},
	} {
		mustFail(t, sales, tc.want, tc.sql)
	}
}

// TestCreateDateAndState: sys.databases says RESTORING while a RESTORE
// runs into a database (and after a crash cut it short), ONLINE otherwise;
// create_date is when the database was created — by CreateDatabase or by the
// RESTORE that (re)created it, which is also its restore_date (the start).
func TestCreateDateAndState(t *testing.T) {
	e := newEnv(t)
	before := time.Now()
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20})
	state := func(db string) (string, time.Time) {
		t.Helper()
		var s string
		var c time.Time
		if err := e.db.QueryRowContext(testCtx(t), "SELECT name, state_desc, create_date FROM sys.databases WHERE name = @p1", db).Scan(new(string), &s, &c); err != nil {
			t.Fatalf("sys.databases %s: %v", db, err)
		}
		return s, c
	}
	st, srcCreated := state("Sales")
	// datetime rounds to 1/300 s, either way.
	if st != "ONLINE" || srcCreated.Before(wall(before).Add(-4*time.Millisecond)) || srcCreated.After(wall(time.Now()).Add(4*time.Millisecond)) {
		t.Fatalf("created database: %s %v (created after %v)", st, srcCreated, wall(before))
	}
	from := disks(stripeNames("Sales", 2))
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+from+" WITH INIT, FORMAT, NAME = N'backupcycle seq 00000001'")
	restore := "RESTORE DATABASE [V] FROM " + from + " WITH " + movesFor(t, e, from, "v") + ", REPLACE, STATS = 10"

	e.in.SetThrottle(8 << 20) // ~1 s per stripe, so it can be seen running
	done := make(chan error, 1)
	go func() {
		_, err := run(testCtx(t), e.db, nil, restore)
		done <- err
	}()
	waitRunning(t, e.in, "RESTORE DATABASE")
	var during string
	waitFor(t, func() bool {
		r := mustRun(t, e.db, "SELECT state_desc FROM sys.databases WHERE name = @p1", "V")
		if len(r.rows) == 1 {
			during = r.rows[0][0].(string)
			return true
		}
		return false
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if during != "RESTORING" {
		t.Fatalf("state while the RESTORE ran: %s", during)
	}
	st, created := state("V")
	p, _ := proof(t, e.db, "V")
	if st != "ONLINE" || created.Sub(p.date) < -4*time.Millisecond || created.Sub(p.date) > 2*time.Second {
		t.Fatalf("restored database: %s, create_date %v, restore_date %v", st, created, p.date)
	}

	// Restored again: the database is created anew.
	time.Sleep(20 * time.Millisecond) // datetime keeps 1/300 s: make the two creations distinguishable
	e.in.CrashAt(OpRestore, 50)
	if _, err := run(testCtx(t), e.db, nil, restore); err == nil {
		t.Fatal("restore through a crash succeeded")
	}
	if err := e.in.Start(); err != nil {
		t.Fatal(err)
	}
	e.in.SetThrottle(0)
	e.db = e.open(t, "master")
	st, again := state("V")
	if st != "RESTORING" || !again.After(created) {
		t.Fatalf("after a crash mid-RESTORE: %s, create_date %v (first restore created it at %v)", st, again, created)
	}
	mustRun(t, e.db, restore)
	st, final := state("V")
	if p2, _ := proof(t, e.db, "V"); st != "ONLINE" || p2.id != 2 || final.Sub(p2.date) < -4*time.Millisecond || final.Sub(p2.date) > 2*time.Second {
		t.Fatalf("after the second restore: %s, create_date %v, proof %+v", st, final, p2)
	}
	// The source was not touched by any of it.
	if st, c := state("Sales"); st != "ONLINE" || !c.Equal(srcCreated) {
		t.Fatalf("source after the restores: %s, create_date %v (was %v)", st, c, srcCreated)
	}
}

// TestRestoreOverAnotherDatabase: without REPLACE, RESTORE refuses a
// database of another family (3154, whatever the names) and an online one
// of the same family (3159, the tail of the log); nothing is changed. With
// REPLACE it overwrites.
func TestRestoreOverAnotherDatabase(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	e.create(t, DatabaseSpec{Name: "Other", Size: 1 << 20, Tables: []TableSpec{{Schema: "dbo", Name: "Mine", Rows: 7}}})
	from := disks(stripeNames("Sales", 1))
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+from+" WITH INIT, FORMAT")
	moves := movesFor(t, e, from, "o")
	r := mustFail(t, e.db, 3013, "RESTORE DATABASE [Other] FROM "+from+" WITH "+moves)
	if fmt.Sprint(r.errNums()) != "[3154 3013]" || r.errs[0].Message != "The backup set holds a backup of a database other than the existing 'Other' database." {
		t.Fatalf("restore over another database: %v %v", r.errNums(), r.errs)
	}
	if n := asInt(mustRun(t, e.db, "SELECT COUNT_BIG(*) FROM [Other].dbo.Mine").rows[0][0]); n != 7 {
		t.Fatalf("the refused restore changed Other: %d rows", n)
	}
	// A database of the same name from another instance is another family too.
	other := newEnv(t, func(c *Config) { c.Shares[`\\bak01\backup`] = e.shareDir })
	other.create(t, DatabaseSpec{Name: "Sales", Size: 1 << 20})
	r = mustFail(t, other.db, 3013, "RESTORE DATABASE [Sales] FROM "+from+" WITH "+movesFor(t, other, from, "s"))
	if r.errs[0].Number != 3154 {
		t.Fatalf("restore over a same-named database of another family: %v", r.errs)
	}
	// A copy restored under another name keeps the family: restoring it
	// again without REPLACE asks for the tail of the log, not for REPLACE
	// because of a foreign database.
	mustRun(t, e.db, "RESTORE DATABASE [Sales_copy] FROM "+from+" WITH "+movesFor(t, e, from, "c"))
	r = mustFail(t, e.db, 3013, "RESTORE DATABASE [Sales_copy] FROM "+from+" WITH "+movesFor(t, e, from, "c"))
	if r.errs[0].Number != 3159 {
		t.Fatalf("restore over the same family without REPLACE: %v", r.errs)
	}
	// REPLACE overwrites: Other now holds Sales' tables.
	mustRun(t, e.db, "RESTORE DATABASE [Other] FROM "+from+" WITH "+moves+", REPLACE")
	mustFail(t, e.db, 208, "SELECT COUNT_BIG(*) FROM [Other].dbo.Mine")
	a := mustRun(t, e.db, "SELECT COUNT_BIG(*) FROM [Other].dbo.Orders").rows[0][0]
	b := mustRun(t, e.db, "SELECT COUNT_BIG(*) FROM [Sales].dbo.Orders").rows[0][0]
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("after REPLACE: Other has %v orders, Sales %v", a, b)
	}
	// HEADERONLY's FamilyGUID is the source database's family, the same for
	// every backup of it and of its restored copies.
	mustRun(t, e.db, `BACKUP DATABASE [Sales_copy] TO DISK = N'\\bak01\backup\copy.bak' WITH INIT`)
	fam := func(from string) string {
		r := mustRun(t, e.db, "RESTORE HEADERONLY FROM "+from)
		for i, c := range r.cols {
			if c == "FamilyGUID" {
				return fmt.Sprint(r.rows[0][i])
			}
		}
		t.Fatal("no FamilyGUID")
		return ""
	}
	if fam(from) != fam(`DISK = N'\\bak01\backup\copy.bak'`) {
		t.Fatal("a restored copy's backup has another FamilyGUID than its source's")
	}
}

// TestRestoreHistoryRecords: RestoreHistory lists what msdb's restore
// history shows (id, destination, backup set GUID as a client reads it)
// with restore_date as an instant, the server's wall clock in its zone,
// and still after a restart in another zone.
func TestRestoreHistoryRecords(t *testing.T) {
	src := newEnv(t)
	src.create(t, DatabaseSpec{Name: "Sales", Size: 1 << 20})
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	verify := src.peer(t, "verify01")
	verify.restartWith(t, func(c *Config) { c.TimeZone = kolkata })
	from := disks(stripeNames("Sales", 1))
	mustRun(t, src.db, "BACKUP DATABASE [Sales] TO "+from+" WITH INIT, FORMAT")
	before := time.Now()
	mustRun(t, verify.db, "RESTORE DATABASE [Sales_verify] FROM "+from+" WITH "+movesFor(t, verify, from, "Sales_verify"))
	after := time.Now()
	p, ok := proof(t, verify.db, "Sales_verify")
	recs := verify.in.RestoreHistory()
	if !ok || len(recs) != 1 {
		t.Fatalf("restore history: %+v (proof %+v, %v), want one row", recs, p, ok)
	}
	r := recs[0]
	if r.ID != p.id || r.Database != "Sales_verify" || r.BackupSetGUID != p.guid {
		t.Errorf("record %+v, want what msdb shows: %+v", r, p)
	}
	if r.Date.Before(before.Add(-time.Millisecond)) || r.Date.After(after) {
		t.Errorf("record's date %v outside the RESTORE's run [%v, %v]", r.Date, before, after)
	}
	inZone := r.Date.In(kolkata)
	if w := time.Date(inZone.Year(), inZone.Month(), inZone.Day(), inZone.Hour(), inZone.Minute(), inZone.Second(), 0, time.UTC); p.date.Truncate(time.Second) != w {
		t.Errorf("restore_date %v, want the Kolkata wall clock of the record, %v", p.date, w)
	}
	verify.restartWith(t, func(c *Config) { c.TimeZone = nil })
	if again := verify.in.RestoreHistory(); len(again) != 1 || !again[0].Date.Equal(r.Date) {
		t.Errorf("after a restart in UTC: %+v, want the same instant %v", again, r.Date)
	}
}
