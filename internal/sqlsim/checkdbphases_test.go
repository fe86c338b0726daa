package sqlsim

import (
	"slices"
	"testing"
	"time"
)

// wallNow is the wall clock of zone now, labelled UTC as the driver labels a
// datetime.
func wallNow(zone *time.Location) time.Time {
	l := time.Now().In(zone)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// TestLastGoodCheckDBTravelsWithTheBackup: LastGoodCheckDbTime is a
// datetime on the clock of the server whose CHECKDB set it. BACKUP carries
// it and RESTORE gives it to the copy, so a copy restored on a server in
// another zone reports its source's value, on the source's clock, until a
// CHECKDB of the copy ends clean there.
func TestLastGoodCheckDBTravelsWithTheBackup(t *testing.T) {
	cest := time.FixedZone("UTC+2", 2*3600)
	src := newEnv(t, func(c *Config) { c.TimeZone = cest })
	src.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	verify := newEnv(t, func(c *Config) {
		c.Name = "verify01"
		c.Shares[`\\bak01\backup`] = src.shareDir
	})
	read := func(e *testEnv, db string) time.Time {
		t.Helper()
		v, ok := scalar(t, e.db, "SELECT DATABASEPROPERTYEX(N'"+db+"', 'LastGoodCheckDbTime')").(time.Time)
		if !ok {
			t.Fatalf("LastGoodCheckDbTime of %s is not a datetime", db)
		}
		return v
	}
	mustRun(t, src.db, "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS")
	onSource := read(src, "Sales")
	if d := onSource.Sub(wallNow(cest)); d > time.Second || d < -time.Minute {
		t.Fatalf("LastGoodCheckDbTime on the source %s, want the source's wall clock (UTC+2) now, %s", onSource, wallNow(cest))
	}
	from := disks(stripeNames("Sales", 2))
	mustRun(t, src.db, "BACKUP DATABASE [Sales] TO "+from+" WITH INIT, FORMAT, CHECKSUM")
	mustRun(t, verify.db, "RESTORE DATABASE [Sales_verify] FROM "+from+" WITH "+movesFor(t, verify, from, "v")+", CHECKSUM, REPLACE")
	copied := read(verify, "Sales_verify")
	if !copied.Equal(onSource) {
		t.Fatalf("LastGoodCheckDbTime of the restored copy %s, want the source's %s (its boot page)", copied, onSource)
	}
	// On the verification server's clock (UTC) that value lies about two
	// hours ahead: a comparison with its restore_date says nothing.
	if ahead := copied.Sub(wallNow(time.UTC)); ahead < time.Hour+55*time.Minute {
		t.Errorf("the copy's value is %s ahead of the verification server's clock, want the source's 2 hours", ahead)
	}
	mustRun(t, verify.db, "DBCC CHECKDB([Sales_verify]) WITH NO_INFOMSGS")
	if got := read(verify, "Sales_verify"); got.Equal(copied) || got.Sub(wallNow(time.UTC)).Abs() > time.Minute {
		t.Errorf("after a clean CHECKDB of the copy: %s, want the verification server's wall clock now (%s)", got, wallNow(time.UTC))
	}
}

// commandOf is the sys.dm_exec_requests.command of the CHECKDB running on
// another session ("" when none runs).
func commandOf(t *testing.T, e *testEnv) string {
	t.Helper()
	r := mustRun(t, e.open(t, "master"), "SELECT command FROM sys.dm_exec_requests WHERE command LIKE N'DBCC%'")
	if len(r.rows) == 0 {
		return ""
	}
	return r.rows[0][0].(string)
}

// TestCheckDBWalksItsPhases: a CHECKDB reports the documented phases in
// sys.dm_exec_requests.command, in order; HoldCheckDB keeps it in one
// (IVIEW CHECK, the last, here) until released, and KILL ends a held one.
func TestCheckDBWalksItsPhases(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 4 << 20})
	e.in.SetThrottle(1 << 20)
	var seen []string
	release, err := e.in.HoldCheckDB(PhaseIViewCheck)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	checker, ctx := e.open(t, "master"), testCtx(t)
	go func() {
		_, err := run(ctx, checker, nil, "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS")
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c := commandOf(t, e)
		if c != "" && (len(seen) == 0 || seen[len(seen)-1] != c) {
			seen = append(seen, c)
		}
		if c == PhaseIViewCheck {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !slices.Contains(seen, PhaseTableCheck) || seen[len(seen)-1] != PhaseIViewCheck {
		t.Fatalf("phases seen %v, want TABLE CHECK and then the held IVIEW CHECK", seen)
	}
	for i := 1; i < len(seen); i++ {
		if slices.Index(CheckDBPhases, seen[i]) <= slices.Index(CheckDBPhases, seen[i-1]) {
			t.Fatalf("phases seen %v, out of the documented order %v", seen, CheckDBPhases)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if c := commandOf(t, e); c != PhaseIViewCheck {
		t.Fatalf("held CHECKDB shows %q, want it still in %s", c, PhaseIViewCheck)
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("released CHECKDB: %v", err)
	}
	if got := lastCheckDB(e); got.Outcome != "ok" {
		t.Errorf("CHECKDB %+v, want ok", got)
	}

	// KILL ends a CHECKDB held in its last phase.
	e.in.SetThrottle(0)
	release, _ = e.in.HoldCheckDB(PhaseIViewCheck)
	defer release()
	go func() { _, _ = run(ctx, checker, nil, "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS") }()
	for commandOf(t, e) != PhaseIViewCheck && time.Now().Before(deadline.Add(30*time.Second)) {
		time.Sleep(5 * time.Millisecond)
	}
	mustRun(t, e.db, "KILL @p1", lastCheckDB(e).Session)
	// (The client of a killed session hears nothing more: its outcome is
	// in the statement log.)
	for end := time.Now().Add(10 * time.Second); lastCheckDB(e).Outcome == "running" && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := lastCheckDB(e); got.Outcome != "killed" {
		t.Errorf("held CHECKDB after KILL: %+v, want killed", got)
	}
}

// lastCheckDB is the newest DBCC CHECKDB in the instance's statement log.
func lastCheckDB(e *testEnv) StatementRecord {
	recs := e.in.Statements()
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Kind == "DBCC CHECKDB" {
			return recs[i]
		}
	}
	return StatementRecord{}
}

// TestCheckDBErrorFamilies: the errors CHECKDB raises on damage outside the
// page checks. A system table pre-check failure (7984-7988) ends it at once
// with that error alone; a record check (2537) is a consistency error
// counted in the 8989 summary; schema corruption (211, severity 23) ends
// the statement, here with the session kept. None of them records a clean
// CHECKDB.
func TestCheckDBErrorFamilies(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	const stmt = "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS, ALL_ERRORMSGS"
	for _, tc := range []struct {
		number int32
		want   []int32
		class  uint8
	}{
		{7984, []int32{7984}, 16}, {7985, []int32{7985}, 16}, {7986, []int32{7986}, 16}, {7987, []int32{7987}, 16},
		{7988, []int32{7988}, 16}, {2537, []int32{2537, 8989}, 16}, {211, []int32{211}, 23},
	} {
		if err := e.in.CheckDBError(tc.number); err != nil {
			t.Fatal(err)
		}
		r := wantErrs(t, e.db, tc.want, stmt)
		if r.errs[0].Class != tc.class {
			t.Errorf("%d: severity %d, want %d", tc.number, r.errs[0].Class, tc.class)
		}
		// The same connection still answers: no severity here closed it.
		if v := scalar(t, e.db, "SELECT DATABASEPROPERTYEX(N'Sales', 'LastGoodCheckDbTime')"); v.(time.Time).Year() != 1900 {
			t.Errorf("after %d: LastGoodCheckDbTime %v, want none (1900-01-01)", tc.number, v)
		}
	}
	// 211 leaves this session open: the same connection goes on.
	conn, err := e.db.Conn(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var before, after int64
	if err := conn.QueryRowContext(testCtx(t), "SELECT @@SPID").Scan(&before); err != nil {
		t.Fatal(err)
	}
	if err := e.in.CheckDBError(211); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(testCtx(t), stmt); errNumber(err) != 211 {
		t.Fatalf("CHECKDB with schema corruption on a pinned connection: %v, want error 211", err)
	}
	if err := conn.QueryRowContext(testCtx(t), "SELECT @@SPID").Scan(&after); err != nil || after != before {
		t.Fatalf("after 211: session %d (%v), want the same session %d still open", after, err, before)
	}
	mustRun(t, e.db, stmt) // one-shot: the next CHECKDB is clean
	if err := e.in.CheckDBError(8928); err == nil {
		t.Error("CheckDBError(8928) accepted; want an error naming the emulated numbers")
	}
}

// A batch's request shows its statement's command from the moment it is
// registered: a poll before the statement's own first step (the conformance
// probe checkdb-phases polls from the send) sees no BACKUP, RESTORE or
// CHECKDB as a SELECT.
func TestRequestShowsItsCommandFromItsStart(t *testing.T) {
	for sql, want := range map[string]string{
		"DBCC CHECKDB([Sales_verify]) WITH NO_INFOMSGS, ALL_ERRORMSGS /* backupcycle seq 1 */": PhaseAllocCheck,
		"BACKUP LOG [Sales] TO DISK = N'x.trn' WITH CHECKSUM":                                  "BACKUP LOG",
		"BACKUP DATABASE [Sales] TO DISK = N'x.bak' WITH CHECKSUM":                             "BACKUP DATABASE",
		"RESTORE DATABASE [S] FROM DISK = N'x.bak' WITH NORECOVERY":                            "RESTORE DATABASE",
		"RESTORE LOG [S] FROM DISK = N'x.trn' WITH NORECOVERY":                                 "RESTORE LOG",
		"SELECT 1": "SELECT",
	} {
		stmts, err := parse(sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if got := startCommand(stmts); got != want {
			t.Errorf("%s: %q, want %q", sql, got, want)
		}
	}
}
