package smb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	smb2 "github.com/cloudsoda/go-smb2"

	"github.com/backupcycle/backupcycle/internal/storage"
)

// piece is the biggest SMB2 READ/WRITE the library sends (it caps requests at
// 1 MiB); a bigger ReadAt/WriteAt is cut into pieces sent concurrently, since
// the library would send them one after the other.
const piece = 1 << 20

// file is an open file: one handle per connection its I/O is spread over
// (Config.FileConns), each reopened on a fresh connection after its
// connection dropped (the library has no durable handles). The library signs
// and sends one request at a time per connection, under one lock; handles on
// several connections let one big file use several cores for signing.
type file struct {
	s    *Storage
	ctx  context.Context // the handle's I/O is bound to it (see storage.Storage)
	name string
	flag int

	mu     sync.Mutex
	base   int // connection of slot 0; slot k uses connection (base+k) mod Conns
	slots  []slot
	size   int64 // at open, for readers
	closed bool
}

// slot is the handle of a file on one connection; f is nil until first used
// (slot 0 is opened by Open/Create) and after its connection dropped.
type slot struct {
	f    *smb2.File
	conn int   // index in s.conns
	l    *link // the link f was opened on
}

// newFile opens slot 0 of name on the next connection; the other slots open
// on first use.
func (s *Storage) newFile(ctx context.Context, name string, flag int) (*file, error) {
	n := min(s.cfg.FileConns, len(s.conns))
	f := &file{s: s, ctx: ctx, name: name, flag: flag, slots: make([]slot, n)}
	f.base = int(s.nextFile.Add(1) % uint64(len(s.conns)))
	for k := range f.slots {
		f.slots[k].conn = (f.base + k) % len(s.conns)
	}
	if _, err := f.open(0); err != nil {
		return nil, err
	}
	return f, nil
}

// open (re)opens slot k on its connection. Called with f.mu held or before
// f is shared.
func (f *file) open(k int) (fresh bool, err error) {
	for attempt := 0; ; attempt++ {
		fresh, err = f.openOnce(k)
		if err == nil || attempt > 0 || fresh || !errors.Is(err, storage.ErrConnection) || f.ctx.Err() != nil {
			return fresh, err
		}
	}
}

// openOnce opens slot k on its connection.
func (f *file) openOnce(k int) (fresh bool, err error) {
	sl := &f.slots[k]
	i := sl.conn
	l, fresh, err := f.s.link(f.ctx, i)
	if err != nil {
		return true, err
	}
	defer l.release()
	// The handle's calls run under a context that never ends; f.ctx ending
	// abandons the link instead (see Storage.bind, and call).
	lctx, stop := f.s.bind(f.ctx, i, l)
	defer stop()
	h, err := l.share.WithContext(lctx).OpenFile(f.s.full(f.name), f.flag, 0o644)
	if err != nil {
		if f.ctx.Err() != nil {
			f.s.abandon(i, l)
			return fresh, f.s.err("open", f.name, f.ctx.Err())
		}
		e := f.s.err("open", f.name, f.s.dirGone(l.share.WithContext(lctx), "open", f.name, err))
		if failed(e, err) {
			f.s.broken(i, l)
		}
		return fresh, e
	}
	fi, err := h.Stat()
	if err == nil {
		err = checkRegular(fi, f.s.full(f.name))
	}
	if err != nil {
		_ = h.Close()
		return fresh, f.s.err("open", f.name, err)
	}
	sl.f, sl.l = h, l
	if k == 0 {
		f.size = fi.Size()
		// The file exists now: a reopen (after a dropped connection) or a
		// further slot must not fail on the file slot 0 created.
		f.flag &^= os.O_CREATE | os.O_EXCL
	}
	return fresh, nil
}

// handle returns slot k's handle and its link, acquired (release it after
// the call), opening or reopening it when needed. fresh tells that the
// connection was dialled just now.
func (f *file) handle(k int) (h *smb2.File, l *link, conn int, fresh bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, nil, 0, false, &storage.Error{Op: "io", Location: f.s.loc, Name: f.name, Err: fs.ErrClosed}
	}
	sl := &f.slots[k]
	if sl.f != nil {
		c := f.s.conns[sl.conn]
		c.mu.Lock()
		alive := c.cur == sl.l && sl.l.acquire()
		c.mu.Unlock()
		if alive {
			return sl.f, sl.l, sl.conn, false, nil
		}
		sl.f = nil // its connection is gone, and the handle with it
	}
	fresh, err = f.open(k)
	if err != nil {
		return nil, nil, 0, false, err
	}
	if !sl.l.acquire() {
		return nil, nil, 0, false, &storage.Error{Op: "open", Location: f.s.loc, Name: f.name, Kind: storage.ErrConnection,
			Err: errors.New("connection dropped while reopening")}
	}
	return sl.f, sl.l, sl.conn, fresh, nil
}

