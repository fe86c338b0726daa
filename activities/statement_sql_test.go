package activities

import (
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// A retried BACKUP whose login cannot see other sessions (no VIEW SERVER
// STATE) cannot find the earlier attempt's statement. RESTORE HEADERONLY of
// the stripes shows the files still held (3201, OS error 32): no second
// BACKUP is sent, and the step says so (BackupDeviceInUse naming VIEW
// SERVER STATE) instead of failing the set; the first BACKUP completes
// untouched, and the next retry finds it complete.
func TestSQLBackupRetryBlindLogin(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	f.blindBackupLogin()
	var seq int64
	f.must(f.acts.AllocateSequence, SequenceInput{Database: "Sales"}, &seq)
	done := f.firstAttemptBackup(seq)
	f.env.SetHeartbeatDetails(BackupHeartbeat{Started: true, Percent: 10})
	err := f.run(f.acts.Backup, BackupInput{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: 2}, nil)
	ae := appErrorOf(t, err)
	if ae.Type() != ErrBackupDeviceInUse || !strings.Contains(err.Error(), "VIEW SERVER STATE") || !strings.Contains(err.Error(), "3201") {
		t.Fatalf("retry by a login blind to other sessions: %v (type %s); want BackupDeviceInUse naming VIEW SERVER STATE", err, ae.Type())
	}
	if n := len(statements(f.src, "BACKUP DATABASE")); n != 1 {
		t.Fatalf("%d BACKUP statements; want only the first attempt's (no second BACKUP over its files)", n)
	}
	if err := <-done; err != nil {
		t.Fatalf("the first attempt's BACKUP failed: %v", err)
	}
	var out BackupOutput
	f.must(f.acts.Backup, BackupInput{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: 2}, &out)
	if got := statements(f.src, "BACKUP DATABASE"); len(got) != 1 || got[0].Outcome != "ok" || !out.Reattached {
		t.Errorf("BACKUP statements %+v, output %+v; want the first attempt's alone, found complete", got, out)
	}
}

// A cancel that came while no attempt ran: StopStatements KILLs the set's
// BACKUP an earlier attempt left running on the source (found by its text),
// and reports one it cannot stop when the login may not KILL.
func TestSQLStopStatementsOfACancelledSet(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	var seq int64
	f.must(f.acts.AllocateSequence, SequenceInput{Database: "Sales"}, &seq)
	done := f.firstAttemptBackup(seq)
	var out StopOutput
	f.must(f.acts.StopStatements, StopInput{Database: "Sales", Sequence: seq, Server: "bak01", Remote: "bak02"}, &out)
	if len(out.Stopped) != 1 || len(out.Left) != 0 {
		t.Errorf("stopped %v, left %v; want the BACKUP stopped", out.Stopped, out.Left)
	}
	if err := <-done; err == nil {
		t.Error("the left-running BACKUP completed; want it killed")
	}
	if got := statements(f.src, "BACKUP DATABASE"); len(got) != 1 || got[0].Outcome != "killed" {
		t.Errorf("BACKUP statements %+v, want one, killed", got)
	}

	// A login without ALTER ANY CONNECTION: the statement runs on, and the
	// output says so.
	f.loginAs("sql01", f.src, sqlsim.Login{Name: "backup_op", Password: sqlPassword, Server: []string{"VIEW SERVER STATE"},
		Databases: map[string][]string{"Sales": {"db_backupoperator"}}})
	seq++
	done = f.firstAttemptBackup(seq)
	out = StopOutput{}
	f.must(f.acts.StopStatements, StopInput{Database: "Sales", Sequence: seq, Server: "bak01"}, &out)
	if len(out.Stopped) != 0 || len(out.Left) != 1 || !strings.Contains(out.Left[0], "GRANT ALTER ANY CONNECTION TO [backup_op];") {
		t.Errorf("without ALTER ANY CONNECTION: stopped %v, left %v; want the BACKUP reported left running with the GRANT that fixes it",
			out.Stopped, out.Left)
	}
	f.src.SetThrottle(0)
	if err := <-done; err != nil {
		t.Errorf("the BACKUP the login could not stop: %v, want it to run to its end", err)
	}
}
