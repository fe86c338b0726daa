package sqlsim

import (
	"context"
	"errors"
	"testing"
	"time"

	mssql "github.com/microsoft/go-mssqldb"
)

// statementsOf returns the logged statements of one kind.
func statementsOf(in *Instance, kind string) []StatementRecord {
	var out []StatementRecord
	for _, s := range in.Statements() {
		if s.Kind == kind {
			out = append(out, s)
		}
	}
	return out
}

// waitRunning waits until a statement of kind is running and returns it.
func waitRunning(t *testing.T, in *Instance, kind string) StatementRecord {
	t.Helper()
	var rec StatementRecord
	waitFor(t, func() bool {
		for _, s := range statementsOf(in, kind) {
			if s.Outcome == "running" {
				rec = s
				return true
			}
		}
		return false
	})
	return rec
}

// TestWaitforDelay: WAITFOR DELAY holds the batch, then the SELECT after it
// answers; while it waits, sys.dm_exec_requests shows it as SQL Server does
// (command WAITFOR, wait_type WAITFOR) and the SELECT has not started.
func TestWaitforDelay(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	want := asInt(mustRun(t, e.db, "SELECT COUNT_BIG(*) FROM [Sales].dbo.Orders").rows[0][0])
	sales := e.open(t, "Sales")
	type answer struct {
		n     int64
		err   error
		after time.Duration
	}
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		var n int64
		err := sales.QueryRowContext(testCtx(t), "WAITFOR DELAY '00:00:03'; SELECT COUNT_BIG(*) FROM dbo.Orders").Scan(&n)
		done <- answer{n, err, time.Since(start)}
	}()
	rec := waitRunning(t, e.in, "WAITFOR")
	if rec.Database != "Sales" {
		t.Fatalf("WAITFOR logged in database %q", rec.Database)
	}
	r := mustRun(t, e.db, "SELECT command, wait_type, status FROM sys.dm_exec_requests WHERE session_id = @p1", rec.Session)
	if len(r.rows) != 1 || r.rows[0][0] != "WAITFOR" || r.rows[0][1] != "WAITFOR" || r.rows[0][2] != "suspended" {
		t.Fatalf("the waiting request in sys.dm_exec_requests: %v", r.rows)
	}
	for _, s := range statementsOf(e.in, "SELECT") {
		if s.Session == rec.Session {
			t.Fatal("the SELECT after WAITFOR started while it still waited")
		}
	}
	a := <-done
	if a.err != nil || a.n != want {
		t.Fatalf("after WAITFOR: COUNT_BIG = %d, %v; want %d", a.n, a.err, want)
	}
	// The delay is a lower bound of the batch's duration (behaviour, not a
	// speed measurement: the batch must not answer before it elapsed).
	if a.after < 3*time.Second {
		t.Fatalf("the batch answered after %v, before its 3 s WAITFOR DELAY elapsed", a.after)
	}

	// Parameters and the other accepted forms; bad time strings fail with 148.
	mustRun(t, e.db, "WAITFOR DELAY @p1", "00:00:00.050")
	mustRun(t, e.db, "DECLARE @d varchar(12) = '00:00:00.01'; WAITFOR DELAY @d; SELECT 1")
	mustRun(t, e.db, "EXEC sys.sp_executesql N'WAITFOR DELAY ''00:00''; SELECT 1'")
	for _, bad := range []string{"abc", "25:00:00", "00:61:00", "2024-01-01 00:00:01", "00:00:01.5000", ""} {
		r := mustFail(t, e.db, 148, "WAITFOR DELAY @p1", bad)
		if r.errs[0].Message != "Incorrect time syntax in time string '"+bad+"' used with WAITFOR." {
			t.Fatalf("WAITFOR DELAY %q: %q", bad, r.errs[0].Message)
		}
	}
	mustFail(t, e.db, 102, "WAITFOR DELAY 5")
	mustFail(t, e.db, 40515, "WAITFOR (RECEIVE TOP (1) * FROM q)")
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"00:00", 0}, {"1:02", time.Hour + 2*time.Minute}, {"00:00:03", 3 * time.Second},
		{"00:00:00.5", 500 * time.Millisecond}, {"23:59:59.999", 24*time.Hour - time.Millisecond}, {" 00:01:00 ", time.Minute},
	} {
		if d, ok := parseWaitTime(tc.in); !ok || d != tc.want {
			t.Errorf("parseWaitTime(%q) = %v, %v; want %v", tc.in, d, ok, tc.want)
		}
	}
}

// TestWaitforCancel: cancelling the context (go-mssqldb sends an attention)
// ends the WAITFOR at once and the rest of the batch never runs; the
// connection stays usable. A crash ends it too; a dropped connection does
// not (it runs to its end).
func TestWaitforCancel(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 1 << 20})
	e.db.SetMaxOpenConns(1) // the same connection serves the query after the cancel
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, err := e.db.ExecContext(ctx, "WAITFOR DELAY '00:10:00'; INSERT INTO never VALUES (1)")
		done <- err
	}()
	rec := waitRunning(t, e.in, "WAITFOR")
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled WAITFOR returned %v", err)
		}
	case <-time.After(30 * time.Second): // a hang guard, not a speed check
		t.Fatal("the cancelled WAITFOR did not end")
	}
	waitFor(t, func() bool {
		w := statementsOf(e.in, "WAITFOR")
		return w[len(w)-1].Outcome == "cancelled"
	})
	if ins := statementsOf(e.in, "INSERT"); len(ins) != 0 {
		t.Fatalf("the statement after a cancelled WAITFOR ran: %+v", ins)
	}
	if r := mustRun(t, e.db, "SELECT @@SPID"); asInt(r.rows[0][0]) != int64(rec.Session) {
		t.Fatalf("after the cancel the query ran on session %v, not on the cancelled one (%d)", r.rows, rec.Session)
	}

	// A dropped connection does not end it (it writes nothing to its
	// client until its end, see client.go); the instance keeps serving.
	e.db.SetMaxOpenConns(4)
	go func() {
		_, err := e.db.ExecContext(testCtx(t), "WAITFOR DELAY '00:00:02'")
		done <- err
	}()
	waitRunning(t, e.in, "WAITFOR")
	e.in.DropConnections()
	if err := <-done; err == nil || errNumber(err) != 0 {
		t.Fatalf("WAITFOR on a dropped connection returned %v, want a connection error", err)
	}
	if w := statementsOf(e.in, "WAITFOR"); w[len(w)-1].Outcome != "running" {
		t.Fatalf("WAITFOR ended %q with its connection; it runs on", w[len(w)-1].Outcome)
	}
	waitFor(t, func() bool {
		w := statementsOf(e.in, "WAITFOR")
		return w[len(w)-1].Outcome == "ok"
	})
	mustRun(t, e.open(t, "master"), "SELECT 1")

	// A crash ends it without a reply.
	go func() {
		_, err := e.db.ExecContext(testCtx(t), "WAITFOR DELAY '00:10:00'")
		done <- err
	}()
	waitRunning(t, e.in, "WAITFOR")
	e.in.Crash()
	var me mssql.Error
	if err := <-done; err == nil || errors.As(err, &me) {
		t.Fatalf("WAITFOR through a crash returned %v, want a connection error", err)
	}
	w := statementsOf(e.in, "WAITFOR")
	if got := w[len(w)-1].Outcome; got != "crashed" {
		t.Fatalf("WAITFOR through a crash logged %q", got)
	}
}
