package cycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// sqlFixture runs the cycle's activities against the emulated site
// (package sitetest): the source sql01 and the remote site's verification
// instance verify01 over real TDS, and two backup servers both reachable by
// SQL Server through UNC paths. Its fields are the site's, by short names.
type sqlFixture struct {
	t           testing.TB
	site        *sitetest.Site
	db          string
	dirs        map[string]string
	src, verify *sqlsim.Instance
	cfg         *config.Config
	acts        *Activities
	env         *testsuite.TestActivityEnvironment

	mu       sync.Mutex
	progress []activities.StepProgress
}

const sqlPassword = sitetest.Password

// newSQLFixture starts a site with database db (4 MiB, a first data file
// with a quote in its logical name); extra is YAML appended to the
// database's entry.
func newSQLFixture(t testing.TB, db string, extra string) *sqlFixture {
	return newSQLFixtureWith(t, db, extra, nil)
}

// newSQLFixtureWith is newSQLFixture with some backup servers on Samba.
func newSQLFixtureWith(t testing.TB, db string, extra string, smb map[string]*sambatest.Server) *sqlFixture {
	return newSQLFixtureOf(t, sitetest.Options{Database: db, LogicalName: "Sales'data", Extra: extra, SMB: smb})
}

// newSQLFixtureOf wires the activities to a site of any shape.
func newSQLFixtureOf(t testing.TB, o sitetest.Options) *sqlFixture {
	t.Helper()
	site := sitetest.New(t, o)
	f := &sqlFixture{t: t, site: site, db: o.Database, dirs: site.Dirs, src: site.Source, verify: site.Verify, cfg: site.Config}
	f.acts = New(activities.New(nil))
	f.acts.Cycle = activities.CycleDeps{Config: f.cfg, Poll: 20 * time.Millisecond,
		// The progress signals an activity sends to its workflow.
		Signal: func(_ context.Context, _, _, name string, arg any) error {
			if p, ok := arg.(activities.StepProgress); ok && name == activities.ProgressSignal {
				f.mu.Lock()
				f.progress = append(f.progress, p)
				f.mu.Unlock()
			}
			return nil
		}}
	var ts testsuite.WorkflowTestSuite
	f.env = ts.NewTestActivityEnvironment()
	f.env.RegisterActivity(f.acts)
	return f
}

// run executes one activity and decodes its result into out (may be nil).
func (f *sqlFixture) run(fn, in, out any) error {
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

func (f *sqlFixture) must(fn, in, out any) {
	f.t.Helper()
	if err := f.run(fn, in, out); err != nil {
		f.t.Fatalf("%T(%+v): %v", in, in, err)
	}
}

// statements counts what an instance ran, by kind.
var statements = sitetest.Statements

// backedUp runs plan, sequence, backup and catalog: a written set on the
// plan's primary.
func (f *sqlFixture) backedUp() (activities.Plan, int64, activities.ManifestOutput) {
	f.t.Helper()
	var p activities.Plan
	f.must(f.acts.PlanCycle, activities.PlanInput{Database: f.db}, &p)
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: f.db}, &seq)
	var b activities.BackupOutput
	f.must(f.acts.Backup, activities.BackupInput{Database: f.db, Sequence: seq, Server: p.Rotation[0], Stripes: p.Stripes}, &b)
	var m activities.ManifestOutput
	f.must(f.acts.WriteManifest, activities.ManifestInput{Database: f.db, Sequence: seq, Server: p.Rotation[0], Backup: b}, &m)
	return p, seq, m
}

