package copier_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
	"github.com/backupcycle/backupcycle/internal/storage/limit"
	"github.com/backupcycle/backupcycle/internal/storage/local"
)

func randBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	_, _ = r.Read(b)
	return b
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func localStorage(t *testing.T) (storage.Storage, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := local.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func put(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// faulty is a storage decorator that fails writes after a byte budget and
// counts reads per offset range, to simulate a crash and check what a resume
// re-reads.
type faulty struct {
	storage.Storage
	failAfter atomic.Int64 // writes fail once this many bytes were written; <0 = never
	written   atomic.Int64
	readBytes atomic.Int64
}

func newFaulty(s storage.Storage) *faulty {
	f := &faulty{Storage: s}
	f.failAfter.Store(-1)
	return f
}

var errInjected = fmt.Errorf("injected: %w", storage.ErrConnection)

func (f *faulty) OpenRead(ctx context.Context, name string) (storage.Reader, error) {
	r, err := f.Storage.OpenRead(ctx, name)
	if err != nil {
		return nil, err
	}
	return &faultyReader{Reader: r, f: f}, nil
}

func (f *faulty) Create(ctx context.Context, name string) (storage.Writer, error) {
	w, err := f.Storage.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return &faultyWriter{Writer: w, f: f}, nil
}

func (f *faulty) OpenWrite(ctx context.Context, name string) (storage.Writer, error) {
	w, err := f.Storage.OpenWrite(ctx, name)
	if err != nil {
		return nil, err
	}
	return &faultyWriter{Writer: w, f: f}, nil
}

type faultyReader struct {
	storage.Reader
	f *faulty
}

func (r *faultyReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.Reader.ReadAt(p, off)
	r.f.readBytes.Add(int64(n))
	return n, err
}

type faultyWriter struct {
	storage.Writer
	f *faulty
}

func (w *faultyWriter) WriteAt(p []byte, off int64) (int, error) {
	if lim := w.f.failAfter.Load(); lim >= 0 && w.f.written.Load()+int64(len(p)) > lim {
		return 0, errInjected
	}
	n, err := w.Writer.WriteAt(p, off)
	w.f.written.Add(int64(n))
	return n, err
}

func TestCopyFiles(t *testing.T) {
	src, sdir := localStorage(t)
	dst, ddir := localStorage(t)
	sizes := []int{0, 1, 65536, 65537, 1<<20 + 3, 3 << 20}
	var jobs []copier.Job
	want := map[string][]byte{}
	for i, n := range sizes {
		name := fmt.Sprintf("db_00000001_%dof%d.bak", i+1, len(sizes))
		data := randBytes(uint64(i), n)
		put(t, sdir, name, data)
		want[name] = data
		jobs = append(jobs, copier.Job{Src: name, Dst: name})
	}
	var mu sync.Mutex
	var calls int
	var last = map[string]copier.Progress{}
	c := copier.New(copier.Options{ChunkSize: 64 << 10, InFlight: 3, Files: 2, Progress: func(p copier.Progress) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if prev, ok := last[p.File]; ok && p.Offset < prev.Offset {
			t.Errorf("%s: progress went back from %d to %d", p.File, prev.Offset, p.Offset)
		}
		last[p.File] = p
	}})
	res, err := c.Copy(context.Background(), src, dst, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		data := want[jobs[i].Dst]
		if r.SHA256 != sum(data) || r.Size != int64(len(data)) || r.BytesSent != int64(len(data)) || r.AlreadyThere {
			t.Errorf("%s: result %+v, want sha256 %s size %d sent %d", jobs[i].Dst, r, sum(data), len(data), len(data))
		}
		if got := read(t, ddir, jobs[i].Dst); !bytes.Equal(got, data) {
			t.Errorf("%s: destination content differs", jobs[i].Dst)
		}
		if p := last[jobs[i].Dst]; !p.Done || p.Offset != int64(len(data)) {
			t.Errorf("%s: last progress %+v, want Done at %d", jobs[i].Dst, p, len(data))
		}
	}
	if left, _ := dst.List(context.Background(), "", ""); len(left) != len(sizes) {
		t.Errorf("destination holds %d files, want %d (no .partial left)", len(left), len(sizes))
	}
	if calls < 3<<20/(64<<10) {
		t.Errorf("progress called %d times, want at least once per chunk", calls)
	}

	// Again: everything is already there, nothing is sent.
	mu.Lock()
	last = map[string]copier.Progress{}
	mu.Unlock()
	res, err = c.Copy(context.Background(), src, dst, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if !r.AlreadyThere || r.BytesSent != 0 || r.SHA256 != sum(want[r.Dst]) {
			t.Errorf("second copy of %s: %+v, want AlreadyThere, nothing sent", r.Dst, r)
		}
	}
}

func TestNeverOverwritesDifferentContent(t *testing.T) {
	src, sdir := localStorage(t)
	dst, ddir := localStorage(t)
	data := randBytes(1, 300000)
	put(t, sdir, "a.bak", data)
	other := bytes.Clone(data)
	other[123456] ^= 1 // same size, other hash
	put(t, ddir, "a.bak", other)
	put(t, ddir, "b.bak", data[:1000]) // other size
	put(t, sdir, "b.bak", data)
	c := copier.New(copier.Options{ChunkSize: 64 << 10})
	for _, name := range []string{"a.bak", "b.bak"} {
		_, err := c.Copy(context.Background(), src, dst, []copier.Job{{Src: name, Dst: name}})
		t.Logf("%s: %v", name, err)
		if !errors.Is(err, copier.ErrDifferentContent) || !errors.Is(err, storage.ErrExists) || storage.IsRetryable(err) {
			t.Fatalf("%s: copy onto a different file: %v, want non-retryable ErrDifferentContent", name, err)
		}
	}
	if !bytes.Equal(read(t, ddir, "a.bak"), other) || !bytes.Equal(read(t, ddir, "b.bak"), data[:1000]) {
		t.Fatal("an existing destination file was overwritten")
	}
}

// TestResumeAfterCrash: writes fail mid-way (the destination "crashes"); the
// next attempt resumes from the last progress, re-sends at most one chunk,
// and does not re-read the confirmed prefix of the source.
func TestResumeAfterCrash(t *testing.T) {
	const chunk = 64 << 10
	for _, inFlight := range []int{1, 4} {
		t.Run(fmt.Sprintf("inflight=%d", inFlight), func(t *testing.T) {
			s0, sdir := localStorage(t)
			d0, ddir := localStorage(t)
			src, dst := newFaulty(s0), newFaulty(d0)
			data := randBytes(7, 40*chunk+999)
			put(t, sdir, "s.bak", data)
			var last copier.Progress
			opts := copier.Options{ChunkSize: chunk, InFlight: inFlight, Progress: func(p copier.Progress) {
				// Round-trip through JSON as a heartbeat would.
				b, _ := json.Marshal(p)
				last = copier.Progress{}
				_ = json.Unmarshal(b, &last)
			}}
			dst.failAfter.Store(int64(len(data) / 2))
			res, err := copier.New(opts).Copy(context.Background(), src, dst, []copier.Job{{Src: "s.bak", Dst: "s.bak"}})
			if !errors.Is(err, storage.ErrConnection) || !storage.IsRetryable(err) {
				t.Fatalf("first attempt: %v, want the injected retryable error", err)
			}
			sent1 := res[0].BytesSent
			if last.Offset == 0 || last.Offset >= int64(len(data)) || last.BytesSent != sent1 {
				t.Fatalf("checkpoint %+v after a crash at 50%% (sent %d)", last, sent1)
			}
			if _, err := d0.Stat(context.Background(), "s.bak"); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("final name exists after a failed copy: %v", err)
			}

			dst.failAfter.Store(-1)
			src.readBytes.Store(0)
			resume := last
			res, err = copier.New(opts).Copy(context.Background(), src, dst, []copier.Job{{Src: "s.bak", Dst: "s.bak", Resume: &resume}})
			if err != nil {
				t.Fatal(err)
			}
			r := res[0]
			if r.ResumedAt != resume.Offset || r.SHA256 != sum(data) {
				t.Fatalf("resumed copy: %+v, want resumed at %d with sha256 %s", r, resume.Offset, sum(data))
			}
			resent := sent1 + r.BytesSent - int64(len(data))
			t.Logf("checkpoint offset %d, %d chunks ahead; sent %d then %d: re-sent %d bytes", resume.Offset, len(resume.Ahead), sent1, r.BytesSent, resent)
			if resent < 0 || resent > chunk {
				t.Fatalf("sent %d + %d bytes for a %d-byte file: re-sent %d, want 0..%d", sent1, r.BytesSent, len(data), resent, chunk)
			}
			if got := src.readBytes.Load(); got > int64(len(data))-resume.Offset {
				t.Fatalf("resumed copy read %d source bytes, more than the %d after the confirmed offset", got, int64(len(data))-resume.Offset)
			}
			if !bytes.Equal(read(t, ddir, "s.bak"), data) {
				t.Fatal("resumed copy content differs")
			}
		})
	}
}

