// Package recover holds the activities of the Recover workflow: a
// database restored to a point in time (or to the newest point its
// backups reach) on an instance of the operator's choice, from the
// verified full backups and the log chain on whichever backup servers are
// reachable, the remote site's copies when the primary site is gone (seed
// 000 plans the copy for that night). Each step is one activity, as the
// workflow reads: PlanRecover (the restore plan and every check that
// would make it fail late), RestoreFull, RestoreLog per log backup,
// FinishRecover. A retried step finds what an earlier attempt left (a
// RESTORE still running, the target's redo LSN, msdb's restore history)
// and never restores anything twice.
package recover

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/recovery"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Activities are the Recover workflow's activities. The worker registers
// them beside the cycle's (workflows.Register); they share its
// dependencies through Base.
type Activities struct {
	// Base carries the dependencies; a field, not embedded, so that
	// registering Activities registers only this package's methods.
	Base *activities.Activities
}

// New returns the recover activities over base's dependencies.
func New(base *activities.Activities) *Activities { return &Activities{Base: base} }

// Steps of a recover, as in logs, the `recover` query and the progress
// signal.
const (
	StepPlan    = "recover-plan"
	StepTailLog = "tail-log"
	StepFull    = "restore-full"
	StepDiff    = "restore-diff"
	StepLogs    = "restore-logs"
	StepFinish  = "recover-finish"
	StepDone    = "done"
	StepStopped = "stopped"
)

// Request is what a recover is asked (the workflow's input, the Web UI's
// JSON): configuration names, the point, and what may be done to the
// target. No secret: the instances' credentials stay in the worker's
// configuration.
type Request struct {
	// Database and Instance name the source as configured (Instance may
	// be left out when the name is configured once).
	Database string `json:"database"`
	Instance string `json:"instance,omitempty"`
	// ToInstance is the configured SQL instance to restore on; As the
	// database's name there (default: Database).
	ToInstance string `json:"to_instance"`
	As         string `json:"as,omitempty"`
	// AsOf is the point (an instant, RFC 3339 with its offset); Latest
	// asks for the newest point the backups reach. Exactly one.
	AsOf   time.Time `json:"as_of,omitzero"`
	Latest bool      `json:"latest,omitempty"`
	// Replace allows restoring over a database of that name on the target.
	Replace bool `json:"replace,omitempty"`
	// NoRecovery leaves the database RESTORING (more logs, or a
	// differential, may follow by hand).
	NoRecovery bool `json:"norecovery,omitempty"`
	// TailLog takes a tail-log backup of the source first (BACKUP LOG
	// ... WITH NORECOVERY, as the log chain's next log backup), so that
	// no transaction committed before the recover is lost: the restore
	// then ends with it. It leaves the source database RESTORING.
	TailLog bool `json:"tail_log,omitempty"`
	// DataDir and LogDir are where the files go, as the target sees
	// them; default its SERVERPROPERTY('InstanceDefaultDataPath') and
	// ('InstanceDefaultLogPath').
	DataDir string `json:"data_dir,omitempty"`
	LogDir  string `json:"log_dir,omitempty"`
	// Only, when given, are the only backup servers read (a drill's from:
	// remote reads the copy targets alone, as if the primary site were
	// gone); the others are named not read.
	Only []string `json:"only,omitempty"`
	// Staged, when given, is where a drill from the immutable copy staged
	// its files: the plan reads the manifests there alone (no log chain:
	// the object store holds none) and restores from there.
	Staged *Staged `json:"staged,omitempty"`
}

// Staged is a directory of a backup server files were staged in.
type Staged struct {
	Server string `json:"server"`
	Dir    string `json:"dir"`
}

// CheckStagingDir refuses a staging directory outside
// config.StagingDir: staging never writes, reads or removes anything
// beside the sets.
func CheckStagingDir(dir string) error {
	rest, ok := strings.CutPrefix(dir, config.StagingDir+"/")
	if !ok || rest == "" || path.Clean(dir) != dir || strings.Contains(dir, "\\") {
		return fmt.Errorf("staging directory %q is not under %s/", dir, config.StagingDir)
	}
	return nil
}

// Name is the database's name on the target.
func (r Request) Name() string {
	if r.As != "" {
		return r.As
	}
	return r.Database
}

