// Package catalog is the backup-set manifest: a JSON file written next to the
// stripes on every backup server that holds them, recording what the set is
// (database, sequence, stripes with size and SHA-256, options, RESTORE
// HEADERONLY facts), how far it got (written -> copied -> restored -> checked
// -> verified, or failed) and how long each step took. Retention decisions
// are pure functions over manifests (retention.go).
package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// SchemaVersion is written into every manifest. Decode refuses manifests of a
// newer version rather than misreading them.
const SchemaVersion = 1

// State is how far a backup set got. A set counts as a good backup only in
// StateVerified (seed 000, "When Is a Backup Valid?").
type State string

const (
	StateWritten  State = "written"  // BACKUP finished on the primary server, headers read
	StateCopied   State = "copied"   // every stripe copied to the remote server and verified by size + SHA-256
	StateRestored State = "restored" // restored on the verification instance from the remote copies
	StateChecked  State = "checked"  // DBCC CHECKDB clean
	StateVerified State = "verified" // sanity checks passed: a valid backup
	StateFailed   State = "failed"   // a step failed; see Failure. Never restored from.
)

// order gives the position of each non-failed state in the chain.
var order = map[State]int{StateWritten: 0, StateCopied: 1, StateRestored: 2, StateChecked: 3, StateVerified: 4}

// Valid reports whether s is a known state.
func (s State) Valid() bool { _, ok := order[s]; return ok || s == StateFailed }

// Terminal reports whether no further transition is allowed.
func (s State) Terminal() bool { return s == StateVerified || s == StateFailed }

// Step names a timed step of the cycle (also the BackupStep search attribute).
type Step string

const (
	StepBackup  Step = "backup"
	StepCatalog Step = "catalog"
	StepCopy    Step = "copy"
	StepRestore Step = "restore"
	StepCheckDB Step = "checkdb"
	StepSanity  Step = "sanity"
)

// Valid reports whether s is a known step.
func (s Step) Valid() bool {
	switch s {
	case StepBackup, StepCatalog, StepCopy, StepRestore, StepCheckDB, StepSanity:
		return true
	}
	return false
}

// Stripe is one backup file of the set.
type Stripe struct {
	Name   string `json:"name"`             // file name, tsql.StripeFileName
	Size   int64  `json:"size"`             // bytes
	SHA256 string `json:"sha256,omitempty"` // lower-case hex; filled in by the copy step
}

// Options are the BACKUP options the set was made with.
type Options struct {
	Compression     bool `json:"compression"`
	Checksum        bool `json:"checksum"`
	CopyOnly        bool `json:"copy_only"`
	BufferCount     int  `json:"buffercount"`     // 0: SQL Server's default
	MaxTransferSize int  `json:"maxtransfersize"` // bytes; 0: default
	BlockSize       int  `json:"blocksize"`       // bytes; 0: default
	Stripes         int  `json:"stripes"`
}

// Header holds the RESTORE HEADERONLY facts of the set.
type Header struct {
	BackupSetGUID        string    `json:"backup_set_guid"`
	FirstLSN             string    `json:"first_lsn"` // numeric(25,0) as decimal digits
	LastLSN              string    `json:"last_lsn"`
	DatabaseBackupLSN    string    `json:"database_backup_lsn,omitempty"`
	BackupStart          time.Time `json:"backup_start"`
	BackupFinish         time.Time `json:"backup_finish"`
	BackupSize           int64     `json:"backup_size"`            // BackupSize: uncompressed bytes
	CompressedBackupSize int64     `json:"compressed_backup_size"` // bytes in the files
	ServerName           string    `json:"server_name,omitempty"`
	DatabaseName         string    `json:"database_name,omitempty"`
	HasBackupChecksums   bool      `json:"has_backup_checksums"`
}

// Timing is the wall-clock span of one step.
type Timing struct {
	Start           time.Time `json:"start"`
	End             time.Time `json:"end"`
	DurationSeconds float64   `json:"duration_seconds"`
}

// Transition records one state change.
type Transition struct {
	State State     `json:"state"`
	At    time.Time `json:"at"`
}