// crashedHalfway runs a copy of name from src to dst that fails half-way
// (dst's writes stop), as an attempt that crashed leaves it, and returns the
// options (chunk, in flight, progress) and its last checkpoint, which the
// options keep updating.
func crashedHalfway(t *testing.T, src storage.Storage, dst *faulty, name string, size int, chunk int64, inFlight int) (copier.Options, *copier.Progress) {
	t.Helper()
	last := new(copier.Progress)
	opts := copier.Options{ChunkSize: chunk, InFlight: inFlight, Progress: func(p copier.Progress) { *last = p }}
	dst.failAfter.Store(int64(size / 2))
	if _, err := copier.New(opts).Copy(context.Background(), src, dst, []copier.Job{{Src: name, Dst: name}}); err == nil {
		t.Fatal("first attempt succeeded despite the injected failure")
	}
	dst.failAfter.Store(-1)
	return opts, last
}

// halfCopied puts a file of 20 chunks of random bytes (seed) into a new
// source and copies it half-way to a new destination (crashedHalfway).
func halfCopied(t *testing.T, seed uint64, name string, chunk int64, inFlight int) (storage.Storage, *faulty, string, []byte, copier.Options, *copier.Progress) {
	t.Helper()
	s0, sdir := localStorage(t)
	d0, ddir := localStorage(t)
	dst := newFaulty(d0)
	data := randBytes(seed, int(20*chunk))
	put(t, sdir, name, data)
	opts, last := crashedHalfway(t, s0, dst, name, len(data), chunk, inFlight)
	return s0, dst, ddir, data, opts, last
}

