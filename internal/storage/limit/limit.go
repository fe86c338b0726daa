// Package limit caps the bandwidth of a storage.Storage (a decorator, as in
// restic's backend/limiter): daytime copies to the remote site must leave the
// link usable.
package limit

import (
	"context"
	"sync"
	"time"

	"github.com/backupcycle/backupcycle/internal/storage"
)

// Bucket is a token bucket of bytes. Callers take what they need and sleep off
// the debt, so one big request waits in proportion to its size and several
// goroutines share the rate fairly.
type Bucket struct {
	rate  float64 // bytes per second
	burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time

	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// NewBucket returns a bucket of bytesPerSecond that starts empty and saves up
// at most a quarter second of unused rate.
func NewBucket(bytesPerSecond int64) *Bucket {
	b := &Bucket{rate: float64(bytesPerSecond), now: time.Now, sleep: sleepCtx}
	b.burst = b.rate / 4
	b.last = b.now()
	return b
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

// Wait takes n bytes from the bucket, sleeping until the rate allows them.
func (b *Bucket) Wait(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	b.mu.Lock()
	now := b.now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= float64(n)
	debt := -b.tokens
	b.mu.Unlock()
	if debt <= 0 {
		return nil
	}
	return b.sleep(ctx, time.Duration(debt/b.rate*float64(time.Second)))
}

// Rates are bytes per second; 0 = unlimited.
type Rates struct {
	Read  int64
	Write int64
}

// Wrap returns s with its file reads and writes limited to r. All handles of
// the returned Storage share the rates.
func Wrap(s storage.Storage, r Rates) storage.Storage {
	l := &limited{Storage: s}
	if r.Read > 0 {
		l.read = NewBucket(r.Read)
	}
	if r.Write > 0 {
		l.write = NewBucket(r.Write)
	}
	return l
}

type limited struct {
	storage.Storage
	read, write *Bucket
}

func (l *limited) OpenRead(ctx context.Context, name string) (storage.Reader, error) {
	r, err := l.Storage.OpenRead(ctx, name)
	if err != nil || l.read == nil {
		return r, err
	}
	return &reader{Reader: r, ctx: ctx, b: l.read}, nil
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
	return &writer{Writer: w, ctx: ctx, b: l.write}, nil
}

type reader struct {
	storage.Reader
	ctx context.Context
	b   *Bucket
}

func (r *reader) ReadAt(p []byte, off int64) (int, error) {
	if err := r.b.Wait(r.ctx, len(p)); err != nil {
		return 0, err
	}
	return r.Reader.ReadAt(p, off)
}

type writer struct {
	storage.Writer
	ctx context.Context
	b   *Bucket
}

func (w *writer) WriteAt(p []byte, off int64) (int, error) {
	if err := w.b.Wait(w.ctx, len(p)); err != nil {
		return 0, err
	}
	return w.Writer.WriteAt(p, off)
}
