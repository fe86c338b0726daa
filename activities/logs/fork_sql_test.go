package logs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/logchain"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Recovery forks: every RESTORE ... WITH RECOVERY starts a new recovery
// path, and backups of an earlier one take no part in a chain of the new
// one ("Recovery Paths"; backupset (Transact-SQL),
// first_recovery_fork_guid / last_recovery_fork_guid).

// restoreSource is a DBA's RESTORE DATABASE [Sales] ... WITH REPLACE of
// the source from set m (recovered: a new recovery fork).
func (f *logFixture) restoreSource(m *catalog.Manifest) {
	f.t.Helper()
	var disks []string
	for _, s := range m.Stripes {
		for _, srv := range sitetest.Servers {
			if _, err := os.Stat(filepath.Join(f.site.Dirs[srv], s.Name)); err == nil {
				b, _ := f.site.Config.BackupServer(srv)
				disks = append(disks, tsql.JoinPath(b.UNCPaths[0], s.Name))
				break
			}
		}
	}
	stmt, err := tsql.RestoreDatabase(tsql.RestoreOptions{Database: "Sales", Disks: disks, Replace: true})
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.sa("sa").ExecContext(context.Background(), stmt); err != nil {
		f.t.Fatalf("%s: %v", stmt, err)
	}
}

