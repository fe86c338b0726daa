package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// A database's drill record (tsql.SetNames.DrillRecord) lives beside the
// manifests on every backup server a drill read its backups from. It holds
// the newest MaxDrills drills: what each restored (the full, the logs),
// the point asked and the recovery point reached, the measured time to
// recover and each step's time, the checks on the recovered copy, and
// how it ended; and the own-copy record of the newest drill's scratch
// copy, by which a later drill knows a copy a crashed one left is the
// product's. Signed like chain records, with a purpose of its own.

// DrillSchemaVersion is written into every drill record.
const DrillSchemaVersion = 1

const purposeDrill = "backupcycle drill"

// MaxDrills is how many drills a record keeps.
const MaxDrills = 30

// Drill outcomes.
const (
	DrillPassed = "passed"
	DrillFailed = "failed"
)

// DrillStepTimes are a drill's measured step times. Diff is the
// differential's restore (0: none restored, or a drill recorded before it
// was measured apart).
type DrillStepTimes struct {
	Prepare  time.Duration `json:"prepare"`
	Plan     time.Duration `json:"plan"`
	Full     time.Duration `json:"full"`
	Diff     time.Duration `json:"diff,omitempty"`
	Logs     time.Duration `json:"logs"`
	Recovery time.Duration `json:"recovery"`
	Checks   time.Duration `json:"checks"`
	Drop     time.Duration `json:"drop"`
}

// DrillImmutable is the source of a drill from the immutable copy.
type DrillImmutable struct {
	// Store is the object store (a kind: s3 backup server), Location its
	// bucket and prefix; Objects the objects staged (the stripes of the
	// set restored and its manifest).
	Store    string   `json:"store"`
	Location string   `json:"location,omitempty"`
	Sequence int64    `json:"sequence"`
	Objects  []string `json:"objects"`
	// Staging is the backup server the objects were staged on, in Dir;
	// Removed says the staged files were removed after the drill.
	Staging string `json:"staging"`
	Dir     string `json:"dir"`
	Removed bool   `json:"removed"`
}

// DrillResult is one drill.
type DrillResult struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	// Instance and Database are where the scratch copy was restored.
	Instance string `json:"instance"`
	Database string `json:"database"`
	// From is any, remote or immutable; Servers the backup servers read.
	From    string   `json:"from"`
	Servers []string `json:"servers,omitempty"`
	// Immutable is the immutable copy a drill from it (From immutable)
	// restored, staged on a backup server first; nil for the others.
	Immutable *DrillImmutable `json:"immutable,omitempty"`
	// Point is what was asked ("latest" or an instant); RecoveryPoint
	// what the restore reached (every commit before it is in the copy),
	// RecoveryPointBound the instant no commit after which is (for the
	// latest, the last backup's finish), RecoveryPointFrom how it is known.
	Point             string    `json:"point"`
	RecoveryPoint     time.Time `json:"recovery_point,omitzero"`
	RecoveryPointFrom string    `json:"recovery_point_from,omitempty"`
	// Zero in a record written before bounds were recorded.
	RecoveryPointBound time.Time `json:"recovery_point_bound,omitzero"`
	// Sequence is the full restored; Chain, FirstLog and LastLog the log
	// backups after it.
	Sequence int64 `json:"sequence,omitempty"`
	Chain    int64 `json:"chain,omitempty"`
	FirstLog int64 `json:"first_log,omitempty"`
	LastLog  int64 `json:"last_log,omitempty"`
	Bytes    int64 `json:"bytes,omitempty"`
	// RTO is the measured time to recover: the Recover's start to the
	// database online. Steps are each step's time.
	RTO   time.Duration  `json:"rto"`
	Steps DrillStepTimes `json:"steps"`
	// LogBytes are the restored log backups' file bytes, LogFastest the
	// shortest time one of them took (from the end of the one before):
	// what the next prediction's per-log cost is taken from. Zero in a
	// drill recorded before they were.
	LogBytes   int64         `json:"log_bytes,omitempty"`
	LogFastest time.Duration `json:"log_fastest,omitempty"`
	// Predicted is what the plan predicted of the steps before the drill
	// ran (nil: a drill recorded before predictions were); PredictionError
	// each predicted step's measured time against it.
	Predicted       *RecoveryPrediction `json:"predicted,omitempty"`
	PredictionError []StepError         `json:"prediction_error,omitempty"`
	// Sanity are the sanity checks that held; CheckDB whether CHECKDB
	// ran, CheckDBClean whether it found nothing.
	Sanity       []string `json:"sanity,omitempty"`
	CheckDB      bool     `json:"checkdb"`
	CheckDBClean bool     `json:"checkdb_clean,omitempty"`
	// Dropped says the scratch copy was dropped; DropError why not.
	Dropped   bool   `json:"dropped"`
	DropError string `json:"drop_error,omitempty"`
	// Outcome is DrillPassed or DrillFailed; ErrorType and Error say why
	// a drill failed (the ApplicationError type of activities/errors.go).
	Outcome   string    `json:"outcome"`
	ErrorType string    `json:"error_type,omitempty"`
	Error     string    `json:"error,omitempty"`
	StartedAt time.Time `json:"started_at"`
	At        time.Time `json:"at"` // finished (worker's clock)
}

