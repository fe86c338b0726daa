package mssql

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/microsoft/go-mssqldb/integratedauth"
	"github.com/microsoft/go-mssqldb/integratedauth/ntlm"
	"github.com/microsoft/go-mssqldb/msdsn"

	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// tlsInstance starts the emulator speaking TLS ("on": PRELOGIN ENCRYPT_ON,
// "strict": TDS 8.0, TLS first) with its generated certificate, and writes
// that certificate as a CA file with a name go-mssqldb's own certificate
// parameter would not accept (.crt).
func tlsInstance(t *testing.T, mode string) (*sqlsim.Instance, string) {
	t.Helper()
	root := t.TempDir()
	in, err := sqlsim.New(sqlsim.Config{Name: "sql01", DataDir: filepath.Join(root, "sql01"),
		Logins: map[string]string{"sa": "pw"}, TLS: mode})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	ca := filepath.Join(root, "sql01-ca.crt")
	pem := in.CertificatePEM()
	if mode != "" && len(pem) == 0 {
		t.Fatalf("emulator with TLS %q has no certificate", mode)
	}
	if err := os.WriteFile(ca, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return in, ca
}

func tlsTarget(in *sqlsim.Instance, encrypt string) Target {
	return Target{Instance: "sql01", Address: in.Addr(), User: "sa", Password: "pw", Database: "master",
		Encrypt: encrypt, ConnectTimeout: 5 * time.Second}
}

// openAndQuery opens t and runs a query on the session.
func openAndQuery(t *testing.T, tg Target) error {
	t.Helper()
	db, err := Open(testCtx(t), tg)
	if err != nil {
		return err
	}
	defer db.Close()
	lang, err := db.Language(testCtx(t))
	if err == nil && lang != EnglishLanguage {
		t.Errorf("language %q over TLS", lang)
	}
	return err
}

func TestTLSEncryptModes(t *testing.T) {
	on, onCA := tlsInstance(t, "on")
	strict, strictCA := tlsInstance(t, "strict")
	plain, _ := tlsInstance(t, "")
	with := func(tg Target, f func(*Target)) Target { f(&tg); return tg }

	for _, tc := range []struct {
		name string
		tg   Target
		want error // nil: connects and queries
		hint string
	}{
		{"mandatory, CA file", with(tlsTarget(on, "mandatory"), func(t *Target) { t.CAFile = onCA }), nil, ""},
		{"optional, CA file", with(tlsTarget(on, "optional"), func(t *Target) { t.CAFile = onCA }), nil, ""},
		{"mandatory, trust_server_certificate", with(tlsTarget(on, "mandatory"), func(t *Target) { t.TrustServerCertificate = true }), nil, ""},
		{"mandatory, CA file, certificate issued for the server name",
			with(tlsTarget(on, "mandatory"), func(t *Target) { t.CAFile, t.HostNameInCertificate = onCA, "sql01" }), nil, ""},
		{"mandatory, self-signed certificate not trusted", tlsTarget(on, "mandatory"), ErrInvalidTarget, "set ca_file"},
		// optional checks the certificate of the login's TLS as well: the
		// default mandatory refuses no server optional accepted.
		{"optional, self-signed certificate not trusted", tlsTarget(on, "optional"), ErrInvalidTarget, "set ca_file"},
		{"mandatory, certificate of another name",
			with(tlsTarget(on, "mandatory"), func(t *Target) { t.CAFile, t.HostNameInCertificate = onCA, "sql99.example.internal" }),
			ErrInvalidTarget, "hostname_in_certificate"},
		{"mandatory, another instance's CA",
			with(tlsTarget(on, "mandatory"), func(t *Target) { t.CAFile = strictCA }), ErrInvalidTarget, "set ca_file"},
		{"strict, CA file", with(tlsTarget(strict, "strict"), func(t *Target) { t.CAFile = strictCA }), nil, ""},
		{"strict, not trusted", tlsTarget(strict, "strict"), ErrInvalidTarget, "set ca_file"},
		// strict ignores trust_server_certificate: it always verifies.
		{"strict, trust_server_certificate", with(tlsTarget(strict, "strict"), func(t *Target) { t.TrustServerCertificate = true }),
			ErrInvalidTarget, "set ca_file"},
		{"mandatory against a server without TLS", tlsTarget(plain, "mandatory"), ErrInvalidTarget, "a test server without TLS needs encrypt: disable"},
		{"disable against a server that requires TLS", tlsTarget(on, "disable"), ErrInvalidTarget, "server requires encryption"},
		{"CA file that is gone", with(tlsTarget(on, "mandatory"), func(t *Target) { t.CAFile = onCA + ".old" }), ErrInvalidTarget, "ca_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := openAndQuery(t, tc.tg)
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("want a working session, got %v", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("got %v, want %v", err, tc.want)
			case tc.want != nil && !strings.Contains(err.Error(), tc.hint):
				t.Errorf("error %q should say %q", err, tc.hint)
			}
			if err != nil && strings.Contains(err.Error(), "pw") && strings.Contains(err.Error(), "sa:") {
				t.Errorf("error leaks the DSN: %v", err)
			}
		})
	}

	// A client that does not speak TLS first cannot talk to a strict server.
	if err := openAndQuery(t, with(tlsTarget(strict, "mandatory"), func(t *Target) { t.CAFile = strictCA })); err == nil {
		t.Error("TDS 7 client connected to a TDS 8.0 strict server")
	}
	// A long statement's own connection is encrypted the same way.
	db, err := Open(testCtx(t), with(tlsTarget(on, "mandatory"), func(t *Target) { t.CAFile = onCA }))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Run(testCtx(t), "SET LANGUAGE", "SET LANGUAGE Deutsch", nil)
	if err != nil || len(res.Messages) == 0 || res.Messages[0].Number != 5703 {
		t.Errorf("statement over TLS: %+v, %v; want message 5703", res.Messages, err)
	}
}

