package cycle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// cycleFixture is the emulated site without SQL Server (package sitetest,
// NoSQL): two backup servers in local directories (bak01, bak02: each the
// other's copy target) and the activities wired to it.
type cycleFixture struct {
	t    *testing.T
	dirs map[string]string
	cfg  *config.Config
	acts *Activities
	env  *testsuite.TestActivityEnvironment
	now  time.Time
}

func newCycleFixture(t *testing.T, db, extra string) *cycleFixture {
	t.Helper()
	return newCycleFixtureOf(t, sitetest.Options{Database: db, Extra: extra})
}

func newCycleFixtureOf(t *testing.T, o sitetest.Options) *cycleFixture {
	t.Helper()
	o.NoSQL = true
	site := sitetest.New(t, o)
	// No instance listens at the configured address: the plan finds the
	// source unreachable (its name unresolved) and plans from the
	// configuration, as it does while a source is down.
	if os.Getenv(sitetest.PasswordEnv) != sitetest.Password {
		t.Setenv(sitetest.PasswordEnv, sitetest.Password)
	}
	// The fixture's clock starts at the real time: an object store locks
	// copies until a date computed from it, which must be in its future.
	f := &cycleFixture{t: t, dirs: site.Dirs, cfg: site.Config, now: time.Now().UTC().Truncate(time.Second)}
	f.acts = New(activities.New(nil))
	f.acts.Cycle = activities.CycleDeps{Config: f.cfg, Now: func() time.Time { return f.now }, Poll: 10 * time.Millisecond}
	var ts testsuite.WorkflowTestSuite
	f.env = ts.NewTestActivityEnvironment()
	f.env.RegisterActivity(f.acts)
	return f
}

// The run the test environment's activities run for
// (testsuite.TestActivityEnvironment's workflow execution).
const testWorkflowID, testRunID = "default-test-workflow-id", "default-test-run-id"

// writeSet puts a set's stripes (random-ish content) and its manifest on a
// server, as BACKUP + WriteManifest would.
func (f *cycleFixture) writeSet(server, db string, seq int64, state catalog.State, primary string, size int) *catalog.Manifest {
	f.t.Helper()
	m := catalog.New("sql01", db, seq, f.now.Add(-time.Duration(100-seq)*time.Hour))
	// The run of the test environment's activities owns it.
	m.WorkflowID, m.RunID = testWorkflowID, testRunID
	m.PrimaryServer = primary
	m.Servers = []string{primary}
	for i := 1; i <= 2; i++ {
		name := tsql.StripeFileName("sql01", db, seq, i, 2)
		data := bytes.Repeat([]byte(fmt.Sprintf("%s-%d-%d|", db, seq, i)), size)
		if err := os.WriteFile(filepath.Join(f.dirs[server], name), data, 0o644); err != nil {
			f.t.Fatal(err)
		}
		m.Stripes = append(m.Stripes, catalog.Stripe{Name: name, Size: int64(len(data))})
	}
	m.Options.Stripes = 2
	at := m.CreatedAt
	if state != catalog.StateWritten && state != catalog.StateFailed {
		if err := activities.Advance(m, state, at); err != nil {
			f.t.Fatal(err)
		}
	}
	if state == catalog.StateFailed {
		if err := m.Fail(catalog.StepBackup, catalog.EvidenceBackupIncomplete, "host lost", at); err != nil {
			f.t.Fatal(err)
		}
	}
	f.save(server, m)
	return m
}

func (f *cycleFixture) save(server string, m *catalog.Manifest) {
	f.t.Helper()
	st, err := local.Open(context.Background(), f.dirs[server])
	if err != nil {
		f.t.Fatal(err)
	}
	if err := catalog.Save(context.Background(), catalog.StorageFS{Storage: st}, f.keys(), m); err != nil {
		f.t.Fatal(err)
	}
}

// keys are the fixture's manifest keys (nil without manifest_keys).
func (f *cycleFixture) keys() *catalog.Keys {
	f.t.Helper()
	keys, err := f.cfg.ManifestKeyRing()
	if err != nil {
		f.t.Fatal(err)
	}
	return keys
}

