package sqlsim

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/golang-sql/sqlexp"
	mssql "github.com/microsoft/go-mssqldb"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// loginErrors connects and returns every error of the failed login.
func loginErrors(t *testing.T, db *sql.DB) []mssql.Error {
	t.Helper()
	err := db.PingContext(testCtx(t))
	var me mssql.Error
	if !errors.As(err, &me) {
		t.Fatalf("login: %v, want SQL errors", err)
	}
	if len(me.All) == 0 {
		return []mssql.Error{me}
	}
	return me.All
}

func numsAndClasses(es []mssql.Error) (nums []int32, classes []uint8) {
	for _, e := range es {
		nums, classes = append(nums, e.Number), append(classes, e.Class)
	}
	return nums, classes
}

// TestLoginDatabaseUnavailable: a login whose requested database is
// missing, RESTORING or OFFLINE gets 4060 (class 11) then 18456 (class 14);
// one whose default database is unavailable gets 4064 then 18456. The
// driver sees both errors.
func TestLoginDatabaseUnavailable(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Principals = []Login{
			{Name: "gone", Password: pw, DefaultDatabase: "Gone"},
			{Name: "half", Password: pw, DefaultDatabase: "Half", Databases: map[string][]string{"Half": {"db_owner"}}},
			{Name: "off", Password: pw, DefaultDatabase: "Off", Databases: map[string][]string{"Off": {"db_owner"}}},
			{Name: "nouser", Password: pw, DefaultDatabase: "Off"},
			{Name: "fine", Password: pw, DefaultDatabase: "Off", Databases: map[string][]string{"Off": nil}},
		}
	})
	e.create(t, DatabaseSpec{Name: "Off", Size: 2 << 20})
	e.create(t, DatabaseSpec{Name: "Src", Size: 4 << 20})
	// Half: a RESTORE cut short (its client gone) leaves it RESTORING.
	set := disks(stripeNames("Src", 1))
	mustRun(t, e.db, "BACKUP DATABASE [Src] TO "+set+" WITH INIT, FORMAT")
	e.in.SetThrottle(4 << 20)
	if err := e.in.DropConnectionAt(OpRestore, 30); err != nil {
		t.Fatal(err)
	}
	e.db.ExecContext(testCtx(t), "RESTORE DATABASE [Half] FROM "+set+" WITH "+movesFor(t, e, set, "h")+", STATS = 10") // stops at its next STATS message
	e.in.SetThrottle(0)
	waitFor(t, func() bool {
		got := statementsOf(e.in, "RESTORE DATABASE")
		return len(got) > 0 && got[len(got)-1].Outcome != "running"
	})

	// Off is usable until it is taken offline.
	mustRun(t, e.openAs(t, "fine", pw, ""), "SELECT DB_NAME()")
	mustRun(t, e.db, "ALTER DATABASE [Off] SET OFFLINE WITH ROLLBACK IMMEDIATE")
	if r := mustRun(t, e.db, "SELECT state_desc, CAST(DATABASEPROPERTYEX('Off', 'Status') AS nvarchar(20)) FROM sys.databases WHERE name = 'Off'"); r.rows[0][0] != "OFFLINE" || r.rows[0][1] != "OFFLINE" {
		t.Fatalf("offline database: %v", r.rows)
	}
	wantErrs(t, e.db, []int32{942}, "USE [Off]")
	wantErrs(t, e.db, []int32{942, 3013}, "BACKUP DATABASE [Off] TO "+disks(stripeNames("Off", 1))+" WITH INIT, FORMAT")

	for _, c := range []struct {
		user, db string
		first    int32
	}{
		{"gone", "", 4064}, {"half", "", 4064}, {"off", "", 4064}, {"nouser", "", 4064},
		{"sa", "Gone", 4060}, {"sa", "Half", 4060}, {"sa", "Off", 4060},
	} {
		pass := pw
		if c.user == "sa" {
			pass = testPass
		}
		nums, classes := numsAndClasses(loginErrors(t, e.openAs(t, c.user, pass, c.db)))
		if !slices.Equal(nums, []int32{c.first, 18456}) || !slices.Equal(classes, []uint8{11, 14}) {
			t.Errorf("%s into %q: errors %v classes %v, want [%d 18456] [11 14]", c.user, c.db, nums, classes, c.first)
		}
	}
	es := loginErrors(t, e.openAs(t, "sa", testPass, "Gone"))
	if es[0].Message != `Cannot open database "Gone" requested by the login. The login failed.` || es[1].Message != "Login failed for user 'sa'." {
		t.Errorf("texts: %q / %q", es[0].Message, es[1].Message)
	}
	// A wrong password is 18456 alone.
	if nums, _ := numsAndClasses(loginErrors(t, e.openAs(t, "sa", "wrong", ""))); !slices.Equal(nums, []int32{18456}) {
		t.Errorf("wrong password: %v", nums)
	}
	// Back online: the same logins get in.
	mustRun(t, e.db, "ALTER DATABASE [Off] SET ONLINE")
	if got := scalar(t, e.openAs(t, "off", pw, ""), "SELECT DB_NAME()"); got != "Off" {
		t.Errorf("default database after SET ONLINE: %v", got)
	}
}

