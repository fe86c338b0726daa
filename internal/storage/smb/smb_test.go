package smb_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/smb"
	"github.com/backupcycle/backupcycle/internal/storage/storagetest"
)

func open(t *testing.T, srv *sambatest.Server, url string, creds storage.Credentials) (*smb.Storage, error) {
	t.Helper()
	cfg, err := smb.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return smb.Open(context.Background(), cfg, creds)
}

func creds(srv *sambatest.Server) storage.Credentials {
	return storage.Credentials{User: srv.User(), Password: srv.Password()}
}

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  sambatest.Options
		dir   string
		query string
	}{
		{"default", sambatest.Options{}, "", ""},
		{"signing-mandatory", sambatest.Options{Signing: "mandatory"}, "sql", ""},
		{"signing-mandatory-smb2.1", sambatest.Options{Signing: "mandatory"}, "", "?dialect=2.1"},
		{"encrypt-required", sambatest.Options{Encrypt: "required"}, "sql/nested", ""},
		// One file's I/O spread over 3 of 4 connections (handles opened
		// lazily, per connection).
		{"signing-mandatory-file_conns=3", sambatest.Options{Signing: "mandatory"}, "", "?conns=4&file_conns=3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := sambatest.Start(t, tc.opts)
			url, dir := srv.URL("backup"), srv.Dir("backup")
			if tc.dir != "" {
				dir = filepath.Join(dir, tc.dir)
				if err := os.MkdirAll(filepath.Join(srv.Dir("backup"), tc.dir), 0o777); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(filepath.Join(srv.Dir("backup"), "sql"), 4450, 4450); err != nil {
					t.Fatal(err)
				}
				_ = os.Chmod(filepath.Join(srv.Dir("backup"), "sql"), 0o777)
				_ = os.Chmod(filepath.Join(srv.Dir("backup"), tc.dir), 0o777)
				url += "/" + tc.dir
			}
			url += tc.query
			storagetest.Run(t, func(t *testing.T) storage.Storage {
				s, err := open(t, srv, url, creds(srv))
				if err != nil {
					t.Fatal(err)
				}
				return s
			}, storagetest.Options{Secret: srv.Password(), Dir: dir})
		})
	}
}

func TestTypedErrors(t *testing.T) {
	srv := sambatest.Start(t, sambatest.Options{})

	_, err := open(t, srv, srv.URL("backup"), storage.Credentials{User: srv.User(), Password: "wrong-" + srv.Password()})
	if !errors.Is(err, storage.ErrAuth) || storage.IsRetryable(err) {
		t.Fatalf("wrong password: %v, want non-retryable ErrAuth", err)
	}
	t.Logf("wrong password: %v", err)
	if strings.Contains(err.Error(), srv.Password()) || !strings.Contains(err.Error(), srv.Addr()) {
		t.Fatalf("wrong-password error must name the server and hide the password: %v", err)
	}

	_, err = open(t, srv, srv.URL("nosuchshare"), creds(srv))
	t.Logf("unknown share: %v", err)
	if !errors.Is(err, storage.ErrShareNotFound) || storage.IsRetryable(err) || !strings.Contains(err.Error(), "nosuchshare") {
		t.Fatalf("unknown share: %v, want non-retryable ErrShareNotFound naming the share", err)
	}

	_, err = open(t, srv, srv.URL("backup")+"/no/such/dir", creds(srv))
	t.Logf("missing directory: %v", err)
	if !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), "no/such/dir") {
		t.Fatalf("missing directory: %v, want ErrNotFound naming it", err)
	}

	srv.Stop()
	_, err = open(t, srv, srv.URL("backup"), creds(srv))
	t.Logf("server down: %v", err)
	if !errors.Is(err, storage.ErrConnection) || !storage.IsRetryable(err) {
		t.Fatalf("stopped server: %v, want retryable ErrConnection", err)
	}
}

func TestParseURL(t *testing.T) {
	c, err := smb.ParseURL("smb://bak01:1445/backup/sql/db?sign=required&conns=2&file_conns=2&dialect=2.1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Host != "bak01" || c.Port != 1445 || c.Share != "backup" || c.Dir != "sql/db" || !c.RequireSigning || c.Conns != 2 || c.FileConns != 2 || c.Dialect != "2.1" {
		t.Fatalf("ParseURL = %+v", c)
	}
	if c, err := smb.ParseURL("smb://bak01/backup"); err != nil || c.Port != 445 || c.Dir != "" {
		t.Fatalf("ParseURL default port = %+v, %v", c, err)
	}
	for _, bad := range []string{"smb://user:hunter2@bak01/backup", "smb:///backup", "smb://bak01/", "http://bak01/backup",
		"smb://bak01/backup/../etc", "smb://bak01/backup?sign=maybe", "smb://bak01/backup?dialect=1.0", "smb://bak01/backup?foo=1", "smb://bak01:0/backup",
		"smb://bak01/backup?file_conns=0", "smb://bak01/backup?file_conns=x"} {
		_, err := smb.ParseURL(bad)
		if err == nil {
			t.Errorf("ParseURL(%q) accepted", bad)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseURL error leaks the password: %v", err)
		}
	}
}

