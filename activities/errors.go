package activities

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/mssql"
)

// Stable error types of the backup cycle. Activities return them as
// temporal.ApplicationError types; the workflow, starters and the Web UI match
// on these strings, so they never change once released.
const (
	ErrDatabaseNotFound        = "DatabaseNotFound"
	ErrLoginFailed             = "LoginFailed"
	ErrSQLHostUnreachable      = "SQLHostUnreachable"
	ErrBackupTargetUnreachable = "BackupTargetUnreachable"
	ErrNoBackupServerReachable = "NoBackupServerReachable"
	ErrCorruptBackup           = "CorruptBackup"
	ErrCheckDBFailed           = "CheckDBFailed"
	ErrSanityCheckFailed       = "SanityCheckFailed"
	ErrShareFull               = "ShareFull"
	ErrInvalidConfig           = "InvalidConfig"
	ErrInsufficientMemory      = "InsufficientMemory"
	ErrCopyDeadlineExceeded    = "CopyDeadlineExceeded"
	// ErrHashMismatch: a copy's bytes differ from the primary's.
	ErrHashMismatch = "HashMismatch"
	// ErrSequenceInUse: the set number meets files or a manifest of another
	// run on a backup server; nothing of theirs is touched, and the cycle
	// allocates a new number.
	ErrSequenceInUse = "SequenceInUse"
	// ErrVerifyDatabaseInUse: the verification database exists and was not
	// restored by backupcycle; nothing is replaced.
	ErrVerifyDatabaseInUse = "VerifyDatabaseInUse"
	// ErrRestoreMismatch: the verification database was not restored from
	// this set (its restore history names another backup set GUID).
	ErrRestoreMismatch = "RestoreMismatch"
	// ErrNoEvidence: MarkFailed was asked to fail a set without evidence
	// about its content (a programming error in the caller).
	ErrNoEvidence = "NoEvidence"
	// ErrDatabaseUnavailable: SQL Server cannot open the database now
	// (offline, restoring, recovering, a non-readable availability replica,
	// or missing: its 4060 does not say which). Retryable later; it says
	// nothing about any backup set.
	ErrDatabaseUnavailable = "DatabaseUnavailable"
	// ErrCheckDBCouldNotRun: DBCC CHECKDB stopped before checking (tempdb
	// full, no internal snapshot). Retryable later; never evidence of
	// corruption.
	ErrCheckDBCouldNotRun = "CheckDBCouldNotRun"
	// ErrBackupDeviceInUse: the backup files are held by another process,
	// typically a BACKUP or RESTORE still running on them (3201 with
	// operating system error 32). Retryable once that statement has ended;
	// the files are not ours to judge or delete meanwhile.
	ErrBackupDeviceInUse = "BackupDeviceInUse"
	// ErrStatementMayStillRun: an earlier attempt's RESTORE or DBCC CHECKDB
	// may still run on the verification instance, and the login cannot see
	// other sessions (no VIEW SERVER STATE) to find it: no second one is
	// started over it. Retryable; the fix is the grant the message names.
	ErrStatementMayStillRun = "StatementMayStillRun"
	// ErrVerifyInstanceFull: the verification instance's restore volume
	// has not the space the copy's files take (their allocated size). Not
	// retried: space is freed by a person or by retention, not by waiting
	// minutes; the set keeps its state (no evidence against it) and
	// `starter run --resume SEQ` finishes it once there is room.
	ErrVerifyInstanceFull = "VerifyInstanceFull"
	// ErrFileSystemLimit: the backup server's file system cannot grow a
	// backup file any further (NTFS, operating system error 665): another
	// server of the rotation would meet the same limit, so the cycle stops
	// with the fix (more stripes, or a volume formatted with format /L).
	ErrFileSystemLimit = "FileSystemLimit"
	// ErrSanityCheckCouldNotRun: a sanity query did not run to a value on
	// the restored copy (SQL Server raised an error: an owner without a
	// login, CLR off, a missing referenced database, a permission, a
	// collation conflict, the query itself). Never evidence: the set stays
	// checked, and `--resume` finishes it once the cause is fixed. Not
	// retryable: the same query on the same copy fails the same way.
	ErrSanityCheckCouldNotRun = "SanityCheckCouldNotRun"
	// ErrNoSanityProof: MarkVerified of a database with sanity checks found
	// no proof, recorded by SanityChecks, that they ran and held on this
	// very restore. Never evidence; the set stays checked.
	ErrNoSanityProof = "NoSanityProof"
	// ErrSourceDatabaseDamaged: BACKUP met damage in the source database
	// itself (3043: a page failed its checksum; 3203 with operating system
	// error 23 or 1117 reading a data file). The production database or
	// its disk needs attention (DBCC CHECKDB on it); no backup set is
	// corrupt, this one is only incomplete. Not retryable.
	ErrSourceDatabaseDamaged = "SourceDatabaseDamaged"
	// ErrNotImmutable: the object store of a database's immutable_copy let
	// the worker's own credentials delete, shorten or overwrite a locked
	// object (its probe), or did not keep an object's lock: nothing is
	// copied there until that is fixed. Not retryable; the set stays
	// verified.
	ErrNotImmutable = "NotImmutable"
	// ErrImmutableCopyFailed: the immutable copy cannot be made as things
	// are (the set's stripe differs from its manifest, the bucket's quota,
	// a set that is not verified). Not retryable; the set stays verified.
	ErrImmutableCopyFailed = "ImmutableCopyFailed"
	// ErrObjectStoreUnreachable: the object store did not answer, or
	// answered with a server error; retried until the copy's deadline.
	ErrObjectStoreUnreachable = "ObjectStoreUnreachable"
	// ErrRecoveryPointUnreachable: no restore from the backups on the
	// reachable backup servers reaches the point a recover asks for (before
	// the oldest verified full, after the newest log held, a hole or a
	// break in the log chain, shortly after the source's clock went back,
	// no verified full at all); the error says how far the backups go.
	// Nothing was restored, or SQL Server refused the point (4335). Not
	// retryable: another point, or --latest, is a person's choice.
	ErrRecoveryPointUnreachable = "RecoveryPointUnreachable"
	// ErrTargetDatabaseExists: a database of the name a recover restores
	// to exists on the target instance and --replace was not given;
	// nothing is touched.
	ErrTargetDatabaseExists = "TargetDatabaseExists"
	// ErrTargetIsSource: a recover would restore over the source database
	// itself (same instance and name) without both --replace and an
	// explicit --as of that name; nothing is touched.
	ErrTargetIsSource = "TargetIsSource"
	// ErrTargetInstanceFull: the target instance's data or log volume has
	// not the space the database's files take (their allocated size); a
	// person frees it or chooses other directories.
	ErrTargetInstanceFull = "TargetInstanceFull"
	// ErrTailLogNeeded: a recover over the source database itself to the
	// newest point (or past the newest log backup) would lose what was
	// committed after that log backup: --tail-log takes it first (and
	// leaves the source RESTORING), or an earlier point says it is meant.
	// Nothing is touched.
	ErrTailLogNeeded = "TailLogNeeded"
	// ErrDifferentialBaseMoved: a differential's header names as its base
	// (DifferentialBaseGUID) a full backup that is not the verified set its
	// plan chose: a full backup someone else took (or one of the
	// product's that is not verified) became the database's differential
	// base. The differential restores on none of the product's verified
	// sets: it is marked failed (foreign_base) and nothing else is;
	// differentials wait for the next verified full. Not retryable.
	ErrDifferentialBaseMoved = "DifferentialBaseMoved"
	// ErrSQLError: SQL Server failed a statement, or answered one with
	// something the step cannot use, in a way no other type names: retried
	// (an unknown failure may pass); never evidence about a set.
	ErrSQLError = "SQLError"
	// ErrRestoreNotRecorded: the verification instance's RESTORE reported
	// success, yet msdb.dbo.restorehistory holds no row of it: the copy
	// cannot be told to be this set's, so it is not used. Retried; never
	// evidence about the set.
	ErrRestoreNotRecorded = "RestoreNotRecorded"
	// ErrDifferentialBaseUnusable: the verified full a differential is
	// proven on cannot be restored from the verification server now (its
	// manifest is missing or no longer verified there, or its files fail
	// RESTORE WITH CHECKSUM). Nothing is known against the differential,
	// which stays copied; not retryable: the base needs a person, or the
	// next full cycle makes a new one.
	ErrDifferentialBaseUnusable = "DifferentialBaseUnusable"
	// ErrBackupUnconfirmed: SQL Server completed the BACKUP, and the worker
	// could not reach the backup server to check and measure its stripes
	// (the share lost, the attempt interrupted); or a BACKUP an earlier
	// attempt started may have completed, and neither the worker nor SQL
	// Server can reach the stripes to tell. Retried: the retry
	// recognises the finished backup (RESTORE HEADERONLY) without running
	// it again. Never evidence about the set, and never a failed backup.
	ErrBackupUnconfirmed = "BackupUnconfirmed"
	// ErrActivityInterrupted: the attempt's context ended before it did,
	// not on the workflow's request: its heartbeats did not reach Temporal
	// within the heartbeat timeout (the server restarting, a network cut),
	// the worker is stopping, or the activity was paused or reset. Whatever
	// the attempt met after that (a cancelled read, a closed connection) says
	// nothing about a SQL host, a backup server or a set: the worker reports
	// this type instead, and the activity is retried.
	ErrActivityInterrupted = "ActivityInterrupted"
)

