package cycle

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// newKeyedFixture is the cycle fixture with a manifest key configured
// (manifest_keys): what the activities write is signed.
func newKeyedFixture(t *testing.T, extra string) *cycleFixture {
	t.Helper()
	return newCycleFixtureOf(t, sitetest.Options{Database: "Sales", Extra: extra, ManifestKeys: []string{"k1"}})
}

// plant writes m on server as anyone who can write the share would:
// valid, plausible and unsigned (or, with sig, carrying a signature of
// nobody's key).
func (f *cycleFixture) plant(server string, m *catalog.Manifest, sig *catalog.Signature) {
	f.t.Helper()
	data, err := catalog.Encode(m)
	if err != nil {
		f.t.Fatal(err)
	}
	if sig != nil {
		var raw map[string]any
		if err := json.Unmarshal(data, &raw); err != nil {
			f.t.Fatal(err)
		}
		raw["schema_version"], raw["signature"] = catalog.SignedSchemaVersion, sig
		if data, err = json.MarshalIndent(raw, "", "  "); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.dirs[server], m.FileName()), data, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// forgedVerified is a fresh, plausible "verified" set of Sales: header
// with a GUID, copied to both servers, measured restore and CHECKDB of a
// terabyte in minutes (the timeouts they would make are short), taken an
// hour ago.
func (f *cycleFixture) forgedVerified(seq int64, primary string) *catalog.Manifest {
	f.t.Helper()
	taken := f.now.Add(-time.Hour)
	m := catalog.New("sql01", "Sales", seq, taken.Add(-time.Hour))
	m.WorkflowID, m.RunID = testWorkflowID, testRunID
	m.PrimaryServer, m.Servers = primary, []string{"bak01", "bak02"}
	m.Options = catalog.Options{Compression: true, Checksum: true, CopyOnly: true, Stripes: 2}
	m.Stripes = []catalog.Stripe{{Name: m.StripeFileName(1, 2), Size: 256 << 30}, {Name: m.StripeFileName(2, 2), Size: 256 << 30}}
	m.Header = &catalog.Header{BackupSetGUID: "6f1d2c3b-4a59-4e8f-9b7a-0c1d2e3f4a5b", FirstLSN: "4100000001200001",
		LastLSN: "4100000003600001", BackupStart: taken.Add(-time.Hour), BackupFinish: taken, BackupSize: 1 << 40,
		CompressedBackupSize: 512 << 30, DatabaseName: "Sales", HasBackupChecksums: true}
	m.Header.SetUTCOffset(0)
	at := taken
	for _, s := range []catalog.Step{catalog.StepBackup, catalog.StepCopy, catalog.StepRestore, catalog.StepCheckDB, catalog.StepSanity} {
		if err := m.SetTiming(s, at, at.Add(2*time.Minute)); err != nil {
			f.t.Fatal(err)
		}
		at = at.Add(2 * time.Minute)
	}
	if err := activities.Advance(m, catalog.StateVerified, at); err != nil {
		f.t.Fatal(err)
	}
	return m
}

func (f *cycleFixture) plan() activities.Plan {
	f.t.Helper()
	v, err := f.env.ExecuteActivity(f.acts.PlanCycle, activities.PlanInput{Database: "Sales"})
	if err != nil {
		f.t.Fatal(err)
	}
	var p activities.Plan
	if err := v.Get(&p); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// A planted fresh "verified" manifest (unsigned, or with a signature of no
// configured key) steers nothing: the rotation still follows the newest
// real set, the timeouts ignore its measured times, and retention keeps
// the real newest verified set (and the planted files too).
func TestForgedVerifiedManifestSteersNeitherPlanNorRetention(t *testing.T) {
	f := newKeyedFixture(t, "    retention:\n      keep_verified: 1\n      delete_failed_after: 1h\n")
	f.writeSet("bak01", "Sales", 3, catalog.StateVerified, "bak01", 1)
	f.writeSet("bak01", "Sales", 5, catalog.StateVerified, "bak01", 1) // the real newest verified set
	before := f.plan()
	if before.LastServer != "bak01" || before.Rotation[0] != "bak02" {
		t.Fatalf("plan of the real sets: last %s, rotation %v; want bak01, then bak02", before.LastServer, before.Rotation)
	}
	// Planted: set 9 on bak02 (unsigned), set 7 on bak01 (a signature of
	// no configured key), both verified after set 5.
	f.plant("bak02", f.forgedVerified(9, "bak02"), nil)
	f.plant("bak01", f.forgedVerified(7, "bak02"), &catalog.Signature{KeyID: "k1", HMACSHA256: strings.Repeat("ab", 32)})
	after := f.plan()
	if after.LastServer != "bak01" || after.Rotation[0] != "bak02" {
		t.Errorf("plan with planted sets: last %s, rotation %v; want bak01, then bak02 as before", after.LastServer, after.Rotation)
	}
	if !reflect.DeepEqual(after.Limits, before.Limits) || after.Budget.Rates.Restore.Measured() {
		t.Errorf("planted timings changed the plan's timeouts: %+v, rates %+v; want %+v as before", after.Limits, after.Budget.Rates, before.Limits)
	}

	v, err := f.env.ExecuteActivity(f.acts.ApplyRetention, activities.RetentionInput{Database: "Sales", Servers: []string{"bak01", "bak02"}})
	if err != nil {
		t.Fatal(err)
	}
	var out activities.RetentionOutput
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	if len(out.Deleted) != 1 || out.Deleted[0].Sequence != 3 {
		t.Errorf("retention deleted %+v, want set 3 only (superseded by set 5)", out.Deleted)
	}
	for _, name := range []string{tsql.ManifestFileName("sql01", "Sales", 5), tsql.StripeFileName("sql01", "Sales", 5, 1, 2),
		tsql.ManifestFileName("sql01", "Sales", 7)} {
		if _, err := os.Stat(filepath.Join(f.dirs["bak01"], name)); err != nil {
			t.Errorf("bak01 lost %s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(f.dirs["bak02"], tsql.ManifestFileName("sql01", "Sales", 9))); err != nil {
		t.Errorf("bak02 lost the planted manifest: %v", err)
	}
}

// A planted claim that copies a running cycle's own workflow and run ids
// (they are on the share in every claim) is still no run's: unsigned, it
// is neither taken for the cycle's claim, nor cancelled, nor resumed.
func TestUnsignedManifestIsNoRunsEvenWithItsIDs(t *testing.T) {
	f := newKeyedFixture(t, "")
	planted := catalog.NewPending("sql01", "Sales", 11, f.now.Add(-time.Hour), testWorkflowID, testRunID)
	planted.PrimaryServer = "bak01"
	f.plant("bak01", planted, nil)
	f.checkNobodysClaim(11, "not authenticated")
	// A copied-but-unsigned set is not resumed either: its stripes and
	// hashes are anybody's.
	forged := f.forgedVerified(12, "bak01")
	forged.State, forged.History = catalog.StateCopied, forged.History[:2]
	forged.Timings = nil
	f.plant("bak01", forged, nil)
	_, err := f.env.ExecuteActivity(f.acts.ResumeSet, ResumeInput{Database: "Sales", Sequence: 12, Servers: []string{"bak01", "bak02"}})
	if activities.ErrorType(err) != activities.ErrInvalidConfig || !strings.Contains(err.Error(), "not authenticated") {
		t.Errorf("resuming an unsigned set: %v, want %s saying its manifest is not authenticated", err, activities.ErrInvalidConfig)
	}
}

// A sequence file nobody signed (planted, or written before manifest keys
// were configured) is reported; its number counts as used, as a file name
// would, and the next number recorded replaces it with a signed record.
func TestForgedSequenceFileIsReportedAndReplaced(t *testing.T) {
	f := newKeyedFixture(t, "")
	core, logs := observer.New(zapcore.WarnLevel)
	f.acts.Log = zap.New(core)
	name := tsql.SequenceFileName("sql01", "Sales")
	forged := `{"instance": "sql01", "database": "Sales", "sequence": 500, "updated_at": "2026-11-29T00:00:00Z"}`
	if err := os.WriteFile(filepath.Join(f.dirs["bak01"], name), []byte(forged), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := f.cfg.Database("sql01", "Sales")
	if err != nil {
		t.Fatal(err)
	}
	f.env.RegisterActivityWithOptions(func(ctx context.Context) (int64, error) {
		log := activities.Logger(f.acts.Activities, ctx)
		highest, _ := activities.HighestSequence(f.acts.Activities, ctx, db, log)
		activities.RecordSequence(f.acts.Activities, ctx, db, highest+1, log)
		return highest, nil
	}, activity.RegisterOptions{Name: "allocateFromServers"})
	v, err := f.env.ExecuteActivity("allocateFromServers")
	if err != nil {
		t.Fatal(err)
	}
	var highest int64
	if err := v.Get(&highest); err != nil || highest != 500 {
		t.Errorf("highest sequence %d, %v; want the unsigned record's 500 counted as used", highest, err)
	}
	if warned := logs.FilterMessageSnippet("sequence file not authenticated").FilterField(zap.String("server", "bak01")); warned.Len() != 1 {
		t.Errorf("the unsigned sequence file of bak01 was not reported: %v", logs.All())
	}
	keys, err := f.cfg.ManifestKeyRing()
	if err != nil {
		t.Fatal(err)
	}
	for _, server := range []string{"bak01", "bak02"} {
		st, err := local.Open(context.Background(), f.dirs[server])
		if err != nil {
			t.Fatal(err)
		}
		n, unauth, err := activities.ReadSequenceRecord(context.Background(), st, db, keys)
		st.Close()
		if err != nil || n != 501 || len(unauth) != 0 {
			t.Errorf("%s: sequence file holds %d (unauthenticated %v, %v); want 501, signed", server, n, unauth, err)
		}
	}
}
