package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/evidence"
)

// evidence: mistakes are reported at their lines.
func TestEvidenceErrors(t *testing.T) {
	k, _, err := evidence.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := k.Public().String()
	for _, tc := range []struct {
		name, section, want string
		line                int
	}{
		{"no public key", "  signing_key_env: EK\n", `missing required key "public_keys" in evidence`, 1},
		{"not a key", "  public_keys: [bm90IGEga2V5]\n", "evidence.public_keys[0]: public key", 2},
		{"both places", "  signing_key_env: EK\n  signing_key_file: /k\n  public_keys: ['" + pub + "']\n", "signing_key_env and signing_key_file are both set", 3},
		{"bad env name", "  signing_key_env: 'my key'\n  public_keys: ['" + pub + "']\n", "signing_key_env is not an environment variable name", 2},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErrorAt(t, "evidence:\n"+tc.section+base, tc.line, tc.want) })
	}
}

// The signing key is read when asked: from an owner-only file, and only
// when its public key is listed; errors name the file, never the key.
func TestEvidenceSigningKey(t *testing.T) {
	dir := t.TempDir()
	key, enc, err := evidence.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := evidence.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "ev.key")
	if err := os.WriteFile(file, []byte(enc+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	load := func(pubs ...evidence.PublicKey) *Config {
		var list []string
		for _, p := range pubs {
			list = append(list, "'"+p.String()+"'")
		}
		c, err := Parse([]byte("evidence:\n  signing_key_file: ev.key\n  public_keys: ["+strings.Join(list, ", ")+"]\n"+base), filepath.Join(dir, "c.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := load(other.Public(), key.Public())
	if k, err := c.Evidence.SigningKey(); err != nil || k.ID() != key.ID() || !c.Evidence.Signs() {
		t.Fatalf("signing key: %v, %v", k, err)
	}
	if _, err := load(other.Public()).Evidence.SigningKey(); err == nil || !errors.Is(err, ErrSecretUnavailable) ||
		!strings.Contains(err.Error(), "is not in evidence.public_keys") || strings.Contains(err.Error(), enc) {
		t.Errorf("a key whose public key is not listed: %v", err)
	}
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Evidence.SigningKey(); err == nil || !strings.Contains(err.Error(), file) || strings.Contains(err.Error(), enc) {
		t.Errorf("a key file others may read: %v", err)
	}
	var none *Evidence
	if none.Enabled() || none.Signs() {
		t.Error("no evidence: section keeps a ledger")
	}
}
