package tsql

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
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

// maxFileNamePart bounds the database part, in UTF-8 bytes, so that the
// longest stripe, manifest or sequence file name stays within the 255 limit
// of a path component (see MaxFileNameLen).
const maxFileNamePart = 160

// FileNamePart maps a database name to the part used in file names.
//
// Characters Windows forbids in file names (< > : " / \ | ? * and control
// characters U+0000-U+001F, U+007F) and '%' itself are percent-encoded as %XX
// (UTF-8 bytes, upper-case hex), everything else (spaces, brackets, quotes,
// semicolons, non-ASCII letters) is kept. The mapping is injective, so two
// databases never share file names, and readable: `Sales]; DROP DATABASE x--`
// stays as is, `a/b` becomes `a%2Fb`. A result longer than 160 bytes is cut
// to at most 150 (at a character boundary) and suffixed with `~` and 8 hex
// digits of the name's SHA-256: bytes, not characters, because a Linux file
// system behind a Samba share counts its 255 in bytes (ASCII names are the
// same either way). Names are compared byte for byte: on case-insensitive
// shares, databases differing only in case must not share a directory
// (configure one directory per SQL instance).
func FileNamePart(db string) string {
	s := escapeName(db)
	if len(s) > maxFileNamePart {
		sum := sha256.Sum256([]byte(db))
		s = cutBytes(s, maxFileNamePart-10) + "~" + hex.EncodeToString(sum[:4])
	}
	return s
}

// cutBytes is the longest prefix of s of at most n bytes that ends at a
// character boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
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

// SequenceHistory returns the query for the names of the newest full backup
// sets of db taken on the instance it runs on: rows (name nvarchar(128)),
// newest first, at most 100. `sequence: catalog` reads the highest
// BackupSetName in it as a floor, so its numbers go on even when every
// backup server lost its sets. msdb.dbo.backupset has "a row for each
// backup set ... from a single, successful backup operation"; rows that a
// RESTORE copied from another server's media keep that server's server_name
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/backupset-transact-sql).
// Reading msdb writes nothing to the source database.
func SequenceHistory(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("backup history lookup: %w", err)
	}
	return "SELECT TOP (100) bs.name FROM msdb.dbo.backupset AS bs " +
		"WHERE bs.database_name = @p1 AND bs.type = 'D' AND bs.server_name = @@SERVERNAME AND bs.name LIKE @p2 " +
		"ORDER BY bs.backup_set_id DESC", []any{db, backupSetNamePrefix + "%"}, nil
}

// backupSetNamePrefix starts every BackupSetName.
const backupSetNamePrefix = "backupcycle seq "

// ParseBackupSetName is the sequence number of a BackupSetName; false for
// any other name.
func ParseBackupSetName(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, backupSetNamePrefix)
	if !ok {
		return 0, false
	}
	return digits(rest, 8, 18)
}

// SequenceFileName is the file that `sequence: catalog` keeps beside the
// manifests of (instance, db): <inst>@<db>.sequence.json, the highest number
// handed out. It does not start with DBPrefix, so no listing of sets ever
// meets it, and retention, which touches only names it parses, leaves it.
func SequenceFileName(instance, db string) string {
	return OwnerOf(instance, db) + ".sequence.json"
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
	return ShortName(db, MaxIdentLen-len(VerifySuffix)) + VerifySuffix
}