// Point is the request's point.
func (r Request) Point() recovery.Point { return recovery.Point{Latest: r.Latest, At: r.AsOf.UTC()} }

// Check refuses a request that names no database, target or point, or
// both points.
func (r Request) Check() error {
	var bad []string
	if r.Database == "" {
		bad = append(bad, `"database" (the source database as configured)`)
	}
	if r.ToInstance == "" {
		bad = append(bad, `"to_instance" (the configured SQL instance to restore on)`)
	}
	if r.Latest == !r.AsOf.IsZero() {
		bad = append(bad, `exactly one of "as_of" (an instant, RFC 3339 with its offset, e.g. "2026-03-01T02:15:00Z") and "latest": true`)
	}
	if len(bad) > 0 {
		return fmt.Errorf("recover input: give %s, e.g. %s", strings.Join(bad, ", "),
			`{"database":"Sales","to_instance":"sql02","as_of":"2026-03-01T02:15:00Z"}`)
	}
	if err := tsql.CheckIdent(r.Name()); err != nil {
		return fmt.Errorf("recover input: the name on the target: %w", err)
	}
	if r.Staged != nil {
		if !r.Latest {
			return errors.New(`recover input: "staged" restores the newest set staged ("latest": true): no log backup is staged`)
		}
		if err := CheckStagingDir(r.Staged.Dir); err != nil {
			return fmt.Errorf("recover input: %w", err)
		}
	}
	return nil
}

// PlanInput is PlanRecover's input: the request and, once it was taken,
// the tail-log backup the restore must end with (its JSON is the
// request's, with "tail" beside).
type PlanInput struct {
	Request
	Tail *Tail `json:"tail,omitempty"`
}

// Tail is the tail-log backup a recover took: the log chain's log Number
// of Chain.
type Tail struct {
	Chain  int64     `json:"chain"`
	Number int64     `json:"number"`
	Server string    `json:"server"`
	Finish time.Time `json:"finish"`
}

// Plan is what PlanRecover found and checked: the restore sequence, where
// the files go, and the record of the target before anything is restored.
type Plan struct {
	// Database and Instance are the source's configuration keys; Target
	// and Name where it is restored.
	Database string        `json:"database"`
	Instance string        `json:"instance"`
	Target   string        `json:"target"`
	Name     string        `json:"name"`
	Restore  recovery.Plan `json:"restore"`
	// Moves put every file of the full into DataDir and LogDir (from
	// DirsFrom: the request, or the target's defaults); DataBytes and
	// LogBytes are their allocated sizes (RESTORE FILELISTONLY).
	Moves     []tsql.Move `json:"moves"`
	DataDir   string      `json:"data_dir"`
	LogDir    string      `json:"log_dir"`
	DirsFrom  string      `json:"dirs_from"`
	DataBytes int64       `json:"data_bytes"`
	LogBytes  int64       `json:"log_bytes"`
	// BufferCount and MaxTransferSize are the full's BACKUP tuning, as
	// its manifest records it (0: SQL Server's default).
	BufferCount     int `json:"buffer_count,omitempty"`
	MaxTransferSize int `json:"max_transfer_size,omitempty"`
	// SourceVersion wrote the full; TargetVersion restores it.
	SourceVersion string `json:"source_version,omitempty"`
	TargetVersion string `json:"target_version"`
	TDEThumbprint string `json:"tde_thumbprint,omitempty"`
	// EncryptorThumbprint is the certificate the full was encrypted with
	// (BACKUP ... WITH ENCRYPTION), "" when it was not.
	EncryptorThumbprint string `json:"encryptor_thumbprint,omitempty"`
	// EncryptorType is CERTIFICATE or ASYMMETRIC KEY (an EKM provider's
	// key), as its header says.
	EncryptorType string `json:"encryptor_type,omitempty"`
	// Replaces describes the database of that name the restore replaces
	// ("" for none).
	Replaces string `json:"replaces,omitempty"`
	// Intent is the target as it was before the RESTORE (its clock, the
	// ids of its databases, the one replaced): how a retry tells the
	// database this recover restored from any other.
	Intent *catalog.VerifyCopy `json:"intent"`
	// OverSource: the restore goes over the source database itself.
	OverSource bool `json:"over_source,omitempty"`
	// Unreachable are the backup servers not read, each with why.
	Unreachable []string `json:"unreachable,omitempty"`
	Warnings    []string `json:"warnings,omitempty"`
	// Predicted is each step's time as the plan predicts it from the
	// rates known before the restore (Predict); nil in a plan made before
	// recovers predicted.
	Predicted *catalog.RecoveryPrediction `json:"predicted,omitempty"`
	// Timeouts of the steps: one RESTORE DATABASE attempt, one RESTORE
	// LOG attempt, and the heartbeat.
	RestoreTimeout   time.Duration `json:"restore_timeout"`
	LogTimeout       time.Duration `json:"log_timeout"`
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout"`
}

