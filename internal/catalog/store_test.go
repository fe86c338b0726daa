package catalog

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

func (d *dirFS) List(context.Context) ([]FileInfo, error) {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, err
	}
	var out []FileInfo
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
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
	if err := Save(ctx, d, m); err != nil {
		t.Fatal(err)
	}
	if got := names(t, d.dir); len(got) != 1 || got[0] != "sql01@Sales_00000005.manifest.json" {
		t.Fatalf("directory holds %v, want only the manifest", got)
	}
	loaded, err := Load(ctx, d, "sql01", "Sales", 5)
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
		if err := Save(ctx, fault, m); err == nil {
			t.Fatalf("save with fault %+v succeeded", fault)
		}
		again, err := Load(ctx, d, "sql01", "Sales", 5)
		if err != nil || again.State != StateWritten {
			t.Errorf("after a failed save the manifest is %v, %v; want the old written one", again, err)
		}
		if got := names(t, d.dir); len(got) != 1 {
			t.Errorf("after a failed save the directory holds %v", got)
		}
	}
	if err := Save(ctx, d, m); err != nil {
		t.Fatal(err)
	}
	if again, _ := Load(ctx, d, "sql01", "Sales", 5); again.State != StateCopied {
		t.Errorf("replaced manifest state %s, want copied", again.State)
	}

	if _, err := Load(ctx, d, "sql01", "Sales", 6); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing manifest: %v, want fs.ErrNotExist", err)
	}
	// A manifest under the wrong name is not trusted.
	data, _ := os.ReadFile(filepath.Join(d.dir, "sql01@Sales_00000005.manifest.json"))
	_ = os.WriteFile(filepath.Join(d.dir, "sql01@Sales_00000009.manifest.json"), data, 0o644)
	if _, err := Load(ctx, d, "sql01", "Sales", 9); err == nil || !strings.Contains(err.Error(), "not set 9") {
		t.Errorf("misnamed manifest: %v", err)
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
		if err := Save(ctx, d, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := Save(ctx, d, sample("Other", 1)); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(d.dir, "sql01@Sales_00000004.manifest.json"), []byte("{half"), 0o644)
	_ = os.WriteFile(filepath.Join(d.dir, "sql01@Sales_00000001_1of2.bak"), []byte("x"), 0o644)

	l, err := List(ctx, d, "sql01", "Sales")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Manifests) != 3 || l.Manifests[0].Sequence != 3 || l.Manifests[2].Sequence != 1 {
		t.Errorf("manifests %v, want Sales 3, 2, 1", l.Manifests)
	}
	if _, ok := l.Broken["sql01@Sales_00000004.manifest.json"]; !ok || len(l.Broken) != 1 {
		t.Errorf("broken = %v", l.Broken)
	}
	if len(l.Files) != 6 {
		t.Errorf("files = %d, want 6", len(l.Files))
	}
	if got := LastServer("sql01", "Sales", l.Manifests); got != "BAK01" {
		t.Errorf("LastServer = %q, want BAK01 (seq 3, failed, still counts)", got)
	}
	if got := LastServer("sql01", "None", l.Manifests); got != "" {
		t.Errorf("LastServer(None) = %q", got)
	}
	nv, err := NewestVerified("sql01", "Sales", l.Manifests)
	if err != nil || nv.Sequence != 2 {
		t.Errorf("NewestVerified = %v, %v; want seq 2", nv, err)
	}
	if _, err := NewestVerified("sql01", "Other", l.Manifests); !errors.Is(err, ErrNotFound) {
		t.Errorf("NewestVerified(Other) = %v", err)
	}
	all, err := List(ctx, d, "", "")
	if err != nil || len(all.Manifests) != 4 {
		t.Errorf("List all: %d manifests, %v", len(all.Manifests), err)
	}
}
