// Package copier copies big backup files (stripes of tens to hundreds of GiB)
// between two storages: several chunks in flight per file, several files in
// parallel, SHA-256 computed while streaming, resumable from the last confirmed
// offset, written under a temporary name and renamed only after the
// destination was read back and its size and hash match. The read-back runs
// while the file is written, each chunk once it is written, so that a path
// whose write direction is the bottleneck reads back in the idle direction.
// An existing final file is never overwritten.
package copier

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/limit"
)

// Options tune a Copier. Zero values take the defaults.
type Options struct {
	// ChunkSize is the unit of reads, writes and progress. Default 4 MiB.
	ChunkSize int64
	// InFlight is the number of chunks read/written concurrently per file
	// (each chunk itself goes out as concurrent 1 MiB SMB requests).
	// Default 2: enough to overlap reading one chunk with writing the
	// previous; more only added CPU on loopback (BenchmarkSMB).
	InFlight int
	// Files is the number of files copied in parallel. Default 4.
	Files int
	// Limit caps the writes to the destination, all files together and
	// together with every other Copy given the same Limiter (one per
	// backup server: concurrent copies into it share its bandwidth). nil =
	// unlimited.
	Limit *limit.Limiter
	// Progress is called whenever a file's confirmed offset advances or a
	// chunk beyond it is written; calls are serialized. An activity records
	// the latest Progress per file in its heartbeat and hands it back as
	// Job.Resume on retry.
	Progress func(Progress)
	// TempSuffix names the file while it is written. Default
	// DefaultTempSuffix.
	TempSuffix string
	// SkipReadBack trusts the hash streamed from the source instead of
	// reading the destination back before the rename. Faster, but it does
	// not prove what the destination holds; for benchmarks only.
	SkipReadBack bool
	// ReadBackAfterCopy reads the destination back only once the whole file
	// is written, instead of reading each chunk back as soon as it and every
	// chunk before it are written, while later chunks are still being sent.
	// Both prove the same thing: every byte is read after its only write.
	// Overlapping uses the read direction of the path while the write
	// direction is busy (2*InFlight more chunk buffers per file); for
	// benchmarks comparing the two.
	ReadBackAfterCopy bool
}

const (
	DefaultChunkSize = 4 << 20
	DefaultInFlight  = 2
	DefaultFiles     = 4
)

// Job is one file to copy.
type Job struct {
	Src string // name in the source storage
	Dst string // final name in the destination storage
	// Resume is the last Progress reported for this file by an earlier
	// attempt, or nil to start from the beginning.
	Resume *Progress
	// SHA256 is the expected hex sha256 of the source (from the catalog), or
	// empty. When set, a source that does not match is an error, and an
	// existing final file is compared with it without reading the source.
	SHA256 string
}

// Progress is a resumable checkpoint of one file: [0, Offset) of the source
// is written to the temporary destination file and hashed into HashState;
// the chunks at Ahead are written too. It is small (a few hundred bytes) and
// JSON-serializable for a heartbeat.
type Progress struct {
	File string `json:"file"` // Job.Dst
	Size int64  `json:"size"` // source size
	// SrcModTime (Unix ns) ties the checkpoint to one version of the source:
	// a source rewritten with the same size must not resume onto a partial
	// file of its old content.
	SrcModTime int64   `json:"src_mtime"`
	ChunkSize  int64   `json:"chunk_size"`
	Offset     int64   `json:"offset"`
	HashState  []byte  `json:"hash_state"`      // sha256 state at Offset (encoding.BinaryMarshaler)
	Ahead      []int64 `json:"ahead,omitempty"` // offsets of chunks written beyond Offset
	BytesSent  int64   `json:"bytes_sent"`      // written to the destination by this attempt
	// Checked counts the bytes read back and hashed so far while the
	// destination is verified (Offset == Size then), or compared when the
	// final file existed already: reading hundreds of GiB back takes long
	// enough to need heartbeats of its own.
	Checked int64 `json:"checked,omitempty"`
	Done    bool  `json:"done"` // verified and renamed
}