// Failure says which step failed and why.
type Failure struct {
	Step   Step      `json:"step"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Manifest describes one backup set. Field names are part of the on-disk
// format: change them only with a new SchemaVersion.
type Manifest struct {
	SchemaVersion  int      `json:"schema_version"`
	Database       string   `json:"database"`        // source database name, unmangled
	SourceInstance string   `json:"source_instance"` // the config name of the SQL instance, e.g. sql01
	Sequence       int64    `json:"sequence"`
	PrimaryServer  string   `json:"primary_server"` // backup server the BACKUP wrote to (round robin)
	Servers        []string `json:"servers"`        // servers holding a complete copy
	Stripes        []Stripe `json:"stripes"`
	Options        Options  `json:"options"`
	Header         *Header  `json:"header,omitempty"`

	State    State           `json:"state"`
	History  []Transition    `json:"history"`
	Failure  *Failure        `json:"failure,omitempty"`
	Timings  map[Step]Timing `json:"timings,omitempty"`
	VerifyDB string          `json:"verify_database,omitempty"` // name of the restored copy

	WorkflowID string    `json:"workflow_id"`
	RunID      string    `json:"run_id"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"` // last transition; retention ages sets by it
}

// New starts a manifest in StateWritten.
func New(db string, seq int64, at time.Time) *Manifest {
	at = at.UTC()
	return &Manifest{
		SchemaVersion: SchemaVersion,
		Database:      db,
		Sequence:      seq,
		State:         StateWritten,
		History:       []Transition{{State: StateWritten, At: at}},
		CreatedAt:     at,
		UpdatedAt:     at,
	}
}

// FileName is the manifest's file name, tsql.ManifestFileName.
func (m *Manifest) FileName() string { return tsql.ManifestFileName(m.Database, m.Sequence) }

// StripeNames lists the stripe file names in order.
func (m *Manifest) StripeNames() []string {
	out := make([]string, len(m.Stripes))
	for i, s := range m.Stripes {
		out[i] = s.Name
	}
	return out
}

// ErrIllegalTransition is wrapped by Advance and Fail.
var ErrIllegalTransition = errors.New("illegal manifest state transition")

// Advance moves the set to the next state of written -> copied -> restored
// -> checked -> verified. Advancing to the current state again is a no-op
// (a retried activity may record the same step twice); skipping a state,
// going back, or leaving verified/failed is an error.
func (m *Manifest) Advance(to State, at time.Time) error {
	if to == m.State && to != StateFailed {
		return nil
	}
	if to == StateFailed {
		return fmt.Errorf("%w: use Fail to mark set %d of %q failed (with the step and reason)", ErrIllegalTransition, m.Sequence, m.Database)
	}
	cur, okCur := order[m.State]
	next, okNext := order[to]
	if !okCur || !okNext || m.State.Terminal() || next != cur+1 {
		return fmt.Errorf("%w: set %d of %q cannot go from %q to %q", ErrIllegalTransition, m.Sequence, m.Database, m.State, to)
	}
	m.transition(to, at)
	return nil
}

// Fail marks the set failed at step with a reason. A verified set cannot
// fail afterwards (it was proven good); failing an already failed set keeps
// the first failure.
func (m *Manifest) Fail(step Step, reason string, at time.Time) error {
	if m.State == StateFailed {
		return nil
	}
	if m.State == StateVerified {
		return fmt.Errorf("%w: set %d of %q is verified and cannot be marked failed (%s: %s)", ErrIllegalTransition, m.Sequence, m.Database, step, reason)
	}
	if !step.Valid() {
		return fmt.Errorf("%w: unknown step %q", ErrIllegalTransition, step)
	}
	if reason == "" {
		return fmt.Errorf("%w: a failure needs a reason", ErrIllegalTransition)
	}
	m.Failure = &Failure{Step: step, Reason: reason, At: at.UTC()}
	m.transition(StateFailed, at)
	return nil
}

func (m *Manifest) transition(to State, at time.Time) {
	at = at.UTC()
	m.State = to
	m.History = append(m.History, Transition{State: to, At: at})
	if at.After(m.UpdatedAt) {
		m.UpdatedAt = at
	}
}

