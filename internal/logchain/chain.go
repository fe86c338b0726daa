package logchain

import (
	"errors"
	"fmt"
	"time"
)

// Full is a full database backup the chain can start a restore from: a set
// of the product's, as its manifest records it.
type Full struct {
	Sequence          int64  // the set's number
	BackupSetGUID     string // RESTORE HEADERONLY BackupSetGUID
	FirstLSN          LSN
	LastLSN           LSN // where a restore of the full leaves the copy
	CheckpointLSN     LSN
	DatabaseBackupLSN LSN
	Finish            time.Time // the instant the BACKUP finished (UTC)
	// CopyOnly: a COPY_ONLY full restores like any other and logs apply
	// after it; it just is no differential base ("Copy-only backups").
	CopyOnly bool
	Verified bool // the set is verified (restored, CHECKDB clean, sanity checked)
}

// File is one file of a log backup.
type File struct {
	Name   string
	Size   int64
	SHA256 string // lower-case hex
}

// ProofMode is how a log backup was proven: applied to a standby copy, or
// in the nightly restore of the previous verified full and its logs.
type ProofMode string

const (
	ProofStandby ProofMode = "standby"
	ProofNightly ProofMode = "nightly"
)

// Valid reports whether m is a known mode.
func (m ProofMode) Valid() bool { return m == ProofStandby || m == ProofNightly }

// Proof says a log backup was restored (RESTORE LOG succeeded) on the
// verification instance.
type Proof struct {
	At   time.Time // when it was applied (instant)
	Mode ProofMode
}

// Foreign is what msdb says of a log backup another tool took: the next log
// backup of the chain starts where it ended, so without its file the chain
// has a hole ("Apply transaction log backups": logs are applied "without
// any gaps in the log chain").
type Foreign struct {
	Tool string // msdb backupset.name (or description): how the tool names its backups
	User string // backupset.user_name
	Path string // backupmediafamily.physical_device_name
	// Adopted: the product copied the file into the chain (Log.Files, with
	// its hash): the chain goes on through it.
	Adopted bool
}

// Log is one log backup of the chain.
type Log struct {
	Number            int64 // 1, 2, ... in the chain
	FirstLSN          LSN   // first log record in the backup
	LastLSN           LSN   // the next log record after it: the backup holds [FirstLSN, LastLSN)
	DatabaseBackupLSN LSN
	Start, Finish     time.Time // instants (UTC) the BACKUP LOG started and finished
	Files             []File
	Servers           []string // backup servers holding every file, hash-checked
	Proven            *Proof
	Foreign           *Foreign
}

// Usable reports whether the log can be restored: its files are held (the
// product's own, or a foreign one adopted).
func (l Log) Usable() bool { return len(l.Files) > 0 && (l.Foreign == nil || l.Foreign.Adopted) }

// Contains reports whether the log holds the record at p, that is whether a
// copy standing at p is rolled forward by it: FirstLSN <= p < LastLSN. An
// empty log backup (FirstLSN = LastLSN) contains nothing.
func (l Log) Contains(p LSN) bool { return l.FirstLSN.Cmp(p) <= 0 && p.Less(l.LastLSN) }

// BreakReason is why a chain ended. A broken chain is followed by a new one,
// started with a full backup.
type BreakReason string

const (
	// BreakSimple: the database was found in the SIMPLE recovery model,
	// which has no log backups (BACKUP LOG fails with 4208).
	BreakSimple BreakReason = "simple_recovery"
	// BreakRecoveryModel: the recovery model was switched to SIMPLE and back
	// between two log backups: the log chain restarts only with the next
	// full or differential backup (BACKUP LOG fails with 4214 until then;
	// "View or change the recovery model of a database").
	BreakRecoveryModel BreakReason = "recovery_model_switch"
	// BreakForeign: another tool's log backup took part of the log, and its
	// file is not in the chain (not adopted).
	BreakForeign BreakReason = "foreign_log"
	// BreakGap: the next log backup does not start where the chain ended,
	// and no known backup explains it.
	BreakGap BreakReason = "gap"
)

// Valid reports whether r is a known reason.
func (r BreakReason) Valid() bool {
	switch r {
	case BreakSimple, BreakRecoveryModel, BreakForeign, BreakGap:
		return true
	}
	return false
}

// Break records why and when a chain ended.
type Break struct {
	Reason BreakReason
	Detail string    // what was seen: the error, the foreign backup, the gap
	At     time.Time // when it was detected
}

