package activities

import (
	"time"

	"github.com/backupcycle/backupcycle/internal/plan"
)

// Inputs and outputs of the BackupCycle activities. They are recorded in the
// workflow history and shown in the Web UI, so they are small, JSON-friendly
// and never carry a secret: databases, instances and servers are named by
// their configuration keys and the activities resolve everything else
// (addresses, passwords, paths) from the configuration inside the worker.

// Steps of the cycle, as shown in the BackupStep search attribute, the
// progress query and the Web UI.
const (
	StepPlan                   = "plan"
	StepSequence               = "sequence"
	StepBackup                 = "backup"
	StepWaitingForSQLHost      = "waiting-for-sql-host"
	StepWaitingForBackupServer = "waiting-for-backup-server"
	StepCatalog                = "catalog"
	StepCopy                   = "copy"
	StepRestore                = "restore"
	StepCheckDB                = "checkdb"
	StepSanity                 = "sanity"
	StepVerified               = "verified"
	StepDropVerifyDB           = "drop-verify-db"
	StepImmutableCopy          = "immutable-copy"
	StepRetention              = "retention"
	StepEvidence               = "evidence"
	StepDone                   = "done"
	StepFailed                 = "failed"
	StepCancelled              = "cancelled"
	StepResume                 = "resume"
	// StepWaitingForSlot: the cycle waits for a slot of its instance or of
	// a backup server (max_concurrent), which other cycles hold.
	StepWaitingForSlot = "waiting-for-slot"
)

// ProgressSignal is the signal long activities send to their own workflow so
// that the `progress` query and the Web UI show percent and bytes while a
// statement runs (a workflow cannot read its activities' heartbeats).
const ProgressSignal = "step-progress"

// StepProgress is the payload of ProgressSignal.
type StepProgress struct {
	Step     string  `json:"step"`
	Sequence int64   `json:"seq"`
	Percent  float64 `json:"percent"`
	Bytes    int64   `json:"bytes"`
}

// PlanInput asks for the plan of one cycle of Database (its configuration key).
type PlanInput struct {
	Database string `json:"database"`
	// Instance names the source instance when the database name alone is
	// ambiguous in the configuration; "" otherwise.
	Instance string `json:"instance,omitempty"`
	// LastServer, when set, is the primary backup server of the previous
	// cycle as the caller knows it; when empty PlanCycle reads the manifests
	// on the rotation's servers.
	LastServer string `json:"last_server,omitempty"`
	// Differential plans a differential backup on the newest verified
	// full (diff_backup) instead of a full one.
	Differential bool `json:"differential,omitempty"`
	// AllocateSequence has the plan allocate the set's sequence number
	// too (AllocateSequence, by the plan's mode), sparing the cycle an
	// activity: Plan.Sequence.
	AllocateSequence bool `json:"allocate_sequence,omitempty"`
}

