package logs

import (
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// An outage right after BACKUP LOG is no evidence against the log: the
// number stays claimed by the chain's workflow, and once the instance
// answers again the next attempt (or tick) reads the finished log backup
// from its file and records it, hashed, with no gap and no number used
// twice.

// loggedFixture is a chain with log 1 taken, and commits after it.
func loggedFixture(t *testing.T) *logFixture {
	f := newLogFixture(t, "")
	f.full(true)
	f.commit(2)
	f.mustBackupLog()
	f.commit(3)
	return f
}

// startAgain brings the crashed source back.
func (f *logFixture) startAgain() {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f.site.Source.Start()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("start the source again: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// afterLogOutage checks what a BackupLog cut by an outage at its BACKUP
// LOG left (err), and that once the source is back the next one records
// log 2 (re-attached: read from its file, not sent again) and goes on with
// 3.
func (f *logFixture) afterLogOutage(err error, reattached bool) {
	t := f.t
	t.Helper()
	if err == nil {
		t.Fatal("BackupLog succeeded although the instance went away after its BACKUP LOG")
	}
	if ae := appErr(t, err); ae.NonRetryable() {
		t.Fatalf("an outage is not retried: %v (%s)", err, ae.Type())
	}
	r := f.newest()
	if l := r.Log(2); l == nil || l.State != catalog.LogPending || l.WorkflowID != testWorkflowID {
		t.Fatalf("log 2 after the outage: %+v, want still claimed (pending) by the chain's workflow: an outage is no evidence", l)
	}
	name := r.LogFileName(2, 1, 1)
	f.startAgain()
	out := f.mustBackupLog()
	if out.Number != 2 || out.Reattached != reattached || out.Break != nil || out.NeedFull {
		t.Fatalf("the tick after the outage: %+v, want the finished log 2 recorded", out)
	}
	r = f.newest()
	l := r.Log(2)
	if l.State != catalog.LogWritten || len(l.Files) != 1 || l.Files[0].Name != name || len(l.Files[0].SHA256) != 64 {
		t.Fatalf("log 2 %+v, want written with its hashed file %s", l, name)
	}
	f.commit(2)
	if out := f.mustBackupLog(); out.Number != 3 || out.Break != nil {
		t.Fatalf("the next log: %+v, want log 3 going on", out)
	}
	if n := len(backupLogs(f.site.Source)); n != 3 {
		t.Fatalf("BACKUP LOG ran %d times, want 3 (log 2 once)", n)
	}
	ms := f.msdbLogs()
	c, err := catalog.AssembleChain(f.records("bak01"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if gaps := c.Gaps(); len(gaps) != 0 || len(c.Logs) != 3 || c.Logs[1].LastLSN != c.Logs[2].FirstLSN || string(c.Logs[1].LastLSN) != ms[1].last {
		t.Fatalf("chain logs %+v gaps %v, msdb %+v: want 1-3 without a gap", c.Logs, gaps, ms)
	}
}

// The source host dies right after BACKUP LOG returned, before the step
// reads the log backup's header.
func TestSQLBackupLogHostLostBeforeTheHeaderKeepsTheLog(t *testing.T) {
	f := loggedFixture(t)
	hq, err := tsql.RestoreHeaderOnly([]string{f.logDisk(2)})
	if err != nil {
		t.Fatal(err)
	}
	f.site.Source.CrashOnQuery(hq, 2) // the first reads whether an earlier attempt wrote it
	_, err = f.backupLog()
	if st := backupLogs(f.site.Source); len(st) != 2 || st[1].Outcome != "ok" {
		t.Fatalf("BACKUP LOG of log 2 did not finish before the crash: %+v", st)
	}
	f.afterLogOutage(err, true)
}

// The source host dies as the BACKUP LOG arrives: the step cannot tell
// whether it ran. The number is kept; once the host is back, the file holds
// no log backup of it, and the same number is taken (its own claim).
func TestSQLBackupLogHostLostDuringTheBackupKeepsTheNumber(t *testing.T) {
	f := loggedFixture(t)
	f.site.Source.CrashOnQuery("BACKUP LOG [Sales] TO DISK = N'"+f.logDisk(2), 1)
	_, err := f.backupLog()
	f.afterLogOutage(err, false)
}

// logDisk is the path SQL Server writes log n of the newest chain to.
func (f *logFixture) logDisk(n int64) string {
	f.t.Helper()
	srv, _ := f.site.Config.BackupServer("bak01")
	return tsql.JoinPath(srv.PathsFor(f.site.Instance)[0], f.newest().LogFileName(n, 1, 1))
}
