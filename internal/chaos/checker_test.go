package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// TestDrawReplays: the same seed and run give the same plan, every fault
// kind is drawn, and every plan aims where its fault can happen.
func TestDrawReplays(t *testing.T) {
	seen := map[Fault]bool{}
	for i := range 500 {
		p := Draw(7, i, "")
		if q := Draw(7, i, ""); q != p {
			t.Fatalf("run %d: two draws differ:\n%+v\n%+v", i, p, q)
		}
		seen[p.Fault] = true
		if steps := faultSteps[p.Fault]; len(steps) > 0 && !slices.Contains(steps, p.Step) {
			t.Errorf("run %d: %s aimed at step %q, not one of %v", i, p.Fault, p.Step, steps)
		}
		if p.Percent != 0 && (p.Percent < 5 || p.Percent > 95) {
			t.Errorf("run %d: percent %v outside 5..95", i, p.Percent)
		}
		if p.Second == p.Entry {
			t.Errorf("run %d: the second start uses the first's entry point %s", i, p.Entry)
		}
		if p.NoInst && p.Target.Database == SharedDB {
			t.Errorf("run %d: a Web UI start of %s without the instance is ambiguous", i, p.Target)
		}
	}
	for _, fw := range faultWeights {
		if !seen[fw.v] {
			t.Errorf("fault %s never drawn in 500 runs", fw.v)
		}
	}
	// The estates cover what the product must hold up against.
	estates := map[string]bool{}
	for i := range 500 {
		e := Draw(7, i, "").Estate
		estates[fmt.Sprintf("verify %d", major(e.BuildOf(Verify01)))] = true
		estates[fmt.Sprintf("cert %v", e.TDECert)] = true
		estates[fmt.Sprintf("spell %d", e.Spell)] = true
		estates["via "+e.Via] = true
		estates["sync "+e.AGSync] = true
		estates["zone "+e.ZoneOf(Verify01)] = true
		if major(e.BuildOf(Verify01)) < major(e.BuildOf(Sql01)) {
			estates["verify older"] = true
		}
		if _, err := location(e.ZoneOf(Sql02)); err != nil {
			t.Fatalf("run %d: zone %s: %v", i, e.ZoneOf(Sql02), err)
		}
	}
	for _, w := range []string{"verify 15", "verify 16", "cert false", "cert true", "spell 0", "spell 2", "spell 3", "via " + AGroup,
		"via " + Sql02, "sync NOT SYNCHRONIZING", "zone Asia/Kolkata", "verify older"} {
		if !estates[w] {
			t.Errorf("no estate with %s in 500 runs", w)
		}
	}
	if Draw(7, 3, "") == Draw(8, 3, "") {
		t.Error("seeds 7 and 8 drew the same plan for run 3")
	}
	if p := Draw(7, 3, FaultCancel); p.Fault != FaultCancel || !slices.Contains(faultSteps[FaultCancel], p.Step) {
		t.Errorf("forced cancel: %+v", p)
	}
}