// Plan is what one cycle will do, decided from the configuration and the
// manifests already on the backup servers.
type Plan struct {
	// Database is the database's name as its instance spells it in
	// sys.databases (the start's name resolved by the instance's
	// collation): the cycle's workflow id, file names, manifests and search
	// attributes use it, whatever spelling the cycle was started with.
	Database string `json:"database"`
	// Instance is the source's configuration key: the SQL instance, or the
	// availability group of an availability database.
	Instance string `json:"instance"`
	// Replica is the SQL instance of Instance's availability group the
	// cycle backs up on: the one sys.fn_hadr_backup_is_preferred_replica
	// names (SQL Server's choice by the group's automated backup
	// preference); "" for a database of an instance. Sequence, Backup,
	// WriteManifest and StopStatements read from it.
	Replica string `json:"replica,omitempty"`
	// NotPreferred is set, and the cycle ends skipped with the reason
	// SkipNotPreferredReplica, when no replica of the group can back the
	// database up now: it says what each one answered.
	NotPreferred string `json:"not_preferred,omitempty"`
	// NoDifferentialBase is set, and a differential cycle ends skipped
	// with the reason SkipNoDifferentialBase, when no differential can be
	// proven now: no verified full to base it on, or the database's
	// differential base moved past it (diff.go). It says why.
	NoDifferentialBase string `json:"no_differential_base,omitempty"`
	// Entry is the databases: entry whose settings apply, when it is
	// spelled otherwise than Database (an entry "sales" for the database
	// Sales of a case-insensitive instance); every later activity gets it.
	Entry string `json:"entry,omitempty"`
	// Unresolved says why the name could not be resolved on the instance
	// (it was not reachable): the workflow waits and plans again, as for
	// a lost SQL host, before it runs anything under a name. "" when
	// resolved.
	Unresolved string `json:"unresolved,omitempty"`
	// Rotation lists the backup servers to try, the round-robin primary first
	// and then the others in rotation order (fail-over targets).
	Rotation []string `json:"rotation"`
	// LastServer is the previous primary and where that knowledge came from:
	// "caller", "manifests" or "none".
	LastServer       string `json:"last_server,omitempty"`
	LastServerSource string `json:"last_server_source"`
	Stripes          int    `json:"stripes"`
	// Remote is the backup server at the remote site: the copy target whose
	// verification instance restores and checks the set.
	Remote string `json:"remote"`
	// Remotes is the copy target for each server of the rotation, for when
	// the cycle fails over to another primary (copy_to unset: the next
	// server in the rotation). Missing entries mean Remote.
	Remotes map[string]string `json:"remotes,omitempty"`
	// CopyQueues maps a backup server to its task_queue, for the servers
	// that have one: the copy runs on a worker next to its source server,
	// else next to its destination (CopyQueue).
	CopyQueues     map[string]string `json:"copy_queues,omitempty"`
	VerifyInstance string            `json:"verify_instance"`
	KeepVerifyDB   bool              `json:"keep_verify_db,omitempty"`
	// Immutable is the object store (a kind: s3 backup server) that
	// receives a locked copy of the set once it is verified
	// (immutable_copy); "" for none.
	Immutable string `json:"immutable,omitempty"`
	// Evidence says the configuration keeps an evidence ledger with a
	// signing key: the verified set is recorded in it.
	Evidence bool `json:"evidence,omitempty"`
	// ProofSpace is what the database's copies take on the verification
	// instance at their peak with its log proof (log_backup only): the
	// standby copy stays beside the cycle's.
	ProofSpace *plan.ProofSpace `json:"proof_space,omitempty"`
	// MemoryBytes is BUFFERCOUNT x MAXTRANSFERSIZE x stripes, checked against
	// the memory budget.
	MemoryBytes int64  `json:"memory_bytes,omitempty"`
	Limits      Limits `json:"limits"`
	// Slots are what the cycle occupies while it runs, as a fleet run
	// counts it: its instance (or availability group) and the primary and
	// remote backup servers (and its immutable copy's object store), each
	// with its max_concurrent, in the one
	// order every cycle takes them in (SlotOrder).
	Slots []Slot `json:"slots,omitempty"`
	// Source is what the plan read from the source instance, Mode how this
	// run backs up, Budget the expected step durations and the timeouts
	// derived from them (in Limits), Warnings what the plan changed or
	// could not learn.
	Source   SourceFacts `json:"source"`
	Mode     BackupMode  `json:"mode"`
	Budget   plan.Budget `json:"budget"`
	Warnings []string    `json:"warnings,omitempty"`
	// Sequence is the set's sequence number, allocated by the plan when
	// PlanInput.AllocateSequence asked for it; 0 when it did not or could
	// not (the cycle allocates it then, waiting for its source as it does).
	Sequence int64 `json:"seq,omitempty"`
}

