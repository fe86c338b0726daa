package sqlsim

import (
	"errors"
	"testing"
	"time"

	mssql "github.com/microsoft/go-mssqldb"
)

// TestDropConnectionAt: a connection lost at a chosen percent of a
// BACKUP, RESTORE or CHECKDB does not stop the statement by itself: it runs
// on, visible in sys.dm_exec_requests, until its next write to the client.
// With STATS that is its next progress message, and it ends there —
// incomplete stripes, a RESTORING database; without STATS it completes.
// The instance keeps serving throughout.
func TestDropConnectionAt(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20})
	good := disks(stripeNames("Sales", 2))
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+good+" WITH INIT, FORMAT")
	cut := []string{`\\bak01\backup\cut_1of2.bak`, `\\bak01\backup\cut_2of2.bak`}
	whole := []string{`\\bak01\backup\whole_1of2.bak`, `\\bak01\backup\whole_2of2.bak`}
	restore := "RESTORE DATABASE [V] FROM " + good + " WITH " + movesFor(t, e, good, "v") + ", REPLACE"
	e.in.SetThrottle(4 << 20) // each takes about two seconds: the drop lands mid-way
	for i, tc := range []struct {
		op, stmt, kind, outcome string
	}{
		{OpBackup, "BACKUP DATABASE [Sales] TO " + disks(whole) + " WITH INIT, FORMAT", "BACKUP DATABASE", "ok"},
		{OpBackup, "BACKUP DATABASE [Sales] TO " + disks(cut) + " WITH INIT, FORMAT, STATS = 10", "BACKUP DATABASE", "dropped"},
		{OpRestore, restore + ", STATS = 10", "RESTORE DATABASE", "dropped"},
		{OpCheckDB, "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS", "DBCC CHECKDB", "ok"},
	} {
		if err := e.in.DropConnectionAt(tc.op, 40); err != nil {
			t.Fatal(err)
		}
		_, err := e.db.ExecContext(testCtx(t), tc.stmt)
		var me mssql.Error
		if err == nil || errors.As(err, &me) {
			t.Fatalf("%s through a dropped connection: %v, want a connection error", tc.op, err)
		}
		if tc.outcome == "ok" {
			// The client learnt of the loss; the server did not: the
			// statement is still a request of its session.
			rec := lastOf(t, e.in, tc.kind)
			if rec.Outcome != "running" {
				t.Fatalf("%s stopped (%q) with its connection; it must run on until its next write", tc.op, rec.Outcome)
			}
			if _, _, _, ok := requestOf(t, e, rec.Session); !ok && lastOf(t, e.in, tc.kind).Outcome == "running" {
				t.Fatalf("%s: running but not in sys.dm_exec_requests", tc.op)
			}
		}
		waitFor(t, func() bool { return lastOf(t, e.in, tc.kind).Outcome != "running" })
		if got := lastOf(t, e.in, tc.kind).Outcome; got != tc.outcome {
			t.Fatalf("%s logged %q, want %s", tc.stmt, got, tc.outcome)
		}
		if n := e.in.LostConnections(); n != i+1 {
			t.Fatalf("LostConnections %d after %d fired faults", n, i+1)
		}
		// Still serving: a new connection works at once.
		mustRun(t, e.db, "SELECT 1")
	}
	e.in.SetThrottle(0)
	mustRun(t, e.db, "RESTORE VERIFYONLY FROM "+disks(whole))
	if r := mustFail(t, e.db, 3013, "RESTORE VERIFYONLY FROM "+disks(cut)); r.errs[0].Number != 3241 {
		t.Fatalf("VERIFYONLY of a backup cut at its next STATS message: %v", r.errs)
	}
	if r := mustRun(t, e.db, "SELECT state_desc FROM sys.databases WHERE name = N'V'"); r.rows[0][0] != "RESTORING" {
		t.Fatalf("database of a restore cut at its next STATS message: %v", r.rows)
	}
	mustRun(t, e.db, restore)
	mustRun(t, e.db, "DBCC CHECKDB([V]) WITH NO_INFOMSGS")

	// Armed but disarmed: nothing happens.
	e.in.DropConnectionAt(OpCheckDB, 0)
	e.in.CrashAt(OpCheckDB, 0)
	e.in.Disarm(OpCheckDB)
	mustRun(t, e.db, "DBCC CHECKDB([V]) WITH NO_INFOMSGS")
	if err := e.in.DropConnectionAt("SELECT", 10); err == nil {
		t.Fatal("DropConnectionAt accepted an unknown operation")
	}
	if err := e.in.DropConnectionAt(OpBackup, 101); err == nil {
		t.Fatal("DropConnectionAt accepted 101 %")
	}
}

