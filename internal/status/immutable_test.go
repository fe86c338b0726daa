package status

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/s3test"
	"github.com/backupcycle/backupcycle/internal/storage/s3"
)

// vaultSite is a site in dir with the backup servers bak01 and bak02 and
// the object store vault01, bucket on srv, and the given databases.
func vaultSite(t *testing.T, srv *s3test.Server, dir, bucket, databases string) *config.Config {
	t.Helper()
	t.Setenv("VAULT_SECRET", srv.RootSecret)
	yaml := `sql_instances:
  - {name: sql01, address: 127.0.0.1:1433, user: backup, password_env: SQL01_PASSWORD}
  - {name: verify, address: 127.0.0.1:1434, user: backup, password_env: SQL01_PASSWORD}
backup_servers:
  - {name: bak01, unc_paths: ['/b/bak01'], location: bak01, verify_instance: verify, restore_data_dir: /d, restore_log_dir: /l}
  - {name: bak02, unc_paths: ['/b/bak02'], location: bak02, verify_instance: verify, restore_data_dir: /d, restore_log_dir: /l}
  - name: vault01
    kind: s3
    s3: {endpoint: '` + srv.Endpoint + `', bucket: ` + bucket + `, prefix: bc/, access_key_id: ` + srv.RootAccess + `, secret_access_key_env: VAULT_SECRET}
databases:
` + databases
	return loadConfig(t, dir, yaml)
}

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
	c := vaultSite(t, srv, dir, "plain", `  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02], immutable_copy: vault01}
  - {name: HR, instance: sql01, backup_servers: [bak01, bak02]}
`)
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

// Every verified set older than immutable_within (24h by default) that
// the backup servers still keep must have its copy recorded on the
// database's immutable_copy, locked past the set's retention; else the
// database is RED with a reason naming the set and why. A younger set
// without a copy is not (yet) news, but how long it has waited is known.
func TestStatusRedForAVerifiedSetWithoutItsImmutableCopy(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	if err := srv.CreateBucket(ctx, "worm", true); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := vaultSite(t, srv, dir, "worm", "  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02], immutable_copy: vault01}\n")
	bak01 := filepath.Join(dir, "bak01")
	copied := func(m *catalog.Manifest, until time.Time) *catalog.Manifest {
		m.Immutable = &catalog.ImmutableCopy{Server: "vault01", State: catalog.ImmutableCopied, At: m.VerifiedAt().Add(time.Minute), Mode: "COMPLIANCE",
			RetainUntil: until, Objects: []catalog.ImmutableObject{{Name: "a", VersionID: "v", SHA256: strings.Repeat("0", 64)}}}
		return m
	}
	// Set 2, two days old, copied and locked for (keep_verified 2 + 1) x rpo 26h.
	s2 := verified(t, "sql01", "Sales", 2, now.Add(-50*time.Hour), time.Minute, time.Minute)
	save(t, copied(s2, s2.VerifiedAt().Add(78*time.Hour)), bak01)
	// Set 4, two hours old, not copied yet: younger than immutable_within.
	s4 := verified(t, "sql01", "Sales", 4, now.Add(-2*time.Hour), time.Minute, time.Minute)
	save(t, s4, bak01)

	for _, tc := range []struct {
		name string
		rec  func(m *catalog.Manifest)
		want string // "" for not red
	}{
		{"failed", func(m *catalog.Manifest) {
			m.Immutable = &catalog.ImmutableCopy{Server: "vault01", State: catalog.ImmutableFailed, At: m.VerifiedAt().Add(time.Minute),
				Error: "object store vault01: dial tcp 10.0.0.9:9000: connection refused"}
		}, "failed at 2026-11-29T04:"},
		{"never made", func(m *catalog.Manifest) { m.Immutable = nil }, "never made"},
		{"store not immutable", func(m *catalog.Manifest) {
			m.Immutable = &catalog.ImmutableCopy{Server: "vault01", State: catalog.ImmutableNotImmutable, At: m.VerifiedAt().Add(time.Minute),
				Error: "vault01 is not immutable: delete a locked version"}
		}, "store found not immutable"},
		{"lock ends before retention", func(m *catalog.Manifest) { copied(m, m.VerifiedAt().Add(26*time.Hour)) }, "lock ends"},
		{"copied elsewhere", func(m *catalog.Manifest) { copied(m, m.VerifiedAt().Add(78*time.Hour)).Immutable.Server = "vault02" }, "vault02"},
		{"copied and locked", func(m *catalog.Manifest) { copied(m, m.VerifiedAt().Add(78*time.Hour)) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Set 3, 30 hours old: older than immutable_within.
			s3 := verified(t, "sql01", "Sales", 3, now.Add(-30*time.Hour), time.Minute, time.Minute)
			tc.rec(s3)
			save(t, s3, bak01)
			d := find(t, Load(ctx, c, nil, now).Databases, "sql01", "Sales")
			if d.ImmutableWithin != Duration(24*time.Hour) {
				t.Errorf("immutable_within %s, want the default 24h", d.ImmutableWithin)
			}
			var about []string
			for _, r := range d.Reasons {
				if strings.Contains(r, "immutable copy") {
					about = append(about, r)
				}
			}
			// The oldest set waiting for its copy, of any age: set 3, or,
			// once it is copied, set 4 (younger than immutable_within).
			waiting := s3.VerifiedAt()
			if tc.want == "" {
				waiting = s4.VerifiedAt()
			}
			if !d.ImmutableWaitingSince.Equal(waiting) {
				t.Errorf("immutable_waiting_since %s, want %s", d.ImmutableWaitingSince, waiting)
			}
			if tc.want == "" {
				if d.OutOfObjectives || len(d.ImmutableMissing) != 0 {
					t.Fatalf("RED with set 3 copied and locked: %q", d.Reasons)
				}
				return
			}
			if !d.OutOfObjectives || len(about) != 1 || !strings.Contains(about[0], "set 3 ") || !strings.Contains(about[0], tc.want) ||
				!slices.Equal(d.ImmutableMissing, []int64{3}) {
				t.Fatalf("out %v, reasons %q; want RED for the immutable copy of set 3 only: %q", d.OutOfObjectives, d.Reasons, tc.want)
			}
			t.Logf("reason: %s", about[0])
		})
	}
}
