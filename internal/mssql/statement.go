package mssql

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"
)

// Statement is a long statement (BACKUP, RESTORE, DBCC CHECKDB) running on a
// connection of its own, independently of whoever started it: the activity
// attempt that started it may end (worker stop, heartbeat timeout, Temporal
// unreachable) while SQL Server goes on, and a later attempt in the same
// process attaches to it with Attach instead of starting it again.
//
// SQL Server notices a vanished client only when it next writes to it, and
// then stops the statement; a statement sent without STATS writes nothing
// until it ends, so it also survives the worker process: a retry elsewhere
// finds it in sys.dm_exec_requests by its text.
type Statement struct {
	Key string // what the statement is, per instance (see Start)
	Op  string
	// text is the statement as sent (Running matches it).
	text string

	done     chan struct{}
	stop     context.CancelFunc
	res      Result
	err      error
	started  time.Time
	finished time.Time

	mu       sync.Mutex
	percent  int
	consumed bool
	stopped  bool // Stop ended it
}

// statements are this process's long statements, running or finished and
// not yet seen by an attempt, by instance address and key.
var statements = struct {
	sync.Mutex
	m map[string]*Statement
}{m: map[string]*Statement{}}

// keepFinished is how long a finished statement waits for the attempt that
// will read its outcome.
const keepFinished = 6 * time.Hour

func registryKey(t Target, key string) string { return t.Address + "\x00" + key }

// Start sends statement on a connection of its own and returns at once. The
// statement is not bound to any caller's context: only Stop (an attention)
// or its end ends it. key names it on this instance (e.g. the backup set
// name); a statement with the same key still running in this process is
// returned instead of starting a second one (started false).
func (db *DB) Start(key, op, statement string, onMessage func(Message)) (*Statement, bool, error) {
	statements.Lock()
	defer statements.Unlock()
	now := time.Now()
	for k, s := range statements.m {
		if s.isDone() && now.Sub(s.finished) > keepFinished {
			delete(statements.m, k)
		}
	}
	rk := registryKey(db.Target, key)
	if s, ok := statements.m[rk]; ok && !s.isDone() {
		return s, false, nil
	}
	sdb, dead, err := db.statementDB()
	if err != nil {
		return nil, false, err
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Statement{Key: key, Op: op, text: statement, done: make(chan struct{}), stop: stop, started: now, percent: -1}
	statements.m[rk] = s
	go func() {
		defer stop()
		defer sdb.Close()
		res, err := run(ctx, sdb, db.Target, op, statement, func(m Message) {
			if m.Percent >= 0 {
				s.setPercent(m.Percent)
			}
			if onMessage != nil {
				onMessage(m)
			}
		}, dead)
		s.mu.Lock()
		if s.stopped && err != nil {
			// Not a lost connection: whoever waits must not look for it
			// on the instance or send it again.
			stopped := &Failure{Kind: ErrStopped, Target: db.Target.String(), Op: op, Err: err}
			var f *Failure
			if errors.As(err, &f) {
				stopped.Errors, stopped.Err = f.Errors, f.Err
			}
			err = stopped
		}
		s.mu.Unlock()
		statements.Lock()
		s.res, s.err, s.finished = res, err, time.Now()
		close(s.done)
		statements.Unlock()
	}()
	return s, true, nil
}

// Attach returns this process's statement key on the instance of t when it
// is still running or finished without an attempt having read its outcome;
// nil otherwise.
func Attach(t Target, key string) *Statement {
	statements.Lock()
	defer statements.Unlock()
	s, ok := statements.m[registryKey(t, key)]
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.consumed {
		return nil
	}
	return s
}

func (s *Statement) isDone() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *Statement) setPercent(p int) {
	s.mu.Lock()
	s.percent = p
	s.mu.Unlock()
}

// Percent is the last progress the statement reported itself, -1 if none.
func (s *Statement) Percent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.percent
}

// Done is closed when the statement has ended.
func (s *Statement) Done() <-chan struct{} { return s.done }

// Started is when this process sent the statement.
func (s *Statement) Started() time.Time { return s.started }

// Wait waits for the statement's end and returns its outcome, which is then
// consumed (Attach no longer returns it). When ctx ends first, Wait returns
// ctx's error and the statement runs on.
func (s *Statement) Wait(ctx context.Context) (Result, error) {
	select {
	case <-s.done:
	default:
		select {
		case <-s.done:
		case <-ctx.Done():
			return Result{Percent: s.Percent()}, ctx.Err()
		}
	}
	s.mu.Lock()
	s.consumed = true
	s.mu.Unlock()
	return s.res, s.err
}

// Stop cancels the statement (the driver sends an attention; SQL Server
// rolls it back) and waits up to limit for it to end. It reports whether it
// ended.
func (s *Statement) Stop(limit time.Duration) bool {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.stop()
	select {
	case <-s.done:
		return true
	case <-time.After(limit):
		return false
	}
}

// Running returns this process's statements on the instance of t that are
// still running and that m identifies.
func Running(t Target, m Marker) []*Statement {
	statements.Lock()
	defer statements.Unlock()
	var out []*Statement
	for k, s := range statements.m {
		if strings.HasPrefix(k, registryKey(t, "")) && !s.isDone() && m.Matches(s.text) {
			out = append(out, s)
		}
	}
	return out
}
