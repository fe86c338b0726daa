package tsql

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"
)

// hostile is a database name of n UTF-16 code units with every character
// that needs care in names: ], ', @, %, a forbidden file name character,
// a BMP letter and one outside the BMP.
func hostile(t *testing.T, n int) string {
	t.Helper()
	s := "a]'@%/販😀"
	for utf16Len(s) < n {
		s += "x"
	}
	if utf16Len(s) != n {
		t.Fatalf("hostile name of %d units, want %d", utf16Len(s), n)
	}
	return s
}

func TestLimitChecksJustBelowAndAbove(t *testing.T) {
	for _, tc := range []struct {
		what  string
		check func(string) *LimitError
		make  func(n int) string
		limit int
	}{
		{"identifier", func(s string) *LimitError { return CheckIdentLen("x", s) }, func(n int) string { return hostile(t, n) }, MaxIdentLen},
		// Bytes: 販 is 3 of them, 😀 4.
		{"file name", func(s string) *LimitError { return CheckFileName("x", s) },
			func(n int) string { return "販😀" + strings.Repeat("f", n-7) }, MaxFileNameLen},
		{"path", func(s string) *LimitError { return CheckPath("x", s) },
			func(n int) string { return `\\h\s\😀` + strings.Repeat("p", n-8) }, MaxPath},
	} {
		if e := tc.check(tc.make(tc.limit)); e != nil {
			t.Errorf("%s at the limit: %v", tc.what, e)
		}
		e := tc.check(tc.make(tc.limit + 1))
		if e == nil || e.Len != tc.limit+1 || e.Limit != tc.limit || !errors.Is(e, ErrNameTooLong) {
			t.Errorf("%s one over the limit: %+v", tc.what, e)
		}
	}
}

