package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// A database's proof record (tsql.SetNames.LogProofRecord) lives on the
// backup server its log backups are copied to, the one the verification
// instance restores them from. Only the proof steps write it, so it is
// not shared with the chain record, which log backups and copies rewrite
// beside them. It holds what the product restored on the verification
// instance to prove the chains: the standby copy (its own-copy record,
// written before the RESTORE that seeds it, as VerifyCopy is for the
// cycle's copy), the scratch copy of the nightly and point-in-time proofs,
// and the results of the latest point-in-time proofs. Signed like chain
// records, with a purpose of its own.

// LogProofSchemaVersion is written into every proof record.
const LogProofSchemaVersion = 1

const purposeLogProof = "backupcycle log proof"

// MaxPITProofs is how many point-in-time proof results a record keeps.
const MaxPITProofs = 30

// StandbyCopy is the standby copy: the full it was seeded from (chain,
// set, its backup set GUID in Copy) and its own-copy record.
type StandbyCopy struct {
	Chain    int64 `json:"chain"`
	Sequence int64 `json:"sequence"`
	// LastLSN and FinishUTC are the full's (its header's): where the copy
	// stood after it, and from when the chain is proven through it.
	LastLSN   string     `json:"last_lsn"`
	FinishUTC time.Time  `json:"finish_utc"`
	Copy      VerifyCopy `json:"copy"`
	// AppliedThrough is the newest log applied to it, RedoLSN where it
	// stood after it (sys.master_files.redo_start_lsn).
	AppliedThrough int64     `json:"applied_through,omitempty"`
	RedoLSN        string    `json:"redo_lsn,omitempty"`
	AppliedAt      time.Time `json:"applied_at,omitzero"`
}

// PITProof is one point-in-time proof: the copy restored from a verified
// full and the chain's logs to Target WITH STOPAT, recovered and checked.
type PITProof struct {
	Chain    int64     `json:"chain"`
	Sequence int64     `json:"sequence"` // the full
	Target   time.Time `json:"target"`   // instant (UTC) restored to
	// StopAt is the STOPAT sent: Target on the source's wall clock.
	StopAt    time.Time `json:"stop_at"`
	FirstLog  int64     `json:"first_log"`
	LastLog   int64     `json:"last_log"`
	CheckDB   bool      `json:"checkdb"`
	OK        bool      `json:"ok"`
	Detail    string    `json:"detail,omitempty"`
	Instance  string    `json:"instance"`
	Database  string    `json:"database"` // the scratch copy's name
	StartedAt time.Time `json:"started_at"`
	At        time.Time `json:"at"` // finished (worker's clock)
}

// LogProofRecord is a database's proof record.
type LogProofRecord struct {
	SchemaVersion  int          `json:"schema_version"`
	Database       string       `json:"database"`
	SourceInstance string       `json:"source_instance"`
	Standby        *StandbyCopy `json:"standby,omitempty"`
	// Scratch is the own-copy record of the newest restore into the
	// scratch copy of the nightly and point-in-time proofs.
	Scratch   *VerifyCopy `json:"scratch,omitempty"`
	PIT       []PITProof  `json:"pit,omitempty"` // oldest first
	CreatedAt time.Time   `json:"created_at"`
	UpdatedAt time.Time   `json:"updated_at"`

	Signature *Signature `json:"signature,omitempty"`
	Auth      Auth       `json:"-"`
}

// NewLogProofRecord starts the proof record of (instance, db).
func NewLogProofRecord(instance, db string, at time.Time) *LogProofRecord {
	at = at.UTC()
	return &LogProofRecord{SchemaVersion: LogProofSchemaVersion, Database: db, SourceInstance: instance, CreatedAt: at, UpdatedAt: at}
}

// FileName is the record's file name.
func (r *LogProofRecord) FileName() string {
	return tsql.NamesOf(r.SourceInstance, r.Database).LogProofRecord()
}

// Trusted reports whether the record may steer the product.
func (r *LogProofRecord) Trusted() bool { return r.Auth.Trusted() }

