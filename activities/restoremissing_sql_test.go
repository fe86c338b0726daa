package activities

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/location"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// A RESTORE that does not find a stripe (operating system error 2) is an
// incomplete set only when the worker, reaching the same server, misses
// it too: a worker that cannot reach the server then has not confirmed
// anything against the set, and the step is retried.
func TestSQLRestoreMissingStripeUnconfirmedIsNotEvidence(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	var lost atomic.Bool
	f.acts.Cycle.OpenStorage = func(ctx context.Context, srv *config.BackupServer) (storage.Storage, error) {
		st, err := location.OpenServer(ctx, srv)
		if err != nil || srv.Name != "bak02" {
			return st, err
		}
		return &lostAfterBackup{Storage: st, lost: lost.Load}, nil
	}
	_, seq, _ := f.backedUp()
	f.must(f.acts.CopyToRemote, CopyInput{Database: "Sales", Sequence: seq, From: "bak01", To: "bak02"}, nil)
	if err := os.Remove(filepath.Join(f.dirs["bak02"], tsql.StripeFileName("sql01", "Sales", seq, 2, 2))); err != nil {
		t.Fatal(err)
	}
	lost.Store(true)
	err := f.run(f.acts.Restore, VerifyInput{Database: "Sales", Sequence: seq, Server: "bak02"}, nil)
	if !strings.Contains(fmt.Sprint(err), "3201") {
		t.Fatalf("restore: %v; want SQL Server's 3201 for the missing stripe", err)
	}
	if typ := errorTypeOf(err); err == nil || Evidence(typ) != "" {
		t.Fatalf("a stripe SQL Server does not find, on a server the worker cannot reach: %s (evidence %q): %v; want no evidence",
			typ, Evidence(typ), err)
	}
}
