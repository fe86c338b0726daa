package client

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/testcert"
)

func TestOptionsAPIKeyFromEnv(t *testing.T) {
	t.Setenv("BC_TEST_KEY", "")
	_, err := Options(config.Temporal{APIKeyEnv: "BC_TEST_KEY"}, nil)
	if err == nil || !strings.Contains(err.Error(), "BC_TEST_KEY is empty or unset") || !strings.Contains(err.Error(), "export BC_TEST_KEY=") {
		t.Fatalf("unset key: err = %v", err)
	}
	t.Setenv("BC_TEST_KEY", "s3cret-value")
	opts, err := Options(config.Temporal{APIKeyEnv: "BC_TEST_KEY"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Credentials == nil || opts.HostPort != DefaultAddress || opts.Namespace != DefaultNamespace {
		t.Errorf("options = %+v", opts)
	}
}

func TestOptionsTLSFiles(t *testing.T) {
	dir := t.TempDir()
	_, err := Options(config.Temporal{TLS: &config.TLS{CAFile: filepath.Join(dir, "ca.pem")}}, nil)
	if err == nil || !strings.Contains(err.Error(), "temporal.tls.ca_file") || !strings.Contains(err.Error(), "ca.pem") {
		t.Errorf("missing CA: err = %v", err)
	}
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not a cert"), 0o600)
	_, err = Options(config.Temporal{TLS: &config.TLS{CAFile: junk}}, nil)
	if err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("junk CA: err = %v", err)
	}
	_, err = Options(config.Temporal{TLS: &config.TLS{CertFile: junk}}, nil)
	if err == nil || !strings.Contains(err.Error(), "cert_file and key_file go together") {
		t.Errorf("cert without key: err = %v", err)
	}

	c := testcert.Write(t, dir)
	opts, err := Options(config.Temporal{TLS: &config.TLS{CAFile: c.CertFile, CertFile: c.CertFile, KeyFile: c.KeyFile, ServerName: "temporal.example"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tc := opts.ConnectionOptions.TLS
	if tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "temporal.example" {
		t.Errorf("tls config = %+v", tc)
	}
}

func TestMissingSearchAttributesErrorSaysHowToAdd(t *testing.T) {
	e := &MissingSearchAttributesError{Namespace: "prod",
		Missing: map[string]enumspb.IndexedValueType{
			"BackupSequence": enumspb.INDEXED_VALUE_TYPE_INT,
			"BackupStep":     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		},
		Wrong: map[string]enumspb.IndexedValueType{"BackupServer": enumspb.INDEXED_VALUE_TYPE_TEXT},
	}
	msg := e.Error()
	for _, want := range []string{
		`namespace "prod" lacks search attributes BackupSequence (Int), BackupStep (Keyword)`,
		"temporal operator search-attribute create --namespace prod --name BackupSequence --type Int",
		"--name BackupStep --type Keyword",
		"BackupServer on namespace \"prod\" has type Text, backupcycle needs Keyword",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if typeName(enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST) != "KeywordList" {
		t.Errorf("typeName(KEYWORD_LIST) = %q", typeName(enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST))
	}
}