// TestResumeCorruptPartial: a partial file changed behind the copier's back
// no longer matches its checkpoint: the read-back finds it before the
// rename and the file is copied again from the start in the same call
// (ResumeRejected), never renamed with the change and never an error that
// blames the source.
func TestResumeCorruptPartial(t *testing.T) {
	const chunk = 64 << 10
	s0, dst, ddir, data, opts, last := halfCopied(t, 8, "c.bak", chunk, 2)
	partial := filepath.Join(ddir, "c.bak.partial")
	b := read(t, ddir, "c.bak.partial")
	b[10] ^= 0xff // inside the confirmed prefix
	if err := os.WriteFile(partial, b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := copier.New(opts).Copy(context.Background(), s0, dst, []copier.Job{{Src: "c.bak", Dst: "c.bak", Resume: last}})
	if err != nil || !res[0].ResumeRejected || res[0].ResumedAt != 0 || !bytes.Equal(read(t, ddir, "c.bak"), data) {
		t.Fatalf("resume over a corrupt partial: %+v, %v; want it copied again from the start", res, err)
	}
	if _, err := os.Stat(partial); !os.IsNotExist(err) {
		t.Fatal("the corrupt partial file was left behind")
	}
}

// TestForgedCheckpointsAreNotTrusted: a checkpoint comes back from an
// activity's heartbeat, which anyone polling its task queue can forge. One
// whose hash state is not that of the partial file's prefix, or that
// counts a chunk as written that is not, costs a copy from the start and
// nothing else: the file ends with the source's bytes and hash, whatever
// the chunk size and read-back mode.
func TestForgedCheckpointsAreNotTrusted(t *testing.T) {
	const chunk = 64 << 10
	emptyState := func(p *copier.Progress, size int64) {
		p.HashState, _ = sha256.New().(encoding.BinaryMarshaler).MarshalBinary()
	}
	for _, tc := range []struct {
		name   string
		opts   copier.Options
		forge  func(p *copier.Progress, size int64)
		wantRB bool // the rejection is reported
	}{
		{"hash state of nothing", copier.Options{}, emptyState, true},
		{"offset at the end", copier.Options{}, func(p *copier.Progress, size int64) { p.Offset, p.Ahead = size, nil }, true},
		{"chunk ahead never written", copier.Options{}, func(p *copier.Progress, size int64) {
			p.Ahead = []int64{p.Offset + 2*chunk}
		}, true},
		{"read back after the copy", copier.Options{ReadBackAfterCopy: true}, emptyState, true},
		// Checked before the resume: a fresh copy from the start.
		{"no read-back", copier.Options{SkipReadBack: true}, emptyState, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s0, dst, ddir, data, opts, last := halfCopied(t, 11, "f.bak", chunk, 1)
			if last.Offset == 0 {
				t.Fatal("the first attempt confirmed nothing")
			}
			forged := *last
			tc.forge(&forged, int64(len(data)))
			opts.SkipReadBack, opts.ReadBackAfterCopy = tc.opts.SkipReadBack, tc.opts.ReadBackAfterCopy
			res, err := copier.New(opts).Copy(context.Background(), s0, dst, []copier.Job{{Src: "f.bak", Dst: "f.bak", Resume: &forged}})
			if err != nil {
				t.Fatalf("copy with a forged checkpoint: %v; want it copied from the start", err)
			}
			sum := sha256.Sum256(data)
			if !bytes.Equal(read(t, ddir, "f.bak"), data) || res[0].SHA256 != hex.EncodeToString(sum[:]) || res[0].ResumedAt != 0 {
				t.Fatalf("result %+v: want the source's bytes and hash, copied from 0", res[0])
			}
			if res[0].ResumeRejected != tc.wantRB {
				t.Errorf("ResumeRejected = %v, want %v", res[0].ResumeRejected, tc.wantRB)
			}
		})
	}
	// The genuine checkpoint still resumes where it says.
	s0, dst, ddir, data, opts, last := halfCopied(t, 12, "g.bak", chunk, 1)
	resume := *last // opts.Progress keeps updating last
	res, err := copier.New(opts).Copy(context.Background(), s0, dst, []copier.Job{{Src: "g.bak", Dst: "g.bak", Resume: &resume}})
	if err != nil || resume.Offset == 0 || res[0].ResumedAt != resume.Offset || res[0].ResumeRejected || !bytes.Equal(read(t, ddir, "g.bak"), data) {
		t.Fatalf("genuine resume: %+v, %v; want it resumed at %d", res, err, resume.Offset)
	}
}