func TestSQLCycleActivitiesEndToEnd(t *testing.T) {
	db := "Sales]; DROP DATABASE x--"
	f := newSQLFixture(t, db, "")
	// Paced so that the backup outlasts a few polls on any machine: the
	// progress it signals must rise before it reaches 100.
	f.src.SetThrottle(256 << 10)
	p, seq, man := f.backedUp()
	f.src.SetThrottle(0)
	if p.Rotation[0] != "bak01" || p.Remote != "bak02" {
		t.Fatalf("plan %+v, want bak01 then copy to bak02", p)
	}
	var seq2 int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: db}, &seq2)
	if seq < 1 || seq2 != seq+1 {
		t.Errorf("sequences %d then %d, want consecutive numbers from the DBBackup.Sequence table", seq, seq2)
	}
	for i := 1; i <= 2; i++ {
		name := tsql.StripeFileName("sql01", db, seq, i, 2)
		if fi, err := os.Stat(filepath.Join(f.dirs["bak01"], name)); err != nil || fi.Size() == 0 {
			t.Errorf("stripe %s on bak01: %v", name, err)
		}
	}
	f.mu.Lock()
	var pcts []float64
	for _, pr := range f.progress {
		if pr.Step == activities.StepBackup && pr.Sequence == seq {
			pcts = append(pcts, pr.Percent)
		}
	}
	f.mu.Unlock()
	// Up to what the last poll saw: the step's result shows 100 %.
	if len(pcts) < 2 {
		t.Errorf("backup progress signalled %v, want a rising percent", pcts)
	}
	for i := 1; i < len(pcts); i++ {
		if pcts[i] < pcts[i-1] {
			t.Errorf("backup progress signalled %v: it fell at signal %d", pcts, i)
		}
	}
	written := f.load("bak01", seq)
	if written.State != catalog.StateWritten || written.Header == nil || written.Header.BackupSetGUID == "" ||
		written.Header.LastLSN == "" || !written.Header.HasBackupChecksums || len(written.Stripes) != 2 || man.Manifest != written.FileName() {
		t.Errorf("written manifest %+v header %+v", written, written.Header)
	}

	var copied activities.CopyOutput
	f.must(f.acts.CopyToRemote, activities.CopyInput{Database: db, Sequence: seq, From: "bak01", To: "bak02"}, &copied)
	verify := activities.VerifyInput{Database: db, Sequence: seq, Server: "bak02"}
	var restored, checked, sane activities.StepOutput
	f.must(f.acts.Restore, verify, &restored)
	if restored.VerifyDatabase != db+"_verify" {
		t.Errorf("restored into %q, want %q", restored.VerifyDatabase, db+"_verify")
	}
	rs := statements(f.verify, "RESTORE DATABASE")
	if len(rs) != 1 || rs[0].Outcome != "ok" || !strings.Contains(rs[0].SQL, `\\bak02\backup`) || !strings.Contains(rs[0].SQL, "CHECKSUM") ||
		!strings.Contains(rs[0].SQL, "MOVE N'Sales''data'") {
		t.Errorf("RESTORE statements %+v, want one from the remote copies with CHECKSUM and MOVE of the quoted logical name", rs)
	}
	f.must(f.acts.CheckDB, verify, &checked)
	f.must(f.acts.SanityChecks, verify, &sane)
	if sane.Checks != 1 {
		t.Errorf("sanity checks run: %d, want 1", sane.Checks)
	}
	f.must(f.acts.MarkVerified, activities.MarkInput{Database: db, Sequence: seq, Servers: []string{"bak01", "bak02"}}, nil)
	for _, s := range []string{"bak01", "bak02"} {
		m := f.load(s, seq)
		if m.State != catalog.StateVerified || m.VerifyDB != db+"_verify" || m.Timings[catalog.StepRestore].DurationSeconds <= 0 {
			t.Errorf("manifest on %s: %s verify db %q timings %v, want verified with restore timing", s, m.State, m.VerifyDB, m.Timings)
		}
	}
	f.must(f.acts.DropVerifyDB, verify, nil)
	f.must(f.acts.DropVerifyDB, verify, nil) // idempotent
	if _, err := f.verify.DatabaseFiles(db + "_verify"); err == nil {
		t.Errorf("verification database still exists after DropVerifyDB")
	}
	var kept activities.RetentionOutput
	f.must(f.acts.ApplyRetention, activities.RetentionInput{Database: db, Servers: []string{"bak01", "bak02"}, Protect: seq}, &kept)
	if len(kept.Deleted) != 0 {
		t.Errorf("retention deleted %+v from a single verified set", kept.Deleted)
	}
	if n := len(statements(f.src, "BACKUP DATABASE")); n != 1 {
		t.Errorf("BACKUP ran %d times, want 1", n)
	}
}

func (f *sqlFixture) load(server string, seq int64) *catalog.Manifest {
	f.t.Helper()
	m := f.site.Manifest(server, f.db, seq)
	if m == nil {
		f.t.Fatalf("no manifest of %s seq %d on %s", f.db, seq, server)
	}
	return m
}

