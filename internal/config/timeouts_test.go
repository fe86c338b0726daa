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

// A heartbeat_timeout under 3 minutes loads, with a warning at its line:
// a Temporal outage or network stall longer than it ends the running
// attempt.
func TestShortHeartbeatTimeoutWarns(t *testing.T) {
	c, err := Parse([]byte("defaults:\n  heartbeat_timeout: 30s\n"+base+"    heartbeat_timeout: 2m\n"), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 2 {
		t.Fatalf("warnings %v, want two (defaults and databases[0])", c.Warnings)
	}
	for i, w := range c.Warnings {
		if !strings.Contains(w.Msg, "heartbeat_timeout") || !strings.Contains(w.Msg, "3m") || !strings.HasSuffix(w.Path, "heartbeat_timeout") {
			t.Errorf("warning %d: %+v", i, w)
		}
	}
	if c.Warnings[0].Line != 2 || c.Warnings[0].Path != "defaults.heartbeat_timeout" {
		t.Errorf("first warning at %s line %d, want defaults.heartbeat_timeout line 2", c.Warnings[0].Path, c.Warnings[0].Line)
	}
	for _, ok := range []string{"", "defaults:\n  heartbeat_timeout: 4m\n"} {
		c, err := Parse([]byte(ok+base), "config.yaml")
		if err != nil || len(c.Warnings) != 0 {
			t.Errorf("%q: warnings %v, err %v; want none", ok, c.Warnings, err)
		}
	}
}
