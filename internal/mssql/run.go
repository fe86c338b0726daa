package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
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

var (
	percentRE = regexp.MustCompile(`^\s*(\d{1,3}) percent processed\.`)
	summaryRE = regexp.MustCompile(`^(.*?) successfully processed (\d+) pages in ([0-9.]+) seconds \(([0-9.]+) MB/sec\)`)
)

// ParsePercent reads "N percent processed.".
func ParsePercent(text string) (int, bool) {
	m := percentRE.FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n > 100 {
		return 0, false
	}
	return n, true
}

// ParseSummary reads the 3014 "... successfully processed N pages in X
// seconds (Y MB/sec)." message.
func ParseSummary(text string) (Summary, bool) {
	m := summaryRE.FindStringSubmatch(text)
	if m == nil {
		return Summary{}, false
	}
	pages, err1 := strconv.ParseInt(m[2], 10, 64)
	secs, err2 := strconv.ParseFloat(m[3], 64)
	mbps, err3 := strconv.ParseFloat(m[4], 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Summary{}, false
	}
	return Summary{Operation: m[1], Pages: pages, Seconds: secs, MBps: mbps}, true
}

// queryer is *sql.DB, *sql.Conn or *sql.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Run executes one statement that returns no rows (BACKUP, RESTORE, DBCC,
// DDL) and calls onMessage for every message as it arrives, so progress
// can be heartbeated while the statement runs. Every ERROR message fails
// the statement, even when the driver would not report it: in message mode
// errors arrive only as messages. The returned error is a *Failure.
//
// While the statement runs, the instance is pinged on another connection
// every db.Liveness (default 10 s): after three failures in a row the host
// is taken as lost and Run returns ErrUnreachable. The driver alone does not
// always notice: a host that dies before its first reply packet leaves the
// message queue silent forever.
func (db *DB) Run(ctx context.Context, op, statement string, onMessage func(Message)) (Result, error) {
	sdb, dead, err := db.statementDB()
	if err != nil {
		return Result{Percent: -1}, err
	}
	defer sdb.Close()
	return run(ctx, sdb, db.Target, op, statement, onMessage, db.liveness(), dead)
}

// RunOn is Run on a pinned connection (see DB.Conn), without the liveness
// pings (a pinned connection's caller watches the host itself).
func RunOn(ctx context.Context, c *sql.Conn, t Target, op, statement string, onMessage func(Message)) (Result, error) {
	return run(ctx, c, t, op, statement, onMessage, nil, nil)
}

// liveness returns the pinger of Run, or nil when disabled.
func (db *DB) liveness() *pinger {
	every := db.Liveness
	if every < 0 {
		return nil
	}
	if every == 0 {
		every = 10 * time.Second
	}
	return &pinger{every: every, ping: db.PingContext}
}

// pinger checks an instance on its own connection while a statement runs.
type pinger struct {
	every time.Duration
	ping  func(context.Context) error
}

// watch pings until ctx ends; after three failures in a row it records the
// last one and calls lost.
func (p *pinger) watch(ctx context.Context, lost func(error)) {
	failures := 0
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, max(p.every, time.Second))
		err := p.ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			failures = 0
			continue
		}
		if failures++; failures >= 3 {
			lost(err)
			return
		}
	}
}

func run(ctx context.Context, q queryer, t Target, op, statement string, onMessage func(Message), live *pinger,
	dead <-chan struct{}) (Result, error) {
	start := time.Now()
	res := Result{Percent: -1}
	var lostErr error
	var lostMu sync.Mutex
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if live != nil {
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		go live.watch(wctx, func(err error) {
			lostMu.Lock()
			lostErr = err
			lostMu.Unlock()
			cancel()
		})
	}
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
	hostLost := func() error {
		lostMu.Lock()
		defer lostMu.Unlock()
		return lostErr
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
			if p, ok := ParsePercent(msg.Text); ok {
				msg.Percent = p
				res.Percent = p
			}
			if s, ok := ParseSummary(msg.Text); ok && (msg.Number == 3014 || msg.Number == 0) {
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
	if err := hostLost(); err != nil {
		return res, &Failure{Kind: ErrUnreachable, Target: t.String(), Op: op,
			Err: fmt.Errorf("host stopped answering while the statement ran (3 pings failed): %w", err)}
	}
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
		return res, &Failure{Kind: ErrUnreachable, Target: t.String(), Op: op,
			Err: errors.New("the connection to the host was lost while the statement ran")}
	case transport != nil:
		return res, &Failure{Kind: ErrUnreachable, Target: t.String(), Op: op, Err: transport}
	case len(errs) > 0:
		return res, ClassifyErrors(t, op, errs)
	}
	if err := rows.Err(); err != nil {
		return res, Classify(t, op, err)
	}
	return res, nil
}
