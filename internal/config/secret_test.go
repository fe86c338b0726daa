package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveSecret(t *testing.T) {
	const value = "Pa55-w0rd"
	dir := t.TempDir()
	good := filepath.Join(dir, "pw")
	if err := os.WriteFile(good, []byte(value+"\nsecond line ignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BC_TEST_PW", value)
	t.Setenv("BC_TEST_EMPTY", "")

	cases := []struct {
		name   string
		ref    SecretRef
		want   string
		errHas string // the error names the variable / file and the fix
		errNot string
	}{
		{name: "env", ref: SecretRef{Env: "BC_TEST_PW"}, want: value},
		{name: "file, first line", ref: SecretRef{File: good}, want: value},
		{name: "env unset", ref: SecretRef{Env: "BC_TEST_UNSET_VAR"}, errHas: "environment variable BC_TEST_UNSET_VAR is not set: export it"},
		{name: "env empty", ref: SecretRef{Env: "BC_TEST_EMPTY"}, errHas: "environment variable BC_TEST_EMPTY is empty"},
		{name: "file missing", ref: SecretRef{File: filepath.Join(dir, "nope")}, errHas: filepath.Join(dir, "nope")},
		{name: "file empty", ref: SecretRef{File: empty}, errHas: "password_file " + empty + " is empty"},
		{name: "both", ref: SecretRef{Env: "BC_TEST_PW", File: good}, errHas: "keep one"},
		{name: "none", ref: SecretRef{}, errHas: "no password_env or password_file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ResolveSecret(c.ref)
			if c.errHas == "" {
				if err != nil || got != c.want {
					t.Fatalf("got %q, %v; want %q", got, err, c.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, got %q", got)
			}
			if !errors.Is(err, ErrSecretUnavailable) || !strings.Contains(err.Error(), c.errHas) {
				t.Errorf("error %q: want ErrSecretUnavailable containing %q", err, c.errHas)
			}
			if strings.Contains(err.Error(), value) {
				t.Errorf("error leaks the secret: %v", err)
			}
		})
	}
	if v, err := ResolveEnv("BC_TEST_PW"); err != nil || v != value {
		t.Errorf("ResolveEnv: %v", err)
	}
	if v, err := (SecretRef{File: good}).Resolve(); err != nil || v != value {
		t.Errorf("Resolve: %v", err)
	}
	if s := (SecretRef{Env: "X"}).String(); s != "env X" {
		t.Errorf("String() = %q", s)
	}
}
