package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// manifest_keys: each key names its id and where it lives; mistakes are
// reported at their lines, and an inline key is refused without echoing it.
func TestManifestKeysErrors(t *testing.T) {
	for _, tc := range []struct {
		name, keys, want string
		line             int
	}{
		{"no id", "  - key_env: MK\n", `missing required key "id" in manifest_keys[0]`, 2},
		{"bad id", "  - {id: 'a b', key_env: MK}\n", `manifest_keys[0].id "a b": use 1-64 letters`, 2},
		{"same id twice", "  - {id: k1, key_env: MK}\n  - {id: k1, key_file: /k}\n", `manifest_keys[1].id "k1" is also manifest_keys[0]'s`, 3},
		{"both places", "  - {id: k1, key_env: MK, key_file: /k}\n", "manifest_keys[0]: key_env and key_file are both set", 2},
		{"no place", "  - {id: k1}\n", `missing required key "key_env" or "key_file" in manifest_keys[0]`, 2},
		{"inline key", "  - {id: k1, key: hunter2-hunter2-hunter2-hunter2-x}\n", "inline key is not allowed: use key_env", 2},
		{"bad env name", "  - {id: k1, key_env: 'my key'}\n", "manifest_keys[0]: key_env is not an environment variable name", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, e := range wantErrorAt(t, "manifest_keys:\n"+tc.keys+base, tc.line, tc.want) {
				if strings.Contains(e.Msg, "hunter2") {
					t.Errorf("message echoes the key: %s", e.Msg)
				}
			}
		})
	}
}

// wantErrorAt parses the configuration text and wants, among its errors
// (returned), one at line saying want.
func wantErrorAt(t *testing.T, text string, line int, want string) Errors {
	t.Helper()
	_, err := Parse([]byte(text), "c.yaml")
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error %v, want config errors", err)
	}
	for _, e := range es {
		if e.Line == line && strings.Contains(e.Msg, want) {
			return es
		}
	}
	t.Errorf("errors %v, want line %d: %q", es, line, want)
	return es
}

// ManifestKeyRing resolves the keys when asked, the first signing; one
// that cannot be read or is too short is an error naming the key, never
// its value. Without manifest_keys there is no ring.
func TestManifestKeyRing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "old.key"), []byte("an older key, 32 bytes or longer, kept to verify\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]byte("manifest_keys:\n  - {id: new, key_env: TEST_MANIFEST_KEY}\n  - {id: old, key_file: old.key}\n"+base),
		filepath.Join(dir, "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEST_MANIFEST_KEY", "short")
	if _, err := c.ManifestKeyRing(); err == nil || !errors.Is(err, ErrSecretUnavailable) || !strings.Contains(err.Error(), `"new" is 5 bytes`) ||
		strings.Contains(err.Error(), "short") {
		t.Errorf("a short key: %v, want ErrSecretUnavailable naming the key's length, not its value", err)
	}
	os.Unsetenv("TEST_MANIFEST_KEY")
	if _, err := c.ManifestKeyRing(); err == nil || !strings.Contains(err.Error(), "manifest key new (env TEST_MANIFEST_KEY)") ||
		!strings.Contains(err.Error(), "not set") {
		t.Errorf("an unset variable: %v, want the key and the variable named", err)
	}
	t.Setenv("TEST_MANIFEST_KEY", "a new key of 32 bytes or more for HMAC-SHA256")
	ring, err := c.ManifestKeyRing()
	if err != nil || ring.Current() != "new" || strings.Join(ring.IDs(), ",") != "new,old" {
		t.Errorf("ring %v, %v; want new signing, old verifying", ring.IDs(), err)
	}
	c, err = Parse([]byte(base), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if ring, err := c.ManifestKeyRing(); ring != nil || err != nil {
		t.Errorf("without manifest_keys: %v, %v; want none", ring, err)
	}
}
