package cycle

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// WriteManifest reads the set's RESTORE HEADERONLY and writes its manifest
// (state written) beside the stripes on the primary server.
func (a *Activities) WriteManifest(ctx context.Context, in activities.ManifestInput) (activities.ManifestOutput, error) {
	defer a.Cycle.KeepAlive(ctx)()
	d := &a.Cycle
	db, err := d.SourceDatabase(in.Instance, in.Database, in.Entry, in.Replica)
	if err != nil {
		return activities.ManifestOutput{}, err
	}
	inst, err := d.Instance(db.Source())
	if err != nil {
		return activities.ManifestOutput{}, err
	}
	// The set's own stripes on a server of the rotation: their names and
	// paths are derived here, never taken from the input (a path in it
	// would make SQL Server open whatever it names).
	srv, err := d.RotationServer(db, "manifest server", in.Server)
	if err != nil {
		return activities.ManifestOutput{}, err
	}
	n := len(in.Backup.Stripes)
	if n == 0 {
		return activities.ManifestOutput{}, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("manifest of %s seq %d: the backup reported no stripes", db.ID(), in.Sequence))
	}
	if n > activities.MaxStripes(db) {
		return activities.ManifestOutput{}, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
			"manifest of %s seq %d: the backup reported %d stripes; the configuration allows at most %d", db.ID(), in.Sequence, n, activities.MaxStripes(db)))
	}
	st, err := d.OpenServer(ctx, srv)
	if err != nil {
		return activities.ManifestOutput{}, err
	}
	defer st.Close()
	// The claim Backup wrote names the set's files (and becomes the
	// manifest); a manifest of another run is never replaced.
	m, loadErr := d.LoadManifest(ctx, st, db, in.Sequence)
	names := tsql.NamesOf(db.Instance, db.Name)
	if loadErr == nil {
		names = m.Names()
	}
	layout, err := tsql.Layout(srv.PathsFor(inst.Name), names, in.Sequence, n)
	if err != nil {
		return activities.ManifestOutput{}, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	paths := tsql.Paths(layout)
	hq, err := tsql.RestoreHeaderOnly(paths)
	if err != nil {
		return activities.ManifestOutput{}, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	sqlDB, err := d.ConnectSQL(ctx, inst, "master")
	if err != nil {
		return activities.ManifestOutput{}, err
	}
	defer sqlDB.Close()
	hs, err := sqlDB.HeaderOnly(ctx, hq)
	if err != nil {
		return activities.ManifestOutput{}, activities.SQLError(err)
	}
	if len(hs) == 0 {
		return activities.ManifestOutput{}, activities.NonRetryable(activities.ErrCorruptBackup, fmt.Errorf("RESTORE HEADERONLY of %s seq %d returned no backup set", db.ID(), in.Sequence))
	}
	// The header's dates are the source's wall clock: its offset from UTC
	// when the backup ran makes them instants.
	h := hs[0]
	offset, err := activities.BackupOffset(ctx, sqlDB, h.BackupSetGUID)
	if err != nil {
		return activities.ManifestOutput{}, err
	}
	if !strings.EqualFold(h.DatabaseName, db.Name) || (h.BackupName != "" && h.BackupName != tsql.BackupSetName(in.Sequence)) {
		return activities.ManifestOutput{}, activities.NonRetryable(activities.ErrCorruptBackup, fmt.Errorf(
			"stripes of %s seq %d hold backup %q of database %q, not this set", db.ID(), in.Sequence, h.BackupName, h.DatabaseName))
	}
	// A differential's claim names the base its plan chose; the header
	// names the one SQL Server took (diff.go).
	var claimed *catalog.DiffBase
	if loadErr == nil && m.Differential != nil {
		claimed = m.Differential
	}
	if (h.BackupType == tsql.BackupTypeDifferential) != (claimed != nil) {
		return activities.ManifestOutput{}, activities.NonRetryable(activities.ErrCorruptBackup, fmt.Errorf(
			"stripes of %s seq %d hold a backup of type %d; the set's claim is a %s", db.ID(), in.Sequence, h.BackupType, kindOf(claimed != nil)))
	}
	if claimed != nil && !activities.SameGUID(h.DifferentialBaseGUID, claimed.BackupSetGUID) {
		return activities.ManifestOutput{}, activities.NonRetryable(activities.ErrDifferentialBaseMoved, fmt.Errorf(
			"differential set %d of %s holds the changes since %s, not since set %d (backup set %s), the verified full its plan chose: "+
				"a full backup taken since moved the database's differential base, so this differential restores on none of the product's "+
				"verified sets; differentials wait for the next verified full (the next full cycle, or `starter run --database %s`)",
			in.Sequence, db.ID(), activities.ForeignBase(a.Activities, ctx, sqlDB, db, h.DifferentialBaseGUID), claimed.Sequence, claimed.BackupSetGUID, db.Name))
	}
	// What the worker sees of each stripe, measured again.
	written, err := activities.FinishedBackup(ctx, st, srv, inst.Name, layout, in.Backup.Duration)
	if err != nil {
		return activities.ManifestOutput{}, err
	}
	now := d.Clock()
	switch err := loadErr; {
	case err == nil:
		if err := activities.OwnedByThisRun(ctx, m, srv.Name); err != nil {
			return activities.ManifestOutput{}, err
		}
		if m.State != catalog.StatePending {
			// A retry after the manifest was saved: nothing to do.
			return activities.ManifestOutput{Manifest: m.FileName(), BackupSetGUID: h.BackupSetGUID, Stripes: stripesOf(m, written.Stripes)}, nil
		}
		if err := m.Advance(catalog.StateWritten, now); err != nil {
			return activities.ManifestOutput{}, activities.NonRetryable(activities.ErrSequenceInUse, err)
		}
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, storage.ErrNotFound):
		m = catalog.New(db.Instance, db.Name, in.Sequence, now)
		m.WorkflowID, m.RunID = activities.RunOf(ctx)
	default:
		return activities.ManifestOutput{}, activities.StorageError(srv.Name, err)
	}
	m.PrimaryServer = srv.Name
	m.Servers = []string{srv.Name}
	for _, s := range written.Stripes {
		m.Stripes = append(m.Stripes, catalog.Stripe{Name: s.Name, Size: s.Size})
	}
	// What the set is, as SQL Server reports it (the plan may have changed
	// the configured options: no COMPRESSION on Express, COPY_ONLY for a
	// read-only source).
	// The MAXTRANSFERSIZE Backup reports is recorded only where Backup may
	// send one of its own (runMode): otherwise the configured one.
	mts := int(db.MaxTransferSize)
	if v := in.Backup.MaxTransferSize; db.MaxTransferSize == 0 && v == plan.DefaultMaxTransferSize {
		mts = v
	}
	m.Options = catalog.Options{Compression: h.Compressed, Checksum: h.HasBackupChecksums, CopyOnly: h.IsCopyOnly,
		BufferCount: db.BufferCount, MaxTransferSize: mts, BlockSize: int(db.BlockSize), Stripes: len(m.Stripes)}
	m.Header = &catalog.Header{
		BackupSetGUID: h.BackupSetGUID, FirstLSN: h.FirstLSN, LastLSN: h.LastLSN, DatabaseBackupLSN: h.DatabaseBackupLSN,
		BackupStart: h.BackupStartDate, BackupFinish: h.BackupFinishDate, BackupSize: h.BackupSize,
		CompressedBackupSize: h.CompressedBackupSize, ServerName: h.ServerName, DatabaseName: h.DatabaseName,
		HasBackupChecksums: h.HasBackupChecksums, SoftwareVersion: h.SoftwareVersion, CompressionAlgorithm: h.CompressionAlgorithm,
		TDEThumbprint: tdeThumbprint(ctx, sqlDB, paths), Encryption: HeaderEncryption(h),
	}
	m.Header.SetUTCOffset(offset)
	if claimed != nil {
		m.Differential.LSN = h.DifferentialBaseLSN
	}
	if h.FirstLSN == "" || h.LastLSN == "" {
		m.Header.FirstLSN, m.Header.LastLSN = orZero(h.FirstLSN), orZero(h.LastLSN)
	}
	_ = m.SetTiming(catalog.StepBackup, now.Add(-in.Backup.Duration), now)
	if err := d.SaveManifest(ctx, st, m); err != nil {
		return activities.ManifestOutput{}, activities.StorageError(srv.Name, err)
	}
	activities.Logger(a.Activities, ctx).Info("manifest written", zap.String("db", db.Name), zap.Int64("seq", in.Sequence),
		zap.String("server", srv.Name), zap.String("manifest", m.FileName()))
	return activities.ManifestOutput{Manifest: m.FileName(), BackupSetGUID: h.BackupSetGUID, Stripes: stripesOf(m, written.Stripes)}, nil
}

