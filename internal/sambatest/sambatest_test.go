package sambatest_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
