package tsql

import (
	"strings"
	"testing"
)

// The set-wide markers are a prefix of the statement the cycle sends, for
// any stripe count, and of no other set's or database's.
func TestSetMarkersPrefixEveryStripeCount(t *testing.T) {
	paths := []string{`\\bak01\backup`, `\\bak01-nic2\backup`}
	db := "Sa'les]"
	bm, err := SetBackupMarker(paths, NamesOf("sql01", db), 12)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := SetRestoreMarker(db+"_verify", paths, NamesOf("sql01", db), 12)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 7, 64} {
		layout, err := Layout(paths, NamesOf("sql01", db), 12, n)
		if err != nil {
			t.Fatal(err)
		}
		b, err := BackupDatabase(BackupOptions{Database: db, Disks: Paths(layout), Checksum: true, Init: true, Format: true})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(b, bm) {
			t.Errorf("%d stripes: BACKUP %q does not start with %q", n, b, bm)
		}
		r, err := RestoreDatabase(RestoreOptions{Database: db + "_verify", Disks: Paths(layout), Checksum: true, Replace: true})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(r, rm) {
			t.Errorf("%d stripes: RESTORE %q does not start with %q", n, r, rm)
		}
	}
	for _, other := range []int64{1, 120, 13} {
		layout, _ := Layout(paths, NamesOf("sql01", db), other, 2)
		b, _ := BackupDatabase(BackupOptions{Database: db, Disks: Paths(layout), Init: true})
		if strings.HasPrefix(b, bm) {
			t.Errorf("set %d's BACKUP %q matches set 12's marker", other, b)
		}
	}
}
