package tsql

import (
	"strconv"
	"strings"
	"testing"
)

// nameCase is a database's set and the names its files get.
type nameCase struct {
	inst, db      string
	seq           int64
	i, n          int
	stripe, manif string
}

func TestFileNames(t *testing.T) {
	tests := []nameCase{
		{"sql01", "sales", 42, 3, 8, "sql01@sales_00000042_3of8.bak", "sql01@sales_00000042.manifest.json"},
		{"sql01", "Sales", 42, 3, 8, "sql01@Sales~8de4e0ea_00000042_3of8.bak", "sql01@Sales~8de4e0ea_00000042.manifest.json"},
		{"SQL01", "sales", 42, 3, 8, "SQL01~3aa107a7@sales_00000042_3of8.bak", "SQL01~3aa107a7@sales_00000042.manifest.json"},
		{"sql01", "Sales]; DROP DATABASE x--", 1, 1, 1, "sql01@Sales]; DROP DATABASE x--~dbe24601_00000001_1of1.bak", "sql01@Sales]; DROP DATABASE x--~dbe24601_00000001.manifest.json"},
		{"sql01", `a/b\c:d*e?f"g<h>i|j`, 7, 2, 2, "sql01@a%2Fb%5Cc%3Ad%2Ae%3Ff%22g%3Ch%3Ei%7Cj_00000007_2of2.bak", "sql01@a%2Fb%5Cc%3Ad%2Ae%3Ff%22g%3Ch%3Ei%7Cj_00000007.manifest.json"},
		{"sql01", "100%", 1, 1, 2, "sql01@100%25_00000001_1of2.bak", "sql01@100%25_00000001.manifest.json"},
		{"sql01", "tab\there", 1, 1, 2, "sql01@tab%09here_00000001_1of2.bak", "sql01@tab%09here_00000001.manifest.json"},
		{"sql01", "sales~1", 1, 1, 2, "sql01@sales%7E1_00000001_1of2.bak", "sql01@sales%7E1_00000001.manifest.json"},
		{"sql01", "Sa\u202eles", 1, 1, 2, "sql01@Sa%E2%80%AEles~a890088f_00000001_1of2.bak", "sql01@Sa%E2%80%AEles~a890088f_00000001.manifest.json"},
		{"sql01", "販売", 20261129192500, 1, 2, "sql01@販売~116a1678_20261129192500_1of2.bak", "sql01@販売~116a1678_20261129192500.manifest.json"},
	}
	for _, tt := range tests {
		if got := StripeFileName(tt.inst, tt.db, tt.seq, tt.i, tt.n); got != tt.stripe {
			t.Errorf("StripeFileName(%q) = %q, want %q", tt.db, got, tt.stripe)
		}
		if got := ManifestFileName(tt.inst, tt.db, tt.seq); got != tt.manif {
			t.Errorf("ManifestFileName(%q) = %q, want %q", tt.db, got, tt.manif)
		}
		p, ok := ParseStripeFileName(tt.stripe)
		if !ok || p.DBPart != FileNamePart(tt.db) || p.InstancePart != InstancePart(tt.inst) || p.Sequence != tt.seq || p.Index != tt.i || p.Count != tt.n {
			t.Errorf("ParseStripeFileName(%q) = %+v, %v", tt.stripe, p, ok)
		}
		m, ok := ParseManifestFileName(tt.manif)
		if !ok || m.DBPart != FileNamePart(tt.db) || m.InstancePart != InstancePart(tt.inst) || m.Sequence != tt.seq {
			t.Errorf("ParseManifestFileName(%q) = %+v, %v", tt.manif, m, ok)
		}
		if n, ok := NamesFor(p, tt.inst, tt.db); !ok || n.Legacy {
			t.Errorf("NamesFor(%q) = %+v, %v; want the current naming", tt.stripe, n, ok)
		}
	}
}