// Result describes one finished (or failed) file.
type Result struct {
	Src, Dst     string
	Size         int64
	SHA256       string // hex, of the content verified at both ends
	BytesSent    int64  // written to the destination by this call
	ResumedAt    int64  // offset this call continued from
	AlreadyThere bool   // the destination already held this content
	// ResumeRejected: Job.Resume did not hold for the partial file (its
	// hash state is not that of the bytes on disk, or a chunk it counts as
	// written is not there): the file was copied again from the start.
	ResumeRejected bool
	Err            error
}

// DefaultTempSuffix is appended to a file's name while it is copied.
const DefaultTempSuffix = ".partial"

// errResumeRejected: a resumed file's checkpoint did not hold for the
// partial file on disk. The checkpoint comes back from whoever kept it (an
// activity's heartbeat, which anyone polling its task queue can forge): the
// file is copied again from the start, and the mismatch says nothing about
// the source.
var errResumeRejected = errors.New("the resume checkpoint does not hold for the partial file")

// ErrDifferentContent: the final destination file exists with other content;
// it is never overwritten. The error that wraps it also wraps
// storage.ErrExists (not retryable).
var ErrDifferentContent = errors.New("with different content, not overwriting it")

// ErrReadBack: the destination's partial file, read back, is not what was
// written to it (its bytes or its size): the destination's failure (its
// disk, the network path to it, another writer of the same partial file),
// never the source's, whose bytes hashed as they were sent. The next copy
// writes the file again. The error that wraps it also wraps
// storage.ErrCorrupt.
var ErrReadBack = errors.New("the destination read back otherwise than written")

// readBackErr marks a content mismatch met reading the destination back as
// ErrReadBack.
func readBackErr(err error) error {
	if errors.Is(err, storage.ErrCorrupt) && !errors.Is(err, ErrReadBack) {
		return fmt.Errorf("%w: %w", ErrReadBack, err)
	}
	return err
}

// Copier copies files with fixed Options. It is safe for concurrent use.
type Copier struct {
	opts Options
}

// New returns a Copier.
func New(opts Options) *Copier {
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	if opts.InFlight <= 0 {
		opts.InFlight = DefaultInFlight
	}
	if opts.Files <= 0 {
		opts.Files = DefaultFiles
	}
	if opts.TempSuffix == "" {
		opts.TempSuffix = DefaultTempSuffix
	}
	return &Copier{opts: opts}
}

// Copy copies jobs from src to dst, opts.Files at a time. The first failure
// cancels the other files (their progress stays resumable). Results are in
// job order; the error joins the failed files' errors.
func (c *Copier) Copy(ctx context.Context, src, dst storage.Storage, jobs []Job) ([]Result, error) {
	seen := map[string]bool{}
	for _, j := range jobs {
		if j.Src == "" || j.Dst == "" {
			return nil, fmt.Errorf("copier: a job needs a source and a destination name, got %q -> %q: %w", j.Src, j.Dst, storage.ErrInvalidName)
		}
		if seen[j.Dst] {
			return nil, fmt.Errorf("copier: %q is the destination of two jobs: %w", j.Dst, storage.ErrInvalidName)
		}
		seen[j.Dst] = true
	}
	dst = limit.Wrap(dst, limit.Rates{Write: c.opts.Limit})
	var progressMu sync.Mutex
	report := func(p Progress) {
		if c.opts.Progress == nil {
			return
		}
		progressMu.Lock()
		defer progressMu.Unlock()
		c.opts.Progress(p)
	}
	results := make([]Result, len(jobs))
	for i, err := range storage.EachFile(ctx, len(jobs), c.opts.Files, func(ctx context.Context, i int) error {
		fc := &fileCopy{c: c, src: src, dst: dst, job: jobs[i], report: report}
		results[i] = fc.run(ctx)
		return results[i].Err
	}) {
		if results[i].Src == "" { // never started
			results[i] = Result{Src: jobs[i].Src, Dst: jobs[i].Dst, Err: err}
		}
	}
	var errs []error
	for _, r := range results {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("copy %s %q to %s %q: %w", src.Location(), r.Src, dst.Location(), r.Dst, r.Err))
		}
	}
	return results, errors.Join(errs...)
}

