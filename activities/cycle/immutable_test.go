package cycle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/evidence"
	"github.com/backupcycle/backupcycle/internal/s3test"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/internal/storage/s3"
)

// immutableFixture is the site of cycleFixture with an object store: a
// versitygw bucket configured as the kind: s3 backup server vault01 and
// Sales's immutable_copy, and a verified set 5 on bak01 and bak02.
type immutableFixture struct {
	*cycleFixture
	srv    *s3test.Server
	bucket string
	m      *catalog.Manifest
}

func newImmutableFixture(t *testing.T, locked bool, mode string) *immutableFixture {
	return newImmutableFixtureAllowing(t, locked, mode)
}

// Credentials of the worker's user on the fixture's bucket.
const immutableUser, immutableSecret = "backupworker", "backupworker-secret-1"

// newImmutableFixtureAllowing is newImmutableFixture whose worker's user
// may, beyond the README's bucket policy, do actions.
func newImmutableFixtureAllowing(t *testing.T, locked bool, mode string, actions ...string) *immutableFixture {
	t.Helper()
	f := &immutableFixture{cycleFixture: newCycleFixture(t, "Sales", ""), srv: s3test.Start(t), bucket: "worm"}
	ctx := context.Background()
	if err := f.srv.CreateBucket(ctx, f.bucket, locked); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.CreateUser(ctx, immutableUser, immutableSecret); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.PutPolicy(ctx, f.bucket, s3test.WorkerPolicyWith(f.bucket, immutableUser, actions...)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VAULT01_SECRET", immutableSecret)
	f.cfg.BackupServers = append(f.cfg.BackupServers, config.BackupServer{Name: "vault01", Kind: config.KindS3, MaxConcurrent: 2,
		S3: &config.S3{Endpoint: f.srv.Endpoint, Region: "us-east-1", Bucket: f.bucket, Prefix: "sets/", PathStyle: true,
			AccessKeyID: immutableUser, SecretAccessKeyEnv: "VAULT01_SECRET", LockMode: mode}})
	f.cfg.Databases[0].ImmutableCopy = "vault01"
	f.m = f.verifiedSet(5, nil)
	return f
}

// verifiedSet writes a verified set of Sales on both servers, its stripes
// hashed as the copy step records them; change, when not nil, edits its
// manifest before it is saved.
func (f *immutableFixture) verifiedSet(seq int64, change func(m *catalog.Manifest)) *catalog.Manifest {
	f.t.Helper()
	m := f.writeSet("bak01", "Sales", seq, catalog.StateVerified, "bak01", 300_000)
	for i, s := range m.Stripes {
		data, err := os.ReadFile(filepath.Join(f.dirs["bak01"], s.Name))
		if err != nil {
			f.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(f.dirs["bak02"], s.Name), data, 0o644); err != nil {
			f.t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		m.Stripes[i].SHA256 = hex.EncodeToString(sum[:])
	}
	m.Servers = []string{"bak01", "bak02"}
	if change != nil {
		change(m)
	}
	f.save("bak01", m)
	f.save("bak02", m)
	return m
}

func (f *immutableFixture) copy() (ImmutableOutput, error) {
	return f.copySet(5)
}

func (f *immutableFixture) copySet(seq int64) (ImmutableOutput, error) {
	f.t.Helper()
	v, err := f.env.ExecuteActivity(f.acts.CopyImmutable, ImmutableInput{Database: "Sales", Instance: "sql01", Sequence: seq,
		Servers: []string{"bak01", "bak02"}, Target: "vault01"})
	var out ImmutableOutput
	if err == nil {
		err = v.Get(&out)
	}
	return out, err
}

func (f *immutableFixture) store() *s3.Store {
	f.t.Helper()
	st, err := s3.Open(context.Background(), f.srv.Config(f.bucket, "sets/"))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { st.Close() })
	return st
}

// A verified set goes to the object store stripes first, manifest last,
// each locked in COMPLIANCE mode from its verification for the database's
// immutable lock, and read back; the manifests on both holders record it
// and the set stays verified. A second run sends nothing.
func TestCopyImmutableCopiesAVerifiedSetLocked(t *testing.T) {
	f := newImmutableFixture(t, true, config.LockCompliance)
	out, err := f.copy()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, s := range f.m.Stripes {
		total += s.Size
	}
	if out.State != string(catalog.ImmutableCopied) || out.Objects != 3 || out.Bytes != total || out.Sent < total || !out.Probed ||
		!strings.HasPrefix(out.Probe, "immutable") {
		t.Errorf("output %+v: want 3 objects, %d bytes sent, probed immutable", out, total)
	}
	wantUntil := f.now.Add(f.cfg.Databases[0].ImmutableLock()).UTC().Truncate(time.Second)
	if !out.RetainUntil.Equal(wantUntil) || out.Mode != config.LockCompliance {
		t.Errorf("lock %s until %s, want COMPLIANCE until %s (now + (keep_verified+1) x rpo)", out.Mode, out.RetainUntil, wantUntil)
	}
	st := f.store()
	ctx := context.Background()
	names := append([]string{}, f.m.Stripes[0].Name, f.m.Stripes[1].Name, f.m.FileName())
	for _, name := range names {
		l, err := st.Retention(ctx, name, "")
		if err != nil || l.Mode != s3.ModeCompliance || l.Until.Before(wantUntil) {
			t.Errorf("%s: lock %+v, %v; want COMPLIANCE until %s", name, l, err, wantUntil)
		}
	}
	for _, s := range f.m.Stripes {
		want, _ := os.ReadFile(filepath.Join(f.dirs["bak01"], s.Name))
		if got := s3test.ReadAll(t, st, s.Name); string(got) != string(want) {
			t.Errorf("%s on the object store differs from the set's stripe", s.Name)
		}
	}
	onStore, err := catalog.Decode(s3test.ReadAll(t, st, f.m.FileName()))
	if err != nil || onStore.State != catalog.StateVerified || onStore.Immutable != nil {
		t.Errorf("manifest on the object store: %+v, %v; want the verified manifest", onStore, err)
	}
	for _, server := range []string{"bak01", "bak02"} {
		m := f.load(server, "Sales", 5)
		im := m.Immutable
		if m.State != catalog.StateVerified || im == nil || im.State != catalog.ImmutableCopied || len(im.Objects) != 3 ||
			im.Objects[2].Name != f.m.FileName() || im.Objects[0].VersionID == "" || im.Probe == nil || !im.Probe.Immutable {
			t.Errorf("manifest on %s: state %s, immutable %+v", server, m.State, im)
		}
	}
	again, err := f.copy()
	if err != nil || again.Sent != 0 || again.Probed {
		t.Errorf("second copy: %+v, %v; want nothing sent, the day's probe reused", again, err)
	}
}

// The probe turns a target that does not keep a locked object into
// NotImmutable, not retried, before anything of the set is copied: a
// bucket without Object Lock, and GOVERNANCE mode with credentials that may
// bypass it. The set stays verified; its manifests say why.
func TestCopyImmutableRefusesAStoreThatIsNotImmutable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		locked bool
		mode   string
		check  string
	}{
		{"bucket without object lock", false, config.LockCompliance, "write a locked object"},
		{"governance with bypass", true, config.LockGovernance, "bypassing governance"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newImmutableFixtureAllowing(t, tc.locked, tc.mode, "s3:DeleteObjectVersion", "s3:BypassGovernanceRetention")
			_, err := f.copy()
			if activities.ErrorType(err) != activities.ErrNotImmutable || !strings.Contains(err.Error(), tc.check) {
				t.Fatalf("error %v: want NotImmutable naming %q", err, tc.check)
			}
			m := f.load("bak02", "Sales", 5)
			if m.State != catalog.StateVerified || m.Immutable == nil || m.Immutable.State != catalog.ImmutableNotImmutable ||
				m.Immutable.Probe == nil || m.Immutable.Probe.Immutable {
				t.Errorf("manifest: state %s, immutable %+v", m.State, m.Immutable)
			}
			out, err := f.srv.Client().ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{Bucket: aws.String(f.bucket),
				Prefix: aws.String("sets/sql01")})
			if err != nil || len(out.Contents) != 0 {
				t.Errorf("objects of the set on the store: %d, %v; want none", len(out.Contents), err)
			}
			rec, err := f.store().ReadProbeRecord(context.Background())
			if err != nil || rec.Immutable {
				t.Errorf("probe record %+v, %v: want the failed probe recorded", rec, err)
			}
		})
	}
}

