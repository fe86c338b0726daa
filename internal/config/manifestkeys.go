package config

import (
	"fmt"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// ManifestKey is a key the workers authenticate manifests and sequence
// files with (HMAC-SHA256, catalog.Keys): an id, written into every
// signature it makes, and where the secret lives, like a password: exactly
// one of key_env / key_file. The first key of manifest_keys signs; every
// one verifies, so a key is replaced by listing the new one first and
// keeping the old one after it.
type ManifestKey struct {
	ID   string `yaml:"id"`
	Env  string `yaml:"key_env"`  // name of an environment variable
	File string `yaml:"key_file"` // path of a file (first line, trailing newline dropped)
}

// String names the key and where it lives, never the value.
func (k ManifestKey) String() string {
	if k.Env != "" {
		return fmt.Sprintf("manifest key %s (env %s)", k.ID, k.Env)
	}
	return fmt.Sprintf("manifest key %s (file %s)", k.ID, k.File)
}

// Resolve reads the key now, with ResolveSecret's rules (first line of the
// file; an unset or empty variable is an error naming it, never a value).
func (k ManifestKey) Resolve() (string, error) {
	return resolveRef(k.Env, k.File, "key_env", "key_file", "the key")
}

// ManifestKeyRing resolves c's manifest keys now (activities and the
// commands that read manifests call it when they need them): nil, nil
// when none is configured (manifests are neither signed nor
// authenticated). Errors name the key and the fix, never a value.
func (c *Config) ManifestKeyRing() (*catalog.Keys, error) {
	if c == nil || len(c.ManifestKeys) == 0 {
		return nil, nil
	}
	keys := make([]catalog.Key, len(c.ManifestKeys))
	for i, k := range c.ManifestKeys {
		v, err := k.Resolve()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		keys[i] = catalog.Key{ID: k.ID, Secret: []byte(v)}
	}
	ring, err := catalog.NewKeys(keys...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSecretUnavailable, err)
	}
	return ring, nil
}

// checkManifestKeys checks manifest_keys: ids well-formed and unique, each
// key in exactly one of an environment variable or a file.
func (d *decoder) checkManifestKeys(c *Config) {
	seen := map[string]int{}
	for i := range c.ManifestKeys {
		k := &c.ManifestKeys[i]
		path := fmt.Sprintf("manifest_keys[%d]", i)
		first, dup := seen[k.ID]
		switch {
		case !d.required(k.ID, path, "id", path, "the key's name, written into every signature it makes, e.g. \"2026-01\""):
		case !catalog.ValidKeyID(k.ID):
			d.errf(d.line(join(path, "id")), join(path, "id"), "%s.id %q: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit (e.g. \"2026-01\")", path, k.ID)
		case dup:
			d.errf(d.line(join(path, "id")), join(path, "id"), "%s.id %q is also manifest_keys[%d]'s: every key needs its own id", path, k.ID, first)
		default:
			seen[k.ID] = i
		}
		switch {
		case k.Env != "" && k.File != "":
			d.errf(d.line(join(path, "key_file")), path, "%s: key_env and key_file are both set: keep one", path)
		case k.Env == "" && k.File == "":
			if d.inline[path] {
				continue // the inline key is the error to fix
			}
			d.errf(d.line(path), path, "missing required key \"key_env\" or \"key_file\" in %s: name the environment variable or file that holds the key (at least %d random bytes, e.g. `openssl rand -base64 48`)", path, catalog.MinKeyBytes)
		case k.Env != "":
			d.checkEnvName(k.Env, join(path, "key_env"), path, "key_env", "key")
		default:
			k.File = d.relPath(k.File)
		}
	}
}
