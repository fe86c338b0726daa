package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// verifiedRE matches the demo's line for a verified cycle.
var verifiedRE = regexp.MustCompile(`(?m)^cycle (\d) of 2: VERIFIED Sales sequence (\d+): backed up to (\S+), copied to (\S+),`)

// chainRE is the demo's log chain line, with at least 3 log backups copied.
var chainRE = regexp.MustCompile(`(?m)^  chain \d+: \d+ log backups taken \(newest started .* ago\), copied through ([3-9]|\d\d+) from bak01 to bak02; state ok$`)

// The demo's point-in-time proof: the proven-to time, what was restored
// to T, and the copy's rows compared with the source's.
var (
	pitProvenRE  = regexp.MustCompile(`(?m)^  proven to \d{4}-\d\d-\d\dT\S+Z by the standby copy \(log \d+ of chain \d+\)$`)
	pitRestoreRE = regexp.MustCompile(`(?m)^  restored set \d+ and logs \d+-\d+ into Sales_standby_proof on sqlverify WITH STOPAT T = \S+ \(\S+Z\), a random instant of the proven window: recovered; \d+ sanity checks passed \(took \S+\)$`)
	pitRowsRE    = regexp.MustCompile(`(?m)^  rows:    the copy held exactly the (\d+) rows of dbo\.CommitLog committed at or before T, compared row by row with sql01's Sales \((\d+) committed after T are not in it\)$`)
)

// checkPITLines checks the demo's point-in-time proof lines in out.
func checkPITLines(t *testing.T, out string) {
	t.Helper()
	for _, re := range []*regexp.Regexp{pitProvenRE, pitRestoreRE} {
		if !re.MatchString(out) {
			t.Errorf("demo output lacks the point-in-time proof line %s:\n%s", re, out)
		}
	}
	m := pitRowsRE.FindStringSubmatch(out)
	if m == nil {
		t.Errorf("demo output lacks the point-in-time proof's row-by-row comparison:\n%s", out)
		return
	}
	if n, _ := strconv.Atoi(m[1]); n == 0 {
		t.Errorf("the point-in-time copy was compared on no rows: %s", m[0])
	}
}

// The demo's recovery drill of Sales: passed, its time to recover within
// Sales's rto, what was restored, the copy's rows compared with the
// source's, the Drill run in the Web UI.
var (
	drillPassedRE   = regexp.MustCompile(`(?m)^  DRILL PASSED: recovered as Sales_drill on sqlverify to (\S+Z) \(stopat\), checked, dropped, recorded on bak0[12](, bak0[12])?$`)
	drillRTORE      = regexp.MustCompile(`(?m)^  rto:      time to recover \S+, within Sales's rto of 1h$`)
	drillRestoredRE = regexp.MustCompile(`(?m)^  restored: set \d+ and logs \d+-\d+ of chain \d+, read from bak0[12](, bak0[12])?; sanity checks \S+(, \S+)* hold$`)
	drillWebUIRE    = regexp.MustCompile(`(?m)^  Web UI:   http://\S+/workflows/drill%2Fsql01%2FSales/\S+/history \(its Recover child recover/sqlverify/Sales_drill shows from there\)$`)
)

// checkDrillLines checks the demo's drill lines in out: passed, and the
// copy held the rows committed at or before the recovery point, at least
// one.
func checkDrillLines(t *testing.T, out string) {
	t.Helper()
	m := drillPassedRE.FindStringSubmatch(out)
	if m == nil {
		t.Errorf("demo output lacks the passed drill of Sales:\n%s", out)
		return
	}
	for _, re := range []*regexp.Regexp{drillRTORE, drillRestoredRE, drillWebUIRE} {
		if !re.MatchString(out) {
			t.Errorf("demo output lacks the drill line %s:\n%s", re, out)
		}
	}
	rows := regexp.MustCompile(`(?m)^  rows:    the copy held exactly the (\d+) rows of dbo\.CommitLog committed at or before ` + regexp.QuoteMeta(m[1]) +
		`, compared row by row with sql01's Sales \((\d+) committed after it are not in it\)$`).FindStringSubmatch(out)
	if rows == nil {
		t.Errorf("demo output lacks the drill copy's row-by-row comparison to %s:\n%s", m[1], out)
		return
	}
	if n, _ := strconv.Atoi(rows[1]); n == 0 {
		t.Errorf("the drill copy was compared on no rows: %s", rows[0])
	}
}

type demoCycle struct {
	seq            int64
	server, remote string
}