// A byte flipped in a remote stripe: RESTORE WITH CHECKSUM refuses it.
func TestSQLRestoreDetectsCorruptCopy(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, seq, _ := f.backedUp()
	f.must(f.acts.CopyToRemote, activities.CopyInput{Database: "Sales", Sequence: seq, From: "bak01", To: "bak02"}, nil)
	stripe := filepath.Join(f.dirs["bak02"], tsql.StripeFileName("sql01", "Sales", seq, 2, 2))
	data, err := os.ReadFile(stripe)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(stripe, data, 0o644); err != nil {
		t.Fatal(err)
	}
	err = f.run(f.acts.Restore, activities.VerifyInput{Database: "Sales", Sequence: seq, Server: "bak02"}, nil)
	if activities.ErrorType(err) != activities.ErrCorruptBackup {
		t.Fatalf("restore of a corrupt copy: %v, want CorruptBackup", err)
	}
}

// loginAs makes the configured instance (sql01 or verify01, served by in)
// log in as l, which it adds to the emulator.
func (f *sqlFixture) loginAs(instance string, in *sqlsim.Instance, l sqlsim.Login) {
	f.t.Helper()
	if err := in.SetLogin(l); err != nil {
		f.t.Fatal(err)
	}
	for i := range f.cfg.SQLInstances {
		if f.cfg.SQLInstances[i].Name == instance {
			f.cfg.SQLInstances[i].User = l.Name
		}
	}
}

// login is the configured login of instance: what an earlier attempt of a
// step logged in as.
func (f *sqlFixture) login(instance string) string {
	f.t.Helper()
	inst, ok := f.cfg.SQLInstance(instance)
	if !ok {
		f.t.Fatalf("no instance %s configured", instance)
	}
	return inst.User
}

// blindBackupLogin makes the source's login a backup operator that cannot
// see other sessions (no VIEW SERVER STATE).
func (f *sqlFixture) blindBackupLogin() {
	f.t.Helper()
	f.loginAs("sql01", f.src, sqlsim.Login{Name: "backup_op", Password: sqlPassword, Server: []string{"CREATE ANY DATABASE"},
		Databases: map[string][]string{"Sales": {"db_backupoperator", "db_datareader", "db_datawriter"}}})
}

// reconfigure rewrites the site's configuration file with edit and wires
// the activities to the result.
func (f *sqlFixture) reconfigure(edit func(yaml string) string) {
	f.t.Helper()
	f.site.Reconfigure(edit)
	f.cfg = f.site.Config
	f.acts.Cycle.Config = f.cfg
}

// The remote server's location is not the directory its unc_paths point
// to: the copy lands where the verification instance does not look. That
// is a configuration error naming both paths and the fix, not a corrupt
// backup; a stripe that is missing for the worker too stays CorruptBackup.
func TestSQLRestoreLocationNotWhereUNCPathsPoint(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	elsewhere := t.TempDir() // the worker's view of bak02: not \\bak02\backup
	f.reconfigure(func(y string) string {
		return strings.Replace(y, "location: "+f.dirs["bak02"]+"\n", "location: "+elsewhere+"\n", 1)
	})
	_, seq, _ := f.backedUp()
	f.must(f.acts.CopyToRemote, activities.CopyInput{Database: "Sales", Sequence: seq, From: "bak01", To: "bak02"}, nil)
	err := f.run(f.acts.Restore, activities.VerifyInput{Database: "Sales", Sequence: seq, Server: "bak02"}, nil)
	if activities.ErrorType(err) != activities.ErrInvalidConfig {
		t.Fatalf("restore with location and unc_paths apart: %v, want %s", err, activities.ErrInvalidConfig)
	}
	for _, want := range []string{`\\bak02\backup`, elsewhere, "unc_paths", "location", "verify01"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("restore with location and unc_paths apart: %v, want it to name %q", err, want)
		}
	}

	// The same on the primary: BACKUP writes where the worker does not look.
	f.reconfigure(func(y string) string {
		return strings.Replace(y, "location: "+f.dirs["bak01"]+"\n", "location: "+elsewhere+"\n", 1)
	})
	var next int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &next)
	err = f.run(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: next, Server: "bak01", Stripes: 2}, nil)
	if activities.ErrorType(err) != activities.ErrInvalidConfig || !strings.Contains(err.Error(), `\\bak01\backup`) || !strings.Contains(err.Error(), elsewhere) ||
		!strings.Contains(err.Error(), "unc_paths and location") {
		t.Errorf("backup with location and unc_paths apart: %v, want %s naming both paths", err, activities.ErrInvalidConfig)
	}

	// Location and unc_paths agree, but a stripe is gone for both: the set
	// is incomplete.
	g := newSQLFixture(t, "Sales", "")
	_, seq, _ = g.backedUp()
	g.must(g.acts.CopyToRemote, activities.CopyInput{Database: "Sales", Sequence: seq, From: "bak01", To: "bak02"}, nil)
	if err := os.Remove(filepath.Join(g.dirs["bak02"], tsql.StripeFileName("sql01", "Sales", seq, 2, 2))); err != nil {
		t.Fatal(err)
	}
	if err := g.run(g.acts.Restore, activities.VerifyInput{Database: "Sales", Sequence: seq, Server: "bak02"}, nil); activities.ErrorType(err) != activities.ErrCorruptBackup {
		t.Errorf("restore of a set missing a stripe: %v, want %s", err, activities.ErrCorruptBackup)
	}
}

