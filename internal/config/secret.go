package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// SecretRef names where a secret lives: an environment variable or a file.
// It is safe to pass in workflow inputs and to log: it never holds the value.
type SecretRef struct {
	Env  string `yaml:"password_env"`  // name of an environment variable
	File string `yaml:"password_file"` // path of a file (first line, trailing newline dropped)
}

// IsZero reports whether no reference is set.
func (r SecretRef) IsZero() bool { return r.Env == "" && r.File == "" }

// String names the reference, never the value: "env SQL01_PASSWORD".
func (r SecretRef) String() string {
	switch {
	case r.Env != "":
		return "env " + r.Env
	case r.File != "":
		return "file " + r.File
	}
	return "no secret reference"
}

// ErrSecretUnavailable is wrapped by every ResolveSecret failure, so callers
// can classify it (a missing secret does not fix itself: not retryable).
var ErrSecretUnavailable = errors.New("secret unavailable")

// ResolveSecret reads the secret a reference names, at the moment it is
// needed (activities call it right before connecting). Errors name the
// variable or file and how to fix it, never the value.
func ResolveSecret(r SecretRef) (string, error) {
	return resolveRef(r.Env, r.File, "password_env", "password_file", "the password")
}

// resolveRef reads the secret in environment variable env or file file,
// whose configuration keys are envKey and fileKey; what names the secret
// in messages ("the password").
func resolveRef(env, file, envKey, fileKey, what string) (string, error) {
	switch {
	case env != "" && file != "":
		return "", fmt.Errorf("%w: both %s %s and %s %s are set: keep one", ErrSecretUnavailable, envKey, env, fileKey, file)
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok {
			return "", fmt.Errorf("%w: environment variable %s is not set: export it in the worker's environment", ErrSecretUnavailable, env)
		}
		if v == "" {
			return "", fmt.Errorf("%w: environment variable %s is empty: set it to %s", ErrSecretUnavailable, env, what)
		}
		return v, nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			// The os error names the file and the cause (not found, permission), never contents.
			return "", fmt.Errorf("%w: cannot read %s: %w", ErrSecretUnavailable, fileKey, err)
		}
		v := string(b)
		if i := strings.IndexAny(v, "\r\n"); i >= 0 {
			v = v[:i]
		}
		if v == "" {
			return "", fmt.Errorf("%w: %s %s is empty: write %s on its first line", ErrSecretUnavailable, fileKey, file, what)
		}
		return v, nil
	}
	return "", fmt.Errorf("%w: no %s or %s given", ErrSecretUnavailable, envKey, fileKey)
}

// Resolve is ResolveSecret(r).
func (r SecretRef) Resolve() (string, error) { return ResolveSecret(r) }

// ResolveEnv reads a secret held in the named environment variable (e.g.
// Temporal's api_key_env), with the same error rules as ResolveSecret.
func ResolveEnv(name string) (string, error) { return ResolveSecret(SecretRef{Env: name}) }
