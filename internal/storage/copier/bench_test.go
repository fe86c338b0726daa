package copier_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/storage/smb"
)

const benchSize = 1 << 30

// ramDir keeps both ends of a benchmark in memory when it can, so it measures
// the SMB path rather than the disk.
func ramDir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return ""
}

func openSMBConns(b *testing.B, srv *sambatest.Server, conns int) *smb.Storage {
	b.Helper()
	cfg, err := smb.ParseURL(srv.URL("backup"))
	if err != nil {
		b.Fatal(err)
	}
	cfg.Conns = conns
	s, err := smb.Open(context.Background(), cfg, storage.Credentials{User: srv.User(), Password: srv.Password()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// smbclientRun runs one smbclient command against srv's share and returns
// the CPU time smbclient used.
func smbclientRun(b *testing.B, srv *sambatest.Server, workdir, command string) time.Duration {
	b.Helper()
	auth := filepath.Join(workdir, "auth")
	if err := os.WriteFile(auth, []byte("username = "+srv.User()+"\npassword = "+srv.Password()+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("smbclient", "//127.0.0.1/backup", "-p", strconv.Itoa(srv.Port()), "-A", auth, "-c", command)
	cmd.Dir = workdir
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("smbclient %s: %v\n%s", command, err, out)
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// selfCPU is the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs b.N transfers of benchSize bytes; run returns the CPU time of
// a client process it ran (smbclient), 0 when the client is this process. It
// reports MB/s (SetBytes), client and server CPU seconds per GiB.
func measure(b *testing.B, srv *sambatest.Server, run func(i int) time.Duration) float64 {
	b.SetBytes(benchSize)
	var el, client time.Duration
	server0, self0 := srv.CPU(), selfCPU()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		client += run(i)
		el += time.Since(start)
	}
	if client == 0 {
		client = selfCPU() - self0
	}
	gib := float64(b.N) * benchSize / (1 << 30)
	b.ReportMetric(client.Seconds()/gib, "client-cpu-s/GiB")
	b.ReportMetric((srv.CPU()-server0).Seconds()/gib, "server-cpu-s/GiB")
	return float64(benchSize) * float64(b.N) / el.Seconds() / 1e6
}

// mode is one way of moving the 1 GiB.
type mode struct {
	name  string
	opts  copier.Options
	conns int
	files int // the GiB as this many stripes
}

var modes = []mode{
	// One 1 MiB request at a time: what io.Copy-style code does.
	{"single-stream", copier.Options{ChunkSize: 1 << 20, InFlight: 1, Files: 1}, 1, 1},
	// One file, 4 MiB chunks, several in flight on one connection.
	{"chunked-concurrent", copier.Options{Files: 1}, 1, 1},
	// 4 stripes of 256 MiB in parallel, one connection per stripe (the default).
	{"4-stripes", copier.Options{}, 4, 4},
}

func jobsFor(m mode, prefix string) []copier.Job {
	var jobs []copier.Job
	for i := range m.files {
		jobs = append(jobs, copier.Job{Src: fmt.Sprintf("src_%d_of_%d.bak", i+1, m.files), Dst: fmt.Sprintf("%s_%d_of_%d.bak", prefix, i+1, m.files)})
	}
	return jobs
}

// BenchmarkSMB moves 1 GiB between this machine and a loopback Samba server:
// smbclient put/get first (the reference), then our modes, each reporting
// MB/s and its ratio to smbclient in the same run.
func BenchmarkSMB(b *testing.B) {
	srv := sambatest.Start(b, sambatest.Options{TempDir: ramDir()})
	work, err := os.MkdirTemp(ramDir(), "bench-local-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(work) })
	loc, err := local.Open(context.Background(), work)
	if err != nil {
		b.Fatal(err)
	}
	// Sources on both sides: the GiB as 1 file and as 4 stripes.
	for _, n := range []int{1, 4} {
		for i := range n {
			name := fmt.Sprintf("src_%d_of_%d.bak", i+1, n)
			makeFile(b, filepath.Join(work, name), benchSize/int64(n), uint64(i))
			makeFile(b, filepath.Join(srv.Dir("backup"), name), benchSize/int64(n), uint64(i))
		}
	}
	ref := map[string]float64{} // direction -> smbclient MB/s
	for _, dir := range []string{"upload", "download"} {
		b.Run(dir+"/smbclient", func(b *testing.B) {
			mbs := measure(b, srv, func(i int) time.Duration {
				if dir == "upload" {
					cpu := smbclientRun(b, srv, work, fmt.Sprintf("put src_1_of_1.bak put_%d.bak", i))
					b.StopTimer()
					os.Remove(filepath.Join(srv.Dir("backup"), fmt.Sprintf("put_%d.bak", i)))
					b.StartTimer()
					return cpu
				}
				cpu := smbclientRun(b, srv, work, fmt.Sprintf("get src_1_of_1.bak get_%d.bak", i))
				b.StopTimer()
				os.Remove(filepath.Join(work, fmt.Sprintf("get_%d.bak", i)))
				b.StartTimer()
				return cpu
			})
			ref[dir] = mbs
		})
		for _, m := range modes {
			b.Run(dir+"/"+m.name, func(b *testing.B) {
				remote := openSMBConns(b, srv, m.conns)
				src, dst := storage.Storage(loc), storage.Storage(remote)
				cleanDir := srv.Dir("backup")
				if dir == "download" {
					src, dst, cleanDir = remote, loc, work
				}
				opts := m.opts
				opts.SkipReadBack = true // a transfer, like smbclient's: no verification read
				c := copier.New(opts)
				mbs := measure(b, srv, func(i int) time.Duration {
					jobs := jobsFor(m, fmt.Sprintf("dst%d", i))
					if _, err := c.Copy(context.Background(), src, dst, jobs); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					for _, j := range jobs {
						os.Remove(filepath.Join(cleanDir, j.Dst))
					}
					b.StartTimer()
					return 0
				})
				if r := ref[dir]; r > 0 {
					b.ReportMetric(mbs/r, "x-smbclient")
				}
			})
		}
	}
}

// BenchmarkCopyBetweenServers is the product's copy (4 stripes of 256 MiB,
// default options, read-back verification) from one loopback Samba server to
// another.
func BenchmarkCopyBetweenServers(b *testing.B) {
	a := sambatest.Start(b, sambatest.Options{TempDir: ramDir()})
	z := sambatest.Start(b, sambatest.Options{TempDir: ramDir()})
	for i := range 4 {
		makeFile(b, filepath.Join(a.Dir("backup"), fmt.Sprintf("src_%d_of_4.bak", i+1)), benchSize/4, uint64(i))
	}
	for _, verify := range []bool{true, false} {
		name := "verified"
		if !verify {
			name = "no-read-back"
		}
		b.Run(name, func(b *testing.B) {
			src, dst := openSMBConns(b, a, 4), openSMBConns(b, z, 4)
			c := copier.New(copier.Options{SkipReadBack: !verify})
			b.SetBytes(benchSize)
			for i := 0; i < b.N; i++ {
				jobs := jobsFor(mode{files: 4}, fmt.Sprintf("dst%d", i))
				if _, err := c.Copy(context.Background(), src, dst, jobs); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				for _, j := range jobs {
					os.Remove(filepath.Join(z.Dir("backup"), j.Dst))
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkSHA256 is the hash every copied byte goes through (twice with the
// read-back): the client CPU floor that smbclient does not pay.
func BenchmarkSHA256(b *testing.B) {
	buf := make([]byte, copier.DefaultChunkSize)
	h := sha256.New()
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		h.Write(buf)
	}
}

// BenchmarkSignedUpload uploads 256 MiB to a server with "server signing =
// mandatory": SMB3 signs with AES-CMAC (pure Go in the library), dialect 2.1
// with HMAC-SHA256; smbclient (signing too) is the reference.
func BenchmarkSignedUpload(b *testing.B) {
	const size = 256 << 20
	srv := sambatest.Start(b, sambatest.Options{TempDir: ramDir(), Signing: "mandatory"})
	work, err := os.MkdirTemp(ramDir(), "bench-local-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(work) })
	loc, err := local.Open(context.Background(), work)
	if err != nil {
		b.Fatal(err)
	}
	makeFile(b, filepath.Join(work, "src.bak"), size, 1)
	var ref float64
	b.Run("smbclient", func(b *testing.B) {
		b.SetBytes(size)
		start := time.Now()
		for i := 0; i < b.N; i++ {
			smbclientRun(b, srv, work, fmt.Sprintf("put src.bak put_%d.bak", i))
		}
		ref = float64(size) * float64(b.N) / time.Since(start).Seconds() / 1e6
	})
	for _, dialect := range []string{"", "2.1"} {
		name := "dialect=" + dialect
		if dialect == "" {
			name = "dialect=best"
		}
		b.Run(name, func(b *testing.B) {
			cfg, err := smb.ParseURL(srv.URL("backup"))
			if err != nil {
				b.Fatal(err)
			}
			cfg.Dialect = dialect
			remote, err := smb.Open(context.Background(), cfg, storage.Credentials{User: srv.User(), Password: srv.Password()})
			if err != nil {
				b.Fatal(err)
			}
			defer remote.Close()
			c := copier.New(copier.Options{SkipReadBack: true})
			b.SetBytes(size)
			start := time.Now()
			for i := 0; i < b.N; i++ {
				jobs := []copier.Job{{Src: "src.bak", Dst: fmt.Sprintf("%s_%d.bak", dialect, i)}}
				if _, err := c.Copy(context.Background(), loc, remote, jobs); err != nil {
					b.Fatal(err)
				}
			}
			if ref > 0 {
				b.ReportMetric(float64(size)*float64(b.N)/time.Since(start).Seconds()/1e6/ref, "x-smbclient")
			}
		})
	}
}
