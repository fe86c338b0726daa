package mssql

import (
	"context"
	"database/sql"
	"errors"
	"net"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Sent is a statement sent on a connection of its own whose session id is
// known, so that a caller can watch it in sys.dm_exec_requests, and can
// make its client vanish (Vanish) to see what SQL Server then does with it.
// `starter conformance` uses it; the cycle's long statements use Start.
type Sent struct {
	Session int64 // @@SPID of the statement's session
	Text    string

	sdb    *sql.DB
	dialer *watchDialer
	stop   context.CancelFunc
	done   chan struct{}
	res    Result
	err    error
}

// Send opens a connection of its own, reads its session id and sends
// statement on it; it returns once the statement is on its way. Only Stop
// (an attention), Vanish or the statement's end end it; ctx bounds the
// connecting only.
func (db *DB) Send(ctx context.Context, op, statement string) (*Sent, error) {
	conn, err := db.Target.connector(db.dsn)
	if err != nil {
		return nil, err
	}
	d := &watchDialer{dead: make(chan struct{})}
	conn.Dialer = d
	sdb := sql.OpenDB(conn)
	sdb.SetMaxOpenConns(1)
	c, err := sdb.Conn(ctx)
	if err != nil {
		sdb.Close()
		return nil, Classify(db.Target, "connect", err)
	}
	var spid int64
	if err := c.QueryRowContext(ctx, tsql.SessionID).Scan(&spid); err != nil {
		c.Close()
		sdb.Close()
		return nil, Classify(db.Target, "read the session id", err)
	}
	rctx, stop := context.WithCancel(context.Background())
	s := &Sent{Session: spid, Text: statement, sdb: sdb, dialer: d, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer sdb.Close()
		defer c.Close()
		defer stop()
		s.res, s.err = run(rctx, c, db.Target, op, statement, nil, d.dead)
	}()
	return s, nil
}

// Vanish closes the statement's TCP connection without sending an
// attention, as the operating system does for a client process that is
// killed or exits: SQL Server is not asked to stop the statement; what it
// does with it is its own decision.
func (s *Sent) Vanish() error {
	var errs []error
	for _, c := range s.dialer.opened() {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Stop cancels the statement (an attention) and waits for its end.
func (s *Sent) Stop() {
	s.stop()
	<-s.done
}

// Done is closed when the statement has ended, or its connection is gone.
func (s *Sent) Done() <-chan struct{} { return s.done }

// Wait waits for the end (or ctx) and returns the statement's outcome.
func (s *Sent) Wait(ctx context.Context) (Result, error) {
	select {
	case <-s.done:
		return s.res, s.err
	case <-ctx.Done():
		return Result{Percent: -1}, ctx.Err()
	}
}

// opened are the raw TCP connections d dialled.
func (d *watchDialer) opened() []net.Conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]net.Conn(nil), d.conns...)
}

// remember records a connection d dialled.
func (d *watchDialer) remember(c net.Conn) {
	d.mu.Lock()
	d.conns = append(d.conns, c)
	d.mu.Unlock()
}