// NonRetryableErrorTypes are the types no retry of the same activity can fix:
// the workflow lists them in every RetryPolicy so that even an error an
// activity forgot to mark non-retryable stops at once.
var NonRetryableErrorTypes = []string{
	ErrDatabaseNotFound,
	ErrLoginFailed,
	ErrCorruptBackup,
	ErrCheckDBFailed,
	ErrSanityCheckFailed,
	ErrShareFull,
	ErrInvalidConfig,
	ErrInsufficientMemory,
	ErrSequenceInUse,
	ErrVerifyDatabaseInUse,
	ErrRestoreMismatch,
	ErrNoEvidence,
	ErrHashMismatch,
	ErrVerifyInstanceFull,
	ErrFileSystemLimit,
	ErrSanityCheckCouldNotRun,
	ErrNoSanityProof,
	ErrSourceDatabaseDamaged,
	ErrNotImmutable,
	ErrImmutableCopyFailed,
	ErrRecoveryPointUnreachable,
	ErrTargetDatabaseExists,
	ErrTargetIsSource,
	ErrTargetInstanceFull,
	ErrTailLogNeeded,
	ErrDifferentialBaseMoved,
	ErrDifferentialBaseUnusable,
}

// Evidence maps an error type to what it proves about the set's content, or
// "" when it proves nothing (an outage, a timeout, bad configuration): only
// evidence marks a set failed (catalog.Evidence).
func Evidence(errorType string) catalog.Evidence {
	switch errorType {
	case ErrCorruptBackup:
		return catalog.EvidenceCorruptBackup
	case ErrCheckDBFailed:
		return catalog.EvidenceCheckDBFailed
	case ErrSanityCheckFailed:
		return catalog.EvidenceSanityFailed
	case ErrHashMismatch:
		return catalog.EvidenceHashMismatch
	case ErrDifferentialBaseMoved:
		return catalog.EvidenceForeignBase
	}
	return ""
}

// sqlKindError maps the SQL failure kinds that are retryable later, and
// prove nothing about a set, to their types: ok is false for other errors.
// The hint says what an operator can do meanwhile.
func sqlKindError(err error, details ...any) (mapped error, ok bool) {
	var typ, hint string
	switch {
	case errors.Is(err, mssql.ErrDatabaseUnavailable):
		typ, hint = ErrDatabaseUnavailable, "the database is offline, restoring, recovering or missing "+
			"(sys.databases.state_desc on the instance tells which); the cycle tries again later"
	case errors.Is(err, mssql.ErrCheckDBCouldNotRun):
		typ, hint = ErrCheckDBCouldNotRun, "DBCC CHECKDB stopped before checking (tempdb full or no internal snapshot): "+
			"free tempdb space on the verification instance; this says nothing about the backup set"
	case errors.Is(err, mssql.ErrDeviceInUse):
		typ, hint = ErrBackupDeviceInUse, "another BACKUP or RESTORE still holds these files "+
			"(sys.dm_exec_requests on the instance shows it); the cycle tries again once it has finished"
	default:
		return nil, false
	}
	return temporal.NewApplicationErrorWithCause(fmt.Sprintf("%v: %s", err, hint), typ, err, details...), true
}
