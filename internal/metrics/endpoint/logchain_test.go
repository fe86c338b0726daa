package endpoint

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// A database with log backups exports the point its chain is proven to
// and whether it is broken; one without exports neither.
func TestLogChainGauges(t *testing.T) {
	dir := t.TempDir()
	bak01 := filepath.Join(dir, "bak01")
	cfg := siteConfig(t, dir, `  - name: Ledger
    instance: sql01
    backup_servers: [bak01, bak02]
    rpo: 10m
    owns_backup_chain: true
    log_backup: {every: 1m}
  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
`)
	fullAt := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	m := verifiedSet(t, "sql01", "Ledger", 1, fullAt, time.Minute, time.Minute)
	m.Header = &catalog.Header{BackupSetGUID: "GUID-1", FirstLSN: "1000", LastLSN: "1005", BackupFinish: fullAt}
	m.Header.SetUTCOffset(0)
	save(t, m, bak01)
	r := catalog.NewChainRecord("sql01", "Ledger", 1, 1, fullAt)
	r.Fulls = []catalog.ChainFull{{Sequence: 1, BackupSetGUID: "GUID-1", FirstLSN: "1000", LastLSN: "1005", CheckpointLSN: "1001", FinishUTC: fullAt}}
	start := fullAt.Add(50 * time.Minute)
	l := catalog.LogBackup{Number: 1, State: catalog.LogCopied, WorkflowID: "w", RunID: "r", FirstLSN: "1000", LastLSN: "1010",
		BackupStart: start, BackupFinish: start.Add(time.Second), UpdatedAt: start,
		Files:  []catalog.Stripe{{Name: r.LogFileName(1, 1, 1), Size: 1, SHA256: strings.Repeat("c", 64)}},
		Proven: &catalog.LogProof{At: start.Add(time.Second), Mode: "nightly", Instance: "verify", Database: "Ledger_proof"}}
	l.SetUTCOffset(0)
	r.Logs = []catalog.LogBackup{l}
	write := func() {
		t.Helper()
		if err := catalog.SaveChain(context.Background(), dirFS(t, bak01), nil, r); err != nil {
			t.Fatal(err)
		}
	}
	write()

	e := newEndpoint(t)
	e.Product().Refresh(context.Background(), cfg, nil)
	f := scrapeHandler(t, e)
	ledger := labels("instance", "sql01", "database", "Ledger")
	if v := f.value(t, LastProvenLog, ledger); v != float64(start.Unix()) {
		t.Errorf("%s = %v, want %d", LastProvenLog, v, start.Unix())
	}
	if v := f.value(t, LogChainBroken, ledger); v != 0 {
		t.Errorf("%s = %v, want 0", LogChainBroken, v)
	}
	if ms := f.find(LastProvenLog, labels("instance", "sql01", "database", "Sales")); len(ms) != 0 {
		t.Errorf("Sales has no log backups, yet %s: %v", LastProvenLog, ms)
	}

	r.Break = &catalog.ChainBreak{Reason: "simple_recovery", Detail: "BACKUP LOG failed with 4208", At: start.Add(time.Minute)}
	write()
	e.Product().Refresh(context.Background(), cfg, nil)
	if v := scrapeHandler(t, e).value(t, LogChainBroken, ledger); v != 1 {
		t.Errorf("after the break: %s = %v, want 1", LogChainBroken, v)
	}
}
