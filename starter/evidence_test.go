package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/evidence"
	"github.com/backupcycle/backupcycle/internal/storage/local"
)

// evidenceSite is provenSite with an evidence ledger: a signing key made
// by `starter evidence keygen`, and its public key in the configuration.
func evidenceSite(t *testing.T) (file, bak01, bak02 string) {
	t.Helper()
	file, bak01, bak02 = provenSite(t, "  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02]}\n")
	keyFile := filepath.Join(filepath.Dir(file), "evidence.key")
	code, out, errs := runStarter(t, "evidence", "keygen", "--out", keyFile)
	if code != exitOK || !strings.Contains(errs, "written to "+keyFile) {
		t.Fatalf("keygen: exit %d\n%s%s", code, out, errs)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want owner-only", fi.Mode(), err)
	}
	if code, _, errs := runStarter(t, "evidence", "keygen", "--out", keyFile); code != exitFail || !strings.Contains(errs, "must not exist yet") {
		t.Errorf("keygen over an existing file: exit %d %s", code, errs)
	}
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("evidence:\n  signing_key_file: evidence.key\n  public_keys: ['" + strings.TrimSpace(out) + "']\n"); err != nil {
		t.Fatal(err)
	}
	return file, bak01, bak02
}

// ledgerSet writes verified set seq of sql01/Sales (one stripe) into each
// dir, as a cycle leaves it, and appends its record there with the
// configuration's signing key.
func ledgerSet(t *testing.T, c *config.Config, seq int64, taken time.Time, dirs map[string]string) *catalog.Manifest {
	t.Helper()
	m := catalog.New("sql01", "Sales", seq, taken)
	data := make([]byte, 2048)
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)
	m.Options.Stripes = 1
	m.Stripes = []catalog.Stripe{{Name: m.StripeFileName(1, 1), Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}}
	m.Header = &catalog.Header{BackupSetGUID: "0b6c2d7e-1111-2222-3333-44445555666" + string(rune('0'+seq)), FirstLSN: "1", LastLSN: "2",
		BackupStart: taken.Add(-time.Minute), BackupFinish: taken}
	m.Header.SetUTCOffset(0)
	m.Proof = &catalog.Proof{VerifyInstance: "verify", VerifyDatabase: "Sales_verify", RestoreHistoryID: seq, BackupSetGUID: m.Header.BackupSetGUID,
		RestoredAt: taken.Add(5 * time.Minute), CheckedAt: taken.Add(9 * time.Minute)}
	key, err := c.Evidence.SigningKey()
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, d := range dirs {
		paths = append(paths, d)
		if err := os.WriteFile(filepath.Join(d, m.Stripes[0].Name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeVerified(t, m, taken.Add(10*time.Minute), paths...)
	for server, d := range dirs {
		st, err := local.Open(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(d, m.FileName()))
		if err != nil {
			t.Fatal(err)
		}
		ms := sha256.Sum256(raw)
		r, err := evidence.SetRecord(server, m, evidence.File{Name: m.FileName(), Size: int64(len(raw)), SHA256: hex.EncodeToString(ms[:])}, "test")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (evidence.Appender{Key: key, Now: func() time.Time { return taken.Add(10 * time.Minute) }}).Append(context.Background(), st, r); err != nil {
			t.Fatal(err)
		}
		st.Close()
	}
	return m
}

// `starter evidence verify` passes on untouched ledgers and fails, naming
// the record, once a manifest or a ledger record is changed by hand;
// `evidence report` answers per database, with its chart in --html.
func TestEvidenceVerifyAndReport(t *testing.T) {
	file, bak01, bak02 := evidenceSite(t)
	c, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{"bak01": bak01, "bak02": bak02}
	t0 := time.Date(2026, 11, 2, 1, 0, 0, 0, time.UTC)
	var sets []*catalog.Manifest
	for seq := int64(1); seq <= 3; seq++ {
		sets = append(sets, ledgerSet(t, c, seq, t0.Add(time.Duration(seq-1)*24*time.Hour), dirs))
	}

	code, out, errs := runStarter(t, "evidence", "verify", "--config", file)
	if code != exitOK || !strings.Contains(out, "OK    bak01 sql01/Sales: 3 record(s), head 3 (sha256 ") || !strings.Contains(out, "OK    bak02 sql01/Sales: 3 record(s)") {
		t.Fatalf("verify of untouched ledgers: exit %d\n%s%s", code, out, errs)
	}

	html := filepath.Join(t.TempDir(), "report.html")
	code, out, errs = runStarter(t, "evidence", "report", "--config", file, "--from", "2026-11-01", "--to", "2026-11-03", "--html", html)
	if code != exitOK || !strings.Contains(out, "sql01/Sales: last proven restorable 2026-11-03 01:10 UTC (set, recovery point 2026-11-03 01:00 UTC); in the period 2 verified set(s)") {
		t.Fatalf("report: exit %d\n%s%s", code, out, errs)
	}
	page, err := os.ReadFile(html)
	if err != nil || !strings.Contains(string(page), "<svg") || !strings.Contains(string(page), "sql01/Sales") {
		t.Errorf("--html page: %v\n%.400s", err, page)
	}

	for _, args := range [][]string{{"verify"}, {"report", "--from", "2026-11-01", "--to", "2026-11-03"}} {
		code, out, errs := runStarter(t, append(append([]string{"evidence"}, args...), "--config", file, "--json")...)
		if code != exitOK {
			t.Fatalf("evidence %s --json: exit %d\n%s%s", args[0], code, out, errs)
		}
		checkJSONStyle(t, "evidence "+args[0]+" --json", out)
	}

	// A manifest changed by hand on bak01: its set's record is named.
	p := filepath.Join(bak01, sets[1].FileName())
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), `"restore_history_id": 2`, `"restore_history_id": 9`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runStarter(t, "evidence", "verify", "--config", file, "--quick")
	if code != exitFail || !strings.Contains(out, "FAIL  bak01 sql01/Sales: 3 record(s), 1 do not match") ||
		!strings.Contains(out, "record 2 (evidence/sql01@Sales~") || !strings.Contains(errs, "the first: sql01/Sales on bak01, record 2") ||
		!strings.Contains(out, "OK    bak02 sql01/Sales") {
		t.Fatalf("verify after a manifest changed: exit %d\n%s%s", code, out, errs)
	}
	// The report counts only what verifies, and says what it left out.
	code, out, _ = runStarter(t, "evidence", "report", "--config", file, "--from", "2026-11-01", "--to", "2026-11-03")
	if code != exitFail || !strings.Contains(out, "NOT COUNTED bak01 sql01/Sales: record 2") || !strings.Contains(out, "2 verified set(s)") {
		t.Errorf("report with a changed manifest: exit %d\n%s", code, out)
	}

	// A ledger record changed by hand on bak02.
	rec := filepath.Join(bak02, filepath.FromSlash(evidence.FileName("sql01", "Sales", 1)))
	b, err = os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rec, []byte(strings.Replace(string(b), `"worker":"test"`, `"worker":"tesT"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runStarter(t, "evidence", "verify", "--config", file, "--database", "Sales", "--quick")
	if code != exitFail || !strings.Contains(out, "FAIL  bak02 sql01/Sales") || !strings.Contains(out, "record 1 (") ||
		!strings.Contains(out, "signature does not verify") {
		t.Fatalf("verify after a record changed: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := runStarter(t, "evidence", "verify", "--config", file, "--database", "Nope"); code != exitFail || !strings.Contains(errs, `no backup server holds a ledger of database "Nope"`) {
		t.Errorf("unknown database: exit %d %s", code, errs)
	}
	if code, _, errs := runStarter(t, "evidence", "report", "--config", file, "--from", "yesterday", "--to", "2026-11-03"); code != exitUsage || !strings.Contains(errs, "--from \"yesterday\"") {
		t.Errorf("bad --from: exit %d %s", code, errs)
	}
}

// The report's line of a drill from the immutable copy says so, naming the
// set, the store and its location; another drill's line does not.
func TestEvidenceReportNamesDrillFromTheImmutableCopy(t *testing.T) {
	at := time.Date(2026, 11, 2, 3, 0, 0, 0, time.UTC)
	rep := evidence.Report{From: at.Add(-time.Hour), To: at.Add(time.Hour), Databases: []evidence.DatabaseReport{{Instance: "sql01", Database: "Sales",
		DrillResults: []evidence.DrillLine{{At: at, RTOSeconds: 90, MetRTO: true, Passed: true},
			{At: at.Add(time.Minute), RTOSeconds: 95, MetRTO: true, Passed: true,
				Immutable: &evidence.ImmutableSource{Store: "vault01", Location: "s3://backups/site", Sequence: 4}}}}}}
	var b strings.Builder
	writeReport(&b, rep)
	for _, want := range []string{"\n  drill 2026-11-02 03:00 UTC: recovered in 1m30s, no rto set: met\n",
		"\n  drill 2026-11-02 03:01 UTC from the immutable copy (set 4 on vault01, s3://backups/site): recovered in 1m35s, no rto set: met\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}
