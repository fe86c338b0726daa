package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// readmeExamples are the starter command lines of README.md's sh blocks,
// as the shell parses them (comments dropped, quotes removed, VAR=value
// assignments before the command skipped), without the program name.
func readmeExamples(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	in := false
	for n, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			lang := strings.TrimPrefix(trimmed, "```")
			in = !in && (lang == "sh" || lang == "bash" || lang == "shell")
			continue
		}
		if !in || trimmed == "" {
			continue
		}
		f, err := syntax.NewParser().Parse(strings.NewReader(trimmed), "README.md")
		if err != nil {
			t.Errorf("README.md:%d: not a shell line: %v", n+1, err)
			continue
		}
		// Each simple command of the line (a && b gives two); its
		// assignments (VAR=value) are not arguments.
		syntax.Walk(f, func(node syntax.Node) bool {
			call, ok := node.(*syntax.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			var fields []string
			for _, w := range call.Args {
				s, err := expand.Literal(&expand.Config{}, w)
				if err != nil {
					t.Errorf("README.md:%d: %v", n+1, err)
					return false
				}
				fields = append(fields, s)
			}
			if fields[0] == "bin/starter" || fields[0] == "starter" {
				out = append(out, fields[1:])
			}
			return true
		})
	}
	return out
}

// withConfig points every --config of args at file, except a
// configuration the repository itself holds (docs/case-study.yaml), which
// the example uses as written (from the repository's root, root). A file
// git ignores is local state, not the repository's: .stack/ or .demo/ left
// by `make stack` or `make demo` names a site that may be stopped.
func withConfig(t *testing.T, root string, args []string, file string) []string {
	t.Helper()
	out := slices.Clone(args)
	pick := func(v string) string {
		if filepath.IsAbs(v) || !strings.Contains(v, "/") {
			return file
		}
		if _, err := os.Stat(filepath.Join(root, v)); err != nil {
			return file
		}
		held, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", "--", v).Output()
		if err != nil {
			t.Fatalf("git ls-files %s: %v", v, err)
		}
		if strings.TrimSpace(string(held)) == "" {
			return file
		}
		return filepath.Join(root, v)
	}
	for i, a := range out {
		switch {
		case a == "--config" && i+1 < len(out):
			out[i+1] = pick(out[i+1])
		case strings.HasPrefix(a, "--config="):
			out[i] = "--config=" + pick(strings.TrimPrefix(a, "--config="))
		}
	}
	return out
}

// Every starter example of README.md runs as written, in the README's
// order, against the embedded Temporal server and the dev site (the
// demo's emulated SQL Servers and backup servers, a worker of the real
// workflows): exit 0 each, no usage error. Only --config is pointed at the
// dev site's configuration. The source is slowed down while the examples
// that need a running cycle (status, cancel, the fleet) run.
func TestReadmeStarterExamples(t *testing.T) {
	examples := readmeExamples(t)
	if len(examples) < 20 {
		t.Fatalf("README.md has %d starter examples in sh blocks; the starter section lists more", len(examples))
	}
	dir, err := os.MkdirTemp("", "starter-readme-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// smbd switches to its share user, which must reach the state directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	site, err := devenv.Start(context.Background(), devenv.Options{StateDir: dir, DatabaseSize: devenv.MinDatabaseSize,
		TemporalAddress: srv.FrontendAddress(), Namespace: srv.Namespace()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = site.Stop() })
	siteWorker(t, site, client.WithDefaults(site.Config.Temporal).TaskQueue)
	c := testClient(t, client.WithDefaults(site.Config.Temporal).TaskQueue)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, id := range []string{client.ScheduleID(devenv.SourceInstance, devenv.Database), client.FleetScheduleID} {
			_ = c.DeleteSchedule(ctx, id)
		}
		ids := []string{client.CycleWorkflowID(devenv.SourceInstance, devenv.Database), workflows.FleetWorkflowID}
		runs, _ := c.RunningCycles(ctx, devenv.Database, "")
		fleets, _ := c.RunningFleets(ctx)
		for _, r := range append(runs, fleets...) {
			ids = append(ids, r.WorkflowID)
		}
		for _, id := range ids {
			_ = c.SDK().TerminateWorkflow(ctx, id, "", "README examples done")
		}
	})

	for _, args := range examples {
		args = withConfig(t, "..", args, site.ConfigFile)
		following := slices.Contains(args, "run") && slices.Contains(args, "--wait")
		if slices.Contains(args, "calibrate") {
			// Its report and chart go to a directory of the test's.
			args = append(args, "--out", t.TempDir())
		}
		if following || slices.Contains(args, "calibrate") {
			site.Source.SetThrottle(0)
		} else {
			// Slow enough that a started cycle still runs for the next lines.
			site.Source.SetThrottle(24 << 10)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		began := time.Now()
		code, out, errs := runStarterCtx(t, ctx, args...)
		cancel()
		t.Logf("$ starter %s  (exit %d, %s)\n%s%s", strings.Join(args, " "), code, time.Since(began).Round(time.Millisecond), out, errs)
		if code != exitOK {
			t.Errorf("starter %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		}
	}
	site.Source.SetThrottle(0)
}

// The extraction itself: comments dropped, quotes honoured, assignments
// before the command skipped, other programs and other blocks ignored.
func TestReadmeExamplesExtraction(t *testing.T) {
	examples := readmeExamples(t)
	want := []string{"--config", "config.yaml", "schedule", "apply", "--cron", "0 1 * * *", "--jitter", "30m", "--tz", "Europe/Berlin", "--catchup-window", "6h"}
	found := false
	for _, e := range examples {
		found = found || slices.Equal(e, want)
		if slices.Contains(e, "#") || (len(e) > 0 && (e[0] == "bin/worker" || e[0] == "go")) {
			t.Errorf("not a starter command line: %q", e)
		}
	}
	if !found {
		t.Errorf("the schedule apply example is not extracted as %q: %q", want, examples)
	}
	if w := withConfig(t, "..", []string{"--config", "a.yaml", "run", "--config=b.yaml"}, "c.yaml"); !slices.Equal(w, []string{"--config", "c.yaml", "run", "--config=c.yaml"}) {
		t.Errorf("withConfig: %q", w)
	}
}

// A configuration left by a local run in an ignored directory (.stack/
// from `make stack`, .demo/ from `make demo`) is not the repository's:
// the example is pointed at the dev site's configuration like any other,
// not at a stack that may be stopped (or running).
func TestReadmeExamplesIgnoreLocalState(t *testing.T) {
	root := t.TempDir()
	for name, body := range map[string]string{
		".gitignore":                  "/.stack/\n/.demo/\n",
		"docs/case-study.yaml":        "instances: []\n",
		".stack/site/config.dev.yaml": "instances: []\n",
		".demo/config.dev.yaml":       "instances: []\n",
		"local/untracked-config.yaml": "instances: []\n",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) {
		if out, err := exec.Command("git", append([]string{"-C", root}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", ".gitignore", "docs/case-study.yaml")
	for _, c := range []struct{ config, want string }{
		{"docs/case-study.yaml", filepath.Join(root, "docs/case-study.yaml")},
		{".stack/site/config.dev.yaml", "site.yaml"},
		{".demo/config.dev.yaml", "site.yaml"},
		{"missing/config.yaml", "site.yaml"},
	} {
		got := withConfig(t, root, []string{"--config", c.config, "status"}, "site.yaml")
		if want := []string{"--config", c.want, "status"}; !slices.Equal(got, want) {
			t.Errorf("--config %s: got %q, want %q", c.config, got, want)
		}
	}
}
