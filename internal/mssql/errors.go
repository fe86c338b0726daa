package mssql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"

	mssqldb "github.com/microsoft/go-mssqldb"
)

// Kinds of failure the backup cycle acts on. A *Failure wraps exactly one,
// so errors.Is(err, mssql.ErrLoginFailed) works through any wrapping.
var (
	ErrLoginFailed             = errors.New("login failed")
	ErrDatabaseNotFound        = errors.New("database not found")
	ErrBackupTargetUnreachable = errors.New("backup device unreachable")
	// ErrBackupPathInvalid: the backup path itself is wrong (directory or
	// share missing, access denied): no retry fixes it.
	ErrBackupPathInvalid  = errors.New("backup path invalid")
	ErrShareFull          = errors.New("backup device full")
	ErrCorruptBackup      = errors.New("backup set corrupt")
	ErrInsufficientMemory = errors.New("insufficient memory")
	ErrCheckDBFailed      = errors.New("DBCC CHECKDB found errors")
	// ErrUnreachable: the instance cannot be reached or the connection was
	// lost mid-statement. The only kind worth retrying as is.
	ErrUnreachable = errors.New("SQL instance unreachable")
	// ErrInvalidTarget: the connection settings themselves are wrong.
	ErrInvalidTarget = errors.New("invalid connection settings")
	// ErrStatement: any other SQL Server error (syntax, permissions, ...).
	ErrStatement = errors.New("statement failed")
)

// Failure is a classified failure of a connection or a statement.
type Failure struct {
	Kind   error  // one of the Err* kinds above
	Target string // the instance, as Target.String
	Op     string // what was being done: "connect", "BACKUP DATABASE", ...
	// Errors are every SQL Server error the statement raised, in order
	// (e.g. 3201 then 3013); empty for transport failures.
	Errors []mssqldb.Error
	Err    error // the underlying error
}

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %s: %s", f.Op, f.Target, f.Kind)
	switch {
	case len(f.Errors) > 0:
		for i, e := range f.Errors {
			if i == 0 {
				b.WriteString(": ")
			} else {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s (error %d)", e.Message, e.Number)
		}
	case f.Err != nil:
		b.WriteString(": ")
		b.WriteString(f.Err.Error())
	}
	return b.String()
}

// Unwrap exposes both the kind and the cause to errors.Is / errors.As.
func (f *Failure) Unwrap() []error {
	if f.Err == nil {
		return []error{f.Kind}
	}
	return []error{f.Kind, f.Err}
}

// Numbers are the SQL Server error numbers raised, in order.
func (f *Failure) Numbers() []int32 {
	n := make([]int32, len(f.Errors))
	for i, e := range f.Errors {
		n[i] = e.Number
	}
	return n
}

// Retryable reports whether the same operation may succeed later unchanged.
func (f *Failure) Retryable() bool {
	return f.Kind == ErrUnreachable || f.Kind == ErrBackupTargetUnreachable
}

// SQL Server error numbers the classification knows.
var (
	loginNumbers    = []int32{18456, 18452, 18486, 18487, 18488}
	databaseNumbers = []int32{911, 2520, 4060} // 2520: DBCC names a database that does not exist
	deviceNumbers   = []int32{3201, 3202, 3203, 3204, 3205}
	corruptNumbers  = []int32{3183, 3189, 3241, 3242, 3243, 3187}
	memoryNumbers   = []int32{701, 802, 8645, 3040}
	// Corruption found by DBCC CHECKDB and page reads (8989 and 8990 are
	// its informational summaries and do not count); 3043 is BACKUP WITH
	// CHECKSUM meeting a damaged page of the source database.
	checkDBNumbers = []int32{823, 824, 825, 829, 2508, 2511, 2533, 2534, 2570, 2575, 3043, 5243}
	// Transient server-side states: the instance is going away or busy.
	unreachableNumbers = []int32{6005, 6006, 17142, 17187, 17188, 40613, 233, 10053, 10054, -2}
)

// isCheckDBNumber: the 8900-8999 range of consistency errors plus page I/O.
func isCheckDBNumber(n int32) bool {
	if n >= 8900 && n <= 8999 {
		return n != 8989 && n != 8990 && n != 8954
	}
	return slices.Contains(checkDBNumbers, n)
}

