package cycle

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// TestLongestNamesRunACycle: a database whose name is 128 characters (with
// ], ', @, % and non-ASCII letters) runs a whole cycle
// through the emulator — backup, copy, restore with every file moved,
// CHECKDB, sanity, verified — once verify_name is set to the pattern the
// configuration check suggests; every name SQL Server is given stays within
// its limit.
func TestLongestNamesRunACycle(t *testing.T) {
	db := "Sales]'@%販売🧾"
	for len(utf16.Encode([]rune(db))) < tsql.MaxIdentLen {
		db += "x"
	}
	verifyDB := tsql.VerifyDatabaseName(db) // what the check suggests for "{db}_verify"
	f := newSQLFixture(t, db, fmt.Sprintf("    verify_name: %q\n", verifyDB))

	seq, verify := f.copiedSet()
	for _, s := range statements(f.src, "BACKUP DATABASE") {
		for _, path := range strings.Split(s.SQL, "DISK = N'")[1:] {
			path = path[:strings.Index(path, "'")]
			if e := tsql.CheckPath("stripe path", path); e != nil {
				t.Errorf("BACKUP to %v", e)
			}
		}
	}
	var restored activities.StepOutput
	f.must(f.acts.Restore, verify, &restored)
	if restored.VerifyDatabase != verifyDB {
		t.Errorf("restored into %q, want %q", restored.VerifyDatabase, verifyDB)
	}
	rs := statements(f.verify, "RESTORE DATABASE")
	if len(rs) != 1 || rs[0].Outcome != "ok" {
		t.Fatalf("RESTORE statements %+v", rs)
	}
	moves := strings.Split(rs[0].SQL, "MOVE N'")[1:]
	if len(moves) == 0 {
		t.Fatalf("no MOVE in %s", rs[0].SQL)
	}
	for _, m := range moves {
		// MOVE N'<logical>' TO N'<path>' with ' doubled inside.
		logical, rest, _ := strings.Cut(m, "' TO N'")
		path := rest[:strings.Index(strings.ReplaceAll(rest, "''", "\x00\x00"), "'")]
		logical, path = strings.ReplaceAll(logical, "''", "'"), strings.ReplaceAll(path, "''", "'")
		if e := tsql.CheckIdentLen("logical name", logical); e != nil {
			t.Errorf("%v", e)
		}
		if e := tsql.CheckPath("restored file", path); e != nil {
			t.Errorf("%v", e)
		}
		if name := path[strings.LastIndexAny(path, `\/`)+1:]; len(utf16.Encode([]rune(name))) > tsql.MaxMoveFileName || len(name) > tsql.MaxFileNameLen {
			t.Errorf("restored file name %q", name)
		}
	}
	f.must(f.acts.CheckDB, verify, nil)
	f.must(f.acts.SanityChecks, verify, nil)
	f.must(f.acts.MarkVerified, activities.MarkInput{Database: db, Sequence: seq, Servers: []string{"bak01", "bak02"}}, nil)
	if m := f.load("bak02", seq); m.State != catalog.StateVerified || m.VerifyDB != verifyDB {
		t.Errorf("manifest: %s, verification copy %q", m.State, m.VerifyDB)
	}
}