// BreakOf is the break a BACKUP LOG error number says happened: 4208 (the
// database is in SIMPLE: "The statement BACKUP LOG is not allowed while the
// recovery model is SIMPLE") and 4214 ("BACKUP LOG cannot be performed
// because there is no current database backup": switched to SIMPLE and back,
// or never backed up) ("Database Engine events and errors (4000 to 4999)",
// https://learn.microsoft.com/sql/relational-databases/errors-events/database-engine-events-and-errors-4000-to-4999;
// "MSSQLSERVER_4214"). Both need a full backup to start a new chain. Any
// other number is no break (false).
func BreakOf(errorNumber int32) (BreakReason, bool) {
	switch errorNumber {
	case 4208:
		return BreakSimple, true
	case 4214:
		return BreakRecoveryModel, true
	}
	return "", false
}

// Chain is one log chain of a database as the product holds it: the full
// backup that started it, the fulls taken while it went on (any of them
// can start a restore), its log backups in order, and, once it ended, why.
type Chain struct {
	ID    int64  // 1, 2, ... per database
	Fulls []Full // Fulls[0] started the chain; the others follow, oldest first
	// Logs by Number (from 1 up; a number whose BACKUP LOG failed is
	// missing, which is no hole: the next log starts where the last one
	// made ended).
	Logs  []Log
	Break *Break
}

// Base is the full that started the chain.
func (c *Chain) Base() Full { return c.Fulls[0] }

// ErrInvalidChain is wrapped by every Validate error.
var ErrInvalidChain = errors.New("invalid log chain")

// Validate checks the record's own consistency: a base, valid LSNs, each
// log's range in order, logs numbered from 1 up.
func (c *Chain) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: chain %d: "+format, append([]any{ErrInvalidChain, c.ID}, args...)...))
	}
	if c.ID < 1 {
		bad("chain numbers start at 1")
	}
	if len(c.Fulls) == 0 {
		bad("no full backup: every chain starts with one")
	}
	for i, f := range c.Fulls {
		for _, l := range []struct {
			n string
			v LSN
		}{{"first_lsn", f.FirstLSN}, {"last_lsn", f.LastLSN}, {"checkpoint_lsn", f.CheckpointLSN}} {
			if err := CheckLSN(fmt.Sprintf("full %d %s", f.Sequence, l.n), l.v); err != nil {
				bad("%v", err)
			}
		}
		if f.DatabaseBackupLSN != "" && !f.DatabaseBackupLSN.Valid() {
			bad("full %d database_backup_lsn %q is not an LSN", f.Sequence, f.DatabaseBackupLSN)
		}
		if f.BackupSetGUID == "" {
			bad("full %d has no backup set GUID", f.Sequence)
		}
		if i > 0 && f.LastLSN.Less(c.Fulls[i-1].LastLSN) {
			bad("full %d ends before full %d: fulls are listed oldest first", f.Sequence, c.Fulls[i-1].Sequence)
		}
	}
	for i, l := range c.Logs {
		if l.Number < 1 || i > 0 && l.Number <= c.Logs[i-1].Number {
			bad("log %d is listed at position %d: logs are numbered from 1 up, in order", l.Number, i+1)
		}
		if err := CheckLSN(fmt.Sprintf("log %d first_lsn", l.Number), l.FirstLSN); err != nil {
			bad("%v", err)
		}
		if err := CheckLSN(fmt.Sprintf("log %d last_lsn", l.Number), l.LastLSN); err != nil {
			bad("%v", err)
		}
		if l.FirstLSN.Valid() && l.LastLSN.Valid() && l.LastLSN.Less(l.FirstLSN) {
			bad("log %d ends (%s) before it begins (%s)", l.Number, l.LastLSN, l.FirstLSN)
		}
		if i > 0 && l.FirstLSN.Valid() && l.FirstLSN.Less(c.Logs[i-1].FirstLSN) {
			bad("log %d begins before log %d", l.Number, c.Logs[i-1].Number)
		}
		if l.Proven != nil && !l.Proven.Mode.Valid() {
			bad("log %d proven by unknown mode %q", l.Number, l.Proven.Mode)
		}
	}
	if c.Break != nil && !c.Break.Reason.Valid() {
		bad("break reason %q is unknown", c.Break.Reason)
	}
	return errors.Join(errs...)
}

// Gap is a hole in a chain: the copy stands at From and the next log it
// could take starts at To (or is not held at all).
type Gap struct {
	After  int64 // the last log before the gap; 0: right after a full
	Before int64 // the log that cannot be applied; 0: none (no log yet contains From)
	From   LSN   // where a restore stands
	To     LSN   // where the next held log begins ("" when Before is a foreign log not held)
	// Foreign is the log backup another tool took there, when that is
	// what the gap is.
	Foreign *Foreign
	// ForeignStart is when that foreign log backup started.
	ForeignStart time.Time
}

