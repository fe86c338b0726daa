package activities

import "github.com/backupcycle/backupcycle/internal/catalog"

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
	}
	return ""
}
