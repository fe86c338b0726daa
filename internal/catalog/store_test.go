package catalog

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// dirFS is FS over a real local directory (what internal/storage's local
// backend provides); faults can be injected to check what a crash leaves.
type dirFS struct {
	dir        string
	failWrite  bool
	failRename bool
}

func (d *dirFS) ReadFile(_ context.Context, name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(d.dir, name))
}

func (d *dirFS) Create(_ context.Context, name string) (io.WriteCloser, error) {
	f, err := os.Create(filepath.Join(d.dir, name))
	if err != nil {
		return nil, err
	}
	if d.failWrite {
		return failingWriter{f}, nil
	}
	return f, nil
}

func (d *dirFS) Rename(_ context.Context, oldName, newName string) error {
	if d.failRename {
		return errors.New("injected: connection reset")
	}
	return os.Rename(filepath.Join(d.dir, oldName), filepath.Join(d.dir, newName))
}

func (d *dirFS) Remove(_ context.Context, name string) error {
	return os.Remove(filepath.Join(d.dir, name))
}

func (d *dirFS) List(_ context.Context, prefix, suffix string) ([]FileInfo, error) {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, err
	}
	var out []FileInfo
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || !strings.HasPrefix(e.Name(), prefix) || !strings.HasSuffix(e.Name(), suffix) {
			continue
		}
		out = append(out, FileInfo{Name: e.Name(), Size: info.Size(), ModTime: info.ModTime()})
	}
	return out, nil
}

// failingWriter writes half of the data, then fails (share full mid-write).
type failingWriter struct{ f *os.File }

func (w failingWriter) Write(p []byte) (int, error) {
	n, _ := w.f.Write(p[:len(p)/2])
	return n, errors.New("injected: no space left on device")
}
func (w failingWriter) Close() error { return w.f.Close() }

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestSaveLoadAndAtomicReplace(t *testing.T) {
	ctx := context.Background()
	d := &dirFS{dir: t.TempDir()}
	m := sample("Sales", 5)
	if err := Save(ctx, d, nil, m); err != nil {
		t.Fatal(err)
	}
	if got := names(t, d.dir); len(got) != 1 || got[0] != "sql01@Sales~8de4e0ea_00000005.manifest.json" {
		t.Fatalf("directory holds %v, want only the manifest", got)
	}
	loaded, err := Load(ctx, d, nil, Of("sql01", "Sales"), 5)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.State != StateWritten || loaded.Stripes[1].Size != 2000 {
		t.Errorf("loaded %+v", loaded)
	}

	// An update that fails half-way (write error, then rename error) leaves the
	// previous manifest intact and no temporary file behind.
	if err := m.Advance(StateCopied, t0.Add(1)); err != nil {
		t.Fatal(err)
	}
	for _, fault := range []*dirFS{{dir: d.dir, failWrite: true}, {dir: d.dir, failRename: true}} {
		if err := Save(ctx, fault, nil, m); err == nil {
			t.Fatalf("save with fault %+v succeeded", fault)
		}
		again, err := Load(ctx, d, nil, Of("sql01", "Sales"), 5)
		if err != nil || again.State != StateWritten {
			t.Errorf("after a failed save the manifest is %v, %v; want the old written one", again, err)
		}
		if got := names(t, d.dir); len(got) != 1 {
			t.Errorf("after a failed save the directory holds %v", got)
		}
	}
	if err := Save(ctx, d, nil, m); err != nil {
		t.Fatal(err)
	}
	if again, _ := Load(ctx, d, nil, Of("sql01", "Sales"), 5); again.State != StateCopied {
		t.Errorf("replaced manifest state %s, want copied", again.State)
	}

	if _, err := Load(ctx, d, nil, Of("sql01", "Sales"), 6); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing manifest: %v, want fs.ErrNotExist", err)
	}
	// A manifest under the wrong name is not trusted.
	data, _ := os.ReadFile(filepath.Join(d.dir, "sql01@Sales~8de4e0ea_00000005.manifest.json"))
	_ = os.WriteFile(filepath.Join(d.dir, "sql01@Sales~8de4e0ea_00000009.manifest.json"), data, 0o644)
	if _, err := Load(ctx, d, nil, Of("sql01", "Sales"), 9); err == nil || !strings.Contains(err.Error(), "not set 9") {
		t.Errorf("misnamed manifest: %v", err)
	}
	// Nor is a current manifest under its set's legacy name.
	seven, _ := Encode(sample("Sales", 7))
	_ = os.WriteFile(filepath.Join(d.dir, "sql01@Sales_00000007.manifest.json"), seven, 0o644)
	if _, err := Load(ctx, d, nil, Of("sql01", "Sales"), 7); err == nil || !strings.Contains(err.Error(), "not set 7") {
		t.Errorf("current manifest under a legacy name: %v", err)
	}
}

