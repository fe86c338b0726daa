// Package sambatest starts private smbd instances for tests: Debian's samba in
// the foreground with its own config, passdb, state and share directories in a
// temp dir, listening on a free 127.0.0.1 port. It installs nothing: `make
// test` installs samba, smbclient and libnss-wrapper. Two instances model two
// backup servers (BAK01, BAK02); Kill, Restart, Freeze and the disk limits
// model their failures. The share user exists only inside nss_wrapper. Run
// as root (the tests), smbd switches to that user (uid 4450) for file
// access and the share directories are chowned to it. Run by any other user
// (the demo from a normal account), smbd runs as that user under
// uid_wrapper, which lets it believe it is root and switch users, as
// Samba's own test suite runs it: the share user is the invoking user
// (same uid), so smbd reaches every directory that user reaches, a home of
// mode 0700 included, and nothing else.
//
// Start ties a server to a test; Run starts one without a testing.TB (the
// dev stack (make demo) serves its backup servers with it) and
// Close stops it.
package sambatest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Options describe one server. The zero value is a server with one share
// "backup", user "bakuser" and a random password.
type Options struct {
	Shares   []string // share names; default {"backup"}
	User     string   // default "bakuser"
	Password string   // default random
	// Signing is "server signing": "" (Samba's default: offered, not
	// required), "mandatory", "disabled".
	Signing string
	// Encrypt is "server smb encrypt": "" (default), "desired", "required".
	Encrypt string
	// MaxDiskSizeMiB caps the disk size (and so the free space) the server
	// reports, to model a full share. 0 = no cap.
	MaxDiskSizeMiB int
	// Global holds extra smb.conf lines for [global].
	Global []string
	// FollowSymlinks serves the shares with Samba's own defaults for
	// symbolic links and special files (follow symlinks = yes, hide
	// special files = no). Without it they get the settings the README
	// asks of a backup share: follow symlinks = no, hide special files =
	// yes.
	FollowSymlinks bool
	// MaxFileSizeMiB makes writes past this file size fail the way they fail
	// on a full disk (smbd runs with RLIMIT_FSIZE and SIGXFSZ ignored, so
	// it gets EFBIG and answers STATUS_DISK_FULL). 0 = no limit.
	MaxFileSizeMiB int
	// TempDir is where the server's directory (config, state, shares) is
	// created; default os.TempDir(). Benchmarks use /dev/shm to measure the
	// network path, not the disk. Ignored when Dir is set.
	TempDir string
	// Dir, when set, is the server's own directory (config, passdb, state,
	// logs; created if missing) and is kept by Close, so a later Run on the
	// same Dir serves the same shares. Empty: a new temp dir, removed by
	// Close.
	Dir string
	// SharePaths serves existing directories: share name -> directory
	// (created if missing). Their trees are chowned to the share user, which
	// smbd switches to. A share not listed lives under the server's
	// directory. Its names join Shares (default: only these).
	SharePaths map[string]string
	// RootOwned gives each share's directory to root, writable by the
	// share user's group (mode 2775), as README "Credentials and what they
	// may do" asks: the user may create and delete files there but, not
	// owning the directory, not change its ACL. Without it the share user
	// owns the directory. Only root can give a directory away: a server run
	// by another user (AsInvoker) leaves the directory to that user.
	RootOwned bool
}

// Server is a running (or killed) smbd.
type Server struct {
	t        testing.TB // nil for a server from Run
	opts     Options
	dir      string
	ownsDir  bool // dir is a temp dir that Close removes
	port     int
	uid, gid int // the share user's
	nssEnv   []string
	mu       sync.Mutex
	cmd      *exec.Cmd
	waitDone chan struct{}
}

// DefaultUser is the share user of Options without one.
const DefaultUser = "bakuser"

// uid/gid of the share user inside nss_wrapper when smbd runs as root; smbd
// switches to it for file access, so the share directories are chowned to it.
const shareUID, shareGID = 4450, 4450

// AsInvoker reports whether smbd runs as the user running this process
// rather than as root: whenever that user is not root. Its share user is
// then that user (same uid and group), under uid_wrapper.
func AsInvoker() bool { return os.Geteuid() != 0 }

// ShareUser describes whose identity smbd uses for file access, for a
// line that says how the servers run.
func ShareUser(user string) string {
	if user == "" {
		user = DefaultUser
	}
	if AsInvoker() {
		return fmt.Sprintf("smbd runs as you (uid %d, under uid_wrapper) and its share user %s is you", os.Geteuid(), user)
	}
	return fmt.Sprintf("smbd runs as root, its share user %s is uid %d", user, shareUID)
}

