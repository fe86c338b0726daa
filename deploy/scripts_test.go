package deploy

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	"go.temporal.io/server/common/dynamicconfig"
)

// readLog is the lines a stand-in appended to its log.
func readLog(t *testing.T, p string) []string {
	t.Helper()
	f, err := os.Open(p)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// temporal-schema creates and upgrades both of Temporal's databases with the
// schema tool, with the password of its secret, from the schema directories
// of the Temporal release go.mod names; run again, it changes nothing and
// still succeeds.
func TestTemporalSchemaStep(t *testing.T) {
	p := loadCompose(t)
	s := service(t, p, "temporal-schema")
	c := newContainer(t, s)
	state := t.TempDir()
	log := filepath.Join(state, "calls")
	c.tool("nc", "exit 0\n")
	c.tool("temporal-sql-tool", `
echo "$* pw=$SQL_PASSWORD" >> "$STUB_LOG"
db=""; prev=""
for a in "$@"; do
  [ "$prev" = "--db" ] && db="$a"
  [ "$prev" = "-d" ] && { [ -d "$a" ] || { echo "no schema directory $a" >&2; exit 3; }; }
  prev="$a"
done
case " $* " in
  *" create-database "*)
    if [ -e "$STUB_STATE/$db" ]; then echo "database $db already exists" >&2; exit 1; fi
    : > "$STUB_STATE/$db" ;;
  *" setup-schema "*|*" update-schema "*)
    [ -e "$STUB_STATE/$db" ] || { echo "database $db does not exist" >&2; exit 1; } ;;
  *) exit 4 ;;
esac
`)
	schemaDir := filepath.Join(goList(t, "{{.Dir}}", "go.temporal.io/server"), "schema", "postgresql", "v12")
	env := []string{"STUB_LOG=" + log, "STUB_STATE=" + state, "TEMPORAL_SCHEMA_DIR=" + schemaDir}

	for run := 1; run <= 2; run++ {
		out, err := c.run(s.Entrypoint, env...)
		if err != nil {
			t.Fatalf("run %d: %q: %v\n%s", run, s.Entrypoint, err, out)
		}
		calls := readLog(t, log)
		if err := os.Remove(log); err != nil {
			t.Fatal(err)
		}
		pw := " pw=" + testPassword("postgres_password")
		var want []string
		for _, db := range []struct{ name, dir string }{{"temporal", "temporal"}, {"temporal_visibility", "visibility"}} {
			base := "--plugin postgres12 --ep postgresql -p 5432 -u temporal --db " + db.name
			want = append(want, base+" create-database"+pw, base+" setup-schema -v 0.0"+pw,
				base+" update-schema -d "+filepath.Join(schemaDir, db.dir, "versioned")+pw)
		}
		if strings.Join(calls, "\n") != strings.Join(want, "\n") {
			t.Errorf("run %d: schema tool calls\n%s\nwant\n%s\noutput:\n%s", run, strings.Join(calls, "\n"), strings.Join(want, "\n"), out)
		}
	}
	script, err := os.ReadFile(filepath.Join(root, "deploy/temporal/setup-schema.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// The admin-tools image holds the schema of its release under /etc/temporal/schema.
	if !strings.Contains(string(script), "${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema/postgresql/v12}") {
		t.Error("setup-schema.sh should default to the admin-tools image's /etc/temporal/schema/postgresql/v12")
	}
}

// temporal-namespace creates the namespace once and registers exactly the
// search attributes the workflows declare, each once, whatever already
// exists, also when the server's namespace cache has not yet caught up with
// the namespace it just created.
func TestTemporalNamespaceStep(t *testing.T) {
	p := loadCompose(t)
	s := service(t, p, "temporal-namespace")
	c := newContainer(t, s)
	state := t.TempDir()
	log := filepath.Join(state, "calls")
	// A pre-existing attribute (a second stack on the same cluster, a rerun).
	if err := os.WriteFile(filepath.Join(state, "attrs"), []byte("BackupDatabase  Keyword\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.tool("temporal", `
echo "$*" >> "$STUB_LOG"
arg() { prev=""; for a in "$@"; do [ "$prev" = "$FLAG" ] && { echo "$a"; return; }; prev="$a"; done; }
case "$1 $2 $3" in
  "operator cluster health") exit 0 ;;
  "operator namespace describe") [ -e "$STUB_STATE/ns" ] ;;
  "operator namespace create") : > "$STUB_STATE/ns" ;;
  "operator search-attribute list")
    # The server's namespace cache learns of a new namespace some seconds
    # after the namespace is created (and described from the database).
    n=$(cat "$STUB_STATE/lists" 2>/dev/null || echo 0); echo $((n + 1)) > "$STUB_STATE/lists"
    [ -e "$STUB_STATE/ns" ] && [ "$n" -ge 1 ] || { echo "unable to list search attributes: Namespace $(FLAG=--namespace arg "$@") is not found." >&2; exit 1; }
    cat "$STUB_STATE/attrs" ;;
  "operator search-attribute create")
    [ -e "$STUB_STATE/ns" ] || { echo "namespace not found" >&2; exit 1; }
    echo "$(FLAG=--name arg "$@")  $(FLAG=--type arg "$@")" >> "$STUB_STATE/attrs" ;;
  *) exit 4 ;;
