package catalog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/backupcycle/backupcycle/internal/logchain"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// A log chain's record lives beside the manifests on every backup server
// that holds its log backups: tsql.SetNames.ChainRecord, one file per part
// of at most MaxLogsPerPart log backups, so that a record stays small
// (MaxChainRecordBytes) however long the chain runs. Records are signed
// with the manifest keys (purpose "backupcycle log chain": a manifest's
// signature never verifies a record, nor the other way round), decoded
// strictly, and trusted like manifests (Auth).

// ChainSchemaVersion is the newest version of a chain record; Decode
// refuses newer ones. Version 2 records the encryption of log backups taken
// WITH ENCRYPTION (LogBackup.Encryption) and the build that wrote each log
// (LogBackup.SoftwareVersion); a record without either is written as
// version 1, which builds before it read, and a build before it refuses a
// version 2 record by its version rather than by an unknown field.
const ChainSchemaVersion = 2

// purposeChain is the signature purpose of chain records.
const purposeChain = "backupcycle log chain"

// Limits of one chain record part.
const (
	// MaxLogsPerPart: log n of a chain is in part (n-1)/MaxLogsPerPart+1.
	MaxLogsPerPart = 180
	// MaxLogFiles bounds the files of one log backup (a log backup's
	// stripes: a minute of log needs few).
	MaxLogFiles = 8
	// MaxFullsPerPart bounds the fulls a part records (one a night).
	MaxFullsPerPart = 64
	// MaxChainRecordBytes is the largest record read or written: what
	// storage reads as a small file.
	MaxChainRecordBytes = storage.MaxSmallFile
)

// PartOf is the record part that holds log number n.
func PartOf(n int64) int { return int((n-1)/MaxLogsPerPart) + 1 }

// ChainFull is a full backup of the chain, as its manifest recorded it.
type ChainFull struct {
	Sequence          int64     `json:"sequence"`
	BackupSetGUID     string    `json:"backup_set_guid"`
	FirstLSN          string    `json:"first_lsn"`
	LastLSN           string    `json:"last_lsn"`
	CheckpointLSN     string    `json:"checkpoint_lsn"`
	DatabaseBackupLSN string    `json:"database_backup_lsn,omitempty"`
	FinishUTC         time.Time `json:"backup_finish_utc"`
	CopyOnly          bool      `json:"copy_only"`
}

// LogState is how far a log backup got.
type LogState string

const (
	// LogPending: the number is claimed by a run (WorkflowID, RunID),
	// whose BACKUP LOG may be running; only that run writes its files.
	LogPending LogState = "pending"
	LogWritten LogState = "written" // BACKUP LOG finished, header read, files hashed on the primary
	LogCopied  LogState = "copied"  // every file copied to the remote site and verified by size and SHA-256
	// LogFailed: the BACKUP LOG failed; the number is never used again.
	LogFailed LogState = "failed"
)

// Valid reports whether s is known.
func (s LogState) Valid() bool {
	switch s {
	case LogPending, LogWritten, LogCopied, LogFailed:
		return true
	}
	return false
}

// LogProof is where and when a log backup was applied on the verification
// instance.
type LogProof struct {
	At       time.Time `json:"at"` // instant (UTC), the worker's clock
	Mode     string    `json:"mode"`
	Instance string    `json:"instance"`
	Database string    `json:"database"`
}

// ForeignLog is another tool's log backup found in msdb between two of ours.
type ForeignLog struct {
	Tool    string `json:"tool,omitempty"` // backupset.name or description
	User    string `json:"user,omitempty"`
	Path    string `json:"path"`    // physical_device_name
	Adopted bool   `json:"adopted"` // copied into the chain: Files hold it, with its hash
}