// Sets written before file names were made case-safe (their manifests
// record no naming) keep the names they were written under: byte for byte,
// as this table of names an earlier build wrote. They still parse, and
// they are recognised as the same database's (AllNamesOf, NamesFor).
func TestLegacyFileNames(t *testing.T) {
	tests := []nameCase{
		{"sql01", "Sales", 42, 3, 8, "sql01@Sales_00000042_3of8.bak", "sql01@Sales_00000042.manifest.json"},
		{"SQL01", "Sales", 42, 3, 8, "SQL01@Sales_00000042_3of8.bak", "SQL01@Sales_00000042.manifest.json"},
		{"sql01", "Sales]; DROP DATABASE x--", 1, 1, 1, "sql01@Sales]; DROP DATABASE x--_00000001_1of1.bak", "sql01@Sales]; DROP DATABASE x--_00000001.manifest.json"},
		{"sql01", `a/b\c:d*e?f"g<h>i|j`, 7, 2, 2, "sql01@a%2Fb%5Cc%3Ad%2Ae%3Ff%22g%3Ch%3Ei%7Cj_00000007_2of2.bak", "sql01@a%2Fb%5Cc%3Ad%2Ae%3Ff%22g%3Ch%3Ei%7Cj_00000007.manifest.json"},
		{"sql01", "100%", 1, 1, 2, "sql01@100%25_00000001_1of2.bak", "sql01@100%25_00000001.manifest.json"},
		{"sql01", "tab\there", 1, 1, 2, "sql01@tab%09here_00000001_1of2.bak", "sql01@tab%09here_00000001.manifest.json"},
		{"sql01", "Sa\u202eles~1", 1, 1, 2, "sql01@Sa\u202eles~1_00000001_1of2.bak", "sql01@Sa\u202eles~1_00000001.manifest.json"},
		{"sql01", "販売", 20261129192500, 1, 2, "sql01@販売_20261129192500_1of2.bak", "sql01@販売_20261129192500.manifest.json"},
	}
	for _, tt := range tests {
		old := LegacyNamesOf(tt.inst, tt.db)
		if got := old.Stripe(tt.seq, tt.i, tt.n); got != tt.stripe {
			t.Errorf("legacy stripe of %q = %q, want %q", tt.db, got, tt.stripe)
		}
		if got := old.Manifest(tt.seq); got != tt.manif {
			t.Errorf("legacy manifest of %q = %q, want %q", tt.db, got, tt.manif)
		}
		for _, name := range []string{tt.stripe, tt.manif} {
			p, ok := ParseStripeFileName(name)
			if !ok {
				p, ok = ParseManifestFileName(name)
			}
			if !ok || p.Sequence != tt.seq {
				t.Errorf("%q does not parse: %+v", name, p)
			}
			n, ok := NamesFor(p, tt.inst, tt.db)
			if !ok || n.Owner() != old.Owner() {
				t.Errorf("%q is not recognised as a file of %s/%s: %+v %v", name, tt.inst, tt.db, n, ok)
			}
			if n.Legacy != (LegacyNamesOf(tt.inst, tt.db).Owner() != OwnerOf(tt.inst, tt.db)) {
				t.Errorf("%q: legacy %v", name, n.Legacy)
			}
		}
	}
}

func TestFileNamePartInjectiveAndBounded(t *testing.T) {
	names := []string{"a/b", "a%2Fb", "a%b", "a%25b", "a:b", "a_b", "A/B"}
	seen := map[string]string{}
	for _, n := range names {
		p := FileNamePart(n)
		if prev, dup := seen[p]; dup {
			t.Errorf("%q and %q map to the same file name part %q", prev, n, p)
		}
		seen[p] = n
		if strings.ContainsAny(p, `<>:"/\|?*`) {
			t.Errorf("FileNamePart(%q) = %q keeps a character Windows forbids", n, p)
		}
	}
	long1 := strings.Repeat("/", 128)
	long2 := strings.Repeat("/", 127) + "*"
	p1, p2 := FileNamePart(long1), FileNamePart(long2)
	if p1 == p2 {
		t.Errorf("long names collide: %q", p1)
	}
	if n := len([]rune(StripeFileName(strings.Repeat("i", 200), long1, 99999999, 64, 64))); n > 255 {
		t.Errorf("stripe name of a 128-char hostile name is %d characters, over the 255 limit", n)
	}
}

func TestParseRejectsForeignNames(t *testing.T) {
	for _, n := range []string{"Sales.bak", "Sales_0000001_1of2.bak", "Sales_00000001_3of2.bak", "Sales_00000001_0of2.bak",
		"Sales_00000001_1of2.bak.tmp", "notes.txt", "Sales_00000001.json", "_00000001_1of2.bak", "Sales_00000001_of2.bak",
		"Sales_00000001_1of.bak", "Sales_00000001_1of2x.bak", "Sales_0000000x_1of2.bak", "Sales_1234567890123456789_1of2.bak", "Sales_00000001_-1of2.bak"} {
		if p, ok := ParseStripeFileName(n); ok {
			t.Errorf("ParseStripeFileName(%q) accepted: %+v", n, p)
		}
	}
	for _, n := range []string{"Sales_0000001.manifest.json", "_00000001.manifest.json", "Sales_00000001.manifest.json.tmp-1", "Sales.manifest.json"} {
		if p, ok := ParseManifestFileName(n); ok {
			t.Errorf("ParseManifestFileName(%q) accepted: %+v", n, p)
		}
	}
	// A database whose name itself looks like a set prefix still parses to the
	// full name: the sequence is the last 8+ digit group.
	p, ok := ParseStripeFileName(StripeFileName("sql_01", "x_12345678", 5, 1, 2))
	if !ok || p.DBPart != "x_12345678" || p.InstancePart != "sql_01" || p.Sequence != 5 {
		t.Errorf("got %+v, %v", p, ok)
	}
}

