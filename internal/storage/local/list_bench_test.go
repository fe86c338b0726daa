package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/storage/storagetest"
)

// BenchmarkListBesideUnrelatedFiles: what one cycle step's listing (the
// files of one database) costs in a directory that also holds 200,000
// unrelated files, against reading the whole directory at once, sorted,
// and filtering it (what List did before), in the same run:
// x_full_listing is how many times faster. A local directory is read
// whole either way; what changes is that nothing but the matching
// entries is kept, sorted or stat'ed.
func BenchmarkListBesideUnrelatedFiles(b *testing.B) {
	dir := b.TempDir()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "listbench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	prefix, want := storagetest.PlantListing(b, dir, 200_000)
	s, err := local.Open(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	storagetest.BenchListing(b, want,
		func() ([]storage.FileInfo, error) { return s.List(ctx, prefix, "") },
		func() ([]storage.FileInfo, error) { return fullListing(dir, prefix) })
}

// fullListing is List as it was: the whole directory read and sorted, then
// filtered.
func fullListing(dir, prefix string) ([]storage.FileInfo, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []storage.FileInfo
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		out = append(out, storage.FileInfo{Name: filepath.Base(e.Name()), Size: fi.Size(), ModTime: fi.ModTime()})
	}
	return out, nil
}