func TestSQLUnknownDatabaseAndLogin(t *testing.T) {
	f := newSQLFixture(t, "Sales", "  - name: Ghost\n    instance: sql01\n    backup_servers: [bak01, bak02]\n")
	var seq int64
	err := f.run(f.acts.AllocateSequence, activities.SequenceInput{Database: "Ghost"}, &seq)
	if activities.ErrorType(err) != activities.ErrDatabaseNotFound || !strings.Contains(err.Error(), "Ghost") {
		t.Errorf("sequence of a database missing on the instance: %v, want DatabaseNotFound naming it", err)
	}
	t.Setenv("BC_TEST_SQL_PASSWORD", "wrong")
	err = f.run(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
	if activities.ErrorType(err) != activities.ErrLoginFailed || strings.Contains(err.Error(), "wrong") {
		t.Errorf("wrong password: %v, want LoginFailed without the password", err)
	}
}

// Crash table, "SQL host dies during BACKUP": the activity reports how far
// it got; the set is marked failed; after the host returns, a new sequence
// backs up fine and the failed set's partial files are recorded for
// retention.
func TestSQLHostCrashDuringBackup(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	var p activities.Plan
	f.must(f.acts.PlanCycle, activities.PlanInput{Database: "Sales"}, &p)
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
	f.src.SetThrottle(2 << 20) // slow enough to see progress before the crash
	if err := f.src.CrashAt(sqlsim.OpBackup, 40); err != nil {
		t.Fatal(err)
	}
	err := f.run(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: p.Stripes}, nil)
	appErr := appErrorOf(t, err)
	var bf activities.BackupFailure
	// The percent is the last progress message that arrived: a host that
	// dies resets the connection, which can drop the messages still in
	// flight, so it may be below 40 but never above.
	if appErr.Type() != activities.ErrSQLHostUnreachable || !appErr.HasDetails() || appErr.Details(&bf) != nil || !bf.Started ||
		bf.Percent > 45 {
		t.Fatalf("backup on a crashing host: %v (details %+v), want SQLHostUnreachable, started, at most 40 %%", err, bf)
	}
	f.must(f.acts.MarkFailed, activities.MarkInput{Database: "Sales", Sequence: seq, Servers: []string{"bak01"}, Step: activities.StepBackup,
		ErrorType: activities.ErrSQLHostUnreachable, Evidence: string(catalog.EvidenceBackupIncomplete), Reason: fmt.Sprintf("%s (at %.0f %%)", appErr.Message(), bf.Percent)}, nil)
	failed := f.load("bak01", seq)
	if failed.State != catalog.StateFailed || len(failed.Stripes) != 2 {
		t.Errorf("failed set: %s with stripes %+v, want failed listing both partial stripes", failed.State, failed.Stripes)
	}
	// The host is down: the next attempt cannot even get a sequence.
	err = f.run(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, nil)
	if activities.ErrorType(err) != activities.ErrSQLHostUnreachable {
		t.Fatalf("sequence while the host is down: %v, want SQLHostUnreachable", err)
	}
	if err := f.src.Start(); err != nil {
		t.Fatal(err)
	}
	f.src.SetThrottle(0)
	var seq2 int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq2)
	if seq2 <= seq {
		t.Fatalf("sequence after the crash %d, want above %d", seq2, seq)
	}
	var b activities.BackupOutput
	f.must(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq2, Server: "bak01", Stripes: p.Stripes}, &b)
	if len(b.Stripes) != 2 || b.Stripes[0].Name != tsql.StripeFileName("sql01", "Sales", seq2, 1, 2) {
		t.Errorf("backup after the crash: %+v", b)
	}
}

