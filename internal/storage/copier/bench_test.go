package copier_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
	"github.com/backupcycle/backupcycle/internal/storage/limit"
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
func smbclientRun(b *testing.B, srv *sambatest.Server, workdir, command string, args ...string) time.Duration {
	b.Helper()
	auth := filepath.Join(workdir, "auth")
	if err := os.WriteFile(auth, []byte("username = "+srv.User()+"\npassword = "+srv.Password()+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	args = append([]string{"//127.0.0.1/backup", "-p", strconv.Itoa(srv.Port()), "-A", auth, "-c", command}, args...)
	cmd := exec.Command("smbclient", args...)
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
// reports MB/s (SetBytes), client and server CPU seconds per GiB, and returns
// the MB/s.
func measure(b *testing.B, srv *sambatest.Server, run func(i int) time.Duration) float64 {
	mbs, _ := measureCPU(b, srv, run)
	return mbs
}

// measureCPU is measure that also returns the client and server CPU seconds
// per GiB together.
func measureCPU(b *testing.B, srv *sambatest.Server, run func(i int) time.Duration) (mbs, cpuPerGiB float64) {
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
	server := srv.CPU() - server0
	b.ReportMetric(client.Seconds()/gib, "client-cpu-s/GiB")
	b.ReportMetric(server.Seconds()/gib, "server-cpu-s/GiB")
	return float64(benchSize) * float64(b.N) / el.Seconds() / 1e6, (client + server).Seconds() / gib
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
	needSMBClient(b)
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
// default options) from one loopback Samba server to another: without
// read-back (the reference, a transfer), with the read-back overlapping the
// writing (the default) and with the read-back after the whole file is
// written; x_no-read-back is each one's rate over the reference's. The
// "write-limited" runs cap the writes at 100 MB/s (Options.Limit) and leave
// the reads free: a path whose write direction is the bottleneck, as a WAN
// link to the remote site is, with the read direction idle.
func BenchmarkCopyBetweenServers(b *testing.B) {
	a := sambatest.Start(b, sambatest.Options{TempDir: ramDir()})
	z := sambatest.Start(b, sambatest.Options{TempDir: ramDir()})
	for i := range 4 {
		makeFile(b, filepath.Join(a.Dir("backup"), fmt.Sprintf("src_%d_of_4.bak", i+1)), benchSize/4, uint64(i))
	}
	for _, path := range []string{"loopback", "write-limited"} {
		var ref float64
		for _, v := range []struct {
			name string
			opts copier.Options
		}{
			{"no-read-back", copier.Options{SkipReadBack: true}},
			{"verified", copier.Options{}},
			{"verified-after-copy", copier.Options{ReadBackAfterCopy: true}},
		} {
			b.Run(path+"/"+v.name, func(b *testing.B) {
				src, dst := openSMBConns(b, a, 4), openSMBConns(b, z, 4)
				opts := v.opts
				if path == "write-limited" {
					opts.Limit = limit.New(100e6)
				}
				c := copier.New(opts)
				b.SetBytes(benchSize)
				var el time.Duration
				self0, servers0 := selfCPU(), a.CPU()+z.CPU()
				for i := 0; i < b.N; i++ {
					jobs := jobsFor(mode{files: 4}, fmt.Sprintf("dst%d", i))
					start := time.Now()
					if _, err := c.Copy(context.Background(), src, dst, jobs); err != nil {
						b.Fatal(err)
					}
					el += time.Since(start)
					b.StopTimer()
					for _, j := range jobs {
						os.Remove(filepath.Join(z.Dir("backup"), j.Dst))
					}
					b.StartTimer()
				}
				gib := float64(b.N) * benchSize / (1 << 30)
				b.ReportMetric((selfCPU()-self0).Seconds()/gib, "client-cpu-s/GiB")
				b.ReportMetric((a.CPU()+z.CPU()-servers0).Seconds()/gib, "servers-cpu-s/GiB")
				mbs := float64(benchSize) * float64(b.N) / el.Seconds() / 1e6
				if ref == 0 {
					ref = mbs
				}
				b.ReportMetric(mbs/ref, "x_no-read-back")
			})
		}
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

// needSMBClient fails the benchmark when smbclient, the reference every
// ratio is taken against, is missing: a benchmark without it would print
// numbers that compare with nothing.
func needSMBClient(b *testing.B) {
	b.Helper()
	if _, err := exec.LookPath("smbclient"); err != nil {
		b.Fatalf("smbclient not found (%v): run `make test-deps` (apt-get install -y smbclient)", err)
	}
}

// smbMode is one server configuration, and how each client is told to use
// it.
type smbMode struct {
	name      string
	server    sambatest.Options
	dialect   string   // our client's Config.Dialect
	smbclient []string // smbclient's extra arguments
}

var smbModes = []smbMode{
	// Samba's default: signing offered, not required.
	{"unsigned", sambatest.Options{}, "", nil},
	// What current Windows servers require: SMB 3.1.1 signing. smbclient
	// negotiates AES-GMAC; the library has only AES-CMAC.
	{"smb3-signing", sambatest.Options{Signing: "mandatory"}, "", nil},
	// The same server, both clients limited to SMB 2.1 (HMAC-SHA256).
	{"smb2.1-signing", sambatest.Options{Signing: "mandatory"}, "2.1", []string{"--option=client max protocol=SMB2_10"}},
	// "server smb encrypt = required": AES-128-GCM for both.
	{"encrypt-required", sambatest.Options{Encrypt: "required"}, "", nil},
	// Signing required, encryption turned on for clients that support it:
	// the setting docs/smb-throughput.md recommends.
	{"signing+encrypt-desired", sambatest.Options{Signing: "mandatory", Encrypt: "desired"}, "", nil},
}

// BenchmarkUploadModes uploads 1 GiB from memory to a loopback Samba server
// in each of the four ways a server can ask a client to protect its traffic
// (and with signing required plus encryption desired),
// our client against smbclient on the same server in the same run. smbclient
// puts the GiB as one file (x_smbclient) and as 4 stripes of 256 MiB by 4
// smbclient processes at once (x_smbclient4); ours copies it as 1 stripe and
// as 4 stripes with the backend's defaults, without read-back (a transfer,
// like smbclient's), and as 4 stripes verified (read back). x_smbclient_cpu compares CPU per GiB (client and server
// together), which other load on the machine does not move; see
// docs/smb-throughput.md.
func BenchmarkUploadModes(b *testing.B) {
	needSMBClient(b)
	work, err := os.MkdirTemp(ramDir(), "bench-local-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(work) })
	loc, err := local.Open(context.Background(), work)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 4} {
		for i := range n {
			makeFile(b, filepath.Join(work, fmt.Sprintf("src_%d_of_%d.bak", i+1, n)), benchSize/int64(n), uint64(i))
		}
	}
	for _, md := range smbModes {
		b.Run(md.name, func(b *testing.B) {
			srv := sambatest.Start(b, func() sambatest.Options { o := md.server; o.TempDir = ramDir(); return o }())
			remoteDir := srv.Dir("backup")
			var ref1, ref4, refCPU float64
			b.Run("smbclient", func(b *testing.B) {
				ref1, refCPU = measureCPU(b, srv, func(i int) time.Duration {
					dst := fmt.Sprintf("put_%d.bak", i)
					cpu := smbclientRun(b, srv, work, "put src_1_of_1.bak "+dst, md.smbclient...)
					b.StopTimer()
					os.Remove(filepath.Join(remoteDir, dst))
					b.StartTimer()
					return cpu
				})
			})
			b.Run("smbclient-x4", func(b *testing.B) {
				ref4 = measure(b, srv, func(i int) time.Duration {
					var wg sync.WaitGroup
					cpus := make([]time.Duration, 4)
					for k := range 4 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							cpus[k] = smbclientRun(b, srv, work, fmt.Sprintf("put src_%d_of_4.bak put_%d_%d.bak", k+1, i, k), md.smbclient...)
						}()
					}
					wg.Wait()
					b.StopTimer()
					var cpu time.Duration
					for k := range 4 {
						cpu += cpus[k]
						os.Remove(filepath.Join(remoteDir, fmt.Sprintf("put_%d_%d.bak", i, k)))
					}
					b.StartTimer()
					return cpu
				})
			})
			for _, shape := range []struct {
				name      string
				files     int
				fileConns int  // 0: the backend's default
				verify    bool // read the destination back, as every real copy does
			}{
				{"1-stripe", 1, 0, false}, {"4-stripes", 4, 0, false},
				// One stripe's requests over 4 connections: signs on up to
				// 4 cores where the client has them spare.
				{"1-stripe-file_conns=4", 1, 4, false},
				// The product's verified copy: upload and read-back.
				{"4-stripes-verified", 4, 0, true},
			} {
				b.Run(shape.name, func(b *testing.B) {
					cfg, err := smb.ParseURL(srv.URL("backup"))
					if err != nil {
						b.Fatal(err)
					}
					cfg.Dialect, cfg.FileConns = md.dialect, shape.fileConns
					remote, err := smb.Open(context.Background(), cfg, storage.Credentials{User: srv.User(), Password: srv.Password()})
					if err != nil {
						b.Fatal(err)
					}
					defer remote.Close()
					c := copier.New(copier.Options{SkipReadBack: !shape.verify})
					mbs, cpu := measureCPU(b, srv, func(i int) time.Duration {
						jobs := jobsFor(mode{files: shape.files}, fmt.Sprintf("dst%d", i))
						if _, err := c.Copy(context.Background(), loc, remote, jobs); err != nil {
							b.Fatal(err)
						}
						b.StopTimer()
						for _, j := range jobs {
							os.Remove(filepath.Join(remoteDir, j.Dst))
						}
						b.StartTimer()
						return 0
					})
					b.ReportMetric(mbs/ref1, "x_smbclient")
					b.ReportMetric(mbs/ref4, "x_smbclient4")
					// What a host whose cores are the bottleneck (client and
					// server on one machine, as here) would see, whatever
					// else runs on it: smbclient's CPU per GiB over ours.
					b.ReportMetric(refCPU/cpu, "x_smbclient_cpu")
				})
			}
		})
	}
}
