package logs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/logchain"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The log chain's activities against the emulated site: BACKUP LOG over
// real TDS to the emulator (msdb, RESTORE HEADERONLY, the statement log),
// the chain record and the log files on the backup servers' directories.

// The activity environment's run: what a claim of "this chain's workflow"
// names.
const (
	testWorkflowID = "default-test-workflow-id"
	testRunID      = "default-test-run-id"
)

// logExtra turns log backups on for the site's database.
const logExtra = "    owns_backup_chain: true\n    log_backup: {every: 1m}\n"

type logFixture struct {
	t    *testing.T
	site *sitetest.Site
	base *activities.Activities
	acts *Activities
	env  *testsuite.TestActivityEnvironment
}

// newLogFixture is a site whose database Sales has the workload table and
// log backups; extra is more YAML for its entry.
func newLogFixture(t *testing.T, extra string) *logFixture {
	t.Helper()
	return fixtureOn(t, sitetest.New(t, sitetest.Options{Database: "Sales", CommitLog: true, ManifestKeys: []string{"k1"}, Extra: logExtra + extra}))
}

// fixtureOn is the log chain's activities on site.
func fixtureOn(t *testing.T, site *sitetest.Site) *logFixture {
	base := activities.New(nil)
	base.Cycle = activities.CycleDeps{Config: site.Config, Poll: 20 * time.Millisecond}
	f := &logFixture{t: t, site: site, base: base, acts: New(base)}
	var ts testsuite.WorkflowTestSuite
	f.env = ts.NewTestActivityEnvironment()
	f.env.RegisterActivity(cycle.New(base))
	f.env.RegisterActivity(f.acts)
	return f
}

func (f *logFixture) run(fn, in, out any) error {
	f.t.Helper()
	v, err := f.env.ExecuteActivity(fn, in)
	if err != nil {
		return err
	}
	if out != nil && v != nil && v.HasValue() {
		if err := v.Get(out); err != nil {
			f.t.Fatal(err)
		}
	}
	return nil
}

func (f *logFixture) must(fn, in, out any) {
	f.t.Helper()
	if err := f.run(fn, in, out); err != nil {
		f.t.Fatalf("%T(%+v): %v", in, in, err)
	}
}

// full takes a full backup of Sales with the cycle's own activities
// (written on the rotation's next server); verified then advances its
// manifest to verified, as the cycle's later steps would.
func (f *logFixture) full(verified bool) *catalog.Manifest {
	f.t.Helper()
	return f.take(false, verified)
}

