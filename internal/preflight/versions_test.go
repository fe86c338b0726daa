package preflight

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// versionSite is a source instance sql01 with database Shop and a
// verification instance sqlverify, each an emulator with its own
// configuration (a version), both with sysadmin sa; the configuration
// verifies Shop's copies on sqlverify. Everything else about the site is
// right: both instances reach the backup servers' directory (the worker's
// location), and the verification instance's restore directories exist.
func versionSite(t *testing.T, src, ver func(*sqlsim.Config)) (*sqlsim.Instance, *sqlsim.Instance, *config.Config) {
	t.Helper()
	bak, restore := t.TempDir(), t.TempDir()
	for _, d := range []string{"data", "log"} {
		if err := os.Mkdir(filepath.Join(restore, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shares := map[string]string{`\\bak01\backup`: bak, `\\bak02\backup`: bak}
	start := func(name string, tweak func(*sqlsim.Config), extra map[string]string) *sqlsim.Instance {
		c := sqlsim.Config{Name: name, DataDir: t.TempDir(), Logins: map[string]string{"sa": srcPw}, Shares: maps.Clone(shares)}
		maps.Copy(c.Shares, extra)
		if tweak != nil {
			tweak(&c)
		}
		return sitetest.StartConfig(t, c)
	}
	s, v := start("sql01", src, nil), start("sqlverify", ver, map[string]string{`R:\`: restore})
	if err := s.CreateDatabase(sqlsim.DatabaseSpec{Name: "Shop", Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	t.Setenv(srcPwEnv, srcPw)
	return s, v, shopConfigAt(t, "sql01", s.Addr(), "sa", v.Addr(), bak)
}

// findDB is the check of that name about database Shop of sql01.
func findDB(t *testing.T, r *Report, name, text string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Kind == KindDatabase && c.Instance == "sql01" && c.Database == "Shop" && c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q of sql01/Shop in the report:\n%s", name, text)
	return Check{}
}

// A verification instance older than the source cannot restore its
// backups: preflight names both versions and the fix; one of the same
// version passes.
func TestVerificationInstanceOlderThanTheSource(t *testing.T) {
	_, _, cfg := versionSite(t, nil, func(c *sqlsim.Config) { c.ProductVersion = "15.0.4385.2" })
	r, text := runPreflight(t, cfg, "")
	c := findDB(t, r, "restores on sqlverify", text)
	if c.Status != Missing || !strings.Contains(c.Detail, "16.0.4135.4") || !strings.Contains(c.Detail, "15.0.4385.2") ||
		!strings.Contains(c.Fix, "upgrade") || r.OK {
		t.Errorf("2022 source, 2019 verification instance: %+v (report OK %v)\n%s", c, r.OK, text)
	}
	if !strings.Contains(text, c.Fix) {
		t.Errorf("the text report does not print the fix:\n%s", text)
	}

	_, _, cfg = versionSite(t, nil, nil)
	r, text = runPreflight(t, cfg, "")
	if c := findDB(t, r, "restores on sqlverify", text); c.Status != OK || !r.OK {
		t.Errorf("same versions: %+v\n%s", c, text)
	}
}

// A TDE database: the verification instance must hold its certificate.
// Preflight names the thumbprint, the certificate and the two statements
// that install it; the certificate's private key never exported is a
// warning; once exported and imported, everything passes.
func TestTDECertificateOnTheVerificationInstance(t *testing.T) {
	src, ver, cfg := versionSite(t, nil, nil)
	cert, err := src.CreateCertificate("TDECert", "TDE certificate")
	if err != nil {
		t.Fatal(err)
	}
	if err := src.EnableTDE("Shop", "TDECert"); err != nil {
		t.Fatal(err)
	}
	r, text := runPreflight(t, cfg, "")
	c := findDB(t, r, "TDE certificate on sqlverify", text)
	backup, _ := tsql.BackupCertificate("TDECert", "<password>")
	create, _ := tsql.CreateCertificateFromFile("TDECert", "<password>")
	if c.Status != Missing || !strings.Contains(c.Detail, cert.ThumbprintText()) || !strings.Contains(c.Detail, "TDECert") ||
		!strings.Contains(c.Fix, backup) || !strings.Contains(c.Fix, create) || r.OK {
		t.Errorf("verification instance without the certificate: %+v\n%s", c, text)
	}
	if c := findDB(t, r, "TDE certificate backup", text); c.Status != Warn || !strings.Contains(c.Fix, backup) {
		t.Errorf("certificate never exported: %+v", c)
	}

	exported, err := src.ExportCertificate("TDECert")
	if err != nil {
		t.Fatal(err)
	}
	if err := ver.ImportCertificate(exported); err != nil {
		t.Fatal(err)
	}
	r, text = runPreflight(t, cfg, "")
	// Both instances are reached as sa here: its sysadmin is the only
	// warning left.
	if c := findDB(t, r, "TDE certificate on sqlverify", text); c.Status != OK || !r.OK || r.Warnings != 2 ||
		!strings.Contains(text, "WARN     least privilege: sysadmin       sa is sysadmin") {
		t.Errorf("certificate installed: %+v, missing %d, warnings %d\n%s", c, r.Missing, r.Warnings, text)
	}

	// A source login that may not read sys.dm_database_encryption_keys
	// (the minimal grants of SQL Server 2022 hold VIEW SERVER PERFORMANCE
	// STATE, not VIEW SERVER SECURITY STATE) cannot tell the thumbprint.
	if err := src.SetLogin(sqlsim.Login{Name: srcLogin, Password: srcPw,
		Server:    []string{tsql.PermCreateAnyDatabase, tsql.PermViewServerPerformanceState, tsql.PermAlterAnyConnection},
		Databases: map[string][]string{"Shop": {tsql.RoleDBBackupOperator}}}); err != nil {
		t.Fatal(err)
	}
	cfg.SQLInstances[0].User = srcLogin
	r, text = runPreflight(t, cfg, "")
	if c := findDB(t, r, "TDE certificate on sqlverify", text); c.Status != Warn ||
		!strings.Contains(c.Fix, "GRANT VIEW SERVER SECURITY STATE TO [bk_src];") {
		t.Errorf("source login without VIEW SERVER SECURITY STATE: %+v\n%s", c, text)
	}
}

// TDE with compression on a SQL Server 2016 build before SP1 CU4: a
// warning naming the build to patch to.
func TestTDECompressionOnAnOld2016Build(t *testing.T) {
	src, ver, cfg := versionSite(t, func(c *sqlsim.Config) { c.ProductVersion = "13.0.4435.0" },
		func(c *sqlsim.Config) { c.ProductVersion = "13.0.4435.0" })
	cert, err := src.CreateCertificate("TDECert", "TDE certificate")
	if err != nil {
		t.Fatal(err)
	}
	if err := src.EnableTDE("Shop", "TDECert"); err != nil {
		t.Fatal(err)
	}
	if err := ver.ImportCertificate(cert); err != nil {
		t.Fatal(err)
	}
	r, text := runPreflight(t, cfg, "")
	if c := findDB(t, r, "TDE and backup compression", text); c.Status != Warn || !strings.Contains(c.Detail, "13.0.4435.0") ||
		!strings.Contains(c.Fix, "SP1 CU4") {
		t.Errorf("TDE + compression on 2016 SP1 CU3: %+v\n%s", c, text)
	}
}
