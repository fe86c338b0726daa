// Package evidence is the evidence ledger: a hash-chained, signed log per
// database and backup server of what the product proved there (a verified
// set, a log chain proven on the standby, a recovery drill), stored beside
// the manifests one object per record, so that an auditor can check later,
// without trusting the share, that nothing in it was changed and that the
// files it names are still the ones proven.
//
// A record names the previous record by the SHA-256 of its stored bytes and
// is signed with Ed25519 over its canonical JSON; Verify walks a chain and
// names the first record whose link, signature or files do not match.
package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// SchemaVersion is the newest record version this build writes and
// reads; a newer one is refused. Version 2 adds Drill.Immutable. A record
// that holds nothing of version 2 is written as version 1 (schemaOf), so
// builds before it still read every other record of the ledger.
const SchemaVersion = 2

// schemaOf is the version r is written as: the oldest that holds it.
func schemaOf(r *Record) int {
	if r.Drill != nil && r.Drill.Immutable != nil {
		return 2
	}
	return 1
}

// MaxRecordBytes bounds a record file: a set of many stripes stays far
// below it, and a bigger file under a record's name is not one.
const MaxRecordBytes = 256 << 10

// Kind is what a record proves.
type Kind string

const (
	// KindSet: a backup set was verified (restored from these files,
	// CHECKDB clean, sanity checks held).
	KindSet Kind = "set"
	// KindLogProof: log backups were restored on the standby copy.
	KindLogProof Kind = "logproof"
	// KindDrill: a recovery drill restored the database and checked it.
	KindDrill Kind = "drill"
)

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k == KindSet || k == KindLogProof || k == KindDrill }

// File is a file the record vouches for, as it was when the record was
// written.
type File struct {
	Name   string `json:"name"` // relative to the backup server's directory
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // lower-case hex
}

// Set is the identity of a backup set.
type Set struct {
	Sequence      int64     `json:"sequence"`
	BackupSetGUID string    `json:"backup_set_guid"`
	FirstLSN      string    `json:"first_lsn,omitempty"`
	LastLSN       string    `json:"last_lsn,omitempty"`
	TakenAt       time.Time `json:"taken_at"`
	// Base is a differential's base set; 0 for a full.
	Base int64 `json:"base,omitempty"`
}

// Restore is the restore-history row that proves the set's own backup was
// restored (msdb: restore_history_id, and the backup set GUID it names).
type Restore struct {
	Instance         string `json:"instance"`
	Database         string `json:"database"`
	RestoreHistoryID int64  `json:"restore_history_id,omitempty"`
	BackupSetGUID    string `json:"backup_set_guid,omitempty"`
}

// CheckDB is the DBCC CHECKDB that checked the restored copy.
type CheckDB struct {
	Command string    `json:"command"`
	Result  string    `json:"result"` // "clean", or what it found
	At      time.Time `json:"at,omitzero"`
}

// Sanity is the sanity checks run on the restored copy.
type Sanity struct {
	Checks []string `json:"checks,omitempty"`
	RanAs  string   `json:"ran_as,omitempty"`
	Passed bool     `json:"passed"`
}

// Drill is a recovery drill's outcome against the database's RTO.
type Drill struct {
	Point             string  `json:"point"` // "latest" or the instant asked
	RecoveryPointFrom string  `json:"recovery_point_from,omitempty"`
	RTOSeconds        float64 `json:"rto_seconds"`    // measured: start to online
	TargetRTOSeconds  float64 `json:"target_seconds"` // the database's rto; 0: none set
	MetRTO            bool    `json:"met_rto"`
	Passed            bool    `json:"passed"`
	FirstLog          int64   `json:"first_log,omitempty"`
	LastLog           int64   `json:"last_log,omitempty"`
	// Immutable is the immutable copy the drill restored from (drill
	// from: immutable); nil for a drill from the backup servers.
	Immutable *ImmutableSource `json:"immutable,omitempty"`
}

// ImmutableSource is the object store a drill restored from: the store
// (a kind: s3 backup server), its bucket and prefix, and the set.
type ImmutableSource struct {
	Store    string `json:"store"`
	Location string `json:"location,omitempty"`
	Sequence int64  `json:"sequence"`
}

// LogProof is a round of log backups applied to the standby copy.
type LogProof struct {
	Chain          int64  `json:"chain"`
	AppliedThrough int64  `json:"applied_through"`
	RedoLSN        string `json:"redo_lsn,omitempty"`
}