// fileCopy is the state of one file's copy.
type fileCopy struct {
	c      *Copier
	src    storage.Storage
	dst    storage.Storage
	job    Job
	report func(Progress)

	size  int64
	mtime int64 // source modification time, Unix ns
	chunk int64
	tmp   string
	sent  atomic.Int64

	// lastMu orders the checkpoints the streaming and the read-back report.
	lastMu  sync.Mutex
	last    Progress     // the last streaming checkpoint: the resume point while verifying
	checked atomic.Int64 // bytes of the destination read back and hashed
}

// reportChecked reports the last streaming checkpoint with the bytes read
// back so far.
func (f *fileCopy) reportChecked(n int64) {
	f.checked.Store(n)
	f.lastMu.Lock()
	defer f.lastMu.Unlock()
	p := f.last
	p.Checked, p.BytesSent = n, f.sent.Load()
	f.report(p)
}

// run copies the file, resuming from Job.Resume when it holds; a
// checkpoint found not to hold (errResumeRejected) costs a copy from the
// start, never an error.
func (f *fileCopy) run(ctx context.Context) Result {
	res := f.attempt(ctx)
	if errors.Is(res.Err, errResumeRejected) && ctx.Err() == nil {
		f.job.Resume = nil
		f.checked.Store(0)
		res = f.attempt(ctx)
		res.ResumeRejected = true
	}
	return res
}

