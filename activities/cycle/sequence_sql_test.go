package cycle

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// sourceSQL connects to the source instance as the activities do.
func (f *sqlFixture) sourceSQL() *mssql.DB {
	f.t.Helper()
	db, err := mssql.Open(context.Background(), mssql.Target{Instance: "sql01", Address: f.src.Addr(), User: "sa",
		Password: sqlPassword, Database: "master", Encrypt: "disable"})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { db.Close() })
	return db
}

// allocate runs AllocateSequence.
func (f *sqlFixture) allocate() int64 {
	f.t.Helper()
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: f.db}, &seq)
	return seq
}

// recorded is the number in a server's sequence file (0: none).
func (f *sqlFixture) recorded(server string) int64 {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(f.dirs[server], tsql.SequenceFileName("sql01", f.db)))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		f.t.Fatal(err)
	}
	var r activities.SequenceRecord
	if err := json.Unmarshal(data, &r); err != nil || r.Database != f.db || r.Instance != "sql01" {
		f.t.Fatalf("sequence file on %s: %s (%v)", server, data, err)
	}
	return r.Sequence
}

// claimAs writes the pending claim of another run on a server, as its
// Backup would before its BACKUP starts.
func (f *sqlFixture) claimAs(server string, seq int64, workflowID, runID string) {
	f.t.Helper()
	st, err := local.Open(context.Background(), f.dirs[server])
	if err != nil {
		f.t.Fatal(err)
	}
	defer st.Close()
	claim := catalog.NewPending("sql01", f.db, seq, time.Now(), workflowID, runID)
	claim.PrimaryServer = server
	if err := catalog.Save(context.Background(), catalog.StorageFS{Storage: st}, nil, claim); err != nil {
		f.t.Fatal(err)
	}
}

// writesTo lists the statements the source ran from the from-th on that
// write to a database: DML, DDL, or anything about the sequence table.
func writesTo(f *sqlFixture, from int) []string {
	var out []string
	for _, s := range f.src.Statements()[from:] {
		switch {
		case strings.Contains(s.SQL, tsql.SequenceSchema), strings.HasPrefix(s.Kind, "CREATE"), strings.HasPrefix(s.Kind, "ALTER"),
			s.Kind == "INSERT", s.Kind == "UPDATE", s.Kind == "DELETE", s.Kind == "EXEC":
			out = append(out, s.Kind+": "+s.SQL)
		}
	}
	return out
}

