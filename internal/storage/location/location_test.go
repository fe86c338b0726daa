package location_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/location"
)

func TestOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, raw := range []string{dir, "file://" + dir} {
		s, err := location.Open(ctx, raw, storage.Credentials{})
		if err != nil {
			t.Fatalf("Open(%q): %v", raw, err)
		}
		if s.Location() != "file://"+dir {
			t.Fatalf("Open(%q).Location() = %q", raw, s.Location())
		}
		s.Close()
	}
	srv := sambatest.Start(t, sambatest.Options{})
	s, err := location.Open(ctx, srv.URL("backup"), storage.Credentials{User: srv.User(), Password: srv.Password()})
	if err != nil {
		t.Fatal(err)
	}
	if s.Location() != srv.URL("backup") {
		t.Fatalf("Location() = %q, want %q", s.Location(), srv.URL("backup"))
	}
	s.Close()

	for _, bad := range []string{"", "relative/dir", "file://bak01/x", "ftp://x/y", "smb://u:secret@h/s"} {
		_, err := location.Open(ctx, bad, storage.Credentials{})
		if err == nil || !errors.Is(err, storage.ErrInvalidName) || storage.IsRetryable(err) {
			t.Errorf("Open(%q) = %v, want a non-retryable ErrInvalidName", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("error leaks the password: %v", err)
		}
		if location.Check(bad) == nil {
			t.Errorf("Check(%q) accepted", bad)
		}
	}
}

// A backup server's smb: settings reach the SMB client: with
// require_signing (the default) every message of the session is signed
// even when the server does not require it; without, only what the
// protocol always signs is.
func TestOpenServerSigning(t *testing.T) {
	srv := sambatest.Start(t, sambatest.Options{}) // Samba's default: signing offered, not required
	t.Setenv("BC_LOCATION_TEST_SMB_PW", srv.Password())
	for _, tc := range []struct {
		require bool
		want    string
	}{{true, "full"}, {false, "partial"}} {
		b := &config.BackupServer{Name: "bak01", Location: srv.URL("backup"),
			SMB: &config.SMB{User: srv.User(), Password: config.SecretRef{Env: "BC_LOCATION_TEST_SMB_PW"}, RequireSigning: tc.require}}
		st, err := location.OpenServer(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.List(context.Background(), "", ""); err != nil {
			t.Fatal(err)
		}
		ss, err := srv.Sessions()
		if err != nil {
			t.Fatal(err)
		}
		if len(ss) == 0 {
			t.Fatal("smbstatus lists no session")
		}
		for _, s := range ss {
			if s.Signing != tc.want {
				t.Errorf("require_signing %v: a session signed %q, want %q", tc.require, s.Signing, tc.want)
			}
		}
		st.Close()
		waitNoSessions(t, srv)
	}
}

// waitNoSessions waits until smbd has dropped the sessions of a closed
// storage, so the next case sees only its own.
func waitNoSessions(t *testing.T, srv *sambatest.Server) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ss, err := srv.Sessions()
		if err != nil {
			t.Fatal(err)
		}
		if len(ss) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions still open 10s after Close: %+v", ss)
		}
	}
}
