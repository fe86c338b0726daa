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
	"github.com/backupcycle/backupcycle/internal/s3test"
	"github.com/backupcycle/backupcycle/internal/storage/s3"
)

// Status reads an object store's newest probe from the store itself, and
// from the manifests when the store cannot be read: a store found not
// immutable is RED, and so is every database copying there; each verified
// set shows its immutable copy.
func TestLoadJudgesTheObjectStore(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	// A bucket without Object Lock: the probe finds it not immutable.
	if err := srv.CreateBucket(ctx, "plain", false); err != nil {
		t.Fatal(err)
	}
	st, err := s3.Open(ctx, srv.Config("plain", "bc/"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	probe, err := st.Probe(ctx, s3.ModeCompliance)
	if err != nil || probe.Immutable {
		t.Fatalf("probe of a bucket without Object Lock: %+v, %v", probe, err)
	}
	if err := st.WriteProbeRecord(ctx, probe); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	t.Setenv("VAULT_SECRET", srv.RootSecret)
	yaml := `sql_instances:
  - {name: sql01, address: 127.0.0.1:1433, user: backup, password_env: SQL01_PASSWORD}
  - {name: verify, address: 127.0.0.1:1434, user: backup, password_env: SQL01_PASSWORD}
backup_servers:
  - {name: bak01, unc_paths: ['/b/bak01'], location: bak01, verify_instance: verify, restore_data_dir: /d, restore_log_dir: /l}
  - {name: bak02, unc_paths: ['/b/bak02'], location: bak02, verify_instance: verify, restore_data_dir: /d, restore_log_dir: /l}
  - name: vault01
    kind: s3
    s3: {endpoint: '` + srv.Endpoint + `', bucket: plain, prefix: bc/, access_key_id: ` + srv.RootAccess + `, secret_access_key_env: VAULT_SECRET}
databases:
  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02], immutable_copy: vault01}
  - {name: HR, instance: sql01, backup_servers: [bak01, bak02]}
`
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	// Sales's newest set was copied there yesterday, when a probe passed.
	m := verified(t, "sql01", "Sales", 4, now.Add(-2*time.Hour), time.Minute, time.Minute)
	m.Immutable = &catalog.ImmutableCopy{Server: "vault01", State: catalog.ImmutableCopied, At: now.Add(-time.Hour), Mode: "COMPLIANCE",
		RetainUntil: now.Add(72 * time.Hour), Objects: []catalog.ImmutableObject{{Name: "a", VersionID: "v", SHA256: strings.Repeat("0", 64)}},
		Probe: &catalog.ImmutableProbe{At: now.Add(-24 * time.Hour), Immutable: true, Summary: "immutable: ..."}}
	save(t, m, filepath.Join(dir, "bak01"), filepath.Join(dir, "bak02"))
	save(t, verified(t, "sql01", "HR", 2, now.Add(-2*time.Hour), time.Minute, time.Minute), filepath.Join(dir, "bak01"))

	r := Load(ctx, c, nil, now)
	if len(r.ObjectStores) != 1 || !r.ObjectStores[0].NotImmutable() || !strings.Contains(r.ObjectStores[0].Verdict, "write a locked object") {
		t.Fatalf("object stores: %+v; want vault01 not immutable, from the store's own record", r.ObjectStores)
	}
	if len(r.NotImmutable()) != 1 || len(r.Servers) != 2 {
		t.Errorf("NotImmutable %v, servers %v: want vault01, and only the shares read for manifests", r.NotImmutable(), r.Servers)
	}
	sales, hr := find(t, r.Databases, "sql01", "Sales"), find(t, r.Databases, "sql01", "HR")
	if !sales.OutOfObjectives || !strings.Contains(strings.Join(sales.Reasons, ";"), "immutable_copy vault01 is NOT immutable") {
		t.Errorf("Sales: out %v, reasons %q; want RED for its object store", sales.OutOfObjectives, sales.Reasons)
	}
	if im := sales.LastVerified.Immutable; im == nil || im.State != "copied" || im.Objects != 1 || im.Mode != "COMPLIANCE" {
		t.Errorf("Sales's immutable copy: %+v", im)
	}
	if hr.OutOfObjectives {
		t.Errorf("HR copies nowhere and is RED: %q", hr.Reasons)
	}

	// The store away: the manifests' newest probe (passed) stands.
	srv.Close()
	r = Load(ctx, c, nil, now)
	if o := r.ObjectStores[0]; o.NotImmutable() || !o.Probed || o.Error == "" {
		t.Errorf("store away: %+v; want the manifests' passed probe and the error", o)
	}
	if find(t, r.Databases, "sql01", "Sales").OutOfObjectives {
		t.Error("Sales is RED on the manifests' passed probe")
	}
}
