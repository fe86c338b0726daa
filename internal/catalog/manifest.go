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
	"slices"
	"time"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// SchemaVersion is written into every manifest. Decode refuses manifests of a
// newer version rather than misreading them. Version 2 keys every file by
// (instance, database), adds the pending and cancelled states, the failure's
// evidence and the restore proof; version 1 manifests (names without the
// instance) are not read. Version 3 records, beside each date SQL Server
// reported, the server's offset from UTC and the instant (Header, Proof,
// VerifyCopy's instance time),
// the header's writer build, compression algorithm and TDE thumbprint, and
// the case-safe file names (Naming) and the entry they were made for, and
// the copy restored on the verification instance (VerifyCopy);
// a manifest without those facts is still written as version 2, so that
// builds reading only version 2 keep reading it. Version 4 adds the
// sanity checks' proof (SanityProof); a manifest without one is written as
// before. Version 5 adds the CHECKDB baseline of the recorded restore
// (VerifyCopy.CheckDBBaseline). Version 6 adds the workers' signature
// (Signature, auth.go): a manifest written with a manifest key configured is
// version 6, one written without as before. Version 7 adds the set's
// immutable copy on an object store (Immutable); a manifest without one is
// written as before. Version 8 records a differential set's base
// (Differential); a full's manifest is written as before. Version 9 records
// the backup encryption of a set taken WITH ENCRYPTION (Header.Encryption);
// a manifest of a set that is not encrypted is written as before.
const SchemaVersion = 9

// SignedSchemaVersion is the version of a signed manifest.
const SignedSchemaVersion = 6

// minSchemaVersion is the oldest version this build reads.
const minSchemaVersion = 2

// State is how far a backup set got. A set counts as a good backup only in
// StateVerified (seed 000, "When Is a Backup Valid?").
type State string

const (
	StatePending  State = "pending"  // the number is claimed by a run (WorkflowID/RunID) and its BACKUP may be running
	StateWritten  State = "written"  // BACKUP finished on the primary server, headers read
	StateCopied   State = "copied"   // every stripe copied to the remote server and verified by size + SHA-256
	StateRestored State = "restored" // restored on the verification instance from the remote copies
	StateChecked  State = "checked"  // DBCC CHECKDB clean
	StateVerified State = "verified" // sanity checks passed: a valid backup
	// StateFailed: evidence about the set's content says it is not a good
	// backup (Failure.Evidence). Never restored from.
	StateFailed State = "failed"
	// StateCancelled: the run that made the set was cancelled; its partial
	// files were removed. Never restored from.
	StateCancelled State = "cancelled"
)

// Chain is the order a set goes through on its way to verified.
var Chain = []State{StatePending, StateWritten, StateCopied, StateRestored, StateChecked, StateVerified}

// order gives the position of each state of Chain.
var order = map[State]int{StatePending: 0, StateWritten: 1, StateCopied: 2, StateRestored: 3, StateChecked: 4, StateVerified: 5}

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	_, ok := order[s]
	return ok || s == StateFailed || s == StateCancelled
}

// Terminal reports whether no further transition is allowed.
func (s State) Terminal() bool { return s == StateVerified || s == StateFailed || s == StateCancelled }

// Rank orders the states of Chain (pending 0 ... verified 5); -1 for the
// terminal failed and cancelled.
func (s State) Rank() int {
	if r, ok := order[s]; ok {
		return r
	}
	return -1
}

// Evidence is what a failed set's content was found to be. Only such
// evidence marks a set failed: an unreachable server, an instance that
// stayed down or a timeout says nothing about the set and leaves it in its
// last proven state.
type Evidence string

const (
	EvidenceBackupIncomplete Evidence = "backup_incomplete" // the BACKUP did not complete: the stripes are partial
	EvidenceCorruptBackup    Evidence = "corrupt_backup"    // RESTORE (WITH CHECKSUM) or HEADERONLY found the media damaged
	EvidenceCheckDBFailed    Evidence = "checkdb_failed"    // DBCC CHECKDB reported errors on the restored copy
	EvidenceSanityFailed     Evidence = "sanity_failed"     // a sanity check on the restored copy did not hold
	EvidenceHashMismatch     Evidence = "hash_mismatch"     // a copy's bytes differ from the primary's
	// EvidenceForeignBase: a differential's header names as its base
	// (DifferentialBaseGUID) a full backup that is not the verified set
	// its plan chose: someone else's full backup moved the database's
	// differential base, and the set restores on none of the product's.
	EvidenceForeignBase Evidence = "foreign_base"
)