// TestCatalogSequenceOnReadOnlyDatabase: `sequence: catalog` (the default)
// numbers the sets of a READ_ONLY database, where `sequence: table` cannot
// create or update its table (3906), and writes nothing to the source: the
// numbers live beside the manifests, in every server's sequence file.
func TestCatalogSequenceOnReadOnlyDatabase(t *testing.T) {
	db := "Sales]'@%販売"
	f := newSQLFixture(t, db, "")
	if f.cfg.Databases[0].Sequence != "catalog" {
		t.Fatalf("default sequence %q", f.cfg.Databases[0].Sequence)
	}
	src := f.sourceSQL()
	q, _ := tsql.QuoteIdent(db)
	if _, err := src.ExecContext(context.Background(), "ALTER DATABASE "+q+" SET READ_ONLY WITH ROLLBACK IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	from := len(f.src.Statements())

	p, seq, _ := f.backedUp()
	if seq != 1 {
		t.Errorf("first number %d, want 1", seq)
	}
	if got := f.allocate(); got != 2 {
		t.Errorf("second number %d, want 2", got)
	}
	for _, s := range []string{"bak01", "bak02"} {
		if got := f.recorded(s); got != 2 {
			t.Errorf("sequence file on %s holds %d, want 2", s, got)
		}
	}
	if w := writesTo(f, from); len(w) != 0 {
		t.Errorf("the source ran statements that write: %v", w)
	}
	if m := f.load(p.Rotation[0], seq); m.State != catalog.StateWritten {
		t.Errorf("set %d: %s, want written", seq, m.State)
	}

	// The same database with `sequence: table` cannot take a number.
	ft := newSQLFixture(t, db, "    sequence: table\n")
	if _, err := ft.sourceSQL().ExecContext(context.Background(), "ALTER DATABASE "+q+" SET READ_ONLY WITH ROLLBACK IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	if err := ft.run(ft.acts.AllocateSequence, activities.SequenceInput{Database: db}, nil); err == nil || !strings.Contains(err.Error(), "3906") {
		t.Errorf("sequence: table on a READ_ONLY database: %v, want error 3906", err)
	}
}

// TestCatalogSequenceSurvivesLosingEveryBackupServer: with both backup
// directories emptied, the numbers go on from the source instance's backup
// history (msdb.dbo.backupset), never back to 1.
func TestCatalogSequenceSurvivesLosingEveryBackupServer(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, first, _ := f.backedUp()
	_, second, _ := f.backedUp()
	if second != first+1 {
		t.Fatalf("numbers %d then %d", first, second)
	}
	for _, s := range []string{"bak01", "bak02"} {
		if err := os.RemoveAll(f.dirs[s]); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(f.dirs[s], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.allocate(); got != second+1 {
		t.Errorf("after losing every backup server: %d, want %d", got, second+1)
	}
}

// TestCatalogSequenceTableAndUTCStillWork: switching a database between
// modes never hands out a used number.
func TestCatalogSequenceTableAndUTCStillWork(t *testing.T) {
	f := newSQLFixture(t, "Sales", "    sequence: table\n")
	_, seq, _ := f.backedUp()
	if seq != 1 || len(statements(f.src, "UPDATE")) == 0 {
		t.Errorf("table: number %d, %d UPDATEs", seq, len(statements(f.src, "UPDATE")))
	}
	f.cfg.Databases[0].Sequence = "catalog"
	if got := f.allocate(); got != seq+1 {
		t.Errorf("catalog after table: %d, want %d", got, seq+1)
	}
	f.cfg.Databases[0].Sequence = "utc"
	if got := f.allocate(); got < 20000101000000 || got > tsql.MaxSequence {
		t.Errorf("utc: %d", got)
	}
}

// sambaServers are both backup servers on Samba, with one password.
func sambaServers(t *testing.T) map[string]*sambatest.Server {
	smb1 := sambatest.Start(t, sambatest.Options{})
	smb2 := sambatest.Start(t, sambatest.Options{User: smb1.User(), Password: smb1.Password()})
	return map[string]*sambatest.Server{"bak01": smb1, "bak02": smb2}
}

// TestCatalogSequenceClaimsAndFailover, on local directories and on SMB
// shares: a number another run claimed is refused (SequenceInUse) and the
// next allocation skips past it; a server that vanished holding only a
// claim (its BACKUP never completed, so msdb has no row) does not give its
// number out again, because the other server's sequence file has it.
func TestCatalogSequenceClaimsAndFailover(t *testing.T) {
	for _, backend := range []string{"local", "smb"} {
		t.Run(backend, func(t *testing.T) {
			var servers map[string]*sambatest.Server
			if backend == "smb" {
				servers = sambaServers(t)
			}
			f := newSQLFixtureWith(t, "Sales", "", servers)

			// Two runs racing took the same number; the other one claimed
			// it first.
			n := f.allocate()
			f.claimAs("bak01", n, "backup-sql01-Sales", "other-run")
			err := f.run(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: n, Server: "bak01", Stripes: 2}, nil)
			if ae := appErrorOf(t, err); ae.Type() != activities.ErrSequenceInUse {
				t.Fatalf("Backup of a claimed number: %v, want %s", err, activities.ErrSequenceInUse)
			}
			if len(statements(f.src, "BACKUP DATABASE")) != 0 {
				t.Errorf("a BACKUP ran over another run's claim")
			}
			m := f.load("bak01", n)
			if m.RunID != "other-run" || m.State != catalog.StatePending {
				t.Errorf("the other run's claim changed: %+v", m)
			}
			next := f.allocate()
			if next != n+1 {
				t.Fatalf("after SequenceInUse: %d, want %d", next, n+1)
			}
			var b activities.BackupOutput
			f.must(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: next, Server: "bak01", Stripes: 2}, &b)

			// The next cycle claims k on bak01, which vanishes before its
			// BACKUP completes (msdb has no row for k): bak02's sequence
			// file still knows k, so k is not given out again.
			k := f.allocate()
			if k != next+1 {
				t.Fatalf("after set %d: %d", next, k)
			}
			f.claimAs("bak01", k, "backup-sql01-Sales", "crashed-run")
			if err := os.Rename(f.dirs["bak01"], f.dirs["bak01"]+".away"); err != nil {
				t.Fatal(err)
			}
			if got := f.recorded("bak02"); got != k {
				t.Errorf("bak02's sequence file holds %d, want %d", got, k)
			}
			if got := f.allocate(); got != k+1 {
				t.Errorf("with bak01 gone: %d, want %d", got, k+1)
			}
		})
	}
}

// TestSequenceIgnoresNumbersNoCycleHandsOut: an empty file named like a
// stripe of the database but numbered above tsql.MaxSequence (anyone who
// can write a share can put it there), and a sequence file holding such a
// number, stop no cycle: they are reported, naming the file, and ignored;
// the poisoned number is never written to another server's sequence file,
// and the files are left where they are.
func TestSequenceIgnoresNumbersNoCycleHandsOut(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	first := f.allocate()
	planted := tsql.OwnerOf("sql01", "Sales") + "_999999999999999999_1of1.bak"
	if err := os.WriteFile(filepath.Join(f.dirs["bak02"], planted), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(f.dirs["bak01"], tsql.SequenceFileName("sql01", "Sales"))
	if err := os.WriteFile(record, []byte(`{"instance":"sql01","database":"Sales","sequence":999999999999999999}`), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := f.observe()
	var next int64
	if err := f.run(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &next); err != nil {
		t.Errorf("AllocateSequence beside a number no cycle hands out: %v", err)
	}
	if next != first+1 {
		t.Errorf("next number %d, want %d", next, first+1)
	}
	for _, s := range []string{"bak01", "bak02"} {
		if got := f.recorded(s); got != first+1 {
			t.Errorf("sequence file on %s holds %d, want %d", s, got, first+1)
		}
	}
	for _, want := range []string{planted, tsql.SequenceFileName("sql01", "Sales")} {
		found := false
		for _, e := range logs.FilterLevelExact(zapcore.WarnLevel).All() {
			if strings.Contains(fmt.Sprint(e.Message, e.ContextMap()), want) {
				found = true
			}
		}
		if !found {
			t.Errorf("no warning names %s; warnings: %v", want, logs.FilterLevelExact(zapcore.WarnLevel).All())
		}
	}
	if _, err := os.Stat(filepath.Join(f.dirs["bak02"], planted)); err != nil {
		t.Errorf("the planted file: %v, want it left alone", err)
	}
}

// TestPlantedLinkAtTheNextManifestTakesANewNumber: a symbolic link under
// the name of the next set's manifest (never followed) holds the number
// like an unreadable manifest does: the BACKUP gets SequenceInUse and the
// cycle takes the next number, instead of failing on the link.
func TestPlantedLinkAtTheNextManifestTakesANewNumber(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	n := f.allocate()
	next := tsql.ManifestFileName("sql01", "Sales", n+1)
	if err := os.Symlink("/etc/hostname", filepath.Join(f.dirs["bak01"], next)); err != nil {
		t.Fatal(err)
	}
	seq := f.allocate()
	if seq != n+1 {
		t.Fatalf("allocated %d, want %d", seq, n+1)
	}
	err := f.run(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: 1}, nil)
	if ae := appErrorOf(t, err); ae.Type() != activities.ErrSequenceInUse {
		t.Fatalf("Backup under a planted link: %v, want %s", err, activities.ErrSequenceInUse)
	}
	if got := f.allocate(); got != seq+1 {
		t.Errorf("after SequenceInUse: %d, want %d", got, seq+1)
	}
	if fi, err := os.Lstat(filepath.Join(f.dirs["bak01"], next)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted link: %v, %v; want it left alone", fi, err)
	}
}
