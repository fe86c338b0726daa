package config

import (
	"fmt"

	"github.com/backupcycle/backupcycle/internal/evidence"
)

// Evidence configures the evidence ledger (package evidence): the
// workers sign its records with an Ed25519 key given by reference, like a
// password (one of signing_key_env / signing_key_file, holding base64 of
// the key on one line), and every record is verified with PublicKeys, so
// `starter evidence verify` needs no private key. A configuration without
// the section keeps no ledger.
type Evidence struct {
	SigningKeyEnv  string `yaml:"signing_key_env"`
	SigningKeyFile string `yaml:"signing_key_file"`
	// PublicKeys verify the records (base64 of the SubjectPublicKeyInfo,
	// or of the 32 raw bytes): the signing key's own and those that
	// signed older records.
	PublicKeys []string `yaml:"public_keys"`
}

// Enabled reports whether a ledger is configured.
func (e *Evidence) Enabled() bool { return e != nil && len(e.PublicKeys) > 0 }

// Signs reports whether this configuration gives a signing key: the
// workers append records only then.
func (e *Evidence) Signs() bool {
	return e.Enabled() && (e.SigningKeyEnv != "" || e.SigningKeyFile != "")
}

// VerifyKeys are the public keys records are verified with.
func (e *Evidence) VerifyKeys() (evidence.PublicKeys, error) {
	var keys []evidence.PublicKey
	for i, s := range e.PublicKeys {
		k, err := evidence.ParsePublicKey(s)
		if err != nil {
			return nil, fmt.Errorf("evidence.public_keys[%d]: %w", i, err)
		}
		keys = append(keys, k)
	}
	return evidence.NewPublicKeys(keys...), nil
}

// SigningKey resolves the signing key now (the activity that appends a
// record calls it): an error wrapping ErrSecretUnavailable names the
// variable or file and the fix, never the value. The key's public half
// must be among PublicKeys, or nothing it signs would verify.
func (e *Evidence) SigningKey() (*evidence.PrivateKey, error) {
	v, err := resolveRef(e.SigningKeyEnv, e.SigningKeyFile, "signing_key_env", "signing_key_file", "the evidence signing key")
	if err != nil {
		return nil, fmt.Errorf("evidence signing key: %w", err)
	}
	k, err := evidence.ParsePrivateKey(v)
	if err != nil {
		return nil, fmt.Errorf("%w: evidence signing key (%s): %w", ErrSecretUnavailable, e.keyRef(), err)
	}
	pubs, err := e.VerifyKeys()
	if err != nil {
		return nil, err
	}
	if _, ok := pubs[k.ID()]; !ok {
		return nil, fmt.Errorf("%w: evidence signing key (%s) is key %s, whose public key %s is not in evidence.public_keys: add it there, or nothing it signs verifies",
			ErrSecretUnavailable, e.keyRef(), k.ID(), k.Public())
	}
	return k, nil
}

func (e *Evidence) keyRef() string {
	if e.SigningKeyEnv != "" {
		return "env " + e.SigningKeyEnv
	}
	return "file " + e.SigningKeyFile
}

// checkEvidence checks the evidence: section: at least one public key,
// each one that parses; the signing key by reference, at most one of env
// and file (none: this configuration verifies only).
func (d *decoder) checkEvidence(c *Config) {
	e := c.Evidence
	if e == nil {
		return
	}
	const path = "evidence"
	if len(e.PublicKeys) == 0 {
		d.errf(d.line(path), join(path, "public_keys"), "missing required key \"public_keys\" in evidence: list the public key of the signing key "+
			"(`starter evidence keygen` prints it) and of every key that signed older records")
	}
	for i, s := range e.PublicKeys {
		if _, err := evidence.ParsePublicKey(s); err != nil {
			kp := fmt.Sprintf("%s.public_keys[%d]", path, i)
			d.errf(d.line(kp), kp, "%s: %v", kp, err)
		}
	}
	if e.SigningKeyEnv != "" || e.SigningKeyFile != "" {
		d.checkSecretRef(&e.SigningKeyEnv, &e.SigningKeyFile, path, path, "signing_key_env", "signing_key_file", "evidence signing key")
	}
}
