package limit

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/storage/local"
)

// fakeClock advances only when the limiter sleeps, so the test checks the
// rate arithmetic without measuring wall time.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	slept time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept += d
	c.t = c.t.Add(d)
	return nil
}

func fakeLimiter(rate int64) (*Limiter, *fakeClock) {
	c := &fakeClock{t: time.Unix(1e9, 0)}
	l := New(rate)
	l.now, l.sleep = c.now, c.sleep
	return l, c
}

func TestLimiterRate(t *testing.T) {
	l, c := fakeLimiter(10 << 20) // 10 MiB/s, a 2.5 MiB burst
	for range 50 {
		if err := l.Wait(context.Background(), 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	// 50 MiB at 10 MiB/s, less the burst saved up at the start: 4.75 s.
	if got := c.slept.Seconds(); math.Abs(got-4.75) > 0.01 {
		t.Fatalf("slept %.3fs for 50 MiB at 10 MiB/s, want 4.75s", got)
	}
}

// A request far above the burst is taken in pieces instead of failing
// (rate.Limiter refuses a single request above its burst).
func TestLimiterSplitsBigRequests(t *testing.T) {
	l, c := fakeLimiter(1 << 20) // burst 256 KiB
	if err := l.Wait(context.Background(), 8<<20); err != nil {
		t.Fatal(err)
	}
	if got := c.slept.Seconds(); math.Abs(got-7.75) > 0.01 {
		t.Fatalf("8 MiB at 1 MiB/s slept %.3fs, want 7.75s", got)
	}
}

func TestLimiterSetRate(t *testing.T) {
	l, c := fakeLimiter(8 << 20)
	if err := l.Wait(context.Background(), 2<<20); err != nil { // the burst
		t.Fatal(err)
	}
	l.SetRate(4 << 20)
	if err := l.Wait(context.Background(), 8<<20); err != nil {
		t.Fatal(err)
	}
	if got := c.slept.Seconds(); math.Abs(got-2) > 0.01 {
		t.Fatalf("8 MiB after the rate went down to 4 MiB/s slept %.3fs, want 2s", got)
	}
}

func TestLimiterCancel(t *testing.T) {
	l := New(1) // 1 byte/s: a 1 MiB wait would take days
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Wait(ctx, 1<<20); err != context.Canceled {
		t.Fatalf("Wait on a canceled context = %v, want context.Canceled", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := l.Wait(ctx, 1<<20); err != context.DeadlineExceeded || time.Since(start) > 5*time.Second {
		t.Fatalf("Wait past its deadline = %v after %s, want context.DeadlineExceeded at once", err, time.Since(start))
	}
}

func TestServersShareOneLimiterPerServer(t *testing.T) {
	var s Servers
	a, b := s.For("bak02", 4<<20), s.For("bak02", 4<<20)
	if a == nil || a != b {
		t.Fatalf("two copies into bak02 got limiters %p and %p, want the same one", a, b)
	}
	if other := s.For("bak01", 4<<20); other == a {
		t.Fatal("bak01 shares bak02's limiter")
	}
	if c := s.For("bak02", 2<<20); c != a || a.Rate() != 2<<20 {
		t.Fatalf("after the configuration lowered the limit: limiter %p rate %d, want %p at %d", c, a.Rate(), a, 2<<20)
	}
	if s.For("bak03", 0) != nil {
		t.Fatal("an unlimited server got a limiter")
	}
}

func TestWrapLimitsWrites(t *testing.T) {
	ctx := context.Background()
	s, err := local.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lim, c := fakeLimiter(4 << 20)
	l := Wrap(s, Rates{Write: lim})
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
	if got := c.slept.Seconds(); math.Abs(got-1.75) > 0.01 {
		t.Fatalf("8 MiB written at 4 MiB/s (1 MiB burst) slept %.3fs, want 1.75s", got)
	}
	if fi, err := l.Stat(ctx, "x.bak"); err != nil || fi.Size != 8<<20 {
		t.Fatalf("Stat through the decorator = %+v, %v", fi, err)
	}
	if Wrap(s, Rates{}) != s {
		t.Error("Wrap without limiters did not return the storage itself")
	}
}

// Two writers into two storages wrapped with one Limiter stay within its
// rate together, measured on the wall clock.
func TestSharedLimiterMeasured(t *testing.T) {
	ctx := context.Background()
	const rate, each = 4 << 20, 4 << 20
	lim := New(rate)
	start := time.Now()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := local.Open(ctx, t.TempDir())
			if err != nil {
				t.Error(err)
				return
			}
			w, err := Wrap(s, Rates{Write: lim}).Create(ctx, "x.bak")
			if err != nil {
				t.Error(err)
				return
			}
			defer w.Close()
			buf := make([]byte, 512<<10)
			for off := int64(0); off < each; off += int64(len(buf)) {
				if _, err := w.WriteAt(buf, off); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start).Seconds()
	// 8 MiB less the 1 MiB burst at 4 MiB/s: 1.75 s; a limiter per writer
	// would let them finish in half that.
	got := float64(2*each) / took
	if got > rate*1.25 || took < 1.6 {
		t.Fatalf("two writers sharing %d B/s wrote %d bytes in %.2fs (%.0f B/s), want about 1.75s", rate, 2*each, took, got)
	}
	t.Logf("two writers sharing 4 MiB/s: %.2f MiB/s over %.2fs", got/(1<<20), took)
}
