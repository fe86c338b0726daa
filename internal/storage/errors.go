package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Kinds of failure. Test with errors.Is; every error returned by a Storage is
// an *Error wrapping one of them (or none, for an unclassified I/O error).
var (
	ErrNotFound      = errors.New("not found")
	ErrExists        = errors.New("already exists")
	ErrAuth          = errors.New("authentication failed")
	ErrShareNotFound = errors.New("share not found")
	ErrNoSpace       = errors.New("no space left")
	ErrPermission    = errors.New("permission denied")
	ErrInvalidName   = errors.New("invalid name")
	// ErrConnection: refused, unreachable, dropped, timed out or the server
	// out of resources. Retryable:
	// the next call redials.
	ErrConnection = errors.New("connection failed")
	// ErrCorrupt: content differs from what was written or expected (hash or
	// size mismatch). Not retryable as such: the copier removes what is bad.
	ErrCorrupt = errors.New("content mismatch")
	// ErrNotRegular: the name is there, but not as a regular file: a
	// symbolic link, a directory, a FIFO, a device, a socket. Another
	// writer of the share put it there; it is never followed, read or
	// written through.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: ReadFile of a file bigger than MaxSmallFile.
	ErrTooLarge = errors.New("too large")
	// ErrUnsupported: the storage cannot do this by design. An object
	// store with Object Lock writes each object once, whole: nothing is
	// modified in place, renamed or removed there.
	ErrUnsupported = errors.New("not supported by this storage")
)

// Error is a failed storage operation. Its message names the location (server,
// share, directory), the file and what to do; never a credential.
type Error struct {
	Op       string // stat, open, create, write, rename, ...
	Location string // Storage.Location()
	Name     string // file name relative to Location, may be empty
	Kind     error  // one of the Err* kinds above, or nil
	Err      error  // underlying error, may be nil
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.Name != "" {
		fmt.Fprintf(&b, " %q", e.Name)
	}
	if e.Location != "" {
		b.WriteString(" on ")
		b.WriteString(e.Location)
	}
	if e.Kind != nil {
		b.WriteString(": ")
		b.WriteString(e.Kind.Error())
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if h := hint(e.Kind); h != "" {
		b.WriteString(" (")
		b.WriteString(h)
		b.WriteString(")")
	}
	return b.String()
}

func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

func hint(kind error) string {
	switch kind {
	case ErrAuth:
		return "check the user and the password the credential reference points to"
	case ErrShareNotFound:
		return "check the share name in the location URL"
	case ErrNoSpace:
		return "free space on the share (retention) or raise its quota"
	case ErrPermission:
		return "grant the backup user read/write access to the directory"
	case ErrConnection:
		return "check that the server is up and reachable; retried automatically"
	case ErrNotRegular:
		return "the worker never follows links nor opens special files in a backup directory; remove it"
	case ErrTooLarge:
		return "the product never writes such a file; look at it and remove it"
	case ErrUnsupported:
		return "objects on a locked object store are written once and expire with their lock"
	}
	return ""
}

// permanent are the kinds retrying cannot fix, most telling first.
var permanent = []error{ErrAuth, ErrShareNotFound, ErrNoSpace, ErrPermission, ErrInvalidName,
	ErrNotRegular, ErrTooLarge, ErrUnsupported, ErrCorrupt, ErrExists, ErrNotFound}

// IsRetryable reports whether retrying the operation may succeed: connection
// failures, timeouts and unclassified I/O errors are; bad input (auth, share,
// name, a missing or existing file, a full share, corrupt content) and
// cancellation are not. In a joined error (several files) a permanent kind
// wins: retrying would fail on it again.
func IsRetryable(err error) bool {
	switch {
	case err == nil:
		return false
	case Kind(err) != nil && Kind(err) != ErrConnection:
		return false
	case errors.Is(err, ErrConnection), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.Is(err, context.Canceled):
		return false
	}
	return true
}

// Kind returns the Err* kind err wraps (a permanent one first), or nil.
func Kind(err error) error {
	for _, k := range permanent {
		if errors.Is(err, k) {
			return k
		}
	}
	if errors.Is(err, ErrConnection) {
		return ErrConnection
	}
	return nil
}

// ErrorType is a stable name for err's kind, for activities' application
// error types: "StorageConnection", "StorageAuth", "StorageShareNotFound",
// "StorageNotFound", "StorageExists", "StorageNoSpace", "StoragePermission",
// "StorageInvalidName", "StorageNotRegular", "StorageTooLarge",
// "StorageCorrupt", "StorageUnsupported", or "StorageError" for the rest.
func ErrorType(err error) string {
	switch Kind(err) {
	case ErrConnection:
		return "StorageConnection"
	case ErrAuth:
		return "StorageAuth"
	case ErrShareNotFound:
		return "StorageShareNotFound"
	case ErrNotFound:
		return "StorageNotFound"
	case ErrExists:
		return "StorageExists"
	case ErrNoSpace:
		return "StorageNoSpace"
	case ErrPermission:
		return "StoragePermission"
	case ErrInvalidName:
		return "StorageInvalidName"
	case ErrNotRegular:
		return "StorageNotRegular"
	case ErrTooLarge:
		return "StorageTooLarge"
	case ErrCorrupt:
		return "StorageCorrupt"
	case ErrUnsupported:
		return "StorageUnsupported"
	}
	return "StorageError"
}

// CheckName rejects names that could escape the directory or mean something
// else on an SMB server: empty, absolute, "." or ".." elements, backslashes,
// colons (NTFS streams), wildcards, control characters. The error wraps
// ErrInvalidName and names op, location and name.
func CheckName(op, location, name string) error {
	var why string
	switch {
	case name == "":
		why = "empty file name"
	case strings.HasPrefix(name, "/"):
		why = "absolute; use a path relative to the location"
	}
	for _, r := range name {
		if why != "" {
			break
		}
		if r < 0x20 || r == 0x7f || strings.ContainsRune(`\:*?"<>|`, r) {
			why = fmt.Sprintf("contains %q, not allowed in file names on SMB shares", r)
		}
	}
	for _, el := range strings.Split(name, "/") {
		if why == "" && (el == "" || el == "." || el == "..") {
			why = `has an empty, "." or ".." element`
		}
	}
	if why == "" {
		return nil
	}
	return &Error{Op: op, Location: location, Name: name, Kind: ErrInvalidName, Err: errors.New(why)}
}