// take takes a backup of Sales, a full or a differential on the newest
// verified full, with the cycle's own activities; verified then advances
// its manifest to verified, as the cycle's later steps would.
func (f *logFixture) take(differential, verified bool) *catalog.Manifest {
	f.t.Helper()
	var p activities.Plan
	f.must(f.base.PlanCycle, activities.PlanInput{Database: "Sales", Differential: differential}, &p)
	if p.NoDifferentialBase != "" {
		f.t.Fatal(p.NoDifferentialBase)
	}
	var seq int64
	f.must(cycle.New(f.base).AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
	var b activities.BackupOutput
	f.must(f.base.Backup, activities.BackupInput{Database: "Sales", Sequence: seq, Server: p.Rotation[0], Stripes: p.Stripes, Mode: p.RunMode()}, &b)
	f.must(cycle.New(f.base).WriteManifest, activities.ManifestInput{Database: "Sales", Sequence: seq, Server: p.Rotation[0], Backup: b}, nil)
	st := f.storage(p.Rotation[0])
	m, err := catalog.Load(context.Background(), catalog.StorageFS{Storage: st}, f.keys(), catalog.Of(f.site.Instance, "Sales"), seq)
	if err != nil {
		f.t.Fatal(err)
	}
	if verified {
		for _, s := range []catalog.State{catalog.StateCopied, catalog.StateRestored, catalog.StateChecked, catalog.StateVerified} {
			if err := m.Advance(s, time.Now()); err != nil {
				f.t.Fatal(err)
			}
		}
		if err := catalog.Save(context.Background(), catalog.StorageFS{Storage: st}, f.keys(), m); err != nil {
			f.t.Fatal(err)
		}
	}
	return m
}

func (f *logFixture) keys() *catalog.Keys {
	f.t.Helper()
	k, err := f.site.Config.ManifestKeyRing()
	if err != nil {
		f.t.Fatal(err)
	}
	return k
}

func (f *logFixture) storage(server string) *local.Storage {
	f.t.Helper()
	st, err := local.Open(context.Background(), f.site.Dirs[server])
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

// records are every chain record of Sales on a server, trusted.
func (f *logFixture) records(server string) []*catalog.ChainRecord {
	f.t.Helper()
	l, err := catalog.ListChains(context.Background(), catalog.StorageFS{Storage: f.storage(server)}, f.keys(), catalog.Of(f.site.Instance, "Sales"))
	if err != nil {
		f.t.Fatal(err)
	}
	if len(l.Broken) > 0 {
		f.t.Fatalf("broken chain records on %s: %v", server, l.Broken)
	}
	for _, r := range l.Records {
		if !r.Trusted() {
			f.t.Fatalf("record %s on %s not trusted: %s", r.FileName(), server, r.Auth.Why())
		}
	}
	return l.Records
}

// newest is the newest chain record part on bak01.
func (f *logFixture) newest() *catalog.ChainRecord {
	f.t.Helper()
	rs := f.records("bak01")
	if len(rs) == 0 {
		f.t.Fatal("no chain record on bak01")
	}
	return rs[len(rs)-1]
}

func (f *logFixture) save(r *catalog.ChainRecord) {
	f.t.Helper()
	if err := catalog.SaveChain(context.Background(), catalog.StorageFS{Storage: f.storage("bak01")}, f.keys(), r); err != nil {
		f.t.Fatal(err)
	}
}

func (f *logFixture) backupLog() (BackupLogOutput, error) {
	f.t.Helper()
	var out BackupLogOutput
	err := f.run(f.acts.BackupLog, BackupLogInput{Database: "Sales", Instance: f.site.Instance}, &out)
	return out, err
}

func (f *logFixture) mustBackupLog() BackupLogOutput {
	f.t.Helper()
	out, err := f.backupLog()
	if err != nil {
		f.t.Fatalf("BackupLog: %v", err)
	}
	return out
}

func (f *logFixture) commit(n int) {
	f.t.Helper()
	for range n {
		if err := f.site.Source.CommitNow("Sales"); err != nil {
			f.t.Fatal(err)
		}
	}
}

// sa is a connection to the source as sa (a DBA's, or another tool's).
func (f *logFixture) sa(login string) *sql.DB {
	f.t.Helper()
	db, err := sql.Open("sqlserver", f.site.Source.DSN(login, sitetest.Password, "master"))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { db.Close() })
	return db
}

// msdbLog is one log backup msdb records.
type msdbLog struct {
	name, first, last, user string
}

func (f *logFixture) msdbLogs() []msdbLog {
	f.t.Helper()
	rows, err := f.sa("sa").QueryContext(context.Background(), `SELECT name, CAST(first_lsn AS nvarchar(30)), CAST(last_lsn AS nvarchar(30)), user_name
		FROM msdb.dbo.backupset WHERE database_name = N'Sales' AND type = 'L' ORDER BY backup_set_id`)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []msdbLog
	for rows.Next() {
		var l msdbLog
		var name, user sql.NullString
		if err := rows.Scan(&name, &l.first, &l.last, &user); err != nil {
			f.t.Fatal(err)
		}
		l.name, l.user = name.String, user.String
		out = append(out, l)
	}
	return out
}

func backupLogs(in *sqlsim.Instance) []sqlsim.StatementRecord {
	return sitetest.Statements(in, "BACKUP LOG")
}

func appErr(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is not an application error", err)
	}
	return ae
}

