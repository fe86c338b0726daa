package preflight

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/storage"
)

// drillFromImmutable makes Shop drill from its immutable copy on
// sqlverify, staging on bak02. The object store itself is not configured:
// its checks are another test's.
func drillFromImmutable(cfg *config.Config) {
	db := &cfg.Databases[0]
	db.ImmutableCopy = "vault01"
	db.Drill = config.Drill{Every: 24 * time.Hour, From: config.DrillFromImmutable, Staging: "bak02"}
}

// stagingCheck is the check of the drill instance sqlverify reading the
// staging server bak02.
func stagingCheck(t *testing.T, r *Report, text string) Check {
	t.Helper()
	return findIn(t, r, KindInstance, "sqlverify", "reads drill staging on bak02")
}

// A drill from the immutable copy stages the set on a backup server for
// the drill instance to restore: preflight has the worker write a probe
// there and the drill instance read it through its path, and names the
// server, the instance and the fix when either cannot.
func TestDrillStagingReachable(t *testing.T) {
	_, _, cfg := versionSite(t, nil, nil)
	drillFromImmutable(cfg)
	r, text := runPreflight(t, cfg, "")
	if c := stagingCheck(t, r, text); c.Status != OK || !strings.Contains(c.Detail, `\\bak02\backup`) || !strings.Contains(c.For, "Shop") {
		t.Errorf("staging reachable: %+v\n%s", c, text)
	}

	// The worker may not write there.
	dir, st := localStorage(t)
	denied := &storage.Error{Op: "create", Location: dir, Kind: storage.ErrPermission}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Run(ctx, Options{Config: cfg, CompressionFactor: 4, OpenStorage: opener(&faulty{Storage: st, create: denied})})
	if err != nil {
		t.Fatal(err)
	}
	if c := stagingCheck(t, r, ""); c.Status != Missing || !strings.Contains(c.Detail, "the worker cannot write") ||
		!strings.Contains(c.Fix, "bak02") || !strings.Contains(c.Fix, "drill.staging") {
		t.Errorf("staging not writable by the worker: %+v", c)
	}
}

// The drill instance without a path to the staging server's share: the
// probe is not found there; MISSING, naming the path and the fix.
func TestDrillStagingNotReadableByTheDrillInstance(t *testing.T) {
	_, _, cfg := versionSite(t, nil, func(c *sqlsim.Config) { delete(c.Shares, `\\bak02\backup`) })
	drillFromImmutable(cfg)
	r, text := runPreflight(t, cfg, "")
	c := stagingCheck(t, r, text)
	if c.Status != Missing || !strings.Contains(c.Detail, `\\bak02\backup`) || !strings.Contains(c.Fix, "sqlverify") ||
		!strings.Contains(c.Fix, "drill.staging") || r.OK {
		t.Errorf("staging not readable by the drill instance: %+v\n%s", c, text)
	}
}
