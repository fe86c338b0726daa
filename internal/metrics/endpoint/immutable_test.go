package endpoint

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// vaultServer is a kind: s3 backup server vault01 (YAML list item) whose
// endpoint answers nothing: the gauges come from the manifests.
func vaultServer(t *testing.T) string {
	t.Helper()
	t.Setenv("VAULT01_SECRET", "not-used")
	return `  - name: vault01
    kind: s3
    s3: {endpoint: 'http://` + closedPort(t) + `', bucket: worm, access_key_id: backupworker, secret_access_key_env: VAULT01_SECRET}
`
}

// A database with immutable_copy exports, with its store as server, how
// long the oldest verified set still kept has waited for its copy (as
// starter status judges it: a set copied and locked long enough does
// not count) and its immutable_within; 0 once every set has its copy. A
// database without immutable_copy exports neither.
func TestImmutableCopyMissingGauges(t *testing.T) {
	dir := t.TempDir()
	bak01 := filepath.Join(dir, "bak01")
	cfg := siteConfigWith(t, dir, vaultServer(t), `  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
    immutable_copy: vault01
  - name: HR
    instance: sql01
    backup_servers: [bak01, bak02]
`)
	now := time.Now()
	copied := func(m *catalog.Manifest) *catalog.Manifest {
		m.Immutable = &catalog.ImmutableCopy{Server: "vault01", State: catalog.ImmutableCopied, At: m.VerifiedAt().Add(time.Minute),
			Mode: "COMPLIANCE", RetainUntil: now.Add(200 * time.Hour), Objects: []catalog.ImmutableObject{{Name: "a", VersionID: "v", SHA256: strings.Repeat("0", 64)}}}
		return m
	}
	// Set 3, verified 30 hours ago, never copied; set 4, 2 hours ago, copied.
	s3 := verifiedSet(t, "sql01", "Sales", 3, now.Add(-30*time.Hour), time.Minute, time.Minute)
	save(t, s3, bak01)
	save(t, copied(verifiedSet(t, "sql01", "Sales", 4, now.Add(-2*time.Hour), time.Minute, time.Minute)), bak01)
	save(t, verifiedSet(t, "sql01", "HR", 1, now.Add(-30*time.Hour), time.Minute, time.Minute), bak01)

	e := newEndpoint(t)
	e.Product().Refresh(context.Background(), cfg, nil)
	f := scrapeHandler(t, e)
	sales := labels("instance", "sql01", "database", "Sales", "server", "vault01")
	want := time.Since(s3.VerifiedAt()).Seconds()
	if v := f.value(t, ImmutableMissingAge, sales); math.Abs(v-want) > 5 {
		t.Errorf("%s = %v, want about %v (set 3 verified %s)", ImmutableMissingAge, v, want, s3.VerifiedAt())
	}
	if v := f.value(t, ImmutableWithin, sales); v != (24 * time.Hour).Seconds() {
		t.Errorf("%s = %v, want the default immutable_within 24h", ImmutableWithin, v)
	}
	for _, name := range []string{ImmutableMissingAge, ImmutableWithin} {
		if ms := f.find(name, labels("instance", "sql01", "database", "HR")); len(ms) != 0 {
			t.Errorf("HR has no immutable_copy, yet %s: %v", name, ms)
		}
	}

	// Set 3's copy recorded: nothing waits.
	save(t, copied(s3), bak01)
	e.Product().Refresh(context.Background(), cfg, nil)
	if v := scrapeHandler(t, e).value(t, ImmutableMissingAge, sales); v != 0 {
		t.Errorf("every set copied: %s = %v, want 0", ImmutableMissingAge, v)
	}
}