func (f *fileCopy) attempt(ctx context.Context) (res Result) {
	res = Result{Src: f.job.Src, Dst: f.job.Dst}
	defer func() { res.BytesSent = f.sent.Load() }()
	fi, err := f.src.Stat(ctx, f.job.Src)
	if err != nil {
		res.Err = err
		return res
	}
	f.size, res.Size, f.mtime = fi.Size, fi.Size, fi.ModTime.UnixNano()
	f.tmp = f.job.Dst + f.c.opts.TempSuffix

	// An existing final file is done when it holds the same content, an
	// error otherwise; never overwritten.
	if sum, done, err := f.existing(ctx, f.job.Dst); done || err != nil {
		res.SHA256, res.AlreadyThere, res.Err = sum, err == nil, err
		if err == nil {
			_ = f.dst.Remove(ctx, f.tmp) // a leftover of an attempt that renamed, then crashed
			f.report(Progress{File: f.job.Dst, Size: f.size, Offset: f.size, Done: true})
		}
		return res
	}

	// Cancel in-flight I/O of this file when any part of it fails.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	w, st, err := f.prepare(ctx)
	if err != nil {
		res.Err = err
		return res
	}
	res.ResumedAt = st.offset
	resumed := st.offset > 0 || len(st.ahead) > 0
	var rb *readBack
	if !f.c.opts.SkipReadBack && !f.c.opts.ReadBackAfterCopy {
		rb, err = f.startReadBack(ctx, cancel, w, st)
		if err != nil {
			_ = w.Close()
			f.dropIfNoSpace(ctx, err)
			res.Err = err
			return res
		}
		// Whatever happens next, the read-back ends before this file does.
		defer rb.stop()
	}
	streamed, err := f.stream(ctx, w, st, rb)
	if cerr := w.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil && rb != nil {
		// A failed read-back cancels the streaming: report its error, not
		// the cancellation.
		if _, rerr := rb.stop(); rerr != nil && !errors.Is(rerr, context.Canceled) {
			err = readBackErr(rerr)
		}
	}
	if err != nil {
		f.dropIfNoSpace(ctx, err)
		res.Err = err
		return res
	}
	res.SHA256 = hex.EncodeToString(streamed)
	if f.job.SHA256 != "" && !strings.EqualFold(f.job.SHA256, res.SHA256) {
		if rb != nil {
			_, _ = rb.stop() // its handle would keep the file from being removed
		}
		_ = f.dst.Remove(ctx, f.tmp)
		if resumed {
			// The hash continued from the checkpoint's state: it says
			// nothing about the source.
			res.Err = fmt.Errorf("%w: sha256 %s continued from it, the catalog expects %s", errResumeRejected, res.SHA256, f.job.SHA256)
			return res
		}
		res.Err = &storage.Error{Op: "copy", Location: f.src.Location(), Name: f.job.Src, Kind: storage.ErrCorrupt,
			Err: fmt.Errorf("source sha256 %s, the catalog expects %s; not copying it", res.SHA256, f.job.SHA256)}
		return res
	}

	if !f.c.opts.SkipReadBack {
		var got []byte
		if rb != nil {
			got, err = rb.wait()
		} else {
			got, err = hashFile(ctx, f.dst, f.tmp, f.size, f.chunk, f.c.opts.InFlight, nil, f.reportChecked, nil)
		}
		if err == nil {
			// The reader saw the size of the file when it opened: the file
			// must still have it, with nothing past the bytes read back.
			var fi storage.FileInfo
			fi, err = f.dst.Stat(ctx, f.tmp)
			if err == nil && fi.Size != f.size {
				err = &storage.Error{Op: "verify", Location: f.dst.Location(), Name: f.tmp, Kind: storage.ErrCorrupt,
					Err: fmt.Errorf("%d bytes after the read-back, want %d", fi.Size, f.size)}
			}
		}
		if err != nil {
			res.Err = readBackErr(err)
			return res
		}
		if !slices.Equal(got, streamed) {
			// The partial file is bad; start over next time (now, when it
			// was resumed from a checkpoint that did not hold).
			_ = f.dst.Remove(ctx, f.tmp)
			if resumed {
				res.Err = fmt.Errorf("%w: destination sha256 %x, streamed from the checkpoint %x", errResumeRejected, got, streamed)
				return res
			}
			res.Err = readBackErr(&storage.Error{Op: "verify", Location: f.dst.Location(), Name: f.tmp, Kind: storage.ErrCorrupt,
				Err: fmt.Errorf("destination sha256 %x differs from the source's %x; removed it, the next attempt copies again", got, streamed)})
			return res
		}
	}
	if err := f.dst.Rename(ctx, f.tmp, f.job.Dst); err != nil {
		if errors.Is(err, storage.ErrExists) {
			// Someone else finished first: fine if it is the same content.
			sum, _, err2 := f.existing(ctx, f.job.Dst)
			if err2 == nil && sum == res.SHA256 {
				_ = f.dst.Remove(ctx, f.tmp)
				res.AlreadyThere = true
				return res
			}
			if err2 != nil {
				err = err2
			}
		}
		res.Err = err
		return res
	}
	f.report(Progress{File: f.job.Dst, Size: f.size, SrcModTime: f.mtime, ChunkSize: f.chunk, Offset: f.size, BytesSent: f.sent.Load(), Done: true})
	return res
}

// dropIfNoSpace removes the partial file after err when err is ErrNoSpace:
// the partial file only takes the space others need; a later attempt, after
// retention freed space, starts over.
func (f *fileCopy) dropIfNoSpace(ctx context.Context, err error) {
	if errors.Is(err, storage.ErrNoSpace) {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_ = f.dst.Remove(rctx, f.tmp)
		rcancel()
	}
}