// englishPhrases are what a product parsing English text would look for.
var englishPhrases = []string{"percent processed", "successfully processed", "pages in", "seconds", "Login failed",
	"is terminating abnormally", "Cannot open backup device", "Operating system error", "Write on", "Read on"}

// TestMessageLanguages: a login whose default language is Deutsch or
// Français gets the messages the product reads translated (numbers
// unchanged); SET LANGUAGE switches the session; @@LANGUAGE reports it;
// a connection reset goes back to the login's language.
func TestMessageLanguages(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Principals = []Login{
			{Name: "hans", Password: pw, Sysadmin: true, DefaultLanguage: "Deutsch"},
			{Name: "marie", Password: pw, Sysadmin: true, DefaultLanguage: "Français"},
		}
	})
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20})
	backup := func(name string) string {
		return "BACKUP DATABASE [Sales] TO " + disks(stripeNames(name, 2)) + " WITH INIT, FORMAT, STATS = 25"
	}
	noEnglish := func(who string, msgs []mssql.Error) {
		t.Helper()
		for _, m := range msgs {
			for _, p := range englishPhrases {
				if strings.Contains(m.Message, p) {
					t.Errorf("%s: message %d %q contains %q", who, m.Number, m.Message, p)
				}
			}
		}
	}
	byNum := func(msgs []mssql.Error, n int32) string {
		for _, m := range msgs {
			if m.Number == n {
				return m.Message
			}
		}
		t.Fatalf("no message %d in %v", n, msgs)
		return ""
	}

	hans := e.openAs(t, "hans", pw, "")
	hans.SetMaxOpenConns(1)
	if got := scalar(t, hans, "SELECT @@LANGUAGE"); got != "Deutsch" {
		t.Fatalf("@@LANGUAGE of hans: %v", got)
	}
	r := mustRun(t, hans, backup("de"))
	if want := []int32{3211, 3211, 3211, 3211}; !slices.Equal(slices.DeleteFunc(r.infoNums(), func(n int32) bool { return n != 3211 }), want) {
		t.Fatalf("progress numbers: %v", r.infoNums())
	}
	if got := byNum(r.infos, 3211); got != "25 Prozent verarbeitet." {
		t.Errorf("3211: %q", got)
	}
	if got := byNum(r.infos, 3014); !strings.HasPrefix(got, "BACKUP DATABASE hat ") || !strings.Contains(got, "Sekunden") {
		t.Errorf("3014: %q", got)
	}
	if got := byNum(r.infos, 4035); !strings.Contains(got, "Seiten verarbeitet") {
		t.Errorf("4035: %q", got)
	}
	noEnglish("hans BACKUP", r.infos)
	r = wantErrs(t, hans, []int32{3201, 3013}, `BACKUP DATABASE [Sales] TO DISK = '\\nohost\share\x.bak' WITH INIT, FORMAT`)
	if !strings.Contains(r.errs[0].Message, "Betriebssystemfehler 53(Der Netzwerkpfad wurde nicht gefunden.)") ||
		r.errs[1].Message != "BACKUP DATABASE wird fehlerbedingt beendet." {
		t.Errorf("3201/3013: %q / %q", r.errs[0].Message, r.errs[1].Message)
	}
	noEnglish("hans 3201", r.errs)
	e.in.SetShareQuota(`\\bak01\backup`, 64<<10)
	r = mustFail(t, hans, 3013, backup("full"))
	noEnglish("hans 3202", r.errs)
	if !strings.HasPrefix(byNum(r.errs, 3202), "Fehler beim Schreiben auf") {
		t.Errorf("3202: %q", byNum(r.errs, 3202))
	}
	e.in.SetShareQuota(`\\bak01\backup`, 0)
	if es := loginErrors(t, e.openAs(t, "hans", "wrong", "")); es[0].Number != 18456 || es[0].Message != "Fehler bei der Anmeldung für den Benutzer 'hans'." {
		t.Errorf("18456 for hans: %d %q", es[0].Number, es[0].Message)
	}

	// SET LANGUAGE switches the session; a reset (the pool's next use)
	// returns to the login's language, as sp_reset_connection does.
	conn, err := hans.Conn(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var lang string
	if err := conn.QueryRowContext(testCtx(t), "SET LANGUAGE us_english; SELECT @@LANGUAGE").Scan(&lang); err != nil || lang != "us_english" {
		t.Fatalf("SET LANGUAGE us_english: %q %v", lang, err)
	}
	if err := conn.QueryRowContext(testCtx(t), "SELECT @@LANGUAGE").Scan(&lang); err != nil || lang != "us_english" {
		t.Fatalf("language kept on the session: %q %v", lang, err)
	}
	conn.Close()
	r = mustRun(t, hans, "SET LANGUAGE us_english; "+backup("en"))
	if got := byNum(r.infos, 3211); got != "25 percent processed." {
		t.Errorf("3211 after SET LANGUAGE us_english: %q", got)
	}
	if got := byNum(r.infos, 5703); got != "Changed language setting to us_english." {
		t.Errorf("5703: %q", got)
	}
	if got := scalar(t, hans, "SELECT @@LANGUAGE"); got != "Deutsch" {
		t.Errorf("after a connection reset: %v, want Deutsch", got)
	}
	r = mustRun(t, hans, "SET LANGUAGE Français; "+backup("fr"))
	if got := byNum(r.infos, 3211); got != "25 pour cent traités." {
		t.Errorf("3211 after SET LANGUAGE Français: %q", got)
	}
	if got := byNum(r.infos, 5703); got != "Le paramètre de langue est passé à Français." {
		t.Errorf("5703 in French: %q", got)
	}
	wantErrs(t, hans, []int32{2154}, "SET LANGUAGE Klingon")

	// Français by default: RESTORE's summary too.
	marie := e.openAs(t, "marie", pw, "")
	set := disks(stripeNames("de", 2))
	r = mustRun(t, marie, "RESTORE DATABASE [Sales_fr] FROM "+set+" WITH "+movesFor(t, e, set, "fr")+", STATS = 50")
	if got := byNum(r.infos, 3014); !strings.HasPrefix(got, "RESTORE DATABASE a traité avec succès ") {
		t.Errorf("3014 in French: %q", got)
	}
	noEnglish("marie RESTORE", r.infos)
	if got := scalar(t, marie, "SELECT @@LANGID"); asInt(got) != 2 {
		t.Errorf("@@LANGID of marie: %v", got)
	}
	// us_english logins are untouched.
	if got := byNum(mustRun(t, e.db, backup("sa")).infos, 3211); got != "25 percent processed." {
		t.Errorf("sa: %q", got)
	}
}