// Valid reports whether e is a known kind of evidence.
func (e Evidence) Valid() bool {
	switch e {
	case EvidenceBackupIncomplete, EvidenceCorruptBackup, EvidenceCheckDBFailed, EvidenceSanityFailed, EvidenceHashMismatch,
		EvidenceForeignBase:
		return true
	}
	return false
}

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
//
// BackupStart and BackupFinish are what SQL Server reported: datetime values
// on the source server's local wall clock, with no zone (backupset
// (Transact-SQL) gives the "difference between local time ... and UTC" in a
// column of its own), recorded labelled UTC as the driver decodes them.
// UTCOffsetMinutes is the source's local time minus UTC, read right after
// the header; BackupStartUTC and BackupFinishUTC are the instants, the wall
// clock minus that offset. Manifests written before version 3 have no
// offset: their dates are read as UTC, as those builds did (TakenAt).
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
	// SoftwareVersion is the SQL Server build that wrote the set
	// (SoftwareVersionMajor.Minor.Build, e.g. 16.0.4135): no older major
	// version restores it.
	SoftwareVersion string `json:"software_version,omitempty"`
	// CompressionAlgorithm is HEADERONLY's (SQL Server 2022 and later:
	// MS_XPRESS, QAT_DEFLATE); a restore elsewhere needs it supported.
	CompressionAlgorithm string `json:"compression_algorithm,omitempty"`
	// TDEThumbprint (0x...) is the certificate protecting a TDE database's
	// encryption key (FILELISTONLY TDEThumbprint): every instance that
	// restores the set needs it in master.
	TDEThumbprint string `json:"tde_thumbprint,omitempty"`
	// Encryption is the set's backup encryption (BACKUP ... WITH
	// ENCRYPTION), nil when it is not encrypted: every instance that
	// restores it needs the encryptor of that thumbprint in master.
	Encryption       *BackupEncryption `json:"encryption,omitempty"`
	UTCOffsetMinutes *int              `json:"utc_offset_minutes,omitempty"`
	BackupStartUTC   time.Time         `json:"backup_start_utc,omitzero"`
	BackupFinishUTC  time.Time         `json:"backup_finish_utc,omitzero"`
}

// BackupEncryption is how a set or a log backup was encrypted, as RESTORE
// HEADERONLY reports it.
type BackupEncryption struct {
	Algorithm  string `json:"algorithm"`  // KeyAlgorithm, upper case: AES_256, ...
	Thumbprint string `json:"thumbprint"` // EncryptorThumbprint, 0x...
	// EncryptorType is CERTIFICATE or ASYMMETRIC KEY.
	EncryptorType string `json:"encryptor_type"`
}

// SetUTCOffset records the source server's offset from UTC (its local time
// minus UTC, in minutes) with which BackupStart and BackupFinish were
// reported, and the instants they name.
func (h *Header) SetUTCOffset(minutes int) {
	h.UTCOffsetMinutes = &minutes
	h.BackupStartUTC, h.BackupFinishUTC = Instant(h.BackupStart, minutes), Instant(h.BackupFinish, minutes)
}

// Instant is the instant a wall clock of a server `minutes` ahead of UTC
// names: a datetime SQL Server reported (decoded labelled UTC) minus the
// offset. A zero time stays zero.
func Instant(wall time.Time, minutes int) time.Time {
	if wall.IsZero() {
		return wall
	}
	return time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), wall.Nanosecond(),
		time.UTC).Add(-time.Duration(minutes) * time.Minute)
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

