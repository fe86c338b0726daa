package preflight

import (
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Backup encryption by an asymmetric key: preflight reads
// master.sys.asymmetric_keys of the source (the key there, of an EKM
// provider: SQL Server encrypts backups with no other) and of the
// verification instance (the same thumbprint, else 33111), naming each
// key, thumbprint and fix.
func TestBackupEncryptionAsymmetricKey(t *testing.T) {
	src, ver, cfg := versionSite(t, nil, nil)
	cfg.Databases[0].Encryption = config.Encryption{Algorithm: tsql.AES256, ServerAsymmetricKey: "EKMKey"}
	r, text := runPreflight(t, cfg, "")
	if c := findDB(t, r, "backup encryption key", text); c.Status != Missing || !strings.Contains(c.Detail, "EKMKey") ||
		!strings.Contains(c.Detail, "15151") || !strings.Contains(c.Fix, "CREATE ASYMMETRIC KEY [EKMKey] FROM PROVIDER") || r.OK {
		t.Errorf("no key on the source: %+v\n%s", c, text)
	}

	// A key SQL Server holds itself: BACKUP takes only EKM keys.
	if _, err := src.CreateAsymmetricKey("EKMKey", "", ""); err != nil {
		t.Fatal(err)
	}
	r, text = runPreflight(t, cfg, "")
	if c := findDB(t, r, "backup encryption key", text); c.Status != Missing || !strings.Contains(c.Detail, "not of an EKM provider") ||
		!strings.Contains(c.Detail, "only asymmetric keys residing in the EKM provider") {
		t.Errorf("a key not of a provider: %+v\n%s", c, text)
	}

	if err := src.DropAsymmetricKey("EKMKey"); err != nil {
		t.Fatal(err)
	}
	key, err := src.CreateAsymmetricKey("EKMKey", "AzureKeyVaultProvider", "backup-key")
	if err != nil {
		t.Fatal(err)
	}
	r, text = runPreflight(t, cfg, "")
	if c := findDB(t, r, "backup encryption key", text); c.Status != OK || !strings.Contains(c.Detail, key.ThumbprintText()) {
		t.Errorf("EKM key on the source: %+v\n%s", c, text)
	}
	c := findDB(t, r, "backup encryption key on sqlverify", text)
	if c.Status != Missing || !strings.Contains(c.Detail, key.ThumbprintText()) || !strings.Contains(c.Detail, "33111") ||
		!strings.Contains(c.Fix, "CREATION_DISPOSITION = OPEN_EXISTING") || r.OK {
		t.Errorf("verification instance without the key: %+v\n%s", c, text)
	}

	if err := ver.OpenAsymmetricKey(key); err != nil {
		t.Fatal(err)
	}
	r, text = runPreflight(t, cfg, "")
	for _, name := range []string{"backup encryption key", "backup encryption key on sqlverify"} {
		if c := findDB(t, r, name, text); c.Status != OK {
			t.Errorf("%s once the key is opened there: %+v\n%s", name, c, text)
		}
	}
	if !r.OK || r.Warnings != strings.Count(text, "WARN     least privilege: sysadmin") {
		t.Errorf("report: missing %d, warnings %d\n%s", r.Missing, r.Warnings, text)
	}
}