// SetTiming records the span of a step (replacing an earlier record of the
// same step, e.g. a restore repeated after the verification instance died).
func (m *Manifest) SetTiming(step Step, start, end time.Time) error {
	if !step.Valid() {
		return fmt.Errorf("catalog: unknown step %q", step)
	}
	if end.Before(start) {
		return fmt.Errorf("catalog: step %s ends (%s) before it starts (%s)", step, end, start)
	}
	if m.Timings == nil {
		m.Timings = map[Step]Timing{}
	}
	m.Timings[step] = Timing{Start: start.UTC(), End: end.UTC(), DurationSeconds: end.Sub(start).Seconds()}
	return nil
}

// AddServer records that server holds a complete copy of the set (once).
func (m *Manifest) AddServer(server string) {
	for _, s := range m.Servers {
		if s == server {
			return
		}
	}
	m.Servers = append(m.Servers, server)
}

// Verified reports whether the set is a valid backup.
func (m *Manifest) Verified() bool { return m.State == StateVerified }

var (
	hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)
	lsnRE     = regexp.MustCompile(`^[0-9]{1,25}$`)
)

// Validate checks that the manifest is complete and consistent.
func (m *Manifest) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if m.SchemaVersion < 1 || m.SchemaVersion > SchemaVersion {
		bad("schema_version %d is not supported (this build reads 1..%d); upgrade backupcycle", m.SchemaVersion, SchemaVersion)
	}
	if err := tsql.CheckIdent(m.Database); err != nil {
		bad("database: %w", err)
	}
	if m.Sequence < 0 {
		bad("sequence %d is negative", m.Sequence)
	}
	if !m.State.Valid() {
		bad("state %q is unknown", m.State)
	}
	if m.State == StateFailed && m.Failure == nil {
		bad("state failed without a failure record")
	}
	if m.State != StateFailed && m.Failure != nil {
		bad("state %q with a failure record", m.State)
	}
	if m.CreatedAt.IsZero() || m.UpdatedAt.IsZero() {
		bad("created_at and updated_at must be set")
	}
	if m.Options.Stripes != 0 && m.Options.Stripes != len(m.Stripes) {
		bad("options.stripes is %d but %d stripes are listed", m.Options.Stripes, len(m.Stripes))
	}
	for i, s := range m.Stripes {
		want := tsql.StripeFileName(m.Database, m.Sequence, i+1, len(m.Stripes))
		if s.Name != want {
			bad("stripe %d is named %q, want %q", i+1, s.Name, want)
		}
		if s.Size < 0 {
			bad("stripe %q has negative size %d", s.Name, s.Size)
		}
		if s.SHA256 != "" && !hexSHA256.MatchString(s.SHA256) {
			bad("stripe %q: sha256 %q is not 64 lower-case hex digits", s.Name, s.SHA256)
		}
	}
	if h := m.Header; h != nil {
		for name, v := range map[string]string{"first_lsn": h.FirstLSN, "last_lsn": h.LastLSN} {
			if !lsnRE.MatchString(v) {
				bad("header.%s %q is not a numeric(25,0) LSN", name, v)
			}
		}
		if h.DatabaseBackupLSN != "" && !lsnRE.MatchString(h.DatabaseBackupLSN) {
			bad("header.database_backup_lsn %q is not a numeric(25,0) LSN", h.DatabaseBackupLSN)
		}
	}
	for step := range m.Timings {
		if !step.Valid() {
			bad("timings: unknown step %q", step)
		}
	}
	if m.Failure != nil && !m.Failure.Step.Valid() {
		bad("failure.step %q is unknown", m.Failure.Step)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("manifest %s: %w", m.FileName(), err)
	}
	return nil
}

// Encode validates m and renders it as indented JSON with a final newline.
// The output is deterministic (struct order, sorted map keys).
func Encode(m *Manifest) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("manifest %s: encode: %w", m.FileName(), err)
	}
	return append(b, '\n'), nil
}

// Decode parses a manifest strictly: unknown fields, trailing data, a newer
// schema version or an inconsistent manifest are errors, never guessed at.
func Decode(data []byte) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("decode manifest %s: unexpected data after the JSON object", m.FileName())
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}