// A chain starts on the newest verified full (not on a newer full that is
// only written), and its log backups chain without a gap: each starts
// where the previous one ended, as msdb records them, and the first
// contains the full's last LSN.
func TestSQLBackupLogChainsOnTheNewestVerifiedFull(t *testing.T) {
	f := newLogFixture(t, "")
	f.commit(3)
	f.full(true)
	f.commit(2)
	base := f.full(true)
	f.commit(2)
	unverified := f.full(false)
	var outs []BackupLogOutput
	for range 3 {
		f.commit(4)
		outs = append(outs, f.mustBackupLog())
	}
	r := f.newest()
	if r.Chain != 1 || len(r.Fulls) == 0 || r.Fulls[0].Sequence != base.Sequence || r.Fulls[0].BackupSetGUID != base.Header.BackupSetGUID {
		t.Fatalf("chain %d starts on full %+v, want the newest verified full %d (not the written %d)", r.Chain, r.Fulls, base.Sequence, unverified.Sequence)
	}
	ms := f.msdbLogs()
	if len(ms) != 3 {
		t.Fatalf("msdb lists %d log backups, want 3: %+v", len(ms), ms)
	}
	for i, out := range outs {
		n := int64(i + 1)
		if out.Chain != 1 || out.Number != n || out.Break != nil || out.NeedFull || out.Files != 1 || out.Bytes == 0 {
			t.Fatalf("log %d: %+v", n, out)
		}
		l := r.Log(n)
		if l == nil || l.State != catalog.LogWritten || l.FirstLSN != ms[i].first || l.LastLSN != ms[i].last || out.LastLSN != ms[i].last {
			t.Fatalf("log %d recorded %+v, msdb %+v", n, l, ms[i])
		}
		if ms[i].name != tsql.BackupLogName(1, n) {
			t.Fatalf("msdb name %q, want %q", ms[i].name, tsql.BackupLogName(1, n))
		}
		if i > 0 && ms[i].first != ms[i-1].last {
			t.Fatalf("log %d starts at %s, log %d ended at %s: a gap", n, ms[i].first, n-1, ms[i-1].last)
		}
		if l.UTCOffsetMinutes == nil || l.BackupFinishUTC.IsZero() || len(l.Files) != 1 || len(l.Files[0].SHA256) != 64 {
			t.Fatalf("log %d: offset, instants or hashed file missing: %+v", n, l)
		}
		if _, err := os.Stat(filepath.Join(f.site.Dirs["bak01"], l.Files[0].Name)); err != nil {
			t.Fatalf("log %d file: %v", n, err)
		}
	}
	parts := f.records("bak01")
	c, err := catalog.AssembleChain(parts, map[string]bool{base.Header.BackupSetGUID: true})
	if err != nil {
		t.Fatal(err)
	}
	if i, ok, gap := c.FirstAfter(c.Base()); !ok || i != 0 || gap != nil {
		t.Fatalf("the first log does not contain the base full's last LSN %s: %d %v %v", c.Base().LastLSN, i, ok, gap)
	}
	if gaps := c.Gaps(); len(gaps) != 0 {
		t.Fatalf("gaps %v", gaps)
	}
	// CopyLogs copies them to bak02, hash-checked, recorded on both.
	var cp CopyLogsOutput
	f.must(f.acts.CopyLogs, CopyLogsInput{Database: "Sales", Instance: f.site.Instance, Chain: 1}, &cp)
	if cp.Through != 3 || len(cp.Copied) != 3 {
		t.Fatalf("CopyLogs %+v, want logs 1-3", cp)
	}
	for _, srv := range sitetest.Servers {
		rs := f.records(srv)
		for n := int64(1); n <= 3; n++ {
			if l := rs[len(rs)-1].Log(n); l.State != catalog.LogCopied {
				t.Fatalf("log %d on %s: %s", n, srv, l.State)
			}
			name := r.Log(n).Files[0].Name
			a, _ := os.ReadFile(filepath.Join(f.site.Dirs["bak01"], name))
			b, err := os.ReadFile(filepath.Join(f.site.Dirs["bak02"], name))
			if err != nil || string(a) != string(b) {
				t.Fatalf("log %d on bak02: %v", n, err)
			}
		}
	}
}

// Without a full backup there is no chain: no BACKUP LOG is sent, and the
// output asks for a full.
func TestSQLBackupLogWithoutFullAsksForOne(t *testing.T) {
	f := newLogFixture(t, "")
	out := f.mustBackupLog()
	if !out.NeedFull || out.Break == nil || out.Number != 0 {
		t.Fatalf("BackupLog without a full: %+v, want a request for a full", out)
	}
	if n := len(backupLogs(f.site.Source)); n != 0 {
		t.Fatalf("%d BACKUP LOG sent without a full", n)
	}
}

