package sambatest_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/sambatest"
)

// smbclient runs one smbclient command against share and returns its output.
func smbclient(t *testing.T, s *sambatest.Server, share, password, command string) ([]byte, error) {
	t.Helper()
	auth := filepath.Join(t.TempDir(), "auth")
	if err := os.WriteFile(auth, []byte("username = "+s.User()+"\npassword = "+password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("smbclient", "//127.0.0.1/"+share, "-p", strconv.Itoa(s.Port()), "-A", auth, "-c", command)
	cmd.Dir = t.TempDir()
	return cmd.CombinedOutput()
}

func TestStartKillRestart(t *testing.T) {
	s := sambatest.Start(t, sambatest.Options{Shares: []string{"backup", "other"}})
	src := filepath.Join(t.TempDir(), "hello.txt")
	data := []byte("hello from sambatest\n")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := smbclient(t, s, "backup", s.Password(), "put "+src+" hello.txt"); err != nil {
		t.Fatalf("smbclient put: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(s.Dir("backup"), "hello.txt"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("file behind the share: %q, %v", got, err)
	}
	if out, err := smbclient(t, s, "backup", "wrong-password", "ls"); err == nil {
		t.Fatalf("smbclient with a wrong password succeeded:\n%s", out)
	}

	s.Kill()
	if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("port still accepts after Kill")
	}
	s.Restart()
	if out, err := smbclient(t, s, "other", s.Password(), "ls"); err != nil {
		t.Fatalf("smbclient after Restart: %v\n%s", err, out)
	}
	if out, err := smbclient(t, s, "backup", s.Password(), "ls hello.txt"); err != nil || !bytes.Contains(out, []byte("hello.txt")) {
		t.Fatalf("file lost across Restart: %v\n%s", err, out)
	}
}

func TestTwoServersSideBySide(t *testing.T) {
	a := sambatest.Start(t, sambatest.Options{Signing: "mandatory"})
	b := sambatest.Start(t, sambatest.Options{Encrypt: "required"})
	if a.Port() == b.Port() || a.Dir("backup") == b.Dir("backup") {
		t.Fatal("two servers share a port or a directory")
	}
	for _, s := range []*sambatest.Server{a, b} {
		if out, err := smbclient(t, s, "backup", s.Password(), "ls"); err != nil {
			t.Fatalf("smbclient on %s: %v\n%s", s.Addr(), err, out)
		}
	}
}

// Run without a testing.TB: a fixed server directory and an existing share
// directory holding root-owned files, both kept by Close; a second Run on
// the same directories serves the same files; Close leaves no smbd.
func TestRunServesExistingDirectory(t *testing.T) {
	base := sambatest.OpenTempDir(t, "sambatest-run-")
	share := filepath.Join(base, "bak01", "backup")
	if err := os.MkdirAll(filepath.Join(share, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := []byte("written before smbd ran\n")
	if err := os.WriteFile(filepath.Join(share, "sub", "old.txt"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := sambatest.Options{Dir: filepath.Join(base, "samba-bak01"), Password: "Caller-Pw-1",
		SharePaths: map[string]string{"backup": share}}
	for round := 1; round <= 2; round++ {
		s, err := sambatest.Run(opts)
		if err != nil {
			t.Fatalf("round %d: Run: %v", round, err)
		}
		if s.Dir("backup") != share || s.Password() != "Caller-Pw-1" {
			t.Errorf("round %d: Dir %s, password %q: want %s and the caller's", round, s.Dir("backup"), s.Password(), share)
		}
		out, err := smbclient(t, s, "backup", "Caller-Pw-1", "get sub/old.txt "+filepath.Join(t.TempDir(), "got.txt")+"; put "+filepath.Join(share, "sub", "old.txt")+" sub/new"+strconv.Itoa(round)+".txt; del sub/old.txt")
		if err != nil {
			t.Fatalf("round %d: smbclient: %v\n%s", round, err, out)
		}
		if round == 1 {
			if _, err := os.Stat(filepath.Join(share, "sub", "old.txt")); !os.IsNotExist(err) {
				t.Errorf("sub/old.txt after a delete over SMB: %v", err)
			}
			// Root writes into the share behind smbd's back, as an
			// emulated SQL Server does.
			if err := os.WriteFile(filepath.Join(share, "sub", "old.txt"), old, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		pid := smbdPid(t, s)
		if err := s.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("round %d: smbd %d still runs after Close", round, pid)
		}
		if _, err := os.Stat(filepath.Join(opts.Dir, "smb.conf")); err != nil {
			t.Errorf("round %d: Close removed the given Dir: %v", round, err)
		}
	}
	for _, f := range []string{"new1.txt", "new2.txt"} {
		if got, err := os.ReadFile(filepath.Join(share, "sub", f)); err != nil || !bytes.Equal(got, old) {
			t.Errorf("%s behind the share: %q, %v", f, got, err)
		}
	}
}

// smbdPid is the pid of the server's smbd, from its pid file.
func smbdPid(t *testing.T, s *sambatest.Server) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(s.ConfigPath()), "pid", "smbd.pid"))
	if err != nil {
		t.Fatalf("smbd pid file: %v", err)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || pid <= 1 {
		t.Fatalf("smbd pid file holds %q", b)
	}
	return pid
}

// asUserHome is set in the test's process run as another user (AsUser).
const asUserHome = "SAMBATEST_TEST_HOME"

// Run by a user other than root (no account needed), a server runs smbd
// as that user, whose share user is that user: it serves a share in a home
// only that user may enter (mode 0700), files it creates are that user's,
// and Close stops it. A share the user cannot enter is refused at Run, with
// the reason.
func TestRunByAnotherUserServesItsClosedHome(t *testing.T) {
	if home := os.Getenv(asUserHome); home != "" {
		serveClosedHome(t, home)
		return
	}
	base := sambatest.OpenTempDir(t, "sambatest-user-")
	home := filepath.Join(base, "home")
	out, err := sambatest.AsUser(t, 4462, home, 0o700, asUserHome+"="+home)
	if err != nil {
		t.Fatalf("as uid 4462: %v\n%s", err, out)
	}
	t.Logf("as uid 4462:\n%s", out)
}

func serveClosedHome(t *testing.T, home string) {
	if !sambatest.AsInvoker() {
		t.Fatalf("uid %d: AsInvoker is false", os.Geteuid())
	}
	share := filepath.Join(home, "clone", ".demo", "bak01", "backup")
	if err := os.MkdirAll(share, 0o755); err != nil {
		t.Fatal(err)
	}
	old := []byte("written by the user before smbd ran\n")
	if err := os.WriteFile(filepath.Join(share, "old.txt"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sambatest.Run(sambatest.Options{SharePaths: map[string]string{"backup": "/root"}}); err == nil || !strings.Contains(err.Error(), "cannot read, write and enter") {
		t.Errorf("Run on a share the user cannot enter: %v, want the reason", err)
	}
	s, err := sambatest.Run(sambatest.Options{Dir: filepath.Join(home, "clone", ".demo", "samba-bak01"),
		SharePaths: map[string]string{"backup": share}, RootOwned: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := filepath.Join(t.TempDir(), "got.txt")
	out, err := smbclient(t, s, "backup", s.Password(), "get old.txt "+got+"; put "+got+" new.txt; del old.txt")
	if err != nil {
		t.Fatalf("smbclient: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(got); err != nil || !bytes.Equal(b, old) {
		t.Errorf("old.txt over SMB: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(share, "old.txt")); !os.IsNotExist(err) {
		t.Errorf("old.txt after a delete over SMB: %v", err)
	}
	fi, err := os.Stat(filepath.Join(share, "new.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() {
		t.Errorf("new.txt is uid %d's, want uid %d's", st.Uid, os.Geteuid())
	}
	pid := smbdPid(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("smbd %d still runs after Close", pid)
	}
}

// Stop returns only when no smbd of the server runs any more: smbd forks a
// child per connection, and a child still serving (or still exiting) when
// Stop returned was counted as a server left behind. A zombie is not
// running: it only waits for its parent (or init) to collect it.
func TestStopLeavesNoSmbdWithConnectionsOpen(t *testing.T) {
	for round := 1; round <= 3; round++ {
		s := sambatest.Start(t, sambatest.Options{})
		var conns []net.Conn
		for range 4 {
			c, err := net.Dial("tcp", s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		// Each connection has its child by the time smbd answers one. A
		// share listing starts samba-dcerpcd and its rpcd_* workers.
		if out, err := smbclient(t, s, "backup", s.Password(), "ls"); err != nil {
			t.Fatalf("smbclient: %v\n%s", err, out)
		}
		if out, err := listShares(t, s); err != nil {
			t.Fatalf("smbclient -L: %v\n%s", err, out)
		}
		conf := s.ConfigPath()
		s.Stop()
		if left := sambatest.Running(conf); len(left) > 0 {
			t.Errorf("round %d: smbd processes of %s still running after Stop: %v", round, conf, left)
		}
		for _, c := range conns {
			c.Close()
		}
	}
}

// listShares lists the server's shares (smbclient -L), over DCE/RPC.
func listShares(t *testing.T, s *sambatest.Server) ([]byte, error) {
	t.Helper()
	auth := filepath.Join(t.TempDir(), "auth")
	if err := os.WriteFile(auth, []byte("username = "+s.User()+"\npassword = "+s.Password()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("smbclient", "-L", "127.0.0.1", "-p", strconv.Itoa(s.Port()), "-A", auth)
	cmd.Dir = t.TempDir()
	return cmd.CombinedOutput()
}