// Limits bound the waiting and the long steps of a cycle; zero values mean
// the workflow's defaults. PlanCycle derives the step timeouts from the
// database's size (internal/plan.Timeouts): XTimeout bounds one attempt of
// step X (StartToClose), XDeadline all its attempts (ScheduleToClose).
type Limits struct {
	HostWait   time.Duration `json:"host_wait,omitempty"`   // total wait for a lost SQL host
	ServerWait time.Duration `json:"server_wait,omitempty"` // total wait when no backup server is reachable
	// First and longest single wait of those two (doubling in between).
	WaitInitial  time.Duration `json:"wait_initial,omitempty"`
	WaitMax      time.Duration `json:"wait_max,omitempty"`
	CopyDeadline time.Duration `json:"copy_deadline,omitempty"`
	// CopyRetry and CopyRetryMax pace the copy's retries while the remote
	// server is away (first and longest interval).
	CopyRetry       time.Duration `json:"copy_retry,omitempty"`
	CopyRetryMax    time.Duration `json:"copy_retry_max,omitempty"`
	BackupTimeout   time.Duration `json:"backup_timeout,omitempty"`
	BackupDeadline  time.Duration `json:"backup_deadline,omitempty"`
	RestoreTimeout  time.Duration `json:"restore_timeout,omitempty"`
	RestoreDeadline time.Duration `json:"restore_deadline,omitempty"`
	// CheckDB's also bound the sanity checks, which read the copy too.
	CheckDBTimeout  time.Duration `json:"checkdb_timeout,omitempty"`
	CheckDBDeadline time.Duration `json:"checkdb_deadline,omitempty"`
	RestoreRounds   int           `json:"restore_rounds,omitempty"` // restores after a lost verification instance
	// Heartbeat is the HeartbeatTimeout of every activity after the plan:
	// how soon a dead worker's activity is retried elsewhere, and how long
	// a stalled worker, network or Temporal server may stay silent before
	// a running statement's attempt is given up.
	Heartbeat time.Duration `json:"heartbeat,omitempty"`
}

// SequenceInput asks for a new backup sequence number.
type SequenceInput struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	// Entry is the plan's Entry: the databases: entry Database is backed
	// up with, when spelled otherwise ("" for an entry spelled exactly
	// Database, or for a database a selection picks).
	Entry string `json:"entry,omitempty"`
	// Method is the plan's sequence method for this run (Plan.Mode); ""
	// means the configured one.
	Method string `json:"method,omitempty"`
	// Replica is the plan's (Plan.Replica).
	Replica string `json:"replica,omitempty"`
}

// Stripe is one backup file of a set.
type Stripe struct {
	Name   string `json:"name"`             // file name, <db>_<seq:08d>_<i>of<n>.bak
	Path   string `json:"path"`             // as SQL Server sees it (UNC or local path)
	Size   int64  `json:"size,omitempty"`   // bytes
	SHA256 string `json:"sha256,omitempty"` // hex, once known
}

// BackupInput runs BACKUP DATABASE for one sequence to one backup server.
type BackupInput struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	// Entry is the plan's Entry: the databases: entry Database is backed
	// up with, when spelled otherwise ("" for an entry spelled exactly
	// Database, or for a database a selection picks).
	Entry    string `json:"entry,omitempty"`
	Sequence int64  `json:"seq"`
	Server   string `json:"server"`
	Stripes  int    `json:"stripes"`
	// Mode is the plan's (compression, COPY_ONLY); nil means the
	// configured ones.
	Mode *BackupMode `json:"mode,omitempty"`
	// Replica is the plan's (Plan.Replica).
	Replica string `json:"replica,omitempty"`
}

// BackupOutput is a finished backup.
type BackupOutput struct {
	Stripes  []Stripe      `json:"stripes"`
	Pages    int64         `json:"pages,omitempty"`
	Bytes    int64         `json:"bytes"`
	Duration time.Duration `json:"duration"`
	// Reattached is true when a retry found the statement still running (or
	// already finished) instead of starting it again.
	Reattached bool `json:"reattached,omitempty"`
	// MaxTransferSize is the MAXTRANSFERSIZE the BACKUP sent (0: none).
	MaxTransferSize int `json:"max_transfer_size,omitempty"`
}