// A DBA's switch to SIMPLE and back between two log backups: BACKUP LOG
// fails with 4214, the chain records the break and the number failed, the
// output asks for a full; no chain starts on a full from before the
// break; the next verified full starts chain 2.
func TestSQLBackupLog4214BreaksTheChainUntilTheNextFull(t *testing.T) {
	f := newLogFixture(t, "")
	f.full(true)
	f.commit(2)
	f.mustBackupLog()
	if err := f.site.Source.SetRecoveryModel("Sales", "SIMPLE"); err != nil {
		t.Fatal(err)
	}
	if err := f.site.Source.SetRecoveryModel("Sales", "FULL"); err != nil {
		t.Fatal(err)
	}
	f.commit(2)
	out := f.mustBackupLog()
	if !out.NeedFull || out.Break == nil || out.Break.Reason != string(logchain.BreakRecoveryModel) || !strings.Contains(out.Break.Detail, "4214") {
		t.Fatalf("after SIMPLE and back: %+v, want a recovery_model_switch break naming 4214", out)
	}
	r := f.newest()
	if r.Chain != 1 || r.Break == nil || r.Log(2) == nil || r.Log(2).State != catalog.LogFailed {
		t.Fatalf("record: chain %d break %+v log 2 %+v", r.Chain, r.Break, r.Log(2))
	}
	// Again: still broken, no BACKUP LOG sent.
	sent := len(backupLogs(f.site.Source))
	if again := f.mustBackupLog(); !again.NeedFull || again.Chain != 1 {
		t.Fatalf("second tick after the break: %+v", again)
	}
	if n := len(backupLogs(f.site.Source)); n != sent {
		t.Fatalf("a broken chain sent BACKUP LOG again (%d, was %d)", n, sent)
	}
	next := f.full(true)
	f.commit(2)
	out = f.mustBackupLog()
	if out.Chain != 2 || out.Number != 1 || out.NeedFull {
		t.Fatalf("after the next full: %+v, want chain 2 log 1", out)
	}
	if r := f.newest(); r.Chain != 2 || r.Fulls[0].Sequence != next.Sequence {
		t.Fatalf("chain 2 starts on %+v, want full %d", r.Fulls, next.Sequence)
	}
}

// The first chain on a full taken before a switch to SIMPLE and back: 4214
// on the first log; the break is recorded in the new chain.
func TestSQLBackupLog4214OnTheFirstLog(t *testing.T) {
	f := newLogFixture(t, "")
	f.full(true)
	if err := f.site.Source.SetRecoveryModel("Sales", "SIMPLE"); err != nil {
		t.Fatal(err)
	}
	if err := f.site.Source.SetRecoveryModel("Sales", "FULL"); err != nil {
		t.Fatal(err)
	}
	out := f.mustBackupLog()
	if !out.NeedFull || out.Break == nil || out.Break.Reason != string(logchain.BreakRecoveryModel) {
		t.Fatalf("%+v, want a recovery_model_switch break", out)
	}
	if r := f.newest(); r.Break == nil || r.Log(1).State != catalog.LogFailed {
		t.Fatalf("record %+v", r)
	}
}

// SIMPLE: InvalidConfig naming the ALTER DATABASE that fixes it; the
// running chain records the break.
func TestSQLBackupLogSimpleIsInvalidConfig(t *testing.T) {
	f := newLogFixture(t, "")
	f.full(true)
	f.mustBackupLog()
	if err := f.site.Source.SetRecoveryModel("Sales", "SIMPLE"); err != nil {
		t.Fatal(err)
	}
	_, err := f.backupLog()
	ae := appErr(t, err)
	if ae.Type() != activities.ErrInvalidConfig || !ae.NonRetryable() || !strings.Contains(err.Error(), "ALTER DATABASE [Sales] SET RECOVERY FULL") {
		t.Fatalf("SIMPLE: %v (%s)", err, ae.Type())
	}
	if r := f.newest(); r.Break == nil || r.Break.Reason != string(logchain.BreakSimple) {
		t.Fatalf("break %+v, want simple_recovery", r.Break)
	}
}

