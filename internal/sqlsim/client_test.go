package sqlsim

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// grabDialer keeps the client's TCP connections so a test can close them
// the way a killed client process does: no attention, just a closed socket.
type grabDialer struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (d *grabDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, c)
		d.mu.Unlock()
	}
	return c, err
}

func (d *grabDialer) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
}

// vanishingClient is a one-connection pool whose socket the test can close.
func vanishingClient(t *testing.T, e *testEnv) (*sql.DB, *grabDialer) {
	t.Helper()
	c, err := mssql.NewConnector(e.in.DSN("sa", testPass, "master"))
	if err != nil {
		t.Fatal(err)
	}
	d := &grabDialer{}
	c.Dialer = d
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db, d
}

// requestOf returns the sys.dm_exec_requests row (command, percent_complete,
// database_id) of session spid, ok false when it has none.
func requestOf(t *testing.T, e *testEnv, spid int) (cmd string, pct float64, dbID int64, ok bool) {
	t.Helper()
	r := mustRun(t, e.db, "SELECT command, percent_complete, database_id FROM sys.dm_exec_requests WHERE session_id = @p1", spid)
	if len(r.rows) == 0 {
		return "", 0, 0, false
	}
	return r.rows[0][0].(string), r.rows[0][1].(float64), asInt(r.rows[0][2]), true
}

// lastOf is the latest statement of kind.
func lastOf(t *testing.T, in *Instance, kind string) StatementRecord {
	t.Helper()
	s := statementsOf(in, kind)
	if len(s) == 0 {
		t.Fatalf("no %s statement logged", kind)
	}
	return s[len(s)-1]
}