// The same database on two instances, and instance names that try to look
// like a database (with '@', '_' and digits), never share or confuse a name.
func TestFileNamesKeyedByInstance(t *testing.T) {
	type key struct{ inst, db string }
	keys := []key{{"sql01", "DBA"}, {"sql02", "DBA"}, {"sql01@DBA", "x"}, {"sql01", "DBA@x"}, {"a@b", "c"}, {"a", "b@c"},
		{"sql_01", "00000001"}, {"s%40", "d"}, {"s@", "d"}}
	seen := map[string]key{}
	for _, k := range keys {
		name := StripeFileName(k.inst, k.db, 3, 1, 2)
		if prev, dup := seen[name]; dup {
			t.Errorf("%+v and %+v share the file name %q", prev, k, name)
		}
		seen[name] = k
		p, ok := ParseStripeFileName(name)
		if !ok || p.InstancePart != InstancePart(k.inst) || p.DBPart != FileNamePart(k.db) || p.Owner() != OwnerOf(k.inst, k.db) {
			t.Errorf("ParseStripeFileName(%q) = %+v, %v; want instance %q db %q", name, p, ok, InstancePart(k.inst), FileNamePart(k.db))
		}
		if !strings.HasPrefix(name, DBPrefix(k.inst, k.db)) || !strings.HasPrefix(ManifestFileName(k.inst, k.db, 3), SetPrefix(k.inst, k.db, 3)+".") {
			t.Errorf("%+v: names do not start with their prefixes", k)
		}
	}
	// Names of builds that did not key by instance are not ours.
	for _, n := range []string{"DBA_00000003_1of2.bak", "DBA_00000003.manifest.json", "@DBA_00000003_1of2.bak", "sql01@_00000003_1of2.bak"} {
		if p, ok := ParseStripeFileName(n); ok {
			t.Errorf("ParseStripeFileName(%q) accepted: %+v", n, p)
		}
		if p, ok := ParseManifestFileName(n); ok {
			t.Errorf("ParseManifestFileName(%q) accepted: %+v", n, p)
		}
	}
	if n := len([]rune(InstancePart(strings.Repeat("@", 300)))); n > 64 {
		t.Errorf("InstancePart of a long name has %d characters, want at most 64", n)
	}
}

func TestVerifyAndSetNames(t *testing.T) {
	if got := VerifyDatabaseName("Sales]; DROP DATABASE x--"); got != "Sales]; DROP DATABASE x--_verify" {
		t.Errorf("got %q", got)
	}
	a, b := strings.Repeat("a", 125)+"X", strings.Repeat("a", 125)+"Y"
	va, vb := VerifyDatabaseName(a), VerifyDatabaseName(b)
	if va == vb {
		t.Errorf("long names share the verification copy %q", va)
	}
	for _, v := range []string{va, vb, VerifyDatabaseName(strings.Repeat("😀", 64))} {
		if err := CheckIdent(v); err != nil {
			t.Errorf("verification name %q is not a valid identifier: %v", v, err)
		}
		if !strings.HasSuffix(v, VerifySuffix) {
			t.Errorf("%q lacks the suffix", v)
		}
	}
	if got := BackupSetName(42); got != "backupcycle seq 00000042" {
		t.Errorf("BackupSetName = %q", got)
	}
}

// A backup share on Windows or on Samba (for SMB clients) matches file
// names case-insensitively, while a worker reading it as a local directory
// may not: no two different names (databases of a case-sensitive instance,
// instance keys) may get file names that differ only in case.
func TestFileNamesDifferInMoreThanCase(t *testing.T) {
	dbs := []string{"Sales", "sales", "SALES", "sAles", "σ", "ς", "Σ", "k", "K", "\u212a", "ß", "ẞ", "ǅ", "ǆ", "Ǆ",
		"sales~1", "Sales" + "~" + "00000000", strings.Repeat("x", 200), strings.Repeat("X", 200)}
	insts := []string{"sql01", "SQL01", "Sql01"}
	seen := map[string]string{}
	for _, inst := range insts {
		for _, db := range dbs {
			for _, name := range []string{StripeFileName(inst, db, 1, 1, 1), ManifestFileName(inst, db, 1), SequenceFileName(inst, db)} {
				k := strings.ToUpper(strings.ToLower(name))
				if prev, dup := seen[k]; dup && prev != inst+"/"+db {
					t.Errorf("%s and %s/%s share file name %q on a case-insensitive share", prev, inst, db, name)
				}
				seen[k] = inst + "/" + db
			}
		}
	}
}