// AddPIT appends a point-in-time proof result, keeping the newest
// MaxPITProofs.
func (r *LogProofRecord) AddPIT(p PITProof) {
	r.PIT = append(r.PIT, p)
	if n := len(r.PIT); n > MaxPITProofs {
		r.PIT = append([]PITProof(nil), r.PIT[n-MaxPITProofs:]...)
	}
}

// Validate checks that the record is complete and consistent.
func (r *LogProofRecord) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if r.SchemaVersion != LogProofSchemaVersion {
		bad("schema_version %d is not supported (this build reads %d)", r.SchemaVersion, LogProofSchemaVersion)
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
	copyOK := func(what string, v *VerifyCopy) {
		if v.VerifyInstance == "" || tsql.CheckIdent(v.VerifyDatabase) != nil || v.BackupSetGUID == "" || v.SentAt.IsZero() {
			bad("%s: a copy names its instance, database and backup set GUID, and when its RESTORE was sent", what)
		}
		if !v.newestRestoreOK() {
			bad("%s: newest_restore_before is a restore_history_id (0 for none), read with instance_time", what)
		}
	}
	if s := r.Standby; s != nil {
		if s.Chain < 1 || s.Sequence < 1 {
			bad("standby: chain and sequence of the full it was seeded from must be set")
		}
		copyOK("standby", &s.Copy)
		if !lsnRE.MatchString(s.LastLSN) || s.FinishUTC.IsZero() {
			bad("standby: the full's last_lsn and finish_utc must be set")
		}
		if s.RedoLSN != "" && !lsnRE.MatchString(s.RedoLSN) {
			bad("standby: redo_lsn %q is not a numeric(25,0) LSN", s.RedoLSN)
		}
	}
	if r.Scratch != nil {
		copyOK("scratch", r.Scratch)
	}
	if len(r.PIT) > MaxPITProofs {
		bad("%d point-in-time proofs, at most %d", len(r.PIT), MaxPITProofs)
	}
	for i, p := range r.PIT {
		if p.Chain < 1 || p.Target.IsZero() || p.At.IsZero() || p.Instance == "" || p.Database == "" {
			bad("pit[%d]: chain, target, at, instance and database must be set", i)
		}
	}
	if g := r.Signature; g != nil && (!keyIDRE.MatchString(g.KeyID) || !hexSHA256.MatchString(g.HMACSHA256)) {
		bad("signature needs a key_id and hmac_sha256 of 64 lower-case hex digits")
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("log proof record %s: %w", r.FileName(), err)
	}
	return nil
}

var logProofKind = recordKind{what: "log proof record", purpose: purposeLogProof, version: LogProofSchemaVersion}

func (r *LogProofRecord) seal() (*int, **Signature, *Auth) {
	return &r.SchemaVersion, &r.Signature, &r.Auth
}

// EncodeLogProof validates r and renders it signed with keys (unsigned
// with nil keys).
func EncodeLogProof(r *LogProofRecord, keys *Keys) ([]byte, error) {
	return encodeRecord(r, logProofKind, keys)
}

// DecodeLogProof parses a proof record strictly and authenticates it.
func DecodeLogProof(data []byte, keys *Keys) (*LogProofRecord, error) {
	return decodeRecord[LogProofRecord, *LogProofRecord](data, logProofKind, keys)
}

// LoadLogProof reads the proof record of (instance, db); a missing one is
// nil without error.
func LoadLogProof(ctx context.Context, fsys FS, keys *Keys, instance, db string) (*LogProofRecord, error) {
	return loadOneRecord(ctx, fsys, keys, tsql.NamesOf(instance, db).LogProofRecord(), logProofKind, instance, db,
		func(r *LogProofRecord) (string, string) { return r.SourceInstance, r.Database })
}

// SaveLogProof writes r signed with keys, atomically.
func SaveLogProof(ctx context.Context, fsys FS, keys *Keys, r *LogProofRecord) error {
	return saveRecord(ctx, fsys, r, logProofKind, keys)
}