// Start starts a server and stops it when the test ends. It fails the test,
// with what to do, when samba is not installed.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.t = t
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("sambatest: smbd on %s logs:\n%s", s.Addr(), s.logs())
		}
		_ = s.Close()
	})
	return s
}

// Installed says whether smbd, smbpasswd and nss_wrapper are here, and if
// not, what is missing and how to install it.
func Installed() error {
	if _, err := findNSSWrapper(); err != nil {
		return err
	}
	if AsInvoker() {
		if _, err := findUIDWrapper(); err != nil {
			return err
		}
	}
	for _, bin := range []string{"smbd", "smbpasswd"} {
		if _, err := exec.LookPath(bin); err != nil {
			if _, err2 := os.Stat("/usr/sbin/" + bin); err2 != nil {
				return fmt.Errorf("sambatest: %s not found (%v): run `make test`, which installs samba, smbclient and libnss-wrapper (apt-get install -y samba smbclient libnss-wrapper)", bin, err)
			}
		}
	}
	return nil
}

// Run starts a server that lives until Close (or Stop): for callers without
// a testing.TB. Restart is for tests (it panics on failure here).
func Run(opts Options) (*Server, error) {
	for name := range opts.SharePaths {
		if !slices.Contains(opts.Shares, name) {
			opts.Shares = append(opts.Shares, name)
		}
	}
	sort.Strings(opts.Shares)
	if len(opts.Shares) == 0 {
		opts.Shares = []string{"backup"}
	}
	if opts.User == "" {
		opts.User = DefaultUser
	}
	if opts.Password == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		opts.Password = "Pw-" + hex.EncodeToString(b)
	}
	if err := Installed(); err != nil {
		return nil, err
	}
	preload, _ := findNSSWrapper()
	s := &Server{opts: opts, uid: shareUID, gid: shareGID}
	if AsInvoker() {
		uw, _ := findUIDWrapper()
		preload = uw + " " + preload
		s.uid, s.gid = os.Geteuid(), os.Getegid()
	}
	if opts.Dir != "" {
		dir, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("sambatest: server directory %s: %w", opts.Dir, err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("sambatest: create server directory %s: %w", dir, err)
		}
		s.dir = dir
	} else {
		// t.TempDir's parent is 0700: smbd, switched to the share user,
		// could not reach the shares.
		dir, err := os.MkdirTemp(opts.TempDir, "sambatest-")
		if err != nil {
			return nil, fmt.Errorf("sambatest: %w", err)
		}
		s.dir, s.ownsDir = dir, true
	}
	fail := func(err error) (*Server, error) {
		_ = s.Close()
		return nil, fmt.Errorf("sambatest: %w", err)
	}
	if err := s.setup(preload); err != nil {
		return fail(err)
	}
	// A free port can be taken between probing and smbd's bind (other tests
	// run in parallel): try a few.
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return fail(err)
		}
		s.port = port
		if err := s.writeConfig(); err != nil {
			return fail(err)
		}
		err = s.start()
		if err == nil {
			return s, nil
		}
		if attempt == 2 {
			return fail(err)
		}
	}
}

// Close stops smbd and removes the server's directory when Run created it
// (a temp dir); a Dir given in Options, and SharePaths, are kept.
func (s *Server) Close() error {
	s.Stop()
	if s.ownsDir {
		return os.RemoveAll(s.dir)
	}
	return nil
}

func findNSSWrapper() (string, error) {
	for _, pattern := range []string{"/usr/lib/*/libnss_wrapper.so", "/usr/lib/libnss_wrapper.so", "/usr/lib64/libnss_wrapper.so"} {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return m[0], nil
		}
	}
	return "", errors.New("sambatest: libnss_wrapper.so not found: run `make test`, which installs samba, smbclient and libnss-wrapper (apt-get install -y libnss-wrapper)")
}

