package sqlsim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BACKUP ... WITH ENCRYPTION (SERVER ASYMMETRIC KEY = ...) with a key of an
// EKM provider encrypts as a certificate does: no page in clear, msdb and
// HEADERONLY record ASYMMETRIC KEY and the key's thumbprint, and an
// instance without the key (an unrelated key of the same name included)
// answers 33111 state 4 naming an asymmetric key; once the same provider
// key is opened there, the set restores.
func TestBackupEncryptionWithAsymmetricKey(t *testing.T) {
	src := newEnv(t)
	src.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	key, err := src.in.CreateAsymmetricKey("EKMKey", "AzureKeyVaultProvider", "backup-key")
	if err != nil {
		t.Fatal(err)
	}
	pages := dataPages(t, src, "Sales")
	path := src.backupTo(t, "Sales", "asym.bak", ", CHECKSUM, ENCRYPTION (ALGORITHM = AES_256, SERVER ASYMMETRIC KEY = [EKMKey])")
	if n := pagesIn(t, src, "asym.bak", pages); n != 0 {
		t.Fatalf("the encrypted backup holds %d pages in clear", n)
	}
	r := mustRun(t, src.db, "SELECT TOP 1 encryptor_thumbprint, encryptor_type FROM msdb.dbo.backupset ORDER BY backup_set_id DESC")
	if !bytes.Equal(r.rows[0][0].([]byte), key.Thumbprint) || r.rows[0][1] != "ASYMMETRIC KEY" {
		t.Errorf("backupset: %v, want %x, ASYMMETRIC KEY", r.rows[0], key.Thumbprint)
	}
	r = mustRun(t, src.db, "SELECT name, thumbprint, provider_type, pvt_key_encryption_type FROM master.sys.asymmetric_keys")
	if len(r.rows) != 1 || r.rows[0][0] != "EKMKey" || !bytes.Equal(r.rows[0][1].([]byte), key.Thumbprint) ||
		r.rows[0][2] != "CRYPTOGRAPHIC PROVIDER" || r.rows[0][3] != "CP" {
		t.Errorf("sys.asymmetric_keys: %v", r.rows)
	}

	dst := src.peerOf(t, "verify01")
	h := header(t, dst.db, path)
	if h["EncryptorType"] != "ASYMMETRIC KEY" || !bytes.Equal(h["EncryptorThumbprint"].([]byte), key.Thumbprint) {
		t.Errorf("HEADERONLY: %x %v", h["EncryptorThumbprint"], h["EncryptorType"])
	}
	refused := func(why string) {
		t.Helper()
		for _, stmt := range []string{"RESTORE FILELISTONLY FROM DISK = " + ql(path), "RESTORE VERIFYONLY FROM DISK = " + ql(path),
			restoreAs("Sales_verify", path)} {
			r := wantErrs(t, dst.db, []int32{33111, 3013}, stmt)
			if e, want := r.errs[0], "Cannot find server asymmetric key with thumbprint '"+key.ThumbprintText()+"'."; e.Message != want || e.State != 4 {
				t.Errorf("%s, %s: %q state %d, want %q state 4", why, short(stmt), e.Message, e.State, want)
			}
		}
	}
	refused("no key")
	if _, err := dst.in.CreateAsymmetricKey("EKMKey", "AzureKeyVaultProvider", "another-key"); err != nil {
		t.Fatal(err)
	}
	refused("another provider key of the same name")
	if err := dst.in.DropAsymmetricKey("EKMKey"); err != nil {
		t.Fatal(err)
	}
	if err := dst.in.OpenAsymmetricKey(key); err != nil {
		t.Fatal(err)
	}
	mustRun(t, dst.db, "RESTORE VERIFYONLY FROM DISK = "+ql(path))
	mustRun(t, dst.db, restoreAs("Sales_verify", path))
	mustRun(t, dst.db, "DBCC CHECKDB (N'Sales_verify') WITH NO_INFOMSGS")
}

// An asymmetric key SQL Server holds itself (not of an EKM provider)
// cannot encrypt a backup ("only asymmetric keys residing in the EKM
// provider are supported"); a login without VIEW ANY DEFINITION neither
// sees the key in sys.asymmetric_keys nor may BACKUP with it (15151).
func TestBackupEncryptionAsymmetricKeyRefusals(t *testing.T) {
	logins := []Login{{Name: "operator", Password: testPass, Databases: map[string][]string{"Sales": {"db_backupoperator"}}}}
	src := newEnv(t, func(c *Config) { c.Principals = logins; c.Logins = map[string]string{"sa": testPass} })
	src.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	if _, err := src.in.CreateAsymmetricKey("LocalKey", "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := src.in.CreateAsymmetricKey("EKMKey", "AzureKeyVaultProvider", "k"); err != nil {
		t.Fatal(err)
	}
	stmt := func(key string) string {
		return "BACKUP DATABASE [Sales] TO DISK = " + ql(`\\bak01\backup\r.bak`) + " WITH INIT, FORMAT, ENCRYPTION (ALGORITHM = AES_256, SERVER ASYMMETRIC KEY = " + key + ")"
	}
	// SQL Server's error for it is not documented: the emulator refuses
	// it as a statement it does not emulate, naming the key.
	r := wantErrs(t, src.db, []int32{40515, 3013}, stmt("LocalKey"))
	if msg := r.errs[0].Message; !strings.Contains(msg, "LocalKey") || !strings.Contains(msg, "EKM") {
		t.Errorf("%q does not name the key and EKM", msg)
	}
	r = mustRun(t, src.db, "SELECT name, provider_type FROM master.sys.asymmetric_keys ORDER BY name")
	if len(r.rows) != 2 || r.rows[1][0] != "LocalKey" || r.rows[1][1] != nil {
		t.Errorf("sys.asymmetric_keys: %v", r.rows)
	}
	op := src.openAs(t, "operator", testPass, "Sales")
	wantErrs(t, op, []int32{15151, 3013}, stmt("EKMKey"))
	if r := mustRun(t, op, "SELECT name FROM master.sys.asymmetric_keys"); len(r.rows) != 0 {
		t.Errorf("a login without VIEW ANY DEFINITION sees %v", r.rows)
	}
	if _, err := os.Stat(filepath.Join(src.shareDir, "r.bak")); !os.IsNotExist(err) {
		t.Errorf("a refused encrypted BACKUP left its file: %v", err)
	}
}
