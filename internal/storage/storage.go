// Package storage is where backup files live: one small interface over a
// directory (package local) or an SMB share (package smb), with typed errors
// that activities classify as retryable or not. The conformance suite in
// package storagetest runs against every implementation.
package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"
)

// Storage is a directory of backup files. Names are slash-separated paths
// relative to the directory (see CheckName). Every method takes a context; a
// Reader or Writer stays bound to the context it was opened with, so cancel that
// context to abort its in-flight I/O.
//
// Implementations are safe for concurrent use; so are ReadAt and WriteAt on one
// Reader or Writer (that is how the copier keeps several requests in flight).
//
// Other tools and people may write the directory too. Only regular files are
// files: a name that is a symbolic link (to a file inside the directory or
// outside it), a directory, a FIFO, a device or a socket is never listed, and
// Stat, OpenRead and OpenWrite refuse it (ErrNotRegular, or ErrNotFound where
// the server hides it), never following a link; Create never creates a file
// where a link points (ErrExists or ErrNotRegular: a name that is taken is
// never ErrNotFound), and Remove removes a link itself, never its target. An
// SMB server decides what it shows: the client refuses what the protocol
// tells (directories, links it is asked to follow), and the server's settings
// do the rest (README "Backup shares"). Every implementation passes the
// conformance suite's checks of this (package storagetest).
type Storage interface {
	// Location names the directory for messages, e.g.
	// "smb://bak01:445/backup/sql" or "file:///srv/bak01". It never holds
	// credentials.
	Location() string

	// Stat returns the file's size; ErrNotFound when it does not exist.
	Stat(ctx context.Context, name string) (FileInfo, error)

	// OpenRead opens an existing file for reading; ErrNotFound when missing.
	OpenRead(ctx context.Context, name string) (Reader, error)

	// Create creates a new empty file (and missing parent directories) for
	// writing. It never truncates: ErrExists when the name is taken.
	Create(ctx context.Context, name string) (Writer, error)

	// OpenWrite opens an existing file for writing at any offset without
	// truncating it (to resume a partial copy); ErrNotFound when missing.
	OpenWrite(ctx context.Context, name string) (Writer, error)

	// List returns the regular files whose names start with prefix and end
	// with suffix, sorted by name. The directory part of prefix ("sql/db_"
	// lists "sql") is the directory listed, without recursion; a missing
	// directory lists nothing. Matching is exact (case-sensitive) whatever
	// the server does. Only matching entries cost more than reading the
	// directory: an SMB server is sent the pattern (QUERY_DIRECTORY), so a
	// directory of many unrelated files is not transferred.
	List(ctx context.Context, prefix, suffix string) ([]FileInfo, error)

	// Rename moves oldName to newName. It never replaces: ErrExists when
	// newName exists (on SMB the check and the rename are two requests, so two
	// writers racing for one name are not excluded; the copier never does that).
	Rename(ctx context.Context, oldName, newName string) error

	// Replace moves oldName to newName in one step, replacing newName if it
	// exists: readers see the old or the new content, never neither. It is for
	// small files rewritten in place (the manifest); stripes use Rename, which
	// never replaces. ErrNotFound when oldName does not exist.
	Replace(ctx context.Context, oldName, newName string) error

	// Remove deletes a file; ErrNotFound when it does not exist.
	Remove(ctx context.Context, name string) error

	// FreeSpace returns the bytes available to this user; ok is false when the
	// server does not report it.
	FreeSpace(ctx context.Context) (free int64, ok bool, err error)

	// Close releases connections. Open Readers and Writers become unusable.
	Close() error
}

// FileInfo describes one file.
type FileInfo struct {
	Name    string // relative to the Storage, slash-separated
	Size    int64
	ModTime time.Time
}

// Reader reads a file at offsets. ReadAt follows io.ReaderAt: a short read
// returns an error (io.EOF at the end of the file), never n < 0.
type Reader interface {
	io.ReaderAt
	// Size is the file size when it was opened.
	Size() int64
	Close() error
}

// Writer writes a file at offsets. WriteAt follows io.WriterAt (n < len(p)
// comes with an error, never n < 0); after an error the bytes written are
// unknown: Stat the file instead of trusting n.
type Writer interface {
	io.WriterAt
	Truncate(size int64) error
	// Sync asks the server to flush the file to stable storage.
	Sync() error
	Close() error
}

// Credentials authenticate to a server. The caller resolves them from a
// reference (env var, file) inside the activity; they are never part of a
// location URL. String and GoString hide the password, so they are safe in logs.
type Credentials struct {
	User     string
	Password string `json:"-"` // never encoded, nor printed (String, GoString)
	Domain   string
}

func (c Credentials) String() string {
	if c.Domain != "" {
		return c.Domain + `\` + c.User + " (password hidden)"
	}
	return c.User + " (password hidden)"
}

// GoString keeps %#v from printing the password.
func (c Credentials) GoString() string { return "storage.Credentials{" + c.String() + "}" }

// MaxSmallFile is the most ReadFile reads. Manifests and sequence files
// are kilobytes (a manifest that lists every database of a verification
// instance stays far below it); a bigger file under such a name was put
// there by someone else, and a sparse one costs its writer nothing.
const MaxSmallFile = 1 << 20

// ReadFile reads a whole small file, e.g. a manifest: at most MaxSmallFile
// bytes, a bigger file is ErrTooLarge and none of it is read. A missing
// file is ErrNotFound and fs.ErrNotExist both, for callers that speak
// io/fs.
func ReadFile(ctx context.Context, st Storage, name string) ([]byte, error) {
	r, err := st.OpenRead(ctx, name)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
		}
		return nil, err
	}
	defer r.Close()
	if r.Size() > MaxSmallFile {
		return nil, &Error{Op: "read", Location: st.Location(), Name: name, Kind: ErrTooLarge,
			Err: fmt.Errorf("%d bytes, over the %d a manifest or sequence file may have; not read", r.Size(), MaxSmallFile)}
	}
	buf := make([]byte, r.Size())
	if _, err := r.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf, nil
}
