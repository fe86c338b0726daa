package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// starter plan estimates from the rates measured on the database's last
// verified sets where there are any and from the flags for the other
// steps, and says which; --no-catalog reads nothing.
func TestPlanUsesMeasuredThroughput(t *testing.T) {
	file, bak01, bak02 := provenSite(t, "  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02], compression: false}\n")
	// 10 GiB: backed up in 100 s (102.4 MB/s) and 200 s (51.2), copied in
	// 400 s (25.6), restored in 800 s (12.8); CHECKDB in 5 s says nothing.
	steps := func(backup time.Duration) map[catalog.Step]time.Duration {
		return map[catalog.Step]time.Duration{catalog.StepBackup: backup, catalog.StepCopy: 400 * time.Second,
			catalog.StepRestore: 800 * time.Second, catalog.StepCheckDB: 5 * time.Second}
	}
	timedSet(t, "Sales", 1, 50*time.Hour, 10<<30, steps(200*time.Second), bak01, bak02)
	timedSet(t, "Sales", 2, 26*time.Hour, 10<<30, steps(100*time.Second), bak02, bak01)

	code, out, errs := runStarter(t, "plan", "--config", file, "--database", "Sales", "--size", "100GiB", "--last-server", "bak02")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"plan for sql01/Sales (source 127.0.0.1:1433); read the manifests on bak01, bak02, nothing else was contacted\n",
		"measured:  backup 51 MB/s (measured on set 1 of ", "copy 26 MB/s (measured on set ", "restore 13 MB/s (measured on set ",
		"; CHECKDB from the flags above\n",
		"  backup       33m20s  at 51 MB/s, measured on set 1 of ",
		"  copy        1h6m40s  100.0 GiB at 26 MB/s, measured on set ",
		"  restore    2h13m20s  at 13 MB/s, measured on set ",
		"  CHECKDB       8m32s  at 200 MB/s\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}

	code, out, errs = runStarter(t, "plan", "--config", file, "--database", "Sales", "--size", "100GiB", "--no-catalog")
	if code != exitOK {
		t.Fatalf("--no-catalog: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "; nothing was contacted\n") || strings.Contains(out, "measured") ||
		!strings.Contains(out, "  backup       15m31s  at 110 MB/s, limited by network\n") {
		t.Errorf("--no-catalog output:\n%s", out)
	}

	// A server that cannot be read is named; the other one's sets count.
	if err := os.RemoveAll(bak02); err != nil {
		t.Fatal(err)
	}
	_, out, _ = runStarter(t, "plan", "--config", file, "--database", "Sales", "--size", "100GiB")
	if !strings.Contains(out, "read the manifests on bak01, nothing else") || !strings.Contains(out, "bak02 not read, its sets are not counted: ") ||
		!strings.Contains(out, "backup 51 MB/s") {
		t.Errorf("plan with bak02 gone:\n%s", out)
	}
}
