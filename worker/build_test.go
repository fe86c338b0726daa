package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goTool is the go command that runs the tests: the build checks need it.
func goTool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the build checks run the go command: %v", err)
	}
	return p
}

// The production worker links none of the development stack: no Temporal
// server (and its cloud and database clients), no Web UI server, no SQL
// Server emulator, no Samba harness, no emulated site.
func TestWorkerLinksNoDevelopmentStack(t *testing.T) {
	out, err := exec.Command(goTool(t), "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	const mod = "github.com/backupcycle/backupcycle/"
	forbidden := []string{"go.temporal.io/server", "github.com/temporalio/ui-server",
		mod + "internal/devserver", mod + "internal/devenv", mod + "internal/sqlsim", mod + "internal/sambatest"}
	linked := map[string]bool{}
	for _, d := range deps {
		linked[d] = true
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("the worker links %s", d)
			}
		}
	}
	// What it must link, so an empty or broken listing does not pass.
	for _, want := range []string{"go.temporal.io/sdk/worker", mod + "workflows", mod + "activities"} {
		if !linked[want] {
			t.Errorf("go list -deps lacks %s: %d packages listed", want, len(deps))
		}
	}
	t.Logf("worker: %d packages", len(deps))
}

// The worker and the starter build for the platforms a DBA runs them on.
// Both in one `go build` compiles every package for the platform without
// linking (pure Go links wherever it compiles), which keeps the check to a
// few seconds per platform on a warm build cache.
func TestCrossBuilds(t *testing.T) {
	gobin := goTool(t)
	for _, p := range []struct{ goos, goarch string }{
		{"linux", "amd64"}, {"linux", "arm64"}, {"windows", "amd64"}, {"darwin", "arm64"},
	} {
		c := exec.Command(gobin, "build", ".", "../starter")
		c.Env = append(os.Environ(), "GOOS="+p.goos, "GOARCH="+p.goarch, "CGO_ENABLED=0")
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("GOOS=%s GOARCH=%s go build ./worker ./starter: %v\n%s", p.goos, p.goarch, err, out)
		}
	}
}

// `worker --version` names the module version and, built from a checkout,
// the commit.
func TestVersionNamesTheRevision(t *testing.T) {
	gobin := goTool(t)
	bin := filepath.Join(t.TempDir(), "worker")
	// From a git checkout the go command stamps the revision (-buildvcs);
	// from a source tree without one, the version says it is unknown.
	want := regexp.QuoteMeta("unknown revision")
	vcs := "-buildvcs=false"
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		want = `\(` + strings.TrimSpace(string(out))[:12] + `[,)]`
		vcs = "-buildvcs=true"
	}
	if out, err := exec.Command(gobin, "build", vcs, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", vcs, err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("worker --version: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`^worker \S+ ` + want + `.*\n$`).Match(out) {
		t.Errorf("worker --version printed %q, want the module version and %s", out, want)
	}
	if st, err := os.Stat(bin); err == nil {
		t.Logf("%s (%d MB)", strings.TrimSpace(string(out)), st.Size()>>20)
	}
}

// The Windows service code and the Windows-only tests compile and pass
// go vet for Windows, from any platform (TestCrossBuilds builds the worker
// that links them).
func TestWindowsServiceVets(t *testing.T) {
	c := exec.Command(goTool(t), "vet", "../internal/winservice", "../internal/config")
	c.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := c.CombinedOutput(); err != nil {
		t.Errorf("GOOS=windows go vet ./internal/winservice ./internal/config: %v\n%s", err, out)
	}
}
