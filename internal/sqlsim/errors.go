package sqlsim

import (
	"fmt"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// SQL Server's numbers, classes and texts for the errors the product handles.
// Texts follow sys.messages; arguments are filled in the same places.

func sqlErr(number int32, class uint8, format string, args ...any) *tds.Error {
	return &tds.Error{Number: number, State: 1, Class: class, Message: fmt.Sprintf(format, args...), Line: 1}
}

func syntaxErr(msg string, number int32) *tds.Error { return sqlErr(number, 15, "%s", msg) }

func errNear(t token) *tds.Error {
	if t.kind == tEOF {
		return syntaxErr("Incorrect syntax near the end of the batch.", 102)
	}
	return syntaxErr(fmt.Sprintf("Incorrect syntax near '%s'.", t.display()), 102)
}

// errNotSupported is the emulator's answer to valid T-SQL it does not
// implement (modelled on 40515, "... is not supported in this version").
func errNotSupported(what string) *tds.Error {
	return sqlErr(40515, 15, "'%s' is not supported by the SQL Server emulator (internal/sqlsim); see its package documentation for the supported statements.", what)
}

func errNoDatabase(name string) *tds.Error {
	return sqlErr(911, 16, "Database '%s' does not exist. Make sure that the name is entered correctly.", name)
}

func errInvalidObject(name string) *tds.Error {
	return sqlErr(208, 16, "Invalid object name '%s'.", name)
}

func errInvalidColumn(name string) *tds.Error {
	return sqlErr(207, 16, "Invalid column name '%s'.", name)
}

func errMustDeclare(name string) *tds.Error {
	return sqlErr(137, 15, "Must declare the scalar variable \"%s\".", name)
}

func errTerminating(op string) *tds.Error {
	return sqlErr(3013, 16, "%s is terminating abnormally.", op)
}

// osErr texts of the Windows errors SQL Server quotes.
const (
	osFileNotFound = "2(The system cannot find the file specified.)"
	osPathNotFound = "3(The system cannot find the path specified.)"
	osNetNotFound  = "53(The network path was not found.)"
	// A reachable host without the share named (ERROR_BAD_NET_NAME).
	osNetNameNotFound = "67(The network name cannot be found.)"
	osDiskFull        = "112(There is not enough space on the disk.)"
	osAccessDenied    = "5(Access is denied.)"
)

func errOpenDevice(path, oserr string) *tds.Error {
	return sqlErr(3201, 16, "Cannot open backup device '%s'. Operating system error %s.", path, oserr)
}

func errIncorrectlyFormed(path string) *tds.Error {
	return sqlErr(3241, 16, "The media family on device '%s' is incorrectly formed. SQL Server cannot process this media family.", path)
}

func errPageDamaged(fileID int, pageID uint32, db string) *tds.Error {
	return sqlErr(3183, 16, "RESTORE detected an error on page (%d:%d) in database \"%s\" as read from the backup set.", fileID, pageID, db)
}

func errMemory() *tds.Error {
	return sqlErr(701, 17, "There is insufficient system memory in resource pool 'default' to run this query.")
}

// opError pairs the specific errors with the trailing 3013.
func opError(op string, errs ...*tds.Error) tds.Errors {
	return append(tds.Errors(errs), errTerminating(op))
}
