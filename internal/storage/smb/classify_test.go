package smb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"syscall"
	"testing"

	smb2 "github.com/cloudsoda/go-smb2"

	"github.com/backupcycle/backupcycle/internal/storage"
)

// TestClassify covers the server answers no test server produces on demand
// (a disk that is really full, a quota, a deleted session).
func TestClassify(t *testing.T) {
	resp := func(code uint32) error {
		return &os.PathError{Op: "write", Path: "x.bak", Err: &smb2.ResponseError{Code: code}}
	}
	for _, tc := range []struct {
		err  error
		want error
	}{
		{resp(statusDiskFull), storage.ErrNoSpace},
		{resp(statusQuotaExceeded), storage.ErrNoSpace},
		{resp(statusLogonFailure), storage.ErrAuth},
		{resp(statusAccountDisabled), storage.ErrAuth},
		{resp(statusBadNetworkName), storage.ErrShareNotFound},
		{resp(statusNetworkNameDeleted), storage.ErrConnection},
		{resp(statusUserSessionDeleted), storage.ErrConnection},
		{resp(statusNoMemory), storage.ErrConnection},
		{resp(0xC0000001), nil}, // STATUS_UNSUCCESSFUL: unclassified
		{&os.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}, storage.ErrNotFound},
		{&os.PathError{Op: "open", Path: "x", Err: fs.ErrExist}, storage.ErrExists},
		{&os.PathError{Op: "open", Path: "x", Err: fs.ErrPermission}, storage.ErrPermission},
		{&smb2.TransportError{Err: io.EOF}, storage.ErrConnection},
		{fmt.Errorf("establishing TCP connection: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), storage.ErrConnection},
		{errors.New("something else"), nil},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	s := &Storage{cfg: Config{Share: "backup"}, loc: "smb://bak01:445/backup/sql", addr: "bak01:445"}
	e := s.err("write", "db_1of4.bak.partial", resp(statusDiskFull))
	if !errors.Is(e, storage.ErrNoSpace) || storage.IsRetryable(e) {
		t.Fatalf("disk full: %v, want non-retryable ErrNoSpace", e)
	}
	want := `write "db_1of4.bak.partial" on smb://bak01:445/backup/sql: no space left: response error: An operation failed because the disk was full. (free space on the share (retention) or raise its quota)`
	if e.Error() != want {
		t.Fatalf("message:\n got %s\nwant %s", e, want)
	}
	if !storage.IsRetryable(s.err("read", "x", context.DeadlineExceeded)) {
		t.Fatal("a timeout must be retryable")
	}
}

// TestCheckRegular covers what no Samba shows: a Windows server reports a
// symbolic link (STATUS_STOPPED_ON_SYMLINK) and the library opens the
// target instead, whose name its answer then carries.
func TestCheckRegular(t *testing.T) {
	for _, tc := range []struct {
		fi   *smb2.FileStat
		full string
		ok   bool
	}{
		{&smb2.FileStat{FileName: "a_1of1.bak", FileAttributes: 0x80}, "sql/a_1of1.bak", true},
		// A deduplicated file is a reparse point of its own name: a file.
		{&smb2.FileStat{FileName: "a_1of1.bak", FileAttributes: 0x400}, "a_1of1.bak", true},
		{&smb2.FileStat{FileName: "secret", FileAttributes: 0x80}, "sql/a_1of1.bak", false},
		{&smb2.FileStat{FileName: "a_1of1.bak", FileAttributes: 0x10}, "a_1of1.bak", false},
	} {
		err := checkRegular(tc.fi, tc.full)
		if (err == nil) != tc.ok || (err != nil && (!errors.Is(err, storage.ErrNotRegular) || Classify(err) != storage.ErrNotRegular)) {
			t.Errorf("checkRegular(%s as %s, attributes %#x) = %v, want ok=%v (else ErrNotRegular)", tc.fi.FileName, tc.full, tc.fi.FileAttributes, err, tc.ok)
		}
	}
}
