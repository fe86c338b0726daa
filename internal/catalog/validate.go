package catalog

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// A manifest is validated before it is written and after it is read: a
// record that is incomplete or inconsistent is never trusted as a set.

var (
	hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)
	lsnRE     = regexp.MustCompile(`^[0-9]{1,25}$`)
)

// Validate checks that the manifest is complete and consistent.
func (m *Manifest) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if m.SchemaVersion < minSchemaVersion || m.SchemaVersion > SchemaVersion {
		bad("schema_version %d is not supported (this build reads %d..%d)", m.SchemaVersion, minSchemaVersion, SchemaVersion)
	}
	if m.SourceInstance == "" {
		bad("source_instance is empty: every set belongs to one (instance, database)")
	}
	if err := tsql.CheckIdent(m.Database); err != nil {
		bad("database: %w", err)
	}
	if m.Naming != "" && m.Naming != NamingCaseSafe {
		bad("naming %q is unknown (this build knows %q and none)", m.Naming, NamingCaseSafe)
	}
	if m.Entry != "" && m.Naming == "" {
		bad("entry is recorded only with case-safe names")
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
	if m.Failure != nil && !m.Failure.Evidence.Valid() {
		bad("failure without evidence about the set's content (%q)", m.Failure.Evidence)
	}
	if (m.State == StateCancelled) != (m.Cancelled != nil) {
		bad("state %q and the cancelled record disagree", m.State)
	}
	if m.CreatedAt.IsZero() || m.UpdatedAt.IsZero() {
		bad("created_at and updated_at must be set")
	}
	if m.Options.Stripes != 0 && m.Options.Stripes != len(m.Stripes) {
		bad("options.stripes is %d but %d stripes are listed", m.Options.Stripes, len(m.Stripes))
	}
	for i, s := range m.Stripes {
		want := m.StripeFileName(i+1, len(m.Stripes))
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
		checkInstants("header", h.UTCOffsetMinutes, bad, reported{"backup_start", h.BackupStart, h.BackupStartUTC},
			reported{"backup_finish", h.BackupFinish, h.BackupFinishUTC})
	}
	if p := m.Proof; p != nil {
		checkInstants("proof", p.UTCOffsetMinutes, bad, reported{"restored_at", p.RestoredAt, p.RestoredAtUTC})
	}
	if v := m.VerifyCopy; v != nil {
		if v.VerifyInstance == "" || tsql.CheckIdent(v.VerifyDatabase) != nil || v.BackupSetGUID == "" || v.SentAt.IsZero() {
			bad("verify_copy needs verify_instance, a valid verify_database, backup_set_guid and sent_at")
		}
		if (v.RestoreHistoryID != 0) != (v.DatabaseID != 0) || (v.RestoreHistoryID != 0) == v.ConfirmedAt.IsZero() ||
			!v.DatabaseCreated.IsZero() && v.DatabaseID == 0 {
			bad("verify_copy: restore_history_id, database_id, database_create_date and confirmed_at are recorded together")
		}
		checkInstants("verify_copy", v.UTCOffsetMinutes, bad, reported{"instance_time", v.InstanceTime, v.InstanceTimeUTC})
		if !v.newestRestoreOK() {
			bad("verify_copy.newest_restore_before is a restore_history_id (0 for none), read with instance_time")
		}
		if b := v.CheckDBBaseline; b != nil && (!v.Confirmed() || b.At.IsZero()) {
			bad("verify_copy.checkdb_baseline is recorded with a confirmed restore, and has its at")
		}
	}
	if f := m.version3Fields(); m.SchemaVersion < 3 && len(f) > 0 {
		bad("schema_version %d cannot hold %s (version 3 does)", m.SchemaVersion, strings.Join(f, ", "))
	}
	if m.SchemaVersion < 4 && m.SanityProof != nil {
		bad("schema_version %d cannot hold sanity_proof (version 4 does)", m.SchemaVersion)
	}
	if m.SchemaVersion < 5 && m.VerifyCopy != nil && m.VerifyCopy.CheckDBBaseline != nil {
		bad("schema_version %d cannot hold verify_copy.checkdb_baseline (version 5 does)", m.SchemaVersion)
	}
	if h := m.Header; h != nil && h.Encryption != nil {
		if m.SchemaVersion < 9 {
			bad("schema_version %d cannot hold header.encryption (version 9 does)", m.SchemaVersion)
		}
		if !h.Encryption.valid() {
			bad("header.encryption needs its algorithm, the encryptor's thumbprint (0x...) and type")
		}
	}
	if m.SchemaVersion < 7 && m.Immutable != nil {
		bad("schema_version %d cannot hold immutable (version 7 does)", m.SchemaVersion)
	}
	if d := m.Differential; d != nil {
		if m.SchemaVersion < 8 {
			bad("schema_version %d cannot hold differential (version 8 does)", m.SchemaVersion)
		}
		if d.Sequence <= 0 || d.Sequence >= m.Sequence || d.BackupSetGUID == "" || d.LSN != "" && !lsnRE.MatchString(d.LSN) {
			bad("differential needs its base's earlier set number, backup set GUID and LSN (decimal digits)")
		}
		if m.Header != nil && d.LSN == "" {
			bad("differential with a header needs its base's LSN (the header's DifferentialBaseLSN)")
		}
	}
	if f := m.Failure; f != nil && f.Evidence == EvidenceForeignBase && m.Differential == nil {
		bad("failure evidence %s is a differential's: a full backup has no differential base", EvidenceForeignBase)
	}
	if m.Immutable != nil && m.State != StateVerified {
		bad("immutable copy recorded for a set in state %s: only verified sets are copied there", m.State)
	}
	if g := m.Signature; g != nil {
		if m.SchemaVersion < SignedSchemaVersion {
			bad("schema_version %d cannot hold signature (version %d does)", m.SchemaVersion, SignedSchemaVersion)
		}
		if !keyIDRE.MatchString(g.KeyID) || !hexSHA256.MatchString(g.HMACSHA256) {
			bad("signature needs a key_id and hmac_sha256 of 64 lower-case hex digits")
		}
	}
	for step := range m.Timings {
		if !step.Valid() {
			bad("timings: unknown step %q", step)
		}
	}
	if m.Cancelled != nil && !m.Cancelled.Step.Valid() {
		bad("cancelled.step %q is unknown", m.Cancelled.Step)
	}
	if m.Failure != nil && !m.Failure.Step.Valid() {
		bad("failure.step %q is unknown", m.Failure.Step)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("manifest %s: %w", m.FileName(), err)
	}
	return nil
}