func findUIDWrapper() (string, error) {
	for _, pattern := range []string{"/usr/lib/*/libuid_wrapper.so", "/usr/lib/libuid_wrapper.so", "/usr/lib64/libuid_wrapper.so"} {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return m[0], nil
		}
	}
	return "", fmt.Errorf("sambatest: libuid_wrapper.so not found: smbd run by uid %d (not root) needs it to switch to its share user: apt-get install -y libuid-wrapper (`make test` installs it)", os.Geteuid())
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) setup(preload string) error {
	if err := os.Chmod(s.dir, 0o755); err != nil {
		return err
	}
	for _, d := range []string{"private", "lock", "state", "cache", "pid", "ncalrpc", "binddns", "usershares", "log", "shares"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o755); err != nil {
			return err
		}
	}
	for _, sh := range s.opts.Shares {
		p := s.Dir(sh)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if AsInvoker() {
			// The share user is this user: what it wrote is its own.
			if err := Reachable(p); err != nil {
				return err
			}
			continue
		}
		if _, given := s.opts.SharePaths[sh]; given {
			// Files already there (written by root, e.g. by an emulator)
			// must stay writable and deletable over SMB.
			err := filepath.WalkDir(p, func(path string, _ os.DirEntry, err error) error {
				if err != nil {
					return err
				}
				return os.Lchown(path, s.uid, s.gid)
			})
			if err != nil {
				return fmt.Errorf("chown share %s to uid %d: %w (run as root)", p, s.uid, err)
			}
			if err := Reachable(p); err != nil {
				return err
			}
		} else if err := os.Chown(p, s.uid, s.gid); err != nil {
			return fmt.Errorf("chown share %s to uid %d: %w (the tests run as root)", p, s.uid, err)
		}
		if s.opts.RootOwned {
			if err := os.Chown(p, 0, s.gid); err != nil {
				return fmt.Errorf("chown share %s to root: %w", p, err)
			}
			if err := os.Chmod(p, 0o2775); err != nil {
				return err
			}
		}
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\n%s:x:%d:%d:backup user:%s:/bin/false\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n", s.opts.User, s.uid, s.gid, s.dir)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\nnogroup:x:65534:\n", s.opts.User, s.gid)
	if err := os.WriteFile(filepath.Join(s.dir, "passwd"), []byte(passwd), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "group"), []byte(group), 0o644); err != nil {
		return err
	}
	s.nssEnv = append(os.Environ(),
		"LD_PRELOAD="+preload,
		"NSS_WRAPPER_PASSWD="+filepath.Join(s.dir, "passwd"),
		"NSS_WRAPPER_GROUP="+filepath.Join(s.dir, "group"))
	if AsInvoker() {
		// smbd, smbpasswd and smbstatus believe they are root and may
		// switch to the share user: its uid is this process's, so the
		// kernel sees this user throughout.
		s.nssEnv = append(s.nssEnv, "UID_WRAPPER=1", "UID_WRAPPER_ROOT=1")
	}
	s.port = 1 // smbpasswd needs a valid config; the real port comes later
	if err := s.writeConfig(); err != nil {
		return err
	}
	cmd := exec.Command(smbBin("smbpasswd"), "-c", s.conf(), "-a", "-s", s.opts.User)
	cmd.Env = s.nssEnv
	cmd.Stdin = strings.NewReader(s.opts.Password + "\n" + s.opts.Password + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("smbpasswd -a %s: %v: %s", s.opts.User, err, out)
	}
	return nil
}

