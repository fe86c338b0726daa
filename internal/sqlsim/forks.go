package sqlsim

import (
	"encoding/hex"
	"strings"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Recovery forks, as "Recovery Paths"
// (https://learn.microsoft.com/previous-versions/sql/sql-server-2008-r2/ms175078(v=sql.105))
// describes them: "If you recover a database to an earlier recovery point
// and start using the database from that point, a new recovery path
// originates"; afterwards "backups exist that can take the database down
// two or more recovery paths, all of which use the same range of LSNs".
// SQL Server names each path by a GUID, the recovery fork:
//
//   - sys.database_recovery_status
//     (https://learn.microsoft.com/sql/relational-databases/system-catalog-views/sys-database-recovery-status-transact-sql):
//     recovery_fork_guid "Identifies the current recovery fork on which the
//     database is currently active", first_recovery_fork_guid the
//     "starting recovery fork", and fork_point_lsn, when the two differ,
//     "the log sequence number of the current fork point";
//   - msdb.dbo.backupset
//     (https://learn.microsoft.com/sql/relational-databases/system-tables/backupset-transact-sql)
//     first_recovery_fork_guid / last_recovery_fork_guid ("ID of the
//     starting / ending recovery fork"; equal for data backups) and
//     fork_point_lsn ("If first_recovery_fork_guid is not equal to
//     last_recovery_fork_guid, this is the log sequence number of the fork
//     point. Otherwise, the value is NULL"), which RESTORE HEADERONLY
//     returns as FirstRecoveryForkID, RecoveryForkID and ForkPointLSN
//     (https://learn.microsoft.com/sql/t-sql/statements/restore-statements-headeronly-transact-sql).
//
// The emulator starts a new fork on every RESTORE ... WITH RECOVERY
// (whether or not the restore stopped before the end of the logs), at the
// point the restore reached; the next log backup starts there, on the fork
// of the backup restored, and ends on the new one: it crosses the fork. A
// RESTORE LOG whose backup is not on the database's recovery path fails
// with 4330 (Database Engine events and errors 4000 to 4999). A created
// database's first fork is its family GUID (as are those of catalogs and
// media written before forks were recorded).

// forkRange is the recovery path a backup covers: from First to Last,
// crossing at Point (0 when First == Last).
type forkRange struct {
	First guid   `json:"first"`
	Last  guid   `json:"last"`
	Point uint64 `json:"point,omitempty"`
}

// at is the fork of the point lsn inside the range: before or at the fork
// point the first fork, past it the last.
func (r forkRange) at(lsn uint64) guid {
	if r.First != r.Last && lsn <= r.Point {
		return r.First
	}
	return r.Last
}

// continues reports whether a database standing at lsn on fork is on the
// recovery path of a backup covering r.
func (r forkRange) continues(fork guid, lsn uint64) bool {
	if r.First == r.Last {
		return fork == r.Last
	}
	return fork == r.First && lsn <= r.Point || fork == r.Last && lsn >= r.Point
}

// recoveryFork is the fork d is on.
func (in *Instance) recoveryFork(d *database) guid {
	if d.RecoveryFork != (guid{}) {
		return d.RecoveryFork
	}
	return in.familyGUID(d)
}

// chainFork is the fork of d's ChainLSN, where its next log backup starts.
func (in *Instance) chainFork(d *database) guid {
	if d.ChainFork != (guid{}) {
		return d.ChainFork
	}
	return in.recoveryFork(d)
}

// backupForksLocked is the range a backup of d taken now covers: a data
// backup its current fork, a log backup from its chain's point to now;
// in.mu is held.
func (in *Instance) backupForksLocked(d *database, log bool) forkRange {
	r := forkRange{First: in.recoveryFork(d), Last: in.recoveryFork(d)}
	if log {
		r.First = in.chainFork(d)
		if r.First != r.Last {
			r.Point = d.ForkPointLSN
		}
	}
	return r
}

// chainOnCurrentForkLocked records that d's next log backup starts on its
// current fork (after a log backup, or a full starting the chain); in.mu
// is held.
func (in *Instance) chainOnCurrentForkLocked(d *database) {
	d.ChainFork = in.recoveryFork(d)
}

// forkOnRecoveryLocked starts a new fork of d at the point its restore
// sequence reached; in.mu is held.
func (in *Instance) forkOnRecoveryLocked(d *database) {
	redo := d.RedoFork
	if redo == (guid{}) {
		redo = in.recoveryFork(d)
	}
	d.ChainFork, d.ForkPointLSN, d.RecoveryFork, d.RedoFork = redo, d.RedoLSN, newGUID(), guid{}
}

// redoFork is the fork of a restoring d's RedoLSN (sys.master_files
// redo_start_fork_guid).
func (in *Instance) redoFork(d *database) guid {
	if d.RedoFork != (guid{}) {
		return d.RedoFork
	}
	return in.recoveryFork(d)
}

// headerForks is the range a backup set covers; media written before
// forks were recorded are on the family GUID.
func headerForks(h *mediaHeader) forkRange {
	if h.Forks.Last != (guid{}) {
		return h.Forks
	}
	f := headerFamilyGUID(h)
	return forkRange{First: f, Last: f}
}

// forkColumns are a range as backupset and HEADERONLY give it: the first
// and last fork, and the fork point (NULL unless they differ).
func forkColumns(r forkRange) (first, last [16]byte, point any) {
	if r.First != r.Last {
		point = lsnText(r.Point)
	}
	return [16]byte(r.First), [16]byte(r.Last), point
}

// recoveryStatusForks are sys.database_recovery_status's recovery_fork_guid,
// first_recovery_fork_guid and fork_point_lsn of d: the starting fork and
// the point only while the next log backup starts on an earlier fork (the
// view shows NULL for both on a database never restored: "Identifying
// Databases with Multiple Recovery Paths", SQL Server T-SQL Recipes).
func (in *Instance) recoveryStatusForks(d *database) (fork [16]byte, first, point any) {
	fork = [16]byte(in.recoveryFork(d))
	if c := in.chainFork(d); c != in.recoveryFork(d) {
		first, point = [16]byte(c), lsnText(d.ForkPointLSN)
	}
	return fork, first, point
}

// errRecoveryPath is RESTORE LOG of a backup set off the database's
// recovery path: 4330 (Database Engine events and errors 4000 to 4999).
func errRecoveryPath() *tds.Error {
	return sqlErr(4330, 16, "This backup set cannot be applied because it is on a recovery path that is inconsistent with the database. The recovery path is the sequence of data and log backups that have brought the database to a particular recovery point. Find a compatible backup to restore, or restore the rest of the database to match a recovery point within this backup set, which will restore the database to a different point in time. For more information about recovery paths, see SQL Server Books Online.")
}

// guidFromText reads a uniqueidentifier's character form
// ('6F9619FF-8B86-D011-B42D-00C04FC964FF', braces allowed;
// "uniqueidentifier (Transact-SQL)") into the bytes the emulator keeps,
// in the order of that form (the TDS writer puts them in wire order).
func guidFromText(s string) (guid, bool) {
	s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s), "{"), "}")
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return guid{}, false
	}
	var g guid
	if _, err := hex.Decode(g[:], []byte(strings.ReplaceAll(s, "-", ""))); err != nil {
		return guid{}, false
	}
	return g, true
}

// backupSetForks is the range of an msdb backupset row; rows written
// before forks were recorded are on their database's family GUID.
func backupSetForks(b backupSetRow) forkRange {
	if b.Forks.Last != (guid{}) {
		return b.Forks
	}
	return forkRange{First: b.FamilyGUID, Last: b.FamilyGUID}
}