func TestNoSpace(t *testing.T) {
	src, sdir := localStorage(t)
	d0, _ := localStorage(t)
	put(t, sdir, "big.bak", randBytes(9, 1000))
	dst := &tinyDisk{Storage: d0, free: 999}
	_, err := copier.New(copier.Options{}).Copy(context.Background(), src, dst, []copier.Job{{Src: "big.bak", Dst: "big.bak"}})
	if !errors.Is(err, storage.ErrNoSpace) || storage.IsRetryable(err) {
		t.Fatalf("copy to a full destination: %v, want non-retryable ErrNoSpace", err)
	}
	if left, _ := d0.List(context.Background(), "", ""); len(left) != 0 {
		t.Fatalf("a copy that cannot fit left files: %v", left)
	}
}

type tinyDisk struct {
	storage.Storage
	free int64
}

func (d *tinyDisk) FreeSpace(context.Context) (int64, bool, error) { return d.free, true, nil }

func TestMissingSource(t *testing.T) {
	src, _ := localStorage(t)
	dst, _ := localStorage(t)
	_, err := copier.New(copier.Options{}).Copy(context.Background(), src, dst, []copier.Job{{Src: "nope.bak", Dst: "nope.bak"}})
	if !errors.Is(err, storage.ErrNotFound) || storage.IsRetryable(err) {
		t.Fatalf("copy of a missing file: %v, want ErrNotFound", err)
	}
}

