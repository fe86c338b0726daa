package cycle

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// garbling is a copy target whose stripe writes land altered while garble
// says so: what a failing disk or network path of the remote server, or an
// earlier attempt of the copy still writing the same partial file (its
// worker cut off from Temporal), leaves there.
type garbling struct {
	storage.Storage
	garble func() bool
}

func (s *garbling) Create(ctx context.Context, name string) (storage.Writer, error) {
	w, err := s.Storage.Create(ctx, name)
	if err != nil || !strings.Contains(name, ".bak") || !s.garble() {
		return w, err
	}
	return garbledWriter{w}, nil
}

type garbledWriter struct{ storage.Writer }

func (w garbledWriter) WriteAt(p []byte, off int64) (int, error) {
	q := append([]byte(nil), p...)
	if len(q) > 0 {
		q[0] ^= 0xff
	}
	return w.Writer.WriteAt(q, off)
}

// A copy whose destination reads back otherwise than the bytes sent says
// nothing about the set, whose stripes on the primary hashed as they were
// sent: the copy is retried (and copies again), never CorruptBackup, which
// marks the set failed on every server that holds it.
func TestSQLCopyReadBackMismatchIsNotEvidence(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	var garble atomic.Bool
	f.throughStorage("bak02", func(st storage.Storage) storage.Storage { return &garbling{Storage: st, garble: garble.Load} })
	_, seq, _ := f.backedUp()
	in := activities.CopyInput{Database: "Sales", Sequence: seq, From: "bak01", To: "bak02"}
	garble.Store(true)
	err := f.run(f.acts.CopyToRemote, in, nil)
	if err == nil {
		t.Fatal("the remote's copy read back altered, and the copy succeeded")
	}
	if typ := activities.ErrorType(err); activities.Evidence(typ) != "" || appErrorOf(t, err).NonRetryable() {
		t.Fatalf("copy read back altered: %s (evidence %q, non-retryable %v): %v; want a retryable error that is no evidence",
			typ, activities.Evidence(typ), appErrorOf(t, err).NonRetryable(), err)
	}
	garble.Store(false)
	var out activities.CopyOutput
	f.must(f.acts.CopyToRemote, in, &out)
	if m := f.load("bak02", seq); m == nil || len(m.Servers) != 2 {
		t.Errorf("after the retry: manifest on bak02 %+v, want the set copied", m)
	}
}

// A RESTORE that does not find a stripe (operating system error 2) is an
// incomplete set only when the worker, reaching the same server, misses
// it too: a worker that cannot reach the server then has not confirmed
// anything against the set, and the step is retried.
func TestSQLRestoreMissingStripeUnconfirmedIsNotEvidence(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	var lost atomic.Bool
	f.throughStorage("bak02", func(st storage.Storage) storage.Storage { return &lostAfterBackup{Storage: st, lost: lost.Load} })
	_, seq, _ := f.backedUp()
	f.must(f.acts.CopyToRemote, activities.CopyInput{Database: "Sales", Sequence: seq, From: "bak01", To: "bak02"}, nil)
	if err := os.Remove(filepath.Join(f.dirs["bak02"], tsql.StripeFileName("sql01", "Sales", seq, 2, 2))); err != nil {
		t.Fatal(err)
	}
	lost.Store(true)
	err := f.run(f.acts.Restore, activities.VerifyInput{Database: "Sales", Sequence: seq, Server: "bak02"}, nil)
	if err == nil || !strings.Contains(err.Error(), "3201") {
		t.Fatalf("restore: %v; want SQL Server's 3201 for the missing stripe", err)
	}
	if typ := activities.ErrorType(err); err == nil || activities.Evidence(typ) != "" {
		t.Fatalf("a stripe SQL Server does not find, on a server the worker cannot reach: %s (evidence %q): %v; want no evidence",
			typ, activities.Evidence(typ), err)
	}
}
