package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/version"
)

func runStarter(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	return runStarterCtx(t, context.Background(), args...)
}

func runStarterCtx(t testing.TB, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// deadAddress is a loopback port nobody listens on.
func deadAddress(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestHealthWithServerDownFailsWithOneClearLine(t *testing.T) {
	addr := deadAddress(t)
	code, out, errs := runStarter(t, "health", "--address", addr)
	if code != exitFail {
		t.Errorf("exit code %d, want %d", code, exitFail)
	}
	want := fmt.Sprintf("starter: cannot reach Temporal at %s: ", addr)
	if !strings.HasPrefix(errs, want) || !strings.Contains(errs, "connection refused") ||
		!strings.Contains(errs, "make demo KEEP=1") || strings.Count(errs, "\n") != 1 {
		t.Errorf("stderr = %q, want one line starting %q naming the cause and `make demo KEEP=1`", errs, want)
	}
	if out != "" {
		t.Errorf("stdout = %q, want nothing", out)
	}
}

func TestHelpOnEveryCommand(t *testing.T) {
	root := newRoot(&env{})
	seen := 0
	walk := func(path ...string) {
		code, out, errs := runStarter(t, append(append([]string{}, path...), "--help")...)
		name := "starter " + strings.Join(path, " ")
		if code != exitOK || errs != "" || !strings.Contains(out, "Usage:") || !strings.Contains(out, strings.TrimSpace(name)) ||
			!strings.Contains(out, "--address") || !strings.Contains(out, "--config") {
			t.Errorf("%s --help: exit %d, stdout %q, stderr %q", name, code, out, errs)
		}
		seen++
	}
	walk()
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		walk(c.Name())
		for _, sub := range c.Commands() {
			walk(c.Name(), sub.Name())
		}
	}
	if seen < 16 {
		t.Errorf("only %d commands have help", seen)
	}
	code, out, _ := runStarter(t, "--help")
	for _, want := range []string{"health", "run", "cancel", "schedule", "status", "plan", "fleet", "databases", "preflight", "Exit codes: 0 done, 1 failed, 2 bad usage"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("--help: exit %d, lacks %q: %s", code, want, out)
		}
	}
}

// `--version` prints the module version and the VCS revision the build
// carries (a test binary has none: "(devel)", "unknown revision").
func TestVersion(t *testing.T) {
	code, out, errs := runStarter(t, "--version")
	if code != exitOK || errs != "" || out != "starter "+version.String()+"\n" || !strings.Contains(out, "(") {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "starter: give a command"},
		{[]string{"frobnicate"}, `unknown command "frobnicate" for "starter"`},
		{[]string{"plan", "--config", "testdata/site.yaml"}, "starter plan: --database NAME is required"},
		{[]string{"plan", "--database", "Sales"}, "starter plan: --config FILE is required"},
		{[]string{"plan", "--database", "Sales", "--config", "testdata/site.yaml", "--size", "lots"}, `--size "lots"`},
		{[]string{"run"}, "starter run: --database NAME is required"},
		{[]string{"schedule"}, "starter schedule: give an action: apply, list, pause, unpause, trigger, delete"},
		{[]string{"schedule", "frob"}, `unknown action "frob"`},
		{[]string{"schedule", "--apply"}, "schedule actions are subcommands, e.g. `starter schedule apply`"},
		{[]string{"schedule", "--list"}, "e.g. `starter schedule list`"},
		{[]string{"schedule", "apply"}, "starter schedule apply: --config FILE is required"},
		{[]string{"schedule", "pause"}, "give one schedule NAME"},
		{[]string{"schedule", "list", "stray"}, `unexpected argument "stray"`},
		{[]string{"status", "stray"}, `unexpected argument "stray"`},
		{[]string{"health", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"health", "stray"}, `unexpected argument "stray"`},
		{[]string{"cancel"}, "give exactly one of --database NAME, --workflow-id ID, --fleet"},
		{[]string{"cancel", "--fleet", "--database", "Sales"}, "give exactly one of"},
		{[]string{"cancel", "--workflow-id", "x", "--instance", "sql01"}, "--instance goes with --database"},
		{[]string{"fleet", "--workflow-id", "x"}, "--workflow-id goes with --status"},
		{[]string{"--timeout", "-1s", "status"}, "--timeout -1s: give a positive duration"},
	}
	for _, tc := range cases {
		code, out, errs := runStarter(t, tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("starter %v: exit %d, stdout %q, stderr %q, want 2 and %q", tc.args, code, out, errs, tc.want)
		}
	}
}

func TestMissingConfigFileIsOneLine(t *testing.T) {
	code, _, errs := runStarter(t, "health", "--config", t.TempDir()+"/nope.yaml")
	if code != exitFail || !strings.HasPrefix(errs, "starter: ") || !strings.Contains(errs, "nope.yaml") || strings.Count(errs, "\n") != 1 {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

// A configuration with several problems: each on its own line, exactly as
// package config words it (file:line: message), then one summary line.
func TestConfigErrorsOnePerLine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bad.yaml")
	bad := "sql_instances:\n  - name: sql01\n    adress: x:1433\nbackup_servers:\n  - name: bak01\n    unc_pathz: []\n"
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	_, perr := config.Load(file)
	ce, ok := perr.(config.Errors)
	if !ok || len(ce) < 2 {
		t.Fatalf("the fixture should have several problems: %v", perr)
	}
	var want strings.Builder
	for _, e := range ce {
		want.WriteString(e.Error() + "\n")
	}
	fmt.Fprintf(&want, "starter: %d problem(s) in the configuration above: fix them and run the command again\n", len(ce))
	for _, args := range [][]string{
		{"--config", file, "run", "--database", "Sales"},
		{"plan", "--database", "Sales", "--config", file},
	} {
		code, out, errs := runStarter(t, args...)
		if code != exitFail || out != "" || errs != want.String() {
			t.Errorf("%v: exit %d, stdout %q\nstderr:\n%s\nwant:\n%s", args, code, out, errs, want.String())
		}
	}
}

// The connection flags go before or after the command, and the command's
// own flags anywhere after it: each order reads the same config.
func TestFlagsBeforeOrAfterTheCommand(t *testing.T) {
	dead := deadAddress(t)
	orders := [][]string{
		{"--config", site, "--address", dead, "run", "--database", "Nope"},
		{"run", "--database", "Nope", "--config", site, "--address", dead},
		{"--config", site, "run", "--address", dead, "--database", "Nope"},
		{"run", "--config=" + site, "--database=Nope", "--address=" + dead},
	}
	for _, args := range orders {
		code, out, errs := runStarter(t, args...)
		if code != exitFail || out != "" || !strings.Contains(errs, `database "Nope" is not configured`) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	var first string
	for i, args := range [][]string{
		{"--config", site, "plan", "--database", "Sales", "--size", "2TiB"},
		{"plan", "--database", "Sales", "--size", "2TiB", "--config", site},
		{"plan", "--config", site, "--size=2TiB", "--database", "Sales"},
	} {
		code, out, errs := runStarter(t, args...)
		if code != exitOK || !strings.Contains(out, "workflow:  backup-sql01-Sales") {
			t.Fatalf("%v: exit %d, stderr %q\n%s", args, code, errs, out)
		}
		if i == 0 {
			first = out
		} else if out != first {
			t.Errorf("%v prints another plan:\n%s\nthan\n%s", args, out, first)
		}
	}
}
