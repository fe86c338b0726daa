package limit

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/storage/local"
)

// fakeClock advances only when the bucket sleeps, so the test checks the
// rate arithmetic without measuring wall time.
type fakeClock struct {
	t     time.Time
	slept time.Duration
}

func (c *fakeClock) now() time.Time { return c.t }
func (c *fakeClock) sleep(_ context.Context, d time.Duration) error {
	c.slept += d
	c.t = c.t.Add(d)
	return nil
}

func fakeBucket(rate int64) (*Bucket, *fakeClock) {
	c := &fakeClock{t: time.Unix(1e9, 0)}
	b := NewBucket(rate)
	b.now, b.sleep, b.last = c.now, c.sleep, c.t
	return b, c
}

func TestBucketRate(t *testing.T) {
	b, c := fakeBucket(10 << 20) // 10 MiB/s
	for range 50 {
		if err := b.Wait(context.Background(), 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	// 50 MiB at 10 MiB/s from an empty bucket: 5 s of sleeping.
	if got := c.slept.Seconds(); math.Abs(got-5) > 0.01 {
		t.Fatalf("slept %.3fs for 50 MiB at 10 MiB/s, want 5s", got)
	}
}

func TestBucketBurstAfterIdle(t *testing.T) {
	b, c := fakeBucket(8 << 20)
	c.t = c.t.Add(time.Hour) // idle: saves at most burst = rate/4
	if err := b.Wait(context.Background(), 2<<20); err != nil {
		t.Fatal(err)
	}
	if c.slept != 0 {
		t.Fatalf("a burst-sized request after idling slept %v", c.slept)
	}
	if err := b.Wait(context.Background(), 8<<20); err != nil {
		t.Fatal(err)
	}
	if got := c.slept.Seconds(); math.Abs(got-1) > 0.01 {
		t.Fatalf("8 MiB at 8 MiB/s after the burst was spent slept %.3fs, want 1s", got)
	}
}

func TestBucketCancel(t *testing.T) {
	b := NewBucket(1) // 1 byte/s: a 1 MiB wait would take days
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Wait(ctx, 1<<20); err != context.Canceled {
		t.Fatalf("Wait on a canceled context = %v, want context.Canceled", err)
	}
}

func TestWrapLimitsWrites(t *testing.T) {
	ctx := context.Background()
	s, err := local.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l := Wrap(s, Rates{Write: 4 << 20}).(*limited)
	c := &fakeClock{t: time.Unix(1e9, 0)}
	l.write.now, l.write.sleep, l.write.last = c.now, c.sleep, c.t
	w, err := l.Create(ctx, "x.bak")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range 8 {
		if _, err := w.WriteAt(buf, int64(i)<<20); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	if got := c.slept.Seconds(); math.Abs(got-2) > 0.01 {
		t.Fatalf("8 MiB written at 4 MiB/s slept %.3fs, want 2s", got)
	}
	if fi, err := l.Stat(ctx, "x.bak"); err != nil || fi.Size != 8<<20 {
		t.Fatalf("Stat through the decorator = %+v, %v", fi, err)
	}
}
