package devenv_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/location"
)

// The clone directories a newcomer runs `make demo` from, as the user who
// cloned: a home directory of mode 0700 (Debian) or 0750 (Ubuntu), and a
// `mktemp -d` directory (0700 in /tmp).
var cloneCases = []struct {
	name string
	home os.FileMode // 0: the clone is in os.MkdirTemp, as mktemp -d makes it
}{{"home-0700", 0o700}, {"home-0750", 0o750}, {"mktemp-d", 0}}

// The test's process as that user: the case it runs and its home.
const (
	asUserCase = "DEVENV_TEST_CLONE_CASE"
	asUserHome = "DEVENV_TEST_CLONE_HOME"
	cloneUID   = 4461 // a user other than root and than sambatest's share user
)

// The demo's site started by a user other than root from a clone only that
// user may enter serves its backup servers over SMB, not as local
// directories: smbd reaches the shares where they are. Run as root, the
// test runs its own binary as such a user (uid 4461, no account needed)
// with a home of its own.
func TestDemoSiteServesSMBFromAClosedCloneAsItsUser(t *testing.T) {
	if name := os.Getenv(asUserCase); name != "" {
		demoSiteOverSMB(t, name, os.Getenv(asUserHome))
		return
	}
	base := smbStateDir(t) // 0755: the user reaches its home below it
	if os.Geteuid() != 0 {
		for _, c := range cloneCases {
			t.Run(c.name, func(t *testing.T) {
				home := filepath.Join(base, c.name)
				if err := os.Mkdir(home, 0o755); err != nil {
					t.Fatal(err)
				}
				if c.home != 0 {
					if err := os.Chmod(home, c.home); err != nil {
						t.Fatal(err)
					}
				}
				demoSiteOverSMB(t, c.name, home)
			})
		}
		return
	}
	for _, c := range cloneCases {
		t.Run(c.name, func(t *testing.T) {
			home := filepath.Join(base, c.name)
			mode := c.home
			if mode == 0 {
				mode = 0o755 // the clone is in a mktemp -d directory of its own
			}
			out, err := sambatest.AsUser(t, cloneUID, home, mode, asUserCase+"="+c.name, asUserHome+"="+home)
			if err != nil {
				t.Fatalf("as uid %d from a clone in %s (%s): %v\n%s", cloneUID, home, c.name, err, out)
			}
			t.Logf("as uid %d:\n%s", cloneUID, out)
		})
	}
}

// demoSiteOverSMB starts the site as the demo does (Samba auto) from a
// clone under home (mktemp -d when the case says so), and checks that both
// backup servers are served over SMB from the state directory itself:
// what the emulator writes is read over SMB, what the worker writes over
// SMB is there, and Stop leaves no smbd.
func demoSiteOverSMB(t *testing.T, name, home string) {
	clone := filepath.Join(home, "src", "backupcycle")
	if name == "mktemp-d" {
		d, err := os.MkdirTemp("", "tmp.")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(d)
		clone = filepath.Join(d, "backupcycle")
	}
	state := filepath.Join(clone, ".demo")
	s, err := devenv.Start(context.Background(), devenv.Options{StateDir: state, DatabaseSize: testSize})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	line := s.BackupMode()
	t.Logf("%s", line)
	if len(s.SMB) != len(devenv.BackupServers) {
		t.Fatalf("uid %d, clone %s: the backup servers are not served over SMB: %s", os.Geteuid(), clone, line)
	}
	var confs []string
	for _, b := range devenv.BackupServers {
		if !strings.Contains(line, b+" over SMB at "+s.Locations[b]) {
			t.Errorf("mode line %q: want %s over SMB at its location", line, b)
		}
		// Served where it is: no link out of the state directory.
		if fi, err := os.Lstat(s.BackupDirs[b]); err != nil || fi.Mode()&os.ModeSymlink != 0 {
			t.Errorf("%s: %v, %v; want the state directory's own directory", s.BackupDirs[b], fi, err)
		}
		bs := findServer(t, s.Config, b)
		if bs.Location != s.Locations[b] || !strings.HasPrefix(bs.Location, "smb://127.0.0.1:") || bs.SMB == nil {
			t.Fatalf("%s in the config: %s %+v, want its smbd", b, bs.Location, bs.SMB)
		}
		pw, err := bs.SMB.Password.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.BackupDirs[b], "by-sql.txt"), []byte("written by the emulated SQL Server"), 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := location.Open(context.Background(), bs.Location, storage.Credentials{User: bs.SMB.User, Password: pw})
		if err != nil {
			t.Fatalf("open %s: %v", bs.Location, err)
		}
		if got := readOverSMB(t, st, "by-sql.txt"); string(got) != "written by the emulated SQL Server" {
			t.Errorf("%s: by-sql.txt over SMB: %q", b, got)
		}
		w, err := st.Create(context.Background(), "by-worker.txt")
		if err != nil {
			t.Fatalf("%s: create over SMB: %v", b, err)
		}
		if _, err := w.WriteAt([]byte("written over SMB"), 0); err != nil {
			t.Errorf("%s: write over SMB: %v", b, err)
		}
		if err := w.Close(); err != nil {
			t.Errorf("%s: close over SMB: %v", b, err)
		}
		if l, err := st.List(context.Background(), "by-", ".txt"); err != nil || len(l) != 2 {
			t.Errorf("%s: list over SMB: %v, %v; want both files", b, l, err)
		}
		if err := st.Remove(context.Background(), "by-sql.txt"); err != nil {
			t.Errorf("%s: remove over SMB: %v", b, err)
		}
		_ = st.Close()
		if got, err := os.ReadFile(filepath.Join(s.BackupDirs[b], "by-worker.txt")); err != nil || string(got) != "written over SMB" {
			t.Errorf("%s: by-worker.txt in %s: %q, %v", b, s.BackupDirs[b], got, err)
		}
		confs = append(confs, s.SMB[b].ConfigPath())
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, c := range confs {
		if left := smbdPids(t, c); len(left) > 0 {
			t.Errorf("smbd of %s still running after Stop: %v", c, left)
		}
	}
}
