package config

import (
	"strings"
	"testing"
	"time"
)

// Backups are COPY_ONLY unless the configuration says this product owns the
// backup chain; copy_only: false alone is refused with the reason.
func TestCopyOnlyFollowsBackupChainOwnership(t *testing.T) {
	second := "  - name: Stock\n    instance: sql01\n    backup_servers: [bak02, bak01]\n"
	for _, tc := range []struct {
		name       string
		yaml       string
		copyOnly   []bool // per database
		wantErr    string
		wantErrAt  int
		errorCount int
	}{
		{name: "default", yaml: base + second, copyOnly: []bool{true, true}},
		{name: "owned by defaults", yaml: "defaults:\n  owns_backup_chain: true\n" + base + second, copyOnly: []bool{false, false}},
		{name: "owned by one database", yaml: base + "    owns_backup_chain: true\n" + second, copyOnly: []bool{false, true}},
		{name: "a database opts out of the defaults' ownership",
			yaml: "defaults:\n  owns_backup_chain: true\n" + base + "    owns_backup_chain: false\n" + second, copyOnly: []bool{true, false}},
		{name: "copy_only true said outright", yaml: base + "    copy_only: true\n" + second, copyOnly: []bool{true, true}},
		{name: "copy_only false with ownership", yaml: base + "    copy_only: false\n    owns_backup_chain: true\n", copyOnly: []bool{false}},
		{name: "copy_only false alone", yaml: base + "    copy_only: false\n",
			wantErr: "databases[0] (Sales): copy_only: false makes every cycle's full backup the differential base", wantErrAt: lAfterDB, errorCount: 1},
		{name: "copy_only false in defaults, reported once", yaml: "defaults:\n  copy_only: false\n" + base + second,
			wantErr: "defaults: copy_only: false makes every cycle's full backup", wantErrAt: 2, errorCount: 1},
		{name: "contradiction", yaml: base + "    copy_only: true\n    owns_backup_chain: true\n",
			wantErr: "copy_only: true and owns_backup_chain: true contradict", wantErrAt: lAfterDB, errorCount: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml), "config.yaml")
			if tc.wantErr != "" {
				es, ok := err.(Errors)
				if !ok || len(es) != tc.errorCount || !strings.Contains(es[0].Msg, tc.wantErr) || es[0].Line != tc.wantErrAt {
					t.Fatalf("got %v, want %d error at line %d containing %q", err, tc.errorCount, tc.wantErrAt, tc.wantErr)
				}
				if !strings.Contains(es[0].Msg, "owns_backup_chain: true") {
					t.Errorf("the error does not name the fix: %s", es[0].Msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.copyOnly {
				if got := c.Databases[i].CopyOnly; got != want {
					t.Errorf("%s: copy_only = %v, want %v (owns_backup_chain %v)", c.Databases[i].Name, got, want, c.Databases[i].OwnsBackupChain)
				}
			}
		})
	}
}

// Timeouts left out stay 0 (the plan derives them); given ones are kept and
// inherited; zero or negative ones are refused naming the key.
func TestTimeoutOverrides(t *testing.T) {
	c, err := Parse([]byte(base), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := c.Databases[0].Policy
	if p.CopyDeadline != 0 || p.BackupTimeout != 0 || p.RestoreTimeout != 0 || p.CheckDBTimeout != 0 || p.HeartbeatTimeout != 0 {
		t.Errorf("timeouts not given: %+v, want all 0 (derived from the size)", p)
	}
	c, err = Parse([]byte("defaults:\n  backup_timeout: 20h\n  heartbeat_timeout: 5m\n"+base+
		"    restore_timeout: 1d\n    checkdb_timeout: 30h\n    copy_deadline: 9h\n"), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p = c.Databases[0].Policy
	if p.BackupTimeout != 20*time.Hour || p.HeartbeatTimeout != 5*time.Minute || p.RestoreTimeout != 24*time.Hour ||
		p.CheckDBTimeout != 30*time.Hour || p.CopyDeadline != 9*time.Hour {
		t.Errorf("given and inherited timeouts: %+v", p)
	}
	for _, k := range timeoutKeys {
		_, err := Parse([]byte(base+"    "+k+": 0s\n"), "config.yaml")
		es, ok := err.(Errors)
		if !ok || len(es) != 1 || es[0].Line != lAfterDB || !strings.Contains(es[0].Msg, k+" must be a positive duration") {
			t.Errorf("%s: 0s: got %v, want one error at line %d naming the key", k, err, lAfterDB)
		}
	}
}
