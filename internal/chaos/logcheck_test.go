package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestCheckerLogChainAcrossRestore: a full and a log taken on either side
// of a restore of the source over itself are of two recovery paths, which
// no restore joins, whatever their LSNs say: the logs of the walk from a
// full taken after the restore that were taken before it (the LSNs of the
// restored database start again from the restored set's), and a log taken
// after the restore in a chain whose full was taken before it.
func TestCheckerLogChainAcrossRestore(t *testing.T) {
	c := NewChecker(&Fleet{})
	at := time.Date(2026, 12, 2, 1, 41, 57, 0, time.UTC)
	lg := func(n int64, first, last string, finished time.Time) catalog.LogBackup {
		return catalog.LogBackup{Number: n, FirstLSN: first, LastLSN: last, Files: []catalog.Stripe{{Name: "l.trn"}},
			State: catalog.LogCopied, BackupFinishUTC: finished}
	}
	after := &catalog.ChainFull{Sequence: 7, LastLSN: "1114", FinishUTC: at.Add(20 * time.Second)}
	v := &chainView{full: after, fulls: []*catalog.ChainFull{after},
		logs: []catalog.LogBackup{lg(1, "1102", "1208", at.Add(-2*time.Minute)), lg(2, "1208", "1323", at.Add(-time.Minute))}}
	seq, gap, _ := v.walk()
	if len(seq) != 2 || gap != "" {
		t.Fatalf("by their LSNs the logs follow the full: %v %q", seq, gap)
	}
	if d := c.acrossRestore(v); len(d) != 0 {
		t.Fatalf("no restore of the source yet: %v", d)
	}
	c.rolledBack(LogTarget, at, at.Add(time.Second))
	d := c.acrossRestore(v)
	if len(d) != 1 || d[0].log != 1 || !strings.Contains(d[0].text, "full 7") || !strings.Contains(d[0].text, "restored over") {
		t.Fatalf("logs of the earlier life after a full of the later: %v", d)
	}

	before := &catalog.ChainFull{Sequence: 5, LastLSN: "1900", FinishUTC: at.Add(-3 * time.Minute)}
	v = &chainView{full: before, fulls: []*catalog.ChainFull{before}, logs: []catalog.LogBackup{lg(9, "1800", "2000", at.Add(-2*time.Minute)),
		lg(10, "2000", "2100", at.Add(-time.Minute)), lg(11, "1010", "1111", at.Add(10*time.Second))}}
	seq, gap, _ = v.walk()
	if len(seq) != 2 || gap != "" {
		t.Fatalf("by its LSNs log 11 lies before the full: %v %q", seq, gap)
	}
	if d := c.acrossRestore(v); len(d) != 1 || d[0].log != 11 {
		t.Fatalf("a log of the later life in a chain from a full of the earlier: %v", d)
	}
	// A log that finished while the RESTORE ran is of either life.
	v.logs[2].BackupFinishUTC = at.Add(500 * time.Millisecond)
	if d := c.acrossRestore(v); len(d) != 0 {
		t.Fatalf("a log that finished during the restore: %v", d)
	}
	v.logs = v.logs[:2]
	if d := c.acrossRestore(v); len(d) != 0 {
		t.Fatalf("a chain of the earlier life alone: %v", d)
	}

	// A chain of the later life that also lists a full of the earlier
	// (higher LSNs, taken before the restore): the newest full is fine,
	// the older one offers a restore that fails.
	later := &catalog.ChainFull{Sequence: 6, LastLSN: "1200", FinishUTC: at.Add(30 * time.Second)}
	v = &chainView{full: later, fulls: []*catalog.ChainFull{later, before},
		logs: []catalog.LogBackup{lg(1, "1150", "1250", at.Add(45*time.Second)), lg(2, "1250", "1350", at.Add(50*time.Second))}}
	if d := c.acrossRestore(v); len(d) != 1 || d[0].log != 1 || !strings.Contains(d[0].text, "full 5") {
		t.Fatalf("a full of the earlier life listed in a chain of the later: %v", d)
	}
}