// TestClientVanishes: a client whose connection closes without an attention
// (its process killed) does not stop its BACKUP/RESTORE/CHECKDB at once. The
// statement runs on, visible in sys.dm_exec_requests, until its next write:
// with STATS that is the next progress message, and the statement is rolled
// back (stripes without a trailer, a RESTORING database, outcome
// "dropped"); without STATS nothing is written until the end, so it
// completes, msdb records it, and only the reply is lost.
func TestClientVanishes(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20})
	good := disks(stripeNames("Sales", 1))
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+good+" WITH INIT, FORMAT")
	moves := movesFor(t, e, good, "v")
	e.in.SetThrottle(4 << 20) // about 2 s per statement

	// vanish starts stmt on a fresh client connection, closes its socket once
	// the statement runs, and checks the request is still served after the
	// close: it shows up in sys.dm_exec_requests with a growing percent.
	vanish := func(t *testing.T, kind, stmt string) (StatementRecord, time.Time) {
		t.Helper()
		db, d := vanishingClient(t, e)
		errc := make(chan error, 1)
		go func() {
			_, err := db.ExecContext(testCtx(t), stmt)
			errc <- err
		}()
		rec := waitRunning(t, e.in, kind)
		d.closeAll()
		closed := time.Now()
		select {
		case err := <-errc:
			var me mssql.Error
			if err == nil || errors.As(err, &me) {
				t.Fatalf("%s on a closed connection returned %v, want a connection error", kind, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the client of %s did not notice its own closed socket", kind)
		}
		var first, last float64
		seen := 0
		for time.Since(closed) < 20*time.Second {
			_, pct, _, ok := requestOf(t, e, rec.Session)
			if !ok {
				break
			}
			if seen == 0 {
				first = pct
			}
			last = pct
			seen++
			time.Sleep(50 * time.Millisecond)
		}
		if seen < 2 || last <= first {
			t.Fatalf("%s after its client vanished: seen %d times in sys.dm_exec_requests, percent %.1f -> %.1f; want it running on", kind, seen, first, last)
		}
		waitFor(t, func() bool { return lastOf(t, e.in, kind).Outcome != "running" })
		return lastOf(t, e.in, kind), closed
	}

	t.Run("backup with STATS rolls back at its next progress message", func(t *testing.T) {
		cut := `\\bak01\backup\vanish_stats.bak`
		rec, closed := vanish(t, "BACKUP DATABASE", "BACKUP DATABASE [Sales] TO DISK = "+ql(cut)+" WITH INIT, FORMAT, STATS = 50, NAME = N'vanish-stats'")
		if rec.Outcome != "dropped" {
			t.Fatalf("outcome %q, want dropped", rec.Outcome)
		}
		if ran := rec.End.Sub(closed); ran < 300*time.Millisecond {
			t.Fatalf("the backup ended %v after its client vanished; it must run on until its 50 %% message", ran)
		}
		e.in.SetThrottle(0)
		defer e.in.SetThrottle(4 << 20)
		mustFail(t, e.db, 3013, "RESTORE VERIFYONLY FROM DISK = "+ql(cut))
		if r := mustRun(t, e.db, "SELECT COUNT(*) FROM msdb.dbo.backupset WHERE name = N'vanish-stats'"); asInt(r.rows[0][0]) != 0 {
			t.Fatal("msdb records a backup that was rolled back")
		}
	})

	t.Run("backup without STATS completes", func(t *testing.T) {
		done := `\\bak01\backup\vanish_quiet.bak`
		rec, _ := vanish(t, "BACKUP DATABASE", "BACKUP DATABASE [Sales] TO DISK = "+ql(done)+" WITH INIT, FORMAT, NAME = N'vanish-quiet'")
		if rec.Outcome != "ok" {
			t.Fatalf("outcome %q, want ok (only the reply is lost)", rec.Outcome)
		}
		if r := mustRun(t, e.db, "SELECT COUNT(*) FROM msdb.dbo.backupset WHERE name = N'vanish-quiet'"); asInt(r.rows[0][0]) != 1 {
			t.Fatal("msdb has no row for the completed backup")
		}
		e.in.SetThrottle(0)
		defer e.in.SetThrottle(4 << 20)
		mustRun(t, e.db, "RESTORE VERIFYONLY FROM DISK = "+ql(done))
	})

	t.Run("restore with STATS leaves the target RESTORING", func(t *testing.T) {
		rec, _ := vanish(t, "RESTORE DATABASE", "RESTORE DATABASE [V] FROM "+good+" WITH "+moves+", REPLACE, STATS = 50")
		if rec.Outcome != "dropped" {
			t.Fatalf("outcome %q, want dropped", rec.Outcome)
		}
		if r := mustRun(t, e.db, "SELECT state_desc FROM sys.databases WHERE name = N'V'"); r.rows[0][0] != "RESTORING" {
			t.Fatalf("target after the client vanished: %v", r.rows)
		}
	})

	t.Run("restore without STATS completes", func(t *testing.T) {
		before := asInt(mustRun(t, e.db, "SELECT COUNT(*) FROM msdb.dbo.restorehistory WHERE destination_database_name = N'V'").rows[0][0])
		rec, _ := vanish(t, "RESTORE DATABASE", "RESTORE DATABASE [V] FROM "+good+" WITH "+moves+", REPLACE")
		if rec.Outcome != "ok" {
			t.Fatalf("outcome %q, want ok", rec.Outcome)
		}
		if r := mustRun(t, e.db, "SELECT state_desc FROM sys.databases WHERE name = N'V'"); r.rows[0][0] != "ONLINE" {
			t.Fatalf("target after a completed restore: %v", r.rows)
		}
		after := asInt(mustRun(t, e.db, "SELECT COUNT(*) FROM msdb.dbo.restorehistory WHERE destination_database_name = N'V'").rows[0][0])
		if after != before+1 {
			t.Fatalf("restorehistory rows for V: %d -> %d, want one more", before, after)
		}
	})

	t.Run("checkdb completes", func(t *testing.T) {
		rec, _ := vanish(t, "DBCC CHECKDB", "DBCC CHECKDB([Sales])")
		if rec.Outcome != "ok" {
			t.Fatalf("outcome %q, want ok", rec.Outcome)
		}
	})

	t.Run("DisconnectClient from the server side", func(t *testing.T) {
		db, _ := vanishingClient(t, e)
		errc := make(chan error, 1)
		go func() {
			_, err := db.ExecContext(testCtx(t), "BACKUP DATABASE [Sales] TO DISK = N'\\\\bak01\\backup\\vanish_dc.bak' WITH INIT, FORMAT, STATS = 50")
			errc <- err
		}()
		rec := waitRunning(t, e.in, "BACKUP DATABASE")
		if !e.in.DisconnectClient(rec.Session) {
			t.Fatal("DisconnectClient found no connection")
		}
		if err := <-errc; err == nil || errNumber(err) != 0 {
			t.Fatalf("client of a disconnected session: %v, want a connection error", err)
		}
		if _, _, _, ok := requestOf(t, e, rec.Session); !ok {
			t.Fatal("the backup stopped with its connection; it must run on until its next message")
		}
		waitFor(t, func() bool { return lastOf(t, e.in, "BACKUP DATABASE").Outcome == "dropped" })
		if e.in.DisconnectClient(rec.Session) {
			t.Fatal("DisconnectClient of a closed session reported a connection")
		}
	})

	t.Run("an attention stops at once", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := e.db.ExecContext(ctx, "BACKUP DATABASE [Sales] TO DISK = N'\\\\bak01\\backup\\vanish_attn.bak' WITH INIT, FORMAT")
			errc <- err
		}()
		waitRunning(t, e.in, "BACKUP DATABASE")
		cancel()
		<-errc
		// A hang guard well below the 2 s the backup needs: the attention,
		// not the end of the work, ended it.
		deadline := time.Now().Add(time.Second)
		for lastOf(t, e.in, "BACKUP DATABASE").Outcome == "running" {
			if time.Now().After(deadline) {
				t.Fatal("the backup ran on after an attention")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got := lastOf(t, e.in, "BACKUP DATABASE").Outcome; got != "cancelled" {
			t.Fatalf("outcome after an attention %q, want cancelled", got)
		}
	})
}

// TestRestoreRequestDatabaseID: sys.dm_exec_requests.database_id of a
// running RESTORE DATABASE is the session's database, not the target.
func TestRestoreRequestDatabaseID(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20})
	from := disks(stripeNames("Sales", 1))
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+from+" WITH INIT, FORMAT")
	moves := movesFor(t, e, from, "v")
	e.in.SetThrottle(4 << 20)
	other := e.open(t, "Sales")
	done := make(chan error, 1)
	go func() {
		_, err := other.ExecContext(testCtx(t), "RESTORE DATABASE [V] FROM "+from+" WITH "+moves+", REPLACE")
		done <- err
	}()
	rec := waitRunning(t, e.in, "RESTORE DATABASE")
	// The statement log shows the RESTORE a moment before the request
	// publishes its command: wait for the request, then check its database.
	var cmd string
	var dbID int64
	var ok bool
	waitFor(t, func() bool {
		cmd, _, dbID, ok = requestOf(t, e, rec.Session)
		return ok && cmd == "RESTORE DATABASE"
	})
	if dbID != 5 {
		t.Fatalf("request of the restore: %q database_id %d (found %v); want RESTORE DATABASE in Sales (5)", cmd, dbID, ok)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestSecondRestoreOfSameDatabase: a RESTORE holds its target database
// exclusively while it runs, so a second RESTORE into it (from another
// session, e.g. a retry that could not see the first) fails at once with
// 3101 + 3013 and the first completes untouched.
func TestSecondRestoreOfSameDatabase(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20})
	from := disks(stripeNames("Sales", 1))
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+from+" WITH INIT, FORMAT")
	restore := "RESTORE DATABASE [V] FROM " + from + " WITH " + movesFor(t, e, from, "v") + ", REPLACE"
	e.in.SetThrottle(4 << 20)
	other := e.open(t, "master")
	done := make(chan error, 1)
	go func() {
		_, err := other.ExecContext(testCtx(t), restore)
		done <- err
	}()
	waitRunning(t, e.in, "RESTORE DATABASE")
	wantErrs(t, e.db, []int32{3101, 3013}, restore)
	if err := <-done; err != nil {
		t.Fatalf("the first RESTORE: %v", err)
	}
	got := statementsOf(e.in, "RESTORE DATABASE")
	if len(got) != 2 || got[0].Outcome != "ok" || got[1].Outcome != "error 3013" {
		t.Fatalf("RESTORE statements %+v; want the first ok, the second refused", got)
	}
	// The log keeps the refusal's errors: 3101 says the RESTORE never
	// touched the database (the fault simulation's checker tells a refused
	// RESTORE from one that began replacing a copy by it).
	var errs tds.Errors
	if !errors.As(got[1].Error, &errs) || len(errs) != 2 || errs[0].Number != 3101 || errs[1].Number != 3013 {
		t.Fatalf("the refused RESTORE's errors %v, want 3101 and 3013", got[1].Error)
	}
	e.in.SetThrottle(0)
	mustRun(t, e.db, restore) // once it has ended, the database is free again
}