// A foreign log backup taken before the source was restored from an
// older set lies on the recovery path the restore left: the chain that
// starts on a full of the new path goes on, whatever LSNs the old log
// holds, while the chain it did split stays broken.
func TestSQLBackupLogForeignLogOfAnEarlierForkLeavesTheNextChainAlone(t *testing.T) {
	f := newLogFixture(t, "")
	old := f.full(true)
	f.commit(2)
	f.mustBackupLog()
	f.commit(6)
	tool := f.foreignTool()
	path := filepath.Join(t.TempDir(), "elsewhere.trn")
	if _, err := tool.Exec(`BACKUP LOG [Sales] TO DISK = N'` + path + `' WITH INIT, NAME = N'NightlyTool'`); err != nil {
		t.Fatal(err)
	}
	if out := f.mustBackupLog(); out.Break == nil || out.Break.Reason != string(logchain.BreakForeign) {
		t.Fatalf("the foreign log on the chain's own path: %+v, want a foreign_log break", out)
	}
	foreign := f.msdbLogs()[1]

	f.restoreSource(old)
	f.commit(1)
	next := f.full(true)
	if !logchainLess(next.Header.LastLSN, foreign.last) {
		t.Fatalf("the new full ends at LSN %s, past the old foreign log's end %s: the test needs them to overlap", next.Header.LastLSN, foreign.last)
	}
	f.commit(1)
	out := f.mustBackupLog()
	if out.Chain != 2 || out.Number != 1 || out.NeedFull || out.Break != nil || len(out.Foreign) != 0 {
		t.Fatalf("the chain on full %d after the restore: %+v, want chain 2 log 1 and no foreign log", next.Sequence, out)
	}
	r := f.newest()
	if r.Chain != 2 || r.Break != nil || r.Fulls[0].Sequence != next.Sequence || r.Log(1) == nil || r.Log(1).Foreign != nil {
		t.Fatalf("chain 2 record %+v", r)
	}
	c, err := catalog.AssembleChain(chainParts(f.records("bak01"), 2), map[string]bool{next.Header.BackupSetGUID: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, gap := c.FirstAfter(c.Base()); !ok || gap != nil || len(c.Gaps()) != 0 {
		t.Fatalf("chain 2 does not restore from full %d: ok %v gap %v gaps %v", next.Sequence, ok, gap, c.Gaps())
	}
	// Chain 1 keeps its break, naming the foreign log.
	for _, p := range f.records("bak01") {
		if p.Chain == 1 && (p.Break == nil || !strings.Contains(p.Break.Detail, "NightlyTool")) {
			t.Fatalf("chain 1 part %d break %+v", p.Part, p.Break)
		}
	}
}

// The source restored from an older set while a chain runs: the next log
// backup begins at the restored full's end, on the new recovery path, and
// the chain's logs past that point are on the abandoned one (a restore of
// the chain would fail at it with 4330). The chain breaks there, that log
// is not counted in it, and the next full starts the next chain.
func TestSQLBackupLogRestoreOfTheSourceEndsTheChain(t *testing.T) {
	f := newLogFixture(t, "")
	old := f.full(true)
	f.commit(2)
	f.mustBackupLog()
	f.commit(4)
	f.mustBackupLog()
	f.restoreSource(old)
	f.commit(2)
	out := f.mustBackupLog()
	if !out.NeedFull || out.Break == nil || out.Break.Reason != string(logchain.BreakGap) || !strings.Contains(out.Break.Detail, "restored") {
		t.Fatalf("the first log after the restore: %+v, want a gap break saying the database was restored", out)
	}
	r := f.newest()
	if r.Chain != 1 || r.Break == nil || r.Log(3) == nil || r.Log(3).State != catalog.LogFailed {
		t.Fatalf("chain 1 after the restore: break %+v, log 3 %+v, want log 3 left out (failed)", r.Break, r.Log(3))
	}
	c, err := catalog.AssembleChain(chainParts(f.records("bak01"), 1), map[string]bool{old.Header.BackupSetGUID: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Logs); n != 2 {
		t.Fatalf("chain 1 holds %d logs, want logs 1 and 2 only", n)
	}
	// Broken: no BACKUP LOG until the next verified full, which starts
	// chain 2 on the new path.
	sent := len(backupLogs(f.site.Source))
	if again := f.mustBackupLog(); !again.NeedFull || len(backupLogs(f.site.Source)) != sent {
		t.Fatalf("the broken chain took a log backup: %+v", again)
	}
	next := f.full(true)
	f.commit(2)
	out = f.mustBackupLog()
	if out.Chain != 2 || out.Number != 1 || out.NeedFull || out.Break != nil {
		t.Fatalf("after the next full: %+v, want chain 2 log 1", out)
	}
	if r := f.newest(); r.Fulls[0].Sequence != next.Sequence {
		t.Fatalf("chain 2 starts on %+v, want full %d", r.Fulls, next.Sequence)
	}
}

// A foreign log backup of the chain's own recovery path still splits it
// after a restore: the chain started on a full of the new path breaks on a
// DBA's log backup taken on that path.
func TestSQLBackupLogForeignLogOfTheCurrentForkStillSplitsTheChain(t *testing.T) {
	f := newLogFixture(t, "")
	old := f.full(true)
	f.commit(2)
	f.restoreSource(old)
	f.commit(1)
	next := f.full(true)
	f.commit(2)
	out := f.mustBackupLog()
	if out.NeedFull || out.Break != nil || f.newest().Fulls[0].Sequence != next.Sequence {
		t.Fatalf("the chain on full %d: %+v", next.Sequence, out)
	}
	f.commit(3)
	tool := f.foreignTool()
	path := filepath.Join(t.TempDir(), "elsewhere.trn")
	if _, err := tool.Exec(`BACKUP LOG [Sales] TO DISK = N'` + path + `' WITH INIT, NAME = N'NightlyTool'`); err != nil {
		t.Fatal(err)
	}
	f.commit(2)
	out = f.mustBackupLog()
	if !out.NeedFull || out.Break == nil || out.Break.Reason != string(logchain.BreakForeign) || len(out.Foreign) != 1 || out.Foreign[0].Path != path {
		t.Fatalf("a foreign log on the chain's own path: %+v, want a foreign_log break naming %s", out, path)
	}
}

// chainParts are the parts of chain id among rs.
func chainParts(rs []*catalog.ChainRecord, id int64) []*catalog.ChainRecord {
	var out []*catalog.ChainRecord
	for _, r := range rs {
		if r.Chain == id {
			out = append(out, r)
		}
	}
	return out
}

func logchainLess(a, b string) bool { return logchain.LSN(a).Less(logchain.LSN(b)) }
