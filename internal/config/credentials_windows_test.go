package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// On Windows a secret file is named by a Windows path: absolute with a
// drive letter (C:\backupcycle\secrets\sql01.txt, plain or single-quoted in
// YAML, where a backslash is no escape) or relative to the configuration's
// directory with backslashes.
func TestSecretFileByWindowsPath(t *testing.T) {
	const value = "W1ndows-pw"
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(dir, "secrets", "sql01.txt")
	if err := os.WriteFile(abs, []byte(value+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(abs) || !strings.Contains(abs, `:\`) {
		t.Fatalf("%s is not a drive-letter path", abs)
	}
	for _, ref := range []string{abs, "'" + abs + "'", `secrets\sql01.txt`} {
		cfgText := strings.Replace(mixedPlatforms, "password_env: SQL01_PASSWORD", "password_file: "+ref, 1)
		cfg, err := Parse([]byte(cfgText), filepath.Join(dir, "config.yaml"))
		if err != nil {
			t.Fatalf("password_file: %s: %v", ref, err)
		}
		r := cfg.SQLInstances[0].Password
		if r.File != abs {
			t.Errorf("password_file: %s loaded as %q, want %q", ref, r.File, abs)
		}
		if got, err := r.Resolve(); err != nil || got != value {
			t.Errorf("password_file: %s: %q, %v", ref, got, err)
		}
	}
}
