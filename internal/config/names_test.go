package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// parseErrs parses y and returns its errors (nil when valid).
func parseErrs(t *testing.T, y string) Errors {
	t.Helper()
	_, err := Parse([]byte(y), "config.yaml")
	if err == nil {
		return nil
	}
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error is %T, want config.Errors: %v", err, err)
	}
	return es
}

// nameOfLen is a database name of n UTF-16 code units that carries every
// character that needs care in a verification name: ], ', @, % and
// non-ASCII letters.
func nameOfLen(t *testing.T, n int) string {
	t.Helper()
	s := "Sales]'@%販売"
	for len(utf16.Encode([]rune(s))) < n {
		s += "x"
	}
	if got := len(utf16.Encode([]rune(s))); got != n {
		t.Fatalf("name of %d units, want %d", got, n)
	}
	return s
}

// withDB is base with the database's name and extra keys replaced.
func withDB(t *testing.T, name, extra string) string {
	return edit(t, "  - name: Sales\n", fmt.Sprintf("  - name: %q\n%s", name, extra))
}

func TestVerifyNameAtItsWidest(t *testing.T) {
	// The database of 128 characters passes on its own, but its
	// verification copy "<db>_verify" would be 135: refused at load, naming
	// the database, the derived name, its length, the limit and the fix.
	long := nameOfLen(t, 128)
	es := parseErrs(t, withDB(t, long, ""))
	if len(es) != 1 || es[0].Line != lDB {
		t.Fatalf("errors %v, want one at line %d", es, lDB)
	}
	msg := es[0].Msg
	for _, part := range []string{"databases[0] (" + long + ")", fmt.Sprintf("%q", long+"_verify"), "is 135 characters",
		"at most 128", "set verify_name to a shorter pattern, e.g. verify_name: "} {
		if !strings.Contains(msg, part) {
			t.Errorf("message lacks %q: %s", part, msg)
		}
	}
	// The suggested verify_name fixes it.
	_, suggested, ok := strings.Cut(msg, "e.g. verify_name: ")
	if !ok {
		t.Fatal(msg)
	}
	cfg, err := Parse([]byte(withDB(t, long, "    verify_name: "+suggested+"\n")), "config.yaml")
	if err != nil {
		t.Fatalf("with the suggested verify_name %s: %v", suggested, err)
	}
	if vn := cfg.Databases[0].VerifyDatabaseName(tsql.MaxSequence); tsql.CheckIdent(vn) != nil || !strings.HasPrefix(vn, "Sales]'@%") {
		t.Errorf("suggested name %q", vn)
	}

	for _, tc := range []struct {
		verifyName string
		fixed      int // characters verify_name adds to the database name, {seq} at 14 digits
	}{
		{"", len("_verify")},
		{"{db}_{seq}", 1 + 14},
		{"{instance}_{db}_v", len("sql01__v")},
	} {
		extra := ""
		if tc.verifyName != "" {
			extra = fmt.Sprintf("    verify_name: %q\n", tc.verifyName)
		}
		below := nameOfLen(t, tsql.MaxIdentLen-tc.fixed)
		if es := parseErrs(t, withDB(t, below, extra)); es != nil {
			t.Errorf("verify_name %q, database of %d characters: %v", tc.verifyName, tsql.MaxIdentLen-tc.fixed, es)
		}
		above := nameOfLen(t, tsql.MaxIdentLen-tc.fixed+1)
		es := parseErrs(t, withDB(t, above, extra))
		if len(es) != 1 || !strings.Contains(es[0].Msg, "is 129 characters; SQL Server names are at most 128") {
			t.Errorf("verify_name %q, database of %d characters: %v, want one error at 129 characters", tc.verifyName, tsql.MaxIdentLen-tc.fixed+1, es)
		}
	}
	// A broken pattern is reported once, as a pattern.
	es = parseErrs(t, withDB(t, long, "    verify_name: \"{dbx}\"\n"))
	if len(es) != 1 || !strings.Contains(es[0].Msg, "only {db}, {instance} and {seq} are replaced") {
		t.Errorf("broken pattern: %v", es)
	}
}

