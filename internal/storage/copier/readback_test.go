package copier_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
	"github.com/backupcycle/backupcycle/internal/storage/limit"
)

// flipper is a destination that acknowledges a write and then holds other
// bytes than it was sent: once the write covering flipAt returns, the byte at
// flipAt is changed on disk. It models a server, cache or disk that corrupts
// what it stored after accepting it.
type flipper struct {
	storage.Storage
	dir    string
	flipAt int64
	mu     sync.Mutex
	flips  int
}

func (f *flipper) Create(ctx context.Context, name string) (storage.Writer, error) {
	w, err := f.Storage.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return &flipWriter{Writer: w, f: f, path: filepath.Join(f.dir, name)}, nil
}

type flipWriter struct {
	storage.Writer
	f    *flipper
	path string
}

func (w *flipWriter) WriteAt(p []byte, off int64) (int, error) {
	n, err := w.Writer.WriteAt(p, off)
	if err != nil || w.f.flipAt < off || w.f.flipAt >= off+int64(n) {
		return n, err
	}
	// Before the write returns: the copier cannot have read this byte back
	// yet, whichever way it reads back.
	fh, ferr := os.OpenFile(w.path, os.O_RDWR, 0)
	if ferr != nil {
		return n, ferr
	}
	defer fh.Close()
	b := []byte{p[w.f.flipAt-off] ^ 0x01}
	if _, ferr := fh.WriteAt(b, w.f.flipAt); ferr != nil {
		return n, ferr
	}
	w.f.mu.Lock()
	w.f.flips++
	w.f.mu.Unlock()
	return n, nil
}

var readBackModes = []struct {
	name string
	opts copier.Options
}{
	{"overlapped", copier.Options{}},
	{"after-copy", copier.Options{ReadBackAfterCopy: true}},
}

// TestReadBackCatchesByteFlippedAfterWrite: a destination byte that changes
// after its write was acknowledged fails the copy with ErrCorrupt, whether
// the read-back overlaps the writing or follows it; nothing is renamed and
// the bad partial file is removed.
func TestReadBackCatchesByteFlippedAfterWrite(t *testing.T) {
	const chunk = 64 << 10
	data := randBytes(21, 10*chunk+7)
	for _, mode := range readBackModes {
		for _, at := range []int64{0, 5*chunk + 3, int64(len(data)) - 1} {
			t.Run(mode.name, func(t *testing.T) {
				src, sdir := localStorage(t)
				d, ddir := localStorage(t)
				put(t, sdir, "f.bak", data)
				dst := &flipper{Storage: d, dir: ddir, flipAt: at}
				opts := mode.opts
				opts.ChunkSize, opts.InFlight = chunk, 2
				_, err := copier.New(opts).Copy(context.Background(), src, dst, []copier.Job{{Src: "f.bak", Dst: "f.bak"}})
				if dst.flips != 1 {
					t.Fatalf("flipped %d times, want once", dst.flips)
				}
				if !errors.Is(err, storage.ErrCorrupt) {
					t.Fatalf("byte %d flipped after its write: %v, want ErrCorrupt", at, err)
				}
				if entries, _ := os.ReadDir(ddir); len(entries) != 0 {
					t.Fatalf("a copy that failed its read-back left %d files", len(entries))
				}
			})
		}
	}
}

// TestReadBackOverlapsWriting: with the writes throttled, the destination is
// read back while later chunks are still being written (a checkpoint has
// bytes checked before everything is sent), and the copy still ends with the
// file verified and renamed.
func TestReadBackOverlapsWriting(t *testing.T) {
	const chunk = 64 << 10
	src, sdir := localStorage(t)
	dst, ddir := localStorage(t)
	// 2 MiB at 2 MiB/s, of which the limiter's burst (a quarter second)
	// goes at once: the rest takes about 0.75 s to write.
	data := randBytes(22, 32*chunk)
	put(t, sdir, "o.bak", data)
	var overlapped bool
	opts := copier.Options{ChunkSize: chunk, InFlight: 2, Limit: limit.New(2 << 20), Progress: func(p copier.Progress) {
		if p.Checked > 0 && p.Offset < p.Size {
			overlapped = true
		}
	}}
	res, err := copier.New(opts).Copy(context.Background(), src, dst, []copier.Job{{Src: "o.bak", Dst: "o.bak"}})
	if err != nil {
		t.Fatal(err)
	}
	if !overlapped {
		t.Fatal("no checkpoint with bytes read back before the whole file was written")
	}
	if res[0].SHA256 != sum(data) || !bytes.Equal(read(t, ddir, "o.bak"), data) {
		t.Fatalf("copied %+v: content differs", res[0])
	}
}

// failingReads is a destination whose reads fail: a read-back that cannot
// read stops the copy with its own error, while the writing is still going.
type failingReads struct{ storage.Storage }

var errReadInjected = errors.New("injected read failure")

func (f failingReads) OpenRead(ctx context.Context, name string) (storage.Reader, error) {
	r, err := f.Storage.OpenRead(ctx, name)
	if err != nil {
		return nil, err
	}
	return failingReader{r}, nil
}

type failingReader struct{ storage.Reader }

func (failingReader) ReadAt([]byte, int64) (int, error) { return 0, errReadInjected }

func TestReadBackFailureStopsCopy(t *testing.T) {
	const chunk = 64 << 10
	src, sdir := localStorage(t)
	d, ddir := localStorage(t)
	put(t, sdir, "e.bak", randBytes(23, 64*chunk))
	// 4 MiB at 1 MiB/s: the writing alone takes 4 s; the failed read-back
	// must end the copy well before.
	opts := copier.Options{ChunkSize: chunk, InFlight: 2, Limit: limit.New(1 << 20)}
	start := time.Now()
	_, err := copier.New(opts).Copy(context.Background(), src, failingReads{d}, []copier.Job{{Src: "e.bak", Dst: "e.bak"}})
	if !errors.Is(err, errReadInjected) {
		t.Fatalf("copy with a failing read-back: %v, want the read error", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the copy went on for %v after its read-back failed", took)
	}
	if _, err := os.Stat(filepath.Join(ddir, "e.bak")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("final file after a failed read-back: %v", err)
	}
}
