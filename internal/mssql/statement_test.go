package mssql

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// A started statement outlives the context of whoever waits for it: the
// waiter gives up, the statement runs on, and a later Attach gets its
// outcome, once.
func TestStatementOutlivesItsWaiter(t *testing.T) {
	release := make(chan struct{})
	cancelled := make(chan struct{}, 1)
	_, _, target := startScripted(t, map[string]func(context.Context, tds.Request, tds.ResultWriter) error{
		"BACKUP": func(ctx context.Context, _ tds.Request, w tds.ResultWriter) error {
			select {
			case <-release:
			case <-ctx.Done():
				cancelled <- struct{}{}
				return ctx.Err()
			}
			return w.Info(3014, 0, "BACKUP DATABASE successfully processed 7 pages in 0.010 seconds (5.468 MB/sec).")
		},
	})
	db, err := Open(testCtx(t), target)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, started, err := db.Start("set-1", "BACKUP DATABASE", "BACKUP DATABASE [Sales]", nil)
	if err != nil || !started {
		t.Fatalf("Start: %v, started %v", err, started)
	}
	again, started, err := db.Start("set-1", "BACKUP DATABASE", "BACKUP DATABASE [Sales]", nil)
	if err != nil || started || again != s {
		t.Fatalf("second Start of a running key: started %v, same %v, %v; want the running one", started, again == s, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := s.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past its context: %v", err)
	}
	select {
	case <-cancelled:
		t.Fatal("the statement was cancelled when its waiter gave up")
	case <-time.After(300 * time.Millisecond):
	}
	if Attach(target, "set-1") != s || Attach(target, "other") != nil {
		t.Fatal("Attach does not find the running statement by its key (or finds an unknown one)")
	}
	close(release)
	res, err := Attach(target, "set-1").Wait(testCtx(t))
	if err != nil || res.Summary == nil || res.Summary.Pages != 7 {
		t.Fatalf("outcome through Attach: %v, %+v", err, res.Summary)
	}
	if Attach(target, "set-1") != nil {
		t.Fatal("an outcome already read is attached to again")
	}
}

// Stop cancels the statement on the server (an attention).
func TestStatementStop(t *testing.T) {
	cancelled, got := make(chan struct{}, 1), make(chan struct{}, 1)
	_, _, target := startScripted(t, map[string]func(context.Context, tds.Request, tds.ResultWriter) error{
		"BACKUP": func(ctx context.Context, _ tds.Request, _ tds.ResultWriter) error {
			got <- struct{}{}
			<-ctx.Done()
			cancelled <- struct{}{}
			return ctx.Err()
		},
	})
	db, err := Open(testCtx(t), target)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, _, err := db.Start("set-2", "BACKUP DATABASE", "BACKUP DATABASE [Sales]", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-got
	if r := Running(target, Marker{Prefix: "BACKUP DATABASE [Sales]", Whole: true}); len(r) != 1 || r[0] != s {
		t.Fatalf("Running by the statement's text: %v, want it", r)
	}
	if r := Running(target, Marker{Prefix: "BACKUP DATABASE [Sales] TO"}); len(r) != 0 {
		t.Fatalf("Running by a longer text: %v, want none", r)
	}
	if !s.Stop(10 * time.Second) {
		t.Fatal("Stop: the statement did not end")
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the server never saw the cancel")
	}
	// Whoever waits for it learns it was stopped, not that its connection
	// was lost (which would send it looking on the instance and again).
	if _, err := s.Wait(testCtx(t)); !errors.Is(err, ErrStopped) || errors.Is(err, ErrUnreachable) {
		t.Errorf("Wait after Stop: %v, want ErrStopped", err)
	}
}

// A marker identifies this product's statement by the batch as it was sent:
// it starts with the statement (the whole of it, for a CHECKDB that names
// its set), holds its tag after that, and runs as this login. A batch that
// merely contains the text, or the same text of another login, is not it.
func TestMarkerFindsOnlyTheOwnStatement(t *testing.T) {
	const stmt = "DBCC CHECKDB([Sales_verify]) WITH NO_INFOMSGS, ALL_ERRORMSGS, EXTENDED_LOGICAL_CHECKS, DATA_PURITY /* backupcycle seq 00000007 */"
	whole := Marker{Prefix: stmt, Whole: true}
	for _, tc := range []struct {
		m    Marker
		text string
		want bool
	}{
		{whole, stmt, true},
		{whole, "SELECT 1;\n" + stmt, false},
		{whole, stmt + "; SELECT 1", false},
		{whole, "DBCC CHECKDB([Sales_verify]) WITH PHYSICAL_ONLY", false},
		{whole, "DBCC CHECKDB([Sales_verify]) WITH NO_INFOMSGS, ALL_ERRORMSGS, EXTENDED_LOGICAL_CHECKS, DATA_PURITY /* backupcycle seq 00000006 */", false},
		{Marker{Prefix: "BACKUP DATABASE [Sales] TO DISK = N'\\\\bak01\\backup\\sql01@Sales_00000007_1of"},
			"BACKUP DATABASE [Sales] TO DISK = N'\\\\bak01\\backup\\sql01@Sales_00000007_1of2.bak', DISK = N'x' WITH CHECKSUM", true},
		{Marker{Prefix: "BACKUP DATABASE [Sales] TO DISK = N'x'"}, "-- BACKUP DATABASE [Sales] TO DISK = N'x'", false},
		{Marker{Prefix: "BACKUP DATABASE [Sales] TO ", Tag: "NAME = N'backupcycle calibration ab1'"},
			"BACKUP DATABASE [Sales] TO DISK = N'NUL' WITH COPY_ONLY, NAME = N'backupcycle calibration ab1'", true},
		{Marker{Prefix: "BACKUP DATABASE [Sales] TO ", Tag: "NAME = N'backupcycle calibration ab1'"},
			"BACKUP DATABASE [Sales] TO DISK = N'NUL' WITH COPY_ONLY, NAME = N'backupcycle calibration ab2'", false},
		{Marker{}, "", false},
	} {
		if got := tc.m.Matches(tc.text); got != tc.want {
			t.Errorf("%+v matches %q: %v, want %v", tc.m, tc.text, got, tc.want)
		}
	}
	reqs := []Request{{SessionID: 51, Text: stmt, Login: "dba", Own: false}, {SessionID: 52, Text: "SELECT 1;\n" + stmt, Login: "bk", Own: true},
		{SessionID: 53, Text: stmt, Login: "bk", Own: true}}
	if r := Find(reqs, whole); r == nil || r.SessionID != 53 {
		t.Errorf("Find: %+v, want session 53 (the own login's, exactly the statement)", r)
	}
	if r := Find(reqs[:2], whole); r != nil {
		t.Errorf("Find without the own statement: %+v, want none", r)
	}
}
