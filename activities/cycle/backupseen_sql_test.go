package cycle

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/location"
)

// lostAfterBackup is a backup server the worker loses (an SMB session cut,
// the attempt's context ended) once the source's BACKUP has completed:
// Stat of a stripe fails as a network error then.
type lostAfterBackup struct {
	storage.Storage
	lost func() bool
}

func (s *lostAfterBackup) Stat(ctx context.Context, name string) (storage.FileInfo, error) {
	if strings.HasSuffix(name, ".bak") && s.lost() {
		return storage.FileInfo{}, fmt.Errorf("stat %q: %w", name, syscall.ECONNRESET)
	}
	return s.Storage.Stat(ctx, name)
}

// A BACKUP that completed, after which the worker could not reach the
// backup server to measure the stripes: nothing is known against the set.
// The attempt is retried (not BackupTargetUnreachable, which the cycle
// takes for a backup that failed and marks its set backup_incomplete), and
// the retry recognises the finished backup without a second BACKUP, also
// while the server is still lost.
func TestSQLBackupCompletedThenServerLostIsNotAFailedBackup(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	var lost atomic.Bool
	completed := func() bool {
		for _, st := range statements(f.src, "BACKUP DATABASE") {
			if st.Outcome == "ok" {
				return true
			}
		}
		return false
	}
	f.acts.Cycle.OpenStorage = func(ctx context.Context, srv *config.BackupServer) (storage.Storage, error) {
		st, err := location.OpenServer(ctx, srv)
		if err != nil {
			return nil, err
		}
		return &lostAfterBackup{Storage: st, lost: func() bool { return lost.Load() && completed() }}, nil
	}
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
	in := activities.BackupInput{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: 2}

	lost.Store(true)
	err := f.run(f.acts.Backup, in, nil)
	if err == nil {
		t.Fatal("the backup server was lost after BACKUP completed, and the step succeeded without measuring the stripes")
	}
	if typ := activities.ErrorType(err); typ != activities.ErrBackupUnconfirmed || appErrorOf(t, err).NonRetryable() {
		t.Fatalf("backup completed, server then lost: %s (non-retryable %v): %v; want a retryable %s",
			typ, appErrorOf(t, err).NonRetryable(), err, activities.ErrBackupUnconfirmed)
	}
	// The retry while the server is still lost: no second BACKUP over the
	// finished one.
	f.env.SetHeartbeatDetails(activities.BackupHeartbeat{Started: true, Percent: 100})
	err = f.run(f.acts.Backup, in, nil)
	if typ := activities.ErrorType(err); typ != activities.ErrBackupUnconfirmed {
		t.Errorf("retry with the server still lost: %v, want %s", err, activities.ErrBackupUnconfirmed)
	}
	if n := len(statements(f.src, "BACKUP DATABASE")); n != 1 {
		t.Errorf("BACKUP ran %d times, want 1 (the retry recognises the finished backup)", n)
	}
	lost.Store(false)
	var out activities.BackupOutput
	f.must(f.acts.Backup, in, &out)
	if !out.Reattached || len(out.Stripes) != 2 || out.Bytes == 0 {
		t.Errorf("retried backup %+v, want the finished backup recognised with both stripes", out)
	}
	if n := len(statements(f.src, "BACKUP DATABASE")); n != 1 {
		t.Errorf("BACKUP ran %d times, want 1", n)
	}
}

