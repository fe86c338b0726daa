package copier_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
	"github.com/backupcycle/backupcycle/internal/storage/smb"
)

// makeFile writes size pseudo-random bytes to path (behind a share) and
// returns their sha256. A random 1 MiB block stamped with its index keeps
// every block distinct without paying for 1 GiB of random numbers.
func makeFile(t testing.TB, path string, size int64, seed uint64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	block := make([]byte, 1<<20)
	_, _ = rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 0x5a}).Read(block)
	w := io.MultiWriter(f, h)
	for i := int64(0); i*int64(len(block)) < size; i++ {
		binary.LittleEndian.PutUint64(block, uint64(i)^seed<<48)
		n := min(int64(len(block)), size-i*int64(len(block)))
		if _, err := w.Write(block[:n]); err != nil {
			t.Fatal(err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fileSum hashes a file on this machine (the far end of a share).
func fileSum(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func openSMB(t testing.TB, srv *sambatest.Server, share string) *smb.Storage {
	t.Helper()
	cfg, err := smb.ParseURL(srv.URL(share))
	if err != nil {
		t.Fatal(err)
	}
	s, err := smb.Open(context.Background(), cfg, storage.Credentials{User: srv.User(), Password: srv.Password()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// stripes creates n source stripes of size bytes on srv and returns the jobs
// and their sha256 by name.
func stripes(t testing.TB, srv *sambatest.Server, n int, size int64) ([]copier.Job, map[string]string) {
	t.Helper()
	var jobs []copier.Job
	sums := map[string]string{}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("Sales_00000042_%dof%d.bak", i, n)
		sums[name] = makeFile(t, filepath.Join(srv.Dir("backup"), name), size, uint64(i))
		jobs = append(jobs, copier.Job{Src: name, Dst: name})
	}
	return jobs, sums
}

// checkCopied checks results and the files behind the destination share:
// the hash streamed from the source, the hash read back from the destination
// and the hash of the file on the destination's disk all equal the source's.
func checkCopied(t *testing.T, dst *sambatest.Server, res []copier.Result, sums map[string]string) {
	t.Helper()
	for _, r := range res {
		if r.Err != nil || r.SHA256 != sums[r.Src] {
			t.Errorf("%s: result sha256 %s err %v, source sha256 %s", r.Src, r.SHA256, r.Err, sums[r.Src])
		}
		if got := fileSum(t, filepath.Join(dst.Dir("backup"), r.Dst)); got != sums[r.Src] {
			t.Errorf("%s: destination file sha256 %s, source %s", r.Dst, got, sums[r.Src])
		}
		if _, err := os.Stat(filepath.Join(dst.Dir("backup"), r.Dst+".partial")); !os.IsNotExist(err) {
			t.Errorf("%s: .partial left behind", r.Dst)
		}
	}
}

func TestCopyBetweenServers(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts sambatest.Options
		size int64
	}{
		// The case: 4 stripes x 256 MiB, default servers.
		{"default-4x256MiB", sambatest.Options{}, 256 << 20},
		// Signing and encryption cost client CPU (the fork signs and
		// encrypts in Go): smaller stripes keep the suite fast.
		{"signing-mandatory-4x256MiB", sambatest.Options{Signing: "mandatory"}, 256 << 20},
		{"encrypt-required-4x256MiB", sambatest.Options{Encrypt: "required"}, 256 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := sambatest.Start(t, tc.opts)
			b := sambatest.Start(t, tc.opts)
			jobs, sums := stripes(t, a, 4, tc.size)
			start := time.Now()
			res, err := copier.New(copier.Options{}).Copy(context.Background(), openSMB(t, a, "backup"), openSMB(t, b, "backup"), jobs)
			if err != nil {
				t.Fatal(err)
			}
			el := time.Since(start)
			t.Logf("copied 4 x %d MiB in %v: %.0f MB/s including the read-back", tc.size>>20, el.Round(time.Millisecond), float64(4*tc.size)/el.Seconds()/1e6)
			checkCopied(t, b, res, sums)
		})
	}
}

// TestCopyWithinOneShare: the library's io.Copy between two files of one share
// becomes a server-side copy that silently stops at 16 MiB; ours must be
// byte-identical.
func TestCopyWithinOneShare(t *testing.T) {
	a := sambatest.Start(t, sambatest.Options{})
	want := makeFile(t, filepath.Join(a.Dir("backup"), "one.bak"), 48<<20+12345, 99)
	s := openSMB(t, a, "backup")
	res, err := copier.New(copier.Options{}).Copy(context.Background(), s, s, []copier.Job{{Src: "one.bak", Dst: "copy/one.bak"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := fileSum(t, filepath.Join(a.Dir("backup"), "copy", "one.bak")); got != want || res[0].SHA256 != want {
		t.Fatalf("copy within one share: sha256 %s (result %s), want %s", got, res[0].SHA256, want)
	}
	fi, _ := os.Stat(filepath.Join(a.Dir("backup"), "copy", "one.bak"))
	if fi.Size() != 48<<20+12345 {
		t.Fatalf("copy within one share has %d bytes", fi.Size())
	}
}

// TestResumeAfterDestinationKilled: the destination smbd is SIGKILLed at about
// half of a 4-stripe copy and restarted; the copy resumed from the last
// progress of each stripe completes and re-sends at most one chunk per stripe.
func TestResumeAfterDestinationKilled(t *testing.T) {
	const n, size, chunk = 4, 64 << 20, 4 << 20
	a := sambatest.Start(t, sambatest.Options{})
	b := sambatest.Start(t, sambatest.Options{})
	jobs, sums := stripes(t, a, n, size)
	src, dst := openSMB(t, a, "backup"), openSMB(t, b, "backup")

	var mu sync.Mutex
	last := map[string]copier.Progress{}
	var killOnce sync.Once
	killed := make(chan struct{})
	opts := copier.Options{ChunkSize: chunk, InFlight: 4, Progress: func(p copier.Progress) {
		mu.Lock()
		defer mu.Unlock()
		last[p.File] = p
		var confirmed int64
		for _, q := range last {
			confirmed += q.Offset
		}
		if confirmed >= n*size/2 {
			killOnce.Do(func() { go func() { b.Kill(); close(killed) }() })
		}
	}}
	res, err := copier.New(opts).Copy(context.Background(), src, dst, jobs)
	<-killed
	if err == nil {
		t.Fatal("the copy survived the destination being killed")
	}
	if !storage.IsRetryable(err) {
		t.Fatalf("killed destination: %v, want a retryable error", err)
	}
	t.Logf("first attempt: %v", err)
	sent1 := map[string]int64{}
	var total1 int64
	for _, r := range res {
		sent1[r.Dst] = r.BytesSent
		total1 += r.BytesSent
	}

	b.Restart()
	mu.Lock()
	for i := range jobs {
		p := last[jobs[i].Dst]
		jobs[i].Resume = &p
		t.Logf("%s: resume at %d MiB (+%d chunks ahead), %d MiB sent", p.File, p.Offset>>20, len(p.Ahead), sent1[p.File]>>20)
	}
	mu.Unlock()
	opts.Progress = nil
	res, err = copier.New(opts).Copy(context.Background(), src, dst, jobs)
	if err != nil {
		t.Fatal(err)
	}
	checkCopied(t, b, res, sums)
	for _, r := range res {
		resent := sent1[r.Dst] + r.BytesSent - size
		t.Logf("%s: sent %d + %d bytes, re-sent %d", r.Dst, sent1[r.Dst], r.BytesSent, resent)
		if resent < 0 || resent > chunk {
			t.Errorf("%s: re-sent %d bytes, want at most one chunk (%d)", r.Dst, resent, chunk)
		}
		if r.ResumedAt == 0 && sent1[r.Dst] > 0 {
			t.Errorf("%s: started over instead of resuming", r.Dst)
		}
	}
	if total1 == 0 || total1 >= n*size {
		t.Errorf("first attempt sent %d of %d bytes; the kill did not land mid-copy", total1, n*size)
	}
}

// TestShareFull: a destination that reports less free space than the file
// fails before writing, with ErrNoSpace.
func TestShareFull(t *testing.T) {
	a := sambatest.Start(t, sambatest.Options{})
	b := sambatest.Start(t, sambatest.Options{MaxDiskSizeMiB: 8})
	jobs, _ := stripes(t, a, 1, 16<<20)
	_, err := copier.New(copier.Options{}).Copy(context.Background(), openSMB(t, a, "backup"), openSMB(t, b, "backup"), jobs)
	if !errors.Is(err, storage.ErrNoSpace) || storage.IsRetryable(err) {
		t.Fatalf("copy to a full share: %v, want non-retryable ErrNoSpace", err)
	}
	if entries, _ := os.ReadDir(b.Dir("backup")); len(entries) != 0 {
		t.Fatalf("a copy that cannot fit left %d files", len(entries))
	}
}

// TestExistingDifferentFileOnShare: a destination file with another hash is
// never overwritten, over SMB too.
func TestExistingDifferentFileOnShare(t *testing.T) {
	a := sambatest.Start(t, sambatest.Options{})
	b := sambatest.Start(t, sambatest.Options{})
	makeFile(t, filepath.Join(a.Dir("backup"), "x.bak"), 5<<20, 1)
	other := makeFile(t, filepath.Join(b.Dir("backup"), "x.bak"), 5<<20, 2)
	before, _ := os.ReadFile(filepath.Join(b.Dir("backup"), "x.bak"))
	_, err := copier.New(copier.Options{}).Copy(context.Background(), openSMB(t, a, "backup"), openSMB(t, b, "backup"), []copier.Job{{Src: "x.bak", Dst: "x.bak"}})
	if !errors.Is(err, copier.ErrDifferentContent) {
		t.Fatalf("copy onto a different file: %v, want ErrDifferentContent", err)
	}
	after, _ := os.ReadFile(filepath.Join(b.Dir("backup"), "x.bak"))
	if !bytes.Equal(before, after) || fileSum(t, filepath.Join(b.Dir("backup"), "x.bak")) != other {
		t.Fatal("the existing destination file was modified")
	}
}

// TestShareFullWhileWriting: the share fills up mid-copy (the free-space
// check passed); the write fails with ErrNoSpace, nothing is renamed.
func TestShareFullWhileWriting(t *testing.T) {
	a := sambatest.Start(t, sambatest.Options{})
	b := sambatest.Start(t, sambatest.Options{MaxFileSizeMiB: 8})
	jobs, _ := stripes(t, a, 1, 16<<20)
	_, err := copier.New(copier.Options{}).Copy(context.Background(), openSMB(t, a, "backup"), openSMB(t, b, "backup"), jobs)
	t.Logf("share full while writing: %v", err)
	if !errors.Is(err, storage.ErrNoSpace) || storage.IsRetryable(err) {
		t.Fatalf("copy onto a share that fills up: %v, want non-retryable ErrNoSpace", err)
	}
	if entries, _ := os.ReadDir(b.Dir("backup")); len(entries) != 0 {
		t.Fatalf("a copy that failed for space left %d files (its partial file takes space others need)", len(entries))
	}
}

// TestPlantedPartialLinkOnSamba: on a Samba share served as README "Backup
// shares" asks (follow symlinks = no), a link someone planted on the server
// under a copy's partial name is not there for the worker, and the server
// refuses to create the name: the copy fails with StorageNotRegular naming
// it (not a missing file, which would count against the set), and nothing
// is written where the link points.
func TestPlantedPartialLinkOnSamba(t *testing.T) {
	srv := sambatest.Start(t, sambatest.Options{})
	s0, sdir := localStorage(t)
	put(t, sdir, "x_1of1.bak", randBytes(3, 300000))
	out, err := os.MkdirTemp("", "copier-outside-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(out)
	_ = os.Chmod(out, 0o777)
	victim := filepath.Join(out, "victim")
	if err := os.WriteFile(victim, []byte("VICTIM"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(srv.Dir("backup"), "x_1of1.bak"+copier.DefaultTempSuffix)); err != nil {
		t.Fatal(err)
	}
	_, err = copier.New(copier.Options{}).Copy(context.Background(), s0, openSMB(t, srv, "backup"), []copier.Job{{Src: "x_1of1.bak", Dst: "x_1of1.bak"}})
	if storage.ErrorType(err) != "StorageNotRegular" || storage.IsRetryable(err) || !strings.Contains(err.Error(), "x_1of1.bak.partial") {
		t.Errorf("copy onto a planted partial link: %v (%s), want a non-retryable StorageNotRegular naming the partial file", err, storage.ErrorType(err))
	}
	if v, _ := os.ReadFile(victim); string(v) != "VICTIM" {
		t.Errorf("the file the link points to now holds %q", v)
	}
}
