package stack

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/semver"
)

// The stack runs the compose services' own entrypoints and environment:
// every container path they name maps to a file of the repository or of the
// state directory, and every variable the stack replaces is one the compose
// file sets. A change to the compose file that the stack does not follow
// fails here, in `make test`, before `make test-stack` runs it.
func TestComposeServicesRunHere(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	p, err := loadCompose(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	st := &stack{project: p, secrets: filepath.Join(state, "secrets"),
		images: map[string]string{"/etc/temporal/entrypoint.sh": filepath.Join(state, "bin", "temporal-entrypoint.sh")}}
	ports := []int{7001, 7002, 7003, 7004, 7005, 7006, 7007, 7008, 7009, 7010}
	for _, c := range []struct {
		name         string
		replace, add map[string]string
		want         string // a file the entrypoint runs
	}{
		{"temporal-schema", nil, nil, "deploy/temporal/setup-schema.sh"},
		{"temporal", nil, nil, "deploy/secret-env.sh"},
		{"temporal-namespace", namespaceEnv("127.0.0.1:7001"), nil, "deploy/temporal/setup-namespace.sh"},
		{"temporal-ui", nil, nil, ""},
	} {
		switch c.name {
		case "temporal-schema":
			c.replace, c.add = schemaEnv(5555, "/tools")
		case "temporal":
			c.replace, c.add = serverEnv(5555, ports)
		case "temporal-ui":
			c.replace, c.add = uiEnv("127.0.0.1:7001", "http://localhost:8081", 8081)
		}
		svc, err := st.service(c.name)
		if err != nil {
			t.Fatal(err)
		}
		env, err := svc.environ(nil, c.replace, c.add)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		for k, v := range c.replace {
			if !strings.Contains("\n"+strings.Join(env, "\n")+"\n", "\n"+k+"="+v+"\n") {
				t.Errorf("%s: %s is not %s in %q", c.name, k, v, env)
			}
		}
		var argv []string
		if c.want != "" {
			if argv, err = svc.command(); err != nil {
				t.Errorf("%s: %v", c.name, err)
				continue
			}
			if !strings.Contains(strings.Join(argv, " "), filepath.Join(repo, c.want)) {
				t.Errorf("%s runs %q; want %s of the repository", c.name, argv, c.want)
			}
		}
		for _, a := range append(argv, env...) {
			_, v, ok := strings.Cut(a, "=")
			if !ok {
				v = a
			}
			for _, container := range []string{"/run/secrets/", "/backupcycle/", "/etc/temporal/"} {
				if strings.HasPrefix(v, container) {
					t.Errorf("%s: %q is still a container path", c.name, a)
				}
			}
			if strings.HasPrefix(v, repo+"/") {
				if _, err := os.Stat(v); err != nil {
					t.Errorf("%s: %v", c.name, err)
				}
			}
		}
	}

	// A variable the compose file does not set is refused, not silently added.
	svc, err := st.service("temporal")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.environ(nil, map[string]string{"POSTGRES_HOST": "127.0.0.1"}, nil); err == nil || !strings.Contains(err.Error(), "no longer sets POSTGRES_HOST") {
		t.Errorf("replacing a variable compose does not set: %v; want an error naming it", err)
	}
}

// The stack runs, in place of the compose file's Temporal images, programs
// of the product's own module graph (go.mod's tool lines, built by
// scripts/temporal-tools.sh), so of the releases the tests embed: each must
// come from the release of the image whose service it stands in for.
func TestToolsMatchComposeImages(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	mod := readGoMod(t, filepath.Join(repo, "go.mod"))
	script, err := os.ReadFile(filepath.Join(repo, "scripts", "temporal-tools.sh"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := loadCompose(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ service, pkg string }{
		{"temporal", "go.temporal.io/server/cmd/server"},
		{"temporal-schema", "go.temporal.io/server/cmd/tools/sql"},
		{"temporal-ui", "github.com/temporalio/ui-server/v2/cmd/server"},
	} {
		if !slices.ContainsFunc(mod.Tool, func(tl struct{ Path string }) bool { return tl.Path == c.pkg }) {
			t.Errorf("go.mod has no tool line for %s, which the stack runs for the service %s: add it (go get -tool)", c.pkg, c.service)
		}
		if !strings.Contains(string(script), " "+c.pkg) {
			t.Errorf("scripts/temporal-tools.sh does not build %s, which the stack runs for the service %s", c.pkg, c.service)
		}
		// The module of the package: the longest required path it is under.
		module, version := "", ""
		for _, r := range mod.Require {
			if (c.pkg == r.Path || strings.HasPrefix(c.pkg, r.Path+"/")) && len(r.Path) > len(module) {
				module, version = r.Path, r.Version
			}
		}
		s, err := p.GetService(c.service)
		if err != nil {
			t.Fatal(err)
		}
		tag := s.Image[strings.LastIndex(s.Image, ":")+1:]
		if "v"+tag != version {
			t.Errorf("service %s runs %s, the stack builds %s from go.mod's %s: move them together", c.service, s.Image, c.pkg, version)
		}
	}
}

// The CLI's module (tools/temporalcli) links an older Temporal release, but
// every other module it shares with the product sits at the product's
// version, so that after `make test` most of its packages are already in the
// build cache: only the CLI's own Temporal release (server, API, SDK and the
// Nexus SDK that SDK is written against) and what that release requires at
// a newer version than the product may differ.
func TestCLISharesProductVersions(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	product := map[string]string{}
	for _, r := range readGoMod(t, filepath.Join(repo, "go.mod")).Require {
		product[r.Path] = r.Version
	}
	ownRelease := func(path string) bool {
		return strings.HasPrefix(path, "go.temporal.io/") || strings.HasPrefix(path, "github.com/temporalio/") ||
			path == "github.com/nexus-rpc/sdk-go"
	}
	cli := readGoMod(t, filepath.Join(repo, "tools", "temporalcli", "go.mod"))
	shared := 0
	for _, r := range cli.Require {
		v, ok := product[r.Path]
		if !ok || ownRelease(r.Path) {
			continue
		}
		shared++
		if semver.Compare(r.Version, v) < 0 {
			t.Errorf("tools/temporalcli builds the CLI with %s %s, the product has %s: raise it (cd tools/temporalcli && go get %s@%s && go mod tidy)",
				r.Path, r.Version, v, r.Path, v)
		}
	}
	if shared == 0 {
		t.Error("tools/temporalcli/go.mod shares no module with go.mod: is it still the CLI's module?")
	}
}

type goMod struct {
	Require []struct{ Path, Version string }
	Tool    []struct{ Path string }
}

func readGoMod(t *testing.T, path string) goMod {
	t.Helper()
	out, err := exec.Command("go", "mod", "edit", "-json", path).Output()
	if err != nil {
		t.Fatalf("go mod edit -json %s: %v", path, err)
	}
	var mod goMod
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	return mod
}
