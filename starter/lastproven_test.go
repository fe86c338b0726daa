package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// provenSet writes the manifest of a verified set of (sql01, db) taken
// `ago` before now, restored in 6 min and checked in 3, into each dir.
func provenSet(t *testing.T, db string, seq int64, ago time.Duration, dirs ...string) {
	t.Helper()
	timedSet(t, db, seq, ago, 0, map[catalog.Step]time.Duration{catalog.StepRestore: 6 * time.Minute, catalog.StepCheckDB: 3 * time.Minute}, dirs...)
}

// timedSet writes the manifest of a verified, uncompressed set of (sql01,
// db) of data bytes (0: none recorded) with the given step times into each
// dir.
func timedSet(t *testing.T, db string, seq int64, ago time.Duration, data int64, steps map[catalog.Step]time.Duration, dirs ...string) {
	t.Helper()
	taken := time.Now().Add(-ago).UTC()
	m := catalog.New("sql01", db, seq, taken)
	if data > 0 {
		m.Options = catalog.Options{Checksum: true, Stripes: 1}
		m.Stripes = []catalog.Stripe{{Name: m.StripeFileName(1, 1), Size: data}}
		m.Header = &catalog.Header{FirstLSN: "1", LastLSN: "2", BackupFinish: taken, BackupSize: data, CompressedBackupSize: data}
		m.Header.SetUTCOffset(0)
	}
	at := taken
	for _, st := range []catalog.Step{catalog.StepBackup, catalog.StepCopy, catalog.StepRestore, catalog.StepCheckDB} {
		if d, ok := steps[st]; ok {
			_ = m.SetTiming(st, at, at.Add(d))
			at = at.Add(d)
		}
	}
	writeVerified(t, m, at, dirs...)
}

// writeVerified advances m to verified at at and writes it into the
// server directories.
func writeVerified(t *testing.T, m *catalog.Manifest, at time.Time, dirs ...string) {
	t.Helper()
	for _, s := range []catalog.State{catalog.StateCopied, catalog.StateRestored, catalog.StateChecked, catalog.StateVerified} {
		if err := m.Advance(s, at); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := catalog.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, m.FileName()), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// provenSite writes a config with two local-directory backup servers and
// the databases given (YAML list items), and returns its file and the two
// server directories.
func provenSite(t *testing.T, databases string) (string, string, string) {
	t.Helper()
	dir := t.TempDir()
	bak01, bak02 := filepath.Join(dir, "bak01"), filepath.Join(dir, "bak02")
	for _, d := range []string{bak01, bak02} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	server := func(name string) string {
		return `  - name: ` + name + `
    unc_paths: ['/var/opt/mssql/backup/` + name + `']
    location: ` + name + `
    verify_instance: verify
    restore_data_dir: /data
    restore_log_dir: /log
`
	}
	yaml := `sql_instances:
  - {name: sql01, address: 127.0.0.1:1433, user: backup, password_env: SQL01_PASSWORD}
  - {name: verify, address: 127.0.0.1:1434, user: backup, password_env: SQL01_PASSWORD}
backup_servers:
` + server("bak01") + server("bak02") + `databases:
` + databases
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, bak01, bak02
}

// Every character SQL Server allows in a name: quotes, brackets, @, unicode.
var oddNames = []string{`O'Brien's "Shop"`, `Data]base`, `a@b`, `Zürich_数据`}

func TestStatusFromManifestsOddNames(t *testing.T) {
	var dbs strings.Builder
	for _, n := range oddNames {
		// YAML single quotes: a quote is doubled, nothing else is special.
		dbs.WriteString("  - {name: '" + strings.ReplaceAll(n, "'", "''") + "', instance: sql01, backup_servers: [bak01, bak02]}\n")
	}
	file, bak01, bak02 := provenSite(t, dbs.String())
	for i, n := range oddNames {
		provenSet(t, n, int64(10+i), 2*time.Hour, bak01, bak02)
	}

	code, out, errs := runStarter(t, "status", "--config", file, "--from-manifests")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(oddNames) {
		t.Fatalf("want one line per database, got:\n%s", out)
	}
	for _, n := range oddNames {
		if !strings.Contains(out, "OK   sql01 / "+n+": verified seq ") {
			t.Errorf("no OK line for %q in:\n%s", n, out)
		}
	}
	if !strings.Contains(out, "on bak01, bak02; recover 9m (restore 6m + CHECKDB 3m)") {
		t.Errorf("copies / time to recover missing:\n%s", out)
	}

	// --database finds each odd name exactly, in JSON too.
	for i, n := range oddNames {
		code, out, errs := runStarter(t, "status", "--config", file, "--from-manifests", "--json", "--database", n)
		if code != exitOK {
			t.Fatalf("%q: exit %d\n%s%s", n, code, out, errs)
		}
		var r status.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%q: %v\n%s", n, err, out)
		}
		if len(r.Databases) != 1 || r.Databases[0].Database != n || r.Databases[0].LastVerified == nil || r.Databases[0].LastVerified.Sequence != int64(10+i) {
			t.Fatalf("%q: %+v", n, r.Databases)
		}
	}
	if code, _, errs := runStarter(t, "status", "--config", file, "--from-manifests", "--database", `O'Brien`); code != exitFail || !strings.Contains(errs, `database "O'Brien" is neither configured`) {
		t.Fatalf("unknown database: exit %d %s", code, errs)
	}
}

