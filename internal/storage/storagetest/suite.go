// Package storagetest is the conformance suite every storage.Storage
// implementation passes (restic's internal/backend/test is the model): the same
// semantics for a local directory and an SMB share.
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/backupcycle/backupcycle/internal/storage"
)

// Options tune the suite for one implementation.
type Options struct {
	// Secret must never appear in a Location or an error message (the
	// password of the storage under test).
	Secret string
	// Dir is the directory behind the Storage on this machine (the local
	// directory, or the one a test SMB server serves), where the suite
	// plants what another writer of the share could: symbolic links to
	// files inside and outside it, FIFOs. Not used for an ObjectStore.
	Dir string
	// ObjectStore is an object store whose objects are written once,
	// whole (package s3): OpenWrite, Rename, Replace and Remove are
	// refused with storage.ErrUnsupported and change nothing, and the
	// suite checks what another writer of the bucket may plant there
	// through Raw instead of links and FIFOs, which a bucket cannot hold.
	ObjectStore bool
	// Raw writes and deletes objects beside the Storage under test (keys
	// relative to its prefix): another client of the same bucket.
	Raw RawObjects
}

// RawObjects is another client of an object store's bucket.
type RawObjects interface {
	// Put writes an object under key, which may be anything the store
	// accepts ("dir/" placeholders, keys the Storage never writes).
	Put(t *testing.T, key string, data []byte)
	// Delete deletes key the way a client without a version does: the
	// newest version becomes a delete marker.
	Delete(t *testing.T, key string)
}

type conformanceTest struct {
	name string
	fn   func(*testing.T, storage.Storage, Options)
}

// Run runs every conformance test as a subtest of t. newStorage returns a
// Storage over the same (initially empty) directory each time it is called;
// the suite closes it.
func Run(t *testing.T, newStorage func(t *testing.T) storage.Storage, opts Options) {
	tests := []conformanceTest{
		{"Location", testLocation},
		{"WriteRead", testWriteRead},
		{"ReadAtEOF", testReadAtEOF},
		{"CreateExisting", testCreateExisting},
		{"OpenWrite", testOpenWrite},
		{"NotFound", testNotFound},
		{"List", testList},
		{"Rename", testRename},
		{"Replace", testReplace},
		{"Remove", testRemove},
		{"FreeSpace", testFreeSpace},
		{"InvalidNames", testInvalidNames},
		{"ConcurrentIO", testConcurrentIO},
	}
	if opts.ObjectStore {
		// What a share holds and a bucket cannot (links, FIFOs, files
		// modified or moved in place) is replaced by what a bucket holds.
		tests = slices.DeleteFunc(tests, func(tc conformanceTest) bool {
			return tc.name == "OpenWrite" || tc.name == "Rename" || tc.name == "Replace" || tc.name == "Remove"
		})
		tests = append(tests, conformanceTest{"WriteOnce", testWriteOnce}, conformanceTest{"ObjectKeys", testObjectKeys})
	} else {
		tests = append(tests, conformanceTest{"Symlinks", testSymlinks}, conformanceTest{"SpecialFiles", testSpecialFiles})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStorage(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, s, opts)
		})
	}
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// put writes data to a new file and closes it.
func put(t *testing.T, s storage.Storage, name string, data []byte) {
	t.Helper()
	ctx := context.Background()
	w, err := s.Create(ctx, name)
	if err != nil {
		t.Fatalf("Create(%q): %v", name, err)
	}
	if len(data) > 0 {
		n, err := w.WriteAt(data, 0)
		if err != nil || n != len(data) {
			t.Fatalf("WriteAt(%q): n=%d err=%v, want n=%d", name, n, err, len(data))
		}
	}
	if err := w.Sync(); err != nil {
		t.Fatalf("Sync(%q): %v", name, err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close(%q): %v", name, err)
	}
}

// get reads a whole file.
func get(t *testing.T, s storage.Storage, name string) []byte {
	t.Helper()
	r, err := s.OpenRead(context.Background(), name)
	if err != nil {
		t.Fatalf("OpenRead(%q): %v", name, err)
	}
	defer r.Close()
	buf := make([]byte, r.Size())
	n, err := r.ReadAt(buf, 0)
	if n != len(buf) || (err != nil && !errors.Is(err, io.EOF)) {
		t.Fatalf("ReadAt(%q) whole file: n=%d err=%v, want n=%d", name, n, err, len(buf))
	}
	return buf
}

func wantKind(t *testing.T, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: got error %v, want one wrapping %q", what, err, kind)
	}
	var se *storage.Error
	if !errors.As(err, &se) {
		t.Fatalf("%s: error %v is not a *storage.Error", what, err)
	}
}