// A worker killed mid BACKUP LOG: the claim it left (this chain's
// workflow, an earlier run) and its statement still running on the
// source. The next attempt waits for that statement instead of sending
// another, and records the log.
func TestSQLBackupLogReattachesAfterAWorkerCrash(t *testing.T) {
	f := newLogFixture(t, "")
	f.full(true)
	f.mustBackupLog()
	f.commit(50)
	stmt := f.earlierClaim(2)
	first, err := mssql.Open(context.Background(), mssql.Target{Instance: "sql01", Address: f.site.Source.Addr(), User: "sa",
		Password: sitetest.Password, Encrypt: "disable"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Close() })
	f.site.Source.SetThrottle(4 << 10)
	done := make(chan error, 1)
	go func() {
		_, err := first.Run(context.Background(), "BACKUP LOG", stmt, nil)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(backupLogs(f.site.Source)) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := backupLogs(f.site.Source); len(st) != 2 || !st[1].End.IsZero() {
		t.Fatalf("the first attempt's BACKUP LOG is not running: %+v", st)
	}
	go func() { time.Sleep(300 * time.Millisecond); f.site.Source.SetThrottle(0) }()
	out := f.mustBackupLog()
	if err := <-done; err != nil {
		t.Fatalf("the first attempt's BACKUP LOG: %v", err)
	}
	if !out.Reattached || out.Number != 2 || out.Chain != 1 {
		t.Fatalf("retried BackupLog %+v, want log 2 re-attached", out)
	}
	if n := len(backupLogs(f.site.Source)); n != 2 {
		t.Fatalf("BACKUP LOG ran %d times, want 2 (log 1, and log 2 once)", n)
	}
	if l := f.newest().Log(2); l.State != catalog.LogWritten || l.RunID != testRunID {
		t.Fatalf("log 2 %+v, want written by this run", l)
	}
	// Finished while no worker watched: recognised by its header, not sent.
	f.commit(2)
	stmt = f.earlierClaim(3)
	if _, err := first.Run(context.Background(), "BACKUP LOG", stmt, nil); err != nil {
		t.Fatal(err)
	}
	out = f.mustBackupLog()
	if !out.Reattached || out.Number != 3 || len(backupLogs(f.site.Source)) != 3 {
		t.Fatalf("a finished BACKUP LOG: %+v, %d sent", out, len(backupLogs(f.site.Source)))
	}
}

// earlierClaim leaves log n of chain 1 claimed by an earlier run of this
// chain's workflow (an attempt cut short) and returns the BACKUP LOG that
// attempt sends.
func (f *logFixture) earlierClaim(n int64) string {
	f.t.Helper()
	r := f.newest()
	if _, err := r.Claim(n, testWorkflowID, "an-earlier-run", time.Now()); err != nil {
		f.t.Fatal(err)
	}
	f.save(r)
	srv, _ := f.site.Config.BackupServer("bak01")
	stmt, err := tsql.BackupLog(tsql.BackupLogOptions{Database: "Sales", Disks: []string{tsql.JoinPath(srv.UNCPaths[0], r.LogFileName(n, 1, 1))},
		Chain: 1, Number: n})
	if err != nil {
		f.t.Fatal(err)
	}
	return stmt
}

// A number another run holds (a pending claim of another workflow) is
// never taken again: the next log takes the number after it.
func TestSQLBackupLogNeverReusesANumberAnotherRunHolds(t *testing.T) {
	f := newLogFixture(t, "")
	f.full(true)
	f.mustBackupLog()
	r := f.newest()
	if _, err := r.Claim(2, "logchain/elsewhere/Sales", "other-run", time.Now()); err != nil {
		t.Fatal(err)
	}
	f.save(r)
	f.commit(2)
	out := f.mustBackupLog()
	if out.Number != 3 {
		t.Fatalf("took log %d, want 3 (2 is another run's)", out.Number)
	}
	if l := f.newest().Log(2); l.State != catalog.LogPending || l.WorkflowID != "logchain/elsewhere/Sales" {
		t.Fatalf("the other run's claim changed: %+v", l)
	}
}

// A file already named like the next log backup (a record put back from
// an older copy, a file someone left) is never written over: the number is
// recorded failed, the file stays as it is, and the log takes the next
// number.
func TestSQLBackupLogNeverOverwritesALogFile(t *testing.T) {
	f := newLogFixture(t, "")
	f.full(true)
	f.mustBackupLog()
	r := f.newest()
	name := r.LogFileName(2, 1, 1)
	path := filepath.Join(f.site.Dirs["bak01"], name)
	if err := os.WriteFile(path, []byte("someone's file"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.commit(2)
	out := f.mustBackupLog()
	if b, err := os.ReadFile(path); err != nil || string(b) != "someone's file" {
		t.Fatalf("%s was written over (%d bytes now): %v", name, len(b), err)
	}
	if out.Number != 3 {
		t.Fatalf("took log %d, want 3", out.Number)
	}
	if l := f.newest().Log(2); l.State != catalog.LogFailed || !strings.Contains(l.Failure, name) {
		t.Fatalf("log 2 %+v, want failed naming %s", l, name)
	}
	// The chain stays whole: log 3 starts where log 1 ended.
	ms := f.msdbLogs()
	if ms[len(ms)-1].first != ms[len(ms)-2].last {
		t.Fatalf("gap: %+v", ms)
	}
}

// foreignTool is a login of another backup tool on the source.
func (f *logFixture) foreignTool() *sql.DB {
	f.t.Helper()
	if err := f.site.Source.SetLogin(sqlsim.Login{Name: "tool", Password: sitetest.Password, Sysadmin: true}); err != nil {
		f.t.Fatal(err)
	}
	return f.sa("tool")
}

// Another tool's log backup to a path the worker reaches (bak01's share):
// with adopt_foreign_logs it is copied into the chain (hashed, numbered)
// and the chain goes on through it; the next log of the product starts
// where it ended.
func TestSQLBackupLogAdoptsAReachableForeignLog(t *testing.T) {
	f := newLogFixture(t, "    adopt_foreign_logs: true\n")
	f.full(true)
	f.mustBackupLog()
	f.commit(3)
	tool := f.foreignTool()
	foreignPath := `\\bak01\backup\tool_sales_1.trn`
	if _, err := tool.Exec(`BACKUP LOG [Sales] TO DISK = N'` + foreignPath + `' WITH INIT, NAME = N'NightlyTool'`); err != nil {
		t.Fatal(err)
	}
	f.commit(3)
	out := f.mustBackupLog()
	if len(out.Foreign) != 1 || !out.Foreign[0].Adopted || out.Foreign[0].Path != foreignPath || out.Foreign[0].Tool != "NightlyTool" ||
		out.Foreign[0].User != "tool" || out.Foreign[0].Start.IsZero() {
		t.Fatalf("foreign %+v", out.Foreign)
	}
	if out.NeedFull || out.Break != nil || out.Number != 3 {
		t.Fatalf("%+v, want log 3 after the adopted log 2", out)
	}
	r := f.newest()
	l := r.Log(2)
	if l == nil || l.Foreign == nil || !l.Foreign.Adopted || len(l.Files) != 1 || l.Files[0].Name != r.LogFileName(2, 1, 1) {
		t.Fatalf("adopted log %+v", l)
	}
	// Each log keeps the build that wrote it: the product's from its
	// header, the tool's from msdb.
	for _, n := range []int64{1, 2, 3} {
		if v := r.Log(n).SoftwareVersion; v != "16.0.4135" {
			t.Errorf("log %d records SQL Server build %q, want the source's 16.0.4135", n, v)
		}
	}
	a, _ := os.ReadFile(filepath.Join(f.site.Dirs["bak01"], "tool_sales_1.trn"))
	b, err := os.ReadFile(filepath.Join(f.site.Dirs["bak01"], l.Files[0].Name))
	if err != nil || string(a) != string(b) {
		t.Fatalf("the adopted copy is not the tool's file: %v", err)
	}
	c, err := catalog.AssembleChain(f.records("bak01"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if gaps := c.Gaps(); len(gaps) != 0 {
		t.Fatalf("gaps %v", gaps)
	}
	ms := f.msdbLogs()
	if r.Log(3).FirstLSN != ms[1].last || r.Log(2).LastLSN != ms[1].last {
		t.Fatalf("log 3 %s, adopted log ends %s, msdb %+v", r.Log(3).FirstLSN, r.Log(2).LastLSN, ms)
	}
}

// Another tool's log backup taken before the source's clock moved to
// another offset from UTC (a change of daylight saving time, a restart in
// another zone) keeps the offset it was taken with: msdb records it beside
// the backup's local dates (backupset.time_zone, "using the time zone
// information at the time the backup operation started", backupset
// (Transact-SQL),
// https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/backupset-transact-sql),
// and the instant its record gives is when it ran.
func TestSQLBackupLogForeignLogKeepsItsOwnOffset(t *testing.T) {
	f := newLogFixture(t, "    adopt_foreign_logs: true\n")
	f.full(true)
	f.mustBackupLog()
	f.commit(3)
	ran := time.Now().UTC()
	if _, err := f.foreignTool().Exec(`BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\tool_sales_1.trn' WITH INIT, NAME = N'NightlyTool'`); err != nil {
		t.Fatal(err)
	}
	f.site.RestartSource(func(c *sqlsim.Config) { c.TimeZone = time.FixedZone("UTC+2", 2*3600) })
	f.commit(3)
	out := f.mustBackupLog()
	if len(out.Foreign) != 1 || !out.Foreign[0].Adopted {
		t.Fatalf("foreign %+v", out.Foreign)
	}
	l := f.newest().Log(2)
	if l == nil || l.Foreign == nil || l.UTCOffsetMinutes == nil || *l.UTCOffsetMinutes != 0 {
		t.Fatalf("the tool's log, taken on UTC: recorded with offset %v, started %s (%s on its clock)", offsetOf(l), l.BackupStartUTC, l.BackupStart)
	}
	if d := l.BackupStartUTC.Sub(ran); d < -time.Second || d > 5*time.Second || out.Foreign[0].Start.Sub(ran).Abs() > 5*time.Second {
		t.Fatalf("the tool's log ran at %s; its record says it started at %s (%s in the output)", ran, l.BackupStartUTC, out.Foreign[0].Start)
	}
	if l := f.newest().Log(3); offsetOf(l) != "120" {
		t.Fatalf("the product's log after the change: offset %s, want +120 minutes", offsetOf(l))
	}
}

// offsetOf is a log record's offset from UTC in minutes, for messages.
func offsetOf(l *catalog.LogBackup) string {
	if l == nil || l.UTCOffsetMinutes == nil {
		return "none"
	}
	return fmt.Sprint(*l.UTCOffsetMinutes)
}

// Another tool's log backup to a path the worker cannot reach breaks the
// chain even with adopt_foreign_logs, and without it one it could reach
// does too: the break names the file, the time and the tool, and asks for
// a full.
func TestSQLBackupLogForeignLogBreaksTheChain(t *testing.T) {
	for _, c := range []struct {
		name, extra string
		reachable   bool
	}{
		{"unreachable adopt", "    adopt_foreign_logs: true\n", false},
		{"reachable no adopt", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newLogFixture(t, c.extra)
			f.full(true)
			f.mustBackupLog()
			f.commit(3)
			tool := f.foreignTool()
			path := filepath.Join(t.TempDir(), "elsewhere.trn")
			if c.reachable {
				path = `\\bak01\backup\elsewhere.trn`
			}
			if _, err := tool.Exec(`BACKUP LOG [Sales] TO DISK = N'` + path + `' WITH INIT, NAME = N'NightlyTool'`); err != nil {
				t.Fatal(err)
			}
			f.commit(3)
			sent := len(backupLogs(f.site.Source))
			out := f.mustBackupLog()
			if !out.NeedFull || out.Break == nil || out.Break.Reason != string(logchain.BreakForeign) || out.Number != 0 {
				t.Fatalf("%+v, want a foreign_log break", out)
			}
			if len(out.Foreign) != 1 || out.Foreign[0].Adopted || out.Foreign[0].Path != path {
				t.Fatalf("foreign %+v", out.Foreign)
			}
			start := out.Foreign[0].Start.UTC().Format(time.RFC3339)
			for _, want := range []string{"NightlyTool", "user tool", "at " + start, "to " + path} {
				if !strings.Contains(out.Break.Detail, want) {
					t.Errorf("break detail %q does not say %q", out.Break.Detail, want)
				}
			}
			if n := len(backupLogs(f.site.Source)); n != sent {
				t.Fatalf("BACKUP LOG sent over a broken chain")
			}
			r := f.newest()
			if r.Break == nil || r.Log(2) == nil || r.Log(2).Foreign == nil || r.Log(2).Foreign.Path != path {
				t.Fatalf("record %+v", r)
			}
			ch, err := catalog.AssembleChain(f.records("bak01"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if gaps := ch.Gaps(); len(gaps) != 1 || gaps[0].Foreign == nil || !strings.Contains(gaps[0].String(), path) {
				t.Fatalf("gaps %v, want the foreign log named", gaps)
			}
		})
	}
}

// Fulls taken while the chain runs are added to its record once verified
// (a full only written is not), so that a restore starts from the newest
// one: the chain's first log after it contains its last LSN.
func TestSQLBackupLogAddsVerifiedFullsToTheChain(t *testing.T) {
	f := newLogFixture(t, "")
	base := f.full(true)
	f.commit(2)
	f.mustBackupLog()
	f.commit(2)
	second := f.full(true)
	f.commit(2)
	written := f.full(false)
	f.commit(2)
	f.mustBackupLog()
	r := f.newest()
	if len(r.Fulls) != 2 || r.Fulls[0].Sequence != base.Sequence || r.Fulls[1].Sequence != second.Sequence ||
		r.Fulls[1].CheckpointLSN == "" || r.Fulls[1].LastLSN != second.Header.LastLSN {
		t.Fatalf("fulls %+v, want %d then %d (not the written %d)", r.Fulls, base.Sequence, second.Sequence, written.Sequence)
	}
	c, err := catalog.AssembleChain(f.records("bak01"), map[string]bool{base.Header.BackupSetGUID: true, second.Header.BackupSetGUID: true})
	if err != nil {
		t.Fatal(err)
	}
	if i, ok, gap := c.FirstAfter(c.Fulls[1]); !ok || c.Logs[i].Number != 2 || gap != nil {
		t.Fatalf("restore from full %d: first log index %d ok %v gap %v", second.Sequence, i, ok, gap)
	}
	// A later tick adds it only once.
	f.commit(2)
	f.mustBackupLog()
	if r := f.newest(); len(r.Fulls) != 2 {
		t.Fatalf("fulls after another tick: %+v", r.Fulls)
	}
}

// SQL Server's log chain restarted behind the product's back (SIMPLE and
// back, then a full): the next log backup does not start where the chain
// stood. When that full is verified and in the chain, the chain goes on
// from it (the hole is named for restores from earlier fulls); when it is
// not, the chain breaks with a gap and asks for a full.
func TestSQLBackupLogGapAfterARestartedLogChain(t *testing.T) {
	for _, verified := range []bool{true, false} {
		t.Run(fmt.Sprintf("verified=%v", verified), func(t *testing.T) {
			f := newLogFixture(t, "")
			f.full(true)
			f.commit(2)
			f.mustBackupLog()
			f.commit(2)
			if err := f.site.Source.SetRecoveryModel("Sales", "SIMPLE"); err != nil {
				t.Fatal(err)
			}
			f.commit(2)
			if err := f.site.Source.SetRecoveryModel("Sales", "FULL"); err != nil {
				t.Fatal(err)
			}
			restart := f.full(verified)
			f.commit(2)
			out := f.mustBackupLog()
			c, err := catalog.AssembleChain(f.records("bak01"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if gaps := c.Gaps(); len(gaps) != 1 || gaps[0].Before != 2 {
				t.Fatalf("gaps %v, want the hole before log 2", gaps)
			}
			if verified {
				if out.NeedFull || out.Break != nil || out.Number != 2 {
					t.Fatalf("%+v, want log 2 and the chain going on from full %d", out, restart.Sequence)
				}
				if _, ok, _ := c.FirstAfter(c.Fulls[len(c.Fulls)-1]); !ok || c.Fulls[len(c.Fulls)-1].Sequence != restart.Sequence {
					t.Fatalf("no restore from full %d: %+v", restart.Sequence, c.Fulls)
				}
				return
			}
			if !out.NeedFull || out.Break == nil || out.Break.Reason != string(logchain.BreakGap) {
				t.Fatalf("%+v, want a gap break", out)
			}
		})
	}
}

// A verified differential is no full of the log chain: the chain starts
// on and continues from fulls only (a restore may still take full +
// differential + the logs after it, which the chain's logs reach).
func TestSQLBackupLogDifferentialIsNotAFullOfTheChain(t *testing.T) {
	f := newLogFixture(t, "    diff_backup: {every: 6h}\n")
	base := f.full(true)
	// As its copy would have: the differential goes beside a base its
	// copy target holds too.
	base.AddServer("bak02")
	if err := catalog.Save(context.Background(), catalog.StorageFS{Storage: f.storage("bak01")}, f.keys(), base); err != nil {
		t.Fatal(err)
	}
	f.commit(2)
	f.mustBackupLog()
	f.commit(2)
	d := f.take(true, true)
	f.commit(2)
	f.mustBackupLog()
	if r := f.newest(); len(r.Fulls) != 1 || r.Fulls[0].Sequence != base.Sequence {
		t.Fatalf("the chain's fulls %+v, want only set %d (not the differential %d)", r.Fulls, base.Sequence, d.Sequence)
	}
}

// A log backup an earlier attempt finished, recorded by a later one after
// the source restarted in another zone, keeps the offset it was taken
// with (msdb's backupset.time_zone), not the instance's offset at the
// later attempt: its record gives the instant it ran.
func TestSQLBackupLogFinishedUnseenKeepsItsOwnOffset(t *testing.T) {
	f := newLogFixture(t, "")
	f.full(true)
	f.mustBackupLog()
	stmt := f.earlierClaim(2)
	f.commit(3)
	ran := time.Now().UTC()
	if _, err := f.sa("sa").Exec(stmt); err != nil {
		t.Fatal(err)
	}
	f.site.RestartSource(func(c *sqlsim.Config) { c.TimeZone = time.FixedZone("UTC+1", 3600) })
	if out := f.mustBackupLog(); !out.Reattached || out.Number != 2 {
		t.Fatalf("BackupLog %+v, want log 2 finished by the earlier attempt", out)
	}
	l := f.newest().Log(2)
	if offsetOf(l) != "0" {
		t.Fatalf("log 2, taken on UTC: recorded with offset %s, finished %s (%s on its clock)", offsetOf(l), l.BackupFinishUTC, l.BackupFinish)
	}
	if d := l.BackupFinishUTC.Sub(ran); d < -time.Second || d > 5*time.Second {
		t.Fatalf("log 2 ran at %s; its record says it finished at %s", ran, l.BackupFinishUTC)
	}
}
