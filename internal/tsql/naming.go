package tsql

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// File naming is defined here once; internal/catalog calls these functions.
//
//	stripe:   <db>_<seq:08d>_<i>of<n>.bak        e.g. Sales_00000042_3of8.bak
//	manifest: <db>_<seq:08d>.manifest.json       e.g. Sales_00000042.manifest.json
//
// <db> is FileNamePart(database): the name stays recognisable; only what
// Windows forbids in a file name is mapped.

// maxFileNamePart bounds the database part so that the longest stripe or
// manifest name stays well under the 255-character limit of a path component.
const maxFileNamePart = 160

// FileNamePart maps a database name to the part used in file names.
//
// Characters Windows forbids in file names (< > : " / \ | ? * and control
// characters U+0000-U+001F, U+007F) and '%' itself are percent-encoded as %XX
// (UTF-8 bytes, upper-case hex), everything else (spaces, brackets, quotes,
// semicolons, non-ASCII letters) is kept. The mapping is injective, so two
// databases never share file names, and readable: `Sales]; DROP DATABASE x--`
// stays as is, `a/b` becomes `a%2Fb`. A result longer than 160 characters is
// cut to 150 and suffixed with `~` and 8 hex digits of the name's SHA-256.
// Names are compared byte for byte: on case-insensitive shares, databases
// differing only in case must not share a directory (configure one directory
// per SQL instance).
func FileNamePart(db string) string {
	var b strings.Builder
	for _, r := range db {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(`<>:"/\|?*%`, r) {
			var buf [utf8.UTFMax]byte
			n := utf8.EncodeRune(buf[:], r)
			for _, c := range buf[:n] {
				fmt.Fprintf(&b, "%%%02X", c)
			}
			continue
		}
		b.WriteRune(r)
	}
	s := b.String()
	if utf8.RuneCountInString(s) > maxFileNamePart {
		sum := sha256.Sum256([]byte(db))
		s = string([]rune(s)[:150]) + "~" + hex.EncodeToString(sum[:4])
	}
	return s
}

// SetPrefix is the start shared by every file of one backup set:
// <db>_<seq:08d>. The trailing "_" or "." that follows it separates it from
// sets of longer sequence numbers.
func SetPrefix(db string, seq int64) string {
	return fmt.Sprintf("%s_%08d", FileNamePart(db), seq)
}

// StripeFileName is the name of stripe i (1-based) of n of backup set seq.
func StripeFileName(db string, seq int64, i, n int) string {
	return fmt.Sprintf("%s_%dof%d.bak", SetPrefix(db, seq), i, n)
}

// ManifestFileName is the name of the manifest of backup set seq.
func ManifestFileName(db string, seq int64) string {
	return SetPrefix(db, seq) + ".manifest.json"
}

// ParsedName is what a stripe or manifest file name says about its set.
// DBPart is the FileNamePart of the database, not the raw name.
type ParsedName struct {
	DBPart   string
	Sequence int64
	Index    int // 1-based stripe number; 0 for a manifest
	Count    int // stripes in the set; 0 for a manifest
}

// ParseStripeFileName recognises names made by StripeFileName:
// <dbpart>_<8 to 18 digits>_<i>of<n>.bak with 1 <= i <= n. (Hand-written
// rather than a regexp: retention parses every file of every share.)
func ParseStripeFileName(name string) (ParsedName, bool) {
	rest, ok := strings.CutSuffix(name, ".bak")
	if !ok {
		return ParsedName{}, false
	}
	u := strings.LastIndexByte(rest, '_')
	if u < 0 {
		return ParsedName{}, false
	}
	is, ns, ok := strings.Cut(rest[u+1:], "of")
	i, okI := digits(is, 1, 9)
	n, okN := digits(ns, 1, 9)
	if !ok || !okI || !okN || i < 1 || n < 1 || i > n {
		return ParsedName{}, false
	}
	db, seq, ok := splitSeq(rest[:u])
	if !ok {
		return ParsedName{}, false
	}
	return ParsedName{DBPart: db, Sequence: seq, Index: int(i), Count: int(n)}, true
}

// ParseManifestFileName recognises names made by ManifestFileName:
// <dbpart>_<8 to 18 digits>.manifest.json.
func ParseManifestFileName(name string) (ParsedName, bool) {
	rest, ok := strings.CutSuffix(name, ".manifest.json")
	if !ok {
		return ParsedName{}, false
	}
	db, seq, ok := splitSeq(rest)
	if !ok {
		return ParsedName{}, false
	}
	return ParsedName{DBPart: db, Sequence: seq}, true
}

// splitSeq splits "<dbpart>_<8..18 digits>" at its last underscore.
func splitSeq(s string) (string, int64, bool) {
	u := strings.LastIndexByte(s, '_')
	if u < 1 {
		return "", 0, false
	}
	seq, ok := digits(s[u+1:], 8, 18)
	if !ok {
		return "", 0, false
	}
	return s[:u], seq, true
}

// digits parses an unsigned decimal of minLen..maxLen ASCII digits.
func digits(s string, minLen, maxLen int) (int64, bool) {
	if len(s) < minLen || len(s) > maxLen {
		return 0, false
	}
	var v int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// BackupSetName is the NAME = of the backup set of sequence seq. RESTORE
// HEADERONLY returns it as BackupName, so a retried activity can recognise a
// BACKUP that finished while no worker was watching.
func BackupSetName(seq int64) string {
	return fmt.Sprintf("backupcycle seq %08d", seq)
}

// VerifySuffix is appended to a database name to name its restored copy.
const VerifySuffix = "_verify"

// VerifyDatabaseName names the verification copy of db: db + "_verify". When
// that would exceed 128 characters, db is cut and a hash of the full name is
// inserted (`<prefix>~<8 hex>_verify`), so two long names sharing a prefix
// still get different copies.
func VerifyDatabaseName(db string) string {
	if utf16Len(db)+len(VerifySuffix) <= MaxIdentLen {
		return db + VerifySuffix
	}
	sum := sha256.Sum256([]byte(db))
	tail := "~" + hex.EncodeToString(sum[:4]) + VerifySuffix
	var b strings.Builder
	n := 0
	for _, r := range db {
		w := 1
		if r > 0xFFFF {
			w = 2
		}
		if n+w+len(tail) > MaxIdentLen {
			break
		}
		b.WriteRune(r)
		n += w
	}
	return b.String() + tail
}