// HeaderEncryption is the backup encryption of a set or a log backup as its
// RESTORE HEADERONLY reports it, nil when it is not encrypted.
func HeaderEncryption(h mssql.BackupHeader) *catalog.BackupEncryption {
	if h.EncryptorThumbprint == "" {
		return nil
	}
	return &catalog.BackupEncryption{Algorithm: h.KeyAlgorithm, Thumbprint: h.EncryptorThumbprint, EncryptorType: h.EncryptorType}
}

// tdeThumbprint is the certificate a TDE set needs (FILELISTONLY
// TDEThumbprint), "" without TDE or when the file list cannot be read.
func tdeThumbprint(ctx context.Context, sqlDB *mssql.DB, paths []string) string {
	q, err := tsql.RestoreFileListOnly(paths)
	if err != nil {
		return ""
	}
	files, err := sqlDB.FileListOnly(ctx, q)
	if err != nil {
		return ""
	}
	for _, f := range files {
		if f.TDEThumbprint != "" {
			return f.TDEThumbprint
		}
	}
	return ""
}

// kindOf names a set's kind in messages.
func kindOf(differential bool) string {
	if differential {
		return "differential"
	}
	return "full"
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// stripesOf lists a manifest's stripes with the paths SQL Server used.
func stripesOf(m *catalog.Manifest, paths []activities.Stripe) []activities.Stripe {
	out := make([]activities.Stripe, len(m.Stripes))
	for i, s := range m.Stripes {
		out[i] = activities.Stripe{Name: s.Name, Size: s.Size, SHA256: s.SHA256}
		if i < len(paths) {
			out[i].Path = paths[i].Path
		}
	}
	return out
}
