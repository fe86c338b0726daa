package sqlsim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShareLinkIsNotFollowed: a backup share serves no symbolic link that
// points out of it (Samba's "wide links = no", its default, and "follow
// symlinks = no", which the README asks of a backup share; Windows, whose
// SMB client evaluates a remote link only when remote-to-remote
// evaluation is enabled, which it is not by default). A BACKUP to a file
// name someone planted as such a link, or a RESTORE from one, fails to
// open the device with operating system error 5, and the file it points to
// is neither written nor read.
func TestShareLinkIsNotFollowed(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 1 << 20})
	outside := filepath.Join(t.TempDir(), "secret.bin")
	secret := bytes.Repeat([]byte("OUTSIDE-THE-SHARE."), 1000)
	if err := os.WriteFile(outside, secret, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(e.shareDir, "planted_1of1.bak")); err != nil {
		t.Fatal(err)
	}
	r := wantErrs(t, e.db, []int32{3201, 3013}, `BACKUP DATABASE [Sales] TO DISK = '\\bak01\backup\planted_1of1.bak' WITH INIT, FORMAT`)
	if !strings.Contains(r.errs[0].Message, "Operating system error 5(Access is denied.)") {
		t.Errorf("3201: %q, want operating system error 5", r.errs[0].Message)
	}
	if got, err := os.ReadFile(outside); err != nil || !bytes.Equal(got, secret) {
		t.Errorf("the file the link points to: %d bytes, %v; want it unchanged", len(got), err)
	}

	// A real backup copied to the outside file, and a link to it: RESTORE
	// does not read through the link either.
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = '\\bak01\backup\real_1of1.bak' WITH INIT, FORMAT`)
	real, err := os.ReadFile(filepath.Join(e.shareDir, "real_1of1.bak"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outside, real, 0o644); err != nil {
		t.Fatal(err)
	}
	r = wantErrs(t, e.db, []int32{3201, 3013}, `RESTORE HEADERONLY FROM DISK = '\\bak01\backup\planted_1of1.bak'`)
	if !strings.Contains(r.errs[0].Message, "Operating system error 5(Access is denied.)") {
		t.Errorf("3201 of RESTORE: %q, want operating system error 5", r.errs[0].Message)
	}
}
