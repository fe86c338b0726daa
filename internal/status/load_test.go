package status

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/storage/local"
)

// dirFS is a local directory as the worker writes it: the catalog over
// the local storage backend.
func dirFS(t *testing.T, dir string) catalog.StorageFS {
	t.Helper()
	st, err := local.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return catalog.StorageFS{Storage: st}
}

// siteConfig is a site with two local-directory backup servers (bak03 is
// configured but its directory does not exist) and the given databases.
func siteConfig(t *testing.T, dir, databases string) *config.Config {
	t.Helper()
	yaml := `
sql_instances:
  - name: sql01
    address: 127.0.0.1:1433
    user: backup
    password_env: SQL01_PASSWORD
  - name: verify
    address: 127.0.0.1:1434
    user: backup
    password_env: SQL01_PASSWORD
backup_servers:
  - name: bak01
    unc_paths: ['/var/opt/mssql/backup/bak01']
    location: bak01
    verify_instance: verify
    restore_data_dir: /data
    restore_log_dir: /log
  - name: bak02
    unc_paths: ['/var/opt/mssql/backup/bak02']
    location: bak02
    verify_instance: verify
    restore_data_dir: /data
    restore_log_dir: /log
  - name: bak03
    unc_paths: ['/var/opt/mssql/backup/bak03']
    location: missing/bak03
    verify_instance: verify
    restore_data_dir: /data
    restore_log_dir: /log
databases:
` + databases
	return loadConfig(t, dir, yaml)
}