func (f *cycleFixture) load(server, db string, seq int64) *catalog.Manifest {
	f.t.Helper()
	st, err := local.Open(context.Background(), f.dirs[server])
	if err != nil {
		f.t.Fatal(err)
	}
	m, err := catalog.Load(context.Background(), catalog.StorageFS{Storage: st}, f.keys(), catalog.Of("sql01", db), seq)
	if err != nil {
		f.t.Fatalf("manifest of seq %d on %s: %v", seq, server, err)
	}
	return m
}

func TestPlanCycleRoundRobinFromManifests(t *testing.T) {
	f := newCycleFixture(t, "Sales", "")
	plan := func(in activities.PlanInput) activities.Plan {
		t.Helper()
		v, err := f.env.ExecuteActivity(f.acts.PlanCycle, in)
		if err != nil {
			t.Fatalf("PlanCycle(%+v): %v", in, err)
		}
		var p activities.Plan
		if err := v.Get(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := plan(activities.PlanInput{Database: "Sales"})
	if p.Rotation[0] != "bak01" || p.LastServerSource != "none" || p.Remote != "bak02" || p.Stripes != 2 ||
		p.VerifyInstance != "verify01" || p.Instance != "sql01" {
		t.Errorf("first plan %+v, want bak01 first (nothing written yet), copy to bak02", p)
	}
	// The newest set (seq 8, failed) was written to bak01: the next goes to bak02.
	f.writeSet("bak02", "Sales", 7, catalog.StateVerified, "bak02", 1)
	f.writeSet("bak01", "Sales", 8, catalog.StateFailed, "bak01", 1)
	f.writeSet("bak01", "Other", 9, catalog.StateVerified, "bak01", 1) // another database does not count
	p = plan(activities.PlanInput{Database: "Sales"})
	if p.Rotation[0] != "bak02" || p.Rotation[1] != "bak01" || p.LastServer != "bak01" || p.LastServerSource != "manifests" ||
		p.Remote != "bak01" || p.Remotes["bak01"] != "bak02" {
		t.Errorf("plan after bak01 %+v, want bak02 first, copied to bak01", p)
	}
	// The caller's knowledge wins.
	p = plan(activities.PlanInput{Database: "Sales", LastServer: "bak02"})
	if p.Rotation[0] != "bak01" || p.LastServerSource != "caller" {
		t.Errorf("plan with caller's last server bak02: %+v, want bak01", p)
	}
}

func TestPlanCycleRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct{ name, typ, want string }{
		{"memory guard", activities.ErrInsufficientMemory, "memory budget"},
		{"unknown database", activities.ErrInvalidConfig, "not configured"},
		{"unbalanced stripes", activities.ErrInvalidConfig, "multiple of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCycleFixture(t, "Sales", "")
			db := "Sales"
			switch tc.name {
			case "unknown database":
				db = "Nope"
			case "memory guard":
				// config.Parse refuses this too; the plan re-checks what it runs.
				d := &f.cfg.Databases[0]
				d.BufferCount, d.MaxTransferSize, d.MemoryBudget = 4096, 4<<20, 1<<30
			case "unbalanced stripes":
				b := &f.cfg.BackupServers[0]
				b.UNCPaths = append(b.UNCPaths, "/second/nic")
				f.cfg.Databases[0].Stripes = 3
			}
			_, err := f.env.ExecuteActivity(f.acts.PlanCycle, activities.PlanInput{Database: db})
			if activities.ErrorType(err) != tc.typ || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %s mentioning %q", err, tc.typ, tc.want)
			}
		})
	}
	unwired := New(&activities.Activities{})
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(unwired)
	if _, err := env.ExecuteActivity(unwired.PlanCycle, activities.PlanInput{Database: "Sales"}); activities.ErrorType(err) != activities.ErrInvalidConfig ||
		!strings.Contains(err.Error(), "--config") {
		t.Errorf("unwired worker: %v, want InvalidConfig telling how to configure it", err)
	}
}

