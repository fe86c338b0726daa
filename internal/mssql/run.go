package mssql

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/golang-sql/sqlexp"
	mssqldb "github.com/microsoft/go-mssqldb"
)

// Message is one INFO or ERROR message a statement produced.
type Message struct {
	Number int32
	Class  uint8
	Text   string
	Error  bool // an ERROR token (class 11+): the statement fails
	// Percent is N of "N percent processed." (message 3211), else -1.
	Percent int
}

// Summary is SQL Server's closing message 3014: "BACKUP DATABASE
// successfully processed 123 pages in 0.042 seconds (22.8 MB/sec)."
type Summary struct {
	Operation string // "BACKUP DATABASE", "RESTORE DATABASE", ...
	Pages     int64
	Seconds   float64
	MBps      float64
}

// Bytes is the data the operation processed (pages of 8 KiB).
func (s Summary) Bytes() int64 { return s.Pages * 8192 }

// Result is what a statement reported besides its rows.
type Result struct {
	Messages []Message // capped at maxMessages, the newest dropped
	Summary  *Summary  // the 3014 message, when there was one
	Percent  int       // last percent reported, -1 if none
	Elapsed  time.Duration
}

const maxMessages = 1000

// lostGrace is how long Run keeps reading queued messages after its
// connection failed.
const lostGrace = 250 * time.Millisecond

// lostFailure is a statement whose connection broke: the errors SQL Server
// sent before (a severity 20+ error closes the session after its message)
// are kept and decide the kind when they say more than "unreachable".
func lostFailure(t Target, op string, errs []mssqldb.Error, cause error) error {
	f := &Failure{Kind: ErrUnreachable, Target: t.String(), Op: op, Errors: errs, Err: cause}
	if len(errs) > 0 {
		if k := classifyFor(op, errs); k != ErrStatement {
			f.Kind = k
		}
	}
	return f
}

// queryer is *sql.DB, *sql.Conn or *sql.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Run executes one statement that returns no rows (DROP DATABASE, DDL, a
// short BACKUP in tests) and calls onMessage for every message as it
// arrives. Every ERROR message fails the statement, even when the driver
// would not report it: in message mode errors arrive only as messages. The
// returned error is a *Failure. Cancelling ctx cancels the statement (the
// driver sends an attention). Long statements that must outlive the caller
// use Start.
//
// Only a failed read or write on the statement's own connection ends Run
// early (ErrUnreachable): the connection is dialled with TCP keepalives, so a
// host that dies without closing it is noticed too. Failed pings on other
// connections never end a running statement: a 30 s network blip must not
// cancel a healthy BACKUP.
func (db *DB) Run(ctx context.Context, op, statement string, onMessage func(Message)) (Result, error) {
	sdb, dead, err := db.statementDB()
	if err != nil {
		return Result{Percent: -1}, err
	}
	defer sdb.Close()
	return run(ctx, sdb, db.Target, op, statement, onMessage, dead)
}

// RunOn is Run on a pinned connection (see DB.Conn).
func RunOn(ctx context.Context, c *sql.Conn, t Target, op, statement string, onMessage func(Message)) (Result, error) {
	return run(ctx, c, t, op, statement, onMessage, nil)
}

func run(ctx context.Context, q queryer, t Target, op, statement string, onMessage func(Message),
	dead <-chan struct{}) (Result, error) {
	start := time.Now()
	res := Result{Percent: -1}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	connLost := make(chan struct{})
	if dead != nil {
		go func() {
			select {
			case <-dead:
				close(connLost)
				// The driver usually queues the notices it read and then
				// a MsgError: give the loop time to take them in order.
				// Without a MsgError (lost before the first reply) the
				// loop would wait forever: end it.
				select {
				case <-time.After(lostGrace):
					cancel()
				case <-ctx.Done():
				}
			case <-ctx.Done():
			}
		}()
	}
	retmsg := &sqlexp.ReturnMessage{}
	rows, err := q.QueryContext(ctx, statement, retmsg)
	if err != nil {
		return res, Classify(t, op, err)
	}
	defer rows.Close()

	var errs []mssqldb.Error
	var transport error
	completed := false
	add := func(m Message) {
		if len(res.Messages) < maxMessages {
			res.Messages = append(res.Messages, m)
		}
		if onMessage != nil {
			onMessage(m)
		}
	}
loop:
	for {
		switch m := retmsg.Message(ctx).(type) {
		case sqlexp.MsgNotice:
			msg := Message{Text: m.Message.String(), Percent: -1}
			if e, ok := m.Message.(mssqldb.Error); ok {
				msg.Number, msg.Class = e.Number, e.Class
			}
			// By number: the text is in the session's language.
			if p, ok := ProgressPercent(msg); ok {
				msg.Percent = p
				res.Percent = p
			}
			if s, ok := SummaryOf(msg); ok {
				res.Summary = &s
			}
			add(msg)
		case sqlexp.MsgError:
			var e mssqldb.Error
			if !errors.As(m.Error, &e) {
				// The connection broke mid-statement (the driver recovered
				// from a read panic): no more messages will come.
				transport = m.Error
				break loop
			}
			errs = append(errs, e)
			add(Message{Number: e.Number, Class: e.Class, Text: e.Message, Error: true, Percent: -1})
		case sqlexp.MsgNext:
			// A statement run for its effect may still return rows: drain.
			for rows.Next() {
			}
		case sqlexp.MsgNextResultSet:
			if ctx.Err() == nil && !rows.NextResultSet() {
				completed = true
				break loop
			}
			if ctx.Err() != nil {
				break loop
			}
		}
	}
	res.Elapsed = time.Since(start)
	lost := false
	select {
	case <-connLost:
		lost = true
	default:
	}
	switch {
	case parent.Err() != nil:
		return res, Classify(t, op, parent.Err())
	case lost && !completed:
		return res, lostFailure(t, op, errs, errors.New("the connection to the host was lost while the statement ran"))
	case transport != nil:
		return res, lostFailure(t, op, errs, transport)
	case len(errs) > 0:
		return res, ClassifyErrors(t, op, errs)
	}
	if err := rows.Err(); err != nil {
		return res, Classify(t, op, err)
	}
	return res, nil
}