func testLocation(t *testing.T, s storage.Storage, o Options) {
	loc := s.Location()
	if loc == "" || !strings.Contains(loc, "://") {
		t.Fatalf("Location() = %q, want a URL", loc)
	}
	if o.Secret != "" && strings.Contains(loc, o.Secret) {
		t.Fatalf("Location() = %q contains the password", loc)
	}
	_, err := s.Stat(context.Background(), "location-missing.bak")
	if err == nil || !strings.Contains(err.Error(), loc) || !strings.Contains(err.Error(), "location-missing.bak") {
		t.Fatalf("Stat error %v should name the location %q and the file", err, loc)
	}
	if o.Secret != "" && strings.Contains(err.Error(), o.Secret) {
		t.Fatalf("error %q contains the password", err)
	}
}

func testWriteRead(t *testing.T, s storage.Storage, _ Options) {
	ctx := context.Background()
	data := randBytes(1, 3<<20+12345)
	put(t, s, "wr/sub/a.bak", data)
	if got := get(t, s, "wr/sub/a.bak"); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes differ from the %d written", len(got), len(data))
	}
	fi, err := s.Stat(ctx, "wr/sub/a.bak")
	if err != nil || fi.Size != int64(len(data)) || fi.Name != "wr/sub/a.bak" {
		t.Fatalf("Stat = %+v, %v; want size %d", fi, err, len(data))
	}
	r, err := s.OpenRead(ctx, "wr/sub/a.bak")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Size() != int64(len(data)) {
		t.Fatalf("Reader.Size() = %d, want %d", r.Size(), len(data))
	}
	for _, off := range []int64{0, 1, 65535, 1 << 20, 3<<20 + 1} {
		buf := make([]byte, 10000)
		n, err := r.ReadAt(buf, off)
		if err != nil || n != len(buf) || !bytes.Equal(buf, data[off:off+int64(n)]) {
			t.Fatalf("ReadAt(off=%d): n=%d err=%v or bytes differ", off, n, err)
		}
	}
	// An empty file.
	put(t, s, "wr/empty.bak", nil)
	if fi, err := s.Stat(ctx, "wr/empty.bak"); err != nil || fi.Size != 0 {
		t.Fatalf("Stat(empty) = %+v, %v", fi, err)
	}
}

func testReadAtEOF(t *testing.T, s storage.Storage, _ Options) {
	data := randBytes(2, 1000)
	put(t, s, "eof.bak", data)
	r, err := s.OpenRead(context.Background(), "eof.bak")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 300)
	n, err := r.ReadAt(buf, 900)
	if n != 100 || !errors.Is(err, io.EOF) || !bytes.Equal(buf[:n], data[900:]) {
		t.Fatalf("ReadAt across EOF: n=%d err=%v, want n=100 and io.EOF", n, err)
	}
	n, err = r.ReadAt(buf, 5000)
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("ReadAt past EOF: n=%d err=%v, want 0, io.EOF", n, err)
	}
}

func testCreateExisting(t *testing.T, s storage.Storage, _ Options) {
	data := randBytes(3, 5000)
	put(t, s, "exists.bak", data)
	w, err := s.Create(context.Background(), "exists.bak")
	if err == nil {
		w.Close()
	}
	wantKind(t, "Create over an existing file", err, storage.ErrExists)
	if got := get(t, s, "exists.bak"); !bytes.Equal(got, data) {
		t.Fatal("Create over an existing file changed its content")
	}
	if storage.IsRetryable(err) {
		t.Fatal("ErrExists must not be retryable")
	}
}

func testOpenWrite(t *testing.T, s storage.Storage, _ Options) {
	ctx := context.Background()
	data := randBytes(4, 200000)
	put(t, s, "ow.bak", data[:100000])
	w, err := s.OpenWrite(ctx, "ow.bak")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.WriteAt(data[100000:], 100000); err != nil || n != 100000 {
		t.Fatalf("WriteAt at the end: n=%d err=%v", n, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, "ow.bak"); !bytes.Equal(got, data) {
		t.Fatal("OpenWrite + WriteAt at offset: content differs (did OpenWrite truncate?)")
	}
	w, err = s.OpenWrite(ctx, "ow.bak")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Truncate(1234); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, "ow.bak"); !bytes.Equal(got, data[:1234]) {
		t.Fatalf("after Truncate(1234): %d bytes", len(got))
	}
}