// TestLocalizeTable: every translated message keeps its number and class,
// drops the English phrases, and keeps its arguments.
func TestLocalizeTable(t *testing.T) {
	msgs := []*tds.Error{
		sqlErr(3211, 0, "40 percent processed."),
		sqlErr(3014, 0, "BACKUP DATABASE successfully processed 1234 pages in 0.512 seconds (18.828 MB/sec)."),
		sqlErr(4035, 0, "Processed 1234 pages for database 'Sales', file 'Sales_2' on file 1."),
		sqlErr(3013, 16, "RESTORE DATABASE is terminating abnormally."),
		sqlErr(3201, 16, "Cannot open backup device '\\\\bak01\\backup\\x.bak'. Operating system error 3(The system cannot find the path specified.)."),
		sqlErr(3202, 16, `Write on "\\bak01\backup\x.bak" failed: 64(The specified network name is no longer available.)`),
		sqlErr(3203, 16, `Read on "\\bak01\backup\x.bak" failed: 38(Reached the end of the file.)`),
		sqlErr(18456, 14, "Login failed for user 'hans'."),
	}
	for _, l := range []language{deutsch, francais} {
		for _, m := range msgs {
			got := localize(l, m)
			if got.Number != m.Number || got.Class != m.Class || got.Message == m.Message {
				t.Errorf("%s %d: %+v", l.name, m.Number, got)
			}
			for _, p := range englishPhrases {
				if strings.Contains(got.Message, p) {
					t.Errorf("%s %d: %q contains %q", l.name, m.Number, got.Message, p)
				}
			}
			for _, arg := range []string{"1234", "Sales_2", `\\bak01\backup\x.bak`, "hans", "64(", "38("} {
				if strings.Contains(m.Message, arg) && !strings.Contains(got.Message, arg) {
					t.Errorf("%s %d: %q lost %q", l.name, m.Number, got.Message, arg)
				}
			}
		}
	}
	if m := sqlErr(3211, 0, "10 percent processed."); localize(usEnglish, m) != m {
		t.Error("us_english changed a message")
	}
}