// loadConfig loads yaml as dir/config.yaml.
func loadConfig(t *testing.T, dir, yaml string) *config.Config {
	t.Helper()
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// save writes m with catalog.Save into each server directory.
func save(t *testing.T, m *catalog.Manifest, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := catalog.Save(context.Background(), dirFS(t, d), nil, m); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadFromLocalBackupServers(t *testing.T) {
	dir := t.TempDir()
	shop := `O'Brien's "Shop"`
	c := siteConfig(t, dir, `  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
    rpo: 2h
    rto: 30m
  - name: 'O''Brien''s "Shop"'
    instance: sql01
    backup_servers: [bak01, bak02]
  - name: Never
    instance: sql01
    backup_servers: [bak01, bak02]
`)
	if c.Databases[1].Name != shop {
		t.Fatalf("config name %q", c.Databases[1].Name)
	}
	bak01, bak02 := filepath.Join(dir, "bak01"), filepath.Join(dir, "bak02")
	// Sales: verified 3h ago on both servers (RPO 2h: red), restore 20m +
	// CHECKDB 15m (RTO 30m: red); a newer set failed CHECKDB on bak02.
	save(t, verified(t, "sql01", "Sales", 10, now.Add(-3*time.Hour), 20*time.Minute, 15*time.Minute), bak01, bak02)
	save(t, failed(t, "sql01", "Sales", 11, now.Add(-time.Hour), catalog.StepCheckDB, catalog.EvidenceCheckDBFailed), bak02)
	// O'Brien's "Shop": verified 1h ago, on bak02 only.
	save(t, verified(t, "sql01", shop, 3, now.Add(-time.Hour), time.Minute, time.Minute), bak02)
	// A database no longer configured still shows.
	save(t, verified(t, "sql01", "Old]@", 1, now.Add(-100*time.Hour), time.Minute, time.Minute), bak01)
	if err := os.WriteFile(filepath.Join(bak01, "sql01@Broken_00000001.manifest.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}

	r := Load(context.Background(), c, nil, now)

	if len(r.Servers) != 3 || r.Servers[0].Manifests != 2 || r.Servers[1].Manifests != 3 || r.Servers[0].Broken["sql01@Broken_00000001.manifest.json"] == "" {
		t.Fatalf("servers: %+v", r.Servers)
	}
	// A server that cannot be opened is reported; the others still answer.
	if e := r.Servers[2].Error; r.Servers[2].Manifests != 0 || !strings.Contains(e, "open backup server bak03") || !strings.Contains(e, "does not exist") {
		t.Fatalf("bak03: %+v", r.Servers[2])
	}
	if len(r.Incomplete()) != 1 {
		t.Fatalf("incomplete: %+v", r.Incomplete())
	}
	sales := find(t, r.Databases, "sql01", "Sales")
	if v := sales.LastVerified; v == nil || v.Sequence != 10 || strings.Join(v.Servers, ",") != "bak01,bak02" || time.Duration(v.TimeToRecover) != 35*time.Minute {
		t.Fatalf("Sales: %+v", v)
	}
	if !sales.OutOfObjectives || len(sales.Reasons) != 2 || sales.LastFailure == nil || sales.LastFailure.Sequence != 11 || sales.LastFailure.Type != "checkdb_failed" {
		t.Fatalf("Sales: out %v reasons %q failure %+v", sales.OutOfObjectives, sales.Reasons, sales.LastFailure)
	}
	s := find(t, r.Databases, "sql01", shop)
	if s.OutOfObjectives || s.LastVerified == nil || strings.Join(s.LastVerified.Servers, ",") != "bak02" || time.Duration(s.RPO) != config.DefaultRPO {
		t.Fatalf("%s: %+v", shop, s)
	}
	if n := find(t, r.Databases, "sql01", "Never"); !n.OutOfObjectives || n.LastVerified != nil {
		t.Fatalf("Never: %+v", n)
	}
	if o := find(t, r.Databases, "sql01", "Old]@"); o.Configured || !o.OutOfObjectives {
		t.Fatalf("Old]@: %+v", o)
	}
	if len(r.OutOfObjectives()) != 3 {
		t.Fatalf("out of objectives: %d, want 3 (Sales, Never, Old]@)", len(r.OutOfObjectives()))
	}
}

func TestReadOnlyFSRefusesWrites(t *testing.T) {
	fsys := ReadOnlyFS(nil)
	if _, err := fsys.Create(context.Background(), "x"); err != ErrReadOnly {
		t.Fatalf("Create: %v", err)
	}
	if err := fsys.Remove(context.Background(), "x"); err != ErrReadOnly {
		t.Fatalf("Remove: %v", err)
	}
}

// TestLoadOversizedManifestIsBrokenNotRead: a file named like a manifest
// that is far too big for one (a sparse 64 GiB file costs its writer
// nothing) is reported as broken, named, and never read whole: reading it
// killed the worker (out of memory) and, with --metrics-addr, every worker
// at start.
func TestLoadOversizedManifestIsBrokenNotRead(t *testing.T) {
	dir := t.TempDir()
	c := siteConfig(t, dir, `  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
`)
	bak01 := filepath.Join(dir, "bak01")
	save(t, verified(t, "sql01", "Sales", 10, now.Add(-time.Hour), time.Minute, time.Minute), bak01)
	huge := "sql01@Sales~8de4e0ea_00000011.manifest.json"
	f, err := os.Create(filepath.Join(bak01, huge))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()

	r := Load(context.Background(), c, nil, now)

	if why := r.Servers[0].Broken[huge]; !strings.Contains(why, "too large") {
		t.Fatalf("bak01: %+v, want %s reported as too large", r.Servers[0], huge)
	}
	if v := find(t, r.Databases, "sql01", "Sales").LastVerified; v == nil || v.Sequence != 10 {
		t.Fatalf("Sales: %+v, want set 10 still verified", v)
	}
}

// TestLoadIgnoresInstancesNotConfigured: manifests of an instance the
// configuration does not name (anyone who can write a share can put one
// there) make no line, and so no alert and no metric.
func TestLoadIgnoresInstancesNotConfigured(t *testing.T) {
	dir := t.TempDir()
	c := siteConfig(t, dir, `  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
`)
	bak01 := filepath.Join(dir, "bak01")
	save(t, verified(t, "sql01", "Sales", 10, now.Add(-time.Hour), time.Minute, time.Minute), bak01)
	save(t, verified(t, "sql01", "Found", 3, now.Add(-time.Hour), time.Minute, time.Minute), bak01)
	save(t, failed(t, "rogue", "Sales", 7, now.Add(-time.Hour), catalog.StepCheckDB, catalog.EvidenceCheckDBFailed), bak01)

	r := Load(context.Background(), c, nil, now)

	var lines []string
	for _, d := range r.Databases {
		lines = append(lines, d.Instance+"/"+d.Database)
	}
	if got := strings.Join(lines, " "); got != "sql01/Found sql01/Sales" {
		t.Fatalf("lines %q, want sql01/Found sql01/Sales (a database of a configured instance found in manifests counts; instance rogue is not configured)", got)
	}
	if r.Servers[0].Manifests != 2 {
		t.Fatalf("bak01: %+v, want 2 manifests", r.Servers[0])
	}
}

// keyedConfig is siteConfig with a manifest key (in a file under dir).
func keyedConfig(t *testing.T, dir, databases string) (*config.Config, *catalog.Keys) {
	t.Helper()
	key := filepath.Join(dir, "manifest.key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef-status-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := siteConfig(t, dir, databases)
	c.ManifestKeys = []config.ManifestKey{{ID: "k1", File: key}}
	keys, err := c.ManifestKeyRing()
	if err != nil {
		t.Fatal(err)
	}
	return c, keys
}

// A planted fresh "verified" manifest of a configured database (valid,
// plausible, unsigned) does not count: status shows the real newest
// verified set, its age above the RPO (the alarm fires), and the planted
// set as unauthenticated. So does a manifest written before the keys were
// configured.
func TestPlantedVerifiedManifestDoesNotSilenceTheRPO(t *testing.T) {
	dir := t.TempDir()
	c, keys := keyedConfig(t, dir, `  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02], rpo: 26h}
  - {name: Legacy, instance: sql01, backup_servers: [bak01, bak02]}
`)
	bak01, bak02 := filepath.Join(dir, "bak01"), filepath.Join(dir, "bak02")
	real := verified(t, "sql01", "Sales", 10, now.Add(-30*time.Hour), 20*time.Minute, 15*time.Minute)
	for _, d := range []string{bak01, bak02} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := catalog.Save(context.Background(), dirFS(t, d), keys, real); err != nil {
			t.Fatal(err)
		}
	}
	save(t, verified(t, "sql01", "Sales", 11, now.Add(-time.Hour), time.Minute, time.Minute), bak02) // planted: unsigned
	save(t, verified(t, "sql01", "Legacy", 4, now.Add(-2*time.Hour), time.Minute, time.Minute), bak01)

	r := Load(context.Background(), c, nil, now)
	if r.Authentication != AuthenticationHMAC {
		t.Errorf("authentication %q, want %q", r.Authentication, AuthenticationHMAC)
	}
	sales := find(t, r.Databases, "sql01", "Sales")
	if v := sales.LastVerified; v == nil || v.Sequence != 10 || !sales.OutOfObjectives || !strings.Contains(strings.Join(sales.Reasons, ";"), "above the RPO") {
		t.Errorf("Sales: last verified %+v, out of objectives %v %v; want set 10, 30h old, above the RPO", v, sales.OutOfObjectives, sales.Reasons)
	}
	if u := sales.Unauthenticated; len(u) != 1 || u[0].Sequence != 11 || u[0].State != catalog.StateVerified || u[0].Auth != catalog.AuthUnsigned ||
		strings.Join(u[0].Servers, ",") != "bak02" {
		t.Errorf("Sales: unauthenticated %+v, want set 11 claiming verified on bak02, unsigned", u)
	}
	legacy := find(t, r.Databases, "sql01", "Legacy")
	if legacy.LastVerified != nil || !legacy.OutOfObjectives || len(legacy.Unauthenticated) != 1 ||
		!strings.Contains(strings.Join(legacy.Reasons, ";"), "no authenticated verified backup set") {
		t.Errorf("Legacy (written before the key): %+v; want no verified set, its set shown unauthenticated", legacy)
	}
	// A key configured but not readable here: no manifest is taken at its word.
	c.ManifestKeys[0].File = filepath.Join(dir, "missing.key")
	r = Load(context.Background(), c, nil, now)
	if len(r.Incomplete()) != len(c.BackupServers) || !strings.Contains(r.Servers[0].Error, "manifest key k1") {
		t.Errorf("without the key: servers %+v; want none read, naming the key", r.Servers)
	}
}