esac
`)
	env := []string{"STUB_LOG=" + log, "STUB_STATE=" + state}
	attrs := workflowAttributes(t)
	if len(attrs) == 0 {
		t.Fatal("found no search attribute keys in workflows/*.go")
	}
	for run := 1; run <= 2; run++ {
		out, err := c.run(s.Entrypoint, env...)
		if err != nil {
			t.Fatalf("run %d: %q: %v\n%s", run, s.Entrypoint, err, out)
		}
		calls := readLog(t, log)
		_ = os.Remove(log)
		var creates []string
		nsCreates := 0
		for _, call := range calls {
			if strings.HasPrefix(call, "operator namespace create") {
				nsCreates++
				if !strings.Contains(call, "--namespace default") || !strings.Contains(call, "--retention 30d") || !strings.Contains(call, "--address temporal:7233") {
					t.Errorf("namespace created with %q; want default on temporal:7233, retention 30d", call)
				}
			}
			if strings.HasPrefix(call, "operator search-attribute create") {
				creates = append(creates, call)
			}
		}
		wantNS, wantCreates := 1, len(attrs)-1
		if run == 2 {
			wantNS, wantCreates = 0, 0
		}
		if nsCreates != wantNS || len(creates) != wantCreates {
			t.Errorf("run %d: %d namespace creates, %d attribute creates; want %d and %d\ncalls:\n%s\noutput:\n%s",
				run, nsCreates, len(creates), wantNS, wantCreates, strings.Join(calls, "\n"), out)
		}
	}
	reg, err := os.ReadFile(filepath.Join(state, "attrs"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(reg)), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			got[f[0]] = f[1]
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(attrs) {
		t.Errorf("registered %v; the workflows declare %v", got, attrs)
	}
}

// workflowAttributes reads the search attribute keys the workflows declare
// (temporal.NewSearchAttributeKeyKeyword("BackupDatabase"), ...) from their
// source, as the types the CLI registers, so this test does not need the
// workflows package to compile.
func workflowAttributes(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "workflows", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{"Keyword": "Keyword", "Int64": "Int", "String": "Text", "Bool": "Bool", "Float64": "Double", "Time": "Datetime", "KeywordList": "KeywordList"}
	re := regexp.MustCompile(`NewSearchAttributeKey(Keyword|Int64|String|Bool|Float64|Time|KeywordList)\("([^"]+)"\)`)
	out := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out[m[2]] = types[m[1]]
		}
	}
	return out
}

// The server image refuses to start without its dynamic config file: the
// stack mounts one that the server's own loader reads without an error or
// an unknown key.
func TestTemporalDynamicConfig(t *testing.T) {
	p := loadCompose(t)
	s := service(t, p, "temporal")
	v := s.Environment["DYNAMIC_CONFIG_FILE_PATH"]
	if v == nil || !strings.HasPrefix(*v, "/") {
		t.Fatalf("temporal: DYNAMIC_CONFIG_FILE_PATH %v: want an absolute path in the container", v)
	}
	hp := hostPath(t, s, *v)
	if hp == "" {
		t.Fatalf("temporal: DYNAMIC_CONFIG_FILE_PATH %s is not a file mounted from the repository", *v)
	}
	data, err := os.ReadFile(hp)
	if err != nil {
		t.Fatal(err)
	}
	lr := dynamicconfig.LoadYamlFile(data)
	if err := lr.Err(); err != nil {
		t.Errorf("%s: %v", repoRel(t, hp), err)
	}
	for _, w := range lr.Warnings {
		t.Errorf("%s: %v", repoRel(t, hp), w)
	}
	if len(lr.Map) == 0 {
		t.Errorf("%s sets nothing", repoRel(t, hp))
	}
}

// The worker image's build context (.dockerignore) holds every source file
// the two commands are built from, and no secret, local state or history.
func TestBuildContext(t *testing.T) {
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatalf("%v: the worker image is built from the repository root, which holds .git, .demo/ and deploy/secrets/", err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	excluded := func(p string) bool {
		m, err := pm.MatchesOrParentMatches(p)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, p := range []string{".git/HEAD", ".git/objects/pack/x.pack", ".demo/temporal.db", ".demo/secrets/sql01",
		"deploy/secrets/postgres_password", "deploy/.env", "bin/worker", "worker/worker.test"} {
		if !excluded(p) {
			t.Errorf(".dockerignore lets %s into the build context", p)
		}
	}

	// What the build reads: go.mod, go.sum and the Go (and embedded) files of
	// every package of this module that the worker and the starter import.
	need := []string{"go.mod", "go.sum"}
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if .Module}}{{if .Module.Main}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}{{end}}`, "./worker", "./starter")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./worker ./starter: %v", err)
	}
	abs, _ := filepath.Abs(root)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		rel, err := filepath.Rel(abs, f[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range f[1:] {
			need = append(need, filepath.ToSlash(filepath.Join(rel, g)))
		}
	}
	if !slices.Contains(need, "worker/main.go") {
		t.Fatalf("go list found %d files, not worker/main.go: %s", len(need), out)
	}
	for _, p := range need {
		if excluded(p) {
			t.Errorf(".dockerignore leaves %s out of the build context; the image build needs it", p)
		}
	}
}
