package cycle_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/activities/logs"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/logchain"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// master opens a connection to in's master database (closed at the end).
func master(t *testing.T, in interface {
	DSN(user, password, db string) string
}) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlserver", in.DSN("sa", sitetest.Password, "master"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// proofSite is a site whose database takes log backups proven on a
// standby copy, the cycle on the embedded Temporal server and the log
// chain's activities in an activity environment.
type proofSite struct {
	t   *testing.T
	f   *cycle.SQLFixture
	e   *e2e
	env *testsuite.TestActivityEnvironment
}

func newProofSite(t *testing.T) *proofSite { return newProofSiteOf(t, "") }

// newProofSiteOf is newProofSite with extra lines of the database's
// configuration.
func newProofSiteOf(t *testing.T, extra string) *proofSite {
	f := cycle.NewSQLFixtureOf(t, sitetest.Options{Database: "Ledger", CommitLog: true, ManifestKeys: []string{"k1"},
		Extra: "    owns_backup_chain: true\n    log_backup: {every: 1m}\n    log_proof: standby\n" + extra})
	e := newE2E(t, f, nil)
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(logs.New(f.Acts().Activities))
	return &proofSite{t: t, f: f, e: e, env: env}
}

func (p *proofSite) run(fn, in, out any) error {
	p.t.Helper()
	v, err := p.env.ExecuteActivity(fn, in)
	if err == nil && out != nil && v != nil && v.HasValue() {
		if err := v.Get(out); err != nil {
			p.t.Fatal(err)
		}
	}
	return err
}

func (p *proofSite) verified() {
	p.t.Helper()
	if res, _, err := p.e.cycle("Ledger"); err != nil || res.Sequence == 0 {
		p.t.Fatalf("cycle: %+v, %v", res, err)
	}
}

func (p *proofSite) commit(n int) {
	p.t.Helper()
	for range n {
		if err := p.f.Source().CommitNow("Ledger"); err != nil {
			p.t.Fatal(err)
		}
	}
}

// logAndCopy takes one log backup and copies it.
func (p *proofSite) logAndCopy() logs.BackupLogOutput {
	p.t.Helper()
	var out logs.BackupLogOutput
	if err := p.run(logs.New(nil).BackupLog, logs.BackupLogInput{Database: "Ledger", Instance: "sql01"}, &out); err != nil || out.Number == 0 {
		p.t.Fatalf("BackupLog: %+v, %v", out, err)
	}
	var c logs.CopyLogsOutput
	if err := p.run(logs.New(nil).CopyLogs, logs.CopyLogsInput{Database: "Ledger", Instance: "sql01", Chain: out.Chain}, &c); err != nil {
		p.t.Fatalf("CopyLogs: %v", err)
	}
	return out
}

func (p *proofSite) apply() (logs.ApplyLogsOutput, error) {
	p.t.Helper()
	var out logs.ApplyLogsOutput
	err := p.run(logs.New(nil).ApplyLogs, logs.ApplyLogsInput{Database: "Ledger", Instance: "sql01"}, &out)
	return out, err
}