// LogBackup is one log backup of the chain. Dates as in Header: the
// source's wall clock as reported, its offset from UTC and the instants.
type LogBackup struct {
	Number            int64       `json:"number"`
	State             LogState    `json:"state"`
	WorkflowID        string      `json:"workflow_id,omitempty"`
	RunID             string      `json:"run_id,omitempty"`
	BackupSetGUID     string      `json:"backup_set_guid,omitempty"`
	FirstLSN          string      `json:"first_lsn,omitempty"`
	LastLSN           string      `json:"last_lsn,omitempty"`
	DatabaseBackupLSN string      `json:"database_backup_lsn,omitempty"`
	BackupStart       time.Time   `json:"backup_start,omitzero"`
	BackupFinish      time.Time   `json:"backup_finish,omitzero"`
	UTCOffsetMinutes  *int        `json:"utc_offset_minutes,omitempty"`
	BackupStartUTC    time.Time   `json:"backup_start_utc,omitzero"`
	BackupFinishUTC   time.Time   `json:"backup_finish_utc,omitzero"`
	Files             []Stripe    `json:"files,omitempty"`
	Servers           []string    `json:"servers,omitempty"`
	Proven            *LogProof   `json:"proven,omitempty"`
	Foreign           *ForeignLog `json:"foreign,omitempty"`
	Failure           string      `json:"failure,omitempty"`
	// SoftwareVersion is the SQL Server build that wrote this log backup
	// (major.minor.build, RESTORE HEADERONLY's SoftwareVersionMajor,
	// Minor and Build, or msdb's backupset software_major_version,
	// software_minor_version and software_build_version for another
	// tool's): a source patched or upgraded during the chain writes its
	// later logs with its new build, which no older version restores.
	// Empty in records written before it was kept.
	SoftwareVersion string `json:"software_version,omitempty"`
	// Encryption is the log backup's encryption (BACKUP LOG ... WITH
	// ENCRYPTION, HEADERONLY), nil when it is not encrypted.
	Encryption *BackupEncryption `json:"encryption,omitempty"`
	UpdatedAt  time.Time         `json:"updated_at"`
}

// SetUTCOffset records the source's offset from UTC with which
// BackupStart and BackupFinish were reported, and the instants.
func (l *LogBackup) SetUTCOffset(minutes int) {
	l.UTCOffsetMinutes = &minutes
	l.BackupStartUTC, l.BackupFinishUTC = Instant(l.BackupStart, minutes), Instant(l.BackupFinish, minutes)
}

// OwnedBy reports whether the log backup's number is claimed by run
// (workflowID, runID): only that run writes its files.
func (l *LogBackup) OwnedBy(workflowID, runID string) bool {
	return l.WorkflowID != "" && l.WorkflowID == workflowID && l.RunID == runID
}

// ChainBreak is why the chain ended.
type ChainBreak struct {
	Reason string    `json:"reason"`
	Detail string    `json:"detail"`
	At     time.Time `json:"at"`
}

// ChainRecord is one part of a chain's record.
type ChainRecord struct {
	SchemaVersion  int    `json:"schema_version"`
	Database       string `json:"database"`        // as sys.databases spells it
	SourceInstance string `json:"source_instance"` // configuration name (or availability group)
	Chain          int64  `json:"chain"`
	Part           int    `json:"part"`
	// Fulls are the fulls taken while this part was the newest, oldest
	// first; part 1 starts with the full that started the chain.
	Fulls     []ChainFull `json:"fulls"`
	Logs      []LogBackup `json:"logs"`
	Break     *ChainBreak `json:"break,omitempty"`
	CreatedAt time.Time   `json:"created_at"`
	UpdatedAt time.Time   `json:"updated_at"`

	Signature *Signature `json:"signature,omitempty"`
	Auth      Auth       `json:"-"`
}

// NewChainRecord starts part `part` of chain of (instance, db).
func NewChainRecord(instance, db string, chain int64, part int, at time.Time) *ChainRecord {
	at = at.UTC()
	return &ChainRecord{SchemaVersion: ChainSchemaVersion, Database: db, SourceInstance: instance, Chain: chain, Part: part,
		CreatedAt: at, UpdatedAt: at}
}

// Names is the naming of the chain's files (always case-safe).
func (r *ChainRecord) Names() tsql.SetNames { return tsql.NamesOf(r.SourceInstance, r.Database) }

// FileName is the record's file name.
func (r *ChainRecord) FileName() string { return r.Names().ChainRecord(r.Chain, r.Part) }

// LogFileName is the name of file i of k of log backup number.
func (r *ChainRecord) LogFileName(number int64, i, k int) string {
	return r.Names().LogStripe(r.Chain, number, i, k)
}

// Trusted reports whether the record may steer the product (Auth.Trusted).
func (r *ChainRecord) Trusted() bool { return r.Auth.Trusted() }

// Log is the log backup of number n in this part, or nil.
func (r *ChainRecord) Log(n int64) *LogBackup {
	for i := range r.Logs {
		if r.Logs[i].Number == n {
			return &r.Logs[i]
		}
	}
	return nil
}

