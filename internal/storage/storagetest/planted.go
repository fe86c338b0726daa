package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/storage"
)

// outsideDir is a directory outside the storage's, readable and writable by
// everyone (a test SMB server runs as its own user), removed at the end.
func outsideDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "storagetest-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeOutside writes a file anyone may read and write.
func writeOutside(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
}

// plantDir is Options.Dir/sub, created.
func plantDir(t *testing.T, o Options, sub string) string {
	t.Helper()
	if o.Dir == "" {
		t.Fatal("storagetest: Options.Dir is needed to plant links and special files")
	}
	dir := filepath.Join(o.Dir, sub)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o777)
	return dir
}

// refused checks that an operation on a planted name failed with a
// permanent storage error that is not "it exists and was fine".
func refused(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: succeeded, want it refused", what)
		return
	}
	var se *storage.Error
	if !errors.As(err, &se) {
		t.Errorf("%s: %v is not a *storage.Error", what, err)
	}
	if storage.IsRetryable(err) {
		t.Errorf("%s: %v is retryable; retrying cannot fix a link", what, err)
	}
}

// testSymlinks: another writer of the share planted symbolic links: to a
// secret outside the directory, to a file outside it the worker could
// write, to a file inside it, to nothing. None is listed, none is read or
// written through, and what they point to stays as it was.
func testSymlinks(t *testing.T, s storage.Storage, o Options) {
	ctx := context.Background()
	dir := plantDir(t, o, "sym")
	out := outsideDir(t)
	secret := []byte("SECRET-" + time.Now().Format(time.RFC3339Nano))
	writeOutside(t, filepath.Join(out, "secret"), secret)
	writeOutside(t, filepath.Join(out, "victim"), []byte("VICTIM"))
	if err := os.Mkdir(filepath.Join(out, "dir"), 0o777); err != nil {
		t.Fatal(err)
	}
	inside := randBytes(50, 5000)
	put(t, s, "sym/real.bak", inside)
	links := map[string]string{
		"out_1of1.bak":            filepath.Join(out, "secret"),
		"victim_1of1.bak.partial": filepath.Join(out, "victim"),
		"in_1of1.bak":             "real.bak",
		"abs_1of1.bak":            filepath.Join(dir, "real.bak"),
		"dangling_1of1.bak":       filepath.Join(out, "ghost"),
		"dir_1of1.bak":            filepath.Join(out, "dir"),
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}

	got, err := s.List(ctx, "sym/", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "sym/real.bak" {
		t.Errorf("List(sym/) = %v, want only sym/real.bak: links are never listed", got)
	}
	for name := range links {
		n := "sym/" + name
		_, err := s.Stat(ctx, n)
		refused(t, "Stat of link "+n, err)
		r, err := s.OpenRead(ctx, n)
		if err == nil {
			buf := make([]byte, 64)
			k, _ := r.ReadAt(buf, 0)
			r.Close()
			if bytes.Contains(buf[:k], []byte("SECRET")) {
				t.Errorf("OpenRead of link %s read the secret it points to", n)
			}
		}
		refused(t, "OpenRead of link "+n, err)
		if data, err := storage.ReadFile(ctx, s, n); err == nil || bytes.Contains(data, []byte("SECRET")) {
			t.Errorf("ReadFile of link %s: %d bytes (the secret: %v), %v; want it refused", n, len(data), bytes.Contains(data, []byte("SECRET")), err)
		}
		w, err := s.OpenWrite(ctx, n)
		if err == nil {
			_, _ = w.WriteAt([]byte("OVERWRITTEN"), 0)
			w.Close()
		}
		refused(t, "OpenWrite of link "+n, err)
		w, err = s.Create(ctx, n)
		if err == nil {
			_, _ = w.WriteAt([]byte("CREATED"), 0)
			w.Close()
		}
		refused(t, "Create over link "+n, err)
		if errors.Is(err, storage.ErrNotFound) {
			// Callers read ErrNotFound as "a file of the set is missing".
			t.Errorf("Create over link %s: %v; a name that is taken is ErrExists or ErrNotRegular, not ErrNotFound", n, err)
		}
	}
	put(t, s, "sym/new.partial", []byte("NEW"))
	for _, dst := range []string{"sym/victim_1of1.bak.partial", "sym/in_1of1.bak", "sym/out_1of1.bak"} {
		err := s.Rename(ctx, "sym/new.partial", dst)
		refused(t, "Rename onto link "+dst, err)
		if errors.Is(err, storage.ErrNotFound) {
			// The copier renames its finished .partial file: ErrNotFound
			// would read as a file of the set missing (an incomplete set).
			t.Errorf("Rename onto link %s: %v; a name that is taken is ErrExists or ErrNotRegular, not ErrNotFound", dst, err)
		}
		// A manifest is written by Replace: over a link, never through it.
		if err := s.Replace(ctx, "sym/new.partial", dst); errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Replace onto link %s: %v; not ErrNotFound (the file replacing it is there)", dst, err)
		}
		if _, err := s.Stat(ctx, "sym/new.partial"); err != nil {
			put(t, s, "sym/new.partial", []byte("NEW"))
		}
	}

	for path, want := range map[string][]byte{filepath.Join(out, "secret"): secret, filepath.Join(out, "victim"): []byte("VICTIM"),
		filepath.Join(dir, "real.bak"): inside} {
		if data, err := os.ReadFile(path); err != nil || !bytes.Equal(data, want) {
			t.Errorf("%s: %d bytes starting %q, %v; want it unchanged", path, len(data), data[:min(len(data), 11)], err)
		}
	}
	if _, err := os.Lstat(filepath.Join(out, "ghost")); err == nil {
		t.Errorf("a write through the dangling link created %s", filepath.Join(out, "ghost"))
	}
	if entries, _ := os.ReadDir(filepath.Join(out, "dir")); len(entries) != 0 {
		t.Errorf("files appeared in the linked directory outside: %v", entries)
	}
	// Removing a link removes the link, never what it points to.
	for name := range links {
		_ = s.Remove(ctx, "sym/"+name)
	}
	if data, err := os.ReadFile(filepath.Join(out, "secret")); err != nil || !bytes.Equal(data, secret) {
		t.Errorf("after Remove of the links, the secret: %q, %v", data, err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "real.bak")); err != nil || !bytes.Equal(data, inside) {
		t.Errorf("after Remove of the links, sym/real.bak: %d bytes, %v", len(data), err)
	}
}