// ids are the ids of dbo.CommitLog in db on in, in order.
func ids(t *testing.T, db *sql.DB, name string) []int64 {
	t.Helper()
	rows, err := db.Query(fmt.Sprintf("SELECT id FROM [%s].dbo.CommitLog", name))
	if err != nil {
		t.Fatalf("read %s.dbo.CommitLog: %v", name, err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (p *proofSite) record(server string) *catalog.ChainRecord {
	p.t.Helper()
	keys, _ := p.f.Config().ManifestKeyRing()
	st, err := local.Open(context.Background(), p.f.Dir(server))
	if err != nil {
		p.t.Fatal(err)
	}
	r, err := catalog.LoadChain(context.Background(), catalog.StorageFS{Storage: st}, keys, "sql01", "Ledger", 1, 1)
	if err != nil {
		p.t.Fatal(err)
	}
	return r
}

// The standby proof end to end: the guard keeps a database it did not
// restore, the copy is seeded from the verified full's remote copy WITH
// STANDBY, each copied log is applied and marked proven on both servers,
// the copy holds exactly the rows committed before the log it stands at,
// a newer verified full does not re-seed it, and a RESTORE LOG cut short
// by a crash of the verification instance is applied again.
func TestStandbyProofAppliesEveryCopiedLog(t *testing.T) {
	p := newProofSite(t)
	p.commit(20)
	p.verified()

	// A database named like the standby copy that the product did not
	// restore is never replaced.
	sitetest.ExecIn(t, p.f.Verify(), "master", "CREATE DATABASE [Ledger_standby]")
	p.logAndCopy()
	_, err := p.apply()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrVerifyDatabaseInUse {
		t.Fatalf("ApplyLogs over a foreign Ledger_standby: %v, want VerifyDatabaseInUse", err)
	}
	sitetest.ExecIn(t, p.f.Verify(), "master", "DROP DATABASE [Ledger_standby]")

	vdb, src := master(t, p.f.Verify()), master(t, p.f.Source())
	var lat []time.Duration
	seeded := false
	for i := range 4 {
		p.commit(10 + i)
		lb := p.logAndCopy()
		out, err := p.apply()
		if err != nil {
			t.Fatalf("ApplyLogs after log %d: %v", lb.Number, err)
		}
		seeded = seeded || out.Seeded
		if out.Through != lb.Number || out.Waiting != "" {
			t.Fatalf("after log %d: %+v", lb.Number, out)
		}
		// Row by row: the standby holds every row committed before the
		// log backup's end, and nothing else.
		if got, want := ids(t, vdb, "Ledger_standby"), ids(t, src, "Ledger"); !slices.Equal(got, want) {
			t.Fatalf("after log %d the standby holds %d rows (%v...), the source %d", lb.Number, len(got), got[:min(3, len(got))], len(want))
		}
		for _, srv := range []string{"bak01", "bak02"} {
			l := p.record(srv).Log(lb.Number)
			if l.Proven == nil || l.Proven.Mode != "standby" || l.Proven.Database != "Ledger_standby" {
				t.Fatalf("log %d on %s: proven %+v, want standby on Ledger_standby", lb.Number, srv, l.Proven)
			}
			if srv == "bak02" {
				lat = append(lat, l.Proven.At.Sub(l.BackupFinishUTC))
			}
		}
	}
	if !seeded {
		t.Fatal("the standby copy was never seeded")
	}

	// A newer verified full: the chain goes on, the copy is not re-seeded.
	p.verified()
	p.commit(5)
	lb := p.logAndCopy()
	out, err := p.apply()
	if err != nil || out.Seeded || out.Sequence != 1 || out.Through != lb.Number {
		t.Fatalf("after a newer verified full: %+v, %v: want log %d applied to the copy seeded from set 1", out, err, lb.Number)
	}

	// A crash of the verification instance during RESTORE LOG: the copy
	// stays where the previous log left it, and the log applies again.
	p.commit(3000)
	lb = p.logAndCopy()
	p.crashInApply(256<<10, "RESTORE LOG")
	if err := p.f.Verify().Restart(); err != nil {
		t.Fatal(err)
	}
	p.f.Verify().SetThrottle(0)
	out, err = p.apply()
	if err != nil || out.Seeded || out.Through != lb.Number {
		t.Fatalf("after the crash: %+v, %v: want log %d applied again without re-seeding", out, err, lb.Number)
	}
	if got, want := ids(t, master(t, p.f.Verify()), "Ledger_standby"), ids(t, src, "Ledger"); !slices.Equal(got, want) {
		t.Fatalf("after the crash the standby holds %d rows, the source %d", len(got), len(want))
	}

	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("log backup finished to proven on the standby: median %s, max %s over %d logs", lat[len(lat)/2], lat[len(lat)-1], len(lat))
}

// A standby that lags behind a run of verified fulls: retention
// (keep_verified 2) deletes the chain's logs that end before the older
// kept full, among them the log the standby needs next. The chain is
// whole; the standby fell behind what is kept. It is re-seeded from the
// newest verified full and goes on with the chain's logs, instead of
// failing on the deleted file as if the set were corrupt.
func TestStandbyBehindWhatRetentionKeepsIsSeededAgain(t *testing.T) {
	p := newProofSiteOf(t, "    retention: {keep_verified: 2}\n")
	p.seeded() // from set 1, the chain's base, through log 1
	// The standby falls behind: logs 2 and 3 are not applied before two
	// more fulls are verified; log 4 contains set 2's end.
	for range 2 {
		p.commit(3)
		p.logAndCopy()
	}
	p.verified() // set 2
	p.commit(3)
	p.logAndCopy()
	p.verified() // set 3: keeps sets 2 and 3, the logs before set 2's end go
	for _, srv := range []string{"bak01", "bak02"} {
		r := p.record(srv)
		if _, err := os.Stat(filepath.Join(p.f.Dir(srv), r.LogFileName(2, 1, 1))); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("log 2 on %s after retention with keep_verified 2: %v; want it deleted", srv, err)
		}
	}
	p.commit(3)
	lb := p.logAndCopy()
	out, err := p.apply()
	if err != nil || !out.Seeded || out.Sequence != 3 || out.Through != lb.Number || out.Waiting != "" {
		t.Fatalf("ApplyLogs with the log it needs next deleted by retention: %+v, %v; want the standby seeded again from set 3 and log %d applied",
			out, err, lb.Number)
	}
	if got, want := ids(t, master(t, p.f.Verify()), "Ledger_standby"), ids(t, master(t, p.f.Source()), "Ledger"); !slices.Equal(got, want) {
		t.Fatalf("the standby holds %d rows, the source %d", len(got), len(want))
	}
	// And it goes on from there.
	p.commit(3)
	lb = p.logAndCopy()
	if out, err := p.apply(); err != nil || out.Seeded || out.Through != lb.Number {
		t.Fatalf("ApplyLogs after the re-seed: %+v, %v; want log %d applied", out, err, lb.Number)
	}
}

// A log file gone that a kept verified full still needs is damage, not
// retention: log 2 lies between sets 1 and 2, both kept (keep_verified
// 2), so a point between them needs it. The standby is not quietly
// seeded again from set 2 past the hole; the missing file is reported.
func TestStandbyReportsALogGoneThatAKeptFullNeeds(t *testing.T) {
	p := newProofSiteOf(t, "    retention: {keep_verified: 2}\n")
	p.seeded() // from set 1, the chain's base, through log 1
	p.commit(3)
	p.logAndCopy() // log 2
	p.verified()   // set 2: sets 1 and 2 kept
	p.commit(3)
	p.logAndCopy() // log 3, holding set 2's end
	name := filepath.Join(p.f.Dir("bak02"), p.record("bak02").LogFileName(2, 1, 1))
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	out, err := p.apply()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrCorruptBackup || out.Seeded {
		t.Fatalf("ApplyLogs with log 2 gone while set 1 is kept: %+v, %v; want CorruptBackup, not a re-seed past it", out, err)
	}
}

// The chain's full was backed up to the chain's copy target (the rotation
// took bak02 for it; the chain lives on bak01 and is copied to bak02): the
// standby at bak02's site is seeded from that verified set, which bak02
// holds as its primary, instead of waiting for the next set the rotation
// sends to bak01 (in the meantime no log of the chain was proven).
func TestStandbySeedsFromAFullWhosePrimaryIsTheCopyTarget(t *testing.T) {
	p := newProofSite(t)
	p.commit(5)
	p.verified() // set 1: bak01 -> bak02
	p.commit(5)
	p.verified() // set 2: bak02 -> bak01, the chain's full
	if m := p.f.ManifestOf("bak02", "Ledger", 2); m.PrimaryServer != "bak02" {
		t.Fatalf("set 2's primary is %s, want bak02 (the rotation)", m.PrimaryServer)
	}
	p.commit(3)
	lb := p.logAndCopy()
	out, err := p.apply()
	if err != nil || !out.Seeded || out.Through != lb.Number || out.Waiting != "" {
		t.Fatalf("ApplyLogs after the chain's first log %d: %+v, %v; want the standby seeded from set 2 and the log applied", lb.Number, out, err)
	}
}

// The source restored over itself from an older set starts a new
// recovery path; the next chain starts on the first full of that path.
// A full of the path before the restore has higher LSNs than that chain's
// base, yet none of its logs applies to it (4330): the standby of the new
// chain is seeded from the new chain's full, and the old full is never
// listed in the new chain.
func TestStandbyIgnoresAFullOfThePathBeforeARestoreOfTheSource(t *testing.T) {
	p := newProofSite(t)
	p.commit(5)
	p.verified() // set 1
	p.commit(60)
	p.verified() // set 2: LSNs far past set 1's
	p.commit(2)
	p.logAndCopy()
	if out, err := p.apply(); err != nil || out.Through != 1 {
		t.Fatalf("ApplyLogs of chain 1: %+v, %v", out, err)
	}

	// A DBA restores Ledger over itself from set 1.
	m := p.f.Manifest("bak01", 1)
	srv, _ := p.f.Config().BackupServer(m.PrimaryServer)
	var disks []string
	for _, s := range m.Stripes {
		disks = append(disks, tsql.JoinPath(srv.UNCPaths[0], s.Name))
	}
	stmt, err := tsql.RestoreDatabase(tsql.RestoreOptions{Database: "Ledger", Disks: disks, Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	sitetest.ExecIn(t, p.f.Source(), "master", stmt)

	p.commit(2)
	var out logs.BackupLogOutput
	if err := p.run(logs.New(nil).BackupLog, logs.BackupLogInput{Database: "Ledger", Instance: "sql01"}, &out); err != nil || !out.NeedFull {
		t.Fatalf("the first log backup after the restore: %+v, %v; want the chain broken", out, err)
	}
	p.verified() // set 3: the first full of the new path
	m3 := p.f.Manifest("bak01", 3)
	if m2 := p.f.Manifest("bak01", 2); !logchainLess(m3.Header.LastLSN, m2.Header.LastLSN) {
		t.Fatalf("set 3 (LSN %s) does not end before set 2: the case is not built", m3.Header.LastLSN)
	}
	p.commit(2)
	lb := p.logAndCopy()
	if lb.Chain != 2 {
		t.Fatalf("the log after set 3: %+v, want chain 2", lb)
	}
	got, err := p.apply()
	if err != nil || got.Sequence != 3 || got.Through != lb.Number || got.Waiting != "" {
		t.Fatalf("ApplyLogs of chain 2: %+v, %v; want the standby seeded from set 3 and log %d applied", got, err, lb.Number)
	}
	for _, srv := range []string{"bak01", "bak02"} {
		keys, _ := p.f.Config().ManifestKeyRing()
		st, err := local.Open(context.Background(), p.f.Dir(srv))
		if err != nil {
			t.Fatal(err)
		}
		r, err := catalog.LoadChain(context.Background(), catalog.StorageFS{Storage: st}, keys, "sql01", "Ledger", 2, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range r.Fulls {
			if f.Sequence < 3 {
				t.Fatalf("chain 2 on %s lists full %d, a full of the recovery path before the restore", srv, f.Sequence)
			}
		}
	}
}

func logchainLess(a, b string) bool { return logchain.LSN(a).Less(logchain.LSN(b)) }

// crashInApply runs ApplyLogs into a crash of the verification instance
// at half of its next RESTORE, which reads its backups at rate bytes a
// second; the instance is left down.
func (p *proofSite) crashInApply(rate int64, what string) {
	p.t.Helper()
	p.f.Verify().SetThrottle(rate)
	if err := p.f.Verify().CrashAt(sqlsim.OpRestore, 50); err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.apply(); err == nil {
		p.t.Fatalf("ApplyLogs through a crash of the verification instance in %s succeeded", what)
	}
}

// seeded verifies a full, takes and copies a log backup and seeds the
// standby copy with it.
func (p *proofSite) seeded() {
	p.t.Helper()
	p.commit(20)
	p.verified()
	p.commit(5)
	lb := p.logAndCopy()
	if out, err := p.apply(); err != nil || !out.Seeded || out.Through != lb.Number {
		p.t.Fatalf("ApplyLogs: %+v, %v; want the standby seeded and log %d applied", out, err, lb.Number)
	}
}

// dbState is name's state_desc on the verification instance ("" for
// no such database).
func (p *proofSite) dbState(name string) string {
	p.t.Helper()
	var st string
	err := master(p.t, p.f.Verify()).QueryRow("SELECT state_desc FROM sys.databases WHERE name = @p1", name).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return ""
	}
	if err != nil {
		p.t.Fatal(err)
	}
	return st
}

// The verification instance's clock runs back an hour (daylight saving
// time ends; a time zone change does it by up to a day) after the standby
// copy was seeded: msdb's restore of that seed bears a later wall clock
// than the instance's GETDATE() recorded before the next seeding, which a
// crash of the instance cuts short. The RESTORING copy is still the
// product's own: the next ApplyLogs seeds it again and applies the chain's
// logs. A RESTORE LOG cut short, the instance back in yet another zone,
// applies again without re-seeding.
func TestStandbySeedCutShortAfterTheClockWentBack(t *testing.T) {
	p := newProofSite(t)
	p.f.RestartVerify(func(c *sqlsim.Config) { c.TimeZone = time.FixedZone("CEST", 2*3600) })
	p.seeded()

	// Winter time; the standby copy is gone (a DBA dropped it): it is
	// seeded again, and the instance crashes in that RESTORE.
	p.f.RestartVerify(func(c *sqlsim.Config) { c.TimeZone = time.FixedZone("CET", 3600) })
	sitetest.ExecIn(t, p.f.Verify(), "master", "DROP DATABASE [Ledger_standby]")
	p.commit(5)
	lb := p.logAndCopy()
	p.crashInApply(2<<20, "the seeding RESTORE")
	if err := p.f.Verify().Start(); err != nil {
		t.Fatal(err)
	}
	p.f.Verify().SetThrottle(0)
	if st := p.dbState("Ledger_standby"); st != "RESTORING" {
		t.Fatalf("the standby copy after the cut seeding: %q, want RESTORING", st)
	}
	out, err := p.apply()
	if err != nil || !out.Seeded || out.Through != lb.Number {
		t.Fatalf("ApplyLogs over its own seeding cut short: %+v, %v; want the standby seeded again and log %d applied", out, err, lb.Number)
	}

	// A RESTORE LOG cut short; the instance comes back 13 hours ahead.
	p.commit(3000)
	lb = p.logAndCopy()
	p.crashInApply(256<<10, "RESTORE LOG")
	auckland, err := time.LoadLocation("Pacific/Auckland")
	if err != nil {
		t.Fatal(err)
	}
	p.f.RestartVerify(func(c *sqlsim.Config) { c.TimeZone = auckland })
	out, err = p.apply()
	if err != nil || out.Seeded || out.Through != lb.Number {
		t.Fatalf("after the cut RESTORE LOG: %+v, %v; want log %d applied again without re-seeding", out, err, lb.Number)
	}
	if got, want := ids(t, master(t, p.f.Verify()), "Ledger_standby"), ids(t, master(t, p.f.Source()), "Ledger"); !slices.Equal(got, want) {
		t.Fatalf("the standby holds %d rows, the source %d", len(got), len(want))
	}
}

// The standby copy is seeded again and the worker dies after the seeding
// RESTORE ended, before the confirmation was saved; the instance's clock
// had run back an hour between the own-copy record and that RESTORE (it
// came back in another time zone, or daylight saving time ended): the
// copy's create_date is before the GETDATE() the record holds. The copy is
// still the product's own: the next ApplyLogs seeds it again and applies
// the chain's logs.
func TestStandbySeedFinishedUnseenAfterTheClockWentBack(t *testing.T) {
	p := newProofSite(t)
	p.seeded()

	// A DBA dropped the copy; it is seeded again, and the worker is lost
	// once its RESTORE ended: the confirmation's read of msdb fails.
	sitetest.ExecIn(t, p.f.Verify(), "master", "DROP DATABASE [Ledger_standby]")
	p.commit(5)
	lb := p.logAndCopy()
	p.f.Verify().FailQueries("rh.restore_type = 'D'", 10054, 20, "TCP Provider: An existing connection was forcibly closed by the remote host.")
	if _, err := p.apply(); err == nil {
		t.Fatal("ApplyLogs with its confirmation lost succeeded")
	}
	p.f.Verify().FailQueries("rh.restore_type = 'D'", 0, 0, "")
	if st := p.dbState("Ledger_standby"); st != "ONLINE" {
		t.Fatalf("the standby copy after its seeding RESTORE: %q, want ONLINE (read-only, STANDBY)", st)
	}
	// The record as the worker wrote it with the instance an hour ahead.
	keys, _ := p.f.Config().ManifestKeyRing()
	st, err := local.Open(context.Background(), p.f.Dir("bak02"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec := p.proofRecord()
	v := &rec.Standby.Copy
	if v.Confirmed() {
		t.Fatalf("the standby copy's record after the lost confirmation: %+v, want it unconfirmed", v)
	}
	v.InstanceTime = v.InstanceTime.Add(time.Hour)
	v.SetUTCOffset(*v.UTCOffsetMinutes + 60)
	if err := catalog.SaveLogProof(context.Background(), catalog.StorageFS{Storage: st}, keys, rec); err != nil {
		t.Fatal(err)
	}

	out, err := p.apply()
	if err != nil || !out.Seeded || out.Through != lb.Number {
		t.Fatalf("ApplyLogs over its own seeding ended unseen: %+v, %v; want the standby seeded again and log %d applied", out, err, lb.Number)
	}
	if got, want := ids(t, master(t, p.f.Verify()), "Ledger_standby"), ids(t, master(t, p.f.Source()), "Ledger"); !slices.Equal(got, want) {
		t.Fatalf("the standby holds %d rows, the source %d", len(got), len(want))
	}
}