// The daily probe also runs preflight's least-privilege checks with the
// worker's key: a key that may bypass governance retention or change the
// bucket's Object Lock configuration makes the store not immutable
// (NotImmutable, nothing copied, the probe recorded as failed with the key
// and what it may do, in preflight's words); under the README's policy the
// checks hold and the copy goes.
func TestCopyImmutableProbeChecksTheKeysPrivileges(t *testing.T) {
	bypass := "the key " + immutableUser + " may " + s3.PrivilegeBypass + ": allowed"
	for _, tc := range []struct {
		name    string
		mode    string
		actions []string
		says    string // what the probe says of the key
		refused bool   // the right undoes the lock: no copy
	}{
		{"README policy", config.LockCompliance, nil, "", false},
		// Under COMPLIANCE no key lifts a lock: the copy is made, and the
		// excess right is a warning in the probe's verdict.
		{"bypass governance, compliance", config.LockCompliance, []string{"s3:DeleteObjectVersion", "s3:BypassGovernanceRetention"}, bypass, false},
		{"change the lock configuration", config.LockCompliance, []string{"s3:PutBucketObjectLockConfiguration"},
			"the key " + immutableUser + " may " + s3.PrivilegeLockConfig + ": allowed", false},
		// Under GOVERNANCE, bypassing it deletes every copy: the probe's
		// own delete of its locked object goes through first.
		{"bypass governance, governance", config.LockGovernance, []string{"s3:DeleteObjectVersion", "s3:BypassGovernanceRetention"},
			"delete the locked version bypassing governance: the server accepted it", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newImmutableFixtureAllowing(t, true, tc.mode, tc.actions...)
			out, err := f.copy()
			rec, rerr := f.store().ReadProbeRecord(context.Background())
			if rerr != nil {
				t.Fatal(rerr)
			}
			var privs []string
			for _, c := range rec.Checks {
				if strings.HasPrefix(c.Name, s3.PrivilegePrefix) {
					privs = append(privs, c.Name)
				}
			}
			if len(privs) != 4 {
				t.Errorf("probe record's privilege checks %v, want the 4 of preflight", privs)
			}
			if !tc.refused {
				if err != nil || out.State != string(catalog.ImmutableCopied) || !rec.Immutable {
					t.Fatalf("%+v, %v; probe %s: want the copy made and the probe passed", out, err, rec.Summary())
				}
				if tc.says == "" && len(rec.Warnings) > 0 || tc.says != "" && (!strings.Contains(out.Probe, tc.says) || !strings.Contains(out.Probe, "deny s3:")) {
					t.Fatalf("probe verdict %q (warnings %q): want it to say %q and the action to deny", out.Probe, rec.Warnings, tc.says)
				}
				return
			}
			t.Logf("%s: %v", tc.name, err)
			if activities.ErrorType(err) != activities.ErrNotImmutable || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "s3:BypassGovernanceRetention") {
				t.Fatalf("error %v: want NotImmutable saying %q and the action to deny", err, tc.says)
			}
			if rec.Immutable || !strings.Contains(rec.Summary(), tc.says) {
				t.Errorf("probe record %s: want it failed, saying %q", rec.Summary(), tc.says)
			}
			m := f.load("bak02", "Sales", 5)
			if m.Immutable == nil || m.Immutable.State != catalog.ImmutableNotImmutable || !strings.Contains(m.Immutable.Probe.Summary, tc.says) {
				t.Errorf("manifest's record %+v: want not_immutable with the probe's verdict", m.Immutable)
			}
			objs, err := f.srv.Client().ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{Bucket: aws.String(f.bucket),
				Prefix: aws.String("sets/sql01")})
			if err != nil || len(objs.Contents) != 0 {
				t.Errorf("objects of the set on the store: %d, %v; want none", len(objs.Contents), err)
			}
		})
	}
}

