package activities

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
}
