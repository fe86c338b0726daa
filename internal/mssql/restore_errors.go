package mssql

import (
	"errors"
	"regexp"
	"slices"
	"strings"

	mssqldb "github.com/microsoft/go-mssqldb"
)

// Kinds of a RESTORE (or RESTORE HEADERONLY/FILELISTONLY/VERIFYONLY) that
// failed because the verification instance cannot read the backup, not
// because the backup is damaged: none of them is evidence about the set,
// and no retry of the same RESTORE on the same instance succeeds.
var (
	// ErrNewerVersion: 3169, "The database was backed up on a server running
	// version %ls. That version is incompatible with this server": a backup
	// of a newer SQL Server version ("Database Engine events and errors
	// (3000 to 3999)").
	ErrNewerVersion = errors.New("backup of a newer SQL Server version")
	// ErrCertificateMissing: 33111, "Cannot find server certificate with
	// thumbprint '%.*ls'": a TDE database's backup on an instance whose
	// master lacks the certificate ("Move a TDE Protected Database to
	// Another SQL Server"; KB4534430).
	ErrCertificateMissing = errors.New("TDE certificate missing")
	// ErrUnreadableFormat: an error of severity 20 or more raised inside a
	// RESTORE whose connection stayed open. SQL Server 2019 before CU16
	// answers a compressed TDE backup of CU16 and later so (9004 severity 21
	// for RESTORE DATABASE, 3624 severity 20 for RESTORE LOG, KB5014298):
	// the backup's format, not the host, is the problem.
	ErrUnreadableFormat = errors.New("backup format not readable by this instance")
	// ErrEncryptorRefused: BACKUP WITH ENCRYPTION refused its encryptor:
	// 15151, the certificate or asymmetric key is not in master or the
	// login may not see it ("VIEW DEFINITION permission on the certificate
	// or asymmetric key", "Backup encryption"), or 3096, "The Certificate
	// specified for backup encryption has expired." No retry helps.
	ErrEncryptorRefused = errors.New("backup encryptor refused")
)

const (
	errVersionIncompatible = 3169
	errCertificateNotFound = 33111
	errEncryptorNotFound   = 15151
	errEncryptorExpired    = 3096
)

// kindOf classifies the errors of operation op. connected: the statement's
// connection was still open when its errors arrived (a severity 20+ error
// usually ends the session; when it does not, it came from inside the
// statement). An operation with rules of its own (opRules: DBCC CHECKDB)
// gets them; otherwise the RESTORE kinds above come first, then the host
// kinds (hostKind), then classifyNumbers.
func kindOf(op string, errs []mssqldb.Error, connected bool) error {
	if rule, ok := opRules[op]; ok {
		return rule(errs)
	}
	has := func(n int32) bool {
		return slices.ContainsFunc(errs, func(e mssqldb.Error) bool { return e.Number == n })
	}
	switch {
	case has(errCertificateNotFound):
		return ErrCertificateMissing
	case has(errVersionIncompatible):
		return ErrNewerVersion
	case strings.HasPrefix(strings.ToUpper(op), "BACKUP ") && (has(errEncryptorNotFound) || has(errEncryptorExpired)):
		return ErrEncryptorRefused
	case connected && isRestore(op) && slices.ContainsFunc(errs, func(e mssqldb.Error) bool { return e.Class >= 20 }):
		return ErrUnreadableFormat
	}
	if k := hostKind(op, errs); k != nil {
		return k
	}
	return classifyNumbers(errs)
}

// isRestore reports an operation that reads a backup: RESTORE DATABASE,
// RESTORE LOG, RESTORE HEADERONLY, RESTORE FILELISTONLY, RESTORE VERIFYONLY.
func isRestore(op string) bool { return strings.HasPrefix(strings.ToUpper(op), "RESTORE ") }

// thumbprintRE finds the thumbprint 33111 quotes: '0x...' in every
// language.
var thumbprintRE = regexp.MustCompile(`'(0x[0-9A-Fa-f]+)'`)

// MissingThumbprint is the thumbprint (0x...) a 33111 of err names, "" when
// err has none.
func MissingThumbprint(err error) string {
	var f *Failure
	if !errors.As(err, &f) {
		return ""
	}
	for _, e := range f.Errors {
		if e.Number == errCertificateNotFound {
			if m := thumbprintRE.FindStringSubmatch(e.Message); m != nil {
				return "0x" + strings.ToUpper(m[1][2:])
			}
		}
	}
	return ""
}

// HasNumber reports whether err is a *Failure carrying SQL Server error n.
func HasNumber(err error, n int32) bool {
	var f *Failure
	return errors.As(err, &f) && slices.Contains(f.Numbers(), n)
}