// The plan names the database's object store: the cycle holds a slot of
// its max_concurrent, like a backup server's.
func TestPlanCycleHoldsTheObjectStoresSlot(t *testing.T) {
	f := newImmutableFixture(t, true, config.LockCompliance)
	f.cfg.BackupServers[len(f.cfg.BackupServers)-1].MaxConcurrent = 3
	v, err := f.env.ExecuteActivity(f.acts.PlanCycle, activities.PlanInput{Database: "Sales"})
	if err != nil {
		t.Fatal(err)
	}
	var p activities.Plan
	if err := v.Get(&p); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range p.Slots {
		found = found || s.Kind == activities.SlotServer && s.Name == "vault01" && s.Limit == 3
	}
	if p.Immutable != "vault01" || !found {
		t.Errorf("plan: immutable %q, slots %+v; want vault01 with a slot of its max_concurrent 3", p.Immutable, p.Slots)
	}
}

// With an evidence ledger, the servers' ledgers follow the set to its
// object store, each record locked like the set: only records the copy
// lacks are sent, so one later removed from a server stays there.
func TestRecordSetEvidenceCopiesTheLedgersToTheObjectStore(t *testing.T) {
	f := newImmutableFixture(t, true, config.LockCompliance)
	key, enc, err := evidence.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "evidence.key")
	if err := os.WriteFile(keyFile, []byte(enc+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.cfg.Evidence = &config.Evidence{SigningKeyFile: keyFile, PublicKeys: []string{key.Public().String()}}
	f.m.Header = &catalog.Header{BackupSetGUID: "5c0e5e1a-0000-4000-8000-000000000005", FirstLSN: "100", LastLSN: "200", BackupFinish: f.m.CreatedAt}
	f.m.Header.SetUTCOffset(0)
	f.m.Proof = &catalog.Proof{VerifyInstance: "sqlverify", VerifyDatabase: "Sales_verify", RestoreHistoryID: 9,
		BackupSetGUID: f.m.Header.BackupSetGUID, RestoredAt: f.now, CheckedAt: f.now}
	f.save("bak01", f.m)
	f.save("bak02", f.m)
	if _, err := f.copy(); err != nil {
		t.Fatal(err)
	}
	record := func() activities.EvidenceOutput {
		t.Helper()
		v, err := f.env.ExecuteActivity(f.acts.RecordSetEvidence, activities.EvidenceInput{Database: "Sales", Instance: "sql01", Sequence: 5,
			Servers: []string{"bak01", "bak02"}, Immutable: "vault01"})
		var out activities.EvidenceOutput
		if err == nil {
			err = v.Get(&out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := record(); len(out.Recorded) != 2 || out.Copied != 2 || len(out.NotRecorded) != 0 {
		t.Fatalf("first: %+v, want a record on each server, both copied", out)
	}
	if out := record(); len(out.Recorded) != 2 || out.Recorded[0].Seq != 1 || out.Copied != 0 {
		t.Fatalf("retried: %+v, want the same records, nothing sent again", out)
	}
	st := f.store()
	ctx := context.Background()
	wantUntil := f.now.Add(f.cfg.Databases[0].ImmutableLock()).UTC().Truncate(time.Second)
	for _, server := range []string{"bak01", "bak02"} {
		res, err := evidence.Verify(ctx, st, "sql01", "Sales", evidence.Options{Keys: evidence.NewPublicKeys(key.Public()), Server: server,
			Dir: evidence.ImmutableDir(server, "sql01", "Sales"), Copy: true})
		if err != nil || !res.OK() || res.Records != 1 || res.Verified[0].Set.BackupSetGUID != f.m.Header.BackupSetGUID {
			t.Errorf("copy of %s's ledger: %+v, %v", server, res, err)
		}
		l, err := st.Retention(ctx, evidence.ImmutableFileName(server, "sql01", "Sales", 1), "")
		if err != nil || l.Mode != s3.ModeCompliance || l.Until.Before(wantUntil) {
			t.Errorf("record of %s on the object store: lock %+v, %v; want COMPLIANCE until %s", server, l, err, wantUntil)
		}
	}
}

// A verified set whose immutable copy failed (the store down), was never
// made or met a store found not immutable then gets it from a later
// cycle's copy, without an operator: up to ImmutableCatchUp earlier sets
// per copy, oldest first, each locked like the cycle's own and recorded
// in its manifests (whichever run made it). Status is red naming each set
// until its copy is made, and no longer once all are.
func TestCopyImmutableCatchesUpEarlierSets(t *testing.T) {
	f := newImmutableFixture(t, true, config.LockCompliance)
	earlier := func(rec *catalog.ImmutableCopy) func(m *catalog.Manifest) {
		return func(m *catalog.Manifest) {
			m.WorkflowID, m.RunID = "backup-cycle-sql01-Sales", "an-earlier-run"
			m.Immutable = rec
		}
	}
	// Set 1 verified before immutable_copy was configured, 2 whose copy
	// failed, 3 whose store was then found not immutable.
	f.verifiedSet(1, earlier(nil))
	f.verifiedSet(2, earlier(&catalog.ImmutableCopy{Server: "vault01", State: catalog.ImmutableFailed, At: f.now.Add(-80 * time.Hour),
		Error: "object store vault01: connection refused"}))
	f.verifiedSet(3, earlier(&catalog.ImmutableCopy{Server: "vault01", State: catalog.ImmutableNotImmutable, At: f.now.Add(-70 * time.Hour),
		Error: "vault01 is not immutable"}))
	// Set 4's copy runs while the store is down.
	f.verifiedSet(4, nil)
	vault := f.cfg.BackupServers[len(f.cfg.BackupServers)-1].S3
	endpoint := vault.Endpoint
	vault.Endpoint = "http://127.0.0.1:1"
	if _, err := f.copySet(4); activities.ErrorType(err) != activities.ErrObjectStoreUnreachable {
		t.Fatalf("copy with the store down: %v; want ObjectStoreUnreachable", err)
	}
	if m := f.load("bak01", "Sales", 4); m.State != catalog.StateVerified || m.Immutable == nil || m.Immutable.State != catalog.ImmutableFailed {
		t.Fatalf("set 4 after the failed copy: state %s, immutable %+v", m.State, m.Immutable)
	}
	vault.Endpoint = endpoint

	ctx := context.Background()
	immutableReasons := func() []string {
		t.Helper()
		r := status.Load(ctx, f.cfg, nil, f.now)
		for _, d := range r.Databases {
			if d.Database != "Sales" {
				continue
			}
			var out []string
			for _, why := range d.Reasons {
				if strings.Contains(why, "immutable copy") {
					if !d.OutOfObjectives {
						t.Errorf("reason %q without RED", why)
					}
					out = append(out, why)
				}
			}
			return out
		}
		t.Fatal("no line for Sales")
		return nil
	}
	if got := immutableReasons(); len(got) != 5 || !strings.Contains(got[0], "set 1 ") || !strings.Contains(got[3], "set 4 ") ||
		!strings.Contains(got[3], "failed at") || !strings.Contains(got[3], "127.0.0.1:1") || !strings.Contains(got[4], "set 5 ") {
		t.Fatalf("status before the next copy: %q; want RED for sets 1 to 5, set 4's failure named", got)
	}

	// The next cycle's copy (set 5): sets 1 to 3 too, oldest first.
	out, err := f.copy()
	if err != nil || out.State != string(catalog.ImmutableCopied) || !slices.Equal(out.CaughtUp, []int64{1, 2, 3}) || out.CatchUpError != "" {
		t.Fatalf("copy of set 5: %+v, %v; want sets 1, 2 and 3 caught up", out, err)
	}
	st := f.store()
	for _, seq := range []int64{1, 2, 3} {
		for _, server := range []string{"bak01", "bak02"} {
			m := f.load(server, "Sales", seq)
			if im := m.Immutable; m.State != catalog.StateVerified || im == nil || im.State != catalog.ImmutableCopied || len(im.Objects) != 3 ||
				!im.RetainUntil.Equal(out.RetainUntil) || m.RunID != "an-earlier-run" {
				t.Errorf("set %d on %s: state %s, run %s, immutable %+v; want copied, locked as set 5", seq, server, m.State, m.RunID, im)
			}
		}
		m := f.load("bak01", "Sales", seq)
		for _, o := range m.Immutable.Objects[:2] {
			want, _ := os.ReadFile(filepath.Join(f.dirs["bak01"], o.Name))
			sum := sha256.Sum256(s3test.ReadAll(t, st, o.Name))
			if hex.EncodeToString(sum[:]) != o.SHA256 || string(s3test.ReadAll(t, st, o.Name)) != string(want) {
				t.Errorf("set %d: %s on the store differs from the stripe", seq, o.Name)
			}
			if l, err := st.Retention(ctx, o.Name, ""); err != nil || l.Mode != s3.ModeCompliance || l.Until.Before(out.RetainUntil) {
				t.Errorf("set %d: %s locked %+v, %v", seq, o.Name, l, err)
			}
		}
	}
	if got := immutableReasons(); len(got) != 1 || !strings.Contains(got[0], "set 4 ") {
		t.Fatalf("status after catching up 3 sets: %q; want RED for set 4 only", got)
	}

	// The one after: set 4, the last; then nothing is left.
	if out, err := f.copy(); err != nil || !slices.Equal(out.CaughtUp, []int64{4}) || out.Sent != 0 {
		t.Fatalf("second copy of set 5: %+v, %v; want set 4 caught up and nothing of set 5 sent again", out, err)
	}
	if got := immutableReasons(); len(got) != 0 {
		t.Fatalf("status after catching up every set: %q; want no immutable copy missing", got)
	}
	if out, err := f.copy(); err != nil || len(out.CaughtUp) != 0 {
		t.Fatalf("third copy: %+v, %v; want nothing to catch up", out, err)
	}
}

// A set that cannot be copied itself (a stripe no longer as its manifest
// says) is recorded failed and does not hold back the sets after it.
func TestCopyImmutableCatchUpGoesPastABrokenSet(t *testing.T) {
	f := newImmutableFixture(t, true, config.LockCompliance)
	broken := f.verifiedSet(1, nil)
	f.verifiedSet(2, nil)
	for _, server := range []string{"bak01", "bak02"} {
		if err := os.WriteFile(filepath.Join(f.dirs[server], broken.Stripes[0].Name), []byte("not the backup"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := f.copy()
	if err != nil || !slices.Equal(out.CaughtUp, []int64{2}) || !strings.Contains(out.CatchUpError, "seq 1") {
		t.Fatalf("copy of set 5: %+v, %v; want set 2 caught up past set 1, whose failure is named", out, err)
	}
	if m := f.load("bak02", "Sales", 1); m.State != catalog.StateVerified || m.Immutable == nil || m.Immutable.State != catalog.ImmutableFailed {
		t.Errorf("set 1: state %s, immutable %+v; want verified, its copy recorded failed", m.State, m.Immutable)
	}
}

// A set whose copy one holder's manifest records (the record on the
// other was lost: its server was down when the copy ended) is not copied
// again: the record is written where it is missing, nothing is sent.
func TestCopyImmutableCatchUpRepairsALostRecordWithoutCopying(t *testing.T) {
	f := newImmutableFixture(t, true, config.LockCompliance)
	m := f.verifiedSet(1, nil)
	rec := &catalog.ImmutableCopy{Server: "vault01", Location: "s3://elsewhere/", State: catalog.ImmutableCopied, At: f.now.Add(-2 * time.Hour),
		Mode: "COMPLIANCE", RetainUntil: f.now.Add(30 * 24 * time.Hour), Objects: []catalog.ImmutableObject{{Name: m.Stripes[0].Name, SHA256: m.Stripes[0].SHA256}}}
	m.Immutable = rec
	f.save("bak02", m)
	out, err := f.copy()
	if err != nil || len(out.CaughtUp) != 0 || out.CatchUpError != "" {
		t.Fatalf("copy of set 5: %+v, %v; want nothing caught up (set 1 is copied)", out, err)
	}
	if _, err := f.store().Retention(context.Background(), m.Stripes[0].Name, ""); err == nil {
		t.Errorf("set 1's stripe was uploaded again")
	}
	if got := f.load("bak01", "Sales", 1).Immutable; got == nil || got.State != catalog.ImmutableCopied || got.Location != rec.Location ||
		!got.RetainUntil.Equal(rec.RetainUntil) {
		t.Errorf("set 1 on bak01 records %+v; want bak02's record %+v", got, rec)
	}
}

// The heartbeat's bytes count each part held at its own size: the last
// part of a stripe is shorter than the part size.
func TestImmutableProgressCountsEachPartsSize(t *testing.T) {
	const ps, size = 5 << 20, 5<<20 + 1<<19
	p := &immutableProgress{total: size, files: map[string]*s3.UploadProgress{
		"a_1of1.bak": {File: "a_1of1.bak", UploadID: "u", PartSize: ps, Size: size, Parts: []int32{2}},
	}}
	if s := p.state(); s.Bytes != 1<<19 || s.Percent > 10 {
		t.Errorf("the short last part held: %d bytes, %.1f%%; want %d bytes, 9.1%%", s.Bytes, s.Percent, 1<<19)
	}
	p.files["a_1of1.bak"].Parts = []int32{1, 2}
	if s := p.state(); s.Bytes != size || s.Percent != 100 {
		t.Errorf("both parts held: %d bytes, %.1f%%; want %d, 100%%", s.Bytes, s.Percent, size)
	}
}
