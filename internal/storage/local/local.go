// Package local is a storage.Storage in a directory of the worker's file system
// (a local disk, or an SMB share mounted by the OS).
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

	"github.com/backupcycle/backupcycle/internal/storage"
)

// Storage is a directory.
type Storage struct {
	root string
	loc  string
}

var _ storage.Storage = (*Storage)(nil)

// Open returns the Storage of an existing directory.
func Open(ctx context.Context, dir string) (*Storage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, &storage.Error{Op: "open", Location: dir, Kind: storage.ErrInvalidName, Err: err}
	}
	s := &Storage{root: abs, loc: (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, s.err("open", "", fmt.Errorf("directory does not exist, create it first: %w", err))
	}
	if !fi.IsDir() {
		return nil, &storage.Error{Op: "open", Location: s.loc, Kind: storage.ErrInvalidName, Err: errors.New("not a directory")}
	}
	return s, nil
}

// Location is the file:// URL of the directory.
func (s *Storage) Location() string { return s.loc }

func (s *Storage) path(op, name string) (string, error) {
	if err := storage.CheckName(op, s.loc, name); err != nil {
		return "", err
	}
	return filepath.Join(s.root, filepath.FromSlash(name)), nil
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
	}
	return &storage.Error{Op: op, Location: s.loc, Name: name, Kind: kind, Err: err}
}

func (s *Storage) Stat(ctx context.Context, name string) (storage.FileInfo, error) {
	p, err := s.path("stat", name)
	if err != nil {
		return storage.FileInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return storage.FileInfo{}, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return storage.FileInfo{}, s.err("stat", name, err)
	}
	if !fi.Mode().IsRegular() {
		return storage.FileInfo{}, s.err("stat", name, fmt.Errorf("not a regular file: %w", fs.ErrNotExist))
	}
	return storage.FileInfo{Name: name, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

func (s *Storage) OpenRead(ctx context.Context, name string) (storage.Reader, error) {
	p, err := s.path("open", name)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, s.err("open", name, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, s.err("open", name, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, s.err("open", name, fmt.Errorf("not a regular file: %w", fs.ErrNotExist))
	}
	return &file{s: s, name: name, f: f, size: fi.Size()}, nil
}

func (s *Storage) Create(ctx context.Context, name string) (storage.Writer, error) {
	p, err := s.path("create", name)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, s.err("create", name, err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, s.err("create", name, err)
	}
	return &file{s: s, name: name, f: f}, nil
}

func (s *Storage) OpenWrite(ctx context.Context, name string) (storage.Writer, error) {
	p, err := s.path("open", name)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return nil, s.err("open", name, err)
	}
	return &file{s: s, name: name, f: f}, nil
}

func (s *Storage) List(ctx context.Context, prefix string) ([]storage.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir, base := path.Split(prefix)
	dirPath := s.root
	if dir != "" {
		p, err := s.path("list", strings.TrimSuffix(dir, "/"))
		if err != nil {
			return nil, err
		}
		dirPath = p
	}
	entries, err := os.ReadDir(dirPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, s.err("list", prefix, err)
	}
	var out []storage.FileInfo
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), base) {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while listing
		}
		if err != nil {
			return nil, s.err("list", prefix, err)
		}
		out = append(out, storage.FileInfo{Name: dir + e.Name(), Size: fi.Size(), ModTime: fi.ModTime()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Rename links the new name (which fails atomically if it exists) and then
// removes the old one, so an existing file is never replaced.
func (s *Storage) Rename(ctx context.Context, oldName, newName string) error {
	op, err := s.path("rename", oldName)
	if err != nil {
		return err
	}
	np, err := s.path("rename", newName)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := os.Stat(op); err != nil {
		return s.err("rename", oldName, err)
	}
	if err := os.MkdirAll(filepath.Dir(np), 0o755); err != nil {
		return s.err("rename", newName, err)
	}
	err = os.Link(op, np)
	switch {
	case err == nil:
		if err := os.Remove(op); err != nil {
			return s.err("rename", oldName, err)
		}
		return nil
	case errors.Is(err, fs.ErrExist):
		return s.err("rename", newName, err)
	}
	// No hard links on this file system: check, then rename.
	if _, serr := os.Lstat(np); serr == nil {
		return s.err("rename", newName, fs.ErrExist)
	}
	if err := os.Rename(op, np); err != nil {
		return s.err("rename", oldName, err)
	}
	return nil
}

// Replace is os.Rename: atomic, replacing newName.
func (s *Storage) Replace(ctx context.Context, oldName, newName string) error {
	op, err := s.path("replace", oldName)
	if err != nil {
		return err
	}
	np, err := s.path("replace", newName)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(np), 0o755); err != nil {
		return s.err("replace", newName, err)
	}
	if err := os.Rename(op, np); err != nil {
		return s.err("replace", oldName, err)
	}
	return nil
}

func (s *Storage) Remove(ctx context.Context, name string) error {
	p, err := s.path("remove", name)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Remove(p); err != nil {
		return s.err("remove", name, err)
	}
	return nil
}

// FreeSpace is in freespace_unix.go and freespace_windows.go.

func (s *Storage) Close() error { return nil }

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