// BackupFailure is attached as details to a failed Backup's ApplicationError:
// how far the statement got, for the failed manifest and the workflow's
// decision (a started backup leaves partial files: new sequence).
type BackupFailure struct {
	Started bool    `json:"started"`
	Percent float64 `json:"percent"`
}

// ManifestInput writes the manifest of a finished backup (state written) on
// the primary server.
type ManifestInput struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	// Entry is the plan's Entry: the databases: entry Database is backed
	// up with, when spelled otherwise ("" for an entry spelled exactly
	// Database, or for a database a selection picks).
	Entry    string       `json:"entry,omitempty"`
	Sequence int64        `json:"seq"`
	Server   string       `json:"server"`
	Backup   BackupOutput `json:"backup"`
	// Replica is the plan's (Plan.Replica): RESTORE HEADERONLY runs there.
	Replica string `json:"replica,omitempty"`
}

// ManifestOutput describes the written manifest.
type ManifestOutput struct {
	Manifest      string   `json:"manifest"` // file name beside the stripes
	BackupSetGUID string   `json:"backup_set_guid,omitempty"`
	Stripes       []Stripe `json:"stripes"` // with sizes and hashes
}

// CopyInput copies a set from the primary server to the remote one.
type CopyInput struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	// Entry is the plan's Entry: the databases: entry Database is backed
	// up with, when spelled otherwise ("" for an entry spelled exactly
	// Database, or for a database a selection picks).
	Entry    string `json:"entry,omitempty"`
	Sequence int64  `json:"seq"`
	From     string `json:"from"`
	To       string `json:"to"`
}

// CopyOutput is a finished copy.
type CopyOutput struct {
	Bytes int64 `json:"bytes"` // size of the set
	// Sent is what the final attempt wrote to the remote server; Resumed
	// the bytes it did not send again because an earlier attempt's
	// checkpoint (heartbeat) confirmed them.
	Sent    int64 `json:"sent"`
	Resumed int64 `json:"resumed,omitempty"`
	// Resent is what all attempts together sent more than once: the price
	// of the crashes the copy went through (0 without one).
	Resent   int64         `json:"resent,omitempty"`
	Duration time.Duration `json:"duration"`
}

// VerifyInput names a set on the remote server; the activities restore it
// into the database verify_name gives on that server's verification instance.
type VerifyInput struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	// Entry is the plan's Entry: the databases: entry Database is backed
	// up with, when spelled otherwise ("" for an entry spelled exactly
	// Database, or for a database a selection picks).
	Entry    string `json:"entry,omitempty"`
	Sequence int64  `json:"seq"`
	Server   string `json:"server"`
	// OwnRestore tells DropVerifyDB that this run sent a RESTORE into the
	// verification database (a cancel cut it short): a copy RESTORING
	// from it may be dropped.
	OwnRestore bool `json:"own_restore,omitempty"`
	// Cleanup tells DropVerifyDB that the set is verified: the drop is
	// housekeeping, with a short login (CleanupConnectTimeout), and an
	// unreachable instance is not retried: the copy is left to the next
	// cycle.
	Cleanup bool `json:"cleanup,omitempty"`
	// SourceUTCOffsetMinutes is the source server's offset from UTC as the
	// plan read it (SourceFacts), for the sanity checks' max_age; nil when
	// unknown.
	SourceUTCOffsetMinutes *int `json:"source_utc_offset_minutes,omitempty"`
}

// StepOutput is the measured result of a verification step.
type StepOutput struct {
	// VerifyDatabase is the restored copy's name on the verification instance.
	VerifyDatabase string        `json:"verify_database,omitempty"`
	Duration       time.Duration `json:"duration"`
	Bytes          int64         `json:"bytes,omitempty"`
	Checks         int           `json:"checks,omitempty"` // sanity checks run
	Reattached     bool          `json:"reattached,omitempty"`
}

