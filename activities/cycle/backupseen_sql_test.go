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
