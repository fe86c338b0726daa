package mssql

import (
	"errors"
	"testing"

	mssqldb "github.com/microsoft/go-mssqldb"
)

// The errors of a RESTORE that the verification instance cannot read,
// classified per operation: none is corruption of the set, none is the host
// being away, none is a plain retryable statement failure.
func TestRestoreErrorsPerOperation(t *testing.T) {
	term := func(op string) mssqldb.Error { return sqlErr(3013, 16, op+" is terminating abnormally.") }
	media3241 := sqlErr(3241, 16, `The media family on device '\\bak02\backup\sql01@Sales_00000007_1of2.bak' is incorrectly formed. SQL Server cannot process this media family.`)
	v3169 := sqlErr(3169, 16, "The database was backed up on a server running version 16.00.4135. That version is incompatible with this server, which is running version 15.00.4385. Either restore the database on a server that supports the backup, or use a backup that is compatible with this server.")
	cert := sqlErr(33111, 16, "Cannot find server certificate with thumbprint '0xA1B2C3D4E5F60718293A4B5C6D7E8F9012345678'.")
	certDE := sqlErr(33111, 16, "Das Serverzertifikat mit dem Fingerabdruck '0xa1b2c3d4e5f60718293a4b5c6d7e8f9012345678' wurde nicht gefunden.")
	kb9004 := sqlErr(9004, 21, "An error occurred while processing the log for database 'Sales_verify'. If possible, restore from backup. If a backup is not available, it might be necessary to rebuild the log.")
	kb3624 := sqlErr(3624, 20, "A system assertion check has failed. Check the SQL Server error log for details.")

	cases := []struct {
		name      string
		op        string
		errs      []mssqldb.Error
		connected bool
		want      error
	}{
		// 3241 alone cannot tell a newer version from damage: the caller
		// compares versions (activities.Restore).
		{"3241 on FILELISTONLY", "RESTORE FILELISTONLY", []mssqldb.Error{media3241, term("RESTORE FILELIST")}, true, ErrCorruptBackup},
		{"3169 on RESTORE DATABASE", "RESTORE DATABASE", []mssqldb.Error{v3169, term("RESTORE DATABASE")}, true, ErrNewerVersion},
		{"33111 on FILELISTONLY", "RESTORE FILELISTONLY", []mssqldb.Error{cert, term("RESTORE FILELIST")}, true, ErrCertificateMissing},
		{"33111 on HEADERONLY, German", "RESTORE HEADERONLY", []mssqldb.Error{certDE, sqlErr(3013, 16, "RESTORE HEADERONLY wird fehlerbedingt beendet.")}, true, ErrCertificateMissing},
		{"33111 on RESTORE DATABASE", "RESTORE DATABASE", []mssqldb.Error{cert, term("RESTORE DATABASE")}, true, ErrCertificateMissing},
		// KB5014298's order: 3013 first, then 9004 at severity 21.
		{"9004 severity 21 inside RESTORE DATABASE, connection open", "RESTORE DATABASE", []mssqldb.Error{term("RESTORE DATABASE"), kb9004}, true, ErrUnreadableFormat},
		{"3624 severity 20 inside RESTORE LOG, connection open", "RESTORE LOG", []mssqldb.Error{term("RESTORE LOG"), kb3624}, true, ErrUnreadableFormat},
		// The connection went with the error: the host may be going away.
		{"9004 severity 21, connection lost", "RESTORE DATABASE", []mssqldb.Error{term("RESTORE DATABASE"), kb9004}, false, ErrUnreachable},
		// Outside a RESTORE a severity 20+ error stays what it was.
		{"3624 inside BACKUP", "BACKUP DATABASE", []mssqldb.Error{kb3624, term("BACKUP DATABASE")}, true, ErrUnreachable},
		// BACKUP WITH ENCRYPTION refusing its encryptor: missing or not
		// visible (15151), expired (3096).
		{"15151 on BACKUP DATABASE", "BACKUP DATABASE", []mssqldb.Error{sqlErr(15151, 16, "Cannot find the certificate 'BackupCert', because it does not exist or you do not have permission."), term("BACKUP DATABASE")}, true, ErrEncryptorRefused},
		{"3096 on BACKUP LOG", "BACKUP LOG", []mssqldb.Error{sqlErr(3096, 16, "The Certificate specified for backup encryption has expired."), term("BACKUP LOG")}, true, ErrEncryptorRefused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.connected {
				err = ClassifyErrors(Target{Instance: "verify01"}, tc.op, tc.errs)
			} else {
				err = lostFailure(Target{Instance: "verify01"}, tc.op, tc.errs, errors.New("connection reset"))
			}
			var f *Failure
			if !errors.As(err, &f) || f.Kind != tc.want {
				t.Fatalf("%s: %v, want kind %q", tc.op, err, tc.want)
			}
			if f.Retryable() != (tc.want == ErrUnreachable) {
				t.Errorf("retryable %v", f.Retryable())
			}
		})
	}
	// The scan path (HEADERONLY, FILELISTONLY through database/sql).
	me := mssqldb.Error{Number: 3013, Class: 16, Message: "RESTORE FILELIST is terminating abnormally.", All: []mssqldb.Error{cert, term("RESTORE FILELIST")}}
	err := Classify(Target{Instance: "verify01"}, "RESTORE FILELISTONLY", me)
	if !errors.Is(err, ErrCertificateMissing) || MissingThumbprint(err) != "0xA1B2C3D4E5F60718293A4B5C6D7E8F9012345678" {
		t.Errorf("FILELISTONLY 33111 through Classify: %v, thumbprint %q", err, MissingThumbprint(err))
	}
	de := ClassifyErrors(Target{}, "RESTORE HEADERONLY", []mssqldb.Error{certDE})
	if got := MissingThumbprint(de); got != "0xA1B2C3D4E5F60718293A4B5C6D7E8F9012345678" {
		t.Errorf("thumbprint of the German 33111: %q", got)
	}
}