func testNotFound(t *testing.T, s storage.Storage, o Options) {
	ctx := context.Background()
	_, err := s.Stat(ctx, "nope.bak")
	wantKind(t, "Stat", err, storage.ErrNotFound)
	_, err = s.OpenRead(ctx, "nope.bak")
	wantKind(t, "OpenRead", err, storage.ErrNotFound)
	if !o.ObjectStore {
		_, err = s.OpenWrite(ctx, "nope.bak")
		wantKind(t, "OpenWrite", err, storage.ErrNotFound)
	}
	_, err = s.OpenRead(ctx, "nodir/nope.bak")
	wantKind(t, "OpenRead in a missing directory", err, storage.ErrNotFound)
	if storage.IsRetryable(err) {
		t.Fatal("ErrNotFound must not be retryable")
	}
}

func testList(t *testing.T, s storage.Storage, _ Options) {
	ctx := context.Background()
	for i, n := range []string{"ls/db_2.bak", "ls/db_1.bak", "ls/other.bak", "ls/db_sub/x.bak", "lsx.bak",
		"ls/db_1.manifest.json", "ls/DB_3.manifest.json", "ls/db_.json", "ls/a[1]_1.bak", "ls/a1_1.bak", "ls/a%1_1.bak"} {
		put(t, s, n, randBytes(uint64(10+i), 10+i))
	}
	list := func(prefix, suffix string) string {
		t.Helper()
		got, err := s.List(ctx, prefix, suffix)
		if err != nil {
			t.Fatalf("List(%q, %q): %v", prefix, suffix, err)
		}
		var names []string
		for _, fi := range got {
			if fi.ModTime.IsZero() {
				t.Errorf("List(%q, %q): %s has no modification time", prefix, suffix, fi.Name)
			}
			names = append(names, fmt.Sprintf("%s:%d", fi.Name, fi.Size))
		}
		return strings.Join(names, " ")
	}
	for _, tc := range []struct{ prefix, suffix, want string }{
		{"ls/db_", "", "ls/db_.json:17 ls/db_1.bak:11 ls/db_1.manifest.json:15 ls/db_2.bak:10"},
		{"ls/db_", ".bak", "ls/db_1.bak:11 ls/db_2.bak:10"},
		// Exact case, whatever case the server matches in.
		{"ls/db_", ".manifest.json", "ls/db_1.manifest.json:15"},
		{"ls/DB_", "", "ls/DB_3.manifest.json:16"},
		// A prefix and a suffix that meet in the name count once.
		{"ls/db_", "_.json", ""},
		// Brackets and percent signs are plain characters.
		{"ls/a[1]_", "", "ls/a[1]_1.bak:18"},
		{"ls/a%1", "", "ls/a%1_1.bak:20"},
		{"lsx", "", "lsx.bak:14"},
		{"ls/", ".json", "ls/DB_3.manifest.json:16 ls/db_.json:17 ls/db_1.manifest.json:15"},
		{"missing-dir/db_", "", ""},
	} {
		if got := list(tc.prefix, tc.suffix); got != tc.want {
			t.Errorf("List(%q, %q) = %q, want %q (regular files only, sorted, with sizes)", tc.prefix, tc.suffix, got, tc.want)
		}
	}
	if got := list("ls/", ""); strings.Count(got, " ")+1 != 9 {
		t.Errorf("List(ls/) = %s; want 9 files, not the subdirectory", got)
	}
}

func testRename(t *testing.T, s storage.Storage, _ Options) {
	ctx := context.Background()
	a, b := randBytes(20, 3000), randBytes(21, 4000)
	put(t, s, "rn/a.partial", a)
	if err := s.Rename(ctx, "rn/a.partial", "rn/a.bak"); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, "rn/a.bak"); !bytes.Equal(got, a) {
		t.Fatal("renamed content differs")
	}
	_, err := s.Stat(ctx, "rn/a.partial")
	wantKind(t, "Stat of the old name after Rename", err, storage.ErrNotFound)

	put(t, s, "rn/b.partial", b)
	err = s.Rename(ctx, "rn/b.partial", "rn/a.bak")
	wantKind(t, "Rename onto an existing file", err, storage.ErrExists)
	if got := get(t, s, "rn/a.bak"); !bytes.Equal(got, a) {
		t.Fatal("Rename replaced an existing file")
	}
	if got := get(t, s, "rn/b.partial"); !bytes.Equal(got, b) {
		t.Fatal("failed Rename changed the source")
	}
	err = s.Rename(ctx, "rn/none.partial", "rn/none.bak")
	wantKind(t, "Rename of a missing file", err, storage.ErrNotFound)
}

