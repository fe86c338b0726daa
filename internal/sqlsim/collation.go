package sqlsim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultCollation is the server collation of an instance whose
// Config.Collation is empty: SQL Server's setup default for US English
// systems ("Set or Change the Server Collation",
// https://learn.microsoft.com/en-us/sql/relational-databases/collations/set-or-change-the-server-collation).
const DefaultCollation = "SQL_Latin1_General_CP1_CI_AS"

// collation is the instance's server collation. "The server collation acts
// as the default collation for all system databases ... and also any newly
// created user databases", and it decides the "comparison rules in =, JOIN,
// ORDER BY" and the collation of the columns of system views (same page):
// sys.databases.name, so database names (USE, DB_ID, BACKUP and RESTORE
// targets, DATABASEPROPERTYEX) compare by it too. The emulator knows three
// comparison styles ("Collation and Unicode support",
// https://learn.microsoft.com/en-us/sql/relational-databases/collations/collation-and-unicode-support):
// case-insensitive (_CI_AS), case-sensitive (_CS_AS) and binary (_BIN,
// _BIN2: code point order). Accent-, kana- and width-insensitive
// collations are refused by New rather than compared wrongly.
type collation struct {
	name string
	// ci: case-insensitive; bin: binary (code point) order. Neither:
	// case-sensitive dictionary order.
	ci, bin bool
}

// parseCollation reads a collation name's comparison style from its
// suffix: "_CI_AS", "_CS_AS", "_BIN" or "_BIN2" (Windows and SQL collation
// names, "Windows Collation Name" and "SQL Server Collation Name" on Learn).
func parseCollation(name string) (collation, error) {
	if name == "" {
		name = DefaultCollation
	}
	u := strings.ToUpper(name)
	switch {
	case strings.HasSuffix(u, "_CI_AS"):
		return collation{name: name, ci: true}, nil
	case strings.HasSuffix(u, "_CS_AS"):
		return collation{name: name}, nil
	case strings.HasSuffix(u, "_BIN"), strings.HasSuffix(u, "_BIN2"):
		return collation{name: name, bin: true}, nil
	}
	return collation{}, fmt.Errorf("sqlsim: Config.Collation %q is not emulated: use a collation ending in _CI_AS, _CS_AS, _BIN or _BIN2 (e.g. %s, Latin1_General_CS_AS, Latin1_General_BIN2)", name, DefaultCollation)
}

// pad drops trailing spaces: SQL Server pads the shorter string with
// spaces before it compares, so 'abc' = 'abc ' is true under every
// collation ("How SQL Server compares strings with trailing spaces", KB
// 316626; "= (String Comparison or Assignment)",
// https://learn.microsoft.com/en-us/sql/t-sql/language-elements/string-comparison-assignment).
func pad(s string) string { return strings.TrimRight(s, " ") }

// compare orders two strings by the collation.
func (c collation) compare(a, b string) int {
	a, b = pad(a), pad(b)
	switch {
	case c.bin:
		return strings.Compare(a, b) // UTF-8 byte order is code point order
	case c.ci:
		return strings.Compare(foldCase(a), foldCase(b))
	}
	// Case-sensitive: dictionary order, case breaking ties (lower before
	// upper, as Windows collations sort).
	if r := strings.Compare(foldCase(a), foldCase(b)); r != 0 {
		return r
	}
	return -strings.Compare(a, b)
}

// same reports whether two names are the same under the collation.
func (c collation) same(a, b string) bool { return c.compare(a, b) == 0 }

// foldCase maps every letter to its lower case (simple case mapping).
func foldCase(s string) string {
	return strings.Map(unicode.ToLower, s)
}

// sameName compares two names by the instance's collation.
func (in *Instance) sameName(a, b string) bool { return in.coll.same(a, b) }

// foldedPath is the path of an existing file in local's directory whose
// name differs from local's only in case, or local itself. A Windows file
// server, and Samba serving SMB clients with its default case sensitive =
// auto, match names case-insensitively: "Do not assume case sensitivity.
// For example, consider the names OSCAR, Oscar, and oscar to be the same"
// ("Naming Files, Paths, and Namespaces",
// https://learn.microsoft.com/en-us/windows/win32/fileio/naming-a-file).
// So a BACKUP ... WITH FORMAT to x.bak over a share that holds X.bak opens
// and overwrites X.bak, while a worker reading the same directory locally
// (case-sensitive) sees two different names.
func foldedPath(local string) string {
	if _, err := os.Lstat(local); err == nil {
		return local
	}
	dir, base := filepath.Split(local)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return local
	}
	for _, e := range entries {
		if e.Name() != base && strings.EqualFold(e.Name(), base) && utf8.ValidString(e.Name()) {
			return filepath.Join(dir, e.Name())
		}
	}
	return local
}