func TestBadJobs(t *testing.T) {
	src, _ := localStorage(t)
	dst, _ := localStorage(t)
	for _, jobs := range [][]copier.Job{
		{{Src: "a.bak", Dst: ""}},
		{{Src: "a.bak", Dst: "x.bak"}, {Src: "b.bak", Dst: "x.bak"}},
	} {
		if _, err := copier.New(copier.Options{}).Copy(context.Background(), src, dst, jobs); !errors.Is(err, storage.ErrInvalidName) {
			t.Errorf("Copy(%v) = %v, want ErrInvalidName", jobs, err)
		}
	}
}

// TestBandwidthLimit: at 1 MiB/s, 8 MiB cannot be written within half a
// second, so the copy runs into its deadline; the same copy without a limit
// completes.
func TestBandwidthLimit(t *testing.T) {
	src, sdir := localStorage(t)
	dst, _ := localStorage(t)
	put(t, sdir, "l.bak", randBytes(11, 8<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := copier.New(copier.Options{Limit: limit.New(1 << 20)}).Copy(ctx, src, dst, []copier.Job{{Src: "l.bak", Dst: "l.bak"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("8 MiB at 1 MiB/s within 0.5s: %v, want the deadline to expire", err)
	}
	if _, err := copier.New(copier.Options{}).Copy(context.Background(), src, dst, []copier.Job{{Src: "l.bak", Dst: "l.bak"}}); err != nil {
		t.Fatalf("the same copy without a limit: %v", err)
	}
}

// TestBandwidthLimitSharedByConcurrentCopies: two copies into one server,
// each with its own Copier but the server's Limiter, write at most the
// limit together (measured over the copies, with a tolerance for the burst
// and the timers).
func TestBandwidthLimitSharedByConcurrentCopies(t *testing.T) {
	const rate, size = 4 << 20, 4 << 20
	dst, _ := localStorage(t)
	lim := limit.New(rate)
	start := time.Now()
	var wg sync.WaitGroup
	var sent [2]int64
	for i := range 2 {
		src, sdir := localStorage(t)
		name := fmt.Sprintf("s%d.bak", i)
		put(t, sdir, name, randBytes(uint64(20+i), size))
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := copier.New(copier.Options{Limit: lim, ChunkSize: 1 << 20}).Copy(context.Background(), src, dst, []copier.Job{{Src: name, Dst: name}})
			if err != nil {
				t.Error(err)
				return
			}
			sent[i] = res[0].BytesSent
		}()
	}
	wg.Wait()
	took := time.Since(start).Seconds()
	total := sent[0] + sent[1]
	got := float64(total) / took
	// 8 MiB less the 1 MiB burst at 4 MiB/s: 1.75 s; with a limiter per
	// copy they would have finished in half that.
	if total != 2*size || got > rate*1.25 || took < 1.6 {
		t.Fatalf("two copies sharing %d B/s sent %d bytes in %.2fs (%.0f B/s), want %d bytes in about 1.75s",
			rate, total, took, got, 2*size)
	}
	t.Logf("two copies sharing 4 MiB/s: %.2f MiB/s over %.2fs", got/(1<<20), took)
}

// TestResumeDuringVerify: an attempt that dies while reading the destination
// back resumes from a checkpoint taken during the read-back: nothing is sent
// again, the file is verified and renamed.
func TestResumeDuringVerify(t *testing.T) {
	const chunk = 64 << 10
	src, sdir := localStorage(t)
	d0, ddir := localStorage(t)
	data := randBytes(12, 10*chunk+5)
	put(t, sdir, "v.bak", data)
	var last copier.Progress
	ctx, cancel := context.WithCancel(context.Background())
	opts := copier.Options{ChunkSize: chunk, InFlight: 2, Progress: func(p copier.Progress) {
		last = p
		if p.Checked > 0 && p.Offset == int64(len(data)) {
			cancel() // the worker dies during the read-back, everything sent
		}
	}}
	if _, err := copier.New(opts).Copy(ctx, src, d0, []copier.Job{{Src: "v.bak", Dst: "v.bak"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("first attempt: %v, want canceled during the read-back", err)
	}
	if last.Checked == 0 || last.Offset != int64(len(data)) || len(last.HashState) == 0 {
		t.Fatalf("checkpoint during the read-back: %+v", last)
	}
	opts.Progress = nil
	resume := last
	res, err := copier.New(opts).Copy(context.Background(), src, d0, []copier.Job{{Src: "v.bak", Dst: "v.bak", Resume: &resume}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].BytesSent != 0 || res[0].ResumedAt != int64(len(data)) || res[0].SHA256 != sum(data) {
		t.Fatalf("resumed from the read-back: %+v, want nothing sent and sha256 %s", res[0], sum(data))
	}
	if !bytes.Equal(read(t, ddir, "v.bak"), data) {
		t.Fatal("content differs")
	}
}

// TestResumeAfterSourceChanged: a checkpoint of another version of the source
// (same size, rewritten) is not resumed: the copy starts over and the result
// is the new content, not a mix.
func TestResumeAfterSourceChanged(t *testing.T) {
	const chunk = 64 << 10
	s0, sdir := localStorage(t)
	d0, ddir := localStorage(t)
	dst := newFaulty(d0)
	old := randBytes(13, 16*chunk)
	put(t, sdir, "s.bak", old)
	opts, last := crashedHalfway(t, s0, dst, "s.bak", len(old), chunk, 2)
	newer := randBytes(14, len(old))
	put(t, sdir, "s.bak", newer)
	mt := time.Unix(0, last.SrcModTime).Add(time.Second)
	if err := os.Chtimes(filepath.Join(sdir, "s.bak"), mt, mt); err != nil {
		t.Fatal(err)
	}
	res, err := copier.New(opts).Copy(context.Background(), s0, dst, []copier.Job{{Src: "s.bak", Dst: "s.bak", Resume: last}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].ResumedAt != 0 || !bytes.Equal(read(t, ddir, "s.bak"), newer) {
		t.Fatalf("copy of a rewritten source resumed at %d or holds other content", res[0].ResumedAt)
	}
}

// TestExpectedHash: a source that does not match the catalog's sha256 is not
// copied; an existing destination is checked against the catalog's sha256
// without reading the source again.
func TestExpectedHash(t *testing.T) {
	s0, sdir := localStorage(t)
	dst, ddir := localStorage(t)
	src := newFaulty(s0)
	data := randBytes(15, 300000)
	put(t, sdir, "e.bak", data)
	_, err := copier.New(copier.Options{}).Copy(context.Background(), src, dst, []copier.Job{{Src: "e.bak", Dst: "e.bak", SHA256: sum([]byte("other"))}})
	if !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("source not matching the catalog: %v, want ErrCorrupt", err)
	}
	if left, _ := dst.List(context.Background(), "", ""); len(left) != 0 {
		t.Fatalf("a source not matching the catalog left %v", left)
	}
	if _, err := copier.New(copier.Options{}).Copy(context.Background(), src, dst, []copier.Job{{Src: "e.bak", Dst: "e.bak", SHA256: sum(data)}}); err != nil {
		t.Fatal(err)
	}
	src.readBytes.Store(0)
	res, err := copier.New(copier.Options{}).Copy(context.Background(), src, dst, []copier.Job{{Src: "e.bak", Dst: "e.bak", SHA256: sum(data)}})
	if err != nil || !res[0].AlreadyThere || src.readBytes.Load() != 0 {
		t.Fatalf("existing copy checked against the catalog: %+v, %v, %d source bytes read (want 0)", res, err, src.readBytes.Load())
	}
	if !bytes.Equal(read(t, ddir, "e.bak"), data) {
		t.Fatal("content differs")
	}
}

// TestPlantedPartialLinkIsNeverWrittenThrough: between two attempts,
// someone who can write the destination share replaces the partial file by
// a symbolic link to a file outside it. The resumed copy writes nothing
// through the link: it starts over in a partial file of its own, and the
// file outside keeps its bytes.
func TestPlantedPartialLinkIsNeverWrittenThrough(t *testing.T) {
	const chunk = 64 << 10
	s0, sdir := localStorage(t)
	d0, ddir := localStorage(t)
	dst := newFaulty(d0)
	data := randBytes(11, 16*chunk)
	put(t, sdir, "s_1of8.bak", data)
	opts, last := crashedHalfway(t, s0, dst, "s_1of8.bak", len(data), chunk, 1)
	victim := filepath.Join(t.TempDir(), "victim")
	before := bytes.Repeat([]byte("VICTIM"), len(data)/6+1)
	if err := os.WriteFile(victim, before, 0o600); err != nil {
		t.Fatal(err)
	}
	partial := filepath.Join(ddir, "s_1of8.bak"+copier.DefaultTempSuffix)
	if err := os.Remove(partial); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, partial); err != nil {
		t.Fatal(err)
	}
	resume := *last
	res, err := copier.New(opts).Copy(context.Background(), s0, dst, []copier.Job{{Src: "s_1of8.bak", Dst: "s_1of8.bak", Resume: &resume}})
	if after, _ := os.ReadFile(victim); !bytes.Equal(after, before) {
		t.Errorf("the file the planted link points to was written")
	}
	if err != nil {
		t.Fatalf("resumed copy: %v", err)
	}
	if res[0].ResumedAt != 0 || !bytes.Equal(read(t, ddir, "s_1of8.bak"), data) {
		t.Errorf("resumed copy: %+v, want a fresh copy of the source", res[0])
	}
	if fi, err := os.Lstat(filepath.Join(ddir, "s_1of8.bak")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("destination: %v, %v; want a regular file", fi, err)
	}
}

// TestSourceLinkIsNotCopied: a stripe name on the source share that is a
// symbolic link to a secret of the worker's machine is refused, not read
// and copied to the remote site.
func TestSourceLinkIsNotCopied(t *testing.T) {
	s0, sdir := localStorage(t)
	d0, ddir := localStorage(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(sdir, "s_1of1.bak")); err != nil {
		t.Fatal(err)
	}
	_, err := copier.New(copier.Options{}).Copy(context.Background(), s0, d0, []copier.Job{{Src: "s_1of1.bak", Dst: "s_1of1.bak"}})
	if storage.ErrorType(err) != "StorageNotRegular" || storage.IsRetryable(err) {
		t.Errorf("copy of a link: %v (%s), want a non-retryable StorageNotRegular", err, storage.ErrorType(err))
	}
	entries, _ := os.ReadDir(ddir)
	for _, e := range entries {
		if b, _ := os.ReadFile(filepath.Join(ddir, e.Name())); bytes.Contains(b, []byte("SECRET")) {
			t.Errorf("the secret reached the destination in %s", e.Name())
		}
	}
}
