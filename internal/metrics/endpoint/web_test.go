package endpoint

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/backupcycle/backupcycle/internal/testcert"
)

// webConfig writes a Prometheus web configuration file (the exporter
// toolkit's format) serving TLS with a fresh certificate for 127.0.0.1 and
// basic authentication of user prometheus with password, and returns its
// path and the certificate pool a client trusts it with.
func webConfig(t *testing.T, password string) (string, *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	cert := testcert.Write(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	// Relative paths are relative to the web configuration file.
	cfg := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(cfg, []byte("tls_server_config:\n  cert_file: "+filepath.Base(cert.CertFile)+"\n  key_file: "+filepath.Base(cert.KeyFile)+"\n"+
		"basic_auth_users:\n  prometheus: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, cert.Pool()
}

// With a web configuration, /metrics is served over TLS to a client that
// sends the configured user and password, and refused (401) to one that
// does not; plain HTTP gets no metrics.
func TestEndpointTLSAndBasicAuth(t *testing.T) {
	const password = "scrape-Pa55"
	cfg, pool := webConfig(t, password)
	e := newEndpoint(t)
	url, err := e.ListenWeb("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "https://127.0.0.1:") || !strings.HasSuffix(url, Path) {
		t.Fatalf("URL %q, want https://127.0.0.1:PORT%s", url, Path)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(user, pw string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("", ""); code != http.StatusUnauthorized {
		t.Errorf("without credentials: %d, want 401", code)
	}
	if code, _ := get("prometheus", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("with a wrong password: %d, want 401", code)
	}
	if code, body := get("prometheus", password); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("with the password: %d %.200s, want 200 and the metrics", code, body)
	}
	plain := strings.Replace(url, "https://", "http://", 1)
	if resp, err := http.Get(plain); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "go_goroutines") {
			t.Errorf("plain HTTP: %d %.200s, want no metrics", resp.StatusCode, body)
		}
	}
}

// A web configuration that does not load stops the start with its name and
// the cause, before anything listens.
func TestEndpointBadWebConfig(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(bad, []byte("tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(dir, "absent.yml"), bad} {
		e := newEndpoint(t)
		_, err := e.ListenWeb("127.0.0.1:0", f)
		if err == nil || !strings.Contains(err.Error(), "--metrics-web-config "+f) {
			t.Errorf("%s: %v, want an error naming --metrics-web-config and the file", f, err)
		}
	}
}