// NextNumber is the number the next log backup of the chain claims, given
// this part is the newest: one more than the highest number it holds,
// pending and failed included (a number is never used twice), or the
// part's first number.
func (r *ChainRecord) NextNumber() int64 {
	if n := len(r.Logs); n > 0 {
		return r.Logs[n-1].Number + 1
	}
	return int64(r.Part-1)*MaxLogsPerPart + 1
}

// Claim adds log backup n as pending for run (workflowID, runID). It
// refuses a number already held (by any run) and a number of another
// part: a log backup never takes a name another run holds.
func (r *ChainRecord) Claim(n int64, workflowID, runID string, at time.Time) (*LogBackup, error) {
	if PartOf(n) != r.Part {
		return nil, fmt.Errorf("log %d of chain %d belongs in part %d, not %d: start that part's record", n, r.Chain, PartOf(n), r.Part)
	}
	if n != r.NextNumber() {
		return nil, fmt.Errorf("log %d of chain %d is not the next number (%d): numbers are claimed in order and never reused", n, r.Chain, r.NextNumber())
	}
	if workflowID == "" || runID == "" {
		return nil, errors.New("a log backup is claimed by a run: workflow id and run id are needed")
	}
	at = at.UTC()
	r.Logs = append(r.Logs, LogBackup{Number: n, State: LogPending, WorkflowID: workflowID, RunID: runID, UpdatedAt: at})
	r.UpdatedAt = at
	return &r.Logs[len(r.Logs)-1], nil
}

// Validate checks that the record is complete and consistent.
func (r *ChainRecord) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if r.SchemaVersion < 1 || r.SchemaVersion > ChainSchemaVersion {
		bad("schema_version %d is not supported (this build reads 1 to %d)", r.SchemaVersion, ChainSchemaVersion)
	}
	for _, l := range r.Logs {
		if e := l.Encryption; e != nil && (r.SchemaVersion < 2 || !e.valid()) {
			bad("log %d: encryption needs schema_version 2, its algorithm, the encryptor's thumbprint (0x...) and type", l.Number)
		}
	}
	if r.SourceInstance == "" {
		bad("source_instance is empty")
	}
	if err := tsql.CheckIdent(r.Database); err != nil {
		bad("database: %w", err)
	}
	if r.Chain < 1 || r.Chain > tsql.MaxChainID || r.Part < 1 || r.Part > tsql.MaxChainPart {
		bad("chain %d part %d: chains are 1..%d, parts 1..%d", r.Chain, r.Part, tsql.MaxChainID, tsql.MaxChainPart)
	}
	if r.Part == 1 && len(r.Fulls) == 0 {
		bad("part 1 has no full: every chain starts with one")
	}
	if len(r.Fulls) > MaxFullsPerPart {
		bad("%d fulls in one part, at most %d", len(r.Fulls), MaxFullsPerPart)
	}
	if len(r.Logs) > MaxLogsPerPart {
		bad("%d log backups in one part, at most %d", len(r.Logs), MaxLogsPerPart)
	}
	if r.CreatedAt.IsZero() || r.UpdatedAt.IsZero() {
		bad("created_at and updated_at must be set")
	}
	for _, f := range r.Fulls {
		for name, v := range map[string]string{"first_lsn": f.FirstLSN, "last_lsn": f.LastLSN, "checkpoint_lsn": f.CheckpointLSN} {
			if !lsnRE.MatchString(v) {
				bad("full %d: %s %q is not a numeric(25,0) LSN", f.Sequence, name, v)
			}
		}
		if f.DatabaseBackupLSN != "" && !lsnRE.MatchString(f.DatabaseBackupLSN) {
			bad("full %d: database_backup_lsn %q is not a numeric(25,0) LSN", f.Sequence, f.DatabaseBackupLSN)
		}
		if f.BackupSetGUID == "" || f.FinishUTC.IsZero() {
			bad("full %d needs its backup_set_guid and backup_finish_utc", f.Sequence)
		}
	}
	for i := range r.Logs {
		r.validateLog(&r.Logs[i], i, bad)
	}
	if b := r.Break; b != nil && (!logchain.BreakReason(b.Reason).Valid() || b.At.IsZero()) {
		bad("break: reason %q is unknown or at is missing", b.Reason)
	}
	if g := r.Signature; g != nil && (!keyIDRE.MatchString(g.KeyID) || !hexSHA256.MatchString(g.HMACSHA256)) {
		bad("signature needs a key_id and hmac_sha256 of 64 lower-case hex digits")
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("chain record %s: %w", r.FileName(), err)
	}
	return nil
}