func TestStripePathsAtTheLimit(t *testing.T) {
	// bak02 is the copy target (and the restore reads from it), bak01 the
	// rotation's first server: both sets of paths are checked.
	name := tsql.StripeFileName("sql01", "Sales", tsql.MaxSequence, 2, 2)
	unc := func(n int) string { return `\\h\` + strings.Repeat("d", n-len(`\\h\`)) }
	fits := tsql.MaxPath - 1 - len(name) // the directory, the separator, the name
	for _, tc := range []struct {
		n    int
		want string
	}{
		{fits, ""},
		{fits + 1, fmt.Sprintf("stripe path %q on backup server bak02 is 260 characters", unc(fits+1)+`\`+name)},
	} {
		y := edit(t, `unc_paths: ['\\10.0.4.2\backup']`, fmt.Sprintf(`unc_paths: ['%s']`, unc(tc.n)))
		y = strings.Replace(y, "    backup_servers: [bak01, bak02]\n", "    backup_servers: [bak01, bak02]\n    stripes: 2\n", 1)
		es := parseErrs(t, y)
		switch {
		case tc.want == "" && es != nil:
			t.Errorf("UNC path of %d characters: %v", tc.n, es)
		case tc.want != "" && (len(es) != 1 || !strings.Contains(es[0].Msg, tc.want) || !strings.Contains(es[0].Msg, "shorten that unc_paths entry of bak02 by 1 characters")):
			t.Errorf("UNC path of %d characters: %v, want %s", tc.n, es, tc.want)
		}
	}
	// stripes: auto is checked with the widest stripe name, 64of64.
	wide := tsql.StripeFileName("sql01", "Sales", tsql.MaxSequence, 64, 64)
	y := edit(t, `unc_paths: ['\\10.0.4.2\backup']`, fmt.Sprintf(`unc_paths: ['%s']`, unc(tsql.MaxPath-len(wide))))
	if es := parseErrs(t, y); len(es) != 1 || !strings.Contains(es[0].Msg, "_64of64.bak") {
		t.Errorf("stripes auto: %v", es)
	}
}

func TestRestoreDirsLeaveRoom(t *testing.T) {
	dir := func(n int) string { return "/" + strings.Repeat("r", n-1) }
	fits := tsql.MaxPhysicalPath - tsql.MinMoveRoom - 1 // the directory and its separator
	if es := parseErrs(t, strings.Replace(base, "restore_data_dir: /data", "restore_data_dir: "+dir(fits), 1)); es != nil {
		t.Errorf("restore_data_dir of %d characters: %v", fits, es)
	}
	es := parseErrs(t, strings.Replace(base, "restore_log_dir: /log", "restore_log_dir: "+dir(fits+1), 1))
	if len(es) != 1 || es[0].Line != 16 || !strings.Contains(es[0].Msg, "backup_servers[0] (bak01): restore_log_dir") ||
		!strings.Contains(es[0].Msg, "use a directory shorter by 1 characters") {
		t.Errorf("restore_log_dir of %d characters: %v", fits+1, es)
	}
}

func TestSequenceCatalogIsTheDefault(t *testing.T) {
	cfg, err := Parse([]byte(base+"  - name: Stock\n    instance: sql01\n    backup_servers: [bak02, bak01]\n    sequence: table\n"), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Databases[0].Sequence; s != SequenceCatalog {
		t.Errorf("default sequence %q, want %q", s, SequenceCatalog)
	}
	if s := cfg.Databases[1].Sequence; s != SequenceTable {
		t.Errorf("sequence: table gave %q", s)
	}
	for _, mode := range []string{SequenceCatalog, SequenceTable, SequenceUTC} {
		if _, err := Parse([]byte("defaults:\n  sequence: "+mode+"\n"+base), "config.yaml"); err != nil {
			t.Errorf("sequence: %s: %v", mode, err)
		}
	}
}

// TestVerifyNameOutsideTheBMP: a database and verification name with a
// character outside the BMP load (the driver's login packet cannot carry
// them, so the sanity checks enter the copy with USE: internal/mssql).
func TestVerifyNameOutsideTheBMP(t *testing.T) {
	cfg, err := Parse([]byte(withDB(t, "Sales😀", "")), "config.yaml")
	if err != nil {
		t.Fatalf("database Sales😀: %v", err)
	}
	if vn := cfg.Databases[0].VerifyDatabaseName(1); vn != "Sales😀_verify" {
		t.Errorf("verification name %q", vn)
	}
}

// TestCheckNamesForConfigsBuiltInCode: Config.CheckNames finds what loading
// finds, for a configuration changed after it was loaded.
func TestCheckNamesForConfigsBuiltInCode(t *testing.T) {
	cfg, err := Parse([]byte(base), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	db := &cfg.Databases[0]
	if err := cfg.CheckNames(db); err != nil {
		t.Fatalf("valid configuration: %v", err)
	}
	db.Name = nameOfLen(t, 128)
	cfg.BackupServers[1].RestoreLogDir = "/" + strings.Repeat("l", 230)
	err = cfg.CheckNames(db)
	if !errors.Is(err, tsql.ErrNameTooLong) {
		t.Fatalf("128-character database: %v", err)
	}
	for _, part := range []string{"is 135 characters", "set verify_name to a shorter pattern", "backup server bak02: restore_log_dir"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error lacks %q: %v", part, err)
		}
	}
}

// TestVerifyNameNeedsAFixedAffix: a verify_name that is nothing but
// placeholders would name the copy like a database that is not one (with
// "{db}", the source database itself, e.g. on an instance that hosts
// production too): refused at load, at its line, with the fix. Under
// defaults it must contain {db}.
func TestVerifyNameNeedsAFixedAffix(t *testing.T) {
	for _, tc := range []struct{ where, verifyName, want string }{
		{"db", "{db}", `databases[0] (Sales): verify_name "{db}" has no fixed prefix or suffix`},
		{"db", "{db}{seq}", `verify_name "{db}{seq}" has no fixed prefix or suffix`},
		{"db", "{instance}{db}", `verify_name "{instance}{db}" has no fixed prefix or suffix`},
		{"db", "{db} ", `verify_name "{db} " has no fixed prefix or suffix`},
		{"defaults", "{db}", `defaults: verify_name "{db}" has no fixed prefix or suffix`},
		{"defaults", "verify_{seq}", `defaults: verify_name "verify_{seq}" does not contain {db}`},
		{"db", "Sales", `databases[0] (Sales): verify_name "Sales" names the copy like the database itself`},
	} {
		y := base + "    verify_name: \"" + tc.verifyName + "\"\n"
		line := lAfterDB
		if tc.where == "defaults" {
			y = "defaults:\n  verify_name: \"" + tc.verifyName + "\"\n" + base
			line = 2
		}
		es := parseErrs(t, y)
		if len(es) != 1 || es[0].Line != line || !strings.Contains(es[0].Msg, tc.want) || !strings.Contains(es[0].Msg, `"{db}_verify"`) {
			t.Errorf("%s verify_name %q: %v, want one error at line %d: %s ... \"{db}_verify\"", tc.where, tc.verifyName, es, line, tc.want)
		}
	}
	for _, ok := range []string{"{db}_verify", "v_{db}", "{instance}_{db}", "{db}_{seq}", "Stock_copy"} {
		if es := parseErrs(t, base+"    verify_name: \""+ok+"\"\n"); es != nil {
			t.Errorf("verify_name %q: %v", ok, es)
		}
	}
}

// TestVerifyInstanceAtASourceAddress: a verification instance whose
// address is a source instance's (the same SQL Server under two names)
// would restore, and drop, copies on a production server: refused at
// load, at its verify_instance line.
func TestVerifyInstanceAtASourceAddress(t *testing.T) {
	for _, addr := range []string{"sql01:1433", "SQL01.:01433"} {
		y := edit(t, "address: verify:1433", "address: "+addr)
		es := parseErrs(t, y)
		want := "backup_servers[0] (bak01): verify_instance verify is at " + addr + ", the address of source instance sql01"
		if len(es) != 2 || es[0].Line != 14 || !strings.Contains(es[0].Msg, want) || !strings.Contains(es[1].Msg, "backup_servers[1] (bak02)") {
			t.Errorf("verification instance at %s: %v, want errors at the verify_instance lines, first: %s", addr, es, want)
		}
	}
	loop := strings.Replace(edit(t, "address: verify:1433", "address: 127.0.0.1:1433"), "address: sql01:1433", "address: localhost:1433", 1)
	if es := parseErrs(t, loop); len(es) != 2 {
		t.Errorf("localhost and 127.0.0.1 on one port: %v, want both verify_instance lines refused", es)
	}
	if es := parseErrs(t, edit(t, "address: verify:1433", "address: sql01:1434")); es != nil {
		t.Errorf("another port of the same host (another instance): %v", es)
	}
}
