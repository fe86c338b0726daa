package mssql

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	mssqldb "github.com/microsoft/go-mssqldb"
)

// Kinds of failure the backup cycle acts on. A *Failure wraps exactly one,
// so errors.Is(err, mssql.ErrLoginFailed) works through any wrapping.
var (
	ErrLoginFailed      = errors.New("login failed")
	ErrDatabaseNotFound = errors.New("database not found")
	// ErrDatabaseUnavailable: the database cannot be opened now (offline,
	// restoring, recovering, an availability-group replica not readable, or
	// missing: 4060 cannot tell). Not a wrong password; may pass later.
	ErrDatabaseUnavailable     = errors.New("database not available")
	ErrBackupTargetUnreachable = errors.New("backup device unreachable")
	// ErrBackupPathInvalid: the backup path itself is wrong (directory or
	// share missing, access denied): no retry fixes it.
	ErrBackupPathInvalid = errors.New("backup path invalid")
	// ErrDeviceInUse: another process (typically another BACKUP or RESTORE
	// still running) holds the backup files; retry once it has finished.
	ErrDeviceInUse        = errors.New("backup device in use")
	ErrShareFull          = errors.New("backup device full")
	ErrCorruptBackup      = errors.New("backup set corrupt")
	ErrInsufficientMemory = errors.New("insufficient memory")
	ErrCheckDBFailed      = errors.New("DBCC CHECKDB found errors")
	// ErrCheckDBCouldNotRun: CHECKDB stopped before it could check (tempdb
	// full, no internal snapshot): it proves nothing about the database.
	ErrCheckDBCouldNotRun = errors.New("DBCC CHECKDB could not run")
	// ErrUnreachable: the instance cannot be reached or the connection was
	// lost mid-statement.
	ErrUnreachable = errors.New("SQL instance unreachable")
	// ErrInvalidTarget: the connection settings themselves are wrong.
	ErrInvalidTarget = errors.New("invalid connection settings")
	// ErrStatement: any other SQL Server error (syntax, permissions, ...).
	ErrStatement = errors.New("statement failed")
	// ErrStopped: this process stopped the statement (Statement.Stop: a
	// cancelled or failed cycle); its connection was not lost.
	ErrStopped = errors.New("statement stopped")
	// ErrSourceDamaged: BACKUP met damage in the source database itself
	// (see SourceDamage).
	ErrSourceDamaged = errors.New("source database damaged")
	// ErrSecondaryReplica: the statement is not supported on an
	// availability group's secondary replica (a full backup without
	// COPY_ONLY): the configuration or the group's backup preference,
	// which no retry on that replica changes.
	ErrSecondaryReplica = errors.New("not supported on a secondary replica")
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

// Limits of Failure.Error: a failure's text goes into workflow history and
// logs, and one RESTORE or CHECKDB can raise thousands of errors.
const (
	shownErrors     = 5    // errors quoted in full
	maxMessageBytes = 512  // per quoted message
	maxCauseBytes   = 2048 // a transport error's text
	shownNumbers    = 10   // distinct numbers listed for the rest
)

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %s: %s", f.Op, f.Target, f.Kind)
	switch {
	case len(f.Errors) > 0:
		for i, e := range f.Errors[:min(len(f.Errors), shownErrors)] {
			if i == 0 {
				b.WriteString(": ")
			} else {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s (error %d)", truncate(e.Message, maxMessageBytes), e.Number)
		}
		if rest := f.Errors[min(len(f.Errors), shownErrors):]; len(rest) > 0 {
			fmt.Fprintf(&b, "; and %d more (numbers: %s)", len(rest), numberCounts(rest))
		}
	case f.Err != nil:
		b.WriteString(": ")
		b.WriteString(truncate(f.Err.Error(), maxCauseBytes))
	}
	return b.String()
}

// numberCounts lists the distinct numbers of errs in order of appearance,
// with their counts: "8928 x9990, 8939, ...".
func numberCounts(errs []mssqldb.Error) string {
	var order []int32
	count := map[int32]int{}
	for _, e := range errs {
		if count[e.Number] == 0 {
			order = append(order, e.Number)
		}
		count[e.Number]++
	}
	parts := make([]string, 0, min(len(order), shownNumbers)+1)
	for _, n := range order[:min(len(order), shownNumbers)] {
		if c := count[n]; c > 1 {
			parts = append(parts, fmt.Sprintf("%d x%d", n, c))
		} else {
			parts = append(parts, strconv.Itoa(int(n)))
		}
	}
	if len(order) > shownNumbers {
		parts = append(parts, fmt.Sprintf("%d others", len(order)-shownNumbers))
	}
	return strings.Join(parts, ", ")
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
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
	switch f.Kind {
	case ErrUnreachable, ErrBackupTargetUnreachable, ErrDeviceInUse, ErrCheckDBCouldNotRun, ErrDatabaseUnavailable:
		return true
	}
	return false
}

// SQL Server error numbers the classification knows. Texts:
// https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors
var (
	loginNumbers = []int32{18456, 18452, 18486, 18487, 18488}
	// The database cannot be opened: 4060 "Cannot open database requested
	// by the login" (SQL Server follows it with 18456, see MSSQLSERVER_4060),
	// 4064 the login's default database, 942 offline, 922 recovering, 926
	// suspect, 927 in the middle of a restore, 945 files inaccessible, 952
	// in transition, 976/983 availability-group replica not accessible.
	unavailableNumbers = []int32{4060, 4064, 942, 922, 926, 927, 945, 952, 976, 983}
	// 911 USE of a database that does not exist; 2520 DBCC naming one.
	databaseNumbers = []int32{911, 2520}
	// 3201 cannot open, 3202 write failed, 3203 read failed, 3204 aborted,
	// 3271 "A nonrecoverable I/O error occurred on file" (what a BACKUP or
	// RESTORE reports when the share of its file goes away mid-transfer):
	// the operating system error in their text says why.
	deviceNumbers = []int32{3201, 3202, 3203, 3204, 3271}
	// Damaged or incomplete sets: 3183 bad page read from the set, 3182 and
	// 3186 set damaged, 3189 damage detected, 3208 unexpected end of file,
	// 3241-3243 media family malformed, 3256 set terminated while being
	// created, 3254 an empty volume (a stripe with nothing in it), 3266 end
	// of the media malformed, 3187 no checksums.
	corruptNumbers = []int32{3182, 3183, 3186, 3187, 3189, 3208, 3241, 3242, 3243, 3254, 3256, 3266}
	memoryNumbers  = []int32{701, 802, 8645}
	// Corruption found by DBCC CHECKDB and page reads (8989 and 8990 are
	// its informational summaries and do not count). 3043, BACKUP WITH
	// CHECKSUM meeting a damaged page of the source database, is the
	// source's (source.go).
	checkDBNumbers = []int32{823, 824, 825, 829, 2508, 2511, 2533, 2534, 2570, 2575, 5243}
	// CHECKDB stopped before checking: 8921 "Check terminated. A failure
	// was detected while collecting facts. Possibly tempdb out of space",
	// 8902 memory allocation error during DBCC, 7926 no snapshot and no
	// lock, 1823 the internal snapshot failed to start.
	checkDBNotRunNumbers = []int32{8921, 8902, 7926, 1823}
	// Space in tempdb exhausted (1101, 1105 filegroup full, 9002 log full,
	// 3958/3966/3967 version store): consistency errors reported alongside
	// them are artefacts of the aborted scan, not findings.
	tempdbNumbers = []int32{1101, 1105, 9002, 3958, 3966, 3967}
	// Transient server-side states: the instance is going away or busy.
	unreachableNumbers = []int32{6005, 6006, 17142, 17187, 17188, 40613, 233, 10053, 10054, -2}
	// 3059 "This BACKUP or RESTORE command is not supported on a database
	// mirror or secondary replica." (KB4551221): a secondary takes only
	// COPY_ONLY full backups ("Offload supported backups to secondary
	// replicas of an availability group").
	secondaryNumbers = []int32{3059}
)

// Windows system error codes a device message carries as "N(text)"; SQL
// Server on Linux reports the same codes. See
// https://learn.microsoft.com/en-us/windows/win32/debug/system-error-codes--0-499-
// and https://learn.microsoft.com/en-us/windows/win32/debug/system-error-codes--1300-1699-
const (
	osFileNotFound   = 2    // ERROR_FILE_NOT_FOUND: a file of the set is missing
	osPathNotFound   = 3    // ERROR_PATH_NOT_FOUND
	osAccessDenied   = 5    // ERROR_ACCESS_DENIED
	osCRC            = 23   // ERROR_CRC: the medium returned damaged data
	osSharing        = 32   // ERROR_SHARING_VIOLATION: another process has the file open
	osLock           = 33   // ERROR_LOCK_VIOLATION
	osHandleEOF      = 38   // ERROR_HANDLE_EOF: read past the end (a truncated stripe)
	osHandleDiskFull = 39   // ERROR_HANDLE_DISK_FULL
	osBadNetPath     = 53   // ERROR_BAD_NETPATH: host away
	osUnexpNetErr    = 59   // ERROR_UNEXP_NET_ERR: connection to the share lost
	osNetNameDeleted = 64   // ERROR_NETNAME_DELETED: connection to the share lost
	osBadNetName     = 67   // ERROR_BAD_NET_NAME: no such share on a reachable host
	osDiskFull       = 112  // ERROR_DISK_FULL
	osInvalidName    = 123  // ERROR_INVALID_NAME
	osBadPathname    = 161  // ERROR_BAD_PATHNAME
	osLogonFailure   = 1326 // ERROR_LOGON_FAILURE: the service account cannot log on to the share
)

// netOSErrors are the operating system errors of a network path that went
// away or did not answer (system error codes 0-499 and 1000-1299 on
// Microsoft Learn): 51 ERROR_REM_NOT_LIST, 53 ERROR_BAD_NETPATH, 54
// ERROR_NETWORK_BUSY, 55 ERROR_DEV_NOT_EXIST ("The specified network
// resource or device is no longer available"), 58 ERROR_BAD_NET_RESP, 59
// ERROR_UNEXP_NET_ERR, 64 ERROR_NETNAME_DELETED, 121 ERROR_SEM_TIMEOUT (an
// SMB request with no answer in time), 1231 ERROR_NETWORK_UNREACHABLE, 1232
// ERROR_HOST_UNREACHABLE, 1236 ERROR_CONNECTION_ABORTED. A device error that
// quotes one says the file was cut off, never what is in it.
var netOSErrors = []int{51, osBadNetPath, 54, 55, 58, osUnexpNetErr, osNetNameDeleted, 121, 1231, 1232, 1236}

// osErrorRE finds the operating system error of a device message. SQL
// Server formats it as the number followed at once by "(" and Windows'
// text, e.g. "Operating system error 53(The network path was not found.)"
// or `failed: 38(Reached the end of the file.)`: the words around it are
// translated, this form is not. The number must not follow a letter, digit
// or path character (\\srv\backup2(old) is no error code), and the last
// match counts: every template quotes the path before the error.
var osErrorRE = regexp.MustCompile(`(?:^|[^\w\\/.$-])(\d{1,5})\(`)

// osError is the operating system error code quoted in e's text, or -1.
func osError(e mssqldb.Error) int {
	m := osErrorRE.FindAllStringSubmatch(e.Message, -1)
	if len(m) == 0 {
		return -1
	}
	n, err := strconv.Atoi(m[len(m)-1][1])
	if err != nil {
		return -1
	}
	return n
}

// MissingFile reports a failure whose backup device error says a file does
// not exist where SQL Server looked (operating system error 2): a file of
// the set is gone, or SQL Server looks in another directory than the one
// the file is in.
func MissingFile(err error) bool {
	var f *Failure
	if !errors.As(err, &f) {
		return false
	}
	return slices.ContainsFunc(f.Errors, func(e mssqldb.Error) bool {
		return slices.Contains(deviceNumbers, e.Number) && osError(e) == osFileNotFound
	})
}

// OSError is the operating system error code a backup device error of the
// failure quotes (3201-3204, "N(text)"), -1 when none does.
func OSError(err error) int {
	var f *Failure
	if !errors.As(err, &f) {
		return -1
	}
	for _, e := range f.Errors {
		if slices.Contains(deviceNumbers, e.Number) {
			if n := osError(e); n >= 0 {
				return n
			}
		}
	}
	return -1
}

// isCheckDBNumber: the 8900-8999 range of consistency errors plus page I/O.
func isCheckDBNumber(n int32) bool {
	if n >= 8900 && n <= 8999 {
		return n != 8989 && n != 8990 && n != 8954 && !slices.Contains(checkDBNotRunNumbers, n)
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
		f.Kind = kindOf(op, f.Errors, false)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The caller gave up (activity cancelled, deadline): keep it visible.
		f.Kind = ErrUnreachable
	case isCertificateError(err):
		f.Kind = ErrInvalidTarget
		f.Err = fmt.Errorf("%w: the server's TLS certificate is not trusted: set ca_file to the CA that signed it, "+
			"hostname_in_certificate to the name it was issued for, or (test servers only) trust_server_certificate: true", err)
	case t.Encrypt == "disable" && strings.Contains(err.Error(), "TLS Handshake failed"):
		// The server forces encryption (ENCRYPT_REQ) and go-mssqldb then
		// fails the handshake it did not prepare.
		f.Kind = ErrInvalidTarget
		f.Err = fmt.Errorf("%w: the server requires encryption: leave encrypt out (mandatory) or set strict, with ca_file", err)
	case strings.Contains(err.Error(), "server does not support encryption"):
		f.Kind = ErrInvalidTarget
		// Every SQL Server since 2005 offers TLS, with a self-signed
		// certificate when none is configured: a server that offers none is
		// not one, or a test double started without it.
		f.Err = fmt.Errorf("%w: encrypt is mandatory (the default) but the server offers no TLS, which every SQL Server does: check that address is a SQL Server; "+
			"a test server without TLS needs encrypt: disable", err)
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
	return &Failure{Target: t.String(), Op: op, Errors: errs, Err: last, Kind: kindOf(op, errs, true)}
}

// classifyNumbers decides the kind from error numbers and, for backup
// devices, the operating system error code: never from English text, which
// a login with another default language does not get.
func classifyNumbers(errs []mssqldb.Error) error {
	has := func(set []int32) bool {
		return slices.ContainsFunc(errs, func(e mssqldb.Error) bool { return slices.Contains(set, e.Number) })
	}
	// osErr reports an operating system error code quoted by a device message
	// (restricted to the numbers in only, when given).
	osErr := func(codes []int, only ...int32) bool {
		return slices.ContainsFunc(errs, func(e mssqldb.Error) bool {
			if !slices.Contains(deviceNumbers, e.Number) || (len(only) > 0 && !slices.Contains(only, e.Number)) {
				return false
			}
			return slices.Contains(codes, osError(e))
		})
	}
	checkDB := slices.ContainsFunc(errs, func(e mssqldb.Error) bool { return isCheckDBNumber(e.Number) })
	fatal := slices.ContainsFunc(errs, func(e mssqldb.Error) bool { return e.Class >= 20 })
	switch {
	// 4060 comes with 18456: the database, not the password, is the problem.
	case has(unavailableNumbers):
		return ErrDatabaseUnavailable
	case has(loginNumbers):
		return ErrLoginFailed
	case has(databaseNumbers):
		return ErrDatabaseNotFound
	case has(checkDBNotRunNumbers) || (checkDB && has(tempdbNumbers)):
		return ErrCheckDBCouldNotRun
	case has(memoryNumbers):
		return ErrInsufficientMemory
	case hasSourcePage(errs):
		return ErrSourceDamaged
	case osErr([]int{osDiskFull, osHandleDiskFull}):
		return ErrShareFull
	// The share went away mid-transfer: what SQL Server concluded from the
	// bytes it then did not get (3241 media family malformed, 3183, 3208,
	// 3266: "a loss of connectivity ... during a network backup") is no
	// evidence about the set. 53 host away, 59/64 connection lost, 121 no
	// answer in time.
	case osErr(netOSErrors):
		return ErrBackupTargetUnreachable
	// Damage on the medium (CRC), reading past the end of a truncated
	// stripe (3203 with 38), or a file of the set missing.
	case has(corruptNumbers) || osErr([]int{osCRC, osFileNotFound}) || osErr([]int{osHandleEOF}, 3203):
		return ErrCorruptBackup
	case osErr([]int{osSharing, osLock}):
		return ErrDeviceInUse
	// The configured path is wrong: 67 names a share the reachable host
	// does not have (53, host away, stays retryable).
	case osErr([]int{osPathNotFound, osAccessDenied, osBadNetName, osInvalidName, osBadPathname, osLogonFailure}):
		return ErrBackupPathInvalid
	// Any other device failure: the backup server may come back.
	case has(deviceNumbers):
		return ErrBackupTargetUnreachable
	case checkDB:
		return ErrCheckDBFailed
	case has(unreachableNumbers) || fatal:
		return ErrUnreachable
	case has(secondaryNumbers):
		return ErrSecondaryReplica
	}
	return ErrStatement
}

// Rules by operation. The same error number can mean different things
// depending on what raised it, so a statement's errors are classified by
// its op (the op of DB.Run, DB.Start, Classify and ClassifyErrors): an op
// with rules of its own in opRules gets them, every other op the version,
// TDE and host rules of kindOf, then classifyNumbers.

// OpCheckDB is the op of DBCC CHECKDB (classifyCheckDB).
const OpCheckDB = "DBCC CHECKDB"

// opRules are the operations whose errors have rules of their own.
var opRules = map[string]func([]mssqldb.Error) error{
	OpCheckDB: classifyCheckDB,
}

// checkDBSnapshotNumbers: CHECKDB's internal database snapshot ran out of
// room, 5128 "Write to sparse file '%ls' failed due to lack of disk space"
// (the snapshot's sparse files live beside the database's files: "DBCC
// (Transact-SQL)", internal database snapshot): it could not check.
var checkDBSnapshotNumbers = []int32{5128}

// classifyCheckDB classifies by "raised during DBCC CHECKDB", not by a list
// of corruption numbers: every error a CHECKDB reports is evidence about
// the database it checks (ErrCheckDBFailed), whatever its number or
// severity. The system table pre-checks (7984-7988) "cannot be repaired;
// therefore, the DBCC CHECKDB terminates immediately" (MSSQLSERVER_7986,
// https://learn.microsoft.com/sql/relational-databases/errors-events/mssqlserver-7986-database-engine-error);
// 2537 is a failed record check; severity 22 and 23 errors say a table or
// the whole database is damaged, and a severity 20+ error ends the task,
// the connection only "may" go ("Database engine error severities",
// https://learn.microsoft.com/sql/relational-databases/errors-events/database-engine-error-severities):
// kept or not, it is not a lost host. The exceptions prove nothing about
// the database:
//   - CHECKDB could not run: tempdb full (8921 and tempdbNumbers), no
//     internal snapshot (7926, 1823, 5128), memory (8902, memoryNumbers);
//   - the environment: the database gone, restoring or unavailable, the
//     login refused, the instance shutting down or unreachable
//     (unreachableNumbers), and errors below severity 16 (permissions 14,
//     syntax 15: the statement never checked anything);
//   - the check cut off from outside: its session killed, the copy's
//     storage lost (checkDBCutOff), unless CHECKDB reported a finding
//     before.
func classifyCheckDB(errs []mssqldb.Error) error {
	has := func(set []int32) bool {
		return slices.ContainsFunc(errs, func(e mssqldb.Error) bool { return slices.Contains(set, e.Number) })
	}
	kind := classifyNumbers(errs)
	switch {
	case kind == ErrDatabaseUnavailable, kind == ErrLoginFailed, kind == ErrDatabaseNotFound, kind == ErrCheckDBCouldNotRun:
		return kind
	case has(tempdbNumbers), has(memoryNumbers), has(checkDBSnapshotNumbers):
		return ErrCheckDBCouldNotRun
	}
	if slices.ContainsFunc(errs, func(e mssqldb.Error) bool {
		return e.Class >= 16 && !slices.Contains(unreachableNumbers, e.Number) && !checkDBCutOff(e)
	}) {
		return ErrCheckDBFailed
	}
	if slices.ContainsFunc(errs, checkDBCutOff) {
		return ErrUnreachable
	}
	return kind
}

// osNotReady (ERROR_NOT_READY) and osDeviceNotConnected
// (ERROR_DEVICE_NOT_CONNECTED): a disk that went away, as a lost SAN path
// reports it (system error codes on Microsoft Learn).
const (
	osNotReady           = 21
	osDeviceNotConnected = 1167
)

// checkDBCutOff reports an error that ended a CHECKDB from outside, saying
// nothing about the copy it checked: 596 "Cannot continue the execution
// because the session is in the kill state" (severity 21), the session
// ended by KILL ("KILL (Transact-SQL)",
// https://learn.microsoft.com/sql/t-sql/language-elements/kill-transact-sql);
// and 823 quoting an operating system error of storage that went away (a
// network path, a disk not ready or not connected): 823 reports the error
// Windows returned to SQL Server's read or write of the copy's file
// (MSSQLSERVER_823,
// https://learn.microsoft.com/sql/relational-databases/errors-events/mssqlserver-823-database-engine-error),
// here the verification instance's storage lost, not a damaged page (823
// with 23, a CRC error, stays a finding).
func checkDBCutOff(e mssqldb.Error) bool {
	switch e.Number {
	case 596:
		return true
	case 823:
		n := osError(e)
		return n == osNotReady || n == osDeviceNotConnected || slices.Contains(netOSErrors, n)
	}
	return false
}

// isCertificateError reports a TLS handshake that failed on the server's
// certificate. go-mssqldb wraps the handshake error with %w in strict mode
// and with %v otherwise, so the text is checked too (Go's own messages).
func isCertificateError(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	if errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "TLS Handshake failed") &&
		(strings.Contains(s, "x509: ") || strings.Contains(s, "tls: failed to verify certificate"))
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
