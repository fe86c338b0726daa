package location_test

import (
	"context"
	"errors"
	"strings"
	"testing"

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