// Reason is BreakForeign for a foreign log not adopted, else BreakGap.
func (g Gap) Reason() BreakReason {
	if g.Foreign != nil {
		return BreakForeign
	}
	return BreakGap
}

// String names the gap for people: which logs, which LSNs, whose backup.
func (g Gap) String() string {
	after := fmt.Sprintf("log %d", g.After)
	if g.After == 0 {
		after = "the full backup"
	}
	if g.Foreign != nil {
		return fmt.Sprintf("after %s (LSN %s) log %d is a log backup by another tool (%s, user %s, %s, started %s) that is not in the chain; "+
			"the chain resumes with the next full backup, or set adopt_foreign_logs: true to copy such backups into it",
			after, g.From, g.Before, orUnknown(g.Foreign.Tool), orUnknown(g.Foreign.User), orUnknown(g.Foreign.Path), g.ForeignStart.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("gap after %s: the chain stands at LSN %s but log %d begins at LSN %s", after, g.From, g.Before, g.To)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// FirstAfter is the index in c.Logs of the first log to restore after full:
// the one that contains the full's LastLSN. ok is false when no log
// contains it: none taken yet (gap nil), or the logs skip it or the one
// that contains it is not held (gap names the hole). Logs that end at or
// before the full's LastLSN are "too early" for it (4326) and skipped.
func (c *Chain) FirstAfter(full Full) (i int, ok bool, gap *Gap) {
	p := full.LastLSN
	for i, l := range c.Logs {
		if !p.Less(l.LastLSN) {
			continue
		}
		if p.Less(l.FirstLSN) || !l.Usable() {
			return i, false, c.gapAt(i, 0, p)
		}
		return i, true, nil
	}
	return len(c.Logs), false, nil
}

// gapAt is the gap before c.Logs[i], the chain standing at p after log
// `after` (0: after a full).
func (c *Chain) gapAt(i int, after int64, p LSN) *Gap {
	l := c.Logs[i]
	g := &Gap{After: after, Before: l.Number, From: p, To: l.FirstLSN}
	if l.Foreign != nil && !l.Usable() && !p.Less(l.FirstLSN) {
		g.Foreign, g.ForeignStart, g.To = l.Foreign, l.Start, ""
	}
	return g
}

// Restorable are the logs that restore in order after full, up to the
// first hole (which gap names; nil when the chain is whole after it).
// Logs wholly before the point reached are skipped: a log backup taken
// while the full ran ends before the full's LastLSN.
func (c *Chain) Restorable(full Full) ([]Log, *Gap) {
	p := full.LastLSN
	var out []Log
	after := int64(0)
	for i, l := range c.Logs {
		if !p.Less(l.LastLSN) {
			continue
		}
		if p.Less(l.FirstLSN) || !l.Usable() {
			return out, c.gapAt(i, after, p)
		}
		out = append(out, l)
		p, after = l.LastLSN, l.Number
	}
	return out, nil
}

// Gaps are every hole of the chain after its base, in order: where a
// restore from the base (or from a later full before the hole) cannot go
// on. The walk goes on past each hole, from the log after it, so that
// every hole is named.
func (c *Chain) Gaps() []Gap {
	if len(c.Fulls) == 0 {
		return nil
	}
	return c.GapsAfter(c.Base())
}

// GapsAfter are the holes a restore from full meets, in order (see Gaps).
func (c *Chain) GapsAfter(full Full) []Gap {
	var out []Gap
	p := full.LastLSN
	after := int64(0)
	for i, l := range c.Logs {
		if !p.Less(l.LastLSN) {
			continue
		}
		if p.Less(l.FirstLSN) || !l.Usable() {
			out = append(out, *c.gapAt(i, after, p))
		}
		p, after = l.LastLSN, l.Number
	}
	return out
}

// Target is what it takes to restore to a point in time.
type Target struct {
	At   time.Time
	Full Full  // the full to restore first (the newest verified one that finished by At)
	Logs []Log // the logs to apply after it, the last one WITH STOPAT
	// Reachable: the chain holds every log up to At, without a hole.
	Reachable bool
	// Proven: every one of those logs was applied on the verification
	// instance.
	Proven bool
	Why    string // why not reachable
}

// LogsTo is what it takes to reach instant t: the newest verified full
// that finished at or before t and the logs from it up to the first that
// started at or after t (every record logged before t is in it or an
// earlier one). A log that started before t may end before t's records
// were written, so it is never taken to cover t on its own. STOPAT inside
// the chosen full's own backup time is not offered: "if a data backup is
// too recent for the specified target time" RESTORE fails ("RESTORE
// Statements - Arguments", STOPAT).
func (c *Chain) LogsTo(t time.Time) Target {
	tg := Target{At: t}
	full, ok := c.fullBefore(t)
	if !ok {
		tg.Why = fmt.Sprintf("no verified full backup of chain %d finished by %s", c.ID, t.UTC().Format(time.RFC3339))
		return tg
	}
	tg.Full = full
	logs, gap := c.Restorable(full)
	for i, l := range logs {
		if !l.Start.Before(t) {
			tg.Logs = logs[:i+1]
			tg.Reachable = true
			tg.Proven = allProven(tg.Logs)
			return tg
		}
	}
	tg.Logs = logs
	switch {
	case gap != nil:
		tg.Why = gap.String()
	case len(logs) == 0:
		tg.Why = fmt.Sprintf("no log backup after full %d yet", full.Sequence)
	default:
		tg.Why = fmt.Sprintf("the newest log backup (%d) started at %s, before %s", logs[len(logs)-1].Number,
			logs[len(logs)-1].Start.UTC().Format(time.RFC3339), t.UTC().Format(time.RFC3339))
	}
	return tg
}

// fullBefore is the newest verified full that finished at or before t.
func (c *Chain) fullBefore(t time.Time) (Full, bool) {
	var best Full
	found := false
	for _, f := range c.Fulls {
		if f.Verified && !f.Finish.After(t) && (!found || f.Finish.After(best.Finish)) {
			best, found = f, true
		}
	}
	return best, found
}

func allProven(logs []Log) bool {
	for _, l := range logs {
		if l.Proven == nil {
			return false
		}
	}
	return true
}

// ProvenTo is the latest instant the chain is proven restorable to: from a
// verified full, the start of the last log of an unbroken run of applied
// logs after it (every transaction logged before that start is in the
// logs applied), or the full's finish when none is applied yet. ok is
// false without a verified full.
func (c *Chain) ProvenTo() (time.Time, bool) {
	var best time.Time
	ok := false
	for _, f := range c.Fulls {
		if !f.Verified {
			continue
		}
		to := f.Finish
		logs, _ := c.Restorable(f)
		for _, l := range logs {
			if l.Proven == nil {
				break
			}
			if l.Start.After(to) {
				to = l.Start
			}
		}
		if !ok || to.After(best) {
			best, ok = to, true
		}
	}
	return best, ok
}

// ProvenWindow is the span a point-in-time proof may pick from: the newest
// verified full's finish to ProvenTo through it; ok is false when that
// span is empty.
func (c *Chain) ProvenWindow() (from, to time.Time, full Full, ok bool) {
	for i := len(c.Fulls) - 1; i >= 0; i-- {
		f := c.Fulls[i]
		if !f.Verified {
			continue
		}
		to = f.Finish
		logs, _ := c.Restorable(f)
		for _, l := range logs {
			if l.Proven == nil {
				break
			}
			to = l.Start
		}
		return f.Finish, to, f, to.After(f.Finish)
	}
	return time.Time{}, time.Time{}, Full{}, false
}

// Next is what a RESTORING copy needs next.
type Next struct {
	Log      *Log // the log to apply; nil when none
	UpToDate bool // the copy has every log the chain holds
	Gap      *Gap // the chain has a hole where the copy stands: re-seed from a full
}

// NextToApply is the log a copy in RESTORING (or STANDBY) state needs
// next, given its redo LSN: sys.master_files.redo_start_lsn of its primary
// data file, the point from which roll forward continues ("Planning a
// restore sequence for files in restoring, recovery pending, or offline
// state"; NULL there means the file must be restored from a full). A copy
// standing where the chain has a hole (or before its logs: seeded from
// another chain) gets a Gap: it must be re-seeded from a full.
func (c *Chain) NextToApply(redo LSN) (Next, error) {
	if err := CheckLSN("redo LSN", redo); err != nil {
		return Next{}, err
	}
	after := int64(0)
	for i, l := range c.Logs {
		if !redo.Less(l.LastLSN) {
			after = l.Number
			continue
		}
		if redo.Less(l.FirstLSN) || !l.Usable() {
			return Next{Gap: c.gapAt(i, after, redo)}, nil
		}
		return Next{Log: &c.Logs[i]}, nil
	}
	return Next{UpToDate: true}, nil
}
