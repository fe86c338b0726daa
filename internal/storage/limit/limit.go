// Package limit caps the bandwidth of a storage.Storage (a decorator, as in
// restic's backend/limiter): daytime copies to the remote site must leave the
// link usable. One Limiter is shared by every stream that must stay within
// one rate together, such as all the copies written into one backup server.
package limit

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/backupcycle/backupcycle/internal/storage"
)

// minBurst keeps the pieces a request is split into from getting tiny at
// low rates: each piece costs a reservation and possibly a timer.
const minBurst = 64 << 10

// Limiter is a rate of bytes per second shared by every reader and writer
// wrapped with it, however many there are at once. Requests larger than the
// burst are taken in burst-sized pieces, so a big write waits in proportion
// to its size and concurrent streams share the rate fairly.
type Limiter struct {
	mu sync.Mutex // guards rate changes against a Wait splitting by the old burst
	l  *rate.Limiter

	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// New returns a Limiter of bytesPerSecond (> 0) that saves up at most a
// quarter second of unused rate.
func New(bytesPerSecond int64) *Limiter {
	l := &Limiter{now: time.Now, sleep: sleepCtx}
	l.l = rate.NewLimiter(rate.Limit(bytesPerSecond), burstOf(bytesPerSecond))
	return l
}

func burstOf(bytesPerSecond int64) int {
	return int(max(bytesPerSecond/4, minBurst))
}

// Rate is the limit in bytes per second.
func (l *Limiter) Rate() int64 {
	return int64(l.l.Limit())
}

// SetRate changes the limit for the streams already running too (a
// configuration reloaded while copies run).
func (l *Limiter) SetRate(bytesPerSecond int64) {
	if bytesPerSecond <= 0 || bytesPerSecond == l.Rate() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.l.SetLimitAt(now, rate.Limit(bytesPerSecond))
	l.l.SetBurstAt(now, burstOf(bytesPerSecond))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Wait takes n bytes from the limiter, sleeping until the rate allows them.
func (l *Limiter) Wait(ctx context.Context, n int) error {
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		l.mu.Lock()
		piece := min(n, l.l.Burst())
		now := l.now()
		r := l.l.ReserveN(now, piece)
		l.mu.Unlock()
		if d := r.DelayFrom(now); d > 0 {
			if err := l.sleep(ctx, d); err != nil {
				r.CancelAt(l.now()) // give back what was not used
				return err
			}
		}
		n -= piece
	}
	return nil
}

// Servers holds one Limiter per backup server, so that every copy into a
// server shares its limit. The zero value is ready to use.
type Servers struct {
	mu sync.Mutex
	m  map[string]*Limiter
}

// For returns the Limiter of server at bytesPerSecond, the same one for
// every caller, its rate updated when the configuration changed it; nil
// when bytesPerSecond is 0 (unlimited).
func (s *Servers) For(server string, bytesPerSecond int64) *Limiter {
	if bytesPerSecond <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.m[server]; ok {
		l.SetRate(bytesPerSecond)
		return l
	}
	if s.m == nil {
		s.m = map[string]*Limiter{}
	}
	l := New(bytesPerSecond)
	s.m[server] = l
	return l
}

// Rates are the limiters of reads and writes; nil = unlimited.
type Rates struct {
	Read  *Limiter
	Write *Limiter
}

// Wrap returns s with its file reads and writes limited by r. Every handle
// of the returned Storage, and of any other Storage wrapped with the same
// Limiters, shares the rates.
func Wrap(s storage.Storage, r Rates) storage.Storage {
	if r.Read == nil && r.Write == nil {
		return s
	}
	return &limited{Storage: s, read: r.Read, write: r.Write}
}

type limited struct {
	storage.Storage
	read, write *Limiter
}

func (l *limited) OpenRead(ctx context.Context, name string) (storage.Reader, error) {
	r, err := l.Storage.OpenRead(ctx, name)
	if err != nil || l.read == nil {
		return r, err
	}
	return &reader{Reader: r, ctx: ctx, l: l.read}, nil
}

func (l *limited) Create(ctx context.Context, name string) (storage.Writer, error) {
	w, err := l.Storage.Create(ctx, name)
	return l.wrapWriter(ctx, w, err)
}

func (l *limited) OpenWrite(ctx context.Context, name string) (storage.Writer, error) {
	w, err := l.Storage.OpenWrite(ctx, name)
	return l.wrapWriter(ctx, w, err)
}

func (l *limited) wrapWriter(ctx context.Context, w storage.Writer, err error) (storage.Writer, error) {
	if err != nil || l.write == nil {
		return w, err
	}
	return &writer{Writer: w, ctx: ctx, l: l.write}, nil
}

type reader struct {
	storage.Reader
	ctx context.Context
	l   *Limiter
}

func (r *reader) ReadAt(p []byte, off int64) (int, error) {
	if err := r.l.Wait(r.ctx, len(p)); err != nil {
		return 0, err
	}
	return r.Reader.ReadAt(p, off)
}

type writer struct {
	storage.Writer
	ctx context.Context
	l   *Limiter
}

func (w *writer) WriteAt(p []byte, off int64) (int, error) {
	if err := w.l.Wait(w.ctx, len(p)); err != nil {
		return 0, err
	}
	return w.Writer.WriteAt(p, off)
}