// legacySet is a manifest as a build before case-safe file names wrote it:
// no naming, its stripes and its own file named byte for byte.
func legacySet(t *testing.T, db string, seq int64, state State, at time.Time) *Manifest {
	t.Helper()
	m := sample(db, seq)
	m.Naming = ""
	for i := range m.Stripes {
		m.Stripes[i].Name = tsql.LegacyNamesOf("sql01", db).Stripe(seq, i+1, len(m.Stripes))
	}
	m.Header.BackupFinish, m.CreatedAt, m.UpdatedAt = at, at, at
	if state == StateVerified {
		for _, s := range []State{StateCopied, StateRestored, StateChecked, StateVerified} {
			if err := m.Advance(s, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	return m
}

// Sets written under today's names (no naming recorded) are found, loaded,
// updated under their own names and counted by retention together with
// the database's new sets; sets written under its databases: entry's
// spelling count when the caller says so (DB.Also).
func TestLegacySetsStillFound(t *testing.T) {
	ctx := context.Background()
	d := &dirFS{dir: t.TempDir()}
	for _, m := range []*Manifest{
		legacySet(t, "Sales", 3, StateVerified, t0),
		legacySet(t, "sales", 4, StateVerified, t0.Add(time.Hour)), // by the entry's spelling
		legacySet(t, "Sales", 5, StateWritten, t0.Add(2*time.Hour)),
	} {
		if err := Save(ctx, d, nil, m); err != nil {
			t.Fatal(err)
		}
	}
	m6 := sample("Sales", 6)
	m6.Header.BackupFinish = t0.Add(3 * time.Hour)
	for _, s := range []State{StateCopied, StateRestored, StateChecked, StateVerified} {
		_ = m6.Advance(s, t0.Add(3*time.Hour))
	}
	if err := Save(ctx, d, nil, m6); err != nil {
		t.Fatal(err)
	}
	want := []string{"sql01@Sales_00000003.manifest.json", "sql01@Sales_00000005.manifest.json", "sql01@Sales~8de4e0ea_00000006.manifest.json", "sql01@sales_00000004.manifest.json"}
	if got := names(t, d.dir); !reflect.DeepEqual(got, want) {
		t.Fatalf("directory holds %v, want %v", got, want)
	}
	sales := DB{Instance: "sql01", Database: "Sales", Also: []string{"sales"}}
	l, err := List(ctx, d, nil, &sales)
	if err != nil || len(l.Broken) > 0 {
		t.Fatalf("list: %v %v", err, l.Broken)
	}
	var seqs []int64
	for _, m := range l.Manifests {
		seqs = append(seqs, m.Sequence)
	}
	slices.Sort(seqs)
	if !reflect.DeepEqual(seqs, []int64{3, 4, 5, 6}) {
		t.Errorf("sets of Sales (and of its entry sales): %v, want 3 4 5 6", seqs)
	}
	if l, _ := List(ctx, d, nil, &DB{Instance: "sql01", Database: "Sales"}); len(l.Manifests) != 3 {
		t.Errorf("without Also, %d sets, want 3 (not the one recorded as sales)", len(l.Manifests))
	}
	// A legacy set is updated under its own name and version.
	m5, err := Load(ctx, d, nil, sales, 5)
	if err != nil || m5.Naming != "" {
		t.Fatalf("load legacy set 5: %+v %v", m5, err)
	}
	_ = m5.Advance(StateCopied, t0.Add(4*time.Hour))
	if err := Save(ctx, d, nil, m5); err != nil {
		t.Fatal(err)
	}
	if got := names(t, d.dir); !reflect.DeepEqual(got, want) {
		t.Errorf("after updating set 5 the directory holds %v, want %v", got, want)
	}
	if nv, err := NewestVerified(sales, l.Manifests); err != nil || nv.Sequence != 6 {
		t.Errorf("newest verified %+v %v, want 6", nv, err)
	}
	// Retention counts them as one database: keep 2 verified of 3, 4, 6.
	var sms []ServerManifest
	for _, m := range l.Manifests {
		sms = append(sms, ServerManifest{Server: "BAK01", Manifest: m, Database: sales.String()})
	}
	files, _ := d.List(ctx, "", "")
	dels, err := Decide(Retention{KeepVerified: 2, DeleteFailedAfter: time.Hour, DeleteAbandonedAfter: 30 * 24 * time.Hour}, sms, map[string][]FileInfo{"BAK01": files}, t0.Add(5*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(dels) != 1 || dels[0].Set.Sequence != 3 || !slices.Contains(dels[0].Files, "sql01@Sales_00000003_1of2.bak") ||
		!slices.Contains(dels[0].Files, "sql01@Sales_00000003.manifest.json") {
		t.Errorf("retention deletes %+v, want only set 3, by its legacy names", dels)
	}
}

func TestListAndRotationHelpers(t *testing.T) {
	ctx := context.Background()
	d := &dirFS{dir: t.TempDir()}
	for seq := int64(1); seq <= 3; seq++ {
		m := sample("Sales", seq)
		if seq%2 == 0 {
			m.PrimaryServer = "BAK02"
		}
		if seq < 3 {
			for _, s := range []State{StateCopied, StateRestored, StateChecked, StateVerified} {
				_ = m.Advance(s, t0)
			}
		} else {
			_ = m.Fail(StepBackup, EvidenceBackupIncomplete, "SQL host lost at 40 %", t0)
		}
		if err := Save(ctx, d, nil, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := Save(ctx, d, nil, sample("Other", 1)); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(d.dir, "sql01@Sales_00000004.manifest.json"), []byte("{half"), 0o644)
	_ = os.WriteFile(filepath.Join(d.dir, "sql01@Sales_00000001_1of2.bak"), []byte("x"), 0o644)

	l, err := List(ctx, d, nil, &DB{Instance: "sql01", Database: "Sales"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Manifests) != 3 || l.Manifests[0].Sequence != 3 || l.Manifests[2].Sequence != 1 {
		t.Errorf("manifests %v, want Sales 3, 2, 1", l.Manifests)
	}
	if _, ok := l.Broken["sql01@Sales_00000004.manifest.json"]; !ok || len(l.Broken) != 1 {
		t.Errorf("broken = %v", l.Broken)
	}
	if len(l.Files) != 5 {
		t.Errorf("files = %d, want 5 (those of Sales)", len(l.Files))
	}
	if got := LastServer(Of("sql01", "Sales"), l.Manifests); got != "BAK01" {
		t.Errorf("LastServer = %q, want BAK01 (seq 3, failed, still counts)", got)
	}
	if got := LastServer(Of("sql01", "None"), l.Manifests); got != "" {
		t.Errorf("LastServer(None) = %q", got)
	}
	nv, err := NewestVerified(Of("sql01", "Sales"), l.Manifests)
	if err != nil || nv.Sequence != 2 {
		t.Errorf("NewestVerified = %v, %v; want seq 2", nv, err)
	}
	if _, err := NewestVerified(Of("sql01", "Other"), l.Manifests); !errors.Is(err, ErrNotFound) {
		t.Errorf("NewestVerified(Other) = %v", err)
	}
	if err := Save(ctx, d, nil, New("sql02", "Sales", 1, t0)); err != nil {
		t.Fatal(err)
	}
	all, err := ListInstances(ctx, d, nil, []string{"sql01"})
	if err != nil || len(all.Manifests) != 4 {
		t.Errorf("ListInstances(sql01): %d manifests, %v; want 4 (not sql02's)", len(all.Manifests), err)
	}
}

// A database of an availability group owns the sets its replicas wrote
// under their own names, in every naming; not another database's.
func TestDBInstancesOwnAliasSets(t *testing.T) {
	d := DB{Instance: "ag1", Database: "Sales", Instances: []string{"sql01", "sql02"}}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		m    *Manifest
		want bool
	}{
		{New("ag1", "Sales", 5, at), true},
		{New("sql01", "Sales", 3, at), true},
		{New("sql02", "Sales", 3, at), true},
		{New("sql03", "Sales", 3, at), false},
		{New("sql01", "Local", 3, at), false},
	} {
		if got := d.Owns(c.m); got != c.want {
			t.Errorf("Owns(%s/%s) = %v, want %v", c.m.SourceInstance, c.m.Database, got, c.want)
		}
		if p, ok := tsql.ParseManifestFileName(c.m.FileName()); !ok || d.OwnsName(p) != c.want {
			t.Errorf("OwnsName(%s) = %v, want %v", c.m.FileName(), d.OwnsName(p), c.want)
		}
	}
	if first := d.Names()[0]; first.Instance != "ag1" || first.Legacy {
		t.Errorf("current naming first: %+v", first)
	}
}
