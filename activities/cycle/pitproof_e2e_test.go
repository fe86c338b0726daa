package cycle_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/activities/logs"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/storage/location"
	"github.com/backupcycle/backupcycle/internal/storage/storagetest"
)

// proofSiteWith is newProofSite with more YAML for the database (after
// the log keys); shape changes the site's options further.
func proofSiteWith(t *testing.T, mode, extra string, shape ...func(*sitetest.Options)) *proofSite {
	o := sitetest.Options{Database: "Ledger", CommitLog: true, ManifestKeys: []string{"k1"},
		Extra: "      - name: commits\n        query: SELECT COUNT_BIG(*) FROM dbo.CommitLog\n        at_least: 1\n" +
			"    owns_backup_chain: true\n    log_backup: {every: 1m}\n    log_proof: " + mode + "\n" + extra}
	for _, f := range shape {
		f(&o)
	}
	f := cycle.NewSQLFixtureOf(t, o)
	e := newE2E(t, f, nil)
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(logs.New(f.Acts().Activities))
	return &proofSite{t: t, f: f, e: e, env: env}
}

// provenLogs takes n log backups, each after three commits a quarter of a
// second apart, copies them and applies them to the standby copy: a
// proven window with rows to split.
func (p *proofSite) provenLogs(n int) {
	p.t.Helper()
	for range n {
		for range 3 {
			p.commit(1)
			time.Sleep(250 * time.Millisecond)
		}
		p.logAndCopy()
		if _, err := p.apply(); err != nil {
			p.t.Fatal(err)
		}
	}
}

// proofRecord is the database's proof record on the copy target.
func (p *proofSite) proofRecord() *catalog.LogProofRecord {
	p.t.Helper()
	keys, _ := p.f.Config().ManifestKeyRing()
	st, err := local.Open(context.Background(), p.f.Dir("bak02"))
	if err != nil {
		p.t.Fatal(err)
	}
	defer st.Close()
	r, err := catalog.LoadLogProof(context.Background(), catalog.StorageFS{Storage: st}, keys, "sql01", "Ledger")
	if err != nil || r == nil {
		p.t.Fatalf("proof record: %v, %v", r, err)
	}
	return r
}

// sourceRow is a row of the source's dbo.CommitLog: its id and commit
// time on the source's clock.
type sourceRow struct {
	id int64
	at time.Time
}