// Timings are the measured times of a cycle.
type Timings struct {
	Backup  time.Duration `json:"backup"`
	Copy    time.Duration `json:"copy"`
	Restore time.Duration `json:"restore"`
	CheckDB time.Duration `json:"checkdb"`
	Sanity  time.Duration `json:"sanity"`
	// Total is backup + copy + restore + CHECKDB: the seed's backup cycle
	// time, i.e. the measured time from "back up" to "proven restorable".
	Total time.Duration `json:"total"`
}

// MarkInput moves a set's manifest to a final state on every listed server.
type MarkInput struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	// Entry is the plan's Entry: the databases: entry Database is backed
	// up with, when spelled otherwise ("" for an entry spelled exactly
	// Database, or for a database a selection picks).
	Entry    string   `json:"entry,omitempty"`
	Sequence int64    `json:"seq"`
	Servers  []string `json:"servers"`
	Timings  Timings  `json:"timings"`
	// For MarkFailed and MarkCancelled: the step that failed or was
	// cancelled, the error type and why.
	Step      string `json:"step,omitempty"`
	ErrorType string `json:"error_type,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Evidence is what MarkFailed marks the set failed on (catalog.Evidence);
	// without it nothing is marked.
	Evidence string `json:"evidence,omitempty"`
}

// RetentionInput applies the database's retention policy on servers.
type RetentionInput struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	// Entry is the plan's Entry: the databases: entry Database is backed
	// up with, when spelled otherwise ("" for an entry spelled exactly
	// Database, or for a database a selection picks).
	Entry   string   `json:"entry,omitempty"`
	Servers []string `json:"servers"`
	// Protect is the set this cycle just verified: never deleted, whatever
	// the policy says.
	Protect int64 `json:"protect"`
}

// RetentionOutput lists what retention deleted.
type RetentionOutput struct {
	Deleted []SetRef `json:"deleted,omitempty"`
	Kept    int      `json:"kept"`
	// DeletedChains are the log chains whose records went (each wholly
	// older than the oldest kept verified full), DeletedLogs how many log
	// backup files went with them or before them.
	DeletedChains []ChainRef `json:"deleted_chains,omitempty"`
	DeletedLogs   int        `json:"deleted_logs,omitempty"`
}

// ChainRef names one log chain of a database on one server.
type ChainRef struct {
	Server string `json:"server"`
	Chain  int64  `json:"chain"`
}

// SetRef names one backup set on one server.
type SetRef struct {
	Server   string `json:"server"`
	Sequence int64  `json:"seq"`
	State    string `json:"state,omitempty"`
}

// Slot kinds: what a cycle occupies (Plan.Slots).
const (
	SlotInstance = "instance"
	SlotServer   = "server"
)

// Slot is one resource a cycle occupies and how many cycles may occupy it
// at once (its max_concurrent).
type Slot struct {
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	Limit int    `json:"limit"`
	// Free are slot indexes no cycle held when the plan was made
	// (CycleDeps.FreeSlots): the cycle tries them first, saving a child
	// start that fails on a held slot. A hint only: a slot may be taken
	// meanwhile, and the others are tried after them.
	Free []int `json:"free,omitempty"`
}

// RemoteFor is the copy target of a set written to primary.
func (p Plan) RemoteFor(primary string) string {
	if r := p.Remotes[primary]; r != "" {
		return r
	}
	return p.Remote
}

// CopyQueue is the task queue of the copy from one backup server to
// another: the source server's task_queue, else the destination's; ""
// means the cycle's own task queue.
func (p Plan) CopyQueue(from, to string) string {
	if q := p.CopyQueues[from]; q != "" {
		return q
	}
	return p.CopyQueues[to]
}
