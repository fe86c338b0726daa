package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/evidence"
	"github.com/backupcycle/backupcycle/internal/s3test"
	"github.com/backupcycle/backupcycle/internal/storage/s3"
)

// Real cycles on the dev site with its object store: each verified set is
// recorded in the ledgers of bak01 and bak02, which follow the set to
// vault01, locked; `evidence verify` checks the copies too, and names a
// record removed from the end of a server's ledger (which leaves a chain
// that verifies on its own) from its copy.
func TestEvidenceLedgerFollowsTheSetToTheObjectStore(t *testing.T) {
	const tq = "tq-e2e-evidence"
	state := t.TempDir()
	site, err := devenv.Start(context.Background(), devenv.Options{StateDir: state, DatabaseSize: devenv.MinDatabaseSize,
		TemporalAddress: srv.FrontendAddress(), ObjectStore: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Stop() })
	siteWorker(t, site, tq)
	for range 2 {
		if code, out, errs := on(t, tq, "run", "--config", site.ConfigFile, "--database", devenv.Database, "--wait"); code != exitOK ||
			strings.Contains(out, "evidence not recorded") {
			t.Fatalf("run --wait: exit %d\n%s%s", code, out, errs)
		}
	}
	code, out, errs := on(t, tq, "evidence", "verify", "--config", site.ConfigFile)
	t.Logf("evidence verify:\n%s%s", out, errs)
	for _, want := range []string{"OK    bak01 sql01/Sales: 2 record(s), head 2", "OK    bak02 sql01/Sales: 2 record(s), head 2",
		"OK    vault01 (copy of bak01) sql01/Sales: 2 record(s), head 2", "OK    vault01 (copy of bak02) sql01/Sales: 2 record(s), head 2"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("evidence verify: exit %d, want %q\n%s%s", code, want, out, errs)
		}
	}

	// The newest record removed from bak02's ledger by hand.
	if err := os.Remove(filepath.Join(site.BackupDirs["bak02"], filepath.FromSlash(evidence.FileName(devenv.SourceInstance, devenv.Database, 2)))); err != nil {
		t.Fatal(err)
	}
	code, out, errs = on(t, tq, "evidence", "verify", "--config", site.ConfigFile, "--quick")
	if code != exitFail || !strings.Contains(out, "FAIL  bak02 sql01/Sales: 1 record(s), 1 do not match") ||
		!strings.Contains(out, "record 2 (") || !strings.Contains(out, "missing here, but the copy on vault01 holds it") ||
		!strings.Contains(errs, "the first: sql01/Sales on bak02, record 2") {
		t.Errorf("evidence verify after a record removed: exit %d\n%s%s", code, out, errs)
	}

	// A stripe of the first set on the object store changed by hand: a
	// new version over the locked one, which reads now return.
	data, err := os.ReadFile(filepath.Join(site.BackupDirs["bak01"], filepath.FromSlash(evidence.FileName(devenv.SourceInstance, devenv.Database, 1))))
	if err != nil {
		t.Fatal(err)
	}
	first, err := evidence.Decode(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	stripe := first.Record.Files[1].Name
	changeObject(t, site, stripe)
	code, out, errs = on(t, tq, "evidence", "verify", "--config", site.ConfigFile)
	if code != exitFail || !strings.Contains(out, "FAIL  vault01 (copy of bak01) sql01/Sales: 2 record(s), 1 do not match") ||
		!strings.Contains(out, "record 1 (") || !strings.Contains(out, "file "+stripe+" hashes to SHA-256") {
		t.Errorf("evidence verify after an object changed: exit %d\n%s%s", code, out, errs)
	}
}

// changeObject flips a byte in the middle of the object name on the
// site's object store, written as a new version above the locked one,
// which reads now return.
func changeObject(t *testing.T, site *devenv.Site, name string) {
	t.Helper()
	vault, err := s3.Open(context.Background(), site.Vault.Config(devenv.ObjectStoreBucket, devenv.ObjectStorePrefix))
	if err != nil {
		t.Fatal(err)
	}
	defer vault.Close()
	b := s3test.ReadAll(t, vault, name)
	b[len(b)/2] ^= 0x01
	if _, err := vault.Put(context.Background(), name, b, s3.Lock{}, false); err != nil {
		t.Fatal(err)
	}
}
