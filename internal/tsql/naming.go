package tsql

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// File naming is defined here once; internal/catalog calls these functions.
//
//	stripe:   <inst>@<db>_<seq:08d>_<i>of<n>.bak    e.g. sql01@sales_00000042_3of8.bak
//	manifest: <inst>@<db>_<seq:08d>.manifest.json   e.g. sql01@Sales~1a2b3c4d_00000042.manifest.json
//
// Every name is keyed by (instance, database): the same database name on two
// SQL instances sharing a backup server never shares a file. <inst> is
// InstancePart(the instance's configuration name), <db> is
// FileNamePart(database, as sys.databases spells it). Both stay
// recognisable; what Windows forbids in a file name and what would break or
// reorder a line where the name is shown is percent-encoded (and '@' in the
// instance part, which separates the two).
//
// Case. A backup share on Windows, or on Samba for SMB clients such as SQL
// Server (its default "case sensitive = auto"), matches file names
// case-insensitively, while a worker reading the same directory locally
// (location: file:///srv/backup) may not. Two databases of a case-sensitive
// instance, Sales and sales, must therefore never get names that differ only
// in case: SQL Server's BACKUP ... WITH FORMAT to sql01@sales_..._1of8.bak
// would open and overwrite sql01@Sales_..._1of8.bak, a file the worker never
// saw when it checked that the number was free. So a part is used as it is
// only when the name consists of ASCII characters without capital letters
// (sales, sql01, dba_2024); any other name gets `~` and 8 hex digits of the
// SHA-256 of its exact bytes (Sales~1a2b3c4d, SALES~9f0e8d7c). '~' itself is
// percent-encoded, so it only ever introduces that hash; two names whose
// parts are equal ignoring case are therefore equal, whatever case mapping
// the file server uses (the rule needs no Unicode case tables, so it never
// changes between builds).
//
// Sets written before this naming (manifests without "naming", "legacy") keep
// their names, which used the names byte for byte: LegacyNamesOf gives
// them, and every listing recognises both namings (AllNamesOf), so such
// sets are still found by retention, status, sequence allocation and
// resume, and never written over. Names without the '@' separator (written
// by builds before the instance was part of the name) are not recognised,
// so nothing ever deletes or overwrites them.

// maxFileNamePart bounds the database part, in UTF-8 bytes, so that the
// longest stripe, manifest or sequence file name stays within the 255 limit
// of a path component (see MaxFileNameLen).
const maxFileNamePart = 160

// FileNamePart maps a database name to the part used in file names.
//
// Characters Windows forbids in file names (< > : " / \ | ? * and control
// characters), the invisible characters that break or reorder a displayed
// line (invisible), '%' and '~' are percent-encoded as %XX (UTF-8 bytes,
// upper-case hex), everything else (spaces, brackets, quotes, semicolons,
// non-ASCII letters) is kept: `Sales]; DROP DATABASE x--` stays
// recognisable, `a/b` becomes `a%2Fb`. A name that is not ASCII without
// capitals (see the case rule above), or whose encoding is longer than 160
// bytes, is cut to at most 150 bytes (at a character boundary) and suffixed
// with `~` and 8 hex digits of the name's SHA-256: bytes, not characters,
// because a Linux file system behind a Samba share counts its 255 in bytes.
// The mapping is injective even ignoring case, so two databases never share
// file names on a case-insensitive share.
func FileNamePart(db string) string {
	return caseSafe(db, escapeName(db, true, true), maxFileNamePart)
}

// LegacyFileNamePart is FileNamePart as sets written before were named:
// the name byte for byte (only what Windows forbids, C0 controls and '%'
// encoded), a hash only for names over 160 bytes.
func LegacyFileNamePart(db string) string {
	return capped(db, escapeName(db, false, false))
}

// restoreNamePart names the files a restore creates (Moves): as
// LegacyFileNamePart, with the invisible characters escaped too. They are
// the verification instance's own files, named after its databases, not
// files of a shared backup directory: a case-sensitive verification
// instance's Sales_verify and sales_verify are its own two databases.
func restoreNamePart(name string) string {
	return capped(name, escapeName(name, true, false))
}

