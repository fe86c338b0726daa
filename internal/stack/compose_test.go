package stack

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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

// The stack runs the Temporal server and Web UI releases the product's
// go.mod pins (those the tests embed and the compose file's images are).
func TestToolsMatchGoMod(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join("../..", p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	product, tools := read("go.mod"), read("tools/temporal/go.mod")
	for _, mod := range []string{"go.temporal.io/server", "github.com/temporalio/ui-server/v2"} {
		re := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(mod) + `\s+(v\S+)`)
		p, q := re.FindStringSubmatch(product), re.FindStringSubmatch(tools)
		if p == nil || q == nil {
			t.Errorf("%s: not required by go.mod (%v) or tools/temporal/go.mod (%v)", mod, p != nil, q != nil)
			continue
		}
		if p[1] != q[1] {
			t.Errorf("%s: go.mod pins %s, tools/temporal/go.mod builds %s for the stack: move them together", mod, p[1], q[1])
		}
	}
}
