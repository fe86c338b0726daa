package preflight

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/local"
)

// faulty is a real local Storage with chosen operations failing the way a
// share without the right (or with a flaky server) fails them.
type faulty struct {
	storage.Storage
	create, remove, read error
	corrupt              bool
	free                 int64
	freeKnown            bool
}

func (f *faulty) Create(ctx context.Context, name string) (storage.Writer, error) {
	if f.create != nil {
		return nil, f.create
	}
	return f.Storage.Create(ctx, name)
}

func (f *faulty) Remove(ctx context.Context, name string) error {
	if f.remove != nil {
		return f.remove
	}
	return f.Storage.Remove(ctx, name)
}

func (f *faulty) OpenRead(ctx context.Context, name string) (storage.Reader, error) {
	if f.read != nil {
		return nil, f.read
	}
	if f.corrupt {
		// Flip a byte behind the probe's back, as a server returning other
		// data would.
		w, err := f.Storage.OpenWrite(ctx, name)
		if err != nil {
			return nil, err
		}
		_, _ = w.WriteAt([]byte{0xff, 0x00, 0xff}, 100)
		_ = w.Close()
	}
	return f.Storage.OpenRead(ctx, name)
}

func (f *faulty) FreeSpace(ctx context.Context) (int64, bool, error) {
	if f.freeKnown {
		return f.free, true, nil
	}
	return f.Storage.FreeSpace(ctx)
}

func opener(st storage.Storage) func(context.Context, *config.BackupServer) (storage.Storage, error) {
	return func(context.Context, *config.BackupServer) (storage.Storage, error) { return st, nil }
}

func localStorage(t *testing.T) (string, *local.Storage) {
	t.Helper()
	dir := t.TempDir()
	st, err := local.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, st
}

func noProbeLeft(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ProbePrefix) {
			t.Errorf("probe file %s left behind", e.Name())
		}
	}
}

var bak01 = &config.BackupServer{Name: "bak01", Location: "/srv/bak01", SMB: &config.SMB{User: "bakuser"}}

// A writable directory passes list, write, read back and delete, and the
// probe is gone afterwards; existing files are untouched.
func TestProbeWritableStorage(t *testing.T) {
	dir, st := localStorage(t)
	if err := os.WriteFile(dir+"/sql01@Sales_00000001.manifest.json", []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := probeStorage(context.Background(), bak01, opener(st), need{Databases: []string{"sql01/Sales"}, Planned: 1 << 20, Worst: 4 << 20})
	allOK(t, "writable", cs)
	if c := find(t, cs, "list"); !strings.Contains(c.Detail, "found the probe file") {
		t.Errorf("list: %q", c.Detail)
	}
	noProbeLeft(t, dir)
	if _, err := os.Stat(dir + "/sql01@Sales_00000001.manifest.json"); err != nil {
		t.Errorf("existing file: %v", err)
	}
}

// A share the login cannot write, or cannot delete on, is reported with
// what to grant; a probe that could be written but not deleted is named.
func TestProbeReadOnlyAndUndeletable(t *testing.T) {
	dir, st := localStorage(t)
	denied := &storage.Error{Op: "create", Location: "smb://bak01:445/backup", Kind: storage.ErrPermission}
	cs := probeStorage(context.Background(), bak01, opener(&faulty{Storage: st, create: denied}), need{})
	if c := find(t, cs, "write"); c.Status != Missing || !strings.Contains(c.Fix, "SMB user bakuser") || !strings.Contains(c.Fix, "delete") {
		t.Errorf("write denied: %+v", c)
	}
	if c := find(t, cs, "delete"); c.Status != Warn || !strings.Contains(c.Detail, "not checked") {
		t.Errorf("delete after a failed write: %+v", c)
	}
	if s := statuses(cs); s["list"] != OK {
		t.Errorf("list: %s", s["list"])
	}

	cs = probeStorage(context.Background(), bak01, opener(&faulty{Storage: st, remove: &storage.Error{Op: "remove", Kind: storage.ErrPermission}}), need{})
	c := find(t, cs, "delete")
	if c.Status != Missing || !strings.Contains(c.Detail, ProbePrefix) || !strings.Contains(c.Fix, "modify") {
		t.Errorf("delete denied: %+v", c)
	}
	if s := statuses(cs); s["write"] != OK || s["read back"] != OK {
		t.Errorf("write/read with delete denied: %v", s)
	}
	// The one probe the fault left behind is the one the report names.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || !strings.Contains(c.Detail, entries[0].Name()) {
		t.Errorf("left behind: %v, detail %q", entries, c.Detail)
	}
}

func TestProbeReadBackAndOpen(t *testing.T) {
	dir, st := localStorage(t)
	cs := probeStorage(context.Background(), bak01, opener(&faulty{Storage: st, corrupt: true}), need{})
	if c := find(t, cs, "read back"); c.Status != Missing || !strings.Contains(c.Detail, "differ") || !strings.Contains(c.Fix, "other bytes") {
		t.Errorf("corrupt read back: %+v", c)
	}
	noProbeLeft(t, dir)

	failOpen := func(context.Context, *config.BackupServer) (storage.Storage, error) {
		return nil, &storage.Error{Op: "connect", Location: "smb://bak01:445/backup", Kind: storage.ErrAuth}
	}
	cs = probeStorage(context.Background(), bak01, failOpen, need{})
	if len(cs) != 1 || cs[0].Status != Missing || !strings.Contains(cs[0].Fix, "password reference") {
		t.Errorf("open with bad credentials: %+v", cs)
	}
	remote := *bak01
	remote.TaskQueue = "bak01-local"
	cs = probeStorage(context.Background(), &remote, failOpen, need{})
	if cs[0].Status != Warn || !strings.Contains(cs[0].Fix, "bak01-local") {
		t.Errorf("server with its own task queue: %+v", cs[0])
	}
}

func TestFreeSpaceAgainstPlannedSets(t *testing.T) {
	_, st := localStorage(t)
	n := need{Databases: []string{"sql01/Sales"}, Planned: 100 << 20, Worst: 400 << 20}
	for _, tc := range []struct {
		free  int64
		known bool
		n     need
		want  Status
		text  string
	}{
		{50 << 20, true, n, Missing, "free at least 50.0 MiB"},
		{200 << 20, true, n, Warn, "incompressible"},
		{1 << 30, true, n, OK, ">="},
		{0, false, n, Warn, "unknown"},
		{1 << 30, true, need{Databases: []string{"sql01/Sales"}, Unknown: []string{"sql01/Sales"}}, Warn, "could not be read"},
	} {
		c := freeSpaceCheck(context.Background(), &faulty{Storage: st, free: tc.free, freeKnown: tc.known}, Check{Name: "free space"}, tc.n)
		if !tc.known {
			c = freeSpaceCheck(context.Background(), noFree{st}, Check{Name: "free space"}, tc.n)
		}
		if c.Status != tc.want || !strings.Contains(c.Detail+" "+c.Fix, tc.text) {
			t.Errorf("free %d known %v: %s %q %q, want %s with %q", tc.free, tc.known, c.Status, c.Detail, c.Fix, tc.want, tc.text)
		}
	}
}

// noFree is a server that does not report free space.
type noFree struct{ storage.Storage }

func (noFree) FreeSpace(context.Context) (int64, bool, error) { return 0, false, nil }
