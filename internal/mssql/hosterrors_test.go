package mssql

import (
	"errors"
	"testing"

	mssqldb "github.com/microsoft/go-mssqldb"
)

// What the verification instance cannot host, its full volume, NTFS's file
// limit and a BACKUP's missing directory: each its own kind, none of them a
// corrupt set, none retryable. OS error 2 on a device keeps meaning a file
// of the set is missing for a RESTORE.
func TestClassifyHostErrors(t *testing.T) {
	restoreOp, backupOp := "RESTORE DATABASE", "BACKUP DATABASE"
	cases := []struct {
		name string
		op   string
		errs []mssqldb.Error
		want error
	}{
		{"Express size limit", restoreOp, []mssqldb.Error{sqlErr(1827, 16,
			"CREATE DATABASE or ALTER DATABASE failed because the resulting cumulative database size would exceed your licensed limit of 10240 MB per database."), restoreTerm}, ErrHostUnfit},
		{"FILESTREAM disabled", restoreOp, []mssqldb.Error{sqlErr(5591, 16, "FILESTREAM feature is disabled."), restoreTerm}, ErrHostUnfit},
		{"contained database authentication", restoreOp, []mssqldb.Error{sqlErr(12824, 16,
			"The sp_configure value 'contained database authentication' must be set to 1 in order to restore a contained database."), restoreTerm}, ErrHostUnfit},
		{"restore directory missing", restoreOp, []mssqldb.Error{
			sqlErr(5133, 16, `Directory lookup for the file "D:\nodir\x.mdf" failed with the operating system error 3(The system cannot find the path specified.).`),
			sqlErr(3156, 16, `File 'x' cannot be restored to 'D:\nodir\x.mdf'. Use WITH MOVE to identify a valid location for the file.`),
			sqlErr(3119, 16, "Problems were identified while planning for the RESTORE statement. Previous messages provide details."), restoreTerm}, ErrHostUnfit},
		{"insufficient free space", restoreOp, []mssqldb.Error{
			sqlErr(3257, 16, `There is insufficient free space on disk volume 'D:\' to create the database. The database requires 2147483648 additional free bytes, while only 1073741824 bytes are available.`),
			sqlErr(3119, 16, "Problems were identified while planning for the RESTORE statement. Previous messages provide details."), restoreTerm}, ErrVolumeFull},
		{"disk full creating the files", restoreOp, []mssqldb.Error{sqlErr(3634, 16,
			`The operating system returned the error '112(There is not enough space on the disk.)' while attempting 'RestoreContainer::ValidateTargetForCreation' on 'D:\r\x.mdf'.`), restoreTerm}, ErrVolumeFull},
		{"disk full on the backup share stays the share's", backupOp, []mssqldb.Error{
			sqlErr(3202, 16, `Write on "\\bak01\backup\x.bak" failed: 112(There is not enough space on the disk.)`), backupTerm}, ErrShareFull},
		{"NTFS file system limitation", backupOp, []mssqldb.Error{
			sqlErr(3202, 16, `Write on "\\bak01\backup\x.bak" failed: 665(The requested operation could not be completed due to a file system limitation)`), backupTerm}, ErrFileSystemLimit},
		{"Linux: the BACKUP's directory is missing", backupOp, []mssqldb.Error{
			sqlErr(3201, 16, `Cannot open backup device '/mnt/bak01/x.bak'. Operating system error 2(The system cannot find the file specified.).`), backupTerm}, ErrBackupPathInvalid},
		{"RESTORE: a stripe is missing", restoreOp, []mssqldb.Error{
			sqlErr(3201, 16, `Cannot open backup device '\\bak02\backup\x.bak'. Operating system error 2(The system cannot find the file specified.).`), restoreTerm}, ErrCorruptBackup},
	}
	for _, tc := range cases {
		err := ClassifyErrors(Target{Instance: "verify01"}, tc.op, tc.errs)
		var f *Failure
		if !errors.As(err, &f) || f.Kind != tc.want || f.Retryable() {
			t.Errorf("%s: kind %v (retryable %v), want %v, not retryable", tc.name, f.Kind, f.Retryable(), tc.want)
		}
	}
}
