package s3_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/s3test"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/storage/s3"
)

// BenchmarkUploadAgainstLocalCopy uploads a 256 MiB stripe into a locked
// bucket of versitygw on loopback (multipart, SHA-256 per part checked by
// the server, read back whole, lock checked) and, in the same run, copies
// it between two local directories with the copier (hashed, read back,
// renamed): x_local_copy is the upload's throughput against that copy's,
// the price of S3 and its checks on this machine. Both ends live in the
// same file system; versitygw stores the object as a file too.
func BenchmarkUploadAgainstLocalCopy(b *testing.B) {
	const size = 256 << 20
	dir := b.TempDir()
	srcDir, dstDir := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	for _, d := range []string{srcDir, dstDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*31 + i>>12)
	}
	if err := os.WriteFile(filepath.Join(srcDir, "x.bak"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	ctx := context.Background()
	src, err := local.Open(ctx, srcDir)
	if err != nil {
		b.Fatal(err)
	}
	dst, err := local.Open(ctx, dstDir)
	if err != nil {
		b.Fatal(err)
	}
	srv := s3test.Start(b)
	if err := srv.CreateBucket(ctx, "bench", true); err != nil {
		b.Fatal(err)
	}
	cfg := srv.Config("bench", "")
	cfg.Lock = s3.Lock{Mode: s3.ModeCompliance, Until: time.Now().Add(time.Hour)}
	st, err := s3.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var upload, copying time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		res := st.Upload(ctx, src, s3.UploadJob{Src: "x.bak", Name: fmt.Sprintf("x%d.bak", i), SHA256: hexSum}, s3.UploadOptions{})
		if res.Err != nil {
			b.Fatal(res.Err)
		}
		upload += time.Since(start)
		start = time.Now()
		if _, err := copier.New(copier.Options{}).Copy(ctx, src, dst, []copier.Job{{Src: "x.bak", Dst: fmt.Sprintf("x%d.bak", i), SHA256: hexSum}}); err != nil {
			b.Fatal(err)
		}
		copying += time.Since(start)
	}
	mbps := func(d time.Duration) float64 { return float64(b.N) * size / (1 << 20) / d.Seconds() }
	b.ReportMetric(mbps(upload), "upload_MiB/s")
	b.ReportMetric(mbps(copying), "local_copy_MiB/s")
	b.ReportMetric(mbps(upload)/mbps(copying), "x_local_copy")
	start := time.Now()
	res, err := st.Probe(ctx, s3.ModeCompliance)
	if err != nil || !res.Immutable {
		b.Fatalf("probe: %+v, %v", res, err)
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "probe_ms")
}