func TestCopyToRemoteCopiesStripesThenManifest(t *testing.T) {
	db := "Sales]; DROP DATABASE x--"
	f := newCycleFixture(t, db, "")
	m := f.writeSet("bak01", db, 5, catalog.StateWritten, "bak01", 50_000)
	v, err := f.env.ExecuteActivity(f.acts.CopyToRemote, activities.CopyInput{Database: db, Sequence: 5, From: "bak01", To: "bak02"})
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	var out activities.CopyOutput
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, s := range m.Stripes {
		a, _ := os.ReadFile(filepath.Join(f.dirs["bak01"], s.Name))
		b, err := os.ReadFile(filepath.Join(f.dirs["bak02"], s.Name))
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("stripe %s not copied intact: %v", s.Name, err)
		}
		total += s.Size
	}
	if out.Bytes != total || out.Sent != total || out.Resumed != 0 {
		t.Errorf("copy output %+v, want %d bytes sent once", out, total)
	}
	for _, server := range []string{"bak01", "bak02"} {
		got := f.load(server, db, 5)
		if got.State != catalog.StateCopied || len(got.Servers) != 2 || got.Servers[1] != "bak02" {
			t.Errorf("manifest on %s: state %s servers %v, want copied on bak01+bak02", server, got.State, got.Servers)
		}
		for _, s := range got.Stripes {
			data, _ := os.ReadFile(filepath.Join(f.dirs["bak02"], s.Name))
			sum := sha256.Sum256(data)
			if s.SHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("manifest on %s: %s sha256 %q does not match the copy", server, s.Name, s.SHA256)
			}
		}
	}
	// A retry after success changes nothing and sends nothing.
	v, err = f.env.ExecuteActivity(f.acts.CopyToRemote, activities.CopyInput{Database: db, Sequence: 5, From: "bak01", To: "bak02"})
	if err != nil {
		t.Fatalf("second copy: %v", err)
	}
	if err := v.Get(&out); err != nil || out.Sent != 0 {
		t.Errorf("second copy sent %d bytes (%v), want 0", out.Sent, err)
	}
}

// Two copies into one backup server at once share its bandwidth_limit:
// together they write at most the limit, measured over the copies (a
// limiter per copy let N copies use N times it).
func TestCopyToRemoteSharesTheServersBandwidthLimit(t *testing.T) {
	const rate = 2 << 20
	f := newCycleFixtureOf(t, sitetest.Options{Database: "Sales", BandwidthLimit: map[string]string{"bak02": "2MiB"}})
	// Two sets of two 1.5 MB stripes.
	f.writeSet("bak01", "Sales", 5, catalog.StateWritten, "bak01", 150_000)
	f.writeSet("bak01", "Sales", 6, catalog.StateWritten, "bak01", 150_000)
	var wg sync.WaitGroup
	var sent [2]int64
	start := time.Now()
	for i, seq := range []int64{5, 6} {
		// An environment per copy: they run at once on one worker's Activities.
		var ts testsuite.WorkflowTestSuite
		env := ts.NewTestActivityEnvironment()
		env.RegisterActivity(f.acts)
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := env.ExecuteActivity(f.acts.CopyToRemote, activities.CopyInput{Database: "Sales", Sequence: seq, From: "bak01", To: "bak02"})
			var out activities.CopyOutput
			if err == nil {
				err = v.Get(&out)
			}
			if err != nil {
				t.Errorf("copy of seq %d: %v", seq, err)
			}
			sent[i] = out.Sent
		}()
	}
	wg.Wait()
	took := time.Since(start).Seconds()
	total := sent[0] + sent[1]
	got := float64(total) / took
	// 6 MB less the 0.5 MiB burst at 2 MiB/s: 2.6 s; with a limiter per
	// copy, half that.
	want := float64(total-rate/4) / rate
	if total != 6_000_000 || got > rate*1.2 || took < want*0.9 {
		t.Fatalf("two copies into bak02 (bandwidth_limit 2MiB) sent %d bytes in %.2fs: %.2f MiB/s, want 6000000 bytes in about %.1fs",
			total, took, got/(1<<20), want)
	}
	t.Logf("two copies sharing bak02's 2 MiB/s: %.2f MiB/s over %.2fs", got/(1<<20), took)
}