// capped is escaped (the encoding of name), or, over 160 bytes, cut to 150
// with `~` and the hash of name.
func capped(name, escaped string) string {
	if len(escaped) > maxFileNamePart {
		return cutBytes(escaped, maxFileNamePart-10) + "~" + hash8(name)
	}
	return escaped
}

// caseSafe is escaped (the encoding of name) when name is ASCII without
// capitals and escaped is at most max bytes; otherwise escaped cut to max-10
// bytes and suffixed with `~` and the hash of name.
func caseSafe(name, escaped string, max int) string {
	if len(escaped) <= max && lowerASCII(name) {
		return escaped
	}
	return cutBytes(escaped, max-10) + "~" + hash8(name)
}

// lowerASCII reports whether s consists of ASCII characters other than the
// capital letters A-Z.
func lowerASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// hash8 is 8 hex digits of the SHA-256 of s.
func hash8(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
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

// invisible reports the characters that are not shown as themselves where a
// name is displayed, and so could make one name read as another or forge a
// line of output: C0 and C1 controls and DEL, the line and paragraph
// separators U+2028 and U+2029, the bidirectional formatting characters
// (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069; U+202E
// RIGHT-TO-LEFT OVERRIDE shows the rest of a name reversed: "Unicode
// Bidirectional Algorithm", UAX #9), and the zero-width characters U+200B,
// U+200C, U+200D, U+2060 and U+FEFF. A fixed list, so that file names never
// change with the Unicode tables of a Go release.
func invisible(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, r >= 0x200b && r <= 0x200f, r >= 0x2028 && r <= 0x202e,
		r == 0x2060, r >= 0x2066 && r <= 0x2069, r == 0xfeff:
		return true
	}
	return false
}

// Printable is a name as it is shown to people (a terminal, a text report,
// the Web UI): the name itself when it holds no invisible character, else
// quoted with those characters escaped ("Sales\nOK" is shown as
// "\"Sales\\nOK\""), so that no database name can print a line that reads
// as another database's, nor show the rest of a line reversed. JSON output
// escapes them already.
func Printable(name string) string {
	if !strings.ContainsFunc(name, invisible) {
		return name
	}
	return strconv.Quote(name)
}

