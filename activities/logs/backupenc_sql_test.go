package logs

import (
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// With encryption:, the log backups are taken WITH ENCRYPTION like the
// fulls, and the chain record (version 2) records each one's algorithm and
// thumbprint as HEADERONLY gives them.
func TestSQLBackupLogEncrypted(t *testing.T) {
	f := newLogFixture(t, "    encryption: {algorithm: AES_128, server_certificate: BackupCert}\n")
	cert, err := f.site.Source.CreateCertificate("BackupCert", "backup encryption")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.site.Verify.ImportCertificate(cert); err != nil {
		t.Fatal(err)
	}
	f.commit(2)
	full := f.full(true)
	if e := full.Header.Encryption; e == nil || e.Algorithm != "AES_128" || e.Thumbprint != cert.ThumbprintText() {
		t.Fatalf("the full's manifest: encryption %+v", e)
	}
	f.commit(2)
	f.mustBackupLog()
	logs := backupLogs(f.site.Source)
	if len(logs) != 1 || !strings.Contains(logs[0].SQL, "ENCRYPTION (ALGORITHM = AES_128, SERVER CERTIFICATE = [BackupCert])") {
		t.Fatalf("BACKUP LOG statements: %+v", logs)
	}
	r := f.newest()
	want := catalog.BackupEncryption{Algorithm: "AES_128", Thumbprint: cert.ThumbprintText(), EncryptorType: "CERTIFICATE"}
	if l := r.Log(1); l == nil || l.Encryption == nil || *l.Encryption != want || r.SchemaVersion != 2 {
		t.Fatalf("chain record version %d, log 1: %+v, want encryption %+v", r.SchemaVersion, l, want)
	}
}