func TestCopyToRemoteFromAFailedOrMissingSet(t *testing.T) {
	f := newCycleFixture(t, "Sales", "")
	_, err := f.env.ExecuteActivity(f.acts.CopyToRemote, activities.CopyInput{Database: "Sales", Sequence: 99, From: "bak01", To: "bak02"})
	if activities.ErrorType(err) != activities.ErrCorruptBackup || !strings.Contains(err.Error(), tsql.ManifestFileName("sql01", "Sales", 99)) {
		t.Errorf("copy of a set without manifest: %v, want CorruptBackup naming the manifest", err)
	}
}

func TestMarkFailedRecordsPartialSetAndNeverUnverifies(t *testing.T) {
	f := newCycleFixture(t, "Sales", "")
	// A BACKUP died at 40 %: two partial stripes, no manifest.
	for i := 1; i <= 2; i++ {
		if err := os.WriteFile(filepath.Join(f.dirs["bak01"], tsql.StripeFileName("sql01", "Sales", 7, i, 2)), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.writeSet("bak02", "Sales", 6, catalog.StateVerified, "bak02", 1)
	in := activities.MarkInput{Database: "Sales", Sequence: 7, Servers: []string{"bak01"}, Step: activities.StepBackup,
		ErrorType: activities.ErrSQLHostUnreachable, Evidence: string(catalog.EvidenceBackupIncomplete), Reason: "connection lost (at 40 %)"}
	if _, err := f.env.ExecuteActivity(f.acts.MarkFailed, in); err != nil {
		t.Fatal(err)
	}
	m := f.load("bak01", "Sales", 7)
	if m.State != catalog.StateFailed || m.Failure == nil || !strings.Contains(m.Failure.Reason, "40 %") ||
		!strings.Contains(m.Failure.Reason, activities.ErrSQLHostUnreachable) || len(m.Stripes) != 2 || m.PrimaryServer != "bak01" {
		t.Errorf("failed manifest %+v (failure %+v), want failed at backup with the reason and both stripes", m, m.Failure)
	}
	// A verified set stays verified.
	in.Sequence, in.Servers = 6, []string{"bak02"}
	if _, err := f.env.ExecuteActivity(f.acts.MarkFailed, in); err != nil {
		t.Fatal(err)
	}
	if m := f.load("bak02", "Sales", 6); m.State != catalog.StateVerified {
		t.Errorf("verified set became %s", m.State)
	}
}

func TestMarkVerifiedCatchesUpEveryServer(t *testing.T) {
	f := newCycleFixture(t, "Sales", "")
	m := f.writeSet("bak01", "Sales", 5, catalog.StateCopied, "bak01", 1)
	m.Servers = []string{"bak01", "bak02"} // copied to bak02, as CopyToRemote records it
	f.save("bak01", m)
	// The remote missed "restored"; both must end verified.
	m2 := *m
	if err := activities.Advance(&m2, catalog.StateChecked, f.now); err != nil {
		t.Fatal(err)
	}
	f.save("bak02", &m2)
	in := activities.MarkInput{Database: "Sales", Sequence: 5, Servers: []string{"bak01", "bak02"}, Timings: activities.Timings{Sanity: time.Second}}
	// Without CheckDB's proof that this set's own backup was restored,
	// nothing is marked verified.
	if _, err := f.env.ExecuteActivity(f.acts.MarkVerified, in); activities.ErrorType(err) != activities.ErrRestoreMismatch {
		t.Fatalf("MarkVerified without a restore proof: %v, want %s", err, activities.ErrRestoreMismatch)
	}
	m2.Header = &catalog.Header{BackupSetGUID: "0C7E3F6A-1111-4222-8333-944455556666", FirstLSN: "1", LastLSN: "2"}
	m2.Proof = &catalog.Proof{VerifyInstance: "verify01", VerifyDatabase: "Sales_verify", RestoreHistoryID: 3,
		BackupSetGUID: "0c7e3f6a-1111-4222-8333-944455556666"}
	f.save("bak02", &m2)
	// Nor without SanityChecks' proof that the sanity checks held on that
	// restore: one of an earlier restore does not count.
	if _, err := f.env.ExecuteActivity(f.acts.MarkVerified, in); activities.ErrorType(err) != activities.ErrNoSanityProof {
		t.Fatalf("MarkVerified without a sanity proof: %v, want %s", err, activities.ErrNoSanityProof)
	}
	db, _ := f.cfg.Database("", "Sales")
	var names []string
	for _, c := range db.SanityChecks {
		names = append(names, c.Name)
	}
	m2.SanityProof = &catalog.SanityProof{VerifyInstance: "verify01", VerifyDatabase: "Sales_verify", RestoreHistoryID: 2,
		BackupSetGUID: m2.Proof.BackupSetGUID, Checks: names, RanAs: "backupcycle_sanity", CheckedAt: f.now, Passed: true}
	f.save("bak02", &m2)
	if _, err := f.env.ExecuteActivity(f.acts.MarkVerified, in); activities.ErrorType(err) != activities.ErrNoSanityProof ||
		!strings.Contains(err.Error(), "another restore") {
		t.Fatalf("MarkVerified with the sanity proof of another restore: %v, want %s", err, activities.ErrNoSanityProof)
	}
	m2.SanityProof.RestoreHistoryID = 3
	f.save("bak02", &m2)
	if _, err := f.env.ExecuteActivity(f.acts.MarkVerified, in); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"bak01", "bak02"} {
		if got := f.load(s, "Sales", 5); got.State != catalog.StateVerified || got.Timings[catalog.StepSanity].DurationSeconds != 1 {
			t.Errorf("%s: state %s timings %v, want verified with the sanity timing", s, got.State, got.Timings)
		}
	}
}

func TestApplyRetentionKeepsNewestVerifiedAndProtected(t *testing.T) {
	f := newCycleFixture(t, "Sales", "    retention:\n      keep_verified: 1\n      delete_failed_after: 1h\n")
	f.writeSet("bak01", "Sales", 1, catalog.StateVerified, "bak01", 1)
	f.writeSet("bak01", "Sales", 3, catalog.StateVerified, "bak01", 1)
	f.writeSet("bak01", "Sales", 4, catalog.StateFailed, "bak01", 1)
	f.writeSet("bak01", "Other", 2, catalog.StateVerified, "bak01", 1) // never touched: another database
	// seq 5: this cycle's set, just verified on bak02.
	f.writeSet("bak02", "Sales", 5, catalog.StateVerified, "bak02", 1)
	v, err := f.env.ExecuteActivity(f.acts.ApplyRetention, activities.RetentionInput{Database: "Sales", Servers: []string{"bak01", "bak02"}, Protect: 5})
	if err != nil {
		t.Fatal(err)
	}
	var out activities.RetentionOutput
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	deleted := map[int64]string{}
	for _, d := range out.Deleted {
		deleted[d.Sequence] = d.State
	}
	if len(deleted) != 2 || deleted[1] != string(catalog.ReasonSuperseded) || deleted[4] != string(catalog.ReasonFailed) {
		t.Errorf("deleted %+v, want seq 1 (superseded) and seq 4 (failed)", out.Deleted)
	}
	left, _ := filepath.Glob(filepath.Join(f.dirs["bak01"], "*"))
	var names []string
	for _, p := range left {
		names = append(names, filepath.Base(p))
	}
	for _, want := range []string{tsql.ManifestFileName("sql01", "Sales", 3), tsql.StripeFileName("sql01", "Sales", 3, 1, 2),
		tsql.ManifestFileName("sql01", "Other", 2)} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("bak01 holds %v, missing %s", names, want)
		}
	}
	for _, gone := range []string{tsql.ManifestFileName("sql01", "Sales", 1), tsql.StripeFileName("sql01", "Sales", 4, 1, 2)} {
		if strings.Contains(strings.Join(names, " "), gone) {
			t.Errorf("bak01 still holds %s", gone)
		}
	}
	if _, err := os.Stat(filepath.Join(f.dirs["bak02"], tsql.ManifestFileName("sql01", "Sales", 5))); err != nil {
		t.Errorf("the protected set lost its manifest: %v", err)
	}
}