// Failure says which step failed, on what evidence and why. A cancelled
// set records its stop the same way, without evidence.
type Failure struct {
	Step     Step      `json:"step"`
	Evidence Evidence  `json:"evidence,omitempty"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

// (instants); the Header's and the Proof's other dates are SQL Server's
// (see Header).
type Manifest struct {
	SchemaVersion int `json:"schema_version"`
	// Naming is how the set's files are named: NamingCaseSafe
	// (tsql.NamesOf) for every set written now; "" for a set written
	// before, named byte for byte (tsql.LegacyNamesOf). A manifest keeps
	// it, and its files their names, whenever it is updated.
	Naming   string `json:"naming,omitempty"`
	Database string `json:"database"` // source database name as sys.databases spells it, unmangled
	// Entry is the databases: entry whose settings the set was made with,
	// when it is spelled otherwise than the database (an entry "sales" for
	// the database Sales of a case-insensitive instance); "" otherwise.
	Entry          string   `json:"entry,omitempty"`
	SourceInstance string   `json:"source_instance"` // the config name of the SQL instance, e.g. sql01
	Sequence       int64    `json:"sequence"`
	PrimaryServer  string   `json:"primary_server"` // backup server the BACKUP wrote to (round robin)
	Servers        []string `json:"servers"`        // servers holding a complete copy
	Stripes        []Stripe `json:"stripes"`
	Options        Options  `json:"options"`
	Header         *Header  `json:"header,omitempty"`

	State     State           `json:"state"`
	History   []Transition    `json:"history"`
	Failure   *Failure        `json:"failure,omitempty"`
	Cancelled *Failure        `json:"cancelled,omitempty"`
	Timings   map[Step]Timing `json:"timings,omitempty"`
	VerifyDB  string          `json:"verify_database,omitempty"` // name of the restored copy
	Proof     *Proof          `json:"proof,omitempty"`
	// SanityProof: the sanity checks held on Proof's restore.
	SanityProof *SanityProof `json:"sanity_proof,omitempty"`
	// VerifyCopy is the copy the product restores or restored (version 3).
	VerifyCopy *VerifyCopy `json:"verify_copy,omitempty"`
	// Immutable is the verified set's copy on an object store (version
	// 7), recorded once a copy there was tried; it never changes State.
	Immutable *ImmutableCopy `json:"immutable,omitempty"`
	// Differential is set for a differential backup set (version 8): the
	// full it is based on. nil for a full.
	Differential *DiffBase `json:"differential,omitempty"`

	// WorkflowID and RunID are the run that owns the set: it claimed the
	// number (StatePending) and only it writes the set's files.
	WorkflowID string    `json:"workflow_id"`
	RunID      string    `json:"run_id"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"` // last transition; retention ages sets by it

	// Signature is the workers' HMAC over the rest of the manifest
	// (version 6, auth.go); nil when written without a manifest key.
	Signature *Signature `json:"signature,omitempty"`
	// Auth is whether the manifest as read is the workers' own (never
	// written: it is what the reader found, Keys.Authenticate).
	Auth Auth `json:"-"`
}

// DiffBase is the base of a differential backup set: the full whose
// changes since it the set holds, as RESTORE HEADERONLY names it
// (DifferentialBaseGUID: the base's BackupSetGUID; DifferentialBaseLSN)
// and by its set number. A differential restores only on top of that full
// ("Differential Backups (SQL Server)"). The claim of a differential names
// the base its plan chose; the LSN is recorded with the header, once
// HEADERONLY confirmed that base.
type DiffBase struct {
	Sequence      int64  `json:"base_sequence"`
	BackupSetGUID string `json:"base_backup_set_guid"`
	LSN           string `json:"base_lsn,omitempty"` // DifferentialBaseLSN, numeric(25,0) as decimal digits
}

// IsDifferential reports whether m is a differential backup set.
func (m *Manifest) IsDifferential() bool { return m.Differential != nil }

// NamingCaseSafe is Manifest.Naming of sets named safely for
// case-insensitive shares (tsql.NamesOf).
const NamingCaseSafe = "case-safe"

// New starts a manifest of set seq of (instance, db) in StateWritten.
func New(instance, db string, seq int64, at time.Time) *Manifest {
	return newIn(StateWritten, instance, db, seq, at)
}

// NewPending starts the manifest that claims set number seq of (instance,
// db) for a run, before its BACKUP starts.
func NewPending(instance, db string, seq int64, at time.Time, workflowID, runID string) *Manifest {
	m := newIn(StatePending, instance, db, seq, at)
	m.WorkflowID, m.RunID = workflowID, runID
	return m
}

func newIn(state State, instance, db string, seq int64, at time.Time) *Manifest {
	at = at.UTC()
	return &Manifest{
		SchemaVersion:  SchemaVersion,
		Naming:         NamingCaseSafe,
		Database:       db,
		SourceInstance: instance,
		Sequence:       seq,
		State:          state,
		History:        []Transition{{State: state, At: at}},
		CreatedAt:      at,
		UpdatedAt:      at,
	}
}