// DrillRecord is a database's drill record.
type DrillRecord struct {
	SchemaVersion  int    `json:"schema_version"`
	Database       string `json:"database"`
	SourceInstance string `json:"source_instance"`
	// Scratch is the own-copy record of the newest drill's scratch copy
	// (its BackupSetGUID empty until the Recover chose the full).
	Scratch   *VerifyCopy   `json:"scratch,omitempty"`
	Drills    []DrillResult `json:"drills,omitempty"` // oldest first
	CreatedAt time.Time     `json:"created_at"`
	UpdatedAt time.Time     `json:"updated_at"`

	Signature *Signature `json:"signature,omitempty"`
	Auth      Auth       `json:"-"`
}

// NewDrillRecord starts the drill record of (instance, db).
func NewDrillRecord(instance, db string, at time.Time) *DrillRecord {
	at = at.UTC()
	return &DrillRecord{SchemaVersion: DrillSchemaVersion, Database: db, SourceInstance: instance, CreatedAt: at, UpdatedAt: at}
}

// FileName is the record's file name.
func (r *DrillRecord) FileName() string {
	return tsql.NamesOf(r.SourceInstance, r.Database).DrillRecord()
}

// Trusted reports whether the record may steer the product.
func (r *DrillRecord) Trusted() bool { return r.Auth.Trusted() }

// Last is the newest drill; nil for none.
func (r *DrillRecord) Last() *DrillResult {
	if r == nil || len(r.Drills) == 0 {
		return nil
	}
	return &r.Drills[len(r.Drills)-1]
}

// Add appends a drill (replacing one of the same run: a retried write),
// keeping the newest MaxDrills.
func (r *DrillRecord) Add(d DrillResult) {
	for i := range r.Drills {
		if r.Drills[i].WorkflowID == d.WorkflowID && r.Drills[i].RunID == d.RunID {
			r.Drills[i] = d
			return
		}
	}
	r.Drills = append(r.Drills, d)
	if n := len(r.Drills); n > MaxDrills {
		r.Drills = append([]DrillResult(nil), r.Drills[n-MaxDrills:]...)
	}
}

// Validate checks that the record is complete and consistent.
func (r *DrillRecord) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if r.SchemaVersion != DrillSchemaVersion {
		bad("schema_version %d is not supported (this build reads %d)", r.SchemaVersion, DrillSchemaVersion)
	}
	if r.SourceInstance == "" {
		bad("source_instance is empty")
	}
	if err := tsql.CheckIdent(r.Database); err != nil {
		bad("database: %w", err)
	}
	if r.CreatedAt.IsZero() || r.UpdatedAt.IsZero() {
		bad("created_at and updated_at must be set")
	}
	if v := r.Scratch; v != nil && (v.VerifyInstance == "" || tsql.CheckIdent(v.VerifyDatabase) != nil || v.InstanceTime.IsZero()) {
		bad("scratch: a copy names its instance and database, and the instance's clock before its RESTORE")
	}
	if len(r.Drills) > MaxDrills {
		bad("%d drills, at most %d", len(r.Drills), MaxDrills)
	}
	for i, d := range r.Drills {
		if d.WorkflowID == "" || d.Instance == "" || d.Database == "" || d.StartedAt.IsZero() || d.At.IsZero() {
			bad("drills[%d]: workflow_id, instance, database, started_at and at must be set", i)
		}
		if d.Outcome != DrillPassed && d.Outcome != DrillFailed {
			bad("drills[%d]: outcome %q is neither %s nor %s", i, d.Outcome, DrillPassed, DrillFailed)
		}
		if d.RTO < 0 || d.LogBytes < 0 || d.LogFastest < 0 {
			bad("drills[%d]: rto, log_bytes and log_fastest must not be negative", i)
		}
		if p := d.Predicted; p != nil && (p.Full < 0 || p.Diff < 0 || p.Logs < 0 || p.Recovery < 0 || p.CheckDB < 0 || p.LogOverhead < 0) {
			bad("drills[%d]: a predicted time is negative", i)
		}
	}
	if g := r.Signature; g != nil && (!keyIDRE.MatchString(g.KeyID) || !hexSHA256.MatchString(g.HMACSHA256)) {
		bad("signature needs a key_id and hmac_sha256 of 64 lower-case hex digits")
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("drill record %s: %w", r.FileName(), err)
	}
	return nil
}

var drillKind = recordKind{what: "drill record", purpose: purposeDrill, version: DrillSchemaVersion}

func (r *DrillRecord) seal() (*int, **Signature, *Auth) {
	return &r.SchemaVersion, &r.Signature, &r.Auth
}

// EncodeDrill validates r and renders it signed with keys (unsigned with
// nil keys).
func EncodeDrill(r *DrillRecord, keys *Keys) ([]byte, error) { return encodeRecord(r, drillKind, keys) }

// DecodeDrill parses a drill record strictly and authenticates it.
func DecodeDrill(data []byte, keys *Keys) (*DrillRecord, error) {
	return decodeRecord[DrillRecord, *DrillRecord](data, drillKind, keys)
}

// LoadDrill reads the drill record of (instance, db); a missing one is
// nil without error.
func LoadDrill(ctx context.Context, fsys FS, keys *Keys, instance, db string) (*DrillRecord, error) {
	return loadOneRecord(ctx, fsys, keys, tsql.NamesOf(instance, db).DrillRecord(), drillKind, instance, db,
		func(r *DrillRecord) (string, string) { return r.SourceInstance, r.Database })
}

// SaveDrill writes r signed with keys, atomically.
func SaveDrill(ctx context.Context, fsys FS, keys *Keys, r *DrillRecord) error {
	return saveRecord(ctx, fsys, r, drillKind, keys)
}