func TestSanityMismatch(t *testing.T) {
	finish := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	m := &catalog.Manifest{Header: &catalog.Header{BackupFinish: finish}}
	for _, tc := range []struct {
		c     config.SanityCheck
		v     any
		found bool
		want  string
	}{
		{config.SanityCheck{Expect: config.ExpectAtLeast, AtLeast: 10}, int64(12), true, ""},
		{config.SanityCheck{Expect: config.ExpectAtLeast, AtLeast: 10}, int64(3), true, "returned 3; want an integer of at least 10"},
		{config.SanityCheck{Expect: config.ExpectEquals, Equals: "1"}, true, true, ""},
		{config.SanityCheck{Expect: config.ExpectEquals, Equals: "1"}, int64(0), true, `returned "0"; want "1"`},
		{config.SanityCheck{Expect: config.ExpectMaxAge, MaxAge: time.Hour}, finish.Add(-30 * time.Minute), true, ""},
		{config.SanityCheck{Expect: config.ExpectMaxAge, MaxAge: time.Hour}, finish.Add(-3 * time.Hour), true, "3h0m0s older than the backup"},
		{config.SanityCheck{Expect: config.ExpectAtLeast, AtLeast: 1}, nil, false, "no row"},
	} {
		// What the log says (the value) and what the history says (the
		// expectation) together.
		expected, value := sanityMismatchAt(tc.c, tc.v, tc.found, m, nil, time.Now())
		got := ""
		if expected != "" {
			got = value + "; " + expected
		}
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("sanityMismatch(%+v, %v) = %q, want %q", tc.c, tc.v, got, tc.want)
		}
	}
}

