package config

import (
	"strings"
	"testing"
)

// Keys that differ only in case name one thing on a case-insensitive
// instance or share: instance keys SQL01 and sql01, two databases: entries
// DBA and dba on one instance. Each pair is refused, naming both lines.
func TestNamesDifferingOnlyInCase(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml func(t *testing.T) string
		want want
	}{
		{
			name: "instance keys",
			yaml: func(t *testing.T) string { return edit(t, "  - name: verify\n", "  - name: SQL01\n") },
			want: want{6, `sql_instances[1] (SQL01): name "SQL01" differs only in case from "sql01" at line 2`},
		},
		{
			name: "backup server keys",
			yaml: func(t *testing.T) string { return edit(t, "  - name: bak02\n", "  - name: BAK01\n") },
			want: want{17, `backup_servers[1] (BAK01): name "BAK01" differs only in case from "bak01" at line 11`},
		},
		{
			name: "database entries of one instance",
			yaml: func(t *testing.T) string {
				return edit(t, "  - name: Sales\n", "  - name: DBA\n") + "  - name: dba\n    instance: sql01\n    backup_servers: [bak02, bak01]\n"
			},
			want: want{lAfterDB, `databases[1] (dba): database "dba" on sql01 differs only in case from databases[0] "DBA" at line 25`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := parseErrs(t, tc.yaml(t))
			found := false
			for _, e := range es {
				if e.Line == tc.want.line && strings.Contains(e.Msg, tc.want.msg) {
					found = true
				}
			}
			if !found {
				t.Errorf("want an error at line %d containing %q; got %v", tc.want.line, tc.want.msg, es)
			}
		})
	}
	// The same database name on two instances stays allowed, in any case.
	y := edit(t, "  - name: verify\n", "  - name: sql02\n    address: sql02:1433\n    user: backup\n    password_env: SQL02_PASSWORD\n  - name: verify\n") +
		"  - name: sales\n    instance: sql02\n    backup_servers: [bak02, bak01]\n    verify_name: \"v_{db}_verify\"\n"
	if es := parseErrs(t, y); es != nil {
		t.Errorf("Sales on sql01 and sales on sql02: %v", es)
	}
}

// SQL Server ignores trailing blanks when it compares names, so "Sales "
// names Sales; a leading blank is almost always a typo. Both are refused in
// databases: entries and selection items.
func TestNamesWithBlanks(t *testing.T) {
	for _, name := range []string{"Sales ", " Sales", "Sales\t", "\u00a0Sales"} {
		es := parseErrs(t, withDB(t, name, ""))
		found := false
		for _, e := range es {
			if e.Line == lDB && strings.Contains(e.Msg, "leading or trailing blank") {
				found = true
			}
		}
		if !found {
			t.Errorf("database name %q: want a leading or trailing blank error at line %d; got %v", name, lDB, es)
		}
	}
	for _, item := range []string{"-HR ", " Sales*"} {
		if _, err := ParseSelectionItem(item); err == nil || !strings.Contains(err.Error(), "leading or trailing blank") {
			t.Errorf("selection item %q: %v, want a leading or trailing blank error", item, err)
		}
	}
}
