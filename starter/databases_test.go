package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	_ "github.com/microsoft/go-mssqldb" // the "sqlserver" driver

	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

const selPwEnv = "STARTER_DATABASES_TEST_PW"

// selectionSite is one emulated source instance with a databases:
// selection, and the config file that names it.
func selectionSite(t *testing.T, selection string) (*sqlsim.Instance, string) {
	t.Helper()
	const pw = "Sel3ction!pw"
	in, err := sqlsim.New(sqlsim.Config{Name: "sql01", ListenAddr: "127.0.0.1:0", DataDir: t.TempDir(), Logins: map[string]string{"sa": pw}})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	for _, n := range []string{"Sales", "SalesEU", "DBA", "Scratch1", "Off"} {
		if err := in.CreateDatabase(sqlsim.DatabaseSpec{Name: n, Size: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlserver", in.DSN("sa", pw, "master"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), "ALTER DATABASE [Off] SET OFFLINE"); err != nil {
		t.Fatal(err)
	}
	t.Setenv(selPwEnv, pw)
	bak := t.TempDir()
	cfg := `
sql_instances:
  - {name: sql01, address: "` + in.Addr() + `", user: sa, password_env: ` + selPwEnv + `, encrypt: disable,
     databases: ` + selection + `}
  - {name: sqlverify, address: "` + deadAddress(t) + `", user: sa, password_env: ` + selPwEnv + `, encrypt: disable}
backup_servers:
  - {name: bak01, unc_paths: ['\\bak01\backup'], location: ` + bak + `, verify_instance: sqlverify, restore_data_dir: 'R:\data', restore_log_dir: 'R:\log'}
  - {name: bak02, unc_paths: ['\\bak02\backup'], location: ` + bak + `, verify_instance: sqlverify, restore_data_dir: 'R:\data', restore_log_dir: 'R:\log'}
databases:
  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02], stripes: 4}
`
	file := filepath.Join(t.TempDir(), "backupcycle.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return in, file
}

func lineFor(out, kind, name string) string {
	re := regexp.MustCompile(`(?m)^  ` + kind + `\s+` + regexp.QuoteMeta(name) + `\s.*$`)
	return re.FindString(out)
}

// Wildcards and exclusions against the emulator's sys.databases, and a
// database created after the config was written is picked up without a
// change to it.
func TestDatabasesResolvesFromTheInstance(t *testing.T) {
	in, file := selectionSite(t, `[USER_DATABASES, -DBA, "-scratch*"]`)
	code, out, errs := runStarter(t, "databases", "--config", file)
	if code != exitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q:\n%s", code, errs, out)
	}
	t.Logf("report:\n%s", out)
	for _, c := range []struct{ kind, name, want string }{
		{"selected", "Sales", "configured"},
		{"selected", "SalesEU", "defaults"},
		{"skipped", "DBA", `excluded by "-DBA"`},
		{"skipped", "Scratch1", `excluded by "-scratch*"`},
		{"skipped", "Off", "state OFFLINE"},
		{"skipped", "tempdb", "tempdb cannot be backed up"},
		{"skipped", "master", "not selected"},
	} {
		if l := lineFor(out, c.kind, c.name); !strings.Contains(l, c.want) {
			t.Errorf("%s %s: line %q lacks %q:\n%s", c.kind, c.name, l, c.want, out)
		}
	}
	if l := lineFor(out, "selected", "SalesEU"); !strings.Contains(l, "-> bak01, bak02") {
		t.Errorf("SalesEU does not inherit the rotation: %q", l)
	}
	if strings.Contains(out, "sqlverify") {
		t.Errorf("the verification-only instance is listed:\n%s", out)
	}
	if lineFor(out, "selected", "NewDB") != "" {
		t.Fatalf("NewDB before it exists:\n%s", out)
	}

	if err := in.CreateDatabase(sqlsim.DatabaseSpec{Name: "NewDB", Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	code, js, errs := runStarter(t, "databases", "--config", file, "--instance", "sql01", "--json")
	if code != exitOK || errs != "" {
		t.Fatalf("--json: exit %d, stderr %q", code, errs)
	}
	var rep databasesReport
	checkJSONStyle(t, "databases --json", js)
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, js)
	}
	if len(rep.Instances) != 1 {
		t.Fatalf("instances %+v", rep.Instances)
	}
	var names []string
	for _, s := range rep.Instances[0].Selected {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "NewDB,Sales,SalesEU" {
		t.Errorf("selected after creating NewDB: %s", got)
	}
}

// An instance that cannot be reached is reported, and the command fails.
func TestDatabasesUnreachableInstanceFails(t *testing.T) {
	in, file := selectionSite(t, `[USER_DATABASES]`)
	if err := in.Stop(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runStarter(t, "databases", "--config", file)
	if code != exitFail || !strings.Contains(out, "ERROR") || !strings.Contains(errs, "problem(s) above") {
		t.Fatalf("exit %d, stderr %q:\n%s", code, errs, out)
	}
	if strings.Contains(out+errs, "Sel3ction!pw") {
		t.Errorf("the password is in the output")
	}
	code, _, errs = runStarter(t, "databases", "--config", file, "--instance", "nope")
	if code != exitUsage || !strings.Contains(errs, "defined: sql01, sqlverify") {
		t.Errorf("--instance nope: exit %d, %q", code, errs)
	}
}