// TestRefuseConnections: the next n connection attempts fail with a
// connection error (no SQL error); open connections and later attempts
// work. DropConnections cuts open connections without stopping the server.
func TestRefuseConnections(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	pinned, err := e.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	connector, err := mssql.NewConnector(e.in.DSN("sa", testPass, "master"))
	if err != nil {
		t.Fatal(err)
	}
	e.in.RefuseConnections(2)
	for i := range 3 {
		c, err := connector.Connect(ctx)
		var me mssql.Error
		switch {
		case i < 2 && (err == nil || errors.As(err, &me)):
			t.Fatalf("attempt %d: %v, want a connection error", i+1, err)
		case i == 2 && err != nil:
			t.Fatalf("attempt 3 after 2 refusals: %v", err)
		}
		if err == nil {
			c.Close()
		}
	}
	var one int
	if err := pinned.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("an open connection while others were refused: %v", err)
	}
	e.in.RefuseConnections(5)
	e.in.RefuseConnections(0)
	if c, err := connector.Connect(ctx); err != nil {
		t.Fatalf("after RefuseConnections(0): %v", err)
	} else {
		c.Close()
	}

	e.in.DropConnections()
	deadline := time.Now().Add(20 * time.Second)
	for pinned.QueryRowContext(ctx, "SELECT 1").Scan(&one) == nil { // the driver may notice on the next use
		if time.Now().After(deadline) {
			t.Fatal("a dropped connection kept answering")
		}
		time.Sleep(20 * time.Millisecond)
	}
	mustRun(t, e.open(t, "master"), "SELECT 1")
}

// TestKill: KILL <session> ends that session's running statement (here a
// WAITFOR) and closes its connection, as SQL Server does; the statement log
// says "killed". KILL of the own session or of none fails.
func TestKill(t *testing.T) {
	e := newEnv(t)
	other := e.open(t, "master")
	done := make(chan error, 1)
	go func() {
		_, err := other.ExecContext(testCtx(t), "WAITFOR DELAY '00:10:00'; SELECT 1")
		done <- err
	}()
	rec := waitRunning(t, e.in, "WAITFOR")
	mustRun(t, e.db, "KILL @p1", rec.Session)
	select {
	case err := <-done:
		var me mssql.Error
		if err == nil || errors.As(err, &me) {
			t.Fatalf("the killed session's statement returned %v, want a connection error", err)
		}
	case <-time.After(30 * time.Second): // a hang guard, not a speed check
		t.Fatal("KILL did not end the session's WAITFOR")
	}
	waitFor(t, func() bool {
		w := statementsOf(e.in, "WAITFOR")
		return w[len(w)-1].Outcome == "killed"
	})
	e.db.SetMaxOpenConns(1)
	own := asInt(mustRun(t, e.db, "SELECT @@SPID").rows[0][0])
	mustFail(t, e.db, 6104, "KILL @p1", own)
	mustFail(t, e.db, 6106, "KILL 4000")
	mustFail(t, e.db, 40515, "KILL 'D5499C66-E398-45CA-BF7E-DC9C194B48CF'")
	mustRun(t, other, "SELECT 1") // the pool opens a new connection
}
