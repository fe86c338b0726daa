package chaos

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/activities/logs"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/workflows"
)

// TestCheckerLogChain: the log checks' own rules find a hole in the LSNs,
// a log without its file and a damaged or missing file, and take the
// product's word only when it says broken or degraded with a reason.
func TestCheckerLogChain(t *testing.T) {
	if lsnCmp("99", "100") >= 0 || lsnCmp("0100", "100") != 0 || lsnCmp("101", "100") <= 0 {
		t.Fatal("LSNs compare as numbers")
	}
	files := []catalog.Stripe{{Name: "l.trn"}}
	full := &catalog.ChainFull{Sequence: 3, LastLSN: "1000"}
	lg := func(n int64, first, last string) catalog.LogBackup {
		return catalog.LogBackup{Number: n, FirstLSN: first, LastLSN: last, Files: files, State: catalog.LogCopied}
	}
	v := &chainView{full: full, logs: []catalog.LogBackup{lg(1, "500", "900"), lg(2, "900", "1200"), lg(3, "1200", "1200"), lg(4, "1200", "1500")}}
	if seq, gap, _ := v.walk(); gap != "" || len(seq) != 2 || seq[0].Number != 2 || seq[1].Number != 4 {
		t.Fatalf("a whole chain: %v %q", seq, gap)
	}
	v.logs = append(v.logs, lg(5, "1600", "1700"))
	if seq, gap, _ := v.walk(); len(seq) != 2 || !strings.Contains(gap, "log 5 starts at LSN 1600") {
		t.Fatalf("a hole before log 5: %v %q", seq, gap)
	}
	v.logs[1].Files = nil // a foreign log not adopted
	if seq, gap, _ := v.walk(); len(seq) != 0 || !strings.Contains(gap, "log 2") {
		t.Fatalf("a log without its file: %v %q", seq, gap)
	}

	dir := t.TempDir()
	f := &Fleet{dirs: map[string]string{Bak01: dir}}
	c := NewChecker(f)
	body := []byte("log backup")
	sum := sha256.Sum256(body)
	st := catalog.Stripe{Name: "l.trn", Size: int64(len(body)), SHA256: hex.EncodeToString(sum[:])}
	if why := c.logFileIntact(Bak01, st); why != "missing" {
		t.Fatalf("a missing file: %q", why)
	}
	if err := os.WriteFile(filepath.Join(dir, "l.trn"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	if why := c.logFileIntact(Bak01, st); why != "" {
		t.Fatalf("an intact file: %q", why)
	}
	if err := os.WriteFile(filepath.Join(dir, "l.trn"), []byte("log backuP"), 0o644); err != nil {
		t.Fatal(err)
	}
	if why := c.logFileIntact(Bak01, st); !strings.Contains(why, "sha256") {
		t.Fatalf("a changed file: %q", why)
	}

	for _, tc := range []struct {
		st  workflows.LogChainStatus
		red bool
	}{
		{workflows.LogChainStatus{State: workflows.ChainOK}, false},
		{workflows.LogChainStatus{State: workflows.ChainBroken}, false},
		{workflows.LogChainStatus{State: workflows.ChainBroken, Break: &logs.Break{Reason: "gap", Detail: "log 5"}}, true},
		{workflows.LogChainStatus{State: workflows.ChainDegraded}, false},
		{workflows.LogChainStatus{State: workflows.ChainDegraded, CopyError: "bak02 away"}, true},
	} {
		if red, _ := (productSays{chain: tc.st}).red(); red != tc.red {
			t.Errorf("%+v: red %v, want %v", tc.st, red, tc.red)
		}
	}
}
