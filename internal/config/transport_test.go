package config

import (
	"errors"
	"strings"
	"testing"
)

// Left out, the settings of every connection are the safe ones: SQL Server
// sessions encrypted end to end with the certificate checked, SMB sessions
// signed. base sets none of them, so it loads without a warning.
func TestTransportDefaultsAreSafe(t *testing.T) {
	c, err := Parse([]byte(base), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range c.SQLInstances {
		if in.Encrypt != "mandatory" || in.TrustServerCertificate {
			t.Errorf("%s: encrypt %q, trust_server_certificate %v; want mandatory and false", in.Name, in.Encrypt, in.TrustServerCertificate)
		}
	}
	if s := c.BackupServers[1].SMB; s == nil || !s.RequireSigning {
		t.Errorf("bak02 smb: %+v, want require_signing true by default", s)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings %v, want none", c.Warnings)
	}
}

// A setting that sends data in clear, or trusts any certificate, loads with
// a warning at its line that names the instance, the address and the fix;
// towards a loopback address, where nothing crosses a network, it loads
// quietly.
func TestTransportWarnings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		yaml  func(t *testing.T) string
		line  int
		path  string
		want  string
		quiet func(t *testing.T) string // the same towards a loopback address: no warning
	}{
		{
			name: "SQL encrypt disable",
			yaml: func(t *testing.T) string { return sql01With(t, "    encrypt: disable\n") },
			line: lUser + 1, path: "sql_instances[0].encrypt",
			want: "sql_instances[0] (sql01): encrypt: disable sends the login's password and every statement and result in clear to sql01:1433",
			quiet: func(t *testing.T) string {
				return strings.Replace(sql01With(t, "    encrypt: disable\n"), "address: sql01:1433", "address: 127.0.0.1:1433", 1)
			},
		},
		{
			name: "SQL encrypt optional",
			yaml: func(t *testing.T) string { return sql01With(t, "    encrypt: \"false\"\n") },
			line: lUser + 1, path: "sql_instances[0].encrypt",
			want: "sql_instances[0] (sql01): encrypt: optional encrypts the login only",
			quiet: func(t *testing.T) string {
				return strings.Replace(sql01With(t, "    encrypt: optional\n"), "address: sql01:1433", "address: localhost:1433", 1)
			},
		},
		{
			name: "SQL trust_server_certificate",
			yaml: func(t *testing.T) string { return sql01With(t, "    trust_server_certificate: true\n") },
			line: lUser + 1, path: "sql_instances[0].trust_server_certificate",
			want: "sql_instances[0] (sql01): trust_server_certificate: true accepts any certificate",
			quiet: func(t *testing.T) string {
				return strings.Replace(sql01With(t, "    trust_server_certificate: true\n"), "address: sql01:1433", "address: '[::1]:1433'", 1)
			},
		},
		{
			name: "Temporal without TLS",
			yaml: func(t *testing.T) string { return "temporal:\n  address: temporal.corp:7233\n" + base },
			line: 2, path: "temporal.address",
			want:  "temporal: address temporal.corp:7233 is not a loopback address and temporal.tls is not set",
			quiet: func(t *testing.T) string { return "temporal:\n  address: 127.0.0.1:7233\n" + base },
		},
		{
			name: "SMB signing off",
			yaml: func(t *testing.T) string {
				return edit(t, "{user: backup, password_env: BAK_PW}", "{user: backup, password_env: BAK_PW, require_signing: false}")
			},
			line: lBak02Loc + 1, path: "backup_servers[1].smb.require_signing",
			want: "backup_servers[1] (bak02).smb: require_signing: false lets the worker use unsigned SMB sessions with bak02",
			quiet: func(t *testing.T) string {
				return strings.Replace(edit(t, "{user: backup, password_env: BAK_PW}", "{user: backup, password_env: BAK_PW, require_signing: false}"),
					"smb://bak02/", "smb://127.0.0.1:4451/", 1)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml(t)), "config.yaml")
			if err != nil {
				t.Fatalf("a warning must not stop the load: %v", err)
			}
			if len(c.Warnings) != 1 {
				t.Fatalf("warnings %v, want one", c.Warnings)
			}
			w := c.Warnings[0]
			if w.Line != tc.line || w.Path != tc.path || !strings.Contains(w.Msg, tc.want) {
				t.Errorf("warning %s (path %s), want at line %d, path %s, containing %q", w.Error(), w.Path, tc.line, tc.path, tc.want)
			}
			q, err := Parse([]byte(tc.quiet(t)), "config.yaml")
			if err != nil || len(q.Warnings) != 0 {
				t.Errorf("towards a loopback address: warnings %v, err %v; want none", q.Warnings, err)
			}
		})
	}

	// With TLS, or with an API key (with which the SDK always uses TLS),
	// the Temporal connection is encrypted.
	for _, y := range []string{
		"temporal:\n  address: temporal.corp:7233\n  tls: {server_name: temporal.corp}\n",
		"temporal:\n  address: temporal.corp:7233\n  api_key_env: TEMPORAL_API_KEY\n",
	} {
		if c, err := Parse([]byte(y+base), "config.yaml"); err != nil || len(c.Warnings) != 0 {
			t.Errorf("%q: warnings %v, err %v; want none", y, c.Warnings, err)
		}
	}
}

// The worker cannot demand SMB 3 encryption: the server or share decides,
// and the worker encrypts whenever it is asked to. smb.encrypt: true would
// promise what nothing enforces, so it is refused with where to turn it on.
func TestSMBEncryptIsTheServersSetting(t *testing.T) {
	_, err := Parse([]byte(edit(t, "{user: backup, password_env: BAK_PW}", "{user: backup, password_env: BAK_PW, encrypt: true}")), "config.yaml")
	var es Errors
	if !errors.As(err, &es) || len(es) != 1 || es[0].Line != lBak02Loc+1 ||
		!strings.Contains(es[0].Msg, "backup_servers[1] (bak02).smb: encrypt: true cannot be enforced by the worker") ||
		!strings.Contains(es[0].Msg, "Set-SmbShare") || !strings.Contains(es[0].Msg, "smb encrypt = required") {
		t.Fatalf("got %v, want one error at line %d saying where encryption is turned on", err, lBak02Loc+1)
	}
	c, err := Parse([]byte(edit(t, "{user: backup, password_env: BAK_PW}", "{user: backup, password_env: BAK_PW, encrypt: false}")), "config.yaml")
	if err != nil || len(c.Warnings) != 0 {
		t.Errorf("encrypt: false (what the worker does anyway): %v, warnings %v", err, c.Warnings)
	}
}