// existing checks an existing final file: done=true with its hash when it
// equals the source, ErrDifferentContent when not, done=false when absent.
func (f *fileCopy) existing(ctx context.Context, name string) (sum string, done bool, err error) {
	fi, err := f.dst.Stat(ctx, name)
	if errors.Is(err, storage.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if fi.Size != f.size {
		return "", false, &storage.Error{Op: "copy", Location: f.dst.Location(), Name: name, Kind: storage.ErrExists,
			Err: fmt.Errorf("%w: it has %d bytes, the source %d", ErrDifferentContent, fi.Size, f.size)}
	}
	chunk := f.c.opts.ChunkSize
	var dsum, ssum []byte
	var derr, serr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		dsum, derr = hashFile(ctx, f.dst, name, f.size, chunk, f.c.opts.InFlight, nil, func(n int64) {
			f.report(Progress{File: f.job.Dst, Size: f.size, Checked: n})
		}, nil)
	}()
	if f.job.SHA256 != "" {
		ssum, serr = hex.DecodeString(f.job.SHA256)
		if serr != nil {
			serr = fmt.Errorf("copier: expected sha256 %q of %q is not hex: %w", f.job.SHA256, f.job.Src, storage.ErrInvalidName)
		}
	} else {
		ssum, serr = hashFile(ctx, f.src, f.job.Src, f.size, chunk, f.c.opts.InFlight, nil, nil, nil)
	}
	wg.Wait()
	if err := errors.Join(serr, derr); err != nil {
		return "", false, err
	}
	if !slices.Equal(dsum, ssum) {
		return "", false, &storage.Error{Op: "copy", Location: f.dst.Location(), Name: name, Kind: storage.ErrExists,
			Err: fmt.Errorf("%w: sha256 %x, the source's %x", ErrDifferentContent, dsum, ssum)}
	}
	return hex.EncodeToString(ssum), true, nil
}

// state is where streaming starts.
type state struct {
	offset int64
	h      hash.Hash
	ahead  map[int64]bool // chunk offsets already written beyond offset
	// hashState is h's state at offset as the checkpoint gave it: the
	// read-back of the partial file must reach the same (checkpoint).
	hashState []byte
}

// checkpoint is what the read-back of a resumed file must find: the
// SHA-256 state of its first offset bytes.
type checkpoint struct {
	offset int64
	state  []byte
}

// prepare opens the temporary destination file: the partial file of the
// resumed attempt when it is usable, a new one otherwise.
func (f *fileCopy) prepare(ctx context.Context) (storage.Writer, state, error) {
	f.chunk = f.c.opts.ChunkSize
	if st, w, ok := f.resume(ctx); ok {
		return w, st, nil
	}
	fresh := state{h: sha256.New(), ahead: map[int64]bool{}}
	if err := f.dst.Remove(ctx, f.tmp); err != nil && !errors.Is(err, storage.ErrNotFound) {
		return nil, fresh, err
	}
	if free, ok, err := f.dst.FreeSpace(ctx); err == nil && ok && free < f.size {
		return nil, fresh, &storage.Error{Op: "copy", Location: f.dst.Location(), Name: f.job.Dst, Kind: storage.ErrNoSpace,
			Err: fmt.Errorf("%d bytes free, the file needs %d", free, f.size)}
	}
	w, err := f.dst.Create(ctx, f.tmp)
	return w, fresh, err
}

// resume validates job.Resume against the source and the partial file.
func (f *fileCopy) resume(ctx context.Context) (state, storage.Writer, bool) {
	p := f.job.Resume
	if p == nil || p.Done || p.File != f.job.Dst || p.Size != f.size || p.SrcModTime != f.mtime || p.ChunkSize <= 0 ||
		p.Offset < 0 || p.Offset > f.size || (p.Offset%p.ChunkSize != 0 && p.Offset != f.size) {
		return state{}, nil, false // no or stale checkpoint (the source changed): start over
	}
	h := sha256.New()
	if p.Offset > 0 {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(p.HashState); err != nil {
			return state{}, nil, false
		}
	}
	need := p.Offset
	ahead := map[int64]bool{}
	for _, off := range p.Ahead {
		if off <= p.Offset || off >= f.size || off%p.ChunkSize != 0 {
			return state{}, nil, false
		}
		ahead[off] = true
		need = max(need, min(off+p.ChunkSize, f.size))
	}
	fi, err := f.dst.Stat(ctx, f.tmp)
	if err != nil || fi.Size < need {
		return state{}, nil, false // partial file gone or shorter than confirmed
	}
	if f.c.opts.SkipReadBack && p.Offset > 0 {
		// Nothing reads the file back: the checkpoint is checked against
		// the partial file before it is trusted.
		got, err := hashPrefix(ctx, f.dst, f.tmp, p.Offset, p.ChunkSize, f.c.opts.InFlight)
		if err != nil || !slices.Equal(got, p.HashState) {
			return state{}, nil, false
		}
	}
	w, err := f.dst.OpenWrite(ctx, f.tmp)
	if err != nil {
		return state{}, nil, false
	}
	f.chunk = p.ChunkSize
	st := state{offset: p.Offset, h: h, ahead: ahead}
	if p.Offset > 0 {
		st.hashState = p.HashState
	}
	return st, w, true
}

