package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// SecretRef names where a secret lives: an environment variable or a file.
// It is safe to pass in workflow inputs and to log: it never holds the value.
type SecretRef struct {
	Env string `yaml:"password_env"` // name of an environment variable
	// File is the path of a file holding the password on its first line
	// (the line break dropped). It is read only when it is a regular file
	// of at most MaxSecretFileSize that no other user may read or write,
	// owned by the worker's user or root (the owner and mode are not
	// checked on Windows, where they are ACLs).
	File string `yaml:"password_file"`
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
		v, err := readSecretFile(file, fileKey, what)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrSecretUnavailable, err)
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

// MaxSecretFileSize is the most a password_file may hold: a password is a
// line, and a larger file (a log, a key store, a device) is not one.
const MaxSecretFileSize = 4 << 10

// readSecretFile reads the first line of a secret file (configuration key
// key: password_file, key_file; what: "the password") after checking
// that it is one: a regular file (a FIFO would block the read, a device
// such as /dev/zero never end it), that only its owner may access (one
// other users of the host can read has leaked; see checkSecretFileAccess)
// and at most MaxSecretFileSize long. Errors name the file, never its
// content.
func readSecretFile(path, key, what string) (string, error) {
	path, err := expandCredentials(path, key)
	if err != nil {
		return "", err
	}
	f, err := openSecretFile(path)
	if err != nil {
		// The os error names the file and the cause (not found, permission).
		return "", fmt.Errorf("cannot read %s: %w", key, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s %s is not a regular file (%s): give the file that holds %s", key, path, fileKind(fi.Mode()), what)
	}
	if err := checkSecretFileAccess(key, path, fi); err != nil {
		return "", err
	}
	// One byte more than allowed tells a file at the limit from a longer
	// one, also when it grew after Stat.
	b, err := io.ReadAll(io.LimitReader(f, MaxSecretFileSize+1))
	if err != nil {
		return "", fmt.Errorf("cannot read %s %s: %w", key, path, err)
	}
	if len(b) > MaxSecretFileSize {
		return "", fmt.Errorf("%s %s is larger than %d KiB: it holds %s on its first line and nothing else", key, path, MaxSecretFileSize>>10, what)
	}
	v := string(b)
	if i := strings.IndexAny(v, "\r\n"); i >= 0 {
		v = v[:i]
	}
	return v, nil
}

// CredentialsDirEnv is the variable systemd sets to the directory of a
// service's credentials (LoadCredential=). A secret file's path may start
// with CredentialsPrefix, which the worker replaces with it when it reads
// the file: the configuration names the credential, not where systemd put
// it.
const (
	CredentialsDirEnv = "CREDENTIALS_DIRECTORY"
	CredentialsPrefix = "${" + CredentialsDirEnv + "}"
)

// expandCredentials is path with a leading CredentialsPrefix replaced by
// $CREDENTIALS_DIRECTORY; key names the path's configuration key.
func expandCredentials(path, key string) (string, error) {
	rest, ok := strings.CutPrefix(path, CredentialsPrefix)
	if !ok {
		return path, nil
	}
	dir := os.Getenv(CredentialsDirEnv)
	if dir == "" {
		return "", fmt.Errorf("%s %s: %s is not set: it is set by systemd for a service with LoadCredential= "+
			"(deploy/systemd/backupcycle-worker.service); where the worker runs otherwise, give the file's own path", key, path, CredentialsDirEnv)
	}
	return filepath.Join(dir, rest), nil
}

// inCredentialsDir reports whether path names a file directly in
// $CREDENTIALS_DIRECTORY, where systemd writes a service's credentials.
func inCredentialsDir(path string) bool {
	dir := os.Getenv(CredentialsDirEnv)
	return dir != "" && filepath.IsAbs(dir) && filepath.Dir(filepath.Clean(path)) == filepath.Clean(dir)
}

// fileKind names what a non-regular file is, for messages.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}
