package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/storage/local"
)

// diffSet writes a verified differential seq on base (its size in data)
// into the server directories, as timedSet writes a full.
func diffSet(t *testing.T, db string, seq, base int64, ago time.Duration, data int64, dirs ...string) {
	t.Helper()
	taken := time.Now().Add(-ago).UTC()
	m := catalog.New("sql01", db, seq, taken)
	m.Options = catalog.Options{Checksum: true, Stripes: 1}
	m.Stripes = []catalog.Stripe{{Name: m.StripeFileName(1, 1), Size: data}}
	m.Header = &catalog.Header{FirstLSN: "3", LastLSN: "4", BackupFinish: taken, BackupSize: data, CompressedBackupSize: data}
	m.Header.SetUTCOffset(0)
	m.Differential = &catalog.DiffBase{Sequence: base, BackupSetGUID: "base", LSN: "1"}
	writeVerified(t, m, taken, dirs...)
}

// logChainOf writes chain 1 of db with log backups of the sizes given, one an
// hour ago each counted back from now, and a passed drill that restored
// logs first..last in logsTook.
func logChainOf(t *testing.T, dir, db string, sizes []int64, first, last int64, logsTook time.Duration) {
	t.Helper()
	now := time.Now().UTC()
	r := catalog.NewChainRecord("sql01", db, 1, 1, now.Add(-100*time.Hour))
	r.Fulls = []catalog.ChainFull{{Sequence: 1, BackupSetGUID: "base", FirstLSN: "1", LastLSN: "2", CheckpointLSN: "1", FinishUTC: now.Add(-90 * time.Hour)}}
	for i, size := range sizes {
		n := int64(i + 1)
		at := now.Add(-time.Duration(len(sizes)-i) * time.Hour)
		sum := sha256.Sum256([]byte(fmt.Sprint(n)))
		l := catalog.LogBackup{Number: n, State: catalog.LogCopied, WorkflowID: "logchain/sql01/" + db, RunID: "r1",
			FirstLSN: fmt.Sprint(10 * n), LastLSN: fmt.Sprint(10*n + 10), BackupStart: at.Add(-time.Second), BackupFinish: at,
			Files: []catalog.Stripe{{Name: r.LogFileName(n, 1, 1), Size: size, SHA256: hex.EncodeToString(sum[:])}}, Servers: []string{"bak01", "bak02"},
			UpdatedAt: at}
		l.SetUTCOffset(0)
		r.Logs = append(r.Logs, l)
	}
	st, err := local.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := catalog.SaveChain(context.Background(), catalog.StorageFS{Storage: st}, nil, r); err != nil {
		t.Fatal(err)
	}
	d := catalog.NewDrillRecord("sql01", db, now)
	d.Add(catalog.DrillResult{WorkflowID: "drill/sql01/" + db, RunID: "r", Instance: "verify", Database: db + "_drill", From: "any", Point: "latest",
		Sequence: 1, Chain: 1, FirstLog: first, LastLog: last, Outcome: catalog.DrillPassed, RTO: time.Hour,
		Steps: catalog.DrillStepTimes{Logs: logsTook}, StartedAt: now.Add(-time.Hour), At: now.Add(-30 * time.Minute)})
	if err := catalog.SaveDrill(context.Background(), catalog.StorageFS{Storage: st}, nil, d); err != nil {
		t.Fatal(err)
	}
}

// For a database with diff_backup, starter plan estimates both restores to
// its newest point from what its backup servers hold and measured: the
// newest verified full restored at the measured restore rate, then every
// log backup since it (at the rate its last drill replayed logs), or the
// newest differential on it and the logs after that; and says which is
// shorter.
func TestPlanComparesTheRestoresWithAndWithoutADifferential(t *testing.T) {
	file, bak01, bak02 := provenSite(t, "  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02], compression: false, owns_backup_chain: true, diff_backup: {every: 6h}}\n")
	// 10 GiB restored in 800 s: 12.8 MB/s.
	timedSet(t, "Sales", 1, 24*time.Hour, 10<<30, map[catalog.Step]time.Duration{catalog.StepRestore: 800 * time.Second}, bak01, bak02)
	// 4 logs of 1 GiB since the full; the drill replayed logs 1-2 (2 GiB) in 100 s: 20.48 MB/s.
	logChainOf(t, bak01, "Sales", []int64{1 << 30, 1 << 30, 1 << 30, 1 << 30}, 1, 2, 100*time.Second)

	code, out, errs := runStarter(t, "plan", "--config", file, "--database", "Sales")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"recovery:  to the newest point, from full seq 1 (10.0 GiB) at 13 MB/s (measured on set 1 of ", "): 13m20s\n",
		"  full + 4 logs since it (4.0 GiB at 20 MB/s, measured by the drill of ",
		"  full + differential: no verified differential on seq 1 yet: the first one gives this estimate\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}

	// A small differential 90 minutes ago: full + it + the newest log.
	diffSet(t, "Sales", 2, 1, 90*time.Minute, 512<<20, bak01, bak02)
	_, out, _ = runStarter(t, "plan", "--config", file, "--database", "Sales")
	for _, want := range []string{
		"  full + 4 logs since it (4.0 GiB at 20 MB/s, measured by the drill of ", "16m40s\n",
		"  full + differential seq 2 (512.0 MiB) + 1 log since it (1.0 GiB)", "14m50s\n",
		"differentials shorten this recovery by 1m50s\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	// A differential nearly the full's size: longer.
	diffSet(t, "Sales", 3, 1, 30*time.Minute, 9<<30, bak01, bak02)
	_, out, _ = runStarter(t, "plan", "--config", file, "--database", "Sales")
	if !strings.Contains(out, "differentials lengthen this recovery by ") || !strings.Contains(out, "diff_backup: {every: 0s}") {
		t.Errorf("a differential of nearly the full's size:\n%s", out)
	}
	// Without diff_backup: no such lines.
	file2, _, _ := provenSite(t, "  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02]}\n")
	if _, out, _ = runStarter(t, "plan", "--config", file2, "--database", "Sales"); strings.Contains(out, "recovery:") {
		t.Errorf("recovery lines without diff_backup:\n%s", out)
	}
}
