package config

import (
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/testcert"
)

// sql01With is base with extra keys under sql_instances[0] (after user:).
func sql01With(t *testing.T, keys string) string {
	return edit(t, "    user: backup\n    password_env", "    user: backup\n"+keys+"    password_env")
}

func TestSQLInstanceEncryptModes(t *testing.T) {
	for in, want := range map[string]string{
		"": "mandatory", "strict": "strict", "mandatory": "mandatory", "optional": "optional", "disable": "disable",
		`"true"`: "mandatory", `"false"`: "optional", "Mandatory": "mandatory",
	} {
		src := base
		if in != "" {
			src = sql01With(t, "    encrypt: "+in+"\n")
		}
		c, err := Parse([]byte(src), "config.yaml")
		if err != nil {
			t.Errorf("encrypt %s: %v", in, err)
			continue
		}
		if got := c.SQLInstances[0].Encrypt; got != want {
			t.Errorf("encrypt %s: got %q, want %q", in, got, want)
		}
	}
}

func TestSQLInstanceCAFile(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), testcert.Write(t, t.TempDir()).CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	// A relative ca_file is relative to the config file; any extension.
	c, err := Parse([]byte(sql01With(t, "    encrypt: strict\n    ca_file: ca.crt\n")), cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.SQLInstances[0].CAFile; got != filepath.Join(dir, "ca.crt") {
		t.Errorf("ca_file = %q, want it resolved next to the config file", got)
	}

	notPEM := filepath.Join(dir, "key.der")
	if err := os.WriteFile(notPEM, []byte{0x30, 0x82, 0x01}, 0o600); err != nil {
		t.Fatal(err)
	}
	badCert := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(badCert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, keys, want string }{
		{"missing file", "    ca_file: nope.pem\n", "ca_file: open " + filepath.Join(dir, "nope.pem")},
		{"not PEM", "    ca_file: key.der\n", "no PEM certificate"},
		{"certificate that does not parse", "    ca_file: bad.pem\n", "certificate 1 does not parse"},
		{"ca_file and trust", "    ca_file: ca.crt\n    trust_server_certificate: true\n", "trust_server_certificate: true skips the check ca_file is for"},
		{"strict and trust", "    encrypt: strict\n    trust_server_certificate: true\n", "strict always verifies"},
		{"disable with TLS settings", "    encrypt: disable\n    hostname_in_certificate: sql01.corp\n", "encrypt: disable sends no TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(sql01With(t, tc.keys)), cfgFile)
			var es Errors
			if !errors.As(err, &es) || len(es) != 1 {
				t.Fatalf("got %v, want one config error", err)
			}
			if !strings.Contains(es[0].Msg, tc.want) || !strings.Contains(es[0].Msg, "sql_instances[0] (sql01)") || es[0].Line == 0 {
				t.Errorf("got %s, want a line-numbered error naming sql_instances[0] (sql01) and %q", es[0].Error(), tc.want)
			}
		})
	}
}

func TestSQLInstanceWindowsLogin(t *testing.T) {
	c, err := Parse([]byte(edit(t, "    user: backup\n    password_env", `    user: 'CORP\svc-backup'`+"\n    password_env")), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.SQLInstances[0].User; got != `CORP\svc-backup` {
		t.Errorf("user = %q", got)
	}
	for _, u := range []string{`'\svc'`, `'CORP\'`, `'A\B\C'`} {
		_, err := Parse([]byte(edit(t, "    user: backup\n    password_env", "    user: "+u+"\n    password_env")), "config.yaml")
		if err == nil || !strings.Contains(err.Error(), `a Windows login is written DOMAIN\user`) {
			t.Errorf("user %s: %v, want the DOMAIN\\user explanation", u, err)
		}
	}
}
