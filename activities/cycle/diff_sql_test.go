package cycle

import (
	"context"
	"database/sql"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sitetest"
)

// diffYAML gives the fixture's database differential backups.
const diffYAML = "    owns_backup_chain: true\n    diff_backup: {every: 6h}\n"

// newDiffFixture is a site whose database commits rows on demand
// (dbo.CommitLog) and takes differentials.
func newDiffFixture(t *testing.T) *sqlFixture {
	return newSQLFixtureOf(t, sitetest.Options{Database: "Sales", CommitLog: true, Extra: diffYAML})
}

// verifiedFull runs a full cycle's activities to a verified set, its copy
// dropped, and returns its manifest on its primary.
func (f *sqlFixture) verifiedFull() *catalog.Manifest {
	f.t.Helper()
	p, seq, _ := f.backedUp()
	f.must(f.acts.CopyToRemote, activities.CopyInput{Database: f.db, Sequence: seq, From: p.Rotation[0], To: p.Remote}, nil)
	verify := activities.VerifyInput{Database: f.db, Sequence: seq, Server: p.Remote}
	f.must(f.acts.Restore, verify, nil)
	f.must(f.acts.CheckDB, verify, nil)
	f.must(f.acts.SanityChecks, verify, nil)
	f.must(f.acts.MarkVerified, activities.MarkInput{Database: f.db, Sequence: seq, Servers: []string{p.Rotation[0], p.Remote}}, nil)
	f.must(f.acts.DropVerifyDB, verify, nil)
	return f.load(p.Rotation[0], seq)
}

// commits commits n rows into the source's dbo.CommitLog.
func (f *sqlFixture) commits(n int) {
	f.t.Helper()
	for range n {
		if err := f.src.CommitNow(f.db); err != nil {
			f.t.Fatal(err)
		}
		time.Sleep(3 * time.Millisecond)
	}
}

// rowsIn counts dbo.CommitLog's rows in database db of an instance.
func rowsIn(t *testing.T, dsn string) int64 {
	t.Helper()
	conn, err := sql.Open("sqlserver", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var n int64
	if err := conn.QueryRowContext(ctx, "SELECT COUNT_BIG(*) FROM dbo.CommitLog").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// diffBackedUp plans a differential, takes and catalogs it.
func (f *sqlFixture) diffBackedUp() (activities.Plan, int64, error) {
	f.t.Helper()
	var p activities.Plan
	f.must(f.acts.PlanCycle, activities.PlanInput{Database: f.db, Differential: true}, &p)
	if p.NoDifferentialBase != "" {
		f.t.Fatalf("no differential planned: %s", p.NoDifferentialBase)
	}
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: f.db}, &seq)
	var b activities.BackupOutput
	f.must(f.acts.Backup, activities.BackupInput{Database: f.db, Sequence: seq, Server: p.Rotation[0], Stripes: p.Stripes, Mode: p.RunMode()}, &b)
	return p, seq, f.run(f.acts.WriteManifest, activities.ManifestInput{Database: f.db, Sequence: seq, Server: p.Rotation[0], Backup: b}, nil)
}