func TestStatusFromManifestsExitsOneWhenOutOfObjectives(t *testing.T) {
	file, bak01, _ := provenSite(t, `  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02]}
  - {name: Fast, instance: sql01, backup_servers: [bak01, bak02], rto: 5m}
  - {name: Fresh, instance: sql01, backup_servers: [bak01, bak02]}
`)
	provenSet(t, "Sales", 1, 27*time.Hour, bak01) // older than the default rpo 26h
	provenSet(t, "Fast", 1, time.Hour, bak01)     // 9 min to recover, rto 5m
	provenSet(t, "Fresh", 1, time.Hour, bak01)

	code, out, errs := runStarter(t, "status", "--config", file, "--from-manifests")
	if code != exitFail || !strings.Contains(errs, "2 of 3 databases are out of their objectives") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{
		"RED  sql01 / Sales: verified seq 1",
		"27h old, above the RPO of 26h",
		"RED  sql01 / Fast: verified seq 1",
		"measured time to recover 9m is above the RTO of 5m",
		"OK   sql01 / Fresh: verified seq 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	// JSON: same verdict, same exit code.
	code, out, _ = runStarter(t, "status", "--config", file, "--from-manifests", "--json")
	var r status.Report
	checkJSONStyle(t, "status --from-manifests --json", out)
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != exitFail || len(r.OutOfObjectives()) != 2 {
		t.Fatalf("json: exit %d err %v\n%s", code, err, out)
	}
	if code, _, errs := runStarter(t, "status", "--from-manifests"); code != exitUsage || !strings.Contains(errs, "--config FILE is required") {
		t.Fatalf("no config: exit %d %s", code, errs)
	}
}

// A set whose manifest predates the source's offset from UTC says its age
// may be off.
func TestProvenLineSaysOffsetUnknown(t *testing.T) {
	d := status.Database{Instance: "sql01", Database: "Sales", Configured: true,
		LastVerified: &status.Verified{Sequence: 3, TakenAt: time.Now(), Servers: []string{"bak01"}, OffsetUnknown: true}}
	if got := provenLine(d); !strings.Contains(got, "offset from UTC unknown") {
		t.Errorf("line %q does not say the offset is unknown", got)
	}
	d.LastVerified.OffsetUnknown = false
	if got := provenLine(d); strings.Contains(got, "unknown") {
		t.Errorf("line %q says unknown for a set with its offset", got)
	}
}

// The line names the sets whose manifests are not authenticated, which
// count for nothing, and JSON lists them.
func TestProvenLineNamesUnauthenticatedSets(t *testing.T) {
	d := status.Database{Instance: "sql01", Database: "Sales", Configured: true, OutOfObjectives: true,
		LastVerified: &status.Verified{Sequence: 10, TakenAt: time.Now().Add(-30 * time.Hour), Servers: []string{"bak01"}},
		Unauthenticated: []status.Unauthenticated{{Sequence: 12, State: catalog.StateVerified, Auth: catalog.AuthUnsigned, Servers: []string{"bak02"}},
			{Sequence: 11, State: catalog.StateFailed, Auth: catalog.AuthInvalid, Servers: []string{"bak01"}}},
		Reasons: []string{"last verified set is 30h old, above the RPO of 26h"}}
	got := provenLine(d)
	for _, want := range []string{"RED  sql01 / Sales: verified seq 10", "; 2 set(s) with unauthenticated manifests, not counted (newest seq 12 claims verified on bak02, unsigned)"} {
		if !strings.Contains(got, want) {
			t.Errorf("line %q lacks %q", got, want)
		}
	}
}

// Without manifest_keys, status says on stderr that the manifests are
// taken at their word; the answer itself is unchanged.
func TestStatusWarnsWithoutManifestKeys(t *testing.T) {
	file, bak01, _ := provenSite(t, "  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02]}\n")
	provenSet(t, "Sales", 1, time.Hour, bak01)
	code, out, errs := runStarter(t, "status", "--config", file, "--from-manifests")
	if code != exitOK || !strings.Contains(out, "OK   sql01 / Sales: verified seq 1") || !strings.Contains(errs, "manifests are not authenticated (no manifest_keys") {
		t.Errorf("exit %d\n%s\nstderr: %s", code, out, errs)
	}
}

// A database with log backups: status --from-manifests shows the point its
// chain is proven to, and a broken chain makes it RED with the break named.
func TestStatusFromManifestsShowsProvenTo(t *testing.T) {
	file, bak01, _ := provenSite(t, `  - {name: Ledger, instance: sql01, backup_servers: [bak01, bak02], rpo: 10m, owns_backup_chain: true, log_backup: {every: 1m}, log_proof: standby}
`)
	fullAt := time.Now().UTC().Add(-30 * time.Minute).Truncate(time.Second)
	m := catalog.New("sql01", "Ledger", 1, fullAt)
	m.Header = &catalog.Header{BackupSetGUID: "GUID-1", FirstLSN: "1000", LastLSN: "1005", BackupFinish: fullAt}
	m.Header.SetUTCOffset(0)
	for _, s := range []catalog.State{catalog.StateCopied, catalog.StateRestored, catalog.StateChecked, catalog.StateVerified} {
		if err := m.Advance(s, fullAt); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := catalog.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bak01, m.FileName()), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	r := catalog.NewChainRecord("sql01", "Ledger", 1, 1, fullAt)
	r.Fulls = []catalog.ChainFull{{Sequence: 1, BackupSetGUID: "GUID-1", FirstLSN: "1000", LastLSN: "1005", CheckpointLSN: "1001", FinishUTC: fullAt}}
	start := fullAt.Add(28 * time.Minute)
	l := catalog.LogBackup{Number: 1, State: catalog.LogCopied, WorkflowID: "w", RunID: "r", FirstLSN: "1000", LastLSN: "1010",
		BackupStart: start, BackupFinish: start.Add(time.Second), UpdatedAt: start,
		Files:  []catalog.Stripe{{Name: r.LogFileName(1, 1, 1), Size: 1, SHA256: strings.Repeat("b", 64)}},
		Proven: &catalog.LogProof{At: start.Add(time.Second), Mode: "standby", Instance: "verify", Database: "Ledger_standby"}}
	l.SetUTCOffset(0)
	r.Logs = []catalog.LogBackup{l}
	r.Break = &catalog.ChainBreak{Reason: "foreign_log", Detail: "a log backup by another tool", At: start.Add(time.Minute)}
	data, err := catalog.EncodeChain(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bak01, r.FileName()), data, 0o600); err != nil {
		t.Fatal(err)
	}

	code, out, errs := runStarter(t, "status", "--config", file, "--from-manifests")
	if code != exitFail || !strings.Contains(errs, "1 of 1 databases are out of their objectives") {
		t.Fatalf("exit %d, stderr %q\n%s", code, errs, out)
	}
	for _, want := range []string{"RED  sql01 / Ledger: verified seq 1", "proven to " + stamp(start), "by log chain 1, log_proof standby",
		"log chain 1 broke (foreign_log: a log backup by another tool)"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "above the RPO") {
		t.Errorf("the full's age is judged against the rpo of a database with log backups:\n%s", out)
	}
	_, out, _ = runStarter(t, "status", "--config", file, "--from-manifests", "--json")
	var rep status.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Databases) != 1 || rep.Databases[0].LogChain == nil ||
		!rep.Databases[0].LogChain.ProvenTo.Equal(start) || rep.Databases[0].LogChain.Broken == nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
}