// Reachable fails when smbd's share user cannot reach dir: smbd, switched
// to it, would answer "access denied" much later. Run as root, that is when
// a parent of dir is closed to other users (the share user is uid 4450);
// run by another user (AsInvoker), when that user cannot enter and write
// dir.
func Reachable(dir string) error {
	if AsInvoker() {
		if err := syscall.Access(dir, 7); err != nil { // R_OK|W_OK|X_OK
			return fmt.Errorf("share %s: uid %d, smbd's share user, cannot read, write and enter it: %w", dir, os.Geteuid(), err)
		}
		return nil
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("share %s: its parent %s is not searchable by other users (mode %v), so smbd's share user cannot reach it: chmod o+x %s or choose another directory", dir, d, fi.Mode().Perm(), d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

func smbBin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return "/usr/sbin/" + name
}

// logLevel is smbd's "log level": SAMBATEST_LOG_LEVEL when set (to debug a
// failing test), 1 otherwise.
func logLevel() string {
	if v := os.Getenv("SAMBATEST_LOG_LEVEL"); v != "" {
		if _, err := strconv.Atoi(v); err == nil {
			return v
		}
	}
	return "1"
}

func (s *Server) conf() string { return filepath.Join(s.dir, "smb.conf") }

func (s *Server) writeConfig() error {
	d := s.dir
	var b bytes.Buffer
	fmt.Fprintf(&b, `[global]
server role = standalone server
security = user
passdb backend = tdbsam:%[1]s/private/passdb.tdb
map to guest = never
smb ports = %[2]d
interfaces = 127.0.0.1
bind interfaces only = yes
disable netbios = yes
private dir = %[1]s/private
lock directory = %[1]s/lock
state directory = %[1]s/state
cache directory = %[1]s/cache
pid directory = %[1]s/pid
ncalrpc dir = %[1]s/ncalrpc
binddns dir = %[1]s/binddns
usershare path = %[1]s/usershares
usershare max shares = 0
log file = %[1]s/log/log.%%m
log level = %[3]s
load printers = no
printcap name = /dev/null
disable spoolss = yes
server min protocol = SMB2_10
`, d, s.port, logLevel())
	if s.opts.Signing != "" {
		fmt.Fprintf(&b, "server signing = %s\n", s.opts.Signing)
	}
	if s.opts.Encrypt != "" {
		fmt.Fprintf(&b, "server smb encrypt = %s\n", s.opts.Encrypt)
	}
	if s.opts.MaxDiskSizeMiB > 0 {
		fmt.Fprintf(&b, "max disk size = %d\n", s.opts.MaxDiskSizeMiB)
	}
	if !s.opts.FollowSymlinks {
		// What README "Backup shares" asks of a backup share: a link
		// another writer plants is not there for any SMB client, and
		// neither is a FIFO.
		fmt.Fprintf(&b, "follow symlinks = no\nhide special files = yes\n")
	}
	for _, l := range s.opts.Global {
		fmt.Fprintln(&b, l)
	}
	for _, sh := range s.opts.Shares {
		fmt.Fprintf(&b, "\n[%s]\npath = %s\nread only = no\nvalid users = %s\n", sh, s.Dir(sh), s.opts.User)
	}
	return os.WriteFile(s.conf(), b.Bytes(), 0o644)
}

// start runs smbd and waits until its port accepts connections.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	logf, err := os.OpenFile(filepath.Join(s.dir, "log", "smbd.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{smbBin("smbd"), "--foreground", "--no-process-group", "--debug-stdout", "-s", s.conf()}
	if s.opts.MaxFileSizeMiB > 0 {
		// sh and prlimit exec into smbd: same pid. An ignored signal stays
		// ignored across exec.
		lim := strconv.Itoa(s.opts.MaxFileSizeMiB << 20)
		args = append([]string{"/bin/sh", "-c", `trap "" XFSZ; exec prlimit --fsize=` + lim + ":" + lim + ` -- "$@"`, "sh"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = s.nssEnv
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: smbd signals its whole group when it exits, which
	// would otherwise kill the test binary.
	// Pdeathsig: a test binary that crashes must not leave smbd running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start smbd: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.waitDone = cmd, done
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("smbd exited before listening on %s: %s\n%s", s.Addr(), cmd.ProcessState, s.logTail())
		default:
		}
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			s.killLocked()
			return fmt.Errorf("smbd did not listen on %s within 20s: %v\n%s", s.Addr(), err, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "log", "smbd.out"))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// logs returns the tail of every log file, to explain a failed test.
func (s *Server) logs() string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(s.dir, "log", "*"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		fmt.Fprintf(&b, "==> %s <==\n%s\n", filepath.Base(f), data)
	}
	return b.String()
}

// CPU returns the CPU time smbd and its children (one per connection) have
// used so far, read from /proc: benchmarks report server CPU per GiB, which
// a loaded machine does not distort the way it distorts MB/s.
func (s *Server) CPU() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	pgid := strconv.Itoa(s.cmd.Process.Pid)
	var ticks int64
	eachProcess(func(_ int, f []string) {
		if len(f) < 15 || f[2] != pgid {
			return
		}
		for _, k := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			v, _ := strconv.ParseInt(f[k], 10, 64)
			ticks += v
		}
	})
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Port is the TCP port.
func (s *Server) Port() int { return s.port }

// User and Password are the share user's credentials.
func (s *Server) User() string     { return s.opts.User }
func (s *Server) Password() string { return s.opts.Password }

// Dir is the directory on this machine behind a share.
func (s *Server) Dir(share string) string {
	if p, ok := s.opts.SharePaths[share]; ok {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
		return p
	}
	return filepath.Join(s.dir, "shares", share)
}

// URL is the share's smb:// location, without credentials.
func (s *Server) URL(share string) string { return "smb://" + s.Addr() + "/" + share }

// ConfigPath is the smb.conf, for smbclient -s.
func (s *Server) ConfigPath() string { return s.conf() }

// Kill SIGKILLs smbd and its children (a crashed server). Restart brings it
// back on the same port with the same shares.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

func (s *Server) killLocked() {
	if s.cmd != nil {
		pgid := s.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-s.waitDone
		s.cmd = nil
		// smbd's children (one per connection, notifyd, cleanupd) outlive
		// it by a moment: the server is down when they are gone.
		s.killGroup(pgid)
	}
	s.killDcerpcd(syscall.SIGKILL)
}

// killGroup SIGKILLs what is left of process group pgid that runs this
// server's smb.conf and waits (at most 10s) until none of it runs. Only
// processes naming the smb.conf count: a group whose processes are all gone
// frees its number for another program.
func (s *Server) killGroup(pgid int) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := groupRunning(pgid, s.conf())
		if len(left) == 0 || time.Now().After(deadline) {
			return
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		time.Sleep(10 * time.Millisecond)
	}
}