func appErrorOf(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		t.Fatalf("error %v (%T) is not an ApplicationError", err, err)
	}
	return appErr
}

func TestSQLBackupTargetFaults(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
	f.src.SetShareUnreachable(`\\bak01\backup`, true)
	err := f.run(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: 2}, nil)
	if activities.ErrorType(err) != activities.ErrBackupTargetUnreachable || !strings.Contains(err.Error(), "3201") {
		t.Errorf("unreachable share: %v, want BackupTargetUnreachable (3201)", err)
	}
	f.src.SetShareUnreachable(`\\bak01\backup`, false)
	f.src.SetShareQuota(`\\bak01\backup`, 64<<10)
	err = f.run(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq + 1, Server: "bak01", Stripes: 2}, nil)
	if activities.ErrorType(err) != activities.ErrShareFull {
		t.Errorf("full share: %v, want ShareFull", err)
	}
	var bf activities.BackupFailure
	if appErr := appErrorOf(t, err); appErr.NonRetryable() == false || appErr.Details(&bf) != nil || !bf.Started {
		t.Errorf("full share: non-retryable %v, details %+v", appErr.NonRetryable(), bf)
	}
	// A share path that does not exist is a configuration error, not an outage.
	f.src.SetShareQuota(`\\bak01\backup`, 0)
	srv, _ := f.cfg.BackupServer("bak01")
	srv.UNCPaths = []string{`\\bak01\backup\no-such-dir`}
	err = f.run(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq + 2, Server: "bak01", Stripes: 2}, nil)
	if activities.ErrorType(err) != activities.ErrInvalidConfig || !strings.Contains(err.Error(), "no-such-dir") || !strings.Contains(err.Error(), "unc_paths") {
		t.Errorf("missing share directory: %v, want InvalidConfig naming the path and unc_paths", err)
	}
}

// A damaged page in the source: BACKUP WITH CHECKSUM refuses it, and the
// cycle fails as SourceDatabaseDamaged naming the page (the production
// database's problem, not a CHECKDB finding about a set).
func TestSQLCorruptSourcePage(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	if err := f.src.CorruptPage("Sales", 1, 20); err != nil {
		t.Fatal(err)
	}
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
	err := f.run(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: 2}, nil)
	if activities.ErrorType(err) != activities.ErrSourceDatabaseDamaged || !strings.Contains(err.Error(), "(1:20)") {
		t.Errorf("backup of a damaged database: %v, want SourceDatabaseDamaged naming page (1:20)", err)
	}
}

// A damaged page in the restored copy: CHECKDB fails with every message.
func TestSQLCheckDBFindsCorruption(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, seq, _ := f.backedUp()
	f.must(f.acts.CopyToRemote, activities.CopyInput{Database: "Sales", Sequence: seq, From: "bak01", To: "bak02"}, nil)
	verify := activities.VerifyInput{Database: "Sales", Sequence: seq, Server: "bak02"}
	var restored activities.StepOutput
	f.must(f.acts.Restore, verify, &restored)
	if err := f.verify.CorruptPage(restored.VerifyDatabase, 1, 30); err != nil {
		t.Fatal(err)
	}
	err := f.run(f.acts.CheckDB, verify, nil)
	if activities.ErrorType(err) != activities.ErrCheckDBFailed || !strings.Contains(err.Error(), "(1:30)") || !strings.Contains(err.Error(), "8928") {
		t.Errorf("CHECKDB of a damaged copy: %v, want CheckDBFailed naming page (1:30) and error 8928", err)
	}
	// The verification database vanished (instance lost it): restore again.
	f.must(f.acts.DropVerifyDB, verify, nil)
	err = f.run(f.acts.CheckDB, verify, nil)
	if activities.ErrorType(err) != activities.ErrSQLHostUnreachable {
		t.Errorf("CHECKDB of a missing copy: %v, want SQLHostUnreachable (restore again)", err)
	}
}