func testReplace(t *testing.T, s storage.Storage, _ Options) {
	ctx := context.Background()
	a, b := randBytes(22, 1500), randBytes(23, 700)
	put(t, s, "rp/.m.tmp1", a)
	if err := s.Replace(ctx, "rp/.m.tmp1", "rp/m.json"); err != nil {
		t.Fatal(err)
	}
	put(t, s, "rp/.m.tmp2", b)
	if err := s.Replace(ctx, "rp/.m.tmp2", "rp/m.json"); err != nil {
		t.Fatalf("Replace onto an existing file: %v", err)
	}
	if got := get(t, s, "rp/m.json"); !bytes.Equal(got, b) {
		t.Fatal("Replace did not replace the existing file")
	}
	_, err := s.Stat(ctx, "rp/.m.tmp2")
	wantKind(t, "Stat of the old name after Replace", err, storage.ErrNotFound)
	err = s.Replace(ctx, "rp/none.tmp", "rp/m.json")
	wantKind(t, "Replace of a missing file", err, storage.ErrNotFound)
	if got := get(t, s, "rp/m.json"); !bytes.Equal(got, b) {
		t.Fatal("failed Replace changed the target")
	}
}

func testRemove(t *testing.T, s storage.Storage, _ Options) {
	ctx := context.Background()
	put(t, s, "rm.bak", randBytes(30, 100))
	if err := s.Remove(ctx, "rm.bak"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Stat(ctx, "rm.bak")
	wantKind(t, "Stat after Remove", err, storage.ErrNotFound)
	wantKind(t, "Remove of a missing file", s.Remove(ctx, "rm.bak"), storage.ErrNotFound)
}

func testFreeSpace(t *testing.T, s storage.Storage, _ Options) {
	free, ok, err := s.FreeSpace(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ok && free <= 0 {
		t.Fatalf("FreeSpace = %d, ok; want > 0 on a test machine", free)
	}
}

func testInvalidNames(t *testing.T, s storage.Storage, _ Options) {
	ctx := context.Background()
	for _, name := range []string{"", "/etc/passwd", "../escape.bak", "a/../../b", `a\b.bak`, "a:stream", "a//b", "x\x00y", "./a"} {
		_, err := s.Stat(ctx, name)
		wantKind(t, fmt.Sprintf("Stat(%q)", name), err, storage.ErrInvalidName)
		_, err = s.Create(ctx, name)
		wantKind(t, fmt.Sprintf("Create(%q)", name), err, storage.ErrInvalidName)
		wantKind(t, fmt.Sprintf("Remove(%q)", name), s.Remove(ctx, name), storage.ErrInvalidName)
		wantKind(t, fmt.Sprintf("Rename(ok, %q)", name), s.Rename(ctx, "ok.bak", name), storage.ErrInvalidName)
		if storage.IsRetryable(err) {
			t.Fatal("ErrInvalidName must not be retryable")
		}
	}
}

// testConcurrentIO writes and reads one file from several goroutines at once,
// in chunks bigger than one SMB request, as the copier does.
func testConcurrentIO(t *testing.T, s storage.Storage, _ Options) {
	ctx := context.Background()
	const chunk = 1<<20 + 4096
	data := randBytes(40, 8*chunk+777)
	w, err := s.Create(ctx, "conc.bak")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for off := 0; off < len(data); off += chunk {
		wg.Add(1)
		go func(off int) {
			defer wg.Done()
			end := min(off+chunk, len(data))
			if n, err := w.WriteAt(data[off:end], int64(off)); err != nil || n != end-off {
				errs <- fmt.Errorf("WriteAt(%d): n=%d err=%v", off, n, err)
			}
		}(off)
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := s.OpenRead(ctx, "conc.bak")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make([]byte, len(data))
	for off := 0; off < len(data); off += chunk {
		wg.Add(1)
		go func(off int) {
			defer wg.Done()
			end := min(off+chunk, len(data))
			if n, err := r.ReadAt(got[off:end], int64(off)); n != end-off || (err != nil && !errors.Is(err, io.EOF)) {
				errs <- fmt.Errorf("ReadAt(%d): n=%d err=%v", off, n, err)
			}
		}(off)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("concurrently written/read content differs")
	}
}