// Classify turns an error from go-mssqldb into a *Failure with its kind.
// op names the operation for the message. A nil err gives nil.
func Classify(t Target, op string, err error) error {
	if err == nil {
		return nil
	}
	var f *Failure
	if errors.As(err, &f) {
		return err
	}
	f = &Failure{Target: t.String(), Op: op, Err: err}
	var me mssqldb.Error
	switch {
	case errors.As(err, &me):
		f.Errors = me.All
		if len(f.Errors) == 0 {
			f.Errors = []mssqldb.Error{me}
		}
		f.Kind = classifyNumbers(f.Errors)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The caller gave up (activity cancelled, deadline): keep it visible.
		f.Kind = ErrUnreachable
	default:
		f.Kind = ErrUnreachable
		if !isTransport(err) {
			f.Kind = ErrStatement
		}
	}
	return f
}

// ClassifyErrors classifies a statement's collected SQL Server errors.
func ClassifyErrors(t Target, op string, errs []mssqldb.Error) error {
	if len(errs) == 0 {
		return nil
	}
	last := errs[len(errs)-1]
	last.All = errs
	return &Failure{Target: t.String(), Op: op, Errors: errs, Err: last, Kind: classifyNumbers(errs)}
}

func classifyNumbers(errs []mssqldb.Error) error {
	has := func(set []int32) bool {
		return slices.ContainsFunc(errs, func(e mssqldb.Error) bool { return slices.Contains(set, e.Number) })
	}
	text := func(sub string) bool {
		return slices.ContainsFunc(errs, func(e mssqldb.Error) bool {
			return strings.Contains(strings.ToLower(e.Message), sub)
		})
	}
	fatal := slices.ContainsFunc(errs, func(e mssqldb.Error) bool { return e.Class >= 20 })
	switch {
	case has(loginNumbers):
		return ErrLoginFailed
	case has(databaseNumbers):
		return ErrDatabaseNotFound
	case has(memoryNumbers) || text("insufficient system memory"):
		return ErrInsufficientMemory
	// OS error 112 (ERROR_DISK_FULL) or 39 (ERROR_HANDLE_DISK_FULL) on a
	// backup device: the share is full.
	case has(deviceNumbers) && (text(": 112(") || text("error 112(") || text(": 39(") || text("error 39(") ||
		text("not enough space")):
		return ErrShareFull
	// A read failing with a CRC error is damage on the medium, not the network.
	case has(corruptNumbers) || (has([]int32{3013}) && text("checksum")) || text("damage to the backup set") ||
		(has([]int32{3203}) && text("cyclic redundancy")):
		return ErrCorruptBackup
	// Operating system errors behind a device failure: 2 a file of the set
	// is missing; 3, 5, 67, 123 the configured path is wrong; the others
	// (53 network path not found, 64, 1231, ...) a server that is away.
	case has(deviceNumbers) && osError(errs, 2):
		return ErrCorruptBackup
	case has(deviceNumbers) && (osError(errs, 3) || osError(errs, 5) || osError(errs, 67) || osError(errs, 123)):
		return ErrBackupPathInvalid
	case has(deviceNumbers):
		return ErrBackupTargetUnreachable
	case slices.ContainsFunc(errs, func(e mssqldb.Error) bool { return isCheckDBNumber(e.Number) }):
		return ErrCheckDBFailed
	case has(unreachableNumbers) || fatal:
		return ErrUnreachable
	}
	return ErrStatement
}

// isTransport reports errors of the connection rather than of a statement.
func isTransport(err error) bool {
	var ne net.Error
	var se mssqldb.StreamError
	var oe *net.OpError
	return errors.As(err, &ne) || errors.As(err, &oe) || errors.As(err, &se) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "connection reset") ||
		strings.Contains(err.Error(), "broken pipe") || strings.Contains(err.Error(), "unable to open tcp connection") ||
		strings.Contains(err.Error(), "connection refused")
}

// osError reports whether a message quotes "operating system error n(".
func osError(errs []mssqldb.Error, n int) bool {
	want := fmt.Sprintf("operating system error %d(", n)
	return slices.ContainsFunc(errs, func(e mssqldb.Error) bool {
		return strings.Contains(strings.ToLower(e.Message), want)
	})
}
