package sqlsim

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// encSource is a source with database Sales and a backup certificate.
func encSource(t *testing.T, mod ...func(*Config)) (*testEnv, Certificate) {
	t.Helper()
	src := newEnv(t, mod...)
	src.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	cert, err := src.in.CreateCertificate("BackupCert", "backup encryption")
	if err != nil {
		t.Fatal(err)
	}
	return src, cert
}

const encWith = ", CHECKSUM, ENCRYPTION (ALGORITHM = AES_256, SERVER CERTIFICATE = [BackupCert])"

// dataPages are pages 10-40 of the primary data file of db, as they lie on
// disk (each carries its page id, so each is unique).
func dataPages(t *testing.T, e *testEnv, db string) [][]byte {
	t.Helper()
	d := e.in.lookupDB(db)
	f, err := os.Open(d.Files[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	for p := int64(10); p < 40; p++ {
		b := make([]byte, PageSize)
		if _, err := f.ReadAt(b, p*PageSize); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// pagesIn counts the pages found verbatim in the backup file.
func pagesIn(t *testing.T, e *testEnv, file string, pages [][]byte) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.shareDir, file))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pages {
		if bytes.Contains(b, p) {
			n++
		}
	}
	return n
}

// BACKUP ... WITH ENCRYPTION really encrypts: no page of the database is in
// the file (an unencrypted backup holds them all); msdb and HEADERONLY
// record the algorithm, the certificate's thumbprint and CERTIFICATE; an
// instance without the certificate reads the header only (FILELISTONLY,
// VERIFYONLY and RESTORE: 33111), one with a certificate of the same name
// but another key too; once the certificate is imported the set restores.
func TestBackupEncryptionEncryptsAndNeedsTheCertificate(t *testing.T) {
	src, _ := encSource(t)
	pages := dataPages(t, src, "Sales")
	src.backupTo(t, "Sales", "plain.bak", ", CHECKSUM")
	if n := pagesIn(t, src, "plain.bak", pages); n != len(pages) {
		t.Fatalf("the unencrypted backup holds %d of %d pages verbatim", n, len(pages))
	}
	for _, with := range []string{encWith, encWith + ", COMPRESSION"} {
		src.backupTo(t, "Sales", "enc.bak", with)
		if n := pagesIn(t, src, "enc.bak", pages); n != 0 {
			t.Fatalf("%s: the encrypted backup holds %d pages in clear", with, n)
		}
	}
	path := src.backupTo(t, "Sales", "enc.bak", encWith)
	cert, err := src.in.ExportCertificate("BackupCert")
	if err != nil {
		t.Fatal(err)
	}

	r := mustRun(t, src.db, "SELECT TOP 1 key_algorithm, encryptor_thumbprint, encryptor_type FROM msdb.dbo.backupset ORDER BY backup_set_id DESC")
	if alg, _ := r.rows[0][0].(string); !strings.EqualFold(alg, "AES_256") || !bytes.Equal(r.rows[0][1].([]byte), cert.Thumbprint) ||
		r.rows[0][2] != "CERTIFICATE" {
		t.Errorf("backupset: %v, want aes_256, %x, CERTIFICATE", r.rows[0], cert.Thumbprint)
	}
	r = mustRun(t, src.db, "SELECT key_algorithm, encryptor_thumbprint FROM msdb.dbo.backupset WHERE backup_set_id = 1")
	if r.rows[0][0] != nil || r.rows[0][1] != nil {
		t.Errorf("backupset of the unencrypted backup: %v, want NULLs", r.rows[0])
	}

	dst := src.peerOf(t, "verify01")
	h := header(t, dst.db, path) // the header reads without the certificate
	if alg, _ := h["KeyAlgorithm"].(string); !strings.EqualFold(alg, "AES_256") || !bytes.Equal(h["EncryptorThumbprint"].([]byte), cert.Thumbprint) ||
		h["EncryptorType"] != "CERTIFICATE" {
		t.Errorf("HEADERONLY: %v %x %v", h["KeyAlgorithm"], h["EncryptorThumbprint"], h["EncryptorType"])
	}
	refused := func(why string) {
		t.Helper()
		for _, stmt := range []string{"RESTORE FILELISTONLY FROM DISK = " + ql(path), "RESTORE VERIFYONLY FROM DISK = " + ql(path),
			restoreAs("Sales_verify", path)} {
			r := wantErrs(t, dst.db, []int32{33111, 3013}, stmt)
			if e, want := r.errs[0], "Cannot find server certificate with thumbprint '"+cert.ThumbprintText()+"'."; e.Message != want || e.State != 3 {
				t.Errorf("%s, %s: %q state %d, want %q", why, short(stmt), e.Message, e.State, want)
			}
		}
	}
	refused("no certificate")
	if _, err := dst.in.CreateCertificate("BackupCert", "another key of the same name"); err != nil {
		t.Fatal(err)
	}
	refused("a certificate of the same name")
	if err := dst.in.DropCertificate("BackupCert"); err != nil {
		t.Fatal(err)
	}
	if err := dst.in.ImportCertificate(cert); err != nil {
		t.Fatal(err)
	}
	mustRun(t, dst.db, "RESTORE VERIFYONLY FROM DISK = "+ql(path))
	mustRun(t, dst.db, restoreAs("Sales_verify", path))
	mustRun(t, dst.db, "DBCC CHECKDB (N'Sales_verify') WITH NO_INFOMSGS")
	var enc bool
	if err := dst.db.QueryRow("SELECT is_encrypted FROM sys.databases WHERE name = N'Sales_verify'").Scan(&enc); err != nil || enc {
		t.Errorf("the copy of an encrypted backup is_encrypted %v (%v): backup encryption is not TDE", enc, err)
	}
}

// Log backups and differentials encrypt too, each with the algorithm
// asked; their restore needs the certificate as the full's does.
func TestBackupEncryptionOfLogsAndDifferentials(t *testing.T) {
	src, cert := encSource(t)
	full := src.backupTo(t, "Sales", "full.bak", encWith)
	diff := src.backupTo(t, "Sales", "diff.bak", ", DIFFERENTIAL, ENCRYPTION (ALGORITHM = AES_128, SERVER CERTIFICATE = BackupCert)")
	logPath := `\\bak01\backup\log.trn`
	mustRun(t, src.db, "BACKUP LOG [Sales] TO DISK = "+ql(logPath)+" WITH CHECKSUM, FORMAT, INIT, ENCRYPTION (ALGORITHM = TRIPLE_DES_3KEY, SERVER CERTIFICATE = BackupCert)")
	r := mustRun(t, src.db, "SELECT type, key_algorithm FROM msdb.dbo.backupset ORDER BY backup_set_id")
	var got []string
	for _, row := range r.rows {
		got = append(got, row[0].(string)+":"+strings.ToUpper(row[1].(string)))
	}
	if strings.Join(got, " ") != "D:AES_256 I:AES_128 L:TRIPLE_DES_3KEY" {
		t.Errorf("backupset: %v", got)
	}
	dst := src.peerOf(t, "verify01")
	wantErrs(t, dst.db, []int32{33111, 3013}, "RESTORE VERIFYONLY FROM DISK = "+ql(logPath))
	if err := dst.in.ImportCertificate(cert); err != nil {
		t.Fatal(err)
	}
	mustRun(t, dst.db, restoreAs("Sales_verify", full)+", NORECOVERY")
	mustRun(t, dst.db, "RESTORE DATABASE [Sales_verify] FROM DISK = "+ql(diff)+" WITH NORECOVERY")
	mustRun(t, dst.db, "RESTORE LOG [Sales_verify] FROM DISK = "+ql(logPath)+" WITH RECOVERY")
}

// BACKUP refuses an encryptor master does not hold or the login may not
// see (15151), an expired certificate (3096), and an asymmetric key master
// does not hold (15151); nothing is written.
func TestBackupEncryptionRefusals(t *testing.T) {
	logins := []Login{{Name: "operator", Password: testPass, Databases: map[string][]string{"Sales": {"db_backupoperator"}}},
		{Name: "definer", Password: testPass, Server: []string{"VIEW ANY DEFINITION"}, Databases: map[string][]string{"Sales": {"db_backupoperator"}}}}
	src, _ := encSource(t, func(c *Config) { c.Principals = logins; c.Logins = map[string]string{"sa": testPass} })
	expired := Certificate{Name: "OldCert", Thumbprint: bytes.Repeat([]byte{7}, 20), Start: time.Now().AddDate(-2, 0, 0),
		Expiry: time.Now().Add(-time.Minute), PrivateKey: []byte("old")}
	if err := src.in.ImportCertificate(expired); err != nil {
		t.Fatal(err)
	}
	stmt := func(enc string) string {
		return "BACKUP DATABASE [Sales] TO DISK = " + ql(`\\bak01\backup\r.bak`) + " WITH INIT, FORMAT, ENCRYPTION (" + enc + ")"
	}
	for _, tc := range []struct {
		enc  string
		want []int32
		msg  string
	}{
		{"ALGORITHM = AES_256, SERVER CERTIFICATE = NoSuchCert", []int32{15151, 3013}, "Cannot find the certificate 'NoSuchCert', because it does not exist or you do not have permission."},
		{"ALGORITHM = AES_256, SERVER CERTIFICATE = OldCert", []int32{3096, 3013}, "The Certificate specified for backup encryption has expired."},
		{"ALGORITHM = AES_256, SERVER ASYMMETRIC KEY = EKMKey", []int32{15151, 3013}, "Cannot find the asymmetric key 'EKMKey', because it does not exist or you do not have permission."},
	} {
		r := wantErrs(t, src.db, tc.want, stmt(tc.enc))
		if r.errs[0].Message != tc.msg {
			t.Errorf("%s: %q, want %q", tc.enc, r.errs[0].Message, tc.msg)
		}
	}
	if _, err := os.Stat(filepath.Join(src.shareDir, "r.bak")); !os.IsNotExist(err) {
		t.Errorf("a refused encrypted BACKUP left its file: %v", err)
	}
	// VIEW DEFINITION on the certificate is needed; db_backupoperator alone
	// does not see it.
	wantErrs(t, src.openAs(t, "operator", testPass, "Sales"), []int32{15151, 3013}, stmt("ALGORITHM = AES_256, SERVER CERTIFICATE = BackupCert"))
	r := mustRun(t, src.openAs(t, "definer", testPass, "Sales"), stmt("ALGORITHM = AES_256, SERVER CERTIFICATE = BackupCert"))
	// Never exported: the warning TDE gives.
	if !slices.Contains(r.infoNums(), 33091) {
		t.Errorf("no 33091 for a certificate never backed up: %v", r.infoNums())
	}
	// A syntax error for an algorithm BACKUP does not know.
	mustFail(t, src.db, 102, stmt("ALGORITHM = AES_512, SERVER CERTIFICATE = BackupCert"))
}
