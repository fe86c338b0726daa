package storagetest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// PlantListing fills dir (the directory behind a Storage) with unrelated
// files of others and the files of one database's sets (10 sets of 4
// stripes and a manifest), for the listing benchmarks; it returns the
// database's prefix (what a cycle step lists) and how many files it has.
func PlantListing(tb testing.TB, dir string, unrelated int) (prefix string, files int) {
	tb.Helper()
	for i := range unrelated {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("other-tool-%07d.dat", i)), nil, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	n := tsql.NamesOf("sql01", "sales")
	for seq := int64(1); seq <= 10; seq++ {
		names := []string{n.Manifest(seq)}
		for i := 1; i <= 4; i++ {
			names = append(names, n.Stripe(seq, i, 4))
		}
		for _, name := range names {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
				tb.Fatal(err)
			}
			files++
		}
	}
	return n.DBPrefix(), files
}

// BenchListing times list (a Storage's List of a cycle step) against full
// (the whole directory read and filtered, the reference) in the same run,
// checks that each finds want files, and reports ms/listing,
// ms/full-listing and x_full_listing (how many times faster list is).
func BenchListing(b *testing.B, want int, list, full func() ([]storage.FileInfo, error)) {
	b.Helper()
	var pattern, whole time.Duration
	n := 0
	for b.Loop() {
		for _, c := range []struct {
			name string
			fn   func() ([]storage.FileInfo, error)
			took *time.Duration
		}{{"List", list, &pattern}, {"the full listing", full, &whole}} {
			t0 := time.Now()
			got, err := c.fn()
			*c.took += time.Since(t0)
			if err != nil || len(got) != want {
				b.Fatalf("%s: %d files, %v; want %d", c.name, len(got), err, want)
			}
		}
		n++
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	b.ReportMetric(ms(pattern), "ms/listing")
	b.ReportMetric(ms(whole), "ms/full-listing")
	b.ReportMetric(whole.Seconds()/pattern.Seconds(), "x_full_listing")
}