// groupRunning lists the processes of group pgid that run arg (runs).
func groupRunning(pgid int, arg string) []int {
	var pids []int
	eachProcess(func(pid int, f []string) {
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && runs(pid, f, arg) {
			pids = append(pids, pid)
		}
	})
	return pids
}

// Running lists the processes whose command line holds arg (a server's
// ConfigPath: its smbd, their children, samba-dcerpcd and its workers) and
// which still run.
func Running(arg string) []int {
	var pids []int
	eachProcess(func(pid int, f []string) {
		if runs(pid, f, arg) {
			pids = append(pids, pid)
		}
	})
	return pids
}

// runs says whether process pid (f: its stat fields) holds arg in its
// command line and still runs: a zombie (state Z or X) has ended and only
// waits to be collected by its parent or init.
func runs(pid int, f []string, arg string) bool {
	if len(f) == 0 || f[0] == "Z" || f[0] == "X" {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.Contains(cmdline, []byte(arg))
}

// eachProcess calls fn with every process's pid and the fields of its
// /proc stat after the command name: state(0) ppid pgrp ... utime(11)
// stime(12) cutime(13) cstime(14).
func eachProcess(fn func(pid int, f []string)) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			continue // ended meanwhile
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 {
			fn(pid, strings.Fields(string(b[i+1:])))
		}
	}
}

// Freeze stops smbd and its children (SIGSTOP): connections stay open but
// nothing answers, like a hung server. Thaw resumes it.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server (SIGCONT).
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, sig)
	}
}

// samba-dcerpcd starts on demand (share listing) and outlives smbd. It
// leads a process group of its own with its rpcd_* workers, which outlive
// it: the whole group goes.
func (s *Server) killDcerpcd(sig syscall.Signal) {
	b, err := os.ReadFile(filepath.Join(s.dir, "pid", "samba-dcerpcd.pid"))
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
		_ = syscall.Kill(pid, sig)
		s.killGroup(pid)
	}
	_ = os.Remove(filepath.Join(s.dir, "pid", "samba-dcerpcd.pid"))
}

// Restart starts a killed or stopped server again on the same port.
func (s *Server) Restart() {
	if s.t != nil {
		s.t.Helper()
	}
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		s.Stop()
	}
	var err error
	// The port may linger briefly after a kill; retry.
	for range 5 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	if s.t == nil {
		panic(fmt.Sprintf("sambatest: restart: %v", err))
	}
	s.t.Fatalf("sambatest: restart: %v", err)
}

// Stop terminates smbd (SIGTERM, then SIGKILL after 5s). Safe to call twice.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.killDcerpcd(syscall.SIGKILL)
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGCONT) // a frozen server must see the TERM
	pgid := s.cmd.Process.Pid
	select {
	case <-s.waitDone:
		s.cmd = nil
		s.killGroup(pgid)
	case <-time.After(5 * time.Second):
	}
	s.killLocked()
}

// Session is one SMB session smbd holds, as smbstatus reports it.
type Session struct {
	User string
	// Signing and Encryption are the degree smbstatus reports: "full"
	// (every message), "partial" (only what the protocol always signs,
	// such as the SMB 3.1.1 session setup) or "none".
	Signing, Encryption string
}

// Sessions lists the server's SMB sessions (smbstatus --json): tests check
// with it what a client negotiated, e.g. that its messages are signed.
func (s *Server) Sessions() ([]Session, error) {
	cmd := exec.Command(smbBin("smbstatus"), "-s", s.conf(), "--json", "--brief")
	cmd.Env = s.nssEnv
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("smbstatus: %w", err)
	}
	var st struct {
		Sessions map[string]struct {
			Username   string                  `json:"username"`
			Signing    struct{ Degree string } `json:"signing"`
			Encryption struct{ Degree string } `json:"encryption"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return nil, fmt.Errorf("smbstatus --json: %w: %s", err, out)
	}
	var ss []Session
	for _, v := range st.Sessions {
		ss = append(ss, Session{User: v.Username, Signing: v.Signing.Degree, Encryption: v.Encryption.Degree})
	}
	return ss, nil
}