// call runs fn on slot k's handle. When the connection turns out dead and
// was not dialled just now (the server restarted since), it redials, reopens
// and runs fn once more: every call of a file is idempotent (I/O at an
// offset).
func (f *file) call(k int, op string, fn func(h *smb2.File) error) error {
	for attempt := 0; ; attempt++ {
		h, l, conn, fresh, err := f.handle(k)
		if err != nil {
			return err
		}
		stop := context.AfterFunc(f.ctx, func() { f.s.abandon(conn, l) })
		err = fn(h)
		stop()
		l.release()
		if err == nil {
			return nil
		}
		if f.ctx.Err() != nil {
			f.s.abandon(conn, l)
			return f.s.err(op, f.name, f.ctx.Err())
		}
		e := f.s.err(op, f.name, err)
		if failed(e, err) {
			f.s.broken(conn, l)
			if attempt == 0 && !fresh && f.ctx.Err() == nil {
				continue
			}
		}
		return e
	}
}

// slotFor spreads the pieces of one ReadAt/WriteAt over the slots: piece i
// of the file goes to slot i mod FileConns.
func (f *file) slotFor(off int64) int { return int((off / piece) % int64(len(f.slots))) }

func (f *file) Size() int64 { return f.size }

// ReadAt reads within the size seen at open: past it, io.EOF. The library
// may return a short read without error; inside that size it means the file
// shrank, reported as storage.ErrCorrupt.
func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &storage.Error{Op: "read", Location: f.s.loc, Name: f.name, Err: errors.New("negative offset")}
	}
	if off >= f.size {
		return 0, io.EOF
	}
	want := p
	if rest := f.size - off; int64(len(want)) > rest {
		want = want[:rest]
	}
	n, err := pieces(want, off, func(b []byte, o int64) (int, error) {
		var n int
		err := f.call(f.slotFor(o), "read", func(h *smb2.File) error {
			var err error
			n, err = h.ReadAt(b, o)
			if n < 0 {
				n = 0
			}
			if (err == nil && n < len(b)) || errors.Is(err, io.EOF) {
				return &storage.Error{Op: "read", Location: f.s.loc, Name: f.name, Kind: storage.ErrCorrupt,
					Err: fmt.Errorf("file shorter than the %d bytes it had when opened", f.size)}
			}
			return err
		})
		return n, err
	})
	if err != nil {
		return n, err
	}
	if len(want) < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	n, err := pieces(p, off, func(b []byte, o int64) (int, error) {
		var n int
		err := f.call(f.slotFor(o), "write", func(h *smb2.File) error {
			var err error
			n, err = h.WriteAt(b, o)
			if n < 0 {
				n = 0 // the library's "unknown" after an error
			}
			if err == nil && n < len(b) {
				err = io.ErrShortWrite
			}
			return err
		})
		return n, err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// pieces runs do on p cut into piece-sized parts concurrently and returns the
// bytes done in one contiguous run from the start, and the first error.
func pieces(p []byte, off int64, do func([]byte, int64) (int, error)) (int, error) {
	if len(p) <= piece {
		return do(p, off)
	}
	k := (len(p) + piece - 1) / piece
	ns := make([]int, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i := range k {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			lo, hi := i*piece, min((i+1)*piece, len(p))
			ns[i], errs[i] = do(p[lo:hi], off+int64(lo))
		}(i)
	}
	wg.Wait()
	n := 0
	for i := range k {
		n += ns[i]
		if errs[i] != nil {
			return n, errs[i]
		}
	}
	return n, nil
}

func (f *file) Truncate(size int64) error {
	return f.call(0, "truncate", func(h *smb2.File) error { return h.Truncate(size) })
}

// Sync flushes through every handle that wrote: a server may flush only
// what came through the handle it is asked on.
func (f *file) Sync() error {
	f.mu.Lock()
	used := []int{0}
	for k := 1; k < len(f.slots); k++ {
		if f.slots[k].f != nil {
			used = append(used, k)
		}
	}
	f.mu.Unlock()
	for _, k := range used {
		if err := f.call(k, "sync", func(h *smb2.File) error { return h.Sync() }); err != nil {
			return err
		}
	}
	return nil
}

func (f *file) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	var first error
	for k := range f.slots {
		if err := f.closeSlot(&f.slots[k]); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// closeSlot closes one handle. Called with f.mu held.
func (f *file) closeSlot(sl *slot) error {
	if sl.f == nil {
		return nil
	}
	h := sl.f
	sl.f = nil
	c := f.s.conns[sl.conn]
	c.mu.Lock()
	alive := c.cur == sl.l && sl.l.acquire()
	c.mu.Unlock()
	if !alive {
		// The server dropped the handle with the connection: nothing left
		// to close, and a writer's data was acknowledged already.
		return nil
	}
	defer sl.l.release()
	conn, l := sl.conn, sl.l
	stop := context.AfterFunc(f.ctx, func() { f.s.abandon(conn, l) })
	defer stop()
	if err := h.Close(); err != nil {
		e := f.s.err("close", f.name, err)
		if failed(e, err) {
			f.s.broken(sl.conn, sl.l)
			return nil
		}
		return e
	}
	return nil
}
