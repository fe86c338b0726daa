package tsql

import (
	"fmt"
	"strings"
)

// Log chain file naming, beside the sets' (see naming.go):
//
//	log backup:   <inst>@<db>~log<chain:06d>_<n:08d>_<i>of<k>.trn   e.g. sql01@sales~log000003_00000042_1of2.trn
//	chain record: <inst>@<db>~log<chain:06d>_<part:04d>.chain.json   e.g. sql01@Sales~1a2b3c4d~log000003_0001.chain.json
//
// <inst>@<db> is the owner of the case-safe naming (NamesOf). FileNamePart
// writes '~' only before its 8-hex hash, at the end of the part, and
// InstancePart encodes '@'; so "~log" can follow no database part as
// part of it: no name of a chain starts with another database's DBPrefix
// (`<inst>@<db>_`), and no name of one database's chains is another's.
// The names end in ".trn" and ".chain.json", so no stripe parser (".bak")
// or manifest parser (".manifest.json") recognises them, and retention of
// sets, which touches only names it parses, never deletes them. Chains
// exist only in the case-safe naming: no legacy names. The widths keep the
// longest name within MaxFileNameLen wherever the set's names fit: 30
// bytes after the owner, as a stripe's "_<14 digits>_64of64.bak" takes.

// logMarker separates the owner from the chain fields.
const logMarker = "~log"

// Widths of the numbers in chain file names.
const (
	chainDigits   = 6
	logNumDigits  = 8
	partDigits    = 4
	MaxChainID    = 999_999    // chains of one database
	MaxLogNumber  = 99_999_999 // log backups of one chain: 190 years at one a minute
	MaxChainPart  = 9_999
	logSuffix     = ".trn"
	chainRecSuffx = ".chain.json"
)

// LogPrefix is the start of every file of the database's chains:
// <inst>@<db>~log.
func (n SetNames) LogPrefix() string { return n.owner + logMarker }

// ChainPrefix is the start of every file of chain id: <inst>@<db>~log<id:06d>_.
func (n SetNames) ChainPrefix(chain int64) string {
	return fmt.Sprintf("%s%0*d_", n.LogPrefix(), chainDigits, chain)
}

// LogBackupPrefix is the start of every file of log backup number of chain:
// ChainPrefix + <number:08d>_.
func (n SetNames) LogBackupPrefix(chain, number int64) string {
	return fmt.Sprintf("%s%0*d_", n.ChainPrefix(chain), logNumDigits, number)
}

// LogStripe is the name of file i (1-based) of k of log backup number of
// chain.
func (n SetNames) LogStripe(chain, number int64, i, k int) string {
	return fmt.Sprintf("%s%dof%d%s", n.LogBackupPrefix(chain, number), i, k, logSuffix)
}

// ChainRecord is the name of part `part` (1-based) of chain's record.
func (n SetNames) ChainRecord(chain int64, part int) string {
	return fmt.Sprintf("%s%0*d%s", n.ChainPrefix(chain), partDigits, part, chainRecSuffx)
}

// ChainRecordSuffix ends every chain record's name.
const ChainRecordSuffix = chainRecSuffx

// ParsedLogName is what a log backup file or chain record name says.
type ParsedLogName struct {
	Owner  string // <inst>@<db>
	Chain  int64
	Number int64 // log backup number; 0 for a chain record
	Index  int   // file i of Count; 0 for a chain record
	Count  int
	Part   int // chain record part; 0 for a log backup file
}

// ParseLogFileName recognises names made by LogStripe.
func ParseLogFileName(name string) (ParsedLogName, bool) {
	rest, ok := strings.CutSuffix(name, logSuffix)
	if !ok {
		return ParsedLogName{}, false
	}
	u := strings.LastIndexByte(rest, '_')
	if u < 0 {
		return ParsedLogName{}, false
	}
	is, ks, ok := strings.Cut(rest[u+1:], "of")
	i, okI := digits(is, 1, 2)
	k, okK := digits(ks, 1, 2)
	if !ok || !okI || !okK || i < 1 || i > k || k > MaxStripes {
		return ParsedLogName{}, false
	}
	rest = rest[:u]
	u = strings.LastIndexByte(rest, '_')
	if u < 0 {
		return ParsedLogName{}, false
	}
	num, ok := digits(rest[u+1:], logNumDigits, logNumDigits)
	if !ok || num < 1 {
		return ParsedLogName{}, false
	}
	owner, chain, ok := splitChain(rest[:u])
	if !ok {
		return ParsedLogName{}, false
	}
	return ParsedLogName{Owner: owner, Chain: chain, Number: num, Index: int(i), Count: int(k)}, true
}