// A differential is taken with DIFFERENTIAL and CHECKSUM on the newest
// verified full, beside it; its manifest names the base (set, GUID, LSN);
// it is copied, then proven on the verification instance: the base
// restored WITH NORECOVERY from its remote copy, the differential WITH
// RECOVERY, both WITH CHECKSUM; CHECKDB and the sanity checks run on the
// copy, which holds exactly what was committed before the differential.
// The base's manifest is left as it was.
func TestSQLDifferentialTakenCopiedAndProvenOnItsBase(t *testing.T) {
	f := newDiffFixture(t)
	var p activities.Plan
	f.must(f.acts.PlanCycle, activities.PlanInput{Database: "Sales", Differential: true}, &p)
	if !strings.Contains(p.NoDifferentialBase, "no verified full backup") {
		t.Fatalf("a differential with no full: plan %+v, want it skipped for want of a verified full", p)
	}
	f.commits(3)
	base := f.verifiedFull()
	f.commits(5)
	want := rowsIn(t, f.src.DSN("sa", sqlPassword, "Sales"))

	p, seq, err := f.diffBackedUp()
	if err != nil {
		t.Fatal(err)
	}
	if p.Rotation[0] != base.PrimaryServer || p.Mode.CopyOnly || p.Mode.Differential == nil || p.Mode.Differential.Sequence != base.Sequence {
		t.Fatalf("plan %+v mode %+v, want a differential on set %d beside it on %s", p, p.Mode, base.Sequence, base.PrimaryServer)
	}
	bs := statements(f.src, "BACKUP DATABASE")
	if last := bs[len(bs)-1].SQL; !strings.Contains(last, "DIFFERENTIAL") || !strings.Contains(last, "CHECKSUM") || strings.Contains(last, "COPY_ONLY") {
		t.Fatalf("BACKUP %s, want WITH DIFFERENTIAL, CHECKSUM and no COPY_ONLY", last)
	}
	m := f.load(p.Rotation[0], seq)
	if !m.IsDifferential() || m.Differential.Sequence != base.Sequence || !activities.SameGUID(m.Differential.BackupSetGUID, base.Header.BackupSetGUID) ||
		!regexp.MustCompile(`^[0-9]+$`).MatchString(m.Differential.LSN) || activities.SameGUID(m.Header.BackupSetGUID, base.Header.BackupSetGUID) {
		t.Fatalf("differential manifest %+v header %+v, want base set %d (%s) with its LSN", m.Differential, m.Header, base.Sequence, base.Header.BackupSetGUID)
	}

	f.must(f.acts.CopyToRemote, activities.CopyInput{Database: "Sales", Sequence: seq, From: p.Rotation[0], To: p.Remote}, nil)
	verify := activities.VerifyInput{Database: "Sales", Sequence: seq, Server: p.Remote}
	before := len(statements(f.verify, "RESTORE DATABASE"))
	var restored activities.StepOutput
	f.must(f.acts.Restore, verify, &restored)
	rs := statements(f.verify, "RESTORE DATABASE")[before:]
	baseFile, diffFile := base.StripeFileName(1, len(base.Stripes)), m.StripeFileName(1, len(m.Stripes))
	if len(rs) != 2 || rs[0].Outcome != "ok" || rs[1].Outcome != "ok" ||
		!strings.Contains(rs[0].SQL, `\\`+p.Remote+`\backup\`+baseFile) || !strings.Contains(rs[0].SQL, "NORECOVERY") ||
		!strings.Contains(rs[0].SQL, "CHECKSUM") || !strings.Contains(rs[0].SQL, "REPLACE") ||
		!strings.Contains(rs[1].SQL, `\\`+p.Remote+`\backup\`+diffFile) || strings.Contains(rs[1].SQL, "NORECOVERY") ||
		!strings.Contains(rs[1].SQL, "CHECKSUM") {
		t.Fatalf("RESTORE statements %+v, want the base's remote copy WITH NORECOVERY, CHECKSUM, REPLACE, then the differential's WITH CHECKSUM (recovered)", rs)
	}
	if got := rowsIn(t, f.verify.DSN("sa", sqlPassword, restored.VerifyDatabase)); got != want {
		t.Fatalf("the copy holds %d rows of dbo.CommitLog, want the %d committed before the differential", got, want)
	}
	f.must(f.acts.CheckDB, verify, nil)
	f.must(f.acts.SanityChecks, verify, nil)
	f.must(f.acts.MarkVerified, activities.MarkInput{Database: "Sales", Sequence: seq, Servers: []string{p.Rotation[0], p.Remote}}, nil)
	for _, s := range []string{p.Rotation[0], p.Remote} {
		v := f.load(s, seq)
		if !v.Verified() || v.Proof == nil || !activities.SameGUID(v.Proof.BackupSetGUID, m.Header.BackupSetGUID) ||
			v.VerifyCopy == nil || !activities.SameGUID(v.VerifyCopy.BackupSetGUID, base.Header.BackupSetGUID) || !v.VerifyCopy.Confirmed() {
			t.Errorf("differential on %s: %s proof %+v copy %+v, want verified with its own restore's proof on its base's copy", s, v.State, v.Proof, v.VerifyCopy)
		}
	}
	if after := f.load(base.PrimaryServer, base.Sequence); after.State != base.State || after.VerifyCopy.RestoreHistoryID != base.VerifyCopy.RestoreHistoryID {
		t.Errorf("the base's manifest changed: %s, copy %+v", after.State, after.VerifyCopy)
	}
	f.must(f.acts.DropVerifyDB, verify, nil)
	if _, err := f.verify.DatabaseFiles(restored.VerifyDatabase); err == nil {
		t.Error("the differential's copy is still there after DropVerifyDB")
	}
	var kept activities.RetentionOutput
	f.must(f.acts.ApplyRetention, activities.RetentionInput{Database: "Sales", Servers: []string{"bak01", "bak02"}, Protect: seq}, &kept)
	if len(kept.Deleted) != 0 {
		t.Errorf("retention deleted %+v of one full and its differential", kept.Deleted)
	}

	// The next full is planned on the server after the full's, whatever
	// the differential's primary was.
	var next activities.Plan
	f.must(f.acts.PlanCycle, activities.PlanInput{Database: "Sales"}, &next)
	if next.Rotation[0] == base.PrimaryServer {
		t.Errorf("the next full goes to %s again: the differential moved the round robin", next.Rotation[0])
	}
}

// A full backup the product did not take (a DBA's, not COPY_ONLY) moves
// the database's differential base: the next differential's header names
// it, and the differential fails with DifferentialBaseMoved naming that
// full; no verified set changes, and the plans after it say that the next
// verified full is needed.
func TestSQLDifferentialOnAForeignFull(t *testing.T) {
	f := newDiffFixture(t)
	base := f.verifiedFull()
	f.commits(2)
	sitetest.ExecIn(t, f.src, "master", `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\dba_full.bak' WITH INIT, CHECKSUM`)
	f.commits(2)
	p, seq, err := f.diffBackedUp()
	if activities.ErrorType(err) != activities.ErrDifferentialBaseMoved || !strings.Contains(err.Error(), `dba_full.bak`) ||
		!strings.Contains(err.Error(), "next verified full") {
		t.Fatalf("catalog of a differential on a DBA's full: %v, want DifferentialBaseMoved naming the DBA's backup and the next full", err)
	}
	if m := f.load(p.Rotation[0], seq); m.State != catalog.StatePending || m.Header != nil {
		t.Fatalf("the differential's manifest is %s with header %+v: the workflow marks it failed", m.State, m.Header)
	}
	// What the workflow does with the error: the differential alone is
	// marked failed, on the evidence its error type gives.
	f.must(f.acts.MarkFailed, activities.MarkInput{Database: "Sales", Sequence: seq, Servers: []string{p.Rotation[0]}, Step: activities.StepCatalog,
		ErrorType: activities.ErrDifferentialBaseMoved, Reason: err.Error(), Evidence: string(activities.Evidence(activities.ErrDifferentialBaseMoved))}, nil)
	if m := f.load(p.Rotation[0], seq); m.State != catalog.StateFailed || m.Failure.Evidence != catalog.EvidenceForeignBase {
		t.Fatalf("the differential is %s (%+v), want failed on foreign_base", m.State, m.Failure)
	}
	for _, s := range base.Servers {
		if b := f.load(s, base.Sequence); !b.Verified() {
			t.Errorf("the base on %s is %s", s, b.State)
		}
	}
	var again activities.Plan
	f.must(f.acts.PlanCycle, activities.PlanInput{Database: "Sales", Differential: true}, &again)
	if !strings.Contains(again.NoDifferentialBase, "next full cycle") || !strings.Contains(again.NoDifferentialBase, "did not take") {
		t.Fatalf("the plan after it: %+v, want no differential until the next verified full", again)
	}
	// The next full is the base again.
	f.verifiedFull()
	var after activities.Plan
	f.must(f.acts.PlanCycle, activities.PlanInput{Database: "Sales", Differential: true}, &after)
	if after.NoDifferentialBase != "" {
		t.Fatalf("after a new verified full: %s", after.NoDifferentialBase)
	}
}

// The verification instance dies after the base's RESTORE ... NORECOVERY,
// as the differential's RESTORE arrives: the copy is left RESTORING with
// the base's restore confirmed. It is the product's own copy (the guard
// lets it be replaced or dropped), and the retry restores the differential
// only, on the base already there.
func TestSQLDifferentialRestoreCutAfterItsBase(t *testing.T) {
	f := newDiffFixture(t)
	base := f.verifiedFull()
	f.commits(4)
	p, seq, err := f.diffBackedUp()
	if err != nil {
		t.Fatal(err)
	}
	want := rowsIn(t, f.src.DSN("sa", sqlPassword, "Sales"))
	f.must(f.acts.CopyToRemote, activities.CopyInput{Database: "Sales", Sequence: seq, From: p.Rotation[0], To: p.Remote}, nil)
	m := f.load(p.Remote, seq)
	diffFile, baseFile := m.StripeFileName(1, len(m.Stripes)), base.StripeFileName(1, len(base.Stripes))
	f.verify.CrashOnQuery("FROM DISK = N'\\\\"+p.Remote+`\backup\`+diffFile+"'", 1)
	verify := activities.VerifyInput{Database: "Sales", Sequence: seq, Server: p.Remote}
	if err := f.run(f.acts.Restore, verify, nil); err == nil {
		t.Fatal("Restore through a crash of the verification instance succeeded")
	}
	if err := f.verify.Restart(); err != nil {
		t.Fatal(err)
	}
	rec := f.load(p.Remote, seq).VerifyCopy
	if rec == nil || !rec.Confirmed() || !activities.SameGUID(rec.BackupSetGUID, base.Header.BackupSetGUID) {
		t.Fatalf("record after the crash %+v, want the base's restore confirmed", rec)
	}
	sqlDB := f.verifySQL()
	if st, err := activities.DatabaseState(context.Background(), sqlDB, "Sales_verify"); err != nil || st == nil || st.State != "RESTORING" {
		t.Fatalf("the copy after the crash: %+v, %v; want RESTORING", st, err)
	}
	if _, err := activities.GuardCopy(f.acts.Activities, context.Background(), sqlDB, &f.cfg.Databases[0], "verify01", "Sales_verify", "replaced", p.Remote); err != nil {
		t.Fatalf("the guard refuses the product's own copy cut between base and differential: %v", err)
	}
	bases := func() int {
		n := 0
		for _, r := range statements(f.verify, "RESTORE DATABASE") {
			if strings.Contains(r.SQL, baseFile) {
				n++
			}
		}
		return n
	}
	before := bases()
	f.must(f.acts.Restore, verify, nil)
	if n := bases(); n != before {
		t.Errorf("the retry restored the base again (%d RESTOREs of it, %d before)", n, before)
	}
	if got := rowsIn(t, f.verify.DSN("sa", sqlPassword, "Sales_verify")); got != want {
		t.Fatalf("the copy holds %d rows, want %d", got, want)
	}
	f.must(f.acts.CheckDB, verify, nil)
	if m := f.load(p.Remote, seq); m.State != catalog.StateChecked || !activities.SameGUID(m.Proof.BackupSetGUID, m.Header.BackupSetGUID) {
		t.Fatalf("after CHECKDB: %s, proof %+v", m.State, m.Proof)
	}
}
