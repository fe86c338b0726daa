package cycle

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// A set's file-name prefix <inst>@<db>_<seq:08d>_ is also the start of every
// file of a database named <db>_<seq:08d> (DW_20240131 and the like are
// ordinary names). Cancelling set 5 of Sales must not touch the verified set
// of the database Sales_00000005.
func TestCancelLeavesDatabaseNamedLikeTheSet(t *testing.T) {
	f := newCycleFixture(t, "Sales", "")
	other := "Sales_00000005"
	theirs := f.writeSet("bak01", other, 1, catalog.StateVerified, "bak01", 64)
	f.writeSet("bak02", other, 1, catalog.StateVerified, "bak01", 64)
	before := snapshotFiles(t, f.dirs["bak01"], f.dirs["bak02"])

	// Sales set 5 was being backed up and copied when the cancel came.
	own := filepath.Join(f.dirs["bak01"], tsql.StripeFileName("sql01", "Sales", 5, 1, 1))
	if err := os.WriteFile(own, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.env.ExecuteActivity(f.acts.MarkCancelled, activities.MarkInput{Database: "Sales", Sequence: 5, Step: activities.StepCopy,
		Servers: []string{"bak01", "bak02"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(own); !os.IsNotExist(err) {
		t.Errorf("the cancelled set's own stripe is still there: %v", err)
	}
	after := snapshotFiles(t, f.dirs["bak01"], f.dirs["bak02"])
	for name, data := range before {
		if got, ok := after[name]; !ok || !bytes.Equal(got, data) {
			t.Errorf("%s of database %s changed or removed by the cancel of Sales set 5", name, other)
		}
	}
	for _, s := range []string{"bak01", "bak02"} {
		if m := f.load(s, other, 1); m.State != catalog.StateVerified || len(m.Stripes) != len(theirs.Stripes) {
			t.Errorf("manifest of %s on %s: %s with %d stripes, want verified as before", other, s, m.State, len(m.Stripes))
		}
	}
}

// A claim of Sales set 5 is not refused because database Sales_00000005
// has files: those are another database's.
func TestClaimIgnoresDatabaseNamedLikeTheSet(t *testing.T) {
	f := newCycleFixture(t, "Sales", "")
	f.writeSet("bak01", "Sales_00000005", 1, catalog.StateVerified, "bak01", 4)
	st := f.storage("bak01")
	db, err := f.acts.Cycle.DatabaseEntry("", "Sales", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := activities.ClaimSet(f.acts.Activities, testContext(t), st, db, "bak01", 5, nil); err != nil {
		t.Fatalf("claim of Sales set 5: %v; the files of Sales_00000005 are not Sales's", err)
	}
}

// snapshotFiles reads every file of the directories, keyed by path.
func snapshotFiles(t *testing.T, dirs ...string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(d, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Join(d, e.Name())] = data
		}
	}
	return out
}

// storage opens a backup server's directory as the worker does.
func (f *cycleFixture) storage(server string) storage.Storage {
	f.t.Helper()
	st, err := local.Open(context.Background(), f.dirs[server])
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { st.Close() })
	return st
}

// testContext is a context that ends with the test.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}
