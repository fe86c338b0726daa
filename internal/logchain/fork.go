package logchain

import "strings"

// Recovery forks. "If you recover a database to an earlier recovery point
// and start using the database from that point, a new recovery path
// originates", and afterwards "backups exist that can take the database
// down two or more recovery paths, all of which use the same range of
// LSNs" ("Recovery Paths",
// https://learn.microsoft.com/previous-versions/sql/sql-server-2008-r2/ms175078(v=sql.105)).
// SQL Server names a path by its recovery fork GUID: msdb's backupset has
// first_recovery_fork_guid and last_recovery_fork_guid ("ID of the
// starting / ending recovery fork") and fork_point_lsn ("If
// first_recovery_fork_guid is not equal to last_recovery_fork_guid, this
// is the log sequence number of the fork point"; backupset
// (Transact-SQL),
// https://learn.microsoft.com/sql/relational-databases/system-tables/backupset-transact-sql),
// RESTORE HEADERONLY the same as FirstRecoveryForkID, RecoveryForkID and
// ForkPointLSN. A backup of another path than the database's cannot be
// applied to it (error 4330: "it is on a recovery path that is
// inconsistent with the database", Database Engine events and errors
// 4000 to 4999): LSNs alone do not say whether a log belongs to a chain.

// Fork is the recovery path a backup covers: from fork First to fork
// Last, crossing at Point when they differ (the first log backup after a
// RESTORE ... WITH RECOVERY). Forks are GUIDs as text; "" is not known.
type Fork struct {
	First, Last string
	Point       LSN
}

// Known reports whether both forks are known.
func (f Fork) Known() bool { return f.First != "" && f.Last != "" }

func (f Fork) crosses() bool { return !strings.EqualFold(f.First, f.Last) }

// Continues reports whether a backup on recovery path f continues a chain
// standing at LSN end on fork: the backup's path passes through that
// point. An unknown fork (either side) continues: nothing says otherwise.
func (f Fork) Continues(fork string, end LSN) bool {
	if !f.Known() || fork == "" {
		return true
	}
	if !f.crosses() {
		return strings.EqualFold(fork, f.Last)
	}
	return strings.EqualFold(fork, f.First) && end.Cmp(f.Point) <= 0 ||
		strings.EqualFold(fork, f.Last) && f.Point.Cmp(end) <= 0
}