// TestRedialAfterRestart: a Storage keeps working after its server was
// killed and restarted; the call that saw the drop fails with ErrConnection,
// later calls redial and reopen.
func TestRedialAfterRestart(t *testing.T) {
	for _, query := range []string{"", "?conns=4&file_conns=4"} {
		t.Run("query="+query, func(t *testing.T) { testRedialAfterRestart(t, query) })
	}
}

func testRedialAfterRestart(t *testing.T, query string) {
	srv := sambatest.Start(t, sambatest.Options{})
	ctx := context.Background()
	s, err := open(t, srv, srv.URL("backup")+query, creds(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w, err := s.Create(ctx, "redial.bak")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("first half "), 0); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	_, err = w.WriteAt([]byte("lost"), 11)
	if !errors.Is(err, storage.ErrConnection) || !storage.IsRetryable(err) {
		t.Fatalf("write to a killed server: %v, want retryable ErrConnection", err)
	}
	srv.Restart()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = w.WriteAt([]byte("second half"), 11)
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("write after restart (redial + reopen): %v", err)
	}
	// A write of several 1 MiB requests: with file_conns, over several
	// connections, each reopening its handle.
	big := bytes.Repeat([]byte("0123456789abcdef"), (4<<20+5)/16)
	if _, err := w.WriteAt(big, 22); err != nil {
		t.Fatalf("multi-request write after restart: %v", err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(srv.Dir("backup"), "redial.bak"))
	if err != nil || string(got[:22]) != "first half second half" || !bytes.Equal(got[22:], big) {
		t.Fatalf("content after redial: %q..., %v", got[:min(len(got), 40)], err)
	}
	r, err := s.OpenRead(ctx, "redial.bak")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	back := make([]byte, len(got))
	if n, err := r.ReadAt(back, 0); (err != nil && !errors.Is(err, io.EOF)) || n != len(got) || !bytes.Equal(back, got) {
		t.Fatalf("read back over SMB: %d bytes, %v", n, err)
	}
	if _, err := s.Stat(ctx, "redial.bak"); err != nil {
		t.Fatalf("Stat after redial: %v", err)
	}
}

// TestFrozenServer: a server that stops answering makes calls fail at their
// context's deadline (retryable), not hang; once it answers again, the next
// call works.
func TestFrozenServer(t *testing.T) {
	srv := sambatest.Start(t, sambatest.Options{})
	s, err := open(t, srv, srv.URL("backup"), creds(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.WriteFile(filepath.Join(srv.Dir("backup"), "f.bak"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = s.Stat(ctx, "f.bak")
	cancel()
	srv.Thaw()
	if !errors.Is(err, context.DeadlineExceeded) || !storage.IsRetryable(err) {
		t.Fatalf("Stat on a frozen server: %v, want a retryable deadline error", err)
	}
	if _, err := s.Stat(context.Background(), "f.bak"); err != nil {
		t.Fatalf("Stat after the server answers again: %v", err)
	}
}

// The location's directory gone from the share while the storage is open
// (the share's volume unmounted, a DFS target switched to a server without
// it): a file of a set looked up there is not "not found", which the cycle
// takes for an incomplete set, but a retryable connection failure naming
// the directory. A file missing from a directory that is there stays
// ErrNotFound.
func TestLocationGoneIsNotAMissingFile(t *testing.T) {
	srv := sambatest.Start(t, sambatest.Options{})
	share := srv.Dir("backup")
	loc := filepath.Join(share, "sql")
	if err := os.MkdirAll(loc, 0o777); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(loc, 0o777)
	if err := os.WriteFile(filepath.Join(loc, "Sales_7_1of1.bak"), []byte("stripe"), 0o666); err != nil {
		t.Fatal(err)
	}
	s, err := open(t, srv, srv.URL("backup")+"/sql", creds(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Stat(ctx, "Sales_7_2of2.bak"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a file missing from the location: %v, want ErrNotFound", err)
	}
	if err := os.Rename(loc, filepath.Join(share, "unmounted")); err != nil {
		t.Fatal(err)
	}
	_, serr := s.Stat(ctx, "Sales_7_1of1.bak")
	_, oerr := s.OpenRead(ctx, "Sales_7_1of1.bak")
	_, lerr := s.List(ctx, "Sales_7_", ".bak")
	for op, err := range map[string]error{"stat": serr, "open": oerr, "list": lerr} {
		if errors.Is(err, storage.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || !errors.Is(err, storage.ErrConnection) || !storage.IsRetryable(err) ||
			!strings.Contains(err.Error(), `"sql"`) {
			t.Errorf("%s with the location's directory gone: %v, want a retryable ErrConnection naming the directory", op, err)
		}
	}
}
