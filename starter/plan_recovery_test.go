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

// passedDrill is a passed drill of db, half an hour ago, that restored logs
// first..last of chain 1 in logsTook.
func passedDrill(db string, first, last int64, logsTook time.Duration) catalog.DrillResult {
	now := time.Now().UTC()
	return catalog.DrillResult{WorkflowID: "drill/sql01/" + db, RunID: "r", Instance: "verify", Database: db + "_drill", From: "any", Point: "latest",
		Sequence: 1, Chain: 1, FirstLog: first, LastLog: last, Outcome: catalog.DrillPassed, RTO: time.Hour,
		Steps: catalog.DrillStepTimes{Logs: logsTook}, StartedAt: now.Add(-time.Hour), At: now.Add(-30 * time.Minute)}
}

// logChainOf writes chain 1 of db with log backups of the sizes given, one
// every `every` counted back from now, and a drill record of drill d.
func logChainOf(t *testing.T, dir, db string, sizes []int64, every time.Duration, d catalog.DrillResult) {
	t.Helper()
	now := time.Now().UTC()
	r := catalog.NewChainRecord("sql01", db, 1, 1, now.Add(-100*time.Hour))
	r.Fulls = []catalog.ChainFull{{Sequence: 1, BackupSetGUID: "base", FirstLSN: "1", LastLSN: "2", CheckpointLSN: "1", FinishUTC: now.Add(-90 * time.Hour)}}
	for i, size := range sizes {
		n := int64(i + 1)
		at := now.Add(-time.Duration(len(sizes)-i) * every)
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
	r2 := catalog.NewDrillRecord("sql01", db, now)
	r2.Add(d)
	if err := catalog.SaveDrill(context.Background(), catalog.StorageFS{Storage: st}, nil, r2); err != nil {
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
	logChainOf(t, bak01, "Sales", []int64{1 << 30, 1 << 30, 1 << 30, 1 << 30}, time.Hour, passedDrill("Sales", 1, 2, 100*time.Second))

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
	t.Logf("plan:\n%s", out)
	// Without diff_backup: no comparison, and nothing to estimate before
	// a verified full.
	file2, _, _ := provenSite(t, "  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02]}\n")
	if _, out, _ = runStarter(t, "plan", "--config", file2, "--database", "Sales"); strings.Contains(out, "differential") ||
		!strings.Contains(out, "recovery:  no verified full yet: nothing to estimate a restore from\n") {
		t.Errorf("recovery lines without diff_backup:\n%s", out)
	}
}

// starter plan predicts each step of the restore a recover would run now,
// with the per-log cost the newest drill measured: a chain of 150 minute
// logs of 128 KiB is not 18.75 MiB at the restore rate (a fifth of a
// second) but 150 RESTORE LOGs at the drill's 40 ms each. Beside it the
// drill's own prediction, made at its start, against what it measured,
// and the error of each step.
func TestPlanPredictsEachStepWithTheDrillsPerLogCost(t *testing.T) {
	file, bak01, bak02 := provenSite(t, "  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02], compression: false}\n")
	// 10 GiB restored in 102.4 s: 100 MB/s.
	timedSet(t, "Sales", 1, 24*time.Hour, 10<<30, map[catalog.Step]time.Duration{catalog.StepRestore: 102400 * time.Millisecond}, bak01, bak02)
	sizes := make([]int64, 150)
	for i := range sizes {
		sizes[i] = 128 << 10
	}
	// The drill restored all 150 in 6.1875 s: 18.75 MiB at 100 MB/s is
	// 0.1875 s, the other 6 s over 150 logs are 40 ms each. At its start
	// it had predicted them at a second each (no drill before it).
	d := passedDrill("Sales", 1, 150, 6187500*time.Microsecond)
	d.LogBytes, d.LogFastest = 150*128<<10, 35*time.Millisecond
	d.Steps.Full, d.Steps.Recovery = 110*time.Second, 2*time.Second
	d.Predicted = &catalog.RecoveryPrediction{Full: 102400 * time.Millisecond, Logs: 150*time.Second + 187500*time.Microsecond, LogCount: 150,
		LogBytes: d.LogBytes, LogOverhead: time.Second, LogFrom: "assumed"}
	d.PredictionError = catalog.PredictionErrors(d.Predicted, d.Steps, false)
	logChainOf(t, bak01, "Sales", sizes, time.Minute, d)

	code, out, errs := runStarter(t, "plan", "--config", file, "--database", "Sales")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	t.Logf("plan:\n%s", out)
	for _, want := range []string{
		"  predicted steps of a recover now (full seq 1 + 150 logs):\n",
		"    full               1m42s  10.0 GiB at 100 MB/s\n",
		"    logs               6.19s  150 logs of 18.8 MiB at 100 MB/s, measured on set 1 of ",
		", + 40ms a log measured by the drill of ",
		"    recovery              2s  as the drill of ",
		"    restore            1m51s  from the full's RESTORE to the database online\n",
		"  drill:     passed ",
		", predicted at its start against measured (error = measured - predicted):\n",
		"    full               1m42s  measured 1m50s  error +7.6s (x1.07)\n",
		"    logs               2m30s  measured 6.19s  error -2m24s (x0.04)\n",
		"    restore            4m13s  measured 1m56s  error -2m16s (x0.46)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q", want)
		}
	}
	if strings.Contains(out, "differential") {
		t.Errorf("differential lines without diff_backup:\n%s", out)
	}
}
