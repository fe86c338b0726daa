package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/storage/local"
)

// logsSite is provenSite with a manifest key and Sales with log backups;
// it returns the configuration file and the two server directories.
func logsSite(t *testing.T) (string, string, string) {
	t.Helper()
	file, bak01, bak02 := provenSite(t, "  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02], owns_backup_chain: true, log_backup: {every: 1m}}\n")
	key := filepath.Join(filepath.Dir(file), "manifest-key")
	if err := os.WriteFile(key, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("manifest_keys:\n  - {id: k1, key_file: '"+key+"'}\n"+string(y)), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, bak01, bak02
}

// saveChain signs r with the site's key into dir.
func saveChain(t *testing.T, file, dir string, r *catalog.ChainRecord) {
	t.Helper()
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := cfg.ManifestKeyRing()
	if err != nil {
		t.Fatal(err)
	}
	st, err := local.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := catalog.SaveChain(context.Background(), catalog.StorageFS{Storage: st}, keys, r); err != nil {
		t.Fatal(err)
	}
}

// salesChain is chain 1 of sql01/Sales on the verified full seq 7: logs 1
// and 2 copied (1 proven on a standby), log 3 written after a hole in the
// LSNs, log 4 failed with a message that holds a line break, and the break
// that ended it.
func salesChain(t *testing.T, at time.Time) *catalog.ChainRecord {
	t.Helper()
	r := catalog.NewChainRecord("sql01", "Sales", 1, 1, at)
	r.Fulls = []catalog.ChainFull{{Sequence: 7, BackupSetGUID: "6f9619ff-8b86-d011-b42d-00c04fc964ff", FirstLSN: "1000", LastLSN: "2000",
		CheckpointLSN: "1500", FinishUTC: at}}
	lsns := [][2]string{{"1900", "2100"}, {"2100", "2300"}, {"2400", "2600"}}
	for n := int64(1); n <= 4; n++ {
		l, err := r.Claim(n, "logchain/sql01/Sales", "run1", at)
		if err != nil {
			t.Fatal(err)
		}
		if n == 4 {
			l.State, l.Failure = catalog.LogFailed, "BACKUP LOG failed\nOK   forged line"
			break
		}
		l.State, l.FirstLSN, l.LastLSN = catalog.LogCopied, lsns[n-1][0], lsns[n-1][1]
		l.BackupStart = at.Add(time.Duration(n)*time.Minute + time.Hour) // the source's wall clock, UTC+1
		l.BackupFinish = l.BackupStart.Add(time.Second)
		l.SetUTCOffset(60)
		name := r.LogFileName(n, 1, 1)
		l.Files = []catalog.Stripe{{Name: name, Size: 1536, SHA256: strings.Repeat("0", 64)}}
		l.Servers = []string{"bak01", "bak02"}
		if n == 3 {
			l.State, l.Servers = catalog.LogWritten, []string{"bak01"}
		}
		if n == 1 {
			l.Proven = &catalog.LogProof{At: at.Add(5 * time.Minute), Mode: "standby", Instance: "verify", Database: "Sales_standby"}
		}
	}
	r.Break = &catalog.ChainBreak{Reason: "gap", Detail: "log 3 does not start where log 2 ended", At: at.Add(10 * time.Minute)}
	return r
}

// `starter logs --database Sales --config` shows the chain from the
// records on the backup servers: the newest version of a part held on two,
// the base full verified by its manifest, each log with its LSNs, finish
// at the source's offset, size, servers and proof, the gap and the break,
// texts escaped; an untrusted record is named, not shown; Temporal not
// answering is said, not fatal. --json is the same, complete.
func TestLogsShowsTheChainFromTheRecords(t *testing.T) {
	file, bak01, bak02 := logsSite(t)
	at := time.Date(2025, 3, 1, 11, 0, 0, 0, time.UTC)
	full := catalog.New("sql01", "Sales", 7, at)
	full.Header = &catalog.Header{BackupSetGUID: "6f9619ff-8b86-d011-b42d-00c04fc964ff", FirstLSN: "1000", LastLSN: "2000", BackupFinish: at}
	full.Header.SetUTCOffset(0)
	for _, s := range []catalog.State{catalog.StateCopied, catalog.StateRestored, catalog.StateChecked, catalog.StateVerified} {
		if err := full.Advance(s, at); err != nil {
			t.Fatal(err)
		}
	}
	cfg, _ := config.Load(file)
	keys, _ := cfg.ManifestKeyRing()
	st, _ := local.Open(context.Background(), bak02)
	if err := catalog.Save(context.Background(), catalog.StorageFS{Storage: st}, keys, full); err != nil {
		t.Fatal(err)
	}
	st.Close()
	// bak02 holds the newest version of the part, bak01 (read first) an
	// older one: only log 1. Merged, they are bak02's.
	newer := salesChain(t, at)
	newer.UpdatedAt = at.Add(time.Hour)
	saveChain(t, file, bak02, newer)
	old := salesChain(t, at)
	old.Logs, old.Break, old.UpdatedAt = old.Logs[:1], nil, at.Add(time.Minute)
	saveChain(t, file, bak01, old)
	// A record no key signed: chain 2 on bak02.
	forged := catalog.NewChainRecord("sql01", "Sales", 2, 1, at)
	forged.Fulls = old.Fulls
	raw, err := catalog.EncodeChain(forged, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bak02, forged.FileName()), raw, 0o600); err != nil {
		t.Fatal(err)
	}

	dead := deadAddress(t)
	code, out, errs := runStarter(t, "logs", "--config", file, "--database", "Sales", "--address", dead, "--timeout", "5s")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"Sales@sql01: 1 log chain(s) on the backup servers\n",
		"SERVER bak02: chain record " + forged.FileName() + " is not trusted and not shown",
		"chain 1: base full seq 7 finished 2025-03-01T11:00:00Z (verified)\n",
		"  log 1 copied  LSN 1900..2100  finished 2025-03-01T12:01:01+01:00  1.5 KiB  on bak01, bak02  proven standby 2025-03-01T11:05:00Z\n",
		"  log 2 copied  LSN 2100..2300  finished 2025-03-01T12:02:01+01:00  1.5 KiB  on bak01, bak02  not proven\n",
		"  log 3 written  LSN 2400..2600  finished 2025-03-01T12:03:01+01:00  1.5 KiB  on bak01  not proven\n",
		"  log 4 failed  LSN -..-  finished -  0 B  on -  not proven\n    failed: \"BACKUP LOG failed\\nOK   forged line\"\n",
		"  GAP gap after log 2: the chain stands at LSN 2300 but log 3 begins at LSN 2400\n",
		"  BROKEN (gap) at 2025-03-01T11:10:00Z: log 3 does not start where log 2 ended\n",
		"workflow logchain/sql01/Sales: cannot reach Temporal",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\nOK   forged line") {
		t.Errorf("a record's text forged a line:\n%s", out)
	}

	code, out, errs = runStarter(t, "logs", "--config", file, "--database", "Sales", "--json", "--address", dead, "--timeout", "5s")
	if code != exitOK {
		t.Fatalf("--json: exit %d\n%s%s", code, out, errs)
	}
	var v logsView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if len(v.Chains) != 1 || len(v.Chains[0].Logs) != 4 || v.Chains[0].Base == nil || !v.Chains[0].Base.Verified ||
		len(v.Chains[0].Gaps) != 1 || v.Chains[0].Break == nil || v.Workflow == nil || v.Workflow.Error == "" {
		t.Fatalf("--json: %s", out)
	}
	l1 := v.Chains[0].Logs[0]
	if l1.Finish != "2025-03-01T12:01:01+01:00" || l1.FinishUTC != "2025-03-01T11:01:01Z" || *l1.UTCOffsetMinutes != 60 ||
		l1.Bytes != 1536 || l1.Proven == nil || l1.Proven.Mode != "standby" {
		t.Fatalf("--json log 1: %+v", l1)
	}
}