// A user written DOMAIN\user logs in with NTLM (go-mssqldb's integrated
// authenticator), any other user with SQL authentication.
func TestWindowsLoginUsesNTLM(t *testing.T) {
	auth := func(user string) any {
		t.Helper()
		dsn, err := Target{Address: "sql01:1433", User: user, Password: "pw", Encrypt: "disable"}.dsn()
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := msdsn.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		a, err := integratedauth.GetIntegratedAuthenticator(cfg)
		if err != nil {
			t.Fatalf("authenticator for %q: %v", user, err)
		}
		return a
	}
	if a, ok := auth(`CORP\svc-backup`).(*ntlm.Auth); !ok || a.Domain != "CORP" || a.UserName != "svc-backup" || a.Password != "pw" {
		t.Errorf(`CORP\svc-backup: authenticator %#v, want NTLM for user svc-backup of domain CORP`, auth(`CORP\svc-backup`))
	}
	if a := auth("backup"); a != nil {
		t.Errorf("SQL login backup: authenticator %T, want none (SQL authentication)", a)
	}

	// On the wire: the Windows login arrives as integrated authentication,
	// which a server that does not trust the domain refuses with 18452; the
	// SQL login goes through.
	_, _, target := startScripted(t, nil)
	win := target
	win.User = `CORP\sa`
	_, err := Open(testCtx(t), win)
	var f *Failure
	if !errors.As(err, &f) || !errors.Is(err, ErrLoginFailed) || len(f.Errors) == 0 || f.Errors[0].Number != 18452 {
		t.Errorf(`CORP\sa: %v, want the server's 18452 refusal of an integrated (NTLM) login`, err)
	}
	db, err := Open(testCtx(t), target)
	if err != nil {
		t.Fatalf("SQL login: %v", err)
	}
	db.Close()
}
