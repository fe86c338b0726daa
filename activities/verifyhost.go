package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	mssqldb "github.com/microsoft/go-mssqldb"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/hostcheck"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// hostFacts reads what an instance says about itself; a failure is logged
// and the checks that need the facts are skipped (SQL Server's own refusal,
// classified by hostKindError, still stops the cycle at once).
func hostFacts(ctx context.Context, sqlDB *mssql.DB, inst string, log *zap.Logger) (hostcheck.Facts, bool) {
	f, err := hostcheck.Read(ctx, sqlDB)
	if err != nil {
		log.Warn("could not read what the instance can host: its checks are skipped", zap.String("instance", inst), zap.Error(err))
		return f, false
	}
	return f, true
}

// checkHostPaths refuses paths the instance cannot use: UNC paths on SQL
// Server on Linux.
func checkHostPaths(inst string, f hostcheck.Facts, srv *config.BackupServer) error {
	c := hostcheck.Paths(inst, f, srv.Name, srv.PathsKey(inst), srv.PathsFor(inst))
	if c.Problem {
		return nonRetryable(ErrInvalidConfig, errors.New(c.Error()))
	}
	return nil
}

// checkVerifyHost checks, before the RESTORE, that the verification
// instance can host the copy: its edition's size limit, the features the
// database uses (FILESTREAM, containment, QAT compression), the restore
// directories and the free space of their volumes for the files' allocated
// size. The first problem stops the cycle: InvalidConfig, or
// VerifyInstanceFull for space; neither is evidence against the set.
func (a *Activities) checkVerifyHost(ctx context.Context, sqlDB *mssql.DB, f hostcheck.Facts, db *config.Database,
	srv *config.BackupServer, inst, verifyDB string, disks []string, files []mssql.FileListEntry, log *zap.Logger) error {
	hq, err := tsql.RestoreHeaderOnly(disks)
	if err != nil {
		return nonRetryable(ErrInvalidConfig, err)
	}
	hs, err := sqlDB.HeaderOnly(ctx, hq)
	if err != nil {
		return sqlError(err)
	}
	need := hostcheck.Need{Database: db.ID()}
	if len(hs) > 0 {
		need.Contained = hs[0].Containment != 0
		need.QAT = strings.EqualFold(hs[0].CompressionAlgorithm, "QAT_DEFLATE")
	}
	var data, logBytes int64
	for _, fl := range files {
		switch strings.ToUpper(fl.Type) {
		case "L":
			logBytes += fl.Size
		case "S":
			need.Filestream = true
			data += fl.Size // on the data directory's volume, not in the edition's limit
		default:
			need.DataBytes += fl.Size
			data += fl.Size
		}
	}
	need.LogBytes = logBytes
	findings := hostcheck.Features(inst, f, need)
	for _, k := range []struct{ key, dir string }{{"restore_data_dir", srv.RestoreDataDir}, {"restore_log_dir", srv.RestoreLogDir}} {
		if k.key == "restore_log_dir" && k.dir == srv.RestoreDataDir {
			continue
		}
		findings = append(findings, hostcheck.Directory(inst, k.key, k.dir, hostcheck.ReadDir(ctx, sqlDB, f, k.dir)))
	}
	if c, ok := hostcheck.FirstProblem(findings); ok {
		return hostProblem(srv, c)
	}
	vols, err := hostcheck.ReadVolumes(ctx, sqlDB)
	if err != nil {
		log.Warn("could not read the free space of the restore volumes: SQL Server checks it itself", zap.String("instance", inst), zap.Error(err))
		return nil
	}
	dirs := []hostcheck.DirNeed{
		{Key: "restore_data_dir", Dir: srv.RestoreDataDir, Bytes: data, What: "data files of " + db.ID()},
		{Key: "restore_log_dir", Dir: srv.RestoreLogDir, Bytes: logBytes, What: "log of " + db.ID()},
	}
	if c, ok := hostcheck.FirstProblem(hostcheck.Space(inst, dirs, vols, verifyDB)); ok {
		return hostProblem(srv, c)
	}
	return nil
}

// hostProblem is a finding as the cycle's error.
func hostProblem(srv *config.BackupServer, c hostcheck.Finding) error {
	err := fmt.Errorf("verification instance %s of backup server %s cannot host the copy: %s", srv.VerifyInstance, srv.Name, c.Error())
	if c.Full {
		return nonRetryable(ErrVerifyInstanceFull, err)
	}
	return nonRetryable(ErrInvalidConfig, err)
}

// hostKindError maps the failures of an instance that cannot do what the
// cycle asks of it (mssql.ErrHostUnfit, ErrVolumeFull, ErrFileSystemLimit)
// to their types, with the fix; ok is false for other errors. None is
// retried and none is evidence.
func hostKindError(err error, details ...any) (mapped error, ok bool) {
	var typ, hint string
	switch {
	case errors.Is(err, mssql.ErrHostUnfit):
		typ, hint = ErrInvalidConfig, hostUnfitHint(err)
	case errors.Is(err, mssql.ErrVolumeFull):
		typ, hint = ErrVerifyInstanceFull, "the verification instance's restore volume has not the space the copy's files take "+
			"(their allocated size, RESTORE FILELISTONLY Size, not the backup's size): free space there (copies kept with keep_verify_db, "+
			"other databases) or point restore_data_dir/restore_log_dir at a larger volume, then `starter run --resume` the set; "+
			"nothing is wrong with the set"
	case errors.Is(err, mssql.ErrFileSystemLimit):
		typ, hint = ErrFileSystemLimit, "the backup server's file system cannot grow the backup file further (NTFS limits how fragmented a "+
			"file may get, operating system error 665): use more stripes (stripes: N, or auto) so each file stays smaller, or format "+
			"the backup volume with large file record segments (format /L) and defragment it"
	default:
		return nil, false
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%v: %s", err, hint), typ, err, details...), true
}

// hostUnfitHint names the fix of what SQL Server said the instance cannot
// host.
func hostUnfitHint(err error) string {
	var f *mssql.Failure
	if !errors.As(err, &f) {
		return "the verification instance cannot host this database: `starter preflight` names the check and its fix"
	}
	has := func(n int32) bool {
		return slices.ContainsFunc(f.Errors, func(e mssqldb.Error) bool { return e.Number == n })
	}
	switch {
	case has(1827):
		return "the verification instance's edition (Express: 10 GB of data per database) cannot hold this database: verify it on a Standard, Enterprise or Developer edition"
	case has(5591):
		return "FILESTREAM is disabled on the verification instance (or it runs on Linux, which has none): enable it (SQL Server Configuration Manager, then sp_configure 'filestream access level', 2; RECONFIGURE) or verify on a Windows instance that has it"
	case has(12824):
		return "the database is contained: EXEC sp_configure 'contained database authentication', 1; RECONFIGURE; on the verification instance"
	}
	return "a restore directory does not exist on the verification instance's host, or a file of another database is in the way: create restore_data_dir and restore_log_dir there (writable by its SQL Server service account) or fix them in the configuration"
}