// ParseChainRecordName recognises names made by ChainRecord.
func ParseChainRecordName(name string) (ParsedLogName, bool) {
	rest, ok := strings.CutSuffix(name, chainRecSuffx)
	if !ok {
		return ParsedLogName{}, false
	}
	u := strings.LastIndexByte(rest, '_')
	if u < 0 {
		return ParsedLogName{}, false
	}
	part, ok := digits(rest[u+1:], partDigits, partDigits)
	if !ok || part < 1 {
		return ParsedLogName{}, false
	}
	owner, chain, ok := splitChain(rest[:u])
	if !ok {
		return ParsedLogName{}, false
	}
	return ParsedLogName{Owner: owner, Chain: chain, Part: int(part)}, true
}

// splitChain splits "<owner>~log<chain:06d>".
func splitChain(s string) (string, int64, bool) {
	i := strings.LastIndex(s, logMarker)
	if i < 1 {
		return "", 0, false
	}
	chain, ok := digits(s[i+len(logMarker):], chainDigits, chainDigits)
	if !ok || chain < 1 {
		return "", 0, false
	}
	owner := s[:i]
	if inst, db, ok := strings.Cut(owner, "@"); !ok || inst == "" || db == "" {
		return "", 0, false
	}
	return owner, chain, true
}

// BackupLogName is the NAME = of log backup number of chain:
// "backupcycle log <chain:06d> <number:08d>". msdb's backupset.name and
// RESTORE HEADERONLY's BackupName return it, so a retried step recognises
// its own BACKUP LOG, and the product tells its own log backups in msdb
// from another tool's (ParseBackupLogName).
func BackupLogName(chain, number int64) string {
	return fmt.Sprintf("%s%0*d %0*d", backupLogNamePrefix, chainDigits, chain, logNumDigits, number)
}

const backupLogNamePrefix = "backupcycle log "

// ParseBackupLogName is the chain and number of a BackupLogName; false for
// any other name.
func ParseBackupLogName(name string) (chain, number int64, ok bool) {
	rest, ok := strings.CutPrefix(name, backupLogNamePrefix)
	if !ok {
		return 0, 0, false
	}
	cs, ns, ok := strings.Cut(rest, " ")
	c, okC := digits(cs, chainDigits, chainDigits)
	n, okN := digits(ns, logNumDigits, logNumDigits)
	if !ok || !okC || !okN {
		return 0, 0, false
	}
	return c, n, true
}

// CheckLogNames checks every name a chain of (instance, db) gets at its
// widest (the highest chain, log number and part, file k of k): the log
// file and chain record names, and the log paths in each of dirs.
func CheckLogNames(instance, db string, files int, dirs []string) []*LimitError {
	if files <= 0 || files > MaxStripes {
		files = MaxStripes
	}
	n := NamesOf(instance, db)
	stripe := n.LogStripe(MaxChainID, MaxLogNumber, files, files)
	var out []*LimitError
	add := func(e *LimitError) {
		if e != nil {
			out = append(out, e)
		}
	}
	add(CheckFileName("log backup file name", stripe))
	add(CheckFileName("log chain record name", n.ChainRecord(MaxChainID, MaxChainPart)))
	for _, d := range dirs {
		add(CheckPath("log backup path", JoinPath(d, stripe)))
	}
	return out
}

// LogProofRecord is the name of the database's proof record: what the
// product restored on the verification instance to prove its log chains
// (the standby copy, the point-in-time proofs). It ends in neither ".trn"
// nor ".chain.json", so no log or chain parser takes it.
func (n SetNames) LogProofRecord() string { return n.LogPrefix() + "proof.json" }

// DrillRecord is the name of the database's drill record: the recovery
// drills run of it (what each restored, the point reached, the measured
// time to recover). Like LogProofRecord, no log or chain parser takes it.
func (n SetNames) DrillRecord() string { return n.LogPrefix() + "drill.json" }