// sourceRows are the source's dbo.CommitLog rows, by id.
func (p *proofSite) sourceRows() []sourceRow {
	p.t.Helper()
	rows, err := master(p.t, p.f.Source()).Query("SELECT id, committed_at FROM [Ledger].dbo.CommitLog ORDER BY id")
	if err != nil {
		p.t.Fatal(err)
	}
	defer rows.Close()
	var out []sourceRow
	for rows.Next() {
		var r sourceRow
		if err := rows.Scan(&r.id, &r.at); err != nil {
			p.t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// committedBy are the ids of the source's dbo.CommitLog rows committed at
// or before wall (the source's clock), and the count of all its rows.
func (p *proofSite) committedBy(wall time.Time) ([]int64, int) {
	p.t.Helper()
	rows := p.sourceRows()
	var out []int64
	for _, r := range rows {
		if !r.at.After(wall) {
			out = append(out, r.id)
		}
	}
	return out, len(rows)
}

func (p *proofSite) dbExists(name string) bool {
	p.t.Helper()
	var n int
	if err := master(p.t, p.f.Verify()).QueryRow("SELECT COUNT(*) FROM sys.databases WHERE name = @p1", name).Scan(&n); err != nil {
		p.t.Fatal(err)
	}
	return n > 0
}

// The point-in-time proof end to end: a database named like the scratch
// copy that the product did not restore is left alone; the copy restored
// to a random instant T of the proven window holds exactly the rows the
// source committed at or before T, passes the sanity checks and CHECKDB,
// the result is recorded, and the copy is dropped.
func TestPITProofRestoresExactlyTheRowsCommittedByT(t *testing.T) {
	p := proofSiteWith(t, "standby", "    pit_proof: {every: 24h, checkdb: true}\n")
	p.commit(20)
	p.verified()
	p.provenLogs(4)

	sitetest.ExecIn(t, p.f.Verify(), "master", "CREATE DATABASE [Ledger_standby_proof]")
	var out logs.ProofOutput
	err := p.run(logs.New(nil).PITProof, logs.PITProofInput{Database: "Ledger", Instance: "sql01", Fraction: 0.5}, &out)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrVerifyDatabaseInUse {
		t.Fatalf("PITProof over a foreign Ledger_standby_proof: %v, want VerifyDatabaseInUse", err)
	}
	if err := p.run(logs.New(nil).DropProofCopy, logs.DropProofInput{Database: "Ledger", Instance: "sql01"}, nil); err == nil || !p.dbExists("Ledger_standby_proof") {
		t.Fatalf("DropProofCopy of a foreign Ledger_standby_proof: %v", err)
	}
	sitetest.ExecIn(t, p.f.Verify(), "master", "DROP DATABASE [Ledger_standby_proof]")

	vdb := master(t, p.f.Verify())
	split := 0
	for i, f := range []float64{0.6, 0.9} {
		out = logs.ProofOutput{}
		if err := p.run(logs.New(nil).PITProof, logs.PITProofInput{Database: "Ledger", Instance: "sql01", Fraction: f}, &out); err != nil {
			t.Fatalf("PITProof at %v: %v", f, err)
		}
		if !out.OK || out.Skipped != "" || out.Target.IsZero() || out.Copy != "Ledger_standby_proof" {
			t.Fatalf("PITProof at %v: %+v", f, out)
		}
		rec := p.proofRecord()
		res := rec.PIT[len(rec.PIT)-1]
		if len(rec.PIT) != i+1 || !res.OK || !res.CheckDB || !res.Target.Equal(out.Target) || res.At.Before(res.StartedAt) || rec.Scratch == nil {
			t.Fatalf("recorded %+v (%d results), scratch %+v", res, len(rec.PIT), rec.Scratch)
		}
		want, all := p.committedBy(res.StopAt)
		got := ids(t, vdb, "Ledger_standby_proof")
		if !slices.Equal(got, want) {
			t.Fatalf("restored to %s: the copy holds %d rows, the source committed %d by then (%d in all)", out.Target, len(got), len(want), all)
		}
		if len(want) > 20 && len(want) < all {
			split++
		}
		t.Logf("restored to %s (fraction %v): %d of %d rows, logs %d-%d, took %s", out.Target, f, len(got), all, out.FirstLog, out.LastLog, out.Took)
		if err := p.run(logs.New(nil).DropProofCopy, logs.DropProofInput{Database: "Ledger", Instance: "sql01"}, nil); err != nil {
			t.Fatal(err)
		}
		if p.dbExists("Ledger_standby_proof") || p.proofRecord().Scratch != nil {
			t.Fatal("the scratch copy or its record is still there after DropProofCopy")
		}
	}
	if split == 0 {
		t.Fatal("no target split the rows committed after the full: the test proves nothing")
	}
}

// The source's clock moves to another offset from UTC after the full (a
// change of daylight saving time, a server moved to another zone): its
// log backups and commits after the change carry the new offset, and
// STOPAT, a time on the source's clock, must name T with the offset of
// the log that reaches it, not the full's. The copy then holds exactly
// the rows committed at or before the instant T.
func TestPITProofAfterTheSourcesOffsetChanged(t *testing.T) {
	p := proofSiteWith(t, "standby", "    pit_proof: {every: 24h}\n")
	p.commit(20)
	p.verified()
	p.commit(3)
	atUTC := len(ids(t, master(t, p.f.Source()), "Ledger")) // committed on UTC
	p.f.RestartSource(func(c *sqlsim.Config) { c.TimeZone = time.FixedZone("UTC+2", 2*3600) })
	p.provenLogs(4)
	// T halfway between the starts of logs 2 and 3: log 3 reaches it, and
	// the source's offset was +2 hours all along from before log 2 to log 3.
	rec := p.record("bak02")
	full, l2, l3, l4 := rec.Fulls[len(rec.Fulls)-1].FinishUTC, rec.Log(2).BackupStartUTC, rec.Log(3).BackupStartUTC, rec.Log(4).BackupStartUTC
	if o := rec.Log(3).UTCOffsetMinutes; o == nil || *o != 120 {
		t.Fatalf("log 3 recorded with offset %v, want +120 minutes", o)
	}
	target := l2.Add(l3.Sub(l2) / 2)
	var out logs.ProofOutput
	in := logs.PITProofInput{Database: "Ledger", Instance: "sql01", Fraction: float64(target.Sub(full)) / float64(l4.Sub(full))}
	if err := p.run(logs.New(nil).PITProof, in, &out); err != nil || !out.OK {
		t.Fatalf("PITProof: %+v, %v", out, err)
	}
	if out.LastLog != 3 || out.Target.Before(l2) || !out.Target.Before(l3) {
		t.Fatalf("PITProof to %s with logs %d-%d, want a target between the starts of logs 2 (%s) and 3 (%s)", out.Target, out.FirstLog, out.LastLog, l2, l3)
	}
	// Each row's instant: its commit time on the clock of its day, UTC
	// for the first atUTC rows, UTC+2 after the restart.
	rows := p.sourceRows()
	n := len(rows)
	var want []int64
	for i, r := range rows {
		at := r.at
		if i >= atUTC {
			at = at.Add(-2 * time.Hour)
		}
		if !at.After(out.Target) {
			want = append(want, r.id)
		}
	}
	got := ids(t, master(t, p.f.Verify()), "Ledger_standby_proof")
	if !slices.Equal(got, want) {
		t.Fatalf("restored to %s: the copy holds %d rows, the source committed %d by then (%d before its offset changed)", out.Target, len(got), len(want), atUTC)
	}
	if len(want) <= atUTC+6 || len(want) >= n {
		t.Fatalf("the target %s keeps %d of %d rows: it is not inside log 3, the test proves nothing", out.Target, len(want), n)
	}
	if stop := p.proofRecord().PIT[0].StopAt; !stop.Equal(out.Target.Add(2 * time.Hour)) {
		t.Fatalf("recorded STOPAT %s for T %s, want T on the source's clock of log 3 (+2 hours)", stop, out.Target)
	}
}

// log_proof: nightly: the newest verified full and every copied log since
// restored into the scratch copy, recovered, sanity-checked, each log
// marked proven (nightly) on both servers; the copy holds every row.
func TestNightlyProofProvesEveryCopiedLog(t *testing.T) {
	p := proofSiteWith(t, "nightly", "")
	out, last, err := p.nightlyAfter(3)
	if err != nil {
		t.Fatal(err)
	}
	if !out.OK || out.Skipped != "" || len(out.Proven) == 0 || out.Proven[len(out.Proven)-1] != last || out.LastLog != last {
		t.Fatalf("NightlyProof: %+v, want every log through %d proven", out, last)
	}
	if got, want := ids(t, master(t, p.f.Verify()), "Ledger_standby_proof"), ids(t, master(t, p.f.Source()), "Ledger"); !slices.Equal(got, want) {
		t.Fatalf("the nightly copy holds %d rows, the source %d", len(got), len(want))
	}
	for _, srv := range []string{"bak01", "bak02"} {
		for _, n := range out.Proven {
			if l := p.record(srv).Log(n); l.Proven == nil || l.Proven.Mode != "nightly" || l.Proven.Database != "Ledger_standby_proof" {
				t.Fatalf("log %d on %s: proven %+v, want nightly on Ledger_standby_proof", n, srv, l.Proven)
			}
		}
	}
	if err := p.run(logs.New(nil).DropProofCopy, logs.DropProofInput{Database: "Ledger", Instance: "sql01"}, nil); err != nil || p.dbExists("Ledger_standby_proof") {
		t.Fatalf("DropProofCopy: %v", err)
	}
	t.Logf("nightly proof of set %d and logs %d-%d took %s", out.Sequence, out.FirstLog, out.LastLog, out.Took)
}

// nightlyAfter verifies a full, takes and copies n log backups after it,
// each after a few commits, and runs the nightly proof: its output and the
// number of the last log.
func (p *proofSite) nightlyAfter(n int) (logs.ProofOutput, int64, error) {
	p.t.Helper()
	p.commit(20)
	p.verified()
	var last int64
	for i := range n {
		p.commit(5 + i)
		last = p.logAndCopy().Number
	}
	var out logs.ProofOutput
	err := p.run(logs.New(nil).NightlyProof, logs.NightlyProofInput{Database: "Ledger", Instance: "sql01"}, &out)
	return out, last, err
}

// pit runs a point-in-time proof at fraction f.
func (p *proofSite) pit(f float64) (logs.ProofOutput, error) {
	p.t.Helper()
	var out logs.ProofOutput
	err := p.run(logs.New(nil).PITProof, logs.PITProofInput{Database: "Ledger", Instance: "sql01", Fraction: f}, &out)
	return out, err
}

// dropProof runs DropProofCopy and wants the scratch copy gone.
func (p *proofSite) dropProof(what string) {
	p.t.Helper()
	if err := p.run(logs.New(nil).DropProofCopy, logs.DropProofInput{Database: "Ledger", Instance: "sql01"}, nil); err != nil {
		p.t.Fatalf("DropProofCopy %s: %v", what, err)
	}
	if p.dbExists("Ledger_standby_proof") {
		p.t.Fatalf("DropProofCopy %s: the scratch copy is still there", what)
	}
}

// The verification instance's clock runs back 13 hours (its time zone
// changed; the end of daylight saving time does it by an hour) after a
// point-in-time proof: msdb's restore of that proof's scratch copy bears a
// later wall clock than the instance's GETDATE() recorded before the next
// proof's RESTORE DATABASE, which a crash cuts short. The RESTORING copy
// is still the product's own: the proof run again replaces it, and
// DropProofCopy drops it; so it is after a RESTORE LOG cut short (its
// RESTORE DATABASE confirmed), the instance back in another zone.
func TestProofCopyCutShortAfterTheClockWentBack(t *testing.T) {
	p := proofSiteWith(t, "standby", "    pit_proof: {every: 24h}\n")
	auckland, err := time.LoadLocation("Pacific/Auckland")
	if err != nil {
		t.Fatal(err)
	}
	p.f.RestartVerify(func(c *sqlsim.Config) { c.TimeZone = auckland })
	p.commit(20)
	p.verified()
	p.provenLogs(2)
	if out, err := p.pit(0.5); err != nil || !out.OK {
		t.Fatalf("PITProof: %+v, %v", out, err)
	}
	p.dropProof("after the proof")

	// The clock runs back; the next proof's RESTORE DATABASE is cut short.
	p.f.RestartVerify(func(c *sqlsim.Config) { c.TimeZone = time.UTC })
	cut := func(what string) {
		p.t.Helper()
		if _, err := p.pit(0.5); err == nil {
			t.Fatalf("PITProof through a crash in %s succeeded", what)
		}
		if err := p.f.Verify().Start(); err != nil {
			t.Fatal(err)
		}
		p.f.Verify().SetThrottle(0)
		if st := p.dbState("Ledger_standby_proof"); st != "RESTORING" {
			t.Fatalf("the scratch copy after the cut %s: %q, want RESTORING", what, st)
		}
	}
	p.f.Verify().SetThrottle(2 << 20)
	if err := p.f.Verify().CrashAt(sqlsim.OpRestore, 50); err != nil {
		t.Fatal(err)
	}
	cut("RESTORE DATABASE")
	if out, err := p.pit(0.5); err != nil || !out.OK {
		t.Fatalf("PITProof over its own scratch copy cut short: %+v, %v", out, err)
	}
	p.dropProof("after the proof over its cut copy")
	p.f.Verify().SetThrottle(2 << 20)
	if err := p.f.Verify().CrashAt(sqlsim.OpRestore, 50); err != nil {
		t.Fatal(err)
	}
	cut("RESTORE DATABASE")
	p.dropProof("of its own copy cut short")

	// A RESTORE LOG cut short; the instance comes back 8 hours behind UTC.
	p.f.Verify().CrashOnQuery("RESTORE LOG", 1)
	cut("RESTORE LOG")
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	p.f.RestartVerify(func(c *sqlsim.Config) { c.TimeZone = la })
	if out, err := p.pit(0.5); err != nil || !out.OK {
		t.Fatalf("PITProof over its own copy cut in RESTORE LOG: %+v, %v", out, err)
	}
	p.dropProof("after the proof over its copy cut in RESTORE LOG")
}

// The standby's ApplyLogs and the point-in-time proof run side by side,
// and both write the proof record on the copy target. ApplyLogs reads it,
// applies log 3, and its write of the chain record that marks log 3
// proven hangs (a heartbeat timeout cut it). Meanwhile the proof records
// its own-copy intent in the proof record, and its RESTORE DATABASE is cut
// short by a crash of the verification instance, leaving the scratch copy
// RESTORING. Then ApplyLogs goes on and writes the proof record. The
// proof's retry still knows the RESTORING copy as its own (ApplyLogs
// wrote only its part of the record, not the copy of the proof's it had
// read), replaces it and passes.
func TestPITProofKeepsItsCopyRecordAcrossTheStandbysWrite(t *testing.T) {
	smb := sambatest.Start(t, sambatest.Options{})
	p := proofSiteWith(t, "standby", "    pit_proof: {every: 24h}\n", func(o *sitetest.Options) {
		o.SMB = map[string]*sambatest.Server{"bak02": smb}
	})
	p.commit(20)
	p.verified()
	p.provenLogs(2)
	p.commit(3)
	p.logAndCopy()

	acts := p.f.Acts()
	h := storagetest.NewHold(func(name string) bool { return strings.HasSuffix(name, "chain.json") }, nil)
	acts.Cycle.OpenStorage = func(ctx context.Context, srv *config.BackupServer) (storage.Storage, error) {
		st, err := location.OpenServer(ctx, srv)
		if err != nil {
			return nil, err
		}
		return h.Wrap(st), nil
	}
	var ts testsuite.WorkflowTestSuite
	standby := ts.NewTestActivityEnvironment()
	standby.RegisterActivity(logs.New(acts.Activities))
	applied := make(chan error, 1)
	go func() {
		_, err := standby.ExecuteActivity(logs.New(nil).ApplyLogs, logs.ApplyLogsInput{Database: "Ledger", Instance: "sql01"})
		applied <- err
	}()
	select {
	case <-h.Reached:
	case err := <-applied:
		t.Fatalf("ApplyLogs ended before it marked log 3 proven: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("ApplyLogs never marked log 3 proven")
	}

	p.f.Verify().SetThrottle(2 << 20)
	if err := p.f.Verify().CrashAt(sqlsim.OpRestore, 50); err != nil {
		t.Fatal(err)
	}
	if _, err := p.pit(0.5); err == nil {
		t.Fatal("PITProof through a crash in its RESTORE DATABASE succeeded")
	}
	if err := p.f.Verify().Start(); err != nil {
		t.Fatal(err)
	}
	p.f.Verify().SetThrottle(0)
	if st := p.dbState("Ledger_standby_proof"); st != "RESTORING" {
		t.Fatalf("the scratch copy after the cut: %q, want RESTORING", st)
	}
	h.Release()
	if err := <-applied; err != nil {
		t.Fatalf("ApplyLogs: %v", err)
	}
	if rec := p.proofRecord(); rec.Scratch == nil || rec.Standby == nil || rec.Standby.AppliedThrough != 3 {
		t.Errorf("proof record after ApplyLogs' write: scratch %+v, standby %+v: want the proof's intent and log 3 applied", rec.Scratch, rec.Standby)
	}
	if out, err := p.pit(0.5); err != nil || !out.OK {
		t.Fatalf("PITProof over its own scratch copy cut short: %+v, %v", out, err)
	}
	p.dropProof("after the proof over its cut copy")
	if rec := p.proofRecord(); rec.Standby == nil || rec.Standby.AppliedThrough != 3 || len(rec.PIT) != 1 {
		t.Fatalf("proof record after the proof: standby %+v, %d results", rec.Standby, len(rec.PIT))
	}
}