// escapeName percent-encodes what Windows forbids in file names, C0
// controls, DEL and '%'; with visible also every invisible character, with
// tilde '~' (which introduces the hash of case-safe names).
func escapeName(name string, visible, tilde bool) string {
	var b strings.Builder
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(`<>:"/\|?*%`, r) || visible && invisible(r) || tilde && r == '~' {
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
// file names: as FileNamePart, with '@' percent-encoded too (it separates
// the instance from the database), at most 64 bytes.
func InstancePart(instance string) string {
	return caseSafe(instance, strings.ReplaceAll(escapeName(instance, true, true), "@", "%40"), maxInstancePart)
}

// LegacyInstancePart is InstancePart as sets written before were named:
// longer than 64 characters, cut to 54 and suffixed with `~` and 8 hex
// digits of the name's SHA-256.
func LegacyInstancePart(instance string) string {
	s := strings.ReplaceAll(escapeName(instance, false, false), "@", "%40")
	if utf8.RuneCountInString(s) > maxInstancePart {
		s = string([]rune(s)[:maxInstancePart-10]) + "~" + hash8(instance)
	}
	return s
}

// SetNames are the file names of the sets of one (instance, database) in
// one naming: NamesOf (every set written now) or LegacyNamesOf (sets of
// manifests without "naming").
type SetNames struct {
	Instance, Database string // raw names
	owner              string // <inst>@<db>
	Legacy             bool
}

// NamesOf is the naming of the sets written now.
func NamesOf(instance, db string) SetNames {
	return SetNames{Instance: instance, Database: db, owner: InstancePart(instance) + "@" + FileNamePart(db)}
}

// LegacyNamesOf is the naming of sets whose manifests record no "naming".
func LegacyNamesOf(instance, db string) SetNames {
	return SetNames{Instance: instance, Database: db, owner: LegacyInstancePart(instance) + "@" + LegacyFileNamePart(db), Legacy: true}
}

// AllNamesOf are the namings a set of (instance, db) may have: NamesOf,
// and LegacyNamesOf when it differs (for most lower-case names it does
// not).
func AllNamesOf(instance, db string) []SetNames {
	cur, old := NamesOf(instance, db), LegacyNamesOf(instance, db)
	if old.owner == cur.owner {
		return []SetNames{cur}
	}
	return []SetNames{cur, old}
}

// Owner is "<inst>@<db>": ParsedName.Owner of every file of these sets.
func (n SetNames) Owner() string { return n.owner }

// DBPrefix is the start shared by every file of the sets: <inst>@<db>_.
// Listing by it never matches another instance's files; it may match those
// of a database whose name merely starts the same way (Sales_2024 for
// Sales), so listings parse each name and compare its owner.
func (n SetNames) DBPrefix() string { return n.owner + "_" }

// SetPrefix is the start shared by every file of backup set seq:
// <inst>@<db>_<seq:08d>. The trailing "_" or "." that follows it separates
// it from sets of longer sequence numbers.
func (n SetNames) SetPrefix(seq int64) string { return fmt.Sprintf("%s%08d", n.DBPrefix(), seq) }

// Stripe is the name of stripe i (1-based) of n of backup set seq.
func (n SetNames) Stripe(seq int64, i, count int) string {
	return fmt.Sprintf("%s_%dof%d.bak", n.SetPrefix(seq), i, count)
}

// Manifest is the name of the manifest of backup set seq.
func (n SetNames) Manifest(seq int64) string { return n.SetPrefix(seq) + ".manifest.json" }

// SequenceFile is the file `sequence: catalog` keeps beside the manifests:
// <inst>@<db>.sequence.json (see SequenceFileName).
func (n SetNames) SequenceFile() string { return n.owner + ".sequence.json" }

// DBPrefix is NamesOf(instance, db).DBPrefix().
func DBPrefix(instance, db string) string { return NamesOf(instance, db).DBPrefix() }

// SetPrefix is NamesOf(instance, db).SetPrefix(seq).
func SetPrefix(instance, db string, seq int64) string { return NamesOf(instance, db).SetPrefix(seq) }

// StripeFileName is the name of stripe i (1-based) of n of backup set seq.
func StripeFileName(instance, db string, seq int64, i, n int) string {
	return NamesOf(instance, db).Stripe(seq, i, n)
}

// ManifestFileName is the name of the manifest of backup set seq.
func ManifestFileName(instance, db string, seq int64) string {
	return NamesOf(instance, db).Manifest(seq)
}

// ParsedName is what a stripe or manifest file name says about its set.
// InstancePart and DBPart are the mapped forms (InstancePart, FileNamePart,
// or their legacy forms), not the raw names.
type ParsedName struct {
	InstancePart string
	DBPart       string
	Sequence     int64
	Index        int // 1-based stripe number; 0 for a manifest
	Count        int // stripes in the set; 0 for a manifest
}

// Owner is "<inst>@<db>" of the name: equal for every file of one
// (instance, database) in one naming.
func (p ParsedName) Owner() string { return p.InstancePart + "@" + p.DBPart }

// OwnerOf is ParsedName.Owner of the sets written now of (instance, db).
func OwnerOf(instance, db string) string { return NamesOf(instance, db).Owner() }

// NamesFor is the naming of (instance, db) whose owner is p's, if any.
func NamesFor(p ParsedName, instance, db string) (SetNames, bool) {
	for _, n := range AllNamesOf(instance, db) {
		if p.Owner() == n.Owner() {
			return n, true
		}
	}
	return SetNames{}, false
}

// ParseStripeFileName recognises names made by StripeFileName:
// <instpart>@<dbpart>_<8 to 14 digits>_<i>of<n>.bak with 1 <= i <= n. A
// wider number is no cycle's (MaxSequence): see WideSequence. (Hand-written
// rather than a regexp: retention parses every file of every share.)
func ParseStripeFileName(name string) (ParsedName, bool) {
	p, seq, ok := splitStripe(name)
	if !ok || len(seq) > maxSeqDigits {
		return ParsedName{}, false
	}
	p.Sequence, _ = digits(seq, minSeqDigits, maxSeqDigits)
	return p, true
}

// ParseManifestFileName recognises names made by ManifestFileName:
// <instpart>@<dbpart>_<8 to 14 digits>.manifest.json.
func ParseManifestFileName(name string) (ParsedName, bool) {
	p, seq, ok := splitManifest(name)
	if !ok || len(seq) > maxSeqDigits {
		return ParsedName{}, false
	}
	p.Sequence, _ = digits(seq, minSeqDigits, maxSeqDigits)
	return p, true
}

// WideSequence recognises a stripe or manifest name of the product's shape
// whose number has more digits than MaxSequence: no cycle handed it out
// (AllocateSequence refuses it), so the parsers above do not recognise it
// and nothing counts, resumes or deletes it; callers report it. Sequence is
// 0 (the number may not even fit an int64).
func WideSequence(name string) (ParsedName, bool) {
	p, seq, ok := splitStripe(name)
	if !ok {
		p, seq, ok = splitManifest(name)
	}
	if !ok || len(seq) <= maxSeqDigits {
		return ParsedName{}, false
	}
	return p, true
}

// minSeqDigits and maxSeqDigits bound the number in a set's file names:
// %08d, and the digits of MaxSequence.
const minSeqDigits, maxSeqDigits = 8, 14

// splitStripe splits a stripe name into its owner, index and count, and the
// digits of its sequence (at least 8, unbounded).
func splitStripe(name string) (ParsedName, string, bool) {
	rest, ok := strings.CutSuffix(name, ".bak")
	if !ok {
		return ParsedName{}, "", false
	}
	u := strings.LastIndexByte(rest, '_')
	if u < 0 {
		return ParsedName{}, "", false
	}
	is, ns, ok := strings.Cut(rest[u+1:], "of")
	i, okI := digits(is, 1, 9)
	n, okN := digits(ns, 1, 9)
	if !ok || !okI || !okN || i < 1 || n < 1 || i > n {
		return ParsedName{}, "", false
	}
	inst, db, seq, ok := splitSeq(rest[:u])
	if !ok {
		return ParsedName{}, "", false
	}
	return ParsedName{InstancePart: inst, DBPart: db, Index: int(i), Count: int(n)}, seq, true
}

// splitManifest is splitStripe for a manifest name.
func splitManifest(name string) (ParsedName, string, bool) {
	rest, ok := strings.CutSuffix(name, ".manifest.json")
	if !ok {
		return ParsedName{}, "", false
	}
	inst, db, seq, ok := splitSeq(rest)
	if !ok {
		return ParsedName{}, "", false
	}
	return ParsedName{InstancePart: inst, DBPart: db}, seq, true
}

// splitSeq splits "<instpart>@<dbpart>_<8 or more digits>": the sequence at
// the last underscore, the instance at the first '@' (InstancePart encodes
// '@').
func splitSeq(s string) (string, string, string, bool) {
	u := strings.LastIndexByte(s, '_')
	if u < 1 {
		return "", "", "", false
	}
	seq := s[u+1:]
	if len(seq) < minSeqDigits || strings.ContainsFunc(seq, func(r rune) bool { return r < '0' || r > '9' }) {
		return "", "", "", false
	}
	inst, db, ok := strings.Cut(s[:u], "@")
	if !ok || inst == "" || db == "" {
		return "", "", "", false
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
	return digits(rest, minSeqDigits, maxSeqDigits)
}

// SequenceFileName is the file that `sequence: catalog` keeps beside the
// manifests of (instance, db): <inst>@<db>.sequence.json, the highest number
// handed out. It does not start with DBPrefix, so no listing of sets ever
// meets it, and retention, which touches only names it parses, leaves it.
func SequenceFileName(instance, db string) string {
	return NamesOf(instance, db).SequenceFile()
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
	// anything above it, and file names with more digits are no set of
	// the product's (WideSequence).
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