// A MarkVerified cut short by an outage left the set verified on one
// server and checked on the other: the next retention catches the other
// up, so the newest verified set stands on two servers.
func TestApplyRetentionCatchesUpAHalfVerifiedSet(t *testing.T) {
	f := newCycleFixture(t, "Sales", "")
	m := f.writeSet("bak01", "Sales", 6, catalog.StateChecked, "bak01", 1)
	m.Header = &catalog.Header{BackupSetGUID: "5d1f0c2e-aaaa-4bbb-8ccc-0123456789ab", FirstLSN: "1", LastLSN: "2"}
	m.Servers = []string{"bak01", "bak02"}
	checked := *m
	f.save("bak02", &checked)
	m.Proof = &catalog.Proof{VerifyInstance: "verify01", VerifyDatabase: "Sales_verify", RestoreHistoryID: 9, BackupSetGUID: m.Header.BackupSetGUID}
	if err := m.Advance(catalog.StateVerified, f.now); err != nil {
		t.Fatal(err)
	}
	f.save("bak01", m)
	if _, err := f.env.ExecuteActivity(f.acts.ApplyRetention, activities.RetentionInput{Database: "Sales", Servers: []string{"bak01", "bak02"}, Protect: 7}); err != nil {
		t.Fatal(err)
	}
	if got := f.load("bak02", "Sales", 6); got.State != catalog.StateVerified || got.Proof == nil {
		t.Errorf("bak02's manifest: %s, proof %v; want verified with the proof", got.State, got.Proof)
	}
}