// An object store's line leads with its verdict, RED when its probe found
// it not immutable; a verified set's line names its immutable copy.
func TestObjectStoreAndImmutableCopyLines(t *testing.T) {
	at := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	red := objectStoreLine(status.ObjectStore{Name: "vault01", Location: "s3://s3.example.net/worm/bc", Probed: true, ProbedAt: at,
		Verdict: "NOT immutable: delete the locked version bypassing governance: the server accepted it"})
	if !strings.HasPrefix(red, "RED  object store vault01 (s3://s3.example.net/worm/bc): probed ") || !strings.Contains(red, "bypassing governance") {
		t.Errorf("not immutable: %q", red)
	}
	ok := objectStoreLine(status.ObjectStore{Name: "vault01", Probed: true, Immutable: true, ProbedAt: at, Verdict: "immutable: ..."})
	if !strings.HasPrefix(ok, "OK   object store vault01: probed ") {
		t.Errorf("immutable: %q", ok)
	}
	if none := objectStoreLine(status.ObjectStore{Name: "vault01"}); !strings.Contains(none, "not probed yet") {
		t.Errorf("never probed: %q", none)
	}
	line := provenLine(status.Database{Instance: "sql01", Database: "Sales", Configured: true, LastVerified: &status.Verified{Sequence: 4,
		TakenAt: at, Servers: []string{"bak01"}, Immutable: &status.Immutable{Server: "vault01", State: "copied", Mode: "COMPLIANCE",
			RetainUntil: at.Add(72 * time.Hour), Objects: 5}}})
	if !strings.Contains(line, "; immutable copy on vault01, 5 objects locked COMPLIANCE until ") {
		t.Errorf("verified set with its immutable copy: %q", line)
	}
	line = provenLine(status.Database{Instance: "sql01", Database: "Sales", Configured: true, LastVerified: &status.Verified{Sequence: 4,
		TakenAt: at, Servers: []string{"bak01"}, Immutable: &status.Immutable{Server: "vault01", State: "failed", At: at, Error: "quota"}}})
	if !strings.Contains(line, "; immutable copy to vault01 failed at ") || !strings.Contains(line, "quota") {
		t.Errorf("failed immutable copy: %q", line)
	}
}

