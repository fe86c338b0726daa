package smb

import (
	"context"
	"os"
	"path"
	"sort"
	"strings"
	"testing"

	smb2 "github.com/cloudsoda/go-smb2"

	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/storagetest"
)

// BenchmarkListBesideUnrelatedFiles: what one cycle step's listing (the
// files of one database, 10 sets of 4 stripes and a manifest) costs on a
// share that also holds 200,000 unrelated files, against listing the whole
// directory and filtering here (what List did before it sent the server
// a pattern), in the same run: x_full_listing is how many times faster.
func BenchmarkListBesideUnrelatedFiles(b *testing.B) {
	srv := sambatest.Start(b, sambatest.Options{TempDir: ramDir()})
	dir := srv.Dir("backup")
	prefix, want := storagetest.PlantListing(b, dir, 200_000)
	cfg, err := ParseURL(srv.URL("backup"))
	if err != nil {
		b.Fatal(err)
	}
	s, err := Open(context.Background(), cfg, storage.Credentials{User: srv.User(), Password: srv.Password()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	storagetest.BenchListing(b, want,
		func() ([]storage.FileInfo, error) { return s.List(ctx, prefix, "") },
		func() ([]storage.FileInfo, error) { return fullListing(ctx, s, prefix) })
}

// fullListing is List as it was: the whole directory read, filtered here.
func fullListing(ctx context.Context, s *Storage, prefix string) ([]storage.FileInfo, error) {
	var out []storage.FileInfo
	err := s.do(ctx, "list", prefix, func(sh *smb2.Share) error {
		out = out[:0]
		entries, err := sh.ReadDir(s.full(""))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Mode().IsRegular() && strings.HasPrefix(e.Name(), prefix) {
				out = append(out, storage.FileInfo{Name: path.Join("", e.Name()), Size: e.Size(), ModTime: e.ModTime()})
			}
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// ramDir keeps the share in memory when it can: the benchmark measures the
// listing, not the disk.
func ramDir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return ""
}
