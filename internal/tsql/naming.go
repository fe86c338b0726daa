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
//	stripe:   <inst>@<db>_<seq:08d>_<i>of<n>.bak    e.g. sql01@Sales_00000042_3of8.bak
//	manifest: <inst>@<db>_<seq:08d>.manifest.json   e.g. sql01@Sales_00000042.manifest.json
//
// Every name is keyed by (instance, database): the same database name on two
// SQL instances sharing a backup server never shares a file. <inst> is
// InstancePart(the instance's configuration name), <db> is
// FileNamePart(database): both stay recognisable; only what Windows forbids in
// a file name is mapped (and '@' in the instance part, which separates the
// two). Names without the '@' separator (written by builds before the
// instance was part of the name) are not recognised, so nothing ever deletes
// or overwrites them.

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
	s := escapeName(db)
	if utf8.RuneCountInString(s) > maxFileNamePart {
		sum := sha256.Sum256([]byte(db))
		s = string([]rune(s)[:150]) + "~" + hex.EncodeToString(sum[:4])
	}
	return s
}

// escapeName percent-encodes what Windows forbids in file names, and '%'.
func escapeName(name string) string {
	var b strings.Builder
	for _, r := range name {
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
	return b.String()
}

// maxInstancePart bounds the instance part of file names.
const maxInstancePart = 64

// InstancePart maps an instance's configuration name to the part used in
// file names: as FileNamePart, and '@' is percent-encoded too (it separates
// the instance from the database). Longer than 64 characters: cut to 54 and
// suffixed with `~` and 8 hex digits of the name's SHA-256.
func InstancePart(instance string) string {
	s := strings.ReplaceAll(escapeName(instance), "@", "%40")
	if utf8.RuneCountInString(s) > maxInstancePart {
		sum := sha256.Sum256([]byte(instance))
		s = string([]rune(s)[:maxInstancePart-10]) + "~" + hex.EncodeToString(sum[:4])
	}
	return s
}

// DBPrefix is the start shared by every file of one database of one
// instance: <inst>@<db>_. Listing by it never matches another instance's
// files, nor another database whose name merely starts the same way (the
// sequence digits follow the "_").
func DBPrefix(instance, db string) string {
	return InstancePart(instance) + "@" + FileNamePart(db) + "_"
}

// SetPrefix is the start shared by every file of one backup set:
// <inst>@<db>_<seq:08d>. The trailing "_" or "." that follows it separates it
// from sets of longer sequence numbers.
func SetPrefix(instance, db string, seq int64) string {
	return fmt.Sprintf("%s%08d", DBPrefix(instance, db), seq)
}

// StripeFileName is the name of stripe i (1-based) of n of backup set seq.
func StripeFileName(instance, db string, seq int64, i, n int) string {
	return fmt.Sprintf("%s_%dof%d.bak", SetPrefix(instance, db, seq), i, n)
}

// ManifestFileName is the name of the manifest of backup set seq.
func ManifestFileName(instance, db string, seq int64) string {
	return SetPrefix(instance, db, seq) + ".manifest.json"
}

// ParsedName is what a stripe or manifest file name says about its set.
// InstancePart and DBPart are the mapped forms (InstancePart, FileNamePart),
// not the raw names.
type ParsedName struct {
	InstancePart string
	DBPart       string
	Sequence     int64
	Index        int // 1-based stripe number; 0 for a manifest
	Count        int // stripes in the set; 0 for a manifest
}

// Owner is "<inst>@<db>" of the name: equal for every file of one
// (instance, database).
func (p ParsedName) Owner() string { return p.InstancePart + "@" + p.DBPart }

// OwnerOf is ParsedName.Owner for raw names.
func OwnerOf(instance, db string) string { return InstancePart(instance) + "@" + FileNamePart(db) }

// ParseStripeFileName recognises names made by StripeFileName:
// <instpart>@<dbpart>_<8 to 18 digits>_<i>of<n>.bak with 1 <= i <= n. (Hand-written
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
	inst, db, seq, ok := splitSeq(rest[:u])
	if !ok {
		return ParsedName{}, false
	}
	return ParsedName{InstancePart: inst, DBPart: db, Sequence: seq, Index: int(i), Count: int(n)}, true
}

// ParseManifestFileName recognises names made by ManifestFileName:
// <instpart>@<dbpart>_<8 to 18 digits>.manifest.json.
func ParseManifestFileName(name string) (ParsedName, bool) {
	rest, ok := strings.CutSuffix(name, ".manifest.json")
	if !ok {
		return ParsedName{}, false
	}
	inst, db, seq, ok := splitSeq(rest)
	if !ok {
		return ParsedName{}, false
	}
	return ParsedName{InstancePart: inst, DBPart: db, Sequence: seq}, true
}

// splitSeq splits "<instpart>@<dbpart>_<8..18 digits>": the sequence at the
// last underscore, the instance at the first '@' (InstancePart encodes '@').
func splitSeq(s string) (string, string, int64, bool) {
	u := strings.LastIndexByte(s, '_')
	if u < 1 {
		return "", "", 0, false
	}
	seq, ok := digits(s[u+1:], 8, 18)
	if !ok {
		return "", "", 0, false
	}
	inst, db, ok := strings.Cut(s[:u], "@")
	if !ok || inst == "" || db == "" {
		return "", "", 0, false
	}
	return inst, db, seq, true
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
