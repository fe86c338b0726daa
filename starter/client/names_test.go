package client

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/workflows"
)

// namesSite is a valid configuration with the widest names it accepts: a
// 63-character instance name and a 128-character database name carrying
// ], ', @, % and non-ASCII letters, verify_name set to a pattern that fits.
func namesSite(t *testing.T, db, verifyName string) *config.Config {
	t.Helper()
	inst := strings.Repeat("i", 63)
	y := fmt.Sprintf(`sql_instances:
  - {name: %s, address: "sql01:1433", user: sa, password_env: X}
  - {name: verify, address: "verify:1433", user: sa, password_env: X}
backup_servers:
  - {name: bak01, unc_paths: ['\\10.0.2.2\backup'], location: /srv/bak01, verify_instance: verify, restore_data_dir: 'D:\restore', restore_log_dir: 'L:\log'}
  - {name: bak02, unc_paths: ['\\10.0.4.2\backup'], location: /srv/bak02, verify_instance: verify, restore_data_dir: 'D:\restore', restore_log_dir: 'L:\log'}
databases:
  - name: %q
    instance: %s
    backup_servers: [bak01, bak02]
    verify_name: %q
`, inst, db, inst, verifyName)
	cfg, err := config.Parse([]byte(y), "names.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func longName(n int) string {
	s := "Sales]'@%販売"
	for len(utf16.Encode([]rune(s))) < n {
		s += "x"
	}
	return s
}

func TestPlanChecksEveryDerivedName(t *testing.T) {
	db := longName(128)
	cfg := namesSite(t, db, "v_{seq}")
	p, err := PlanCycle(cfg, PlanRequest{Database: db, Assumptions: DefaultAssumptions()})
	if err != nil {
		t.Fatal(err)
	}
	whats := map[string]bool{}
	for _, n := range p.Names {
		whats[n.What] = true
		if n.Over || n.Len > n.Limit || n.Len == 0 {
			t.Errorf("%+v", n)
		}
	}
	for _, w := range []string{"workflow id", "verification database name", "stripe file name", "manifest file name",
		"sequence file name", "stripe path on bak01", "stripe path on bak02", "restore directory on bak02"} {
		if !whats[w] {
			t.Errorf("plan does not check the %s: %v", w, p.Names)
		}
	}
	// The widest id a valid configuration yields is far below Temporal's
	// default limit, which is why the configuration check need not build it.
	id := workflows.CycleWorkflowID(strings.Repeat("i", 63), strings.Repeat("😀", 64))
	if len(id) > 208 || len(workflows.CycleWorkflowID(strings.Repeat("i", 63), db)) > 208 {
		t.Errorf("workflow id %q is %d bytes", id, len(id))
	}

	// A configuration built in code (not through config.Parse), with a
	// verify_name that does not fit: the plan refuses, naming the name, its
	// length, the limit and the fix.
	cfg.Databases[0].VerifyName = "{db}_verify"
	p, err = PlanCycle(cfg, PlanRequest{Database: db, Assumptions: DefaultAssumptions()})
	if !errors.Is(err, ErrNameTooLong) || !errors.Is(err, tsql.ErrNameTooLong) {
		t.Fatalf("verify_name {db}_verify with a 128-character database: %v", err)
	}
	for _, part := range []string{fmt.Sprintf("verification database name %q is 135 characters, the limit is 128", db+"_verify"),
		"set verify_name to a shorter pattern"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error lacks %q: %v", part, err)
		}
	}
	over := 0
	for _, n := range p.Names {
		if n.Over {
			over++
		}
	}
	if over != 1 {
		t.Errorf("%d names over, want 1: %+v", over, p.Names)
	}

	// A verification name with a character outside the BMP is fine: the
	// sanity checks enter it with USE (internal/mssql).
	cfg.Databases[0].VerifyName = "v😀_{seq}"
	if _, err = PlanCycle(cfg, PlanRequest{Database: db, Assumptions: DefaultAssumptions()}); err != nil {
		t.Errorf("verify_name with an emoji: %v", err)
	}

	// A workflow id over 1000 bytes (an instance name no configuration file
	// accepts) and a UNC path one character too long.
	cfg = namesSite(t, "Sales", "{db}_verify")
	cfg.Databases[0].Instance = strings.Repeat("i", 1000)
	cfg.SQLInstances[0].Name = cfg.Databases[0].Instance
	_, err = PlanCycle(cfg, PlanRequest{Database: "Sales", Assumptions: DefaultAssumptions()})
	if err == nil || !strings.Contains(err.Error(), "workflow id") || !strings.Contains(err.Error(), "limit is 1000") {
		t.Errorf("1000-character instance name: %v", err)
	}

	cfg = namesSite(t, "Sales", "{db}_verify")
	stripe := tsql.StripeFileName(cfg.Databases[0].Instance, "Sales", tsql.MaxSequence, tsql.MaxStripes, tsql.MaxStripes)
	for _, extra := range []int{0, 1} {
		dir := `\\h\` + strings.Repeat("d", tsql.MaxPath-len(stripe)-1-4+extra)
		cfg.BackupServers[1].UNCPaths = []string{dir}
		_, err = PlanCycle(cfg, PlanRequest{Database: "Sales", Assumptions: DefaultAssumptions()})
		if extra == 0 && err != nil {
			t.Errorf("stripe path of %d characters: %v", tsql.MaxPath, err)
		}
		if extra == 1 && (err == nil || !strings.Contains(err.Error(), "stripe path on bak02") || !strings.Contains(err.Error(), "use a shorter unc_paths")) {
			t.Errorf("stripe path of %d characters: %v", tsql.MaxPath+1, err)
		}
	}
}