// Names is the naming of the set's files: tsql.NamesOf, or for a set
// written before case-safe names the names it was written under
// (tsql.LegacyNamesOf).
func (m *Manifest) Names() tsql.SetNames {
	if m.Naming != NamingCaseSafe {
		return tsql.LegacyNamesOf(m.SourceInstance, m.Database)
	}
	return tsql.NamesOf(m.SourceInstance, m.Database)
}

// FileName is the manifest's file name.
func (m *Manifest) FileName() string { return m.Names().Manifest(m.Sequence) }

// StripeFileName is the name of stripe i (1-based) of n of this set.
func (m *Manifest) StripeFileName(i, n int) string { return m.Names().Stripe(m.Sequence, i, n) }

// OwnedBy reports whether the run (workflowID, runID) owns the set. A
// manifest naming no run (an empty workflow or run id) is no run's: not
// every run's.
func (m *Manifest) OwnedBy(workflowID, runID string) bool {
	return m.WorkflowID != "" && m.RunID != "" && m.WorkflowID == workflowID && m.RunID == runID
}

// TakenAt is the instant the set's backup was taken: the BACKUP's finish
// from RESTORE HEADERONLY, made an instant with the source's offset from
// UTC; else the manifest's creation (the worker's clock). A manifest
// written before the offset was recorded (TakenAtKnown false) gives the
// finish as it was recorded, read as UTC, as the builds that wrote it did:
// sets of that kind keep their order among themselves. "Newest" and every
// age mean this, never the highest sequence number alone.
func (m *Manifest) TakenAt() time.Time {
	if h := m.Header; h != nil && !h.BackupFinish.IsZero() {
		if !h.BackupFinishUTC.IsZero() {
			return h.BackupFinishUTC
		}
		return h.BackupFinish
	}
	return m.CreatedAt
}

// TakenAtKnown reports whether TakenAt is an instant: false for a finish
// recorded without the source's offset from UTC, which may be off by that
// offset.
func (m *Manifest) TakenAtKnown() bool {
	h := m.Header
	return h == nil || h.BackupFinish.IsZero() || !h.BackupFinishUTC.IsZero()
}

// VerifiedAt is when the set was marked verified, on the worker's clock;
// zero when it never was.
func (m *Manifest) VerifiedAt() time.Time {
	var at time.Time
	for _, t := range m.History {
		if t.State == StateVerified {
			at = t.At
		}
	}
	return at
}

// Newer reports whether m was taken after o (ties: the higher sequence).
func (m *Manifest) Newer(o *Manifest) bool {
	a, b := m.TakenAt(), o.TakenAt()
	if !a.Equal(b) {
		return a.After(b)
	}
	return m.Sequence > o.Sequence
}

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

// Fail marks the set failed at step on evidence about its content, with a
// reason. A verified set cannot fail afterwards (it was proven good), nor a
// cancelled one; failing an already failed set keeps the first failure.
// Without evidence nothing is marked: an outage is not a fact about a set.
func (m *Manifest) Fail(step Step, evidence Evidence, reason string, at time.Time) error {
	if m.State == StateFailed {
		return nil
	}
	if m.State == StateVerified || m.State == StateCancelled {
		return fmt.Errorf("%w: set %d of %q is %s and cannot be marked failed (%s: %s)", ErrIllegalTransition, m.Sequence, m.Database, m.State, step, reason)
	}
	if !step.Valid() {
		return fmt.Errorf("%w: unknown step %q", ErrIllegalTransition, step)
	}
	if !evidence.Valid() {
		return fmt.Errorf("%w: set %d of %q: %q is no evidence about the set's content; only %s, %s, %s, %s, %s or %s mark a set failed",
			ErrIllegalTransition, m.Sequence, m.Database, evidence, EvidenceBackupIncomplete, EvidenceCorruptBackup,
			EvidenceCheckDBFailed, EvidenceSanityFailed, EvidenceHashMismatch, EvidenceForeignBase)
	}
	if reason == "" {
		return fmt.Errorf("%w: a failure needs a reason", ErrIllegalTransition)
	}
	m.Failure = &Failure{Step: step, Evidence: evidence, Reason: reason, At: at.UTC()}
	m.transition(StateFailed, at)
	return nil
}