// Target names the database restored and where: what each restoring step
// is given besides its backup.
type Target struct {
	Database string `json:"database"`
	Instance string `json:"instance,omitempty"`
	// To is the target instance, Name the database there; AsGiven says
	// the request named it (--as), which restoring over the source
	// itself needs (with Replace).
	To      string `json:"to"`
	Name    string `json:"name"`
	AsGiven bool   `json:"as_given,omitempty"`
	Replace bool   `json:"replace,omitempty"`
}

// RestoreFullInput asks for the full (NORECOVERY) into the target.
type RestoreFullInput struct {
	Target
	Step            recovery.Step       `json:"step"`
	Moves           []tsql.Move         `json:"moves"`
	BufferCount     int                 `json:"buffer_count,omitempty"`
	MaxTransferSize int                 `json:"max_transfer_size,omitempty"`
	Intent          *catalog.VerifyCopy `json:"intent"`
}

// StepOutput is what a restoring step did.
type StepOutput struct {
	// Server is the backup server the files were read from.
	Server string `json:"server,omitempty"`
	// Skipped: an earlier attempt had restored it already (msdb and the
	// target say so); nothing was sent again. Reattached: an earlier
	// attempt's statement was still running and was waited for.
	Skipped    bool `json:"skipped,omitempty"`
	Reattached bool `json:"reattached,omitempty"`
	// Copy is the record of the target after the full (RestoreFull):
	// confirmed by msdb.
	Copy *catalog.VerifyCopy `json:"copy,omitempty"`
	// RedoLSN is where roll forward continues on the target now;
	// Reached: a log stopped at the STOPAT point inside it.
	RedoLSN string        `json:"redo_lsn,omitempty"`
	Reached bool          `json:"reached,omitempty"`
	Bytes   int64         `json:"bytes"`
	Took    time.Duration `json:"took"`
}

// RestoreLogInput asks for one log backup (NORECOVERY, STOPAT when given)
// into the target the full started.
type RestoreLogInput struct {
	Target
	Step recovery.Step `json:"step"`
	// Index of Count: this log's place in the plan, for logs and progress.
	Index int `json:"index"`
	Count int `json:"count"`
	// StopAt is the STOPAT instant (zero: none) and StopAtOffsetMinutes
	// the source's offset from UTC it is written with.
	StopAt              time.Time           `json:"stop_at,omitzero"`
	StopAtOffsetMinutes int                 `json:"stop_at_offset_minutes,omitempty"`
	Copy                *catalog.VerifyCopy `json:"copy"`
}

// RestoreDiffInput asks for the plan's differential (NORECOVERY) on top of
// the full the target was restored from.
type RestoreDiffInput struct {
	Target
	Step recovery.Step       `json:"step"`
	Copy *catalog.VerifyCopy `json:"copy"`
}

// FinishInput ends the restore sequence.
type FinishInput struct {
	Target
	Copy       *catalog.VerifyCopy `json:"copy"`
	NoRecovery bool                `json:"norecovery,omitempty"`
}

// FinishOutput is the target at the end.
type FinishOutput struct {
	State   string `json:"state"` // ONLINE, or RESTORING with NoRecovery
	RedoLSN string `json:"redo_lsn,omitempty"`
	// LogsRestored are the log backups msdb says were restored into the
	// database since its full, in order (backup set GUIDs): each exactly
	// once.
	LogsRestored []string      `json:"logs_restored"`
	Took         time.Duration `json:"took"`
}
