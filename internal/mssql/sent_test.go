package mssql

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Send knows its session, and Vanish closes the connection without an
// attention: the server sees the connection end (ErrConnectionClosed), not
// a cancel, and the sender learns that its connection is gone.
func TestSendThenVanishSendsNoAttention(t *testing.T) {
	cause := make(chan error, 1)
	running := make(chan struct{})
	_, _, target := startScripted(t, map[string]func(context.Context, tds.Request, tds.ResultWriter) error{
		tsql.SessionID: func(_ context.Context, _ tds.Request, w tds.ResultWriter) error {
			if err := w.Columns([]tds.Column{{Name: "spid", Type: tds.TypeInt}}); err != nil {
				return err
			}
			if err := w.Row(int64(57)); err != nil {
				return err
			}
			return w.StatementDone(tds.CmdSelect, 1, true)
		},
		"BACKUP": func(ctx context.Context, _ tds.Request, _ tds.ResultWriter) error {
			close(running)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return ctx.Err()
		},
	})
	db, err := Open(testCtx(t), target)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := db.Send(testCtx(t), "BACKUP DATABASE", "BACKUP DATABASE [Sales] TO DISK = N'x.bak'")
	if err != nil {
		t.Fatal(err)
	}
	if s.Session != 57 {
		t.Fatalf("session %d, want 57", s.Session)
	}
	<-running
	if err := s.Vanish(); err != nil {
		t.Fatalf("Vanish: %v", err)
	}
	select {
	case c := <-cause:
		if !errors.Is(c, tds.ErrConnectionClosed) {
			t.Fatalf("the server saw %v, want the connection closed (no attention)", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not notice the vanished client")
	}
	_, err = s.Wait(testCtx(t))
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("the sender's outcome: %v, want its connection lost", err)
	}
}
