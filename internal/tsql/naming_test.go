package tsql

import (
	"strings"
	"testing"
)

func TestFileNames(t *testing.T) {
	tests := []struct {
		inst, db      string
		seq           int64
		i, n          int
		stripe, manif string
	}{
		{"sql01", "Sales", 42, 3, 8, "sql01@Sales_00000042_3of8.bak", "sql01@Sales_00000042.manifest.json"},
		{"sql01", "Sales]; DROP DATABASE x--", 1, 1, 1, "sql01@Sales]; DROP DATABASE x--_00000001_1of1.bak", "sql01@Sales]; DROP DATABASE x--_00000001.manifest.json"},
		{"sql01", `a/b\c:d*e?f"g<h>i|j`, 7, 2, 2, "sql01@a%2Fb%5Cc%3Ad%2Ae%3Ff%22g%3Ch%3Ei%7Cj_00000007_2of2.bak", "sql01@a%2Fb%5Cc%3Ad%2Ae%3Ff%22g%3Ch%3Ei%7Cj_00000007.manifest.json"},
		{"sql01", "100%", 1, 1, 2, "sql01@100%25_00000001_1of2.bak", "sql01@100%25_00000001.manifest.json"},
		{"sql01", "tab\there", 1, 1, 2, "sql01@tab%09here_00000001_1of2.bak", "sql01@tab%09here_00000001.manifest.json"},
		{"sql01", "販売", 20261129192500, 1, 2, "sql01@販売_20261129192500_1of2.bak", "sql01@販売_20261129192500.manifest.json"},
	}
	for _, tt := range tests {
		if got := StripeFileName(tt.inst, tt.db, tt.seq, tt.i, tt.n); got != tt.stripe {
			t.Errorf("StripeFileName(%q) = %q, want %q", tt.db, got, tt.stripe)
		}
		if got := ManifestFileName(tt.inst, tt.db, tt.seq); got != tt.manif {
			t.Errorf("ManifestFileName(%q) = %q, want %q", tt.db, got, tt.manif)
		}
		p, ok := ParseStripeFileName(tt.stripe)
		if !ok || p.DBPart != FileNamePart(tt.db) || p.InstancePart != tt.inst || p.Sequence != tt.seq || p.Index != tt.i || p.Count != tt.n {
			t.Errorf("ParseStripeFileName(%q) = %+v, %v", tt.stripe, p, ok)
		}
		m, ok := ParseManifestFileName(tt.manif)
		if !ok || m.DBPart != FileNamePart(tt.db) || m.InstancePart != tt.inst || m.Sequence != tt.seq {
			t.Errorf("ParseManifestFileName(%q) = %+v, %v", tt.manif, m, ok)
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
	p, ok := ParseStripeFileName(StripeFileName("sql_01", "X_12345678", 5, 1, 2))
	if !ok || p.DBPart != "X_12345678" || p.InstancePart != "sql_01" || p.Sequence != 5 {
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
