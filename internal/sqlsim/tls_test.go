package sqlsim

import (
	"bytes"
	"database/sql"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	mssql "github.com/microsoft/go-mssqldb"
)

// tapProxy forwards 127.0.0.1 connections to target and keeps every byte
// both ways, to prove what travelled in clear.
type tapProxy struct {
	ln   net.Listener
	mu   sync.Mutex
	seen bytes.Buffer
}

func newTap(t *testing.T, target string) *tapProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tapProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			pipe := func(dst, src net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if n > 0 {
						p.mu.Lock()
						p.seen.Write(buf[:n])
						p.mu.Unlock()
						if _, werr := dst.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				dst.Close()
				src.Close()
			}
			go pipe(s, c)
			go pipe(c, s)
		}
	}()
	return p
}

// saw reports whether s travelled in clear (as UTF-16LE, how TDS sends
// text, or as bytes).
func (p *tapProxy) saw(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	var u16 []byte
	for _, r := range s {
		u16 = append(u16, byte(r), 0)
	}
	return bytes.Contains(p.seen.Bytes(), u16) || bytes.Contains(p.seen.Bytes(), []byte(s))
}

// dsn is a go-mssqldb DSN for sa at addr with extra parameters.
func dsn(addr string, params map[string]string) string {
	u := url.URL{Scheme: "sqlserver", User: url.UserPassword("sa", testPass), Host: addr}
	q := url.Values{}
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func ping(t *testing.T, dsn string) error {
	t.Helper()
	db, err := sql.Open("sqlserver", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got string
	if err := db.QueryRowContext(testCtx(t), "SELECT N'tls-marker-4711' -- "+strings.Repeat("x", 70000)).Scan(&got); err != nil {
		return err
	}
	if got != "tls-marker-4711" {
		t.Fatalf("answer %q", got)
	}
	return nil
}

// TestTLS: with Config.TLS "on" the login and everything after it travel
// over TLS (PRELOGIN ENCRYPT_ON/REQ) with a generated certificate that a
// client can trust as a CA file; "strict" is TDS 8.0; a client that cannot
// encrypt is refused.
func TestTLS(t *testing.T) {
	on := newEnv(t, func(c *Config) { c.TLS = "on" })
	strict := newEnv(t, func(c *Config) { c.TLS = "strict" })
	plain := newEnv(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "on.pem")
	if err := os.WriteFile(caFile, on.in.CertificatePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	strictCA := filepath.Join(dir, "strict.pem")
	if err := os.WriteFile(strictCA, strict.in.CertificatePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if plain.in.CertificatePEM() != nil {
		t.Fatal("an instance without TLS has a certificate")
	}
	trust := map[string]string{"encrypt": "true", "TrustServerCertificate": "true"}

	// In clear the query text is visible on the wire; over TLS it is not.
	for _, c := range []struct {
		name   string
		env    *testEnv
		params map[string]string
		clear  bool
	}{
		{"disable", plain, map[string]string{"encrypt": "disable"}, true},
		{"true+trust", on, trust, false},
		{"true+ca", on, map[string]string{"encrypt": "true", "certificate": caFile}, false},
		{"optional", on, map[string]string{"encrypt": "false", "TrustServerCertificate": "true"}, false}, // ENCRYPT_OFF answered with REQ
		{"strict+ca", strict, map[string]string{"encrypt": "strict", "certificate": strictCA}, false},
		{"strict+hostname", strict, map[string]string{"encrypt": "strict", "certificate": strictCA, "hostNameInCertificate": "localhost"}, false},
		{"strict on on", on, map[string]string{"encrypt": "strict", "certificate": caFile}, false},
	} {
		tap := newTap(t, c.env.in.Addr())
		if err := ping(t, dsn(tap.ln.Addr().String(), c.params)); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := tap.saw("tls-marker-4711"); got != c.clear {
			t.Errorf("%s: query text in clear on the wire: %v, want %v", c.name, got, c.clear)
		}
		if got := tap.saw(testPass); got {
			t.Errorf("%s: the password travelled in clear", c.name)
		}
	}
	// The instance's own DSN speaks its TLS mode.
	mustRun(t, on.db, "SELECT 1")
	mustRun(t, strict.db, "SELECT 1")

	// Refusals: a client that cannot encrypt, a certificate not trusted,
	// TDS 7.x against a strict server, TLS against a server without it.
	for _, c := range []struct {
		name   string
		env    *testEnv
		params map[string]string
	}{
		{"disable on on", on, map[string]string{"encrypt": "disable"}},
		{"disable on strict", strict, map[string]string{"encrypt": "disable"}},
		{"true on strict", strict, trust},
		{"wrong CA", on, map[string]string{"encrypt": "true", "certificate": strictCA}},
		{"untrusted", on, map[string]string{"encrypt": "true"}},
		{"true on plain", plain, trust},
		{"strict on plain", plain, map[string]string{"encrypt": "strict", "certificate": strictCA}},
		// TDS 8.0 always validates: go-mssqldb ignores TrustServerCertificate
		// with encrypt=strict, so a self-signed certificate needs its CA file.
		{"strict+trust", strict, map[string]string{"encrypt": "strict", "TrustServerCertificate": "true"}},
	} {
		err := ping(t, dsn(c.env.in.Addr(), c.params))
		var me mssql.Error
		if err == nil || errors.As(err, &me) {
			t.Errorf("%s: %v, want a connection error", c.name, err)
		}
	}
	if _, err := New(Config{DataDir: t.TempDir(), TLS: "maybe"}); err == nil {
		t.Error("TLS \"maybe\" was accepted")
	}
	// Restart keeps serving TLS with the same certificate.
	before := on.in.CertificatePEM()
	if err := on.in.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := ping(t, dsn(on.in.Addr(), map[string]string{"encrypt": "true", "certificate": caFile})); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if !bytes.Equal(before, on.in.CertificatePEM()) {
		t.Error("the certificate changed across a restart")
	}
}