// Characters that reorder or break a line when a file name is shown (bidi
// controls such as U+202E RIGHT-TO-LEFT OVERRIDE, line and paragraph
// separators, C0 and C1 controls, zero-width characters) are escaped in
// file names, like the characters Windows forbids.
func TestFileNamesEscapeInvisibleCharacters(t *testing.T) {
	for _, r := range []rune{'\n', '\r', '\t', 0x1b, 0x7f, 0x85, 0x9b, 0x200b, 0x200d, 0x200e, 0x200f, 0x202a, 0x202e, 0x2066, 0x2069, 0x2028, 0x2029, 0x061c, 0xfeff} {
		db := "Sales" + string(r) + "gpj.exe"
		for _, name := range []string{StripeFileName("sql01", db, 1, 1, 1), ManifestFileName("sql01", db, 1), SequenceFileName("sql01", db)} {
			if strings.ContainsRune(name, r) {
				t.Errorf("file name %q of database %q keeps U+%04X", name, db, r)
			}
		}
	}
}

// Printable leaves ordinary names (any language, spaces, quotes, brackets)
// as they are and quotes, with the character escaped, a name holding one
// that would break or reorder a displayed line.
func TestPrintable(t *testing.T) {
	for _, n := range []string{"Sales", "Sales DB", `O'Brien "x"`, "[a]", "販売", "Zürich"} {
		if got := Printable(n); got != n {
			t.Errorf("Printable(%q) = %q, want it unchanged", n, got)
		}
	}
	for n, want := range map[string]string{
		"Sales\nOK": `"Sales\nOK"`, "Sa\u202eles": `"Sa\u202eles"`, "a\u2028b": `"a\u2028b"`, "x\u0085y": `"x\u0085y"`,
	} {
		if got := Printable(n); got != want {
			t.Errorf("Printable(%q) = %s, want %s", n, got, want)
		}
	}
}

// TestParseRefusesSequencesAboveMaxSequence: a name with a number wider than
// any cycle hands out (tsql.MaxSequence, 14 digits) is not a set of ours:
// it never counts for the next number nor for retention, and WideSequence
// recognises it, so that it can be reported.
func TestParseRefusesSequencesAboveMaxSequence(t *testing.T) {
	widest := StripeFileName("sql01", "Sales", MaxSequence, 1, 1)
	if p, ok := ParseStripeFileName(widest); !ok || p.Sequence != MaxSequence {
		t.Fatalf("ParseStripeFileName(%q) = %+v, %v; want sequence %d", widest, p, ok, MaxSequence)
	}
	if p, ok := ParseManifestFileName(ManifestFileName("sql01", "Sales", MaxSequence)); !ok || p.Sequence != MaxSequence {
		t.Fatalf("ParseManifestFileName of the widest number = %+v, %v", p, ok)
	}
	owner := OwnerOf("sql01", "Sales")
	for _, n := range []string{owner + "_999999999999999999_1of1.bak", owner + "_100000000000000_1of1.bak",
		owner + "_999999999999999999.manifest.json", owner + "_000000000000042_1of1.bak"} {
		if p, ok := ParseStripeFileName(n); ok {
			t.Errorf("ParseStripeFileName(%q) accepted: %+v", n, p)
		}
		if p, ok := ParseManifestFileName(n); ok {
			t.Errorf("ParseManifestFileName(%q) accepted: %+v", n, p)
		}
		p, ok := WideSequence(n)
		if !ok || p.Owner() != owner {
			t.Errorf("WideSequence(%q) = %+v, %v; want a name of %s", n, p, ok, owner)
		}
	}
	for _, n := range []string{widest, owner + "_00000042.manifest.json", "notes.txt", owner + "_1234x678901234567_1of1.bak"} {
		if p, ok := WideSequence(n); ok {
			t.Errorf("WideSequence(%q) = %+v, want false", n, p)
		}
	}
	if n, ok := ParseBackupSetName("backupcycle seq 999999999999999999"); ok {
		t.Errorf("ParseBackupSetName of 18 digits = %d, want refused", n)
	}
}

func TestMaxSequenceDigits(t *testing.T) {
	if n := len(strconv.FormatInt(MaxSequence, 10)); n != maxSeqDigits {
		t.Fatalf("MaxSequence has %d digits, the parsers accept %d", n, maxSeqDigits)
	}
}