// MaxUTCOffsetMinutes bounds a server's offset from UTC: time zones run
// from UTC-12:00 to UTC+14:00.
const MaxUTCOffsetMinutes = 14 * 60

// reported is a date SQL Server reported, by its field name: the wall clock
// and the instant recorded for it.
type reported struct {
	name     string
	wall, at time.Time
}

// checkInstants checks that the dates of a part of the manifest agree with
// the part's offset from UTC: with no offset, no instant; with one, every
// instant is its wall clock minus the offset.
func checkInstants(part string, offset *int, bad func(string, ...any), dates ...reported) {
	for _, d := range dates {
		switch {
		case offset == nil && !d.at.IsZero():
			bad("%s.%s_utc without %s.utc_offset_minutes", part, d.name, part)
		case offset != nil && !d.at.Equal(Instant(d.wall, *offset)):
			bad("%s.%s_utc %s is not %s.%s %s minus utc_offset_minutes %d", part, d.name, d.at.Format(time.RFC3339Nano),
				part, d.name, d.wall.Format(time.RFC3339Nano), *offset)
		}
	}
	if offset != nil && (*offset < -MaxUTCOffsetMinutes || *offset > MaxUTCOffsetMinutes) {
		bad("%s.utc_offset_minutes %d is beyond any time zone (-%d..%d)", part, *offset, MaxUTCOffsetMinutes, MaxUTCOffsetMinutes)
	}
}