// Record is one entry of a ledger. Field names are the stored format:
// change them only with a new SchemaVersion.
type Record struct {
	Schema int   `json:"schema"`
	Seq    int64 `json:"seq"` // 1, 2, ... with no gap
	// Prev is the SHA-256 (hex) of the previous record's stored bytes;
	// "" for the first.
	Prev string    `json:"prev"`
	Kind Kind      `json:"kind"`
	At   time.Time `json:"at"` // when it was written (the worker's clock)
	// Server is the backup server whose ledger this is; Instance and
	// Database the database it is about.
	Server   string `json:"server"`
	Instance string `json:"instance"`
	Database string `json:"database"`
	// RecoveryPoint is the newest instant the record proves restorable:
	// a set's backup finish, a log proof's last applied log, a drill's
	// recovery point.
	RecoveryPoint time.Time `json:"recovery_point,omitzero"`
	Set           *Set      `json:"set,omitempty"`
	// Files are the files vouched for on Server, the first one the one
	// removed first when the product deletes them (a set's manifest).
	Files    []File             `json:"files,omitempty"`
	Restore  *Restore           `json:"restore,omitempty"`
	CheckDB  *CheckDB           `json:"checkdb,omitempty"`
	Sanity   *Sanity            `json:"sanity,omitempty"`
	Drill    *Drill             `json:"drill,omitempty"`
	LogProof *LogProof          `json:"log_proof,omitempty"`
	Timings  map[string]float64 `json:"timings_seconds,omitempty"`
	// Worker is the build that wrote the record (internal/version).
	Worker string `json:"worker"`
	// Run is the workflow run that proved it.
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
}

// Validate checks what every record must hold.
func (r *Record) Validate() error {
	switch {
	case r.Schema < 1 || r.Schema > SchemaVersion:
		return fmt.Errorf("schema version %d: this build reads versions 1 to %d", r.Schema, SchemaVersion)
	case r.Schema < schemaOf(r):
		return fmt.Errorf("schema version %d: the record holds fields of version %d", r.Schema, schemaOf(r))
	case r.Seq < 1:
		return fmt.Errorf("sequence %d: records are numbered from 1", r.Seq)
	case r.Seq == 1 && r.Prev != "":
		return errors.New("the first record names a previous one")
	case r.Seq > 1 && !isSHA256(r.Prev):
		return fmt.Errorf("previous record's hash %q is not a SHA-256", r.Prev)
	case !r.Kind.Valid():
		return fmt.Errorf("unknown kind %q", r.Kind)
	case r.Server == "" || r.Instance == "" || r.Database == "":
		return errors.New("server, instance and database are required")
	case r.At.IsZero():
		return errors.New("no time")
	case r.Kind == KindSet && r.Set == nil:
		return errors.New("a set record without its set")
	}
	for _, f := range r.Files {
		if f.Name == "" || f.Size < 0 || !isSHA256(f.SHA256) {
			return fmt.Errorf("file %q: a name, a size and a SHA-256 are required", f.Name)
		}
	}
	return nil
}

func isSHA256(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == sha256.Size && hex.EncodeToString(b) == s
}

// canonical is r's signed form: its JSON (struct order, sorted map keys,
// times in RFC 3339), the same bytes every time.
func canonical(r *Record) ([]byte, error) {
	return json.Marshal(r)
}

// envelope is a record file: the canonical record, the key that signed it
// and the signature over exactly those bytes.
type envelope struct {
	Record  json.RawMessage `json:"record"`
	KeyID   string          `json:"key_id"`
	Ed25519 string          `json:"ed25519"` // base64 (standard) of the signature
}

// Encode validates r and renders it as a record file, one JSON line,
// signed by key.
func Encode(r *Record, key *PrivateKey) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("evidence record %d: %w", r.Seq, err)
	}
	body, err := canonical(r)
	if err != nil {
		return nil, fmt.Errorf("evidence record %d: encode: %w", r.Seq, err)
	}
	b, err := json.Marshal(envelope{Record: body, KeyID: key.ID(), Ed25519: key.sign(body)})
	if err != nil {
		return nil, fmt.Errorf("evidence record %d: encode: %w", r.Seq, err)
	}
	if len(b) >= MaxRecordBytes {
		return nil, fmt.Errorf("evidence record %d: %d bytes, more than the %d a record may have", r.Seq, len(b), MaxRecordBytes)
	}
	return append(b, '\n'), nil
}

// Decoded is a record file as read: the record, its hash (what the next
// record's Prev must be) and whether its signature verified.
type Decoded struct {
	Record Record
	Hash   string // SHA-256 (hex) of the file's bytes
	KeyID  string
	// SignatureErr says why the signature does not verify; nil when it does.
	SignatureErr error
}

// Decode parses a record file strictly (unknown fields, trailing data, a
// record not in canonical form are errors) and checks its signature with
// keys; a bad signature is reported in Decoded.SignatureErr, not as an error.
func Decode(data []byte, keys PublicKeys) (*Decoded, error) {
	if len(data) > MaxRecordBytes {
		return nil, fmt.Errorf("%d bytes, more than the %d a record may have", len(data), MaxRecordBytes)
	}
	var env envelope
	if err := decodeStrict(data, &env); err != nil {
		return nil, err
	}
	var r Record
	if err := decodeStrict(env.Record, &r); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	// Only the canonical bytes are signed: a record that says the same in
	// other bytes was not written by a worker.
	if c, err := canonical(&r); err != nil || !bytes.Equal(c, env.Record) {
		return nil, errors.New("record not in canonical form: it was not written as stored")
	}
	sum := sha256.Sum256(data)
	d := &Decoded{Record: r, Hash: hex.EncodeToString(sum[:]), KeyID: env.KeyID}
	d.SignatureErr = keys.verify(env.KeyID, env.Record, env.Ed25519)
	return d, nil
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("decode: unexpected data after the JSON object")
	}
	return nil
}