func (r *ChainRecord) validateLog(l *LogBackup, i int, bad func(string, ...any)) {
	if PartOf(l.Number) != r.Part || l.Number < 1 {
		bad("log %d does not belong in part %d", l.Number, r.Part)
	}
	if i > 0 && l.Number != r.Logs[i-1].Number+1 {
		bad("log %d follows log %d: numbers are claimed in order", l.Number, r.Logs[i-1].Number)
	}
	if !l.State.Valid() {
		bad("log %d: state %q is unknown", l.Number, l.State)
	}
	if l.UpdatedAt.IsZero() {
		bad("log %d: updated_at must be set", l.Number)
	}
	if l.Foreign == nil && l.WorkflowID == "" {
		bad("log %d has no owning run (workflow_id)", l.Number)
	}
	made := l.State == LogWritten || l.State == LogCopied
	if made {
		for name, v := range map[string]string{"first_lsn": l.FirstLSN, "last_lsn": l.LastLSN} {
			if !lsnRE.MatchString(v) {
				bad("log %d: %s %q is not a numeric(25,0) LSN", l.Number, name, v)
			}
		}
		if l.UTCOffsetMinutes == nil || l.BackupStart.IsZero() || l.BackupFinish.IsZero() {
			bad("log %d: a written log backup records its start and finish with the source's offset from UTC", l.Number)
		}
		if len(l.Files) == 0 && (l.Foreign == nil || l.Foreign.Adopted) {
			bad("log %d: a written log backup lists its files", l.Number)
		}
	}
	if l.DatabaseBackupLSN != "" && !lsnRE.MatchString(l.DatabaseBackupLSN) {
		bad("log %d: database_backup_lsn %q is not a numeric(25,0) LSN", l.Number, l.DatabaseBackupLSN)
	}
	if l.SoftwareVersion != "" && !softwareVersionRE.MatchString(l.SoftwareVersion) {
		bad("log %d: software_version %q is not a SQL Server build (major.minor.build)", l.Number, l.SoftwareVersion)
	}
	checkInstants(fmt.Sprintf("log %d", l.Number), l.UTCOffsetMinutes, bad,
		reported{"backup_start", l.BackupStart, l.BackupStartUTC}, reported{"backup_finish", l.BackupFinish, l.BackupFinishUTC})
	if len(l.Files) > MaxLogFiles {
		bad("log %d has %d files, at most %d", l.Number, len(l.Files), MaxLogFiles)
	}
	for j, f := range l.Files {
		if want := r.LogFileName(l.Number, j+1, len(l.Files)); f.Name != want {
			bad("log %d file %d is named %q, want %q", l.Number, j+1, f.Name, want)
		}
		if f.Size < 0 || f.SHA256 != "" && !hexSHA256.MatchString(f.SHA256) {
			bad("log %d file %q: negative size or sha256 not 64 lower-case hex digits", l.Number, f.Name)
		}
		if l.State == LogCopied && f.SHA256 == "" {
			bad("log %d file %q: a copied log backup has every file's sha256", l.Number, f.Name)
		}
	}
	if f := l.Foreign; f != nil && (f.Path == "" || f.Adopted != (len(l.Files) > 0)) {
		bad("log %d: a foreign log backup names its path, and has files exactly when adopted", l.Number)
	}
	if p := l.Proven; p != nil && (!logchain.ProofMode(p.Mode).Valid() || p.At.IsZero() || p.Instance == "" || p.Database == "" || !made) {
		bad("log %d: proven needs a written log backup, a mode (standby, nightly), at, instance and database", l.Number)
	}
	if (l.State == LogFailed) != (l.Failure != "") {
		bad("log %d: state %q and the failure record disagree", l.Number, l.State)
	}
}

// softwareVersionRE is a SQL Server build as a backup's header gives it.
var softwareVersionRE = regexp.MustCompile(`^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,6}(\.[0-9]{1,6})?$`)

var chainKind = recordKind{what: "chain record", purpose: purposeChain, version: ChainSchemaVersion}

func (r *ChainRecord) seal() (*int, **Signature, *Auth) {
	return &r.SchemaVersion, &r.Signature, &r.Auth
}

