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
	if !s.Stop(10 * time.Second) {
		t.Fatal("Stop: the statement did not end")
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the server never saw the cancel")
	}
}