// The backup server lost for everyone after a BACKUP completed (the file
// server rebooting): the retries can neither open the worker's location nor
// have SQL Server read the set's headers. Until one of them can tell, the
// outcome stays unconfirmed: no second BACKUP is sent over the finished one,
// and the step never reports the backup server unreachable, which the cycle
// takes for a BACKUP that failed (backup_incomplete, a new number).
func TestSQLBackupCompletedThenShareDownIsNotAFailedBackup(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	var lost, down atomic.Bool
	f.acts.Cycle.OpenStorage = func(ctx context.Context, srv *config.BackupServer) (storage.Storage, error) {
		if down.Load() {
			return nil, &storage.Error{Op: "connect", Location: srv.Location, Kind: storage.ErrConnection, Err: syscall.ECONNREFUSED}
		}
		st, err := location.OpenServer(ctx, srv)
		if err != nil {
			return nil, err
		}
		return &lostAfterBackup{Storage: st, lost: lost.Load}, nil
	}
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
	in := activities.BackupInput{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: 2}
	var out activities.BackupOutput
	f.must(f.acts.Backup, in, &out)
	// The same set's attempt as the one cut off after its BACKUP completed.
	f.env.SetHeartbeatDetails(activities.BackupHeartbeat{Started: true, Percent: 100})

	down.Store(true)
	f.src.SetShareUnreachable(`\\bak01\backup`, true)
	err := f.run(f.acts.Backup, in, nil)
	if typ := activities.ErrorType(err); typ != activities.ErrBackupUnconfirmed {
		t.Errorf("retry with the worker's location unreachable: %s: %v, want %s", typ, err, activities.ErrBackupUnconfirmed)
	}
	down.Store(false)
	err = f.run(f.acts.Backup, in, nil)
	if typ := activities.ErrorType(err); typ != activities.ErrBackupUnconfirmed {
		t.Errorf("retry with the share unreachable from SQL Server: %s: %v, want %s", typ, err, activities.ErrBackupUnconfirmed)
	}
	if n := len(statements(f.src, "BACKUP DATABASE")); n != 1 {
		t.Errorf("BACKUP ran %d times, want 1 (no second BACKUP over a set that may be complete)", n)
	}
	f.src.SetShareUnreachable(`\\bak01\backup`, false)
	out = activities.BackupOutput{}
	f.must(f.acts.Backup, in, &out)
	if !out.Reattached || len(out.Stripes) != 2 {
		t.Errorf("retried backup %+v, want the finished backup recognised", out)
	}
	if n := len(statements(f.src, "BACKUP DATABASE")); n != 1 {
		t.Errorf("BACKUP ran %d times, want 1", n)
	}
}

// The same set sent again by a new activity (no heartbeat of the earlier
// one: the workflow waited, then took the same number) while SQL Server
// cannot reach the share: the stripes the worker sees were written by an
// earlier BACKUP, which may have completed: no BACKUP over them, no failed
// set.
func TestSQLBackupSameSetAgainWithShareDownFromSQLServer(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	in := f.backedUpOnce()
	f.src.SetShareUnreachable(`\\bak01\backup`, true)
	err := f.run(f.acts.Backup, in, nil)
	if typ := activities.ErrorType(err); typ != activities.ErrBackupUnconfirmed {
		t.Errorf("same set again, the share unreachable from SQL Server: %s: %v, want %s", typ, err, activities.ErrBackupUnconfirmed)
	}
	if n := len(statements(f.src, "BACKUP DATABASE")); n != 1 {
		t.Errorf("BACKUP ran %d times, want 1", n)
	}
	f.src.SetShareUnreachable(`\\bak01\backup`, false)
	var out activities.BackupOutput
	f.must(f.acts.Backup, in, &out)
	if !out.Reattached {
		t.Errorf("backup %+v, want the finished backup recognised", out)
	}
}

// backedUpOnce backs the fixture's database up to bak01 in 2 stripes under
// a new number: the input of that set's Backup.
func (f *sqlFixture) backedUpOnce() activities.BackupInput {
	f.t.Helper()
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: f.db}, &seq)
	in := activities.BackupInput{Database: f.db, Sequence: seq, Server: "bak01", Stripes: 2}
	f.must(f.acts.Backup, in, nil)
	return in
}

// throughStorage has the activities reach backup server name through wrap.
func (f *sqlFixture) throughStorage(name string, wrap func(storage.Storage) storage.Storage) {
	f.acts.Cycle.OpenStorage = func(ctx context.Context, srv *config.BackupServer) (storage.Storage, error) {
		st, err := location.OpenServer(ctx, srv)
		if err != nil || srv.Name != name {
			return st, err
		}
		return wrap(st), nil
	}
}