func TestSQLSanityCheckFails(t *testing.T) {
	f := newSQLFixture(t, "Sales", `      - name: lots-of-customers
        query: SELECT COUNT_BIG(*) FROM dbo.Customers
        at_least: 1000000000
`)
	_, seq, _ := f.backedUp()
	f.must(f.acts.CopyToRemote, activities.CopyInput{Database: "Sales", Sequence: seq, From: "bak01", To: "bak02"}, nil)
	verify := activities.VerifyInput{Database: "Sales", Sequence: seq, Server: "bak02"}
	f.must(f.acts.Restore, verify, nil)
	logged := f.observeLog()
	err := f.run(f.acts.SanityChecks, verify, nil)
	if activities.ErrorType(err) != activities.ErrSanityCheckFailed || !strings.Contains(err.Error(), "lots-of-customers") ||
		!strings.Contains(err.Error(), "at least 1000000000") {
		t.Errorf("sanity check: %v, want SanityCheckFailed naming the check and the expectation", err)
	}
	if v := logged.value("sanity check did not hold"); !strings.HasPrefix(v, "returned ") {
		t.Errorf("worker's log: value %q, want what the query returned", v)
	}
}

// Re-attach: a retried Backup finds its statement still running, waits for
// it and does not run BACKUP a second time.
func TestSQLBackupReattachesToRunningStatement(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
	done := f.firstAttemptBackup(seq)
	f.env.SetHeartbeatDetails(activities.BackupHeartbeat{Started: true, Percent: 10})
	var out activities.BackupOutput
	f.must(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: 2}, &out)
	if err := <-done; err != nil {
		t.Fatalf("the first attempt's BACKUP failed: %v", err)
	}
	if !out.Reattached || len(out.Stripes) != 2 || out.Bytes == 0 {
		t.Errorf("retried backup %+v, want re-attached with both stripes", out)
	}
	if n := len(statements(f.src, "BACKUP DATABASE")); n != 1 {
		t.Errorf("BACKUP ran %d times, want 1", n)
	}
}

// firstAttemptBackup is what an attempt that died left behind: this run's
// claim on set seq on bak01 and its BACKUP (with STATS, as the product sent
// them before) still running on the source, on a connection of its own of
// the configured login. The channel gives that BACKUP's outcome.
func (f *sqlFixture) firstAttemptBackup(seq int64) <-chan error {
	t := f.t
	t.Helper()
	srv, _ := f.cfg.BackupServer("bak01")
	layout, err := tsql.Layout(srv.UNCPaths, tsql.NamesOf("sql01", "Sales"), seq, 2)
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := tsql.BackupDatabase(tsql.BackupOptions{Database: "Sales", Disks: tsql.Paths(layout), Checksum: true, Init: true,
		Format: true, Stats: 5, Name: tsql.BackupSetName(seq)})
	if err != nil {
		t.Fatal(err)
	}
	claim := catalog.NewPending("sql01", "Sales", seq, time.Now(), "default-test-workflow-id", "default-test-run-id")
	data, err := catalog.Encode(claim)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dirs["bak01"], claim.FileName()), data, 0o644); err != nil {
		t.Fatal(err)
	}
	f.src.SetThrottle(1 << 20)
	first, err := mssql.Open(context.Background(), mssql.Target{Instance: "sql01", Address: f.src.Addr(), User: f.login("sql01"),
		Password: sqlPassword, Encrypt: "disable"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Close() })
	done := make(chan error, 1)
	// Wait for this BACKUP, not for one an earlier call started.
	before := len(statements(f.src, "BACKUP DATABASE"))
	go func() {
		_, err := first.Run(context.Background(), "BACKUP DATABASE", stmt, nil)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(statements(f.src, "BACKUP DATABASE")) == before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return done
}
