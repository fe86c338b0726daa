package status

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// lsnOf is a 23-digit LSN from a counter.
func lsnOf(n int) string { return fmt.Sprintf("171266580%014d", n) }

// chainOf is part 1 of chain 1 of sql01/Ledger: a full finished at
// fullAt (set 10, GUID guid-10) and n log backups a minute apart after
// it, the first `proven` of them proven.
func chainOf(fullAt time.Time, n, proven int) *catalog.ChainRecord {
	r := catalog.NewChainRecord("sql01", "Ledger", 1, 1, fullAt)
	r.Fulls = []catalog.ChainFull{{Sequence: 10, BackupSetGUID: "guid-10", FirstLSN: lsnOf(100), LastLSN: lsnOf(105),
		CheckpointLSN: lsnOf(101), FinishUTC: fullAt}}
	at := fullAt
	for i := 1; i <= n; i++ {
		at = at.Add(time.Minute)
		l := catalog.LogBackup{Number: int64(i), State: catalog.LogCopied, WorkflowID: "logchain/sql01/Ledger", RunID: "r",
			FirstLSN: lsnOf(100 + 10*(i-1)), LastLSN: lsnOf(110 + 10*(i-1)), BackupStart: at, BackupFinish: at.Add(2 * time.Second),
			Files:     []catalog.Stripe{{Name: r.LogFileName(int64(i), 1, 1), Size: 1, SHA256: strings.Repeat("a", 64)}},
			UpdatedAt: at}
		l.SetUTCOffset(0)
		if i <= proven {
			l.Proven = &catalog.LogProof{At: at.Add(10 * time.Second), Mode: "standby", Instance: "verify", Database: "Ledger_standby"}
		}
		r.Logs = append(r.Logs, l)
	}
	r.UpdatedAt = at
	return r
}

func saveChain(t *testing.T, r *catalog.ChainRecord, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := catalog.SaveChain(context.Background(), dirFS(t, d), nil, r); err != nil {
			t.Fatal(err)
		}
	}
}

// status --from-manifests judges a database with log backups by the point
// its chain is proven to: within the rpo it is OK whatever the full's
// age; RED past the rpo, with a log unproven past log_proof_lag (named),
// with a broken chain (named). The chain's server and the copy target
// each know part of it (the proofs reach the copy target first).
func TestStatusJudgesTheLogChain(t *testing.T) {
	const ledger = `  - name: Ledger
    instance: sql01
    backup_servers: [bak01, bak02]
    rpo: 10m
    owns_backup_chain: true
    log_backup: {every: 1m}
    log_proof: standby
    log_proof_lag: 5m
`
	fullAt := now.Add(-171 * time.Minute)
	for _, tt := range []struct {
		name       string
		logs       int
		proven     int
		primary    int // logs the chain's server has proven (the copy target has `proven`)
		brk        bool
		red        bool
		want       []string
		provenTo   time.Time
		unprovenNo int64
	}{
		{name: "proven within the rpo", logs: 170, proven: 166, primary: 160, provenTo: fullAt.Add(166 * time.Minute)},
		{name: "proven past the rpo", logs: 170, proven: 150, primary: 150, red: true, want: []string{"beyond the rpo of 10m"},
			provenTo: fullAt.Add(150 * time.Minute), unprovenNo: 151},
		{name: "a log unproven past the lag", logs: 170, proven: 163, primary: 100, red: true,
			want: []string{"log 164 of chain 1", "not proven yet: beyond the log_proof_lag of 5m"}, provenTo: fullAt.Add(163 * time.Minute),
			unprovenNo: 164},
		{name: "broken", logs: 170, proven: 170, primary: 170, brk: true, red: true,
			want: []string{"log chain 1 broke (recovery_model_switch: BACKUP LOG failed with 4214)"}, provenTo: fullAt.Add(170 * time.Minute)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			c := siteConfig(t, dir, ledger)
			bak01, bak02 := filepath.Join(dir, "bak01"), filepath.Join(dir, "bak02")
			m := verified(t, "sql01", "Ledger", 10, fullAt, time.Minute, time.Minute)
			m.Header = &catalog.Header{BackupSetGUID: "GUID-10", FirstLSN: lsnOf(100), LastLSN: lsnOf(105), BackupStart: fullAt.Add(-time.Minute),
				BackupFinish: fullAt}
			m.Header.SetUTCOffset(0)
			save(t, m, bak01, bak02)
			onCopy, onPrimary := chainOf(fullAt, tt.logs, tt.proven), chainOf(fullAt, tt.logs, tt.primary)
			if tt.brk {
				onPrimary.Break = &catalog.ChainBreak{Reason: "recovery_model_switch", Detail: "BACKUP LOG failed with 4214", At: now.Add(-time.Minute)}
			}
			onCopy.Logs = onCopy.Logs[:tt.logs-3] // the newest are not copied yet
			saveChain(t, onPrimary, bak01)
			saveChain(t, onCopy, bak02)

			d := find(t, Load(context.Background(), c, nil, now).Databases, "sql01", "Ledger")
			lc := d.LogChain
			if lc == nil || lc.Chain != 1 || lc.Logs != tt.logs || !lc.ProvenTo.Equal(tt.provenTo) {
				t.Fatalf("log chain %+v, want chain 1 of %d logs proven to %s", lc, tt.logs, tt.provenTo)
			}
			if d.OutOfObjectives != tt.red {
				t.Fatalf("out of objectives %v, want %v: %q", d.OutOfObjectives, tt.red, d.Reasons)
			}
			for _, w := range tt.want {
				if !strings.Contains(strings.Join(d.Reasons, "; "), w) {
					t.Errorf("reasons %q do not say %q", d.Reasons, w)
				}
			}
			if tt.name == "a log unproven past the lag" && strings.Contains(strings.Join(d.Reasons, "; "), "rpo") {
				t.Errorf("proven to within the rpo, yet the reasons say %q", d.Reasons)
			}
			if got := lc.Unproven; (got == nil) != (tt.unprovenNo == 0) || got != nil && got.Number != tt.unprovenNo {
				t.Errorf("unproven %+v, want log %d", got, tt.unprovenNo)
			}
			if lc.BrokenOrGap() != tt.brk {
				t.Errorf("broken or gap %v, want %v", lc.BrokenOrGap(), tt.brk)
			}
		})
	}
}