// max_age across a change of the source's clock (DST spring-forward between
// the plan and the backup's finish): a value written 40 minutes before the
// backup at UTC+1 is 40 minutes old, not 1 h 40 min, though the finish was
// reported at UTC+2. The manifest's instant is the reference.
func TestSanityMaxAgeAcrossAClockChange(t *testing.T) {
	h := &catalog.Header{BackupFinish: time.Date(2026, 3, 29, 3, 10, 0, 0, time.UTC)} // 03:10 CEST = 01:10Z
	h.SetUTCOffset(120)
	m := &catalog.Manifest{Header: h}
	before := 60                                           // the plan read the source at CET
	value := time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC) // 01:30 CET = 00:30Z
	c := config.SanityCheck{Expect: config.ExpectMaxAge, MaxAge: time.Hour}
	if _, got := sanityMismatchAt(c, value, true, m, &before, time.Now()); got != "" {
		t.Errorf("a value 40 min older than the backup: %s", got)
	}
	// Without the plan's offset the manifest's converts the value.
	if _, got := sanityMismatchAt(c, time.Date(2026, 3, 29, 2, 40, 0, 0, time.UTC), true, m, nil, time.Now()); got != "" {
		t.Errorf("a value 30 min older than the backup, no plan offset: %s", got)
	}
	if _, got := sanityMismatchAt(c, value, true, m, nil, time.Now()); !strings.Contains(got, "1h40m0s older") {
		t.Errorf("a value 1 h 40 min older on the manifest's clock: %q, want a mismatch", got)
	}
}

// Files a drill from the immutable copy staged under staging/ (copies of
// a set's stripes and manifest, under their own names) are no sets:
// retention decides from the sets beside them alone and leaves them.
func TestApplyRetentionLeavesStagedFilesAlone(t *testing.T) {
	f := newCycleFixture(t, "Sales", "    retention:\n      keep_verified: 1\n      delete_failed_after: 1h\n")
	f.writeSet("bak01", "Sales", 1, catalog.StateVerified, "bak01", 1)
	f.writeSet("bak01", "Sales", 3, catalog.StateVerified, "bak01", 1)
	staged := filepath.Join(f.dirs["bak01"], config.StagingDir, tsql.NamesOf("sql01", "Sales").Owner())
	if err := os.MkdirAll(staged, 0o755); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, seq := range []int64{1, 3} {
		for _, n := range []string{tsql.ManifestFileName("sql01", "Sales", seq), tsql.StripeFileName("sql01", "Sales", seq, 1, 2)} {
			data, err := os.ReadFile(filepath.Join(f.dirs["bak01"], n))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(staged, n), data, 0o644); err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
	}
	v, err := f.env.ExecuteActivity(f.acts.ApplyRetention, activities.RetentionInput{Database: "Sales", Servers: []string{"bak01", "bak02"}, Protect: 3})
	if err != nil {
		t.Fatal(err)
	}
	var out activities.RetentionOutput
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	if len(out.Deleted) != 1 || out.Deleted[0].Sequence != 1 {
		t.Errorf("deleted %+v, want set 1 alone (superseded by 3)", out.Deleted)
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(staged, n)); err != nil {
			t.Errorf("staged %s: %v", n, err)
		}
	}
}

// With log backups the plan says what the log proof takes on the
// verification instance: a standby copy stays beside the cycle's.
func TestPlanCycleProofSpace(t *testing.T) {
	f := newCycleFixture(t, "Sales", "    owns_backup_chain: true\n    log_backup: {every: 1m}\n    log_proof: standby\n")
	v, err := f.env.ExecuteActivity(f.acts.PlanCycle, activities.PlanInput{Database: "Sales"})
	if err != nil {
		t.Fatal(err)
	}
	var p activities.Plan
	if err := v.Get(&p); err != nil {
		t.Fatal(err)
	}
	if p.ProofSpace == nil || p.ProofSpace.Mode != "standby" || p.ProofSpace.Copies != 2 || !p.ProofSpace.Permanently {
		t.Errorf("proof space %+v, want the standby's two copies", p.ProofSpace)
	}
}