// TestCheckerDeletedLogFileGrace: a log backup file the harness deleted is
// judged once the product has had as long as a proof to notice it (it
// looks at its next copy of the chain, which a worker restart delays); a
// file gone otherwise is judged at once.
func TestCheckerDeletedLogFileGrace(t *testing.T) {
	dir := t.TempDir()
	c := NewChecker(&Fleet{dirs: map[string]string{Bak01: dir}})
	seq := []catalog.LogBackup{{Number: 36, Servers: []string{Bak01}, Files: []catalog.Stripe{{Name: "l36.trn"}}},
		{Number: 37, Servers: []string{Bak01}, Files: []catalog.Stripe{{Name: "l37.trn"}}}}
	c.deletedLog(Bak01, "l36.trn")
	now := time.Now()
	d, notes := c.fileDefects(seq, now)
	if len(d) != 1 || d[0].log != 37 || len(notes) != 1 || !strings.Contains(notes[0], "l36.trn") {
		t.Fatalf("just deleted by the harness: defects %v, notes %v", d, notes)
	}
	d, _ = c.fileDefects(seq, now.Add(ProofLag+time.Second))
	if len(d) != 2 || d[0].log != 36 || !strings.Contains(d[0].text, "deleted by the harness") {
		t.Fatalf("deleted by the harness %s ago: %v", ProofLag+time.Second, d)
	}
}

// TestCheckerChainMergesCopies: the chain's server and the copy target
// each hold a copy of a chain record part, and neither alone is the whole
// story (the copy target gets the proof first, the chain's server the
// next log backup first): the checker reads a log as proven when either
// copy says so, as the product's status does (catalog.MergeChainPart),
// not from the copy written last.
func TestCheckerChainMergesCopies(t *testing.T) {
	f := testFleet(t)
	keys, err := catalog.NewKeys(catalog.Key{ID: manifestKeyID, Secret: []byte(strings.Repeat("k", 40))})
	if err != nil {
		t.Fatal(err)
	}
	f.keys = keys
	c := NewChecker(f)
	at := time.Date(2026, 12, 2, 1, 23, 0, 0, time.UTC)
	off := 0
	part := func(logs int64, updated time.Time, proven bool) *catalog.ChainRecord {
		r := catalog.NewChainRecord(LogTarget.Instance, LogTarget.Database, 1, 1, at)
		r.Fulls = []catalog.ChainFull{{Sequence: 1, BackupSetGUID: "A1", FirstLSN: "90", LastLSN: "100", CheckpointLSN: "95", FinishUTC: at}}
		for n := int64(1); n <= logs; n++ {
			l := catalog.LogBackup{Number: n, State: catalog.LogCopied, WorkflowID: "logchain/sql01/DBA", FirstLSN: fmt.Sprint(100 * n),
				LastLSN: fmt.Sprint(100 * (n + 1)), BackupStart: at.Add(time.Duration(n) * time.Second),
				BackupFinish: at.Add(time.Duration(n)*time.Second + time.Millisecond), Servers: []string{Bak01, Bak02}, UpdatedAt: updated}
			l.SetUTCOffset(off)
			l.Files = []catalog.Stripe{{Name: r.LogFileName(n, 1, 1), Size: 1, SHA256: strings.Repeat("a", 64)}}
			if proven {
				l.Proven = &catalog.LogProof{At: updated, Mode: "standby", Instance: Verify01, Database: "DBA_standby"}
			}
			r.Logs = append(r.Logs, l)
		}
		r.UpdatedAt = updated
		return r
	}
	save := func(server string, r *catalog.ChainRecord) {
		st, err := openShare(context.Background(), f.ShareDir(server))
		if err != nil {
			t.Fatal(err)
		}
		if err := catalog.SaveChain(context.Background(), catalog.StorageFS{Storage: st}, keys, r); err != nil {
			t.Fatal(err)
		}
	}
	// The copy target proved logs 1 and 2; the chain's server wrote log 3
	// since, on its copy, which has no proof.
	save(Bak02, part(2, at.Add(time.Minute), true))
	save(Bak01, part(3, at.Add(2*time.Minute), false))
	v, err := c.currentChain(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.logs) != 3 {
		t.Fatalf("logs %d, want the 3 of both copies", len(v.logs))
	}
	for _, l := range v.logs {
		if (l.Proven != nil) != (l.Number <= 2) {
			t.Errorf("log %d proven %v: the copy target proved logs 1 and 2", l.Number, l.Proven != nil)
		}
	}
}