// testFleet is a fleet of directories only: enough for the checker's file
// invariants (no instance, no Temporal).
func testFleet(t *testing.T) *Fleet {
	t.Helper()
	root := t.TempDir()
	f := &Fleet{Root: root, dirs: map[string]string{}, passwords: map[string]string{"BC_CHAOS_SQL01_PASSWORD": "Sql-0123456789abcdef"}}
	for _, d := range []string{Bak01, Bak02, "logs"} {
		f.dirs[d] = filepath.Join(root, d)
		if err := os.MkdirAll(f.dirs[d], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// writeSet writes a set's stripes (content) and manifest on server.
func writeSet(t *testing.T, f *Fleet, server string, seq int64, guid string, state catalog.State, content string, edit func(*catalog.Manifest)) {
	t.Helper()
	at := time.Date(2026, 1, 1, 0, 0, int(seq), 0, time.UTC)
	m := catalog.New(Sql01, SharedDB, seq, at)
	m.Header = &catalog.Header{BackupSetGUID: guid, FirstLSN: "1", LastLSN: "2", BackupFinish: at}
	for i := 1; i <= 2; i++ {
		name := m.StripeFileName(i, 2)
		data := []byte(content + name)
		if err := os.WriteFile(filepath.Join(f.ShareDir(server), name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		m.Stripes = append(m.Stripes, catalog.Stripe{Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
	}
	m.State = state
	if edit != nil {
		edit(m)
	}
	b, err := catalog.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.ShareDir(server), m.FileName()), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func invariants(vs []Violation) []int {
	var out []int
	for _, v := range vs {
		if !slices.Contains(out, v.Invariant) {
			out = append(out, v.Invariant)
		}
	}
	slices.Sort(out)
	return out
}

// bySet names each violation by its invariant and the set number its
// detail names ("I7 seq 2"), for sets 1 to last, and logs every one.
func bySet(t *testing.T, vs []Violation, last int64) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for _, v := range vs {
		t.Logf("I%d: %s", v.Invariant, v.Detail)
		for seq := int64(1); seq <= last; seq++ {
			if strings.Contains(v.Detail, fmt.Sprintf("seq %d ", seq)) {
				got[fmt.Sprintf("I%d seq %d", v.Invariant, seq)] = true
			}
		}
	}
	return got
}

// TestCheckerFindsViolations breaks each file invariant on purpose and
// expects the checker to report exactly those, once, without the password.
func TestCheckerFindsViolations(t *testing.T) {
	f := testFleet(t)
	c := NewChecker(f)
	ctx := context.Background()

	// A verified set on both servers: nothing to report.
	for _, s := range Servers {
		writeSet(t, f, s, 1, "AAAAAAAA-0000-0000-0000-000000000001", catalog.StateVerified, "set one ", nil)
	}
	if vs, _ := c.Check(ctx, nil); len(vs) != 0 {
		t.Fatalf("a verified set on two servers: %+v, want no violation", vs)
	}

	// Another backup under the same number overwrites it on bak01 (I4, I1),
	// which leaves the newest verified set intact on bak02 only (I3); a set
	// whose BACKUP completed and that nobody damaged is failed as corrupt
	// for an outage (I5), while a set the harness damaged may be (no I5);
	// both name an outage as their reason, not damage (I8); a password in a
	// worker log (I6).
	writeSet(t, f, Bak01, 1, "BBBBBBBB-0000-0000-0000-000000000002", catalog.StateWritten, "set two ", nil)
	corrupt := func(m *catalog.Manifest) {
		m.Failure = &catalog.Failure{Step: catalog.StepRestore, Evidence: catalog.EvidenceCorruptBackup,
			Reason: "SQLHostUnreachable: verify01 did not answer", At: m.CreatedAt}
	}
	writeSet(t, f, Bak02, 2, "CCCCCCCC-0000-0000-0000-000000000003", catalog.StateFailed, "set three ", corrupt)
	writeSet(t, f, Bak02, 3, "DDDDDDDD-0000-0000-0000-000000000004", catalog.StateFailed, "set four ", corrupt)
	seq := func(n int64) *catalog.Manifest { return catalog.New(Sql01, SharedDB, n, time.Now()) }
	c.Damaged(seq(3).StripeFileName(2, 2))
	c.stmts = func(instance string) []sqlsim.StatementRecord {
		var out []sqlsim.StatementRecord
		for n := int64(1); n <= 3 && instance == Sql01; n++ {
			out = append(out, sqlsim.StatementRecord{Kind: "BACKUP DATABASE", Outcome: "ok",
				SQL: `BACKUP DATABASE [DBA] TO DISK = N'\\bak02\backup\` + seq(n).StripeFileName(1, 2) + `'`})
		}
		return out
	}
	log := filepath.Join(f.dirs["logs"], "worker-01.log")
	if err := os.WriteFile(log, []byte(`{"msg":"login","dsn":"sqlserver://sa:Sql-0123456789abcdef@127.0.0.1"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.workers = []*Worker{{Identity: "w1", LogFile: log}}
	vs, _ := c.Check(ctx, []string{"backup cycle failed"})
	if got := invariants(vs); !slices.Equal(got, []int{1, 3, 4, 5, 6, 8}) {
		t.Errorf("invariants reported %v, want [1 3 4 5 6 8]:\n%+v", got, vs)
	}
	for _, v := range vs {
		if v.Invariant == 5 && !strings.Contains(v.Detail, "seq 2 ") {
			t.Errorf("I5 for a set the harness damaged: %s", v.Detail)
		}
	}
	for _, v := range vs {
		if strings.Contains(v.Detail, "Sql-0123456789abcdef") {
			t.Errorf("I%d detail shows the password: %s", v.Invariant, v.Detail)
		}
	}
	// The same findings are not reported twice.
	if again, _ := c.Check(ctx, nil); len(again) != 0 {
		t.Errorf("second check reported again: %+v", again)
	}

	// bak02's copy goes too: no verified set of sql01/DBA is left (I3).
	if err := os.Remove(filepath.Join(f.ShareDir(Bak02), catalog.New(Sql01, SharedDB, 1, time.Now()).FileName())); err != nil {
		t.Fatal(err)
	}
	vs, _ = c.Check(ctx, nil)
	if len(vs) != 1 || vs[0].Invariant != 3 || !strings.Contains(vs[0].Detail, "no manifest on any server") {
		t.Errorf("after the last verified manifest went: %+v, want one I3 (no verified set left)", vs)
	}
}

// copyDB is the verification copy of the checker's tests.
const copyDB = "DBA_verify"

// setGUID is the backup set GUID of set seq in the checker's tests.
func setGUID(seq int64) string { return fmt.Sprintf("%08d-0000-0000-0000-000000000000", seq) }

// copyTimeline is what a test says verify01 ran on copyDB and recorded, at
// seconds from t0: its statement log, its restore history (restore_date in
// zone, as the instance stamps it) and the start of each run.
type copyTimeline struct {
	t       *testing.T
	f       *Fleet
	t0      time.Time
	zone    *time.Location
	stmts   []sqlsim.StatementRecord
	history []sqlsim.RestoreRecord
	runs    map[string]time.Time
}

func newCopyTimeline(t *testing.T, f *Fleet, t0 time.Time, zone *time.Location) *copyTimeline {
	return &copyTimeline{t: t, f: f, t0: t0, zone: zone, runs: map[string]time.Time{}}
}

func (l *copyTimeline) at(s float64) time.Time {
	return l.t0.Add(time.Duration(s * float64(time.Second)))
}

// restore logs a RESTORE into the copy in [start, end] that ended with
// outcome and the errors errs.
func (l *copyTimeline) restore(start, end float64, outcome string, errs ...int32) {
	st := sqlsim.StatementRecord{Kind: "RESTORE DATABASE", Database: copyDB, Start: l.at(start), End: l.at(end), Outcome: outcome,
		SQL: `RESTORE DATABASE [DBA_verify] FROM DISK = N'\\bak02\backup\x' WITH CHECKSUM, REPLACE`}
	if len(errs) > 0 {
		var e tds.Errors
		for _, n := range errs {
			e = append(e, &tds.Error{Number: n, Class: 16})
		}
		st.Error = e
	}
	l.stmts = append(l.stmts, st)
}

// verified: set seq restored in [rs, re] (restore_date just after rs), its
// CHECKDB in [cs, ce] with outcome, marked verified at v by a run that
// started at begun; its manifest on both servers.
func (l *copyTimeline) verified(seq int64, begun, rs, re, cs, ce, v float64, outcome string) {
	id := int64(len(l.history) + 1)
	l.history = append(l.history, sqlsim.RestoreRecord{ID: id, Database: copyDB, Date: l.at(rs + 0.02).In(l.zone), BackupSetGUID: setGUID(seq)})
	l.restore(rs, re, "ok")
	l.stmts = append(l.stmts, sqlsim.StatementRecord{Kind: "DBCC CHECKDB", Database: copyDB, Start: l.at(cs), End: l.at(ce), Outcome: outcome,
		SQL: "DBCC CHECKDB([DBA_verify]) WITH NO_INFOMSGS /* " + tsql.BackupSetName(seq) + " */"})
	run := fmt.Sprintf("run-%d", seq)
	l.runs[run] = l.at(begun)
	for _, s := range Servers {
		writeSet(l.t, l.f, s, seq, setGUID(seq), catalog.StateVerified, fmt.Sprintf("set %d ", seq), func(m *catalog.Manifest) {
			m.VerifyDB, m.WorkflowID, m.RunID = copyDB, "backup-sql01-DBA", run
			m.Proof = &catalog.Proof{VerifyInstance: Verify01, VerifyDatabase: copyDB, RestoreHistoryID: id, BackupSetGUID: setGUID(seq),
				CheckedAt: l.at(ce)}
			m.History = append(m.History, catalog.Transition{State: catalog.StateVerified, At: l.at(v)})
		})
	}
}

// feed makes c read the timeline, and others as every other instance's
// statement log.
func (l *copyTimeline) feed(c *Checker, others ...sqlsim.StatementRecord) {
	c.stmts = func(instance string) []sqlsim.StatementRecord {
		if instance == Verify01 {
			return l.stmts
		}
		return others
	}
	c.restores = func() []sqlsim.RestoreRecord { return l.history }
	c.runStart = func(_ context.Context, _, runID string) (time.Time, error) { return l.runs[runID], nil }
}

// TestCheckerI7I8: I7 finds a verified set whose clean CHECKDB ended only
// after it was marked verified, and one whose proof names a restore an
// earlier run sent; I8 finds sets failed for what is not their content:
// damage evidence under an environment's type, a set condemned at its
// RESTORE while the verification instance was older than its writer, a
// BACKUP never sent failed as incomplete for a configuration error. A
// source found damaged by a BACKUP that ran, and a set the harness damaged,
// are not violations.
func TestCheckerI7I8(t *testing.T) {
	f := testFleet(t)
	c := NewChecker(f)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	l := newCopyTimeline(t, f, t0, time.UTC)
	at := l.at
	l.verified(1, 0, 1, 2, 3, 4, 5, "ok")       // clean
	l.verified(2, 9, 10, 12, 13, 16, 15, "ok")  // marked verified before its CHECKDB ended
	l.verified(3, 25, 20, 22, 23, 24, 26, "ok") // the restore is an earlier run's
	failed := func(seq int64, step catalog.Step, ev catalog.Evidence, reason string, when float64) {
		writeSet(t, f, Bak01, seq, setGUID(seq), catalog.StateFailed, fmt.Sprintf("set %d ", seq), func(m *catalog.Manifest) {
			m.Header.SoftwareVersion = "16.0.4135"
			m.Failure = &catalog.Failure{Step: step, Evidence: ev, Reason: reason, At: at(when)}
		})
	}
	failed(4, catalog.StepRestore, catalog.EvidenceCorruptBackup, "InvalidConfig: verify01 cannot read it", 30)
	failed(5, catalog.StepRestore, catalog.EvidenceCorruptBackup, "CorruptBackup: RESTORE failed: 3241", 40)
	failed(6, catalog.StepBackup, catalog.EvidenceBackupIncomplete, "InvalidConfig: the backup path is not mounted", 42)
	failed(7, catalog.StepBackup, catalog.EvidenceBackupIncomplete, "SourceDatabaseDamaged: 3043 on a data file", 44)
	failed(8, catalog.StepRestore, catalog.EvidenceCorruptBackup, "CorruptBackup: RESTORE WITH CHECKSUM: 3183", 46)
	// Refused by SQL Server before its first page (a planted link): it ran
	// and did not complete, though no statement record shows it.
	failed(9, catalog.StepBackup, catalog.EvidenceBackupIncomplete, "InvalidConfig: BACKUP DATABASE on sql01: backup path invalid: "+
		"Cannot open backup device. Operating system error 5(Access is denied.). (error 3201); BACKUP DATABASE is terminating abnormally. (error 3013)", 48)
	c.Damaged(catalog.New(Sql01, SharedDB, 8, t0).StripeFileName(1, 2))
	stmts7 := sqlsim.StatementRecord{Kind: "BACKUP DATABASE", Outcome: "error 3013",
		SQL: `BACKUP DATABASE [DBA] TO DISK = N'\\bak01\backup\` + catalog.New(Sql01, SharedDB, 7, t0).StripeFileName(1, 2) + `'`}
	l.feed(c, stmts7)
	older := baseEstate
	older.Build[estateIndex(Verify01)] = "15.0.4385.2"
	c.EstateFrom(at(-3600), baseEstate)
	c.EstateFrom(at(35), older)

	vs, _ := c.Check(ctx, nil)
	got := bySet(t, vs, 9)
	want := []string{"I7 seq 2", "I7 seq 3", "I8 seq 4", "I8 seq 5", "I8 seq 6"}
	for _, w := range want {
		if !got[w] {
			t.Errorf("no violation %s", w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("violations %v, want exactly %v", got, want)
	}
}

// TestCheckerRefusedRestore: a RESTORE into the copy that SQL Server
// refused with 3101 (another session held the database) replaced nothing,
// so it neither spoils the CHECKDB that follows the restore it ran beside
// (I2: a worker that froze before its RESTORE and sent it once it thawed,
// while the retry's RESTORE ran) nor one it was refused by (I2, I7). A
// RESTORE that failed after it began writing over the copy still does. The
// restore history is stamped on the verification instance's clock, in its
// zone, as the emulator keeps it.
func TestCheckerRefusedRestore(t *testing.T) {
	f := testFleet(t)
	c := NewChecker(f)
	ctx := context.Background()
	zone, err := location("Pacific/Auckland")
	if err != nil {
		t.Fatal(err)
	}
	l := newCopyTimeline(t, f, time.Date(2026, 12, 2, 3, 50, 0, 0, time.UTC), zone)
	l.verified(1, 0, 1.4, 6.4, 6.5, 9.8, 10.1, "ok")
	l.restore(2.2, 2.21, "error 3013", 3101, 3013) // the thawed attempt's, while the retry's RESTORE ran
	l.verified(2, 0, 11, 12, 13, 16, 17, "ok")
	l.restore(14, 14.01, "error 3013", 3101, 3013) // refused by the CHECKDB
	l.verified(3, 0, 21, 22, 23, 24, 25, "ok")
	l.restore(22.5, 22.8, "error 3013", 3183, 3013) // began writing over the copy, then failed
	l.feed(c)

	vs, _ := c.Check(ctx, nil)
	got := bySet(t, vs, 3)
	want := map[string]bool{"I2 seq 3": true, "I7 seq 3": true}
	if !maps.Equal(got, want) {
		t.Errorf("violations %v, want exactly %v", got, want)
	}
}

// TestCheckerHostile: I13 finds the file outside the share written and its
// content on a share, I14 a worker's panic in its log, I15 a set written
// by another workflow than its database's cycle; a set written by its
// database's cycle, and the unsigned manifest a share writer planted
// (never trusted), are none.
func TestCheckerHostile(t *testing.T) {
	f := testFleet(t)
	if err := os.MkdirAll(filepath.Join(f.Root, outsideDir), 0o755); err != nil {
		t.Fatal(err)
	}
	keys, err := catalog.NewKeys(catalog.Key{ID: manifestKeyID, Secret: []byte(strings.Repeat("k", 40))})
	if err != nil {
		t.Fatal(err)
	}
	f.keys = keys
	c := NewChecker(f)
	sign := func(m *catalog.Manifest) []byte {
		b, err := catalog.EncodeSigned(m, keys)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for seq, wid := range map[int64]string{1: "backup-sql01-DBA", 2: "3f1c9a4e-web-ui-id"} {
		m := catalog.New(Sql01, SharedDB, seq, time.Date(2026, 1, 1, 0, 0, int(seq), 0, time.UTC))
		m.WorkflowID, m.RunID = wid, "run"
		if err := os.WriteFile(filepath.Join(f.ShareDir(Bak01), m.FileName()), sign(m), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Planted: unsigned, another workflow: not the product's, so no I15.
	forged := catalog.New(Sql01, SharedDB, 3, time.Date(2026, 1, 1, 0, 0, 3, 0, time.UTC))
	forged.WorkflowID = "forged"
	raw, err := catalog.Encode(forged)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.ShareDir(HostileServer), forged.FileName()), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	outside, err := c.outsideFile()
	if err != nil {
		t.Fatal(err)
	}
	content, err := os.ReadFile(outside)
	if err != nil {
		t.Fatal(err)
	}
	vs, _ := c.Check(context.Background(), nil)
	if len(vs) != 1 || vs[0].Invariant != 15 || !strings.Contains(vs[0].Detail, "seq 2 ") {
		t.Fatalf("violations %+v, want one I15 of seq 2", vs)
	}
	if len(c.untrusted) != 1 {
		t.Errorf("untrusted manifests %d, want the planted one", len(c.untrusted))
	}

	// The content read into a set on bak01, the file written through a
	// link, a worker's panic.
	if err := os.WriteFile(filepath.Join(f.ShareDir(Bak01), "sql01@x_00000009_1of1.bak"), append([]byte("head"), content[1000:3000]...), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(outside, []byte("overwritten by a BACKUP"), 0o644); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(f.dirs["logs"], "worker-01.log")
	if err := os.WriteFile(log, []byte("{\"level\":\"info\"}\npanic: runtime error: index out of range\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.workers = append(f.workers, &Worker{Identity: "w1", LogFile: log, done: closedChan(), killed: true})
	vs, _ = c.Check(context.Background(), nil)
	var got []string
	for _, v := range vs {
		got = append(got, fmt.Sprintf("I%d %s", v.Invariant, v.Detail))
	}
	for _, want := range []string{"I13 the file outside the share", "I13 bak01/sql01@x_00000009_1of1.bak holds the content", "I14 a worker crashed"} {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, want) }) {
			t.Errorf("no violation %q in %q", want, got)
		}
	}
	if len(got) != 3 {
		t.Errorf("violations %q, want 3", got)
	}
}

func closedChan() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}
