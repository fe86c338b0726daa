package cycle_test

import (
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// encrypted is the policy of a database backed up WITH ENCRYPTION.
const encrypted = "    encryption: {algorithm: AES_256, server_certificate: BackupCert}\n"

// A database backed up WITH ENCRYPTION whose certificate the verification
// instance lacks: the plan refuses before any BACKUP, naming the
// certificate, its thumbprint and the fix; a RESTORE that meets 33111 (the
// plan could not ask the instance) fails once with InvalidConfig and the
// set stays copied, never failed; with the certificate installed, --resume
// verifies it, the next cycle verifies at once, and every manifest records
// the algorithm and the thumbprint.
func TestE2EBackupEncryptionCertificateMissing(t *testing.T) {
	const db = "Sealed"
	f := cycle.NewSQLFixtureOf(t, sitetest.Options{Database: db, Extra: quickWaits + encrypted})
	cert, err := f.Source().CreateCertificate("BackupCert", "backup encryption")
	if err != nil {
		t.Fatal(err)
	}
	g := newGated(t, f)
	g.refusedAtPlan(t, db, cert.ThumbprintText(), "BackupCert", "WITH ENCRYPTION", "CREATE CERTIFICATE")
	seq := g.refusedAtRestore(t, db, cert.ThumbprintText(), "BackupCert", "WITH ENCRYPTION", "CREATE CERTIFICATE")
	exported, err := f.Source().ExportCertificate("BackupCert")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Verify().ImportCertificate(exported); err != nil {
		t.Fatal(err)
	}
	g.resumed(t, db, seq)
	res, _, err := g.cycle(db)
	if err != nil {
		t.Fatalf("the next cycle: %v", err)
	}
	want := catalog.BackupEncryption{Algorithm: "AES_256", Thumbprint: cert.ThumbprintText(), EncryptorType: "CERTIFICATE"}
	for _, s := range []int64{seq, res.Sequence} {
		for _, server := range []string{"bak01", "bak02"} {
			m := f.ManifestOf(server, db, s)
			if m == nil || !m.Verified() || m.Header == nil || m.Header.Encryption == nil || *m.Header.Encryption != want {
				t.Errorf("set %d on %s: %+v, want verified with encryption %+v", s, server, m, want)
			}
		}
	}
	if stmts := cycle.Statements(f.Source(), "BACKUP DATABASE"); len(stmts) == 0 ||
		!strings.Contains(stmts[len(stmts)-1].SQL, "ENCRYPTION (ALGORITHM = AES_256, SERVER CERTIFICATE = [BackupCert])") {
		t.Errorf("BACKUP statements: %v", stmts)
	}
}

// The source's certificate missing or expired: the plan refuses before any
// BACKUP (SQL Server would answer 15151 or 3096 to it), naming the key to
// fix.
func TestE2EBackupEncryptionSourceCertificateRefused(t *testing.T) {
	const db = "Sealed"
	f := cycle.NewSQLFixtureOf(t, sitetest.Options{Database: db, Extra: quickWaits + encrypted})
	g := newGated(t, f)
	g.refusedAtPlan(t, db, "BackupCert", "not in master of sql01", "encryption.server_certificate")
}

// Express (and Web) cannot create encrypted backups: the plan refuses
// before any BACKUP, naming the edition.
func TestE2EBackupEncryptionOnExpressRefused(t *testing.T) {
	const db = "Sealed"
	f := cycle.NewSQLFixtureOf(t, sitetest.Options{Database: db, Extra: quickWaits + encrypted,
		SourceConfig: func(c *sqlsim.Config) { c.Edition = "Express" }})
	if _, err := f.Source().CreateCertificate("BackupCert", "backup encryption"); err != nil {
		t.Fatal(err)
	}
	g := newGated(t, f)
	g.refusedAtPlan(t, db, "cannot create encrypted backups", "Express")
}

// A database backed up WITH ENCRYPTION by an asymmetric key of an EKM
// provider: missing on the source, then on the verification instance, the
// plan refuses before any BACKUP, naming the key, its thumbprint and the
// fix; once the same provider key is opened there, the cycle verifies and
// every manifest records ASYMMETRIC KEY and its thumbprint.
func TestE2EBackupEncryptionAsymmetricKey(t *testing.T) {
	const db = "Sealed"
	f := cycle.NewSQLFixtureOf(t, sitetest.Options{Database: db,
		Extra: quickWaits + "    encryption: {algorithm: AES_256, server_asymmetric_key: EKMKey}\n"})
	g := newGated(t, f)
	g.refusedAtPlan(t, db, "EKMKey", "not in master of sql01", "15151", "encryption.server_asymmetric_key")
	key, err := f.Source().CreateAsymmetricKey("EKMKey", "AzureKeyVaultProvider", "backup-key")
	if err != nil {
		t.Fatal(err)
	}
	g.refusedAtPlan(t, db, key.ThumbprintText(), "asymmetric key EKMKey", "33111", "CREATION_DISPOSITION = OPEN_EXISTING")
	if err := f.Verify().OpenAsymmetricKey(key); err != nil {
		t.Fatal(err)
	}
	res, _, err := g.cycle(db)
	if err != nil {
		t.Fatalf("the cycle once the key is opened on the verification instance: %v", err)
	}
	want := catalog.BackupEncryption{Algorithm: "AES_256", Thumbprint: key.ThumbprintText(), EncryptorType: "ASYMMETRIC KEY"}
	for _, server := range []string{"bak01", "bak02"} {
		m := f.ManifestOf(server, db, res.Sequence)
		if m == nil || !m.Verified() || m.Header == nil || m.Header.Encryption == nil || *m.Header.Encryption != want {
			t.Errorf("set %d on %s: %+v, want verified with encryption %+v", res.Sequence, server, m, want)
		}
	}
	if stmts := cycle.Statements(f.Source(), "BACKUP DATABASE"); len(stmts) == 0 ||
		!strings.Contains(stmts[len(stmts)-1].SQL, "ENCRYPTION (ALGORITHM = AES_256, SERVER ASYMMETRIC KEY = [EKMKey])") {
		t.Errorf("BACKUP statements: %v", stmts)
	}
}