// schemaVersion is the oldest version that holds r: 2 with an encrypted
// log backup or a log's own build, else 1.
func (r *ChainRecord) schemaVersion() int {
	for _, l := range r.Logs {
		if l.Encryption != nil || l.SoftwareVersion != "" {
			return 2
		}
	}
	return 1
}

// EncodeChain validates r and renders it as indented JSON, signed with
// the current key of keys (unsigned with nil keys). A record over
// MaxChainRecordBytes is refused: start the next part instead.
func EncodeChain(r *ChainRecord, keys *Keys) ([]byte, error) { return encodeRecord(r, chainKind, keys) }

// DecodeChain parses a chain record strictly (unknown fields, trailing
// data, another schema version, an inconsistent record or one over
// MaxChainRecordBytes are errors) and authenticates it with keys.
func DecodeChain(data []byte, keys *Keys) (*ChainRecord, error) {
	return decodeRecord[ChainRecord, *ChainRecord](data, chainKind, keys)
}

// SaveChain encodes r, signed with keys, and writes it atomically as
// r.FileName().
func SaveChain(ctx context.Context, fsys FS, keys *Keys, r *ChainRecord) error {
	return saveRecord(ctx, fsys, r, chainKind, keys)
}

// LoadChain reads part `part` of chain of (instance, db), checking that the
// file describes it. A missing file wraps fs.ErrNotExist or
// storage.ErrNotFound.
func LoadChain(ctx context.Context, fsys FS, keys *Keys, instance, db string, chain int64, part int) (*ChainRecord, error) {
	name := tsql.NamesOf(instance, db).ChainRecord(chain, part)
	data, err := fsys.ReadFile(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read chain record %s: %w", name, err)
	}
	r, err := DecodeChain(data, keys)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if r.FileName() != name || r.SourceInstance != instance || r.Database != db {
		return nil, fmt.Errorf("chain record %s describes chain %d part %d of %s/%s", name, r.Chain, r.Part, r.SourceInstance, r.Database)
	}
	return r, nil
}

// IsNotExist reports whether err says a file is not there.
func IsNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, storage.ErrNotFound)
}

// ChainListing is what one backup directory holds of a database's chains.
type ChainListing struct {
	// Records that decoded, by chain then part, each authenticated: an
	// untrusted one is listed for the caller to report, never to trust.
	Records []*ChainRecord
	// LogFiles are the log backup files (tsql.ParseLogFileName) of the
	// database, with their chain and number.
	LogFiles []FileInfo
	// Broken maps a record's file name to why it could not be read.
	Broken map[string]error
}

// ListChains reads every chain record of database d in the directory
// (every instance key of d, the case-safe naming only: chains have no
// other), and lists its log backup files.
func ListChains(ctx context.Context, fsys FS, keys *Keys, d DB) (ChainListing, error) {
	l := ChainListing{Broken: map[string]error{}}
	for _, inst := range d.instances() {
		n := tsql.NamesOf(inst, d.Database)
		files, err := fsys.List(ctx, n.LogPrefix(), "")
		if err != nil {
			return ChainListing{}, fmt.Errorf("list backup directory: %w", err)
		}
		sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
		for _, f := range files {
			if p, ok := tsql.ParseLogFileName(f.Name); ok && p.Owner == n.Owner() {
				l.LogFiles = append(l.LogFiles, f)
				continue
			}
			p, ok := tsql.ParseChainRecordName(f.Name)
			if !ok || p.Owner != n.Owner() {
				continue
			}
			data, err := fsys.ReadFile(ctx, f.Name)
			if err != nil {
				if ctx.Err() != nil {
					return ChainListing{}, ctx.Err()
				}
				l.Broken[f.Name] = err
				continue
			}
			r, err := DecodeChain(data, keys)
			if err == nil && (r.FileName() != f.Name || r.SourceInstance != inst || r.Database != d.Database) {
				err = fmt.Errorf("chain record file %s describes chain %d part %d of %s/%s", f.Name, r.Chain, r.Part, r.SourceInstance, r.Database)
			}
			if err != nil {
				l.Broken[f.Name] = err
				continue
			}
			l.Records = append(l.Records, r)
		}
	}
	sort.SliceStable(l.Records, func(i, j int) bool {
		a, b := l.Records[i], l.Records[j]
		if a.Chain != b.Chain {
			return a.Chain < b.Chain
		}
		return a.Part < b.Part
	})
	return l, nil
}

