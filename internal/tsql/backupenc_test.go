package tsql

import (
	"errors"
	"strings"
	"testing"
)

// ENCRYPTION (ALGORITHM = ..., SERVER CERTIFICATE = ... | SERVER ASYMMETRIC
// KEY = ...) goes on fulls, differentials and log backups alike, after the
// other options; COPY_ONLY and the rest are unchanged.
func TestBackupEncryptionClause(t *testing.T) {
	disk := []string{`\\bak01\backup\Sales_1.bak`}
	full, err := BackupDatabase(BackupOptions{Database: "Sales", Disks: disk, Checksum: true, CopyOnly: true,
		Encryption: &BackupEncryption{Algorithm: "AES_256", ServerCertificate: "Backup]Cert"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\Sales_1.bak' WITH CHECKSUM, COPY_ONLY, ` +
		`ENCRYPTION (ALGORITHM = AES_256, SERVER CERTIFICATE = [Backup]]Cert])`; full != want {
		t.Errorf("full:\n got %s\nwant %s", full, want)
	}
	diff, err := BackupDatabase(BackupOptions{Database: "Sales", Disks: disk, Differential: true,
		Encryption: &BackupEncryption{Algorithm: "aes_128", ServerAsymmetricKey: "EKMKey"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(diff, "WITH DIFFERENTIAL, ENCRYPTION (ALGORITHM = AES_128, SERVER ASYMMETRIC KEY = [EKMKey])") {
		t.Errorf("differential: %s", diff)
	}
	log, err := BackupLog(BackupLogOptions{Database: "Sales", Disks: disk, Chain: 1, Number: 2,
		Encryption: &BackupEncryption{Algorithm: "TRIPLE_DES_3KEY", ServerCertificate: "C"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log, "INIT, ENCRYPTION (ALGORITHM = TRIPLE_DES_3KEY, SERVER CERTIFICATE = [C]), NAME = ") {
		t.Errorf("log: %s", log)
	}
	for _, bad := range []BackupEncryption{
		{Algorithm: "AES_512", ServerCertificate: "C"},
		{Algorithm: "AES_256"},
		{Algorithm: "AES_256", ServerCertificate: "C", ServerAsymmetricKey: "K"},
		{Algorithm: "AES_256); DROP DATABASE x--", ServerCertificate: "C"},
	} {
		if _, err := BackupDatabase(BackupOptions{Database: "Sales", Disks: disk, Encryption: &bad}); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%+v: %v, want ErrInvalidOption", bad, err)
		}
		if _, err := BackupLog(BackupLogOptions{Database: "Sales", Disks: disk, Chain: 1, Number: 1, Encryption: &bad}); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("log %+v: %v, want ErrInvalidOption", bad, err)
		}
	}
}

// The fix of an instance without a backup's asymmetric key opens the same
// provider key, its name quoted.
func TestOpenProviderKey(t *testing.T) {
	got, err := OpenProviderKey("EKM]Key")
	if err != nil || !strings.HasPrefix(got, "USE [master]; CREATE ASYMMETRIC KEY [EKM]]Key] FROM PROVIDER [<provider>]") ||
		!strings.HasSuffix(got, "CREATION_DISPOSITION = OPEN_EXISTING;") {
		t.Errorf("%q, %v", got, err)
	}
	if _, err := OpenProviderKey(""); err == nil {
		t.Error("an empty name was accepted")
	}
}