// Cancel records that the run making the set was cancelled at step. A
// verified or failed set keeps its state; cancelling twice keeps the first.
func (m *Manifest) Cancel(step Step, reason string, at time.Time) error {
	switch m.State {
	case StateCancelled, StateVerified, StateFailed:
		return nil
	}
	if !step.Valid() {
		return fmt.Errorf("%w: unknown step %q", ErrIllegalTransition, step)
	}
	m.Cancelled = &Failure{Step: step, Reason: reason, At: at.UTC()}
	m.transition(StateCancelled, at)
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

// hasInstants reports whether m records an offset from UTC (version 3).
func (m *Manifest) hasInstants() bool {
	return (m.Header != nil && m.Header.UTCOffsetMinutes != nil) || (m.Proof != nil && m.Proof.UTCOffsetMinutes != nil)
}

// version3Fields are the fields of m that only version 3 has: an offset
// from UTC, case-safe file names and the entry, the header's writer build,
// compression algorithm and TDE thumbprint, the verification copy (builds
// reading only version 2 refuse unknown fields).
func (m *Manifest) version3Fields() []string {
	var out []string
	add := func(set bool, name string) {
		if set {
			out = append(out, name)
		}
	}
	h := m.Header
	add(m.Naming != "", "naming")
	add(m.Entry != "", "entry")
	add(m.hasInstants(), "utc_offset_minutes")
	add(h != nil && h.SoftwareVersion != "", "software_version")
	add(h != nil && h.CompressionAlgorithm != "", "compression_algorithm")
	add(h != nil && h.TDEThumbprint != "", "tde_thumbprint")
	add(m.VerifyCopy != nil, "verify_copy")
	return out
}

// Encode validates m and renders it as indented JSON with a final newline,
// unsigned (a signature m carries is dropped: it does not cover a changed
// manifest), under the oldest schema version that holds its facts: 2
// without any of version 3's, 3 with them, 4 with a sanity proof, 5 with a
// CHECKDB baseline, 6 signed, 7 with an immutable copy, 8 a differential, 9
// encrypted,
// so that older builds
// keep reading what they can. The
// output is deterministic (struct order, sorted map keys).
func Encode(m *Manifest) ([]byte, error) { return EncodeSigned(m, nil) }

// EncodeSigned is Encode, signed with the current key of keys (version 6,
// the signature over the rest of the output); nil keys: Encode.
func EncodeSigned(m *Manifest, keys *Keys) ([]byte, error) {
	out := unsigned(m)
	out.SchemaVersion = minSchemaVersion
	if len(out.version3Fields()) > 0 {
		out.SchemaVersion = 3
	}
	if out.SanityProof != nil {
		out.SchemaVersion = 4
	}
	if out.VerifyCopy != nil && out.VerifyCopy.CheckDBBaseline != nil {
		out.SchemaVersion = 5
	}
	if keys != nil {
		out.SchemaVersion = SignedSchemaVersion
	}
	if out.Immutable != nil {
		out.SchemaVersion = 7
	}
	if out.Differential != nil {
		out.SchemaVersion = 8
	}
	if out.Header != nil && out.Header.Encryption != nil {
		out.SchemaVersion = 9
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	b, err := marshal(out)
	if err != nil || keys == nil {
		return b, err
	}
	out.Signature = keys.Sign(purposeManifest, b)
	return marshal(out)
}

// marshal renders a manifest as Encode writes it, unchecked.
func marshal(m *Manifest) ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("manifest %s: encode: %w", m.FileName(), err)
	}
	return append(b, '\n'), nil
}

// Decode parses a manifest strictly: unknown fields, trailing data, a newer
// schema version or an inconsistent manifest are errors, never guessed at.
func Decode(data []byte) (*Manifest, error) {
	var m Manifest
	if err := decodeStrict(data, &m, "manifest", m.FileName); err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// decodeStrict decodes one JSON object into v, refusing unknown fields and
// trailing data; what names the record (its file name) for messages.
func decodeStrict(data []byte, v any, what string, name func() string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("decode %s %s: unexpected data after the JSON object", what, name())
	}
	return nil
}

// valid reports whether e names its algorithm, thumbprint and encryptor
// type.
func (e *BackupEncryption) valid() bool {
	return slices.Contains(tsql.BackupAlgorithms, e.Algorithm) && thumbprintRE.MatchString(e.Thumbprint) &&
		(e.EncryptorType == tsql.EncryptorCertificate || e.EncryptorType == tsql.EncryptorAsymmetricKey)
}

// thumbprintRE is a thumbprint as SQL Server prints it.
var thumbprintRE = regexp.MustCompile(`^0x[0-9A-F]{2,64}$`)
