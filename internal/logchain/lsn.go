// Package logchain is the product's log chain: a full backup it took (the
// base) and the log backups that follow it, in order, and the rules SQL
// Server applies to them. It is pure: no I/O, no clock; workflows,
// activities, the catalog, status and retention all decide with it.
//
// The SQL Server facts it relies on:
//
//   - LSNs are numeric(25,0); "LSNs are ordered such that if LSN2 is greater
//     than LSN1, the change described by the log record referred to by LSN2
//     occurred after"; they "can be compared for equality and inequality";
//     arithmetic on them is "not meaningful" ("Recover to a Log Sequence
//     Number",
//     https://learn.microsoft.com/sql/relational-databases/backup-restore/recover-to-a-log-sequence-number-sql-server).
//     So LSN compares and never subtracts.
//   - A backup's first_lsn is its "first or oldest log record", its last_lsn
//     "the next log record after the backup set" (backupset (Transact-SQL),
//     https://learn.microsoft.com/sql/relational-databases/system-tables/backupset-transact-sql):
//     a log backup holds [FirstLSN, LastLSN), and the next log backup of the
//     chain starts where it ends.
//   - "When a backup is restored, the data is restored to the LSN
//     corresponding to the point in time at which the backup was taken"
//     (same page as the first point): after a full, the copy stands at the
//     full's LastLSN, and the first log to apply is the one whose range
//     holds that LSN. A later log is "too recent" (error 4305: "An earlier
//     log backup that includes LSN ... can be restored"), an earlier one
//     "too early" (4326) ("Database Engine events and errors (4000 to
//     4999)").
//   - Logs "must be applied in the sequence in which they were created,
//     without any gaps in the log chain"; "If a transaction log backup in
//     this log chain is lost or damaged, you can restore only transaction
//     logs before the missing transaction log" ("Apply transaction log
//     backups",
//     https://learn.microsoft.com/sql/relational-databases/backup-restore/apply-transaction-log-backups-sql-server).
//   - A full backup does not break the chain: logs continue across it and
//     can be restored after any full they follow; the chain breaks when the
//     database goes to SIMPLE (BACKUP LOG then fails with 4208) or has no
//     current full (4214) ("Transaction log backups",
//     https://learn.microsoft.com/sql/relational-databases/backup-restore/transaction-log-backups-sql-server;
//     "View or change the recovery model of a database").
//   - A COPY_ONLY full "cannot serve as a differential base" but restores
//     like any other full, and a copy-only log "has no effect on the log
//     chain" ("Copy-only backups",
//     https://learn.microsoft.com/sql/relational-databases/backup-restore/copy-only-backups-sql-server).
package logchain

import (
	"fmt"
	"strings"
)

// LSN is a log sequence number as SQL Server reports it: numeric(25,0) in
// decimal digits (real values have 17-23 digits and do not fit an int64).
type LSN string

// MaxLSNDigits is numeric(25,0)'s precision.
const MaxLSNDigits = 25

// Valid reports whether l is 1 to 25 decimal digits.
func (l LSN) Valid() bool {
	if len(l) == 0 || len(l) > MaxLSNDigits {
		return false
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

// Cmp compares two valid LSNs numerically: -1, 0 or +1. Leading zeros do not
// count.
func (l LSN) Cmp(o LSN) int {
	a, b := strings.TrimLeft(string(l), "0"), strings.TrimLeft(string(o), "0")
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// Less reports l < o.
func (l LSN) Less(o LSN) bool { return l.Cmp(o) < 0 }

// CheckLSN is an error naming what when l is not a numeric(25,0) LSN.
func CheckLSN(what string, l LSN) error {
	if !l.Valid() {
		return fmt.Errorf("%s %q is not an LSN (1 to %d decimal digits, numeric(25,0))", what, string(l), MaxLSNDigits)
	}
	return nil
}
