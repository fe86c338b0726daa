package preflight

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// encryptWith sets Shop's encryption: to the certificate name.
func encryptWith(cfg *config.Config, name string, acknowledged bool) {
	cfg.Databases[0].Encryption = config.Encryption{Algorithm: tsql.AES256, ServerCertificate: name, PrivateKeyBackedUp: acknowledged}
}

// Backup encryption: the certificate must be in master of the source, its
// private key exported (or that acknowledged), and the same thumbprint on
// the verification instance; preflight names each and its fix. Once the
// certificate is exported and imported, everything passes.
func TestBackupEncryptionCertificates(t *testing.T) {
	src, ver, cfg := versionSite(t, nil, nil)
	encryptWith(cfg, "BackupCert", false)
	r, text := runPreflight(t, cfg, "")
	if c := findDB(t, r, "backup encryption certificate", text); c.Status != Missing || !strings.Contains(c.Detail, "BackupCert") ||
		!strings.Contains(c.Detail, "15151") || !strings.Contains(c.Fix, "CREATE CERTIFICATE [BackupCert]") || r.OK {
		t.Errorf("no certificate on the source: %+v\n%s", c, text)
	}

	cert, err := src.CreateCertificate("BackupCert", "backup encryption")
	if err != nil {
		t.Fatal(err)
	}
	r, text = runPreflight(t, cfg, "")
	backup, _ := tsql.BackupCertificate("BackupCert", "<password>")
	create, _ := tsql.CreateCertificateFromFile("BackupCert", "<password>")
	if c := findDB(t, r, "backup encryption certificate", text); c.Status != OK || !strings.Contains(c.Detail, cert.ThumbprintText()) {
		t.Errorf("certificate on the source: %+v\n%s", c, text)
	}
	if c := findDB(t, r, "backup encryption private key", text); c.Status != Missing || !strings.Contains(c.Fix, backup) ||
		!strings.Contains(c.Fix, "private_key_backed_up") {
		t.Errorf("private key never exported: %+v\n%s", c, text)
	}
	c := findDB(t, r, "backup encryption certificate on sqlverify", text)
	if c.Status != Missing || !strings.Contains(c.Detail, cert.ThumbprintText()) || !strings.Contains(c.Fix, create) || r.OK {
		t.Errorf("verification instance without the certificate: %+v\n%s", c, text)
	}

	// Created from files kept elsewhere: acknowledged.
	encryptWith(cfg, "BackupCert", true)
	r, text = runPreflight(t, cfg, "")
	if c := findDB(t, r, "backup encryption private key", text); c.Status != OK || !strings.Contains(c.Detail, "private_key_backed_up") {
		t.Errorf("acknowledged: %+v\n%s", c, text)
	}

	encryptWith(cfg, "BackupCert", false)
	exported, err := src.ExportCertificate("BackupCert")
	if err != nil {
		t.Fatal(err)
	}
	if err := ver.ImportCertificate(exported); err != nil {
		t.Fatal(err)
	}
	r, text = runPreflight(t, cfg, "")
	for _, name := range []string{"backup encryption certificate", "backup encryption private key", "backup encryption certificate on sqlverify"} {
		if c := findDB(t, r, name, text); c.Status != OK {
			t.Errorf("%s after the export and import: %+v", name, c)
		}
	}
	// The test logs in as sa: its only warnings are that it is sysadmin,
	// one per instance.
	if !r.OK || r.Warnings != strings.Count(text, "WARN     least privilege: sysadmin") {
		t.Errorf("report: missing %d, warnings %d\n%s", r.Missing, r.Warnings, text)
	}
	// Same name, another key on the verification instance: the
	// thumbprints differ.
	if err := ver.DropCertificate("BackupCert"); err != nil {
		t.Fatal(err)
	}
	if _, err := ver.CreateCertificate("BackupCert", "not the source's"); err != nil {
		t.Fatal(err)
	}
	r, text = runPreflight(t, cfg, "")
	if c := findDB(t, r, "backup encryption certificate on sqlverify", text); c.Status != Missing {
		t.Errorf("a certificate of the same name with another thumbprint: %+v\n%s", c, text)
	}
}

// A certificate that expires within 30 days is a warning; an expired one
// is missing: SQL Server refuses BACKUP WITH ENCRYPTION with it (3096).
func TestBackupEncryptionCertificateExpiry(t *testing.T) {
	src, ver, cfg := versionSite(t, nil, nil)
	for _, tc := range []struct {
		name   string
		expiry time.Duration
		want   Status
		text   string
	}{{"SoonCert", 10 * 24 * time.Hour, Warn, "expires"}, {"OldCert", -time.Hour, Missing, "3096"}} {
		c := sqlsim.Certificate{Name: tc.name, Thumbprint: bytes.Repeat([]byte{byte(len(tc.name))}, 20), Start: time.Now().AddDate(-1, 0, 0),
			Expiry: time.Now().UTC().Add(tc.expiry).Truncate(time.Second), PrivateKey: []byte(tc.name)}
		for _, in := range []*sqlsim.Instance{src, ver} {
			if err := in.ImportCertificate(c); err != nil {
				t.Fatal(err)
			}
		}
		encryptWith(cfg, tc.name, true)
		r, text := runPreflight(t, cfg, "")
		if got := findDB(t, r, "backup encryption certificate", text); got.Status != tc.want || !strings.Contains(got.Detail, tc.text) {
			t.Errorf("%s: %+v, want %s naming %q\n%s", tc.name, got, tc.want, tc.text, text)
		}
	}
}

// Express cannot create encrypted backups: MISSING, naming the edition.
func TestBackupEncryptionOnExpress(t *testing.T) {
	src, _, cfg := versionSite(t, func(c *sqlsim.Config) { c.Edition = "Express" }, nil)
	if _, err := src.CreateCertificate("BackupCert", "backup encryption"); err != nil {
		t.Fatal(err)
	}
	encryptWith(cfg, "BackupCert", true)
	r, text := runPreflight(t, cfg, "")
	if c := findDB(t, r, "backup encryption edition", text); c.Status != Missing || !strings.Contains(c.Detail, "Express") || r.OK {
		t.Errorf("Express source: %+v\n%s", c, text)
	}
}
