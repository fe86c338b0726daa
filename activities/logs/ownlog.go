package logs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/logchain"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// A chain record can lose a log backup that was taken: an attempt cut
// short by a heartbeat timeout or a crash after its BACKUP LOG, whose
// write of the record was lost or landed late over the record of later
// logs. The log is then in msdb and on the backup server, named as the
// chain's own, but not in the record; without it the next log begins past
// where the record says the chain stands, and the chain would look broken
// although every log exists. adoptOwn takes it back.

// logLayout are the file names of log n of rec's chain on the backup
// server and the paths SQL Server writes them to.
func logLayout(srv *config.BackupServer, inst *config.SQLInstance, rec *catalog.ChainRecord, n int64) (fileNames, layout []string) {
	names := rec.Names()
	paths := srv.PathsFor(inst.Name)
	layout = make([]string, logFiles)
	fileNames = make([]string, logFiles)
	for i := range layout {
		fileNames[i] = names.LogStripe(rec.Chain, n, i+1, logFiles)
		layout[i] = tsql.JoinPath(paths[i%len(paths)], fileNames[i])
	}
	return fileNames, layout
}

// written records in l the finished log backup its header hs describes
// (off: the source's offset from UTC its dates are on) with its files,
// hashed on the backup server; it returns their bytes.
func (a *Activities) written(ctx context.Context, st storage.Storage, srv *config.BackupServer, inst *config.SQLInstance, server string,
	l *catalog.LogBackup, hs mssql.BackupHeader, off int, fileNames, layout []string) (int64, error) {
	l.State, l.BackupSetGUID, l.Failure = catalog.LogWritten, hs.BackupSetGUID, ""
	l.FirstLSN, l.LastLSN, l.DatabaseBackupLSN = hs.FirstLSN, hs.LastLSN, hs.DatabaseBackupLSN
	l.BackupStart, l.BackupFinish = hs.BackupStartDate, hs.BackupFinishDate
	l.SetUTCOffset(off)
	// The build that wrote this log, from its own header: a source patched
	// since the chain's full writes its logs with the new one.
	l.SoftwareVersion = hs.SoftwareVersion
	l.Encryption = activities.HeaderEncryption(hs)
	l.Files = nil
	var bytes int64
	for _, name := range fileNames {
		size, sum, err := hashFile(ctx, st, name)
		if errors.Is(err, storage.ErrNotFound) {
			return 0, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
				"backup server %s: SQL Server wrote %s (%s) but the worker does not see %s in %s (location): they must be the same directory",
				server, layout[0], srv.PathsKey(inst.Name), name, st.Location()))
		}
		if err != nil {
			return 0, activities.StorageError(server, err)
		}
		l.Files = append(l.Files, catalog.Stripe{Name: name, Size: size, SHA256: sum})
		bytes += size
	}
	l.Servers = []string{server}
	l.UpdatedAt = a.Base.Cycle.Clock().UTC()
	return bytes, nil
}

// adoptOwn records l, a number just claimed whose files are on the
// backup server already, as written when they hold this chain's own log
// backup of that number and it continues the chain: its header names it
// (tsql.BackupLogName) and is complete, msdb lists that backup set for
// the database with the same LSNs and file, it begins at or before end
// (where the chain stands) and ends at or after it, on the chain's
// recovery fork. Anything else (another file, one msdb does not know, a
// log that leaves a hole) is not adopted (false), and the number is
// skipped as before. It returns the recovery fork the adopted log ends on.
func (a *Activities) adoptOwn(ctx context.Context, sqlDB *mssql.DB, st storage.Storage, srv *config.BackupServer, inst *config.SQLInstance,
	db *config.Database, server string, part *catalog.ChainRecord, l *catalog.LogBackup, end, fork string, log *zap.Logger) (string, bool, error) {
	if end == "" {
		return "", false, nil
	}
	fileNames, layout := logLayout(srv, inst, part, l.Number)
	hs, done, err := a.finished(ctx, sqlDB, layout, part.Chain, l.Number)
	switch {
	case errors.Is(err, mssql.ErrDeviceInUse):
		return "", false, nil // written now by someone: not a finished log of ours
	case err != nil:
		return "", false, activities.SQLError(err)
	case !done:
		return "", false, nil
	}
	first, last, at := logchain.LSN(hs.FirstLSN), logchain.LSN(hs.LastLSN), logchain.LSN(end)
	if at.Less(first) || last.Less(at) || offPath(l.Number, hs.Fork, fork, end) != "" {
		return "", false, nil
	}
	q, args, err := tsql.LogBackupsAfter(db.Name, hs.FirstLSN)
	if err != nil {
		return "", false, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	rows, err := sqlDB.LogBackupHistory(ctx, q, args...)
	if err != nil {
		return "", false, activities.SQLError(err)
	}
	var row *mssql.LogBackupRow
	for i, r := range rows {
		if strings.EqualFold(r.GUID, hs.BackupSetGUID) && r.Name == hs.BackupName && r.FirstLSN == hs.FirstLSN && r.LastLSN == hs.LastLSN &&
			!r.CopyOnly && strings.EqualFold(r.Path, layout[0]) {
			row = &rows[i]
			break
		}
	}
	if row == nil {
		return "", false, nil
	}
	off, ok := row.UTCOffsetMinutes()
	if !ok {
		if off, err = activities.ServerOffset(ctx, sqlDB); err != nil {
			return "", false, err
		}
	}
	if _, err := a.written(ctx, st, srv, inst, server, l, hs, off, fileNames, layout); err != nil {
		return "", false, err
	}
	log.Warn("log backup taken by an earlier attempt whose record of it was lost: adopted into the chain", zap.Int64("chain", part.Chain),
		zap.Int64("seq", l.Number), zap.String("first_lsn", l.FirstLSN), zap.String("last_lsn", l.LastLSN))
	return hs.Fork.Last, true, nil
}
