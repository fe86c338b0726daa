package cycle

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// blindVerifyLogin makes verify01's login bk_ver, which may restore and
// read msdb but not see other sessions (no VIEW SERVER STATE).
func (f *sqlFixture) blindVerifyLogin() {
	f.t.Helper()
	f.loginAs("verify01", f.verify, sqlsim.Login{Name: "bk_ver", Password: sqlPassword,
		Server: []string{tsql.PermCreateAnyDatabase}, Databases: map[string][]string{"msdb": {tsql.PermSelect}}})
}

// aside runs stmt as the configured login of instance name on a connection
// of its own, as an earlier attempt left it running, and returns once the
// instance runs it (kind in its statement log); the channel gives its
// outcome.
func (f *sqlFixture) aside(in *sqlsim.Instance, name, kind, stmt string) <-chan error {
	t := f.t
	t.Helper()
	db, err := mssql.Open(context.Background(), mssql.Target{Instance: name, Address: in.Addr(), User: f.login(name),
		Password: sqlPassword, Encrypt: "disable"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	before := len(statements(in, kind))
	done := make(chan error, 1)
	go func() {
		_, err := db.Run(context.Background(), kind, stmt, nil)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(statements(in, kind)) == before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return done
}

// wantBlind checks the error of a step that found an earlier attempt's
// statement possibly still running and a login that cannot see it: the
// retryable type, naming the grant.
func wantBlind(t *testing.T, step string, err error, typ string) {
	t.Helper()
	ae := appErrorOf(t, err)
	if ae.Type() != typ || ae.NonRetryable() || !strings.Contains(err.Error(), "VIEW SERVER STATE") {
		t.Fatalf("%s retried by a login blind to other sessions: %v (type %s); want retryable %s naming VIEW SERVER STATE", step, err, ae.Type(), typ)
	}
}

// A retried RESTORE whose earlier attempt's RESTORE may still run, by a
// login that cannot see other sessions: no second RESTORE is sent; the
// step names the missing grant and is retried; once the first has ended,
// the retry finds the copy restored from this set.
func TestSQLRestoreRetryBlindLogin(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, verify := f.copiedSet()
	_, srv, _, verifyDB, err := activities.VerifyTarget(f.acts.Activities, verify)
	if err != nil {
		t.Fatal(err)
	}
	m := f.load(verify.Server, verify.Sequence)
	layout, err := tsql.Layout(srv.UNCPaths, tsql.NamesOf("sql01", "Sales"), verify.Sequence, len(m.Stripes))
	if err != nil {
		t.Fatal(err)
	}
	sa := f.verifySQL()
	fq, _ := tsql.RestoreFileListOnly(tsql.Paths(layout))
	files, err := sa.FileListOnly(context.Background(), fq)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]tsql.FileListRow, len(files))
	for i, fl := range files {
		rows[i] = tsql.FileListRow{LogicalName: fl.LogicalName, PhysicalName: fl.PhysicalName, Type: fl.Type, FileID: fl.FileID}
	}
	moves, err := tsql.Moves(verifyDB, rows, srv.RestoreDataDir, srv.RestoreLogDir)
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := tsql.RestoreDatabase(tsql.RestoreOptions{Database: verifyDB, Disks: tsql.Paths(layout), Moves: moves, Checksum: true, Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	f.blindVerifyLogin()
	f.intendRestore(verify) // what the earlier attempt recorded before its RESTORE
	f.verify.SetThrottle(1 << 20)
	done := f.aside(f.verify, "verify01", "RESTORE DATABASE", stmt)
	f.env.SetHeartbeatDetails(activities.RestoreHeartbeat{StartedInto: verifyDB})
	wantBlind(t, "RESTORE", f.run(f.acts.Restore, verify, nil), activities.ErrStatementMayStillRun)
	if n := len(statements(f.verify, "RESTORE DATABASE")); n != 1 {
		t.Fatalf("%d RESTORE statements; want only the earlier attempt's", n)
	}
	if err := <-done; err != nil {
		t.Fatalf("the earlier attempt's RESTORE: %v", err)
	}
	f.verify.SetThrottle(0)
	f.must(f.acts.Restore, verify, nil)
	if got := statements(f.verify, "RESTORE DATABASE"); len(got) != 1 || got[0].Outcome != "ok" {
		t.Errorf("RESTORE statements %+v; want one, ok", got)
	}
}

// A retried CHECKDB whose earlier attempt's CHECKDB may still run, by a
// login that cannot see other sessions: no second CHECKDB is sent; the
// step names the missing grant; once the first has ended clean, the retry
// takes its result without running it again: the copy's
// LastGoodCheckDbTime changed since the baseline Restore recorded with the
// restore.
func TestSQLCheckDBRetryBlindLogin(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	seq, verify := f.copiedSet()
	f.blindVerifyLogin()
	f.must(f.acts.Restore, verify, nil) // the login owns the copy it restored
	_, _, _, verifyDB, err := activities.VerifyTarget(f.acts.Activities, verify)
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := tsql.VerifyCheckDB(verifyDB, seq)
	if err != nil {
		t.Fatal(err)
	}
	f.verify.SetThrottle(1 << 20)
	done := f.aside(f.verify, "verify01", "DBCC CHECKDB", stmt)
	f.env.SetHeartbeatDetails(activities.CheckDBHeartbeat{Started: true})
	wantBlind(t, "CHECKDB", f.run(f.acts.CheckDB, verify, nil), activities.ErrStatementMayStillRun)
	if n := len(statements(f.verify, "DBCC CHECKDB")); n != 1 {
		t.Fatalf("%d CHECKDB statements; want only the earlier attempt's", n)
	}
	if err := <-done; err != nil {
		t.Fatalf("the earlier attempt's CHECKDB: %v", err)
	}
	f.verify.SetThrottle(0)
	f.must(f.acts.CheckDB, verify, nil)
	if got := statements(f.verify, "DBCC CHECKDB"); len(got) != 1 || got[0].Outcome != "ok" {
		t.Errorf("CHECKDB statements %+v; want one, ok", got)
	}
}

// The workflow schedules Backup of the same set again after
// BackupDeviceInUse (an earlier BACKUP held its files): that new activity
// is not a retry, but the set's claim is this run's own, so it looks for the
// earlier BACKUP first and finds it complete instead of running a second.
func TestSQLBackupSameSetAgainFindsItComplete(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	in := f.backedUpOnce()
	var out activities.BackupOutput
	f.must(f.acts.Backup, in, &out)
	if got := statements(f.src, "BACKUP DATABASE"); len(got) != 1 || !out.Reattached || len(out.Stripes) != 2 {
		t.Errorf("BACKUP statements %+v, second output %+v; want one BACKUP, found complete", got, out)
	}
}