// ShortName fits name into max UTF-16 code units (SQL Server's and
// Windows' count): name itself when it fits, else its longest prefix that
// leaves room for `~` and 8 hex digits of its SHA-256, which keep two long
// names sharing a prefix apart. max below 10 leaves only the hash part.
func ShortName(name string, max int) string {
	if utf16Len(name) <= max {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	tail := "~" + hex.EncodeToString(sum[:4])
	return cutUnits(name, max-len(tail), -1) + tail
}

// LoginSafeName is ShortName(name, max) for a name that is LoginSafe;
// otherwise the characters outside the BMP become "_" and the hash of the
// real name is always added, so two names that differ only in them stay
// apart.
func LoginSafeName(name string, max int) string {
	if LoginSafe(name) {
		return ShortName(name, max)
	}
	safe := strings.Map(func(r rune) rune {
		if r > 0xFFFF {
			return '_'
		}
		return r
	}, name)
	sum := sha256.Sum256([]byte(name))
	tail := "~" + hex.EncodeToString(sum[:4])
	return cutUnits(safe, max-len(tail), -1) + tail
}

// cutUnits is the longest prefix of s of at most units UTF-16 code units
// and, when bytes >= 0, at most that many UTF-8 bytes.
func cutUnits(s string, units, bytes int) string {
	n, end := 0, 0
	for i, r := range s {
		w := utf16.RuneLen(r)
		if n+w > units || (bytes >= 0 && i+utf8.RuneLen(r) > bytes) {
			break
		}
		n += w
		end = i + utf8.RuneLen(r)
	}
	return s[:end]
}

// Limits on the names the product derives. Each is checked when the
// configuration is loaded and by `starter plan`, with the widest values a
// cycle can produce, so a name over a limit is refused before any SQL runs
// rather than failing a cycle after its BACKUP and copy.
const (
	// MaxFileNameLen is the longest file name (one path component).
	// Windows: "each [component] up to the value returned in the
	// lpMaximumComponentLength parameter of the GetVolumeInformation
	// function (this value is commonly 255 characters)"
	// (https://learn.microsoft.com/en-us/windows/win32/fileio/maximum-file-path-limitation);
	// Linux file systems behind Samba count the same 255 in bytes
	// (NAME_MAX). Names are measured in UTF-8 bytes, which is never less
	// than UTF-16 code units, so a name within it fits both.
	MaxFileNameLen = 255
	// MaxPath is the longest path SQL Server is given for a backup device or
	// a restored file: MAX_PATH is 260 characters including the terminating
	// NUL (same page), and msdb.dbo.backupmediafamily.physical_device_name
	// is nvarchar(260)
	// (https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/backupmediafamily-transact-sql).
	MaxPath = 259
	// MaxSequence is the widest sequence number the checks assume: 14
	// digits, a `sequence: utc` number (yyyymmddhhmmss); table and catalog
	// numbers count cycles and stay far below. AllocateSequence refuses
	// anything above it.
	MaxSequence int64 = 99_999_999_999_999
)

// ErrNameTooLong is wrapped by every LimitError.
var ErrNameTooLong = errors.New("name too long")

// LimitError is a derived name over one of the limits above.
type LimitError struct {
	What  string // e.g. "verification database name", "stripe path"
	Name  string
	Len   int
	Limit int
	Unit  string // "characters" (UTF-16 code units) or "bytes" (UTF-8)
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s %q is %d %s, the limit is %d", e.What, e.Name, e.Len, e.Unit, e.Limit)
}

func (e *LimitError) Unwrap() error { return ErrNameTooLong }

// CheckIdentLen is a LimitError when name is longer than a SQL Server
// identifier may be (128 UTF-16 code units).
func CheckIdentLen(what, name string) *LimitError {
	if n := utf16Len(name); n > MaxIdentLen {
		return &LimitError{What: what, Name: name, Len: n, Limit: MaxIdentLen, Unit: "characters"}
	}
	return nil
}

// LoginSafe reports whether a database name can be sent as the database of
// a login: go-mssqldb (v1.11) writes the LOGIN7 database length in runes,
// not UTF-16 code units, so a name with a character outside the Basic
// Multilingual Plane (two code units) arrives cut short and names another
// database. internal/mssql therefore enters such a database with USE after
// a login in master.
func LoginSafe(name string) bool {
	for _, r := range name {
		if r > 0xFFFF {
			return false
		}
	}
	return true
}

// CheckFileName is a LimitError when name is longer than MaxFileNameLen bytes.
func CheckFileName(what, name string) *LimitError {
	if len(name) > MaxFileNameLen {
		return &LimitError{What: what, Name: name, Len: len(name), Limit: MaxFileNameLen, Unit: "bytes"}
	}
	return nil
}

// CheckPath is a LimitError when path is longer than MaxPath UTF-16 code
// units.
func CheckPath(what, path string) *LimitError {
	if n := utf16Len(path); n > MaxPath {
		return &LimitError{What: what, Name: path, Len: n, Limit: MaxPath, Unit: "characters"}
	}
	return nil
}

// CheckSetNames checks every name a set of (instance, db) gets, at its
// widest (sequence MaxSequence, stripe n of n): the stripe, manifest and
// sequence file names, and the stripe paths in each of dirs (the UNC paths
// SQL Server writes the stripes to or reads them from). stripes 0 means
// up to MaxStripes.
func CheckSetNames(instance, db string, stripes int, dirs []string) []*LimitError {
	if stripes <= 0 || stripes > MaxStripes {
		stripes = MaxStripes
	}
	stripe := StripeFileName(instance, db, MaxSequence, stripes, stripes)
	var out []*LimitError
	add := func(e *LimitError) {
		if e != nil {
			out = append(out, e)
		}
	}
	add(CheckFileName("stripe file name", stripe))
	add(CheckFileName("manifest file name", ManifestFileName(instance, db, MaxSequence)))
	add(CheckFileName("sequence file name", SequenceFileName(instance, db)))
	for _, d := range dirs {
		add(CheckPath("stripe path", JoinPath(d, stripe)))
	}
	return out
}
