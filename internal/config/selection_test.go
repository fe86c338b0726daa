package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// withSelection puts a databases: selection on sql01 (at line 6, after its
// password_env line).
func withSelection(t *testing.T, items string) string {
	t.Helper()
	return edit(t, "    password_env: SQL01_PASSWORD\n", "    password_env: SQL01_PASSWORD\n    databases: "+items+"\n")
}

func TestSelectionParses(t *testing.T) {
	cfg, err := Parse([]byte(withSelection(t, `[USER_DATABASES, -DBA, "Sales*", "Arch?ve", system_databases]`)), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.SQLInstances[0].Databases
	want := []string{"USER_DATABASES", "-DBA", "Sales*", "Arch?ve", "system_databases"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("databases = %q, want %q", got, want)
	}
	if cfg.SQLInstances[1].Databases != nil {
		t.Errorf("an instance without databases: got %q", cfg.SQLInstances[1].Databases)
	}
}

func TestSelectionErrors(t *testing.T) {
	cases := []struct {
		items string
		want  string // in the message
	}{
		{`[USER_DATABASES, ""]`, `databases[1] "" is empty`},
		{`[USER_DATABASES, "-"]`, `databases[1] "-" is empty`},
		{`[USER_DATABSES]`, "did you mean USER_DATABASES?"},
		{`[AVAILABILITY_GROUP_DATABASES]`, "AVAILABILITY_GROUP_DATABASES is not supported"},
		{`["%Sales%"]`, "here * matches any characters"},
		{`[-DBA, -Scratch]`, "only excludes, so it selects nothing"},
		{`[Sales, sales]`, `databases[1] "sales" is listed twice`},
		{fmt.Sprintf(`["%s"]`, strings.Repeat("x", 129)), "longer than SQL Server's limit of 128"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(withSelection(t, c.items)), "c.yaml")
		var es Errors
		if !errors.As(err, &es) || len(es) != 1 {
			t.Errorf("%s: want one error, got %v", c.items, err)
			continue
		}
		if !strings.Contains(es[0].Msg, c.want) || !strings.HasPrefix(es[0].Error(), "c.yaml:6: sql_instances[0] (sql01): databases") {
			t.Errorf("%s: got %q, want c.yaml:6 naming sql01 and %q", c.items, es[0].Error(), c.want)
		}
	}
}

// A list written one item per line reports the item's own line.
func TestSelectionErrorLine(t *testing.T) {
	_, err := Parse([]byte(withSelection(t, "\n      - USER_DATABASES\n      - \"%x\"")), "c.yaml")
	if err == nil || !strings.HasPrefix(err.Error(), "c.yaml:8: ") {
		t.Fatalf("want the error at line 8, got %v", err)
	}
}

func TestParseSelectionItem(t *testing.T) {
	for in, want := range map[string]SelectionItem{
		"USER_DATABASES":   {Text: "USER_DATABASES", Keyword: UserDatabases},
		"-all_databases":   {Text: "-all_databases", Exclude: true, Keyword: AllDatabases},
		"-Sales*":          {Text: "-Sales*", Exclude: true, Pattern: "Sales*"},
		"O'Brien's \"Shop": {Text: "O'Brien's \"Shop", Pattern: "O'Brien's \"Shop"},
		"USER_DATA":        {Text: "USER_DATA", Pattern: "USER_DATA"}, // a real name, not close to a keyword
	} {
		got, err := ParseSelectionItem(in)
		if err != nil || got != want {
			t.Errorf("ParseSelectionItem(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
}

// An instance's own rotation (for the databases its selection picks) is
// checked like a database's.
func TestInstanceRotation(t *testing.T) {
	cfg, err := Parse([]byte(withSelection(t, "[USER_DATABASES]\n    backup_servers: [bak01, bak02]")), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.SQLInstances[0].BackupServers; !reflect.DeepEqual(got, []string{"bak01", "bak02"}) {
		t.Errorf("backup_servers = %q", got)
	}
	cases := []struct {
		rotation string
		want     string
	}{
		{"backup_servers: [bak01, bak09]", `backup server "bak09" is not defined in backup_servers`},
		{"backup_servers: [bak01, bak01]", `backup server "bak01" is listed twice`},
		{"backup_servers: [bak01]", "a single backup server and no copy_to"},
		{"backup_servers: [bak01, bak02]\n    copy_to: bak02", `copy_to "bak02" is also in backup_servers`},
		{"backup_servers: [bak01]\n    copy_to: bak09", `copy_to "bak09" is not defined`},
		{"copy_to: bak02", "copy_to without backup_servers"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(withSelection(t, "[USER_DATABASES]\n    "+c.rotation)), "c.yaml")
		var es Errors
		if !errors.As(err, &es) || len(es) != 1 || !strings.Contains(es[0].Msg, c.want) ||
			!strings.Contains(es[0].Error(), "sql_instances[0] (sql01)") {
			t.Errorf("%s: got %v, want one error on sql_instances[0] (sql01) saying %q", c.rotation, err, c.want)
		}
	}
}
