package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/credtest"
)

// A service's credentials (systemd's LoadCredential=) are read from
// $CREDENTIALS_DIRECTORY: a secret file's path in the configuration may
// start with ${CREDENTIALS_DIRECTORY}, and a credential systemd wrote for a
// service user other than root (0400, root's, an ACL entry for the user:
// stat shows 0440) is accepted there, while the same mode elsewhere, or
// any bit for others, is still refused.
func TestSecretFromSystemdCredentials(t *testing.T) {
	const value = "Cr3dential-pw"
	creds := t.TempDir()
	elsewhere := t.TempDir()
	credential := func(dir, name string, mode os.FileMode, acl bool) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(value+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if acl {
			if err := credtest.SetUserACL(p, 65534, credtest.Read); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	systemdWritten := credential(creds, "sql01-password", 0o400, true)
	fi, err := os.Stat(systemdWritten)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o440 {
		t.Fatalf("a 0400 file with a user ACL entry shows mode %04o, want 0440 (the ACL's mask in the group bits)", fi.Mode().Perm())
	}
	credential(creds, "world-readable", 0o444, false)
	credential(creds, "group-writable", 0o460, false)
	copied := credential(elsewhere, "sql01-password", 0o400, true)
	if err := os.Symlink(copied, filepath.Join(creds, "link-out")); err != nil {
		t.Fatal(err)
	}

	t.Setenv(CredentialsDirEnv, creds)
	if got, err := ResolveSecret(SecretRef{File: systemdWritten}); err != nil || got != value {
		t.Errorf("the credential systemd wrote, by its path: %q, %v; want the password", got, err)
	}

	cfgText := strings.Replace(mixedPlatforms, "password_env: SQL01_PASSWORD", "password_file: ${CREDENTIALS_DIRECTORY}/sql01-password", 1)
	cfg, err := Parse([]byte(cfgText), filepath.Join(t.TempDir(), "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ref := cfg.SQLInstances[0].Password
	if ref.File != "${CREDENTIALS_DIRECTORY}/sql01-password" {
		t.Fatalf("password_file loaded as %q: a credential's path is resolved where it is read, not against the config's directory", ref.File)
	}

	if got, err := ref.Resolve(); err != nil || got != value {
		t.Errorf("the credential systemd wrote: %q, %v; want the password", got, err)
	}
	for _, c := range []struct{ file, want string }{
		{"${CREDENTIALS_DIRECTORY}/world-readable", "has mode 0444"},
		{"${CREDENTIALS_DIRECTORY}/group-writable", "has mode 0460"},
		{"${CREDENTIALS_DIRECTORY}/link-out", "has mode 0440"},
		{copied, "has mode 0440"},
	} {
		if _, err := ResolveSecret(SecretRef{File: c.file}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.file, err, c.want)
		}
	}

	t.Setenv(CredentialsDirEnv, "")
	_, err = ref.Resolve()
	if err == nil || !strings.Contains(err.Error(), "CREDENTIALS_DIRECTORY is not set") || !strings.Contains(err.Error(), "LoadCredential=") {
		t.Errorf("without CREDENTIALS_DIRECTORY: %v, want an error naming it and LoadCredential=", err)
	}
}