// TestFatalErrorClosesConnection: an error of severity 20 or more ends
// the session after it is sent; the client has the progress messages and
// the error that came before the close.
func TestFatalErrorClosesConnection(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20})
	if err := e.in.FatalErrorAt(OpBackup, 45, 823, 24); err != nil {
		t.Fatal(err)
	}
	e.in.SetThrottle(4 << 20)
	ctx := testCtx(t)
	conn, err := e.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var spid int64
	if err := conn.QueryRowContext(ctx, "SELECT @@SPID").Scan(&spid); err != nil {
		t.Fatal(err)
	}
	r, err := runOn(ctx, conn, "BACKUP DATABASE [Sales] TO "+disks(stripeNames("Sales", 2))+" WITH INIT, FORMAT, STATS = 10, MAXTRANSFERSIZE = 65536")
	e.in.SetThrottle(0)
	if err != nil {
		t.Fatalf("the driver lost what was sent before the close: %v", err)
	}
	if got := r.infoNums(); len(got) < 3 || slices.ContainsFunc(got, func(n int32) bool { return n != 3211 }) {
		t.Fatalf("progress before the fatal error: %v %v / %v", got, r.infos, r.errs)
	}
	i := slices.IndexFunc(r.errs, func(m mssql.Error) bool { return m.Number == 823 })
	if i < 0 || r.errs[i].Class != 24 {
		t.Fatalf("errors %v, want 823 class 24", r.errs)
	}
	// The session is gone: the server dropped it, the connection is dead.
	waitFor(t, func() bool {
		e.in.mu.Lock()
		defer e.in.mu.Unlock()
		_, open := e.in.sessions[uint16(spid)]
		return !open
	})
	if err := conn.PingContext(ctx); err == nil {
		t.Fatal("the connection still answers after a severity 24 error")
	}
	mustRun(t, e.db, "SELECT 1") // the server itself runs on
	if err := e.in.FatalErrorAt(OpBackup, 10, 823, 16); err == nil {
		t.Fatal("a severity 16 fatal error was accepted")
	}
	e.in.FatalErrorAt(OpCheckDB, 0, 9001, 21)
	e.in.DisarmFatalError("")
	mustRun(t, e.db, "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS")
}

// runOn is run on one pinned connection.
func runOn(ctx context.Context, conn *sql.Conn, query string) (*result, error) {
	var retmsg sqlexp.ReturnMessage
	rows, err := conn.QueryContext(ctx, query, &retmsg)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	r := &result{}
	for {
		switch m := retmsg.Message(ctx).(type) {
		case sqlexp.MsgNotice:
			if me, ok := m.Message.(mssql.Error); ok {
				r.infos = append(r.infos, me)
			}
		case sqlexp.MsgError:
			var me mssql.Error
			if !errors.As(m.Error, &me) {
				return r, m.Error
			}
			r.errs = append(r.errs, me)
		case sqlexp.MsgNext:
			for rows.Next() {
			}
		case sqlexp.MsgNextResultSet:
			if !rows.NextResultSet() {
				return r, rows.Err()
			}
		case nil:
			return r, ctx.Err()
		}
	}
}
