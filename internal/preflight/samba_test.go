package preflight

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/storage/location"
)

const smbPwEnv = "PREFLIGHT_TEST_SMB_PASSWORD"

// smbServer is a backup server served by a private smbd, reached with the
// worker's credentials as the cycle reaches it; its directory is root's,
// writable by the share user's group (least privilege).
func smbServer(t *testing.T, global ...string) (*sambatest.Server, *config.BackupServer) {
	t.Helper()
	return smbServerWith(t, sambatest.Options{Global: global, RootOwned: true})
}

func smbServerWith(t *testing.T, opts sambatest.Options) (*sambatest.Server, *config.BackupServer) {
	t.Helper()
	srv := sambatest.Start(t, opts)
	t.Setenv(smbPwEnv, srv.Password())
	loc := srv.URL("backup")
	b := &config.BackupServer{Name: "bak01", Location: loc, SMB: &config.SMB{User: srv.User(), Password: config.SecretRef{Env: smbPwEnv}}}
	return srv, b
}

func probeOverSMB(t *testing.T, b *config.BackupServer) []Check {
	t.Helper()
	cs := probeStorage(context.Background(), b, location.OpenServer, need{Databases: []string{"sql01/Sales"}, Planned: 1 << 20, Worst: 1 << 20})
	for _, c := range cs {
		if strings.Contains(c.Detail+c.Fix, os.Getenv(smbPwEnv)) {
			t.Errorf("%s prints the SMB password", c.Name)
		}
	}
	return cs
}

// Over real SMB: a writable share passes, a share whose directory the SMB
// user may read but not write is reported with the rights to give, and a
// share where the user may write but not delete (new files are read-only)
// names the probe it could not remove.
func TestShareRightsOverSamba(t *testing.T) {
	srv, b := smbServer(t)
	allOK(t, "writable share", probeOverSMB(t, b))
	noProbeLeft(t, srv.Dir("backup"))

	dir := srv.Dir("backup")
	if err := os.Chown(dir, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cs := probeOverSMB(t, b)
	if c := find(t, cs, "write"); c.Status != Missing || !strings.Contains(c.Fix, "SMB user "+srv.User()) {
		t.Errorf("read-only share, write: %+v", c)
	}
	if c := find(t, cs, "list"); c.Status != OK {
		t.Errorf("read-only share, list: %+v", c)
	}

	// New files get no write bit, which smbd shows as the read-only
	// attribute (map readonly), and it refuses to delete a read-only file
	// (delete readonly = no, its default): the user may write a file (the
	// handle that created it) but not remove it.
	srv2, b2 := smbServer(t, "create mask = 0444", "map readonly = yes", "store dos attributes = no")
	dir2 := srv2.Dir("backup")
	cs = probeOverSMB(t, b2)
	if s := statuses(cs); s["write"] != OK || s["read back"] != OK {
		t.Fatalf("sticky share: %+v", cs)
	}
	c := find(t, cs, "delete")
	entries, _ := os.ReadDir(dir2)
	if c.Status != Missing || len(entries) != 1 || !strings.Contains(c.Detail, entries[0].Name()) || !strings.Contains(c.Fix, "delete") {
		t.Errorf("undeletable probe: %+v, left %v", c, entries)
	}
}

// Over real SMB: the share user of a directory that is root's and
// writable through its group does no more than it needs; one that owns
// the directory may change its ACL, and one Samba maps to root (admin
// users) is an administrator: a warning each, naming the user and the
// owner SID, with the fix.
func TestSharePrivilegesOverSamba(t *testing.T) {
	_, b := smbServer(t)
	if c := find(t, probeOverSMB(t, b), "least privilege"); c.Status != OK || !strings.Contains(c.Detail, "owner S-1-22-1-0") {
		t.Errorf("root's directory: %+v", c)
	}
	srv, b := smbServerWith(t, sambatest.Options{})
	c := find(t, probeOverSMB(t, b), "least privilege: owner of the directory")
	if c.Status != Warn || !strings.Contains(c.Detail, "SMB user "+srv.User()) || !strings.Contains(c.Fix, "chown root") {
		t.Errorf("the share user owns the directory: %+v", c)
	}
	srv, b = smbServerWith(t, sambatest.Options{Global: []string{"admin users = " + sambatest.DefaultUser}})
	c = find(t, probeOverSMB(t, b), "least privilege: administrator")
	if c.Status != Warn || !strings.Contains(c.Detail, `Unix User\root (S-1-22-1-0)`) || !strings.Contains(c.Fix, "admin users") {
		t.Errorf("admin users: %+v", c)
	}
	noProbeLeft(t, srv.Dir("backup"))
}
