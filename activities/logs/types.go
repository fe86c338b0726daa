package logs

import (
	"time"

	"github.com/backupcycle/backupcycle/activities"
)

// Activities are the log chain's activities. The worker registers them
// beside the cycle's (workflows.Register); they share its dependencies
// (configuration, SQL and storage openers, clock) through Base.
type Activities struct {
	// Base carries the dependencies; it is a field, not embedded, so that
	// registering Activities registers only the methods of this package.
	Base *activities.Activities
}

// New returns the log chain's activities over base's dependencies.
func New(base *activities.Activities) *Activities { return &Activities{Base: base} }

// Steps of the log chain, as in logs and the `logchain` query.
const (
	StepLogPlan   = "log-plan"
	StepBackupLog = "backup-log"
	StepCopyLogs  = "copy-logs"
	StepApplyLogs = "apply-logs"
)

// LogPlanInput names the database whose log chain runs: configuration keys
// only.
type LogPlanInput struct {
	Database string `json:"database"`
	Instance string `json:"instance,omitempty"`
}

// LogPlan is what the configuration in force says of the database's log
// backups, read at the start of every run of the chain's workflow.
type LogPlan struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	// Enabled: log_backup.every is set. A chain whose database no longer
	// has it ends.
	Enabled bool          `json:"enabled"`
	Every   time.Duration `json:"every"`
	// ProofMode is log_proof (standby, nightly).
	ProofMode string `json:"proof_mode"`
	// PITEvery is pit_proof.every: how often the point-in-time proof runs.
	PITEvery time.Duration `json:"pit_every,omitempty"`
	// Server holds the chain (the rotation's first server), CopyTo its
	// remote copy; CopyQueue is the task queue of the worker next to one
	// of them ("" for the worker's own).
	Server    string `json:"server"`
	CopyTo    string `json:"copy_to"`
	CopyQueue string `json:"copy_queue,omitempty"`
}

// BackupLogInput asks for the next log backup of the database's chain.
// Chain is the chain the workflow believes current (0: none yet): a hint
// only, the chain record on the backup server decides.
type BackupLogInput struct {
	Database string `json:"database"`
	Instance string `json:"instance,omitempty"`
	Chain    int64  `json:"chain,omitempty"`
	// Tail makes it the tail-log backup a recover over the database takes
	// first (BACKUP LOG ... WITH NORECOVERY): the chain's next log, hashed
	// and recorded as every other, after which the database is RESTORING.
	// No chain to take it in is an error rather than a quiet no-op.
	Tail bool `json:"tail,omitempty"`
}

// Break is why a chain ended, as BackupLog found it.
type Break struct {
	Reason string    `json:"reason"` // logchain.BreakReason
	Detail string    `json:"detail"`
	At     time.Time `json:"at"`
}

// ForeignLog is another tool's log backup msdb lists in the chain's span.
type ForeignLog struct {
	Path    string    `json:"path"`
	Start   time.Time `json:"start"` // instant (UTC)
	Tool    string    `json:"tool,omitempty"`
	User    string    `json:"user,omitempty"`
	Adopted bool      `json:"adopted"`
}

// BackupLogOutput is one tick's log backup, or why there is none.
type BackupLogOutput struct {
	Chain  int64  `json:"chain"`
	Number int64  `json:"number,omitempty"` // the log backup taken; 0: none
	Server string `json:"server,omitempty"` // the backup server holding the chain
	// FirstLSN and LastLSN: the log backup holds [FirstLSN, LastLSN).
	FirstLSN string    `json:"first_lsn,omitempty"`
	LastLSN  string    `json:"last_lsn,omitempty"`
	Start    time.Time `json:"start,omitzero"`  // instant (UTC) the BACKUP LOG started
	Finish   time.Time `json:"finish,omitzero"` // and finished
	Bytes    int64     `json:"bytes,omitempty"`
	Files    int       `json:"files,omitempty"`
	// Reattached: the BACKUP LOG of an earlier attempt was found running
	// or finished, and not sent again.
	Reattached bool `json:"reattached,omitempty"`
	// Foreign are other tools' log backups found since the chain's last
	// log backup.
	Foreign []ForeignLog `json:"foreign,omitempty"`
	// Break is set when the chain is broken (found now or earlier): no log
	// backup was taken, and NeedFull says a full backup starts the next
	// chain.
	Break    *Break `json:"break,omitempty"`
	NeedFull bool   `json:"need_full,omitempty"`
	// Every is log_backup.every as configured now (0: log backups off).
	Every time.Duration `json:"every"`
}

// CopyLogsInput asks for the chain's written log backups to be copied to
// the remote site.
type CopyLogsInput struct {
	Database string `json:"database"`
	Instance string `json:"instance,omitempty"`
	Chain    int64  `json:"chain"`
}

// CopyLogsOutput says what was copied.
type CopyLogsOutput struct {
	Chain  int64   `json:"chain"`
	From   string  `json:"from"`
	To     string  `json:"to"`
	Copied []int64 `json:"copied,omitempty"` // numbers copied by this call
	// Through is the highest number copied with every earlier one (0:
	// none yet).
	Through int64 `json:"through"`
	Bytes   int64 `json:"bytes"`
}
