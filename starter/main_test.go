package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
)

func runStarter(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
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
		!strings.Contains(errs, "worker --dev") || strings.Count(errs, "\n") != 1 {
		t.Errorf("stderr = %q, want one line starting %q naming the cause and `worker --dev`", errs, want)
	}
	if out != "" {
		t.Errorf("stdout = %q, want nothing", out)
	}
}

func TestHelpOnEveryCommand(t *testing.T) {
	for _, c := range commands {
		code, _, errs := runStarter(t, c.name, "--help")
		if code != exitOK || !strings.Contains(errs, "usage: starter "+c.name) || !strings.Contains(errs, "-address") {
			t.Errorf("%s --help: exit %d, output %q", c.name, code, errs)
		}
	}
	code, _, errs := runStarter(t, "--help")
	if code != exitOK || !strings.Contains(errs, "health") || !strings.Contains(errs, "schedule") {
		t.Errorf("--help: exit %d, output %q", code, errs)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "usage: starter <command>"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"plan", "--config", "testdata/site.yaml"}, "starter plan: --database NAME is required"},
		{[]string{"plan", "--database", "Sales"}, "starter plan: --config FILE is required"},
		{[]string{"plan", "--database", "Sales", "--config", "testdata/site.yaml", "--size", "lots"}, `--size "lots"`},
		{[]string{"run"}, "starter run: --database NAME is required"},
		{[]string{"schedule"}, "give exactly one of --apply, --list"},
		{[]string{"schedule", "--list", "--apply"}, "(got 2: --apply --list)"},
		{[]string{"schedule", "--apply"}, "starter schedule: --config FILE is required"},
		{[]string{"status", "stray"}, `unexpected argument "stray"`},
		{[]string{"health", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"health", "stray"}, `unexpected argument "stray"`},
	}
	for _, tc := range cases {
		code, _, errs := runStarter(t, tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("starter %v: exit %d, stderr %q, want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}

func TestMissingConfigFileIsOneLine(t *testing.T) {
	code, _, errs := runStarter(t, "health", "--config", t.TempDir()+"/nope.yaml")
	if code != exitFail || !strings.HasPrefix(errs, "starter: ") || !strings.Contains(errs, "nope.yaml") || strings.Count(errs, "\n") != 1 {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}
