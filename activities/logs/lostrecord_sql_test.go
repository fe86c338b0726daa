package logs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/location"
	"github.com/backupcycle/backupcycle/internal/storage/storagetest"
)

// A BackupLog attempt is cut by a heartbeat timeout in its write of the
// chain record, after its BACKUP LOG finished. Temporal runs the retry
// while the attempt still hangs: the retry records log 2 (re-attached:
// the pending claim is the chain workflow's), and the next tick takes
// log 3. Then the stuck write lands: the chain record on the server is
// the attempt's, which knows of no log 3. Log 3 is in msdb and on the
// backup server, named as the chain's own: the next tick adopts it and
// goes on with log 4; the chain is not broken.
func TestSQLBackupLogAdoptsItsOwnLogALateRecordWriteLost(t *testing.T) {
	f := sambaLogFixture(t)
	site := f.site
	f.full(true)
	f.mustBackupLog()
	f.commit(3)

	h := f.holdRecordWrite(nil)
	cut := f.inBackground(h, f.acts.BackupLog, BackupLogInput{Database: "Sales", Instance: site.Instance}, nil)
	stale := f.newest()
	if l := stale.Log(2); l == nil || l.State != catalog.LogPending {
		t.Fatalf("log 2 before the retry: %+v, want the attempt's pending claim", l)
	}
	// The retry, while the first attempt hangs.
	if out := f.mustBackupLog(); out.Number != 2 || !out.Reattached {
		t.Fatalf("the retry: %+v, want log 2 re-attached", out)
	}
	f.commit(3)
	if out := f.mustBackupLog(); out.Number != 3 || out.Break != nil {
		t.Fatalf("the next tick: %+v, want log 3", out)
	}
	h.Release()
	<-cut
	if l := f.newest().Log(3); l != nil {
		t.Fatalf("log 3 after the late write: %+v, want it gone from the record (the attempt's write)", l)
	}

	f.commit(3)
	out, err := f.backupLog()
	if err != nil {
		t.Fatal(err)
	}
	if out.Break != nil || out.NeedFull || out.Number != 4 {
		t.Fatalf("the tick after the late write: %+v (break %+v), want log 4 with the chain whole", out, out.Break)
	}
	r := f.newest()
	if l := r.Log(3); l == nil || l.State != catalog.LogWritten || len(l.Files) != 1 || len(l.Files[0].SHA256) != 64 {
		t.Fatalf("log 3 %+v, want adopted: written, its file hashed", l)
	}
	if n := len(backupLogs(site.Source)); n != 4 {
		t.Fatalf("BACKUP LOG ran %d times, want 4", n)
	}
	ms := f.msdbLogs()
	c, err := catalog.AssembleChain(f.records("bak01"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if gaps := c.Gaps(); len(gaps) != 0 || len(c.Logs) != 4 || string(c.Logs[2].FirstLSN) != ms[2].first || c.Logs[2].LastLSN != c.Logs[3].FirstLSN {
		t.Fatalf("chain logs %+v gaps %v, msdb %+v: want 1-4 without a gap", c.Logs, gaps, ms)
	}
}

// sambaLogFixture is newLogFixture with the chain's backup server on
// Samba, reached over SMB as in the demo.
func sambaLogFixture(t *testing.T) *logFixture {
	smb := sambatest.Start(t, sambatest.Options{})
	return fixtureOn(t, sitetest.New(t, sitetest.Options{Database: "Sales", CommitLog: true, ManifestKeys: []string{"k1"}, Extra: logExtra,
		SMB: map[string]*sambatest.Server{"bak01": smb}}))
}

// holdRecordWrite holds (with fail: fails) the first write of the chain
// record after log 2's BACKUP LOG finished.
func (f *logFixture) holdRecordWrite(fail error) *storagetest.Hold {
	return f.hold("", storagetest.NewHold(func(name string) bool {
		st := backupLogs(f.site.Source)
		return strings.HasSuffix(name, "chain.json") && len(st) == 2 && !st[1].End.IsZero()
	}, fail))
}

// hold puts h on the writes into server ("": every server).
func (f *logFixture) hold(server string, h *storagetest.Hold) *storagetest.Hold {
	f.base.Cycle.OpenStorage = func(ctx context.Context, srv *config.BackupServer) (storage.Storage, error) {
		st, err := location.OpenServer(ctx, srv)
		if err != nil || server != "" && srv.Name != server {
			return st, err
		}
		return h.Wrap(st), nil
	}
	return h
}

// inBackground runs activity fn with in beside the test (another worker's
// attempt) until h holds its write; its error comes on the channel.
func (f *logFixture) inBackground(h *storagetest.Hold, fn, in any, check func(converter.EncodedValue) error) <-chan error {
	f.t.Helper()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(f.acts)
	done := make(chan error, 1)
	go func() {
		v, err := env.ExecuteActivity(fn, in)
		if err == nil && check != nil {
			err = check(v)
		}
		done <- err
	}()
	select {
	case <-h.Reached:
	case err := <-done:
		f.t.Fatalf("%T ended before its held write: %v", in, err)
	case <-time.After(time.Minute):
		f.t.Fatalf("%T never came to its held write", in)
	}
	return done
}

// The write of the chain record after BACKUP LOG is cut and never reaches
// the server: the record keeps log 2 claimed (pending) by the chain's
// workflow, and the retry reads the finished log backup from its file and
// records it, without a second BACKUP LOG; the chain goes on whole.
func TestSQLBackupLogRetryRecordsTheLogItsCutAttemptTook(t *testing.T) {
	f := sambaLogFixture(t)
	f.full(true)
	f.mustBackupLog()
	f.commit(3)
	f.holdRecordWrite(context.Canceled)
	if _, err := f.backupLog(); err == nil {
		t.Fatal("BackupLog succeeded although its record write was cut")
	}
	if l := f.newest().Log(2); l == nil || l.State != catalog.LogPending || l.WorkflowID != testWorkflowID {
		t.Fatalf("log 2 after the cut: %+v, want still claimed by the chain's workflow", l)
	}
	if out := f.mustBackupLog(); out.Number != 2 || !out.Reattached || out.Break != nil {
		t.Fatalf("the retry: %+v, want log 2 recorded from its file", out)
	}
	f.commit(3)
	if out := f.mustBackupLog(); out.Number != 3 || out.Break != nil {
		t.Fatalf("the next tick: %+v, want log 3", out)
	}
	if n := len(backupLogs(f.site.Source)); n != 3 {
		t.Fatalf("BACKUP LOG ran %d times, want 3 (log 2 once)", n)
	}
	c, err := catalog.AssembleChain(f.records("bak01"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if gaps := c.Gaps(); len(gaps) != 0 || len(c.Logs) != 3 {
		t.Fatalf("chain logs %+v gaps %v: want 1-3 without a gap", c.Logs, gaps)
	}
}

// CopyLogs reads the chain record, copies log 1, and hangs in its write
// of the record on the copy target; meanwhile the next tick takes log 2.
// CopyLogs then records the copy on the chain's server into the record as
// it is there now: log 2 stays recorded (written, to be copied next).
func TestCopyLogsKeepsALogTakenWhileItCopied(t *testing.T) {
	f := sambaLogFixture(t)
	f.full(true)
	f.mustBackupLog()
	h := f.hold("bak02", storagetest.NewHold(func(name string) bool { return strings.HasSuffix(name, "chain.json") }, nil))
	done := f.inBackground(h, f.acts.CopyLogs, CopyLogsInput{Database: "Sales", Instance: f.site.Instance, Chain: 1},
		func(v converter.EncodedValue) error {
			var out CopyLogsOutput
			if err := v.Get(&out); err != nil {
				return err
			}
			if len(out.Copied) != 1 || out.Copied[0] != 1 {
				return fmt.Errorf("copied %v, want log 1", out.Copied)
			}
			return nil
		})
	f.commit(3)
	if out := f.mustBackupLog(); out.Number != 2 {
		t.Fatalf("the tick during the copy: %+v, want log 2", out)
	}
	h.Release()
	if err := <-done; err != nil {
		t.Fatalf("CopyLogs: %v", err)
	}
	r := f.newest()
	if l := r.Log(1); l == nil || l.State != catalog.LogCopied {
		t.Fatalf("log 1 %+v, want copied", l)
	}
	if l := r.Log(2); l == nil || l.State != catalog.LogWritten || len(l.Files) != 1 {
		t.Fatalf("log 2 %+v after the copy's record write: want it still recorded, written", l)
	}
}
