package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/winservice"
	"github.com/backupcycle/backupcycle/internal/workerhost"
)

// install turns the worker flags into the service's command line, with the
// file paths absolute (a service starts in the system directory) and the
// log file next to the config by default; that command line parses back
// into the same service.
func TestServiceInstallCommandLine(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	var out, errb bytes.Buffer
	so, code, done := parseService([]string{"install", "--config", "backupcycle.yaml", "--task-queue", "bak02",
		"--metrics-addr", "127.0.0.1:9090", "--name", "backupcycle-worker-bak02"}, &out, &errb)
	if done {
		t.Fatalf("install: exit %d: %s", code, errb.String())
	}
	cfg := filepath.Join(dir, "backupcycle.yaml")
	want := []string{"service", "run", "--name", "backupcycle-worker-bak02", "--log-file", filepath.Join(dir, "backupcycle-worker-bak02.log"),
		"--config", cfg, "--task-queue", "bak02", "--metrics-addr", "127.0.0.1:9090"}
	if got := so.runArgs(); !slices.Equal(got, want) {
		t.Errorf("the service's command line:\n got %q\nwant %q", got, want)
	}
	back, code, done := parseService(so.runArgs()[1:], &out, &errb)
	if done {
		t.Fatalf("the service's command line does not parse: exit %d: %s", code, errb.String())
	}
	if back.action != actionRun || back.name != so.name || back.logFile != so.logFile || back.run.configFile != cfg ||
		back.run.taskQueue != "bak02" || back.run.metricsAddr != "127.0.0.1:9090" {
		t.Errorf("the service's command line parses into %+v, want the install's %+v", back, so)
	}
	s := so.service()
	if s.DisplayName != "backupcycle worker (backupcycle-worker-bak02)" || !strings.Contains(s.Description, "task queue bak02") ||
		!strings.Contains(s.Description, cfg) {
		t.Errorf("service shown as %q: %q", s.DisplayName, s.Description)
	}
	if s.StopWait <= workerhost.StopTimeout {
		t.Errorf("the stop wait %s is not longer than the worker's graceful stop (%s)", s.StopWait, workerhost.StopTimeout)
	}
}

// Bad service command lines exit 2 with what to do.
func TestServiceUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "say what to do first: install, uninstall, start, stop"},
		{[]string{"--config", "x.yaml"}, exitUsage, "say what to do first"},
		{[]string{"restart"}, exitUsage, `unknown action "restart"`},
		{[]string{"install"}, exitUsage, "say where Temporal is: --config FILE"},
		{[]string{"start", "--config", "x.yaml"}, exitUsage, "start takes only --name"},
		{[]string{"install", "--config", "x.yaml", "--name", `a\b`}, exitUsage, "has no slash, backslash or space"},
		{[]string{"run", "--config", "x.yaml", "--account", "NT SERVICE\\x"}, exitUsage, "--account is given to install"},
		{[]string{"--help"}, exitOK, "worker service install --config FILE"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"service"}, c.args...), &out, &errb)
		if code != c.code || !strings.Contains(out.String()+errb.String(), c.want) {
			t.Errorf("worker service %q: exit %d, output %q; want exit %d and %q", c.args, code, out.String()+errb.String(), c.code, c.want)
		}
	}
}

// The event of a start that fails says why, from the worker's real
// start-up errors: a config that does not load, Temporal unreachable.
func TestServiceStartFailureEvents(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("temporal:\n  address: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unreachable := filepath.Join(dir, "unreachable.yaml")
	if err := os.WriteFile(unreachable, []byte(fmt.Sprintf(reloadSite, "127.0.0.1:1", dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file string
		want []string
	}{
		{bad, []string{bad + ":", "The config file does not load"}},
		{unreachable, []string{"127.0.0.1:1", "Check that Temporal is reachable"}},
		{filepath.Join(dir, "missing.yaml"), []string{"missing.yaml", "is missing or the service's account may not read it"}},
	} {
		so := serviceOptions{action: actionRun, name: defaultServiceName, logFile: filepath.Join(dir, "w.log"), run: options{configFile: c.file}}
		err := runRemote(context.Background(), so.run, &bytes.Buffer{})
		if err == nil {
			t.Fatalf("%s: the worker started", c.file)
		}
		m := winservice.StartFailedMessage(so.service(), err)
		for _, want := range append(c.want, "did not start", "worker service start --name "+defaultServiceName) {
			if !strings.Contains(m, want) {
				t.Errorf("%s: the event lacks %q:\n%s", c.file, want, m)
			}
		}
	}
}
