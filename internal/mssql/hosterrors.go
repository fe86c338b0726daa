package mssql

import (
	"errors"
	"slices"
	"strings"

	mssqldb "github.com/microsoft/go-mssqldb"
)

// Kinds of failure that come from where a statement ran, not from the
// backup set: the verification instance cannot host the database, its
// volume is full, or the backup server's file system refuses to grow a
// file. None of them proves anything about a set, and no retry of the same
// statement fixes them.
var (
	// ErrHostUnfit: the instance cannot host the database: an edition's
	// size limit, a feature it has off or lacks, a restore directory that
	// does not exist.
	ErrHostUnfit = errors.New("the instance cannot host the database")
	// ErrVolumeFull: the volume a RESTORE creates the database's files on
	// has not the space they need.
	ErrVolumeFull = errors.New("restore volume full")
	// ErrFileSystemLimit: the backup device's file system cannot grow the
	// file further (operating system error 665).
	ErrFileSystemLimit = errors.New("file system limitation")
)

// What an instance refuses to host (Microsoft Learn, "Database engine
// events and errors"): 1827 the edition's database size limit ("CREATE
// DATABASE or ALTER DATABASE failed because the resulting cumulative
// database size would exceed your licensed limit"), 5591 "FILESTREAM
// feature is disabled.", 12824 a contained database with contained
// database authentication off, 5133 "Directory lookup for the file ...
// failed" and 3156 "File ... cannot be restored to ..." (a restore
// directory missing, or a file of another database in the way).
var hostUnfitNumbers = []int32{1827, 5591, 12824, 5133, 3156}

// 3257 "There is insufficient free space on disk volume ... to create the
// database", checked by RESTORE before it writes; and where SQL Server
// quotes operating system errors while it creates database files: 3634
// "The operating system returned the error ... while attempting ...",
// 5123 "CREATE FILE encountered operating system error ...", 5149 "MODIFY
// FILE encountered operating system error ...".
var (
	volumeFullNumbers = []int32{3257}
	fileCreateNumbers = []int32{3634, 5123, 5149}
)

// ERROR_FILE_SYSTEM_LIMITATION: "The requested operation could not be
// completed due to a file system limitation", what NTFS answers when a
// heavily fragmented file's attribute list is full
// (https://learn.microsoft.com/en-us/windows/win32/debug/system-error-codes--500-999-).
const osFileSystemLimitation = 665

// hostKind is the host-related kind of a failure, or nil: what the
// instance cannot do (space, edition, features, a file system limit), and
// operating system error 2 on the device a BACKUP writes, which is a path
// that does not exist (SQL Server on Linux reports a missing directory so),
// not a file of a set gone missing. kindOf asks it before classifyNumbers.
func hostKind(op string, errs []mssqldb.Error) error {
	quotes := func(code int, numbers []int32) bool {
		return slices.ContainsFunc(errs, func(e mssqldb.Error) bool {
			return slices.Contains(numbers, e.Number) && osError(e) == code
		})
	}
	has := func(set []int32) bool {
		return slices.ContainsFunc(errs, func(e mssqldb.Error) bool { return slices.Contains(set, e.Number) })
	}
	restore := strings.HasPrefix(op, "RESTORE DATABASE")
	switch {
	case has(volumeFullNumbers), restore && quotes(osDiskFull, fileCreateNumbers):
		return ErrVolumeFull
	case has(hostUnfitNumbers):
		return ErrHostUnfit
	case quotes(osFileSystemLimitation, deviceNumbers):
		return ErrFileSystemLimit
	case strings.HasPrefix(op, "BACKUP") && quotes(osFileNotFound, []int32{3201, 3202}):
		return ErrBackupPathInvalid
	}
	return nil
}