// runDemo runs `devworker --demo` to its end on state and returns the
// verified cycles it printed.
func runDemo(t *testing.T, state string) ([]demoCycle, *proc) {
	t.Helper()
	w := startWorker(t, "--demo", "--state-dir", state, "--port", "0", "--ui-port", "0", "--dev-db-size", "16MiB", "--log-every", "1s")
	if code := w.wait(t); code != 0 {
		t.Fatalf("make demo's worker exited %d, want 0\nstdout:\n%s\nstderr tail:\n%s", code, w.stdout, tail(w.stderr.String(), 3000))
	}
	var out []demoCycle
	for _, m := range verifiedRE.FindAllStringSubmatch(w.stdout.String(), -1) {
		seq, _ := strconv.ParseInt(m[2], 10, 64)
		out = append(out, demoCycle{seq: seq, server: m[3], remote: m[4]})
	}
	return out, w
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// manifestState reads a set's manifest on a backup server's directory.
func manifestState(t *testing.T, state, server string, seq int64) (string, []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(state, server, "backup", tsql.ManifestFileName(devenv.SourceInstance, devenv.Database, seq)))
	if err != nil {
		t.Fatalf("manifest of seq %d on %s: %v", seq, server, err)
	}
	var m struct {
		State   string `json:"state"`
		Stripes []struct {
			Name string `json:"name"`
		} `json:"stripes"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range m.Stripes {
		names = append(names, s.Name)
	}
	return m.State, names
}

// `make demo` end to end, twice on the same state: two verified sets on
// alternating servers each time, and the second run continues the first
// (sequence numbers go on, the round robin reads the last server from the
// manifests).
func TestDemoRunsTwoVerifiedCyclesAndContinues(t *testing.T) {
	state := t.TempDir()
	first, w := runDemo(t, state)
	if len(first) != 2 || first[0].server != "bak01" || first[0].remote != "bak02" ||
		first[1].server != "bak02" || first[1].remote != "bak01" || first[0].seq != 1 || first[1].seq != 2 {
		t.Fatalf("first demo: cycles %+v, want seq 1 bak01->bak02 then seq 2 bak02->bak01\n%s", first, w.stdout)
	}
	out := w.stdout.String()
	for _, want := range []string{
		"emulated site:     created in",
		"source SQL Server, database Sales",
		`\\bak01-nic1\backup and \\bak01-nic2\backup`,
		"times:    backup ",
		"demo: 2 of 2 cycles verified, round robin bak01 (seq 1) -> bak02 (seq 2)",
		"object store (S3, versitygw), bucket sales-worm with Object Lock",
		"  immutable: 5 objects (",
		"object store vault01: immutable: a COMPLIANCE-locked object could not be deleted",
		"all cycles of Sales in the Web UI: http://",
		"log chain of Sales: waiting for 3 log backups copied",
		"  proof:   ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if m := chainRE.FindStringSubmatch(out); m == nil {
		t.Errorf("demo output lacks the log chain with 3 log backups copied:\n%s", out)
	}
	checkPITLines(t, out)
	checkDrillLines(t, out)
	// The structured log went to the state directory, one JSON object per
	// line, and not to the terminal.
	logPath := filepath.Join(state, LogFile)
	data, err := os.ReadFile(logPath)
	if err != nil || !strings.Contains(out, "structured log: "+logPath) {
		t.Errorf("log file %s: %v; stdout names it: %v", logPath, err, strings.Contains(out, logPath))
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) < 10 || !json.Valid([]byte(lines[0])) || !strings.Contains(string(data), `"msg":"backup cycle verified"`) {
		t.Errorf("log file %s: %d lines, first %q; want JSON lines including the verified cycles", logPath, len(lines), lines[0])
	}
	if strings.Contains(w.stderr.String(), `"level"`) || strings.Contains(out, "INFO") {
		t.Errorf("structured log lines reached the terminal:\n%s%s", out, w.stderr.String())
	}
	// Each set is verified on both of its servers, its stripes beside it.
	for _, c := range first {
		for _, s := range []string{c.server, c.remote} {
			st, stripes := manifestState(t, state, s, c.seq)
			if st != "verified" || len(stripes) != 4 {
				t.Errorf("seq %d on %s: state %q, stripes %v; want verified with 4 stripes", c.seq, s, st, stripes)
			}
			for _, name := range stripes {
				if _, err := os.Stat(filepath.Join(state, s, "backup", name)); err != nil {
					t.Errorf("stripe of seq %d on %s: %v", c.seq, s, err)
				}
			}
		}
	}
	if _, err := os.Stat(filepath.Join(state, devenv.ConfigFile)); err != nil {
		t.Errorf("the site's configuration: %v", err)
	}

	second, w2 := runDemo(t, state)
	if len(second) != 2 || second[0].seq != 3 || second[1].seq != 4 || second[0].server != "bak01" || second[1].server != "bak02" {
		t.Fatalf("second demo: cycles %+v, want seq 3 on bak01 then seq 4 on bak02\n%s", second, w2.stdout)
	}
	// The object store kept its bucket and credentials: the second run
	// copied its sets there too.
	if !strings.Contains(w2.stdout.String(), "emulated site:     continued") || strings.Count(w2.stdout.String(), "  immutable: 5 objects (") != 2 {
		t.Errorf("second demo did not continue the site:\n%s", w2.stdout)
	}
	checkPITLines(t, w2.stdout.String())
	checkDrillLines(t, w2.stdout.String())
	// The first cycle of the second run found bak02 as the last server in
	// the manifests: the rotation continued rather than restarted.
	// (Only the second run plans bak01 after bak02 from the manifests.)
	data, err = os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(string(data), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil && e["msg"] == "cycle planned" && e["server"] == "bak01" &&
			e["last_server"] == "bak02" && e["last_server_source"] == "manifests" {
			found = true
		}
	}
	if !found {
		t.Errorf("second demo's first plan did not read the last server from the manifests:\n%s", tail(string(data), 4000))
	}

	// A damaged page in the source: the demo's cycle fails, the demo exits
	// 1 with the cycle's reason in one line, and the verified sets stay.
	files, err := filepath.Glob(filepath.Join(state, devenv.SourceInstance, "volume-d", "*.mdf"))
	if err != nil || len(files) != 1 {
		t.Fatalf("primary data file: %v %v", files, err)
	}
	if err := sqlsim.FlipByte(files[0], 20*sqlsim.PageSize+500); err != nil {
		t.Fatal(err)
	}
	w3 := startWorker(t, "--demo", "--state-dir", state, "--port", "0", "--ui-port", "0")
	if code := w3.wait(t); code != exitFail {
		t.Fatalf("demo on a damaged database exited %d, want %d\n%s", code, exitFail, w3.stdout)
	}
	last := lastLine(w3.stderr.String())
	if !regexp.MustCompile(`^devworker: demo cycle 1 of 2: workflow backup-sql01-Sales: backup cycle of Sales failed at step backup: .*page \(1:20\).* \[SourceDatabaseDamaged\]$`).MatchString(last) {
		t.Errorf("last stderr line: %q", last)
	}
	if !regexp.MustCompile(`(?m)^  Web UI:   http://\S+/workflows/backup-sql01-Sales/`).MatchString(w3.stdout.String()) || verifiedRE.MatchString(w3.stdout.String()) {
		t.Errorf("failed demo's stdout should link the failed cycle and verify nothing:\n%s", w3.stdout)
	}
	for _, c := range second {
		if st, _ := manifestState(t, state, c.server, c.seq); st != "verified" {
			t.Errorf("seq %d on %s after the failed cycle: %q, want verified", c.seq, c.server, st)
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// `make demo KEEP=1`: after the two cycles the Web UI stays up and lists
// them (the printed link's query, through the UI's API), /metrics shows
// when Sales was last verified, until SIGTERM.
func TestDemoKeepStaysUpForTheWebUI(t *testing.T) {
	began := time.Now()
	w := startWorker(t, "--demo", "--keep", "--state-dir", t.TempDir(), "--port", "0", "--ui-port", "0", "--dev-db-size", "16MiB",
		"--metrics-addr", "127.0.0.1:0")
	metricsURL := w.waitLine(t, `^  metrics: +(http://\S+)$`)[1]
	link := w.waitLine(t, `^  all cycles of Sales in the Web UI: (http://[^/]+)(/namespaces/default/workflows\?query=\S+)$`)
	w.waitLine(t, `^demo done: staying up \(--keep\)`)
	resp, err := http.Get(link[1] + "/api/v1" + link[2])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// One workflow id per database: the two cycles are two runs of it. Each
	// execution names itself and its root execution, hence the set.
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`"workflowId":\s*"backup-sql01-Sales",\s*"runId":\s*"([^"]+)"`).FindAllStringSubmatch(string(body), -1) {
		ids[m[1]] = true
	}
	if resp.StatusCode != http.StatusOK || len(ids) != 2 {
		t.Errorf("UI list %s: %d, %d cycles, want 2: %.500s", link[2], resp.StatusCode, len(ids), body)
	}
	// The gauge comes from the manifests: the time of the newest verified
	// set, taken during this demo.
	lastVerified := regexp.MustCompile(`(?m)^backupcycle_last_verified_timestamp_seconds\{database="Sales",instance="sql01"\} (\S+)$`)
	var metricsBody string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(metricsURL); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			metricsBody = string(b)
		}
		if m := lastVerified.FindStringSubmatch(metricsBody); m != nil {
			v, err := strconv.ParseFloat(m[1], 64)
			if at := time.Unix(0, int64(v*1e9)); err != nil || at.Before(began.Add(-time.Second)) || at.After(time.Now()) {
				t.Errorf("Sales last verified at %s (%s), want during this demo (since %s)", at, m[1], began)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no last verified time of Sales after the demo:\n%.2000s", metricsURL, metricsBody)
		}
	}
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := w.wait(t); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
}
