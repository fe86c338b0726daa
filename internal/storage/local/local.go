// Package local is a storage.Storage in a directory of the worker's file system
// (a local disk, or an SMB share mounted by the OS).
//
// Everything goes through an os.Root of the directory: no name reaches
// outside it, whatever symbolic links other writers of the directory plant.
// Inside it, only regular files are listed, read and written: a name that is
// a symbolic link (even to a file inside), a directory, a FIFO, a device or
// a socket is refused with storage.ErrNotRegular, and a file is opened only
// after Lstat said it is regular, and kept only when the open handle is that
// very file (os.SameFile), so a link swapped in between is never followed.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/backupcycle/backupcycle/internal/storage"
)

// Storage is a directory.
type Storage struct {
	dir string // absolute path of the directory
	loc string

	mu   sync.Mutex
	root *os.Root // nil after Close: the next call opens it again
}

var _ storage.Storage = (*Storage)(nil)

// Open returns the Storage of an existing directory. The directory itself may
// be reached through symbolic links (a mount point, a configured path); what
// is inside it may not.
func Open(ctx context.Context, dir string) (*Storage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, &storage.Error{Op: "open", Location: dir, Kind: storage.ErrInvalidName, Err: err}
	}
	s := &Storage{dir: abs, loc: (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, s.err("open", "", fmt.Errorf("directory does not exist, create it first: %w", err))
	}
	if !fi.IsDir() {
		return nil, &storage.Error{Op: "open", Location: s.loc, Kind: storage.ErrInvalidName, Err: errors.New("not a directory")}
	}
	if _, err := s.openRoot(); err != nil {
		return nil, err
	}
	return s, nil
}

// Location is the file:// URL of the directory.
func (s *Storage) Location() string { return s.loc }

// openRoot is the directory's os.Root, opened again after Close (as an SMB
// storage dials again).
func (s *Storage) openRoot() (*os.Root, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.root == nil {
		root, err := os.OpenRoot(s.dir)
		if err != nil {
			return nil, s.err("open", "", err)
		}
		s.root = root
	}
	return s.root, nil
}

// path is name checked and made a path relative to the root, and the root.
func (s *Storage) path(op, name string) (*os.Root, string, error) {
	if err := storage.CheckName(op, s.loc, name); err != nil {
		return nil, "", err
	}
	root, err := s.openRoot()
	if err != nil {
		return nil, "", err
	}
	return root, filepath.FromSlash(name), nil
}

// err classifies an os error into a storage.Error.
func (s *Storage) err(op, name string, err error) error {
	var se *storage.Error
	if errors.As(err, &se) {
		return err
	}
	var kind error
	switch {
	case errors.Is(err, fs.ErrNotExist):
		kind = storage.ErrNotFound
	case errors.Is(err, fs.ErrExist):
		kind = storage.ErrExists
	case errors.Is(err, fs.ErrPermission):
		kind = storage.ErrPermission
	case isNoSpace(err):
		kind = storage.ErrNoSpace
	case isEscape(err):
		// os.Root refuses a path through a link that leads out of it.
		kind = storage.ErrNotRegular
	}
	return &storage.Error{Op: op, Location: s.loc, Name: name, Kind: kind, Err: err}
}

// isEscape reports an os.Root refusal of a path that leads outside it.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// notRegular is the error for a name that is there as something else than a
// regular file.
func (s *Storage) notRegular(op, name string, mode fs.FileMode) error {
	what := "a " + mode.Type().String() + " entry"
	switch {
	case mode&fs.ModeSymlink != 0:
		what = "a symbolic link"
	case mode.IsDir():
		what = "a directory"
	case mode&fs.ModeNamedPipe != 0:
		what = "a FIFO"
	case mode&fs.ModeSocket != 0:
		what = "a socket"
	case mode&fs.ModeDevice != 0:
		what = "a device"
	}
	return &storage.Error{Op: op, Location: s.loc, Name: name, Kind: storage.ErrNotRegular, Err: fmt.Errorf("it is %s", what)}
}