func TestFileNamesOfTheWidestNamesFit(t *testing.T) {
	inst := strings.Repeat("i", 63) // the longest instance name the configuration accepts
	for _, db := range []string{hostile(t, 128), strings.Repeat("販", 128), strings.Repeat("😀", 64), strings.Repeat("/", 128)} {
		if errs := CheckSetNames(inst, db, 0, nil); errs != nil {
			t.Errorf("%q: %v", db, errs)
		}
		for _, name := range []string{StripeFileName(inst, db, MaxSequence, 64, 64), ManifestFileName(inst, db, MaxSequence), SequenceFileName(inst, db)} {
			if len(name) > MaxFileNameLen {
				t.Errorf("%q is %d bytes", name, len(name))
			}
		}
		// Still recognised as this database's, as before.
		p, ok := ParseStripeFileName(StripeFileName(inst, db, MaxSequence, 64, 64))
		if !ok || p.Owner() != OwnerOf(inst, db) || p.Sequence != MaxSequence {
			t.Errorf("%q: parsed %+v %v", db, p, ok)
		}
		if _, ok := ParseManifestFileName(SequenceFileName(inst, db)); ok {
			t.Errorf("the sequence file of %q parses as a manifest", db)
		}
		if strings.HasPrefix(SequenceFileName(inst, db), DBPrefix(inst, db)) {
			t.Errorf("the sequence file of %q is listed with its sets", db)
		}
	}
	// ASCII names map as they always did: kept up to 160, else 150 + ~hash.
	if got := FileNamePart(strings.Repeat("a", 128)); got != strings.Repeat("a", 128) {
		t.Errorf("128 ASCII characters became %q", got)
	}
	if got := FileNamePart(strings.Repeat("/", 60)); len(got) != 159 || !strings.HasPrefix(got, strings.Repeat("%2F", 50)+"~") {
		t.Errorf("escaped name: %q", got)
	}
	// Non-ASCII names are cut by bytes, at a character boundary.
	if got := FileNamePart(strings.Repeat("販", 128)); len(got) > 160 || !strings.HasPrefix(got, strings.Repeat("販", 50)+"~") {
		t.Errorf("CJK name: %q (%d bytes)", got, len(got))
	}
	// A stripe path one character over MaxPath is reported, one under is not.
	name := StripeFileName("sql01", "Sales", MaxSequence, 2, 2)
	dir := `\\h\` + strings.Repeat("d", MaxPath-len(name)-1-4)
	if errs := CheckSetNames("sql01", "Sales", 2, []string{dir}); errs != nil {
		t.Errorf("path of %d: %v", MaxPath, errs)
	}
	errs := CheckSetNames("sql01", "Sales", 2, []string{dir + "d"})
	if len(errs) != 1 || errs[0].What != "stripe path" || errs[0].Len != MaxPath+1 {
		t.Errorf("path of %d: %v", MaxPath+1, errs)
	}
}

func TestMovesOfTheLongestNames(t *testing.T) {
	db := hostile(t, 128)
	verifyDB := VerifyDatabaseName(db)
	if utf16Len(verifyDB) != MaxIdentLen || CheckIdent(verifyDB) != nil {
		t.Fatalf("verification name %q", verifyDB)
	}
	// FILELISTONLY of a database with a 128-character name, and logical and
	// physical names as long as they can be.
	rows := []FileListRow{
		{LogicalName: db, PhysicalName: `D:\data\` + db + ".mdf", Type: "D", FileID: 1},
		{LogicalName: db[:len(db)-4] + "_log", PhysicalName: `L:\log\` + db + "_log.ldf", Type: "L", FileID: 2},
		{LogicalName: "f3", PhysicalName: `D:\data\` + db + "_3.ndf", Type: "D", FileID: 3},
		{LogicalName: "f65537", PhysicalName: `D:\data\` + strings.Repeat("販", 200), Type: "S", FileID: 65537},
	}
	for _, dirs := range [][2]string{
		{`R:\restore\data`, `R:\restore\log`},
		// The longest directory the configuration accepts: exactly MinMoveRoom left.
		{`R:\` + strings.Repeat("d", MaxPhysicalPath-MinMoveRoom-4), "/" + strings.Repeat("l", MaxPhysicalPath-MinMoveRoom-2)},
	} {
		moves, err := Moves(verifyDB, rows, dirs[0], dirs[1])
		if err != nil {
			t.Fatalf("dirs %d/%d characters: %v", len(dirs[0]), len(dirs[1]), err)
		}
		again, _ := Moves(verifyDB, rows, dirs[0], dirs[1])
		seen := map[string]bool{}
		for i, m := range moves {
			name := baseName(m.PhysicalName)
			if utf16Len(name) > MaxMoveFileName || len(name) > MaxFileNameLen || utf16Len(m.PhysicalName) > MaxPhysicalPath {
				t.Errorf("%q: name %d characters, %d bytes; path %d characters", m.PhysicalName, utf16Len(name), len(name), utf16Len(m.PhysicalName))
			}
			if seen[strings.ToLower(m.PhysicalName)] {
				t.Errorf("two files restored to %q", m.PhysicalName)
			}
			seen[strings.ToLower(m.PhysicalName)] = true
			if again[i] != m {
				t.Errorf("not stable: %q then %q", m.PhysicalName, again[i].PhysicalName)
			}
			if !strings.HasPrefix(name, FileNamePart(verifyDB)[:20]) || !strings.Contains(name, fmt.Sprintf("_%d", rows[i].FileID)) {
				t.Errorf("%q does not say whose file it is", name)
			}
		}
		for i, ext := range []string{".mdf", ".ldf", ".ndf"} {
			if !strings.HasSuffix(moves[i].PhysicalName, ext) {
				t.Errorf("%q lost its extension %s", moves[i].PhysicalName, ext)
			}
		}
		if _, err := RestoreDatabase(RestoreOptions{Database: verifyDB, Disks: []string{"a.bak"}, Moves: moves, Checksum: true}); err != nil {
			t.Errorf("RESTORE of the moved files: %v", err)
		}
	}
	// Two verification databases sharing a long prefix never share a file.
	a, _ := Moves(VerifyDatabaseName(hostile(t, 127)+"A"), rows[:1], `R:\d`, `R:\l`)
	b, _ := Moves(VerifyDatabaseName(hostile(t, 127)+"B"), rows[:1], `R:\d`, `R:\l`)
	if a == nil || b == nil || a[0].PhysicalName == b[0].PhysicalName {
		t.Errorf("long names share %v / %v", a, b)
	}

	// One character less room than the shortest name needs: refused, and so
	// is a logical name SQL Server could not have (130 characters).
	if _, err := Moves(verifyDB, rows[:1], `R:\`+strings.Repeat("d", MaxPhysicalPath-MinMoveRoom-3), `R:\l`); err == nil || !errors.Is(err, ErrNameTooLong) {
		t.Errorf("directory without room: %v", err)
	}
	bad := []FileListRow{{LogicalName: db + "_1", PhysicalName: `D:\x.mdf`, Type: "D", FileID: 1}}
	if _, err := Moves(verifyDB, bad, `R:\d`, `R:\l`); err == nil || !errors.Is(err, ErrInvalidIdent) || !strings.Contains(err.Error(), "130 characters") {
		t.Errorf("130-character logical name: %v", err)
	}
}

func TestShortNameAndVerifyName(t *testing.T) {
	for _, n := range []int{MaxIdentLen - len(VerifySuffix), MaxIdentLen - len(VerifySuffix) + 1, MaxIdentLen} {
		db := hostile(t, n)
		v := VerifyDatabaseName(db)
		if utf16Len(v) > MaxIdentLen || !strings.HasSuffix(v, VerifySuffix) {
			t.Errorf("%d: %q is %d characters", n, v, utf16Len(v))
		}
		if n+len(VerifySuffix) <= MaxIdentLen && v != db+VerifySuffix {
			t.Errorf("%d: a name that fits was changed: %q", n, v)
		}
	}
	// A surrogate pair is never split.
	s := ShortName(strings.Repeat("😀", 20), 12)
	if utf16Len(s) > 12 || strings.ContainsRune(s, '\uFFFD') || len(utf16.Encode([]rune(s))) != utf16Len(s) {
		t.Errorf("ShortName split a character: %q", s)
	}
}

func TestSequenceHistoryQuery(t *testing.T) {
	q, args, err := SequenceHistory("Sales]'")
	if err != nil || !strings.Contains(q, "FROM msdb.dbo.backupset") || !strings.Contains(q, "bs.server_name = @@SERVERNAME") ||
		len(args) != 2 || args[0] != "Sales]'" || args[1] != "backupcycle seq %" {
		t.Errorf("SequenceHistory = %q %v %v", q, args, err)
	}
	if strings.Contains(q, "Sales") {
		t.Errorf("the name is pasted into the text: %s", q)
	}
	for name, want := range map[string]int64{BackupSetName(42): 42, BackupSetName(MaxSequence): MaxSequence, "backupcycle seq 0042": -1, "other": -1, "backupcycle seq 0000004x": -1} {
		got, ok := ParseBackupSetName(name)
		if (want < 0 && ok) || (want >= 0 && (!ok || got != want)) {
			t.Errorf("ParseBackupSetName(%q) = %d %v, want %d", name, got, ok, want)
		}
	}
}