// TestCheckerLogsToStopAt: a restore to T applies the logs up to and
// including the one that contains T, the first that started at or after
// T (a log backup holds what was logged before it started), whether T
// falls between two log backups, on a start, or while one ran; none after.
func TestCheckerLogsToStopAt(t *testing.T) {
	base := time.Date(2026, 12, 2, 4, 50, 0, 0, time.UTC)
	at := func(s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }
	var proven []catalog.LogBackup
	for i, s := range []float64{0, 5, 10, 15} {
		proven = append(proven, catalog.LogBackup{Number: int64(i + 3), BackupStart: at(s), BackupFinish: at(s + 0.5)})
	}
	for _, tc := range []struct {
		t    float64
		last int64
	}{{2, 4}, {5, 4}, {5.2, 5}, {7, 5}, {10.4, 6}, {14.9, 6}} {
		logs := logsToStopAt(proven, at(tc.t))
		if len(logs) == 0 || logs[0].Number != 3 || logs[len(logs)-1].Number != tc.last {
			t.Errorf("T %.1f s after log 3 started: logs %v, want 3..%d", tc.t, numbers(logs), tc.last)
		}
	}
}

func numbers(logs []catalog.LogBackup) []int64 {
	var out []int64
	for _, l := range logs {
		out = append(out, l.Number)
	}
	return out
}

// TestCheckerLogServer: a log is restored from the full's server when its
// file is intact there, else from the other server that holds it intact.
func TestCheckerLogServer(t *testing.T) {
	dirs := map[string]string{Bak01: t.TempDir(), Bak02: t.TempDir()}
	c := NewChecker(&Fleet{dirs: dirs})
	body := []byte("log backup")
	sum := sha256.Sum256(body)
	l := catalog.LogBackup{Number: 7, Servers: []string{Bak02, Bak01},
		Files: []catalog.Stripe{{Name: "l.trn", Size: int64(len(body)), SHA256: hex.EncodeToString(sum[:])}}}
	if got := c.logServer(l, Bak01); got != Bak01 {
		t.Fatalf("held nowhere: %s, want the full's %s", got, Bak01)
	}
	if err := os.WriteFile(filepath.Join(dirs[Bak02], "l.trn"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := c.logServer(l, Bak01); got != Bak02 {
		t.Fatalf("deleted on the full's server: %s, want %s", got, Bak02)
	}
	if err := os.WriteFile(filepath.Join(dirs[Bak01], "l.trn"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := c.logServer(l, Bak01); got != Bak01 {
		t.Fatalf("intact on both: %s, want the full's %s", got, Bak01)
	}
}

// TestCheckerStopAtRows: a restore to STOPAT holds the full's rows and
// those committed at or before it; when the source's wall clock ran back
// after the full (it went to a zone an hour ahead and came back before the
// first log, the full and the logs all taken on one offset), the commits
// after it are not in time order and STOPAT names no one point: the
// comparison is skipped.
func TestCheckerStopAtRows(t *testing.T) {
	base := time.Date(2026, 12, 2, 6, 28, 0, 0, time.UTC)
	at := func(s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }
	rows := []commitRow{{1, at(-2)}, {2, at(-1)}, {3, at(1)}, {4, at(2)}, {5, at(3)}, {6, at(4)}}
	want, why := stopAtRows(rows, 2, 6, at(2.5))
	if why != "" || len(want) != 4 || !want[rows[3].key()] || want[rows[4].key()] {
		t.Fatalf("STOPAT in time order: %v %q, want rows 1..4", want, why)
	}
	// Rows 3 and 4 committed an hour ahead (Europe/Berlin), 5 and 6 back on UTC.
	rows[2].at, rows[3].at = at(3601), at(3602)
	if _, why := stopAtRows(rows, 2, 6, at(3.5)); !strings.Contains(why, "ran back") {
		t.Fatalf("STOPAT after the source's wall clock ran back: %q, want the comparison skipped", why)
	}
	// A wall clock that ran back in the full (before fullMax) or after the
	// logs (beyond allMax) leaves the restored commits in time order.
	if _, why := stopAtRows(rows, 4, 6, at(3.5)); why != "" {
		t.Fatalf("the clock ran back within the full: %q, want it compared", why)
	}
}

// Status names the oldest log of a chain that is not proven; the checker
// reads its number and chain to count every later log as named (I10).
func TestUnprovenLogReason(t *testing.T) {
	m := unprovenLogRE.FindStringSubmatch("log 52 of chain 3 finished 2026-12-02T09:26:46Z, 1m41s ago, and is not proven yet: beyond the log_proof_lag of 1m30s (log_proof standby)")
	if m == nil || m[1] != "52" || m[2] != "3" {
		t.Fatalf("match %q", m)
	}
	if unprovenLogRE.MatchString("log 52 of chain 3 proven 2026-12-02T09:26:46Z") {
		t.Error("a proven log read as not proven")
	}
}