// testSpecialFiles: a FIFO under a file's name is never listed, never
// blocks a call, gives no byte and takes none.
func testSpecialFiles(t *testing.T, s storage.Storage, o Options) {
	dir := plantDir(t, o, "fifo")
	for _, name := range []string{"f_1of1.bak", "f_1of1.bak.partial"} {
		if err := mkfifo(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(filepath.Join(dir, name), 0o666)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx := context.Background()
		got, err := s.List(ctx, "fifo/", "")
		if err != nil || len(got) != 0 {
			t.Errorf("List(fifo/) = %v, %v; want nothing: special files are never listed", got, err)
		}
		for _, n := range []string{"fifo/f_1of1.bak", "fifo/f_1of1.bak.partial"} {
			if fi, err := s.Stat(ctx, n); err == nil && fi.Size != 0 {
				t.Errorf("Stat(%s) = %+v", n, fi)
			}
			if r, err := s.OpenRead(ctx, n); err == nil {
				buf := make([]byte, 16)
				if k, _ := r.ReadAt(buf, 0); k != 0 {
					t.Errorf("read %d bytes from FIFO %s", k, n)
				}
				r.Close()
			}
			if w, err := s.OpenWrite(ctx, n); err == nil {
				if k, err := w.WriteAt([]byte("x"), 0); err == nil {
					t.Errorf("wrote %d bytes into FIFO %s", k, n)
				}
				w.Close()
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		panic(fmt.Sprintf("storagetest: a call on a FIFO in %s blocked", dir))
	}
}