// The line tells a differential from a full: the newest verified full,
// then the newest verified differential on it with its own age and time
// to recover; a failed differential is named as one, on its base.
func TestProvenLineNamesTheDifferential(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	d := status.Database{Instance: "sql01", Database: "Sales", Configured: true, Objectives: status.Objectives{RPO: status.Duration(26 * time.Hour)},
		LastVerified: &status.Verified{Sequence: 10, TakenAt: at, Age: status.Duration(30 * time.Hour), Servers: []string{"bak01", "bak02"}},
		LastDifferential: &status.Verified{Sequence: 12, Base: 10, TakenAt: at.Add(28 * time.Hour), Age: status.Duration(2 * time.Hour),
			Servers: []string{"bak01", "bak02"}, Restore: status.Duration(40 * time.Minute), CheckDB: status.Duration(20 * time.Minute),
			TimeToRecover: status.Duration(time.Hour)},
		LastFailure: &status.Failure{Sequence: 13, Base: 10, Type: "foreign_base", Step: "catalog", Reason: "differentials wait for the next verified full", At: at}}
	got := provenLine(d)
	for _, want := range []string{"verified seq 10 taken 2026-11-30 10:00:00Z (30h ago, rpo 26h)",
		"; differential seq 12 on it taken 2026-12-01 14:00:00Z (2h ago) on bak01, bak02; recover 1h (restore of both 40m + CHECKDB 20m)",
		"; since then differential seq 13 (on seq 10) foreign_base at catalog (differentials wait for the next verified full)"} {
		if !strings.Contains(got, want) {
			t.Errorf("line %q lacks %q", got, want)
		}
	}
}

// A running differential says so, with its base, in `status`.
func TestCycleStatusNamesADifferential(t *testing.T) {
	var b strings.Builder
	writeCycleStatus(&b, client.CycleSummary{WorkflowID: "backup-sql01-Sales", Status: "Running", Database: "Sales", Instance: "sql01",
		Step: "restore", Sequence: 12, Progress: &workflows.Progress{Database: "Sales", Step: "restore", Sequence: 12, Base: 10, Percent: 40}})
	if !strings.Contains(b.String(), "progress: step restore 40% (a differential on seq 10)") {
		t.Errorf("status %q does not name the differential's base", b.String())
	}
}