// lstat is the entry name itself, refused unless it is a regular file.
func (s *Storage) lstat(root *os.Root, op, name, rel string) (fs.FileInfo, error) {
	fi, err := root.Lstat(rel)
	if err != nil {
		return nil, s.err(op, name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, s.notRegular(op, name, fi.Mode())
	}
	return fi, nil
}

// open opens an existing regular file: Lstat first, then the open (never
// blocking on a FIFO swapped in), then the handle must be that very file.
func (s *Storage) open(ctx context.Context, op, name string, flag int) (*os.File, fs.FileInfo, error) {
	root, rel, err := s.path(op, name)
	if err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	lfi, err := s.lstat(root, op, name, rel)
	if err != nil {
		return nil, nil, err
	}
	f, err := root.OpenFile(rel, flag|noBlock, 0)
	if err != nil {
		return nil, nil, s.err(op, name, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, s.err(op, name, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, s.notRegular(op, name, fi.Mode())
	}
	if !os.SameFile(lfi, fi) {
		f.Close()
		return nil, nil, &storage.Error{Op: op, Location: s.loc, Name: name, Kind: storage.ErrNotRegular,
			Err: errors.New("it was replaced while it was opened (by a symbolic link?)")}
	}
	return f, fi, nil
}

func (s *Storage) Stat(ctx context.Context, name string) (storage.FileInfo, error) {
	root, rel, err := s.path("stat", name)
	if err != nil {
		return storage.FileInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return storage.FileInfo{}, err
	}
	fi, err := s.lstat(root, "stat", name, rel)
	if err != nil {
		return storage.FileInfo{}, err
	}
	return storage.FileInfo{Name: name, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

func (s *Storage) OpenRead(ctx context.Context, name string) (storage.Reader, error) {
	f, fi, err := s.open(ctx, "open", name, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	return &file{s: s, name: name, f: f, size: fi.Size()}, nil
}

// mkdirParent creates the directories of name inside the root.
func (s *Storage) mkdirParent(root *os.Root, op, name, rel string) error {
	if dir := filepath.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return s.err(op, name, err)
		}
	}
	return nil
}

func (s *Storage) Create(ctx context.Context, name string) (storage.Writer, error) {
	root, rel, err := s.path("create", name)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.mkdirParent(root, "create", name, rel); err != nil {
		return nil, err
	}
	// O_CREATE|O_EXCL never follows a link: a link under the name is
	// ErrExists, and nothing is created where it points.
	f, err := root.OpenFile(rel, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, s.err("create", name, err)
	}
	return &file{s: s, name: name, f: f}, nil
}

func (s *Storage) OpenWrite(ctx context.Context, name string) (storage.Writer, error) {
	f, _, err := s.open(ctx, "open", name, os.O_RDWR)
	if err != nil {
		return nil, err
	}
	return &file{s: s, name: name, f: f}, nil
}

// listBatch is how many names List reads at a time: the directory is read
// once, by name only, and only the matching entries are looked at.
const listBatch = 1024

func (s *Storage) List(ctx context.Context, prefix, suffix string) ([]storage.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir, base := path.Split(prefix)
	var (
		root *os.Root
		rel  = "."
		err  error
	)
	if dir != "" {
		root, rel, err = s.path("list", strings.TrimSuffix(dir, "/"))
	} else {
		root, err = s.openRoot()
	}
	if err != nil {
		return nil, err
	}
	d, err := root.Open(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, s.err("list", prefix, err)
	}
	defer d.Close()
	var out []storage.FileInfo
	for {
		// Names only: a directory opened in an os.Root would Lstat every
		// entry for ReadDir, the unrelated ones too.
		names, err := d.Readdirnames(listBatch)
		for _, n := range names {
			if len(n) < len(base)+len(suffix) || !strings.HasPrefix(n, base) || !strings.HasSuffix(n, suffix) {
				continue
			}
			fi, err := root.Lstat(filepath.Join(rel, n))
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed while listing
			}
			if err != nil {
				return nil, s.err("list", prefix, err)
			}
			if !fi.Mode().IsRegular() {
				continue
			}
			out = append(out, storage.FileInfo{Name: dir + n, Size: fi.Size(), ModTime: fi.ModTime()})
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, s.err("list", prefix, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Rename links the new name (which fails atomically if it exists) and then
// removes the old one, so an existing file is never replaced.
func (s *Storage) Rename(ctx context.Context, oldName, newName string) error {
	root, op, err := s.path("rename", oldName)
	if err != nil {
		return err
	}
	_, np, err := s.path("rename", newName)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := s.lstat(root, "rename", oldName, op); err != nil {
		return err
	}
	if err := s.mkdirParent(root, "rename", newName, np); err != nil {
		return err
	}
	err = root.Link(op, np)
	switch {
	case err == nil:
		if err := root.Remove(op); err != nil {
			return s.err("rename", oldName, err)
		}
		return nil
	case errors.Is(err, fs.ErrExist):
		return s.err("rename", newName, err)
	}
	// No hard links on this file system: check, then rename.
	if _, serr := root.Lstat(np); serr == nil {
		return s.err("rename", newName, fs.ErrExist)
	}
	if err := root.Rename(op, np); err != nil {
		return s.err("rename", oldName, err)
	}
	return nil
}

// Replace renames in one step, replacing newName: the entry, never what a
// link under that name points to.
func (s *Storage) Replace(ctx context.Context, oldName, newName string) error {
	root, op, err := s.path("replace", oldName)
	if err != nil {
		return err
	}
	_, np, err := s.path("replace", newName)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := s.lstat(root, "replace", oldName, op); err != nil {
		return err
	}
	if err := s.mkdirParent(root, "replace", newName, np); err != nil {
		return err
	}
	if err := root.Rename(op, np); err != nil {
		return s.err("replace", oldName, err)
	}
	return nil
}

// Remove removes the entry name: a file, or a link or special file someone
// put there (never what a link points to); a directory is refused.
func (s *Storage) Remove(ctx context.Context, name string) error {
	root, p, err := s.path("remove", name)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fi, err := root.Lstat(p)
	if err != nil {
		return s.err("remove", name, err)
	}
	if fi.IsDir() {
		return s.notRegular("remove", name, fi.Mode())
	}
	if err := root.Remove(p); err != nil {
		return s.err("remove", name, err)
	}
	return nil
}

// FreeSpace is in freespace_unix.go and freespace_windows.go.

// Close releases the directory; a later call opens it again.
func (s *Storage) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.root == nil {
		return nil
	}
	err := s.root.Close()
	s.root = nil
	return err
}

// file is both Reader and Writer.
type file struct {
	s    *Storage
	name string
	f    *os.File
	size int64
}

func (f *file) Size() int64 { return f.size }

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.f.ReadAt(p, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return n, f.s.err("read", f.name, err)
	}
	return n, err
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.f.WriteAt(p, off)
	if err != nil {
		return n, f.s.err("write", f.name, err)
	}
	return n, nil
}

func (f *file) Truncate(size int64) error {
	if err := f.f.Truncate(size); err != nil {
		return f.s.err("truncate", f.name, err)
	}
	return nil
}

func (f *file) Sync() error {
	if err := f.f.Sync(); err != nil {
		return f.s.err("sync", f.name, err)
	}
	return nil
}

func (f *file) Close() error {
	if err := f.f.Close(); err != nil {
		return f.s.err("close", f.name, err)
	}
	return nil
}
