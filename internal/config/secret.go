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
	switch {
	case r.Env != "" && r.File != "":
		return "", fmt.Errorf("%w: both password_env %s and password_file %s are set: keep one", ErrSecretUnavailable, r.Env, r.File)
	case r.Env != "":
		v, ok := os.LookupEnv(r.Env)
		if !ok {
			return "", fmt.Errorf("%w: environment variable %s is not set: export it in the worker's environment", ErrSecretUnavailable, r.Env)
		}
		if v == "" {
			return "", fmt.Errorf("%w: environment variable %s is empty: set it to the password", ErrSecretUnavailable, r.Env)
		}
		return v, nil
	case r.File != "":
		b, err := os.ReadFile(r.File)
		if err != nil {
			// The os error names the file and the cause (not found, permission), never contents.
			return "", fmt.Errorf("%w: cannot read password_file: %w", ErrSecretUnavailable, err)
		}
		v := string(b)
		if i := strings.IndexAny(v, "\r\n"); i >= 0 {
			v = v[:i]
		}
		if v == "" {
			return "", fmt.Errorf("%w: password_file %s is empty: write the password on its first line", ErrSecretUnavailable, r.File)
		}
		return v, nil
	}
	return "", fmt.Errorf("%w: no password_env or password_file given", ErrSecretUnavailable)
}

// Resolve is ResolveSecret(r).
func (r SecretRef) Resolve() (string, error) { return ResolveSecret(r) }

// ResolveEnv reads a secret held in the named environment variable (e.g.
// Temporal's api_key_env), with the same error rules as ResolveSecret.
func ResolveEnv(name string) (string, error) { return ResolveSecret(SecretRef{Env: name}) }