// LogOffsets are the source's offsets from UTC, in minutes, with which
// the log backups of parts reported their dates, by number (a log
// recorded without one is left out): the logchain model holds instants
// only, but STOPAT is a time on the source's clock.
func LogOffsets(parts []*ChainRecord) map[int64]int {
	return byNumber(parts, func(l LogBackup) (int, bool) {
		if l.UTCOffsetMinutes == nil {
			return 0, false
		}
		return *l.UTCOffsetMinutes, true
	})
}

// LogVersions are the SQL Server builds that wrote the log backups of
// parts, by number (a log recorded without one is left out).
func LogVersions(parts []*ChainRecord) map[int64]string {
	return byNumber(parts, func(l LogBackup) (string, bool) { return l.SoftwareVersion, l.SoftwareVersion != "" })
}

// byNumber is what get gives of each log backup of parts, by number.
func byNumber[T any](parts []*ChainRecord, get func(LogBackup) (T, bool)) map[int64]T {
	out := map[int64]T{}
	for _, p := range parts {
		for _, l := range p.Logs {
			if v, ok := get(l); ok {
				out[l.Number] = v
			}
		}
	}
	return out
}

// AssembleChain joins the trusted parts of one chain (any order) into the
// logchain model. verified says which fulls (BackupSetGUID) are verified
// sets. Pending and failed log backups are left out (they hold nothing);
// a foreign log backup is in, held or not, so that its hole is named.
// Parts must run 1..n without a missing one, else the chain's logs after
// the hole could not be judged.
func AssembleChain(parts []*ChainRecord, verified map[string]bool) (logchain.Chain, error) {
	if len(parts) == 0 {
		return logchain.Chain{}, errors.New("assemble chain: no record")
	}
	ps := slices.Clone(parts)
	sort.Slice(ps, func(i, j int) bool { return ps[i].Part < ps[j].Part })
	c := logchain.Chain{ID: ps[0].Chain}
	for i, p := range ps {
		if !p.Trusted() {
			return logchain.Chain{}, fmt.Errorf("chain record %s is not trusted: %s", p.FileName(), p.Auth.Why())
		}
		if p.Chain != c.ID || p.Part != i+1 || p.Database != ps[0].Database || p.SourceInstance != ps[0].SourceInstance {
			return logchain.Chain{}, fmt.Errorf("assemble chain %d: part %d of %s/%s (chain %d) where part %d belongs", c.ID, p.Part, p.SourceInstance, p.Database, p.Chain, i+1)
		}
		for _, f := range p.Fulls {
			c.Fulls = append(c.Fulls, logchain.Full{Sequence: f.Sequence, BackupSetGUID: f.BackupSetGUID, FirstLSN: logchain.LSN(f.FirstLSN),
				LastLSN: logchain.LSN(f.LastLSN), CheckpointLSN: logchain.LSN(f.CheckpointLSN), DatabaseBackupLSN: logchain.LSN(f.DatabaseBackupLSN),
				Finish: f.FinishUTC, CopyOnly: f.CopyOnly, Verified: verified[f.BackupSetGUID]})
		}
		for _, l := range p.Logs {
			if l.State != LogWritten && l.State != LogCopied {
				continue
			}
			cl := logchain.Log{Number: l.Number, FirstLSN: logchain.LSN(l.FirstLSN), LastLSN: logchain.LSN(l.LastLSN),
				DatabaseBackupLSN: logchain.LSN(l.DatabaseBackupLSN), Start: l.BackupStartUTC, Finish: l.BackupFinishUTC,
				Servers: slices.Clone(l.Servers)}
			for _, f := range l.Files {
				cl.Files = append(cl.Files, logchain.File{Name: f.Name, Size: f.Size, SHA256: f.SHA256})
			}
			if pr := l.Proven; pr != nil {
				cl.Proven = &logchain.Proof{At: pr.At, Mode: logchain.ProofMode(pr.Mode)}
			}
			if fo := l.Foreign; fo != nil {
				cl.Foreign = &logchain.Foreign{Tool: fo.Tool, User: fo.User, Path: fo.Path, Adopted: fo.Adopted}
			}
			c.Logs = append(c.Logs, cl)
		}
		if b := p.Break; b != nil {
			c.Break = &logchain.Break{Reason: logchain.BreakReason(b.Reason), Detail: b.Detail, At: b.At}
		}
	}
	if err := c.Validate(); err != nil {
		return logchain.Chain{}, err
	}
	return c, nil
}
