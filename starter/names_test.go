package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// namesConfig writes a configuration whose database is db.
func namesConfig(t *testing.T, db string) string {
	t.Helper()
	y := `sql_instances:
  - {name: sql01, address: "sql01:1433", user: sa, password_env: X}
  - {name: verify, address: "verify:1433", user: sa, password_env: X}
backup_servers:
  - {name: bak01, unc_paths: ['\\10.0.2.2\backup'], location: /srv/bak01, verify_instance: verify, restore_data_dir: 'D:\restore', restore_log_dir: 'L:\log'}
  - {name: bak02, unc_paths: ['\\10.0.4.2\backup'], location: /srv/bak02, verify_instance: verify, restore_data_dir: 'D:\restore', restore_log_dir: 'L:\log'}
databases:
  - name: "` + db + `"
    instance: sql01
    backup_servers: [bak01, bak02]
`
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPlanListsNamesAndRefusesLongOnes: `starter plan` shows every derived
// name with its length and limit; a 128-character database name with the
// default verify_name is refused when the configuration is loaded, before
// anything is contacted, with the fix.
func TestPlanListsNamesAndRefusesLongOnes(t *testing.T) {
	code, out, errs := runStarter(t, "plan", "--config", namesConfig(t, "Sales"), "--database", "Sales")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"names:     at their widest (sequence 99999999999999)", "workflow id", "backup-sql01-Sales",
		"verification database name", "Sales_verify", "stripe path on bak02", `\\10.0.4.2\backup\sql01@Sales~8de4e0ea_99999999999999_64of64.bak`,
		"restore directory on bak02"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "OVER") {
		t.Errorf("a name over its limit:\n%s", out)
	}

	long := strings.Repeat("L", 128)
	code, out, errs = runStarter(t, "plan", "--config", namesConfig(t, long), "--database", long)
	if code == exitOK || out != "" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	for _, want := range []string{"verification database name", "is 135 characters", "at most 128", "set verify_name to a shorter pattern"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q: %s", want, errs)
		}
	}
}
