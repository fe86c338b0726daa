package catalog

import (
	"fmt"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// BenchmarkDecide measures a retention run over a fleet: 200 databases x 60
// sets on 2 servers (24,000 manifests) with their stripe listings.
func BenchmarkDecide(b *testing.B) {
	day := 24 * time.Hour
	var ms []ServerManifest
	files := map[string][]FileInfo{}
	for d := 0; d < 200; d++ {
		db := fmt.Sprintf("db%03d", d)
		for seq := int64(1); seq <= 60; seq++ {
			state := StateVerified
			if seq%7 == 0 {
				state = StateFailed
			}
			m := set(db, seq, state, time.Duration(61-seq)*day)
			for _, server := range []string{"BAK01", "BAK02"} {
				ms = append(ms, ServerManifest{Server: server, Manifest: m})
				for _, s := range m.Stripes {
					files[server] = append(files[server], file(s.Name, time.Duration(61-seq)*day))
				}
				files[server] = append(files[server], file(tsql.ManifestFileName("sql01", db, seq), time.Duration(61-seq)*day))
			}
		}
	}
	policy := Retention{KeepVerified: 7, DeleteFailedAfter: day, DeleteAbandonedAfter: 3 * day}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ds, err := Decide(policy, ms, files, now)
		if err != nil || len(ds) == 0 {
			b.Fatal(err, len(ds))
		}
	}
	b.ReportMetric(float64(len(ms)), "manifests")
}