// hashPrefix is the marshalled SHA-256 state of the first n bytes of a file.
func hashPrefix(ctx context.Context, s storage.Storage, name string, n, chunkSize int64, inFlight int) ([]byte, error) {
	r, err := s.OpenRead(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	h := sha256.New()
	err = pipeline(ctx, r, n, 0, chunkSize, inFlight, nil, nil, func(c *chunk, inOrder bool) {
		if inOrder {
			h.Write(c.buf[:c.n])
		}
	})
	if err != nil {
		return nil, err
	}
	return h.(encoding.BinaryMarshaler).MarshalBinary()
}

// stream copies [st.offset, size) chunk by chunk, InFlight at a time, hashing
// in order, and returns the sha256 of the whole file. rb, if not nil, learns
// how far the file is written, in order.
func (f *fileCopy) stream(ctx context.Context, w storage.Writer, st state, rb *readBack) ([]byte, error) {
	r, err := f.src.OpenRead(ctx, f.job.Src)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if r.Size() != f.size {
		return nil, &storage.Error{Op: "copy", Location: f.src.Location(), Name: f.job.Src, Kind: storage.ErrCorrupt,
			Err: fmt.Errorf("size changed from %d to %d while copying", f.size, r.Size())}
	}
	progress := func(offset int64) {
		p := Progress{File: f.job.Dst, Size: f.size, SrcModTime: f.mtime, ChunkSize: f.chunk, Offset: offset, BytesSent: f.sent.Load()}
		p.HashState, _ = st.h.(encoding.BinaryMarshaler).MarshalBinary()
		for off := range st.ahead {
			p.Ahead = append(p.Ahead, off)
		}
		slices.Sort(p.Ahead)
		f.lastMu.Lock()
		defer f.lastMu.Unlock()
		p.Checked = f.checked.Load()
		f.last = p
		f.report(p)
	}
	// Where this attempt starts: also the resume point while verifying when
	// nothing is left to send.
	progress(st.offset)
	skip := maps.Clone(st.ahead) // read by the workers; st.ahead is the caller's
	write := func(c *chunk) error {
		if skip[c.off] {
			return nil // written by the resumed attempt
		}
		if _, err := w.WriteAt(c.buf[:c.n], c.off); err != nil {
			return err
		}
		f.sent.Add(int64(c.n))
		return nil
	}
	err = pipeline(ctx, r, f.size, st.offset, f.chunk, f.c.opts.InFlight, nil, write, func(c *chunk, inOrder bool) {
		if !inOrder {
			if !st.ahead[c.off] {
				st.ahead[c.off] = true
				progress(st.offset)
			}
			return
		}
		st.h.Write(c.buf[:c.n])
		st.offset = c.off + int64(c.n)
		delete(st.ahead, c.off)
		progress(st.offset)
		if rb != nil {
			// After the checkpoint: a read-back progress report then
			// carries an offset at least as far as what it read.
			rb.written.set(st.offset)
		}
	})
	if err != nil {
		return nil, err
	}
	// A partial file from a longer source must not keep a tail.
	if err := w.Truncate(f.size); err != nil {
		return nil, err
	}
	if err := w.Sync(); err != nil {
		return nil, err
	}
	return st.h.Sum(nil), nil
}

// Hash reads a whole file as a copy reads it (DefaultChunkSize chunks,
// DefaultInFlight in flight) and returns its SHA-256; the file must have
// exactly size bytes (ErrCorrupt otherwise). progress, if not nil, gets the
// bytes hashed so far.
func Hash(ctx context.Context, s storage.Storage, name string, size int64, progress func(hashed int64)) ([]byte, error) {
	return hashFile(ctx, s, name, size, DefaultChunkSize, DefaultInFlight, nil, progress, nil)
}

// hashFile reads a whole file with inFlight chunks in flight and returns its
// sha256; the file must have exactly size bytes. ready, if not nil, is waited
// on before each read, for the bytes up to the end of that read. progress, if
// not nil, gets the bytes hashed so far. expect, if not nil, is the state the
// hash must have after its first expect.offset bytes (a chunk boundary):
// errResumeRejected as soon as it has another.
func hashFile(ctx context.Context, s storage.Storage, name string, size, chunkSize int64, inFlight int,
	ready func(ctx context.Context, end int64) error, progress func(hashed int64), expect *checkpoint) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var rejected error
	r, err := s.OpenRead(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if r.Size() != size {
		return nil, &storage.Error{Op: "verify", Location: s.Location(), Name: name, Kind: storage.ErrCorrupt,
			Err: fmt.Errorf("%d bytes, want %d", r.Size(), size)}
	}
	h := sha256.New()
	var hashed int64
	err = pipeline(ctx, r, size, 0, chunkSize, inFlight, ready, nil, func(c *chunk, inOrder bool) {
		if !inOrder || rejected != nil {
			return
		}
		h.Write(c.buf[:c.n])
		hashed += int64(c.n)
		if expect != nil && hashed == expect.offset {
			if got, _ := h.(encoding.BinaryMarshaler).MarshalBinary(); !slices.Equal(got, expect.state) {
				rejected = fmt.Errorf("%w: the first %d bytes of %s hash otherwise", errResumeRejected, hashed, name)
				cancel()
				return
			}
		}
		if progress != nil {
			progress(hashed)
		}
	})
	if rejected != nil {
		return nil, rejected
	}
	if err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// ReadInOrder reads [0, size) of r in chunkSize pieces, inFlight at once,
// and passes each piece to each (if not nil) in the worker that read it,
// then to inOrder in the caller's goroutine, in file order; a piece's
// buffer is reused once inOrder returns. The first error stops the rest.
func ReadInOrder(ctx context.Context, r storage.Reader, size, chunkSize int64, inFlight int,
	each func(off int64, b []byte) error, inOrder func(off int64, b []byte)) error {
	var write func(*chunk) error
	if each != nil {
		write = func(c *chunk) error { return each(c.off, c.buf[:c.n]) }
	}
	return pipeline(ctx, r, size, 0, chunkSize, inFlight, nil, write, func(c *chunk, in bool) {
		if in {
			inOrder(c.off, c.buf[:c.n])
		}
	})
}

type chunk struct {
	off int64
	n   int
	buf []byte
	err error
}

// pipeline reads [from, size) in chunks with inFlight workers (each first
// waiting on ready, if not nil, for the chunk's end), passes each
// chunk to write (if not nil) in the worker, then to done in the caller's
// goroutine: once with inOrder=false when it completes, once with
// inOrder=true when every chunk before it has been passed in order. Buffers
// are recycled after the in-order call; at most 2*inFlight are live.
func pipeline(ctx context.Context, r storage.Reader, size, from, chunkSize int64, inFlight int,
	ready func(ctx context.Context, end int64) error, write func(*chunk) error, done func(c *chunk, inOrder bool)) error {
	if from >= size {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	window := 2 * inFlight
	bufs := make(chan []byte, window)
	for range window {
		bufs <- make([]byte, chunkSize)
	}
	var (
		mu   sync.Mutex
		next = from
	)
	// take hands out the next offset; a worker takes a buffer first, so the
	// lowest outstanding chunk always has one and the window cannot deadlock.
	take := func() (int64, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next >= size {
			return 0, false
		}
		off := next
		next += chunkSize
		return off, true
	}
	results := make(chan *chunk, window)
	var wg sync.WaitGroup
	for range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var buf []byte
				select {
				case buf = <-bufs:
				case <-ctx.Done():
					return
				}
				if ctx.Err() != nil {
					return
				}
				off, ok := take()
				if !ok {
					return
				}
				c := &chunk{off: off, buf: buf}
				want := int(min(chunkSize, size-off))
				if ready != nil {
					if c.err = ready(ctx, off+int64(want)); c.err != nil {
						results <- c
						return
					}
				}
				c.n, c.err = r.ReadAt(buf[:want], off)
				if c.err != nil && errors.Is(c.err, io.EOF) && c.n == want {
					c.err = nil
				}
				if c.err == nil && c.n != want {
					c.err = io.ErrUnexpectedEOF
				}
				if c.err == nil && write != nil {
					c.err = write(c)
				}
				// Always deliver: a chunk written just before a failure
				// elsewhere still counts in the progress (it is not re-sent
				// on resume). The consumer drains until all workers exit.
				results <- c
				if c.err != nil {
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()

	pending := map[int64]*chunk{}
	expect := from
	var firstErr error
	for c := range results {
		if c.err != nil {
			if firstErr == nil {
				firstErr = c.err
			}
			cancel()
			continue
		}
		done(c, false)
		pending[c.off] = c
		for {
			p, ok := pending[expect]
			if !ok {
				break
			}
			delete(pending, expect)
			done(p, true)
			expect += int64(p.n)
			bufs <- p.buf // never blocks: the channel holds every buffer
		}
	}
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if expect != size {
		return fmt.Errorf("copier: internal error: stopped at %d of %d", expect, size)
	}
	return nil
}

// readBack hashes the destination while it is being written: each chunk is
// read once it and every chunk before it are written. The file is written
// once per offset, so every byte is read after its last write, as when the
// whole file is read back after the copy.
type readBack struct {
	written watermark // the file is written up to here, in order
	cancel  context.CancelFunc
	done    chan struct{}
	sum     []byte
	err     error
}

// startReadBack extends the destination to its final size (a reader sees the
// size the file has when it opens) and starts reading it back from offset 0;
// [0, st.offset) was written by an earlier attempt, and must hash to the
// checkpoint's state. A read-back that fails calls abort, which stops the
// streaming.
func (f *fileCopy) startReadBack(ctx context.Context, abort context.CancelFunc, w storage.Writer, st state) (*readBack, error) {
	if err := w.Truncate(f.size); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	rb := &readBack{cancel: cancel, done: make(chan struct{})}
	rb.written.set(st.offset)
	var expect *checkpoint
	if st.hashState != nil {
		// The resumed prefix is read first: its hash must be the
		// checkpoint's before the checkpoint counts for anything.
		expect = &checkpoint{offset: st.offset, state: st.hashState}
	}
	go func() {
		defer close(rb.done)
		rb.sum, rb.err = hashFile(ctx, f.dst, f.tmp, f.size, f.chunk, f.c.opts.InFlight, rb.written.wait, f.reportChecked, expect)
		if rb.err != nil && ctx.Err() == nil {
			// Failed on its own (not stopped): stop the streaming too. A
			// stopped read-back must not cancel the file's context, which
			// the caller still needs to remove the partial file.
			abort()
		}
	}()
	return rb, nil
}

// wait returns the sha256 read back, once the whole file is written and read.
func (rb *readBack) wait() ([]byte, error) {
	<-rb.done
	return rb.sum, rb.err
}

// stop cancels the read-back and waits for it to end.
func (rb *readBack) stop() ([]byte, error) {
	rb.cancel()
	return rb.wait()
}

// watermark is an offset that only grows, and can be waited for.
type watermark struct {
	mu  sync.Mutex
	n   int64
	grw chan struct{} // closed when n grows
}

func (w *watermark) set(n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.grw == nil {
		w.grw = make(chan struct{})
	}
	if n > w.n {
		w.n = n
		close(w.grw)
		w.grw = make(chan struct{})
	}
}

// wait returns once the offset is at least n.
func (w *watermark) wait(ctx context.Context, n int64) error {
	for {
		w.mu.Lock()
		if w.grw == nil {
			w.grw = make(chan struct{})
		}
		if w.n >= n {
			w.mu.Unlock()
			return nil
		}
		grw := w.grw
		w.mu.Unlock()
		select {
		case <-grw:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
