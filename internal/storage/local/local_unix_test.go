//go:build unix

package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/local"
)

// TestRefusesWhatIsNotARegularFile: on a local directory every refusal of
// the conformance suite is ErrNotRegular, naming what the entry is; a
// directory link leading out of the directory is refused on the way; and
// a Storage closed is opened again by its next call.
func TestRefusesWhatIsNotARegularFile(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(out, "secret"), []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"link.bak": filepath.Join(out, "secret"), "esc": out} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.bak"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.bak"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := local.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, what := range map[string]string{"link.bak": "symbolic link", "sub.bak": "directory", "fifo.bak": "FIFO", "esc/secret": ""} {
		_, err := s.Stat(ctx, name)
		if !errors.Is(err, storage.ErrNotRegular) || !strings.Contains(err.Error(), what) {
			t.Errorf("Stat(%s) = %v, want ErrNotRegular naming a %s", name, err, what)
		}
		if _, err := s.OpenRead(ctx, name); !errors.Is(err, storage.ErrNotRegular) {
			t.Errorf("OpenRead(%s) = %v, want ErrNotRegular", name, err)
		}
	}
	if _, err := s.Create(ctx, "esc/new.bak"); err == nil {
		t.Error("Create through a link out of the directory succeeded")
	}
	if _, err := os.Stat(filepath.Join(out, "new.bak")); err == nil {
		t.Error("a file was created outside the directory")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	w, err := s.Create(ctx, "after-close.bak")
	if err != nil {
		t.Fatalf("Create after Close: %v", err)
	}
	w.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
