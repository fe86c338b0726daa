package activities_test

import (
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/activities"
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
	f := activities.NewSQLFixtureOf(t, sitetest.Options{Database: db, Extra: quickWaits + encrypted})
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
	if stmts := activities.Statements(f.Source(), "BACKUP DATABASE"); len(stmts) == 0 ||
		!strings.Contains(stmts[len(stmts)-1].SQL, "ENCRYPTION (ALGORITHM = AES_256, SERVER CERTIFICATE = [BackupCert])") {
		t.Errorf("BACKUP statements: %v", stmts)
	}
}

// The source's certificate missing or expired: the plan refuses before any
// BACKUP (SQL Server would answer 15151 or 3096 to it), naming the key to
// fix.
func TestE2EBackupEncryptionSourceCertificateRefused(t *testing.T) {
	const db = "Sealed"
	f := activities.NewSQLFixtureOf(t, sitetest.Options{Database: db, Extra: quickWaits + encrypted})
	g := newGated(t, f)
	g.refusedAtPlan(t, db, "BackupCert", "not in master of sql01", "encryption.server_certificate")
}

// Express (and Web) cannot create encrypted backups: the plan refuses
// before any BACKUP, naming the edition.
func TestE2EBackupEncryptionOnExpressRefused(t *testing.T) {
	const db = "Sealed"
	f := activities.NewSQLFixtureOf(t, sitetest.Options{Database: db, Extra: quickWaits + encrypted,
		SourceConfig: func(c *sqlsim.Config) { c.Edition = "Express" }})
	if _, err := f.Source().CreateCertificate("BackupCert", "backup encryption"); err != nil {
		t.Fatal(err)
	}
	g := newGated(t, f)
	g.refusedAtPlan(t, db, "cannot create encrypted backups", "Express")
}
