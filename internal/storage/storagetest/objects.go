package storagetest

import (
	"bytes"
	"context"
	"testing"

	"github.com/backupcycle/backupcycle/internal/storage"
)

// testWriteOnce: an object store writes each object once, whole. Opening
// one for writing, renaming, replacing and removing are refused, not
// retryable, and leave every object as it was.
func testWriteOnce(t *testing.T, s storage.Storage, _ Options) {
	ctx := context.Background()
	a, b := randBytes(60, 2000), randBytes(61, 3000)
	put(t, s, "wo/a.bak", a)
	put(t, s, "wo/b.json", b)
	_, err := s.OpenWrite(ctx, "wo/a.bak")
	wantKind(t, "OpenWrite", err, storage.ErrUnsupported)
	wantKind(t, "Rename", s.Rename(ctx, "wo/a.bak", "wo/c.bak"), storage.ErrUnsupported)
	wantKind(t, "Replace", s.Replace(ctx, "wo/a.bak", "wo/b.json"), storage.ErrUnsupported)
	err = s.Remove(ctx, "wo/a.bak")
	wantKind(t, "Remove", err, storage.ErrUnsupported)
	if storage.IsRetryable(err) {
		t.Fatal("ErrUnsupported must not be retryable")
	}
	if got := get(t, s, "wo/a.bak"); !bytes.Equal(got, a) {
		t.Fatal("wo/a.bak changed")
	}
	if got := get(t, s, "wo/b.json"); !bytes.Equal(got, b) {
		t.Fatal("wo/b.json changed")
	}
	if _, err := s.Stat(ctx, "wo/c.bak"); err == nil {
		t.Fatal("the refused Rename created wo/c.bak")
	}
	// A writer that is never closed leaves no object: nothing half-written
	// is ever there.
	w, err := s.Create(ctx, "wo/half.bak")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt(a, 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	_, err = s.Stat(ctx, "wo/half.bak")
	wantKind(t, "Stat of an object whose writer is not closed", err, storage.ErrNotFound)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, "wo/half.bak"); !bytes.Equal(got, a) {
		t.Fatal("wo/half.bak after Close differs")
	}
}

// testObjectKeys: another client of the bucket planted what a bucket can
// hold and a share cannot: "directory" placeholder objects (keys ending in
// "/"), deeper keys, a delete marker over an object. None is listed as a
// file of the directory, and the deleted object is not found.
func testObjectKeys(t *testing.T, s storage.Storage, o Options) {
	if o.Raw == nil {
		t.Fatal("storagetest: Options.Raw is needed for an object store")
	}
	ctx := context.Background()
	real := randBytes(62, 700)
	put(t, s, "ok/real.bak", real)
	o.Raw.Put(t, "ok/", nil)
	o.Raw.Put(t, "ok/dir/", nil)
	o.Raw.Put(t, "ok/sub/deep_1of1.bak", []byte("DEEP"))
	o.Raw.Put(t, "ok/gone_1of1.bak", []byte("GONE"))
	o.Raw.Delete(t, "ok/gone_1of1.bak")
	got, err := s.List(ctx, "ok/", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "ok/real.bak" || got[0].Size != int64(len(real)) {
		t.Errorf("List(ok/) = %v, want only ok/real.bak", got)
	}
	for _, n := range []string{"ok/gone_1of1.bak", "ok/dir", "ok/sub"} {
		_, err := s.Stat(ctx, n)
		wantKind(t, "Stat("+n+")", err, storage.ErrNotFound)
		_, err = s.OpenRead(ctx, n)
		wantKind(t, "OpenRead("+n+")", err, storage.ErrNotFound)
	}
	// A deleted name can be written again: a new version above the marker.
	put(t, s, "ok/gone_1of1.bak", real)
	if got := get(t, s, "ok/gone_1of1.bak"); !bytes.Equal(got, real) {
		t.Fatal("ok/gone_1of1.bak written over its delete marker reads otherwise")
	}
}
