package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/preflight"
	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// demoSite starts the site `make demo` runs (internal/devenv): the backup
// servers over Samba when it is installed, as the demo serves them, and
// its object store.
func demoSite(t *testing.T) *devenv.Site {
	t.Helper()
	// smbd switches to its share user, which must reach the state directory.
	dir, err := os.MkdirTemp("", "starter-preflight-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := devenv.Start(context.Background(), devenv.Options{StateDir: dir, DatabaseSize: devenv.MinDatabaseSize, ObjectStore: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func secretsOf(t *testing.T, site *devenv.Site) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(site.ConfigFile), "secrets", "*.password"))
	keys, _ := filepath.Glob(filepath.Join(filepath.Dir(site.ConfigFile), "secrets", "*.secret"))
	files = append(files, keys...)
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.TrimSpace(string(b)))
	}
	if len(out) == 0 {
		t.Fatal("the demo site has no password files")
	}
	return out
}

// `starter preflight` against the demo's site: a clean report, exit 0, as
// text and as JSON, no password in either.
func TestPreflightDemoSiteIsClean(t *testing.T) {
	site := demoSite(t)
	code, out, errs := runStarter(t, "preflight", "--config", site.ConfigFile)
	if code != exitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q, report:\n%s", code, errs, out)
	}
	for _, want := range []string{"SQL instance sql01", "database sql01/Sales", "SQL instance sqlverify", "backup server bak01",
		"backup server bak02", "object store " + devenv.ObjectStore, "OK       least privilege: delete the bucket",
		"nothing missing, 0 warnings"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "MISSING") || strings.Contains(out, "WARN") {
		t.Errorf("the demo site is not clean:\n%s", out)
	}
	if sambatest.Installed() == nil && len(site.SMB) == 0 {
		t.Errorf("Samba is installed but the demo site does not serve the backup servers over SMB: %s", site.SambaNote)
	}
	if len(site.SMB) > 0 && !strings.Contains(out, "(smb://") {
		t.Errorf("Samba serves the backup servers but the report does not check them over SMB:\n%s", out)
	}

	code, js, errs := runStarter(t, "preflight", "--config", site.ConfigFile, "--database", devenv.Database, "--json")
	if code != exitOK || errs != "" {
		t.Fatalf("--json: exit %d, stderr %q", code, errs)
	}
	var r preflight.Report
	checkJSONStyle(t, "preflight --json", js)
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatalf("--json is not JSON: %v\n%s", err, js)
	}
	if !r.OK || r.Missing != 0 || len(r.Checks) < 20 {
		t.Errorf("--json: ok %v, missing %d, %d checks", r.OK, r.Missing, len(r.Checks))
	}
	for _, s := range secretsOf(t, site) {
		if strings.Contains(out+js, s) {
			t.Errorf("the report prints a password")
		}
	}
}

// A login that cannot log in is MISSING: exit 1, one line on stderr, the
// report naming the password reference to check.
func TestPreflightMissingExits1(t *testing.T) {
	site := demoSite(t)
	dir := t.TempDir()
	wrong := filepath.Join(dir, "wrong.password")
	if err := os.WriteFile(wrong, []byte("Not-The-Password-42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(site.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(filepath.Dir(site.ConfigFile), "secrets", "sql.password")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(string(text), good, wrong)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runStarter(t, "preflight", "--config", cfg)
	if code != exitFail {
		t.Fatalf("exit %d, want %d:\n%s", code, exitFail, out)
	}
	if !strings.HasPrefix(errs, "starter: preflight: ") || strings.Count(errs, "\n") != 1 {
		t.Errorf("stderr %q, want one line", errs)
	}
	if !strings.Contains(out, "MISSING  login") || !strings.Contains(out, "file "+wrong) {
		t.Errorf("report:\n%s", out)
	}
	if strings.Contains(out+errs, "Not-The-Password-42") {
		t.Error("the report prints the password")
	}
	code, _, errs = runStarter(t, "preflight", "--config", site.ConfigFile, "--database", "Nope")
	if code != exitFail || !strings.Contains(errs, `"Nope"`) || strings.Count(errs, "\n") != 1 {
		t.Errorf("unknown database: exit %d, stderr %q", code, errs)
	}
}

func TestPreflightUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"preflight"}, "starter preflight: --config FILE is required"},
		{[]string{"preflight", "--config", site, "--instance", "sql01"}, "--instance needs --database"},
		{[]string{"preflight", "--config", site, "stray"}, `unexpected argument "stray"`},
	} {
		code, _, errs := runStarter(t, tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}

// A source login that lacks one grant (VIEW SERVER PERFORMANCE STATE):
// `starter preflight` prints that permission MISSING with the GRANT that
// fixes it, nothing else missing, and exits 1.
func TestPreflightMissingGrantPrintsIt(t *testing.T) {
	site := demoSite(t)
	pw, err := os.ReadFile(filepath.Join(filepath.Dir(site.ConfigFile), "secrets", "sql.password"))
	if err != nil {
		t.Fatal(err)
	}
	// Everything the source needs but VIEW SERVER PERFORMANCE STATE (the
	// sequence table is created by the first cycle: ALTER on Sales).
	if err := site.Source.SetLogin(sqlsim.Login{Name: "bk_src", Password: strings.TrimSpace(string(pw)),
		Server: []string{tsql.PermCreateAnyDatabase, tsql.PermAlterAnyConnection},
		Databases: map[string][]string{devenv.Database: {tsql.RoleDBBackupOperator, tsql.PermSelect, tsql.PermUpdate, "ALTER"},
			"msdb": {tsql.PermSelect}}}); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(site.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	// The source's entry comes first: its user becomes the restricted login.
	restricted := strings.Replace(string(text), "user: "+devenv.ProductLogin, "user: bk_src", 1)
	if restricted == string(text) {
		t.Fatalf("the demo configuration has no `user: %s` to restrict", devenv.ProductLogin)
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(restricted), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runStarter(t, "preflight", "--config", cfg)
	if code != exitFail || strings.Count(errs, "\n") != 1 {
		t.Fatalf("exit %d (want %d), stderr %q:\n%s", code, exitFail, errs, out)
	}
	for _, want := range []string{"MISSING  VIEW SERVER PERFORMANCE STATE", "GRANT VIEW SERVER PERFORMANCE STATE TO [bk_src];", "1 MISSING"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// `starter preflight` on a misconfigured estate (sitetest.Estate): exit 1,
// and the report names every problem of sitetest.EstateProblems with its
// fix, and says how many there are.
func TestPreflightMisconfiguredEstate(t *testing.T) {
	e := sitetest.NewEstate(t)
	cfg := filepath.Join(t.TempDir(), "estate.yaml")
	if err := os.WriteFile(cfg, []byte(e.YAML), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runStarter(t, "preflight", "--config", cfg)
	if code != exitFail || !strings.Contains(errs, "missing") {
		t.Fatalf("exit %d, stderr %q; want %d:\n%s", code, errs, exitFail, out)
	}
	for _, p := range sitetest.EstateProblems {
		if !strings.Contains(out, "MISSING  "+p.Check) {
			t.Errorf("the report does not name %s as MISSING", p.Check)
		}
		for _, w := range append(p.Detail, p.Fix...) {
			if !strings.Contains(out, w) {
				t.Errorf("%s: the report does not say %q", p.Check, w)
			}
		}
	}
	if want := fmt.Sprintf("%d MISSING", len(sitetest.EstateProblems)); !strings.Contains(out, want) {
		t.Errorf("the summary does not say %q:\n%s", want, out)
	}
	if t.Failed() {
		t.Log(out)
	}
}
