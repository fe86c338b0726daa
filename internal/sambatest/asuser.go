package sambatest

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// AsUser runs the calling test again, in a process of uid (and group uid)
// other than root, and returns its output: the servers a normal user starts
// (AsInvoker) are tested from a test binary run as root. The user needs no
// account. home becomes the user's, with mode homeMode (its parent must be
// searchable), and is HOME and the working directory; TMPDIR is a
// directory of the user's beside it. env adds variables, by which the test
// knows it runs as the user. The test binary is copied where the user may
// run it (go's build directory is 0700).
func AsUser(t *testing.T, uid int, home string, homeMode os.FileMode, env ...string) ([]byte, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("sambatest.AsUser: run as uid %d, only root starts a process as another user", os.Geteuid())
	}
	tmp := home + "-tmp"
	for _, d := range []string{home, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(home, homeMode); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, filepath.Base(exe))
	if err := copyExecutable(exe, bin); err != nil {
		t.Fatal(err)
	}
	name, _, _ := strings.Cut(t.Name(), "/")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Dir = home
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + tmp}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	return cmd.CombinedOutput()
}

// OpenTempDir is a temp directory other users may enter, removed when the
// test ends: smbd's share user must reach shares below it, and
// t.TempDir's parent is 0700.
func OpenTempDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyExecutable(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
