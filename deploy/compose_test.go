// Package deploy checks the production-like stack (docker-compose.yml, the
// worker's Dockerfile and the files under deploy/) without a Docker engine:
// the files are parsed and cross-checked against each other and against the
// configuration the worker will load.
package deploy

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/backupcycle/backupcycle/internal/config"
)

const root = ".." // the repository root, where docker-compose.yml lives

// The services the README, config.example.yaml and deploy/config.compose.yaml rely on.
var requiredServices = []string{"postgresql", "temporal", "temporal-ui", "sql-primary", "sql-verify", "bak01", "bak02", "worker"}

type compose struct {
	Name     string              `yaml:"name"`
	Services map[string]*service `yaml:"services"`
	Volumes  map[string]any      `yaml:"volumes"`
}

type service struct {
	Image       string            `yaml:"image"`
	Build       yaml.Node         `yaml:"build"`
	Command     []string          `yaml:"command"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Environment map[string]string `yaml:"environment"`
	EnvFile     yaml.Node         `yaml:"env_file"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"` // short syntax only: SOURCE:TARGET[:ro]
	DependsOn   yaml.Node         `yaml:"depends_on"`
	Healthcheck map[string]any    `yaml:"healthcheck"`
	Restart     string            `yaml:"restart"`
}

func loadCompose(t *testing.T) *compose {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true) // a key this test does not know is a key it does not check: add it here
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	if len(c.Services) == 0 {
		t.Fatal("docker-compose.yml: no services")
	}
	return &c
}

type mount struct {
	source, target string
	readOnly       bool
	bind           bool // a path of the repository, not a named volume
}

func mounts(t *testing.T, name string, s *service) []mount {
	t.Helper()
	var ms []mount
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || len(parts) > 3 {
			t.Errorf("service %s: volume %q is not SOURCE:TARGET[:ro]", name, v)
			continue
		}
		m := mount{source: parts[0], target: path.Clean(parts[1])}
		if len(parts) == 3 {
			if parts[2] != "ro" && parts[2] != "rw" {
				t.Errorf("service %s: volume %q: mode %q is not ro or rw", name, v, parts[2])
			}
			m.readOnly = parts[2] == "ro"
		}
		m.bind = strings.HasPrefix(m.source, ".") || strings.HasPrefix(m.source, "/")
		ms = append(ms, m)
	}
	return ms
}

// mountFor is the mount that holds p inside the container (the deepest one).
func mountFor(ms []mount, p string) (mount, bool) {
	var best mount
	found := false
	for _, m := range ms {
		if (p == m.target || strings.HasPrefix(p, m.target+"/")) && (!found || len(m.target) > len(best.target)) {
			best, found = m, true
		}
	}
	return best, found
}

func envFiles(t *testing.T, name string, s *service) []string {
	t.Helper()
	n := s.EnvFile
	switch n.Kind {
	case 0:
		return nil
	case yaml.ScalarNode:
		return []string{n.Value}
	case yaml.SequenceNode:
		var out []string
		for _, item := range n.Content {
			if item.Kind == yaml.ScalarNode {
				out = append(out, item.Value)
				continue
			}
			var long struct {
				Path     string `yaml:"path"`
				Required *bool  `yaml:"required"`
			}
			if err := item.Decode(&long); err != nil || long.Path == "" {
				t.Errorf("service %s: env_file entry at line %d: %v", name, item.Line, err)
				continue
			}
			out = append(out, long.Path)
		}
		return out
	}
	t.Errorf("service %s: env_file must be a path or a list", name)
	return nil
}

func dependsOn(t *testing.T, s *service) []string {
	t.Helper()
	var out []string
	switch s.DependsOn.Kind {
	case yaml.SequenceNode:
		for _, n := range s.DependsOn.Content {
			out = append(out, n.Value)
		}
	case yaml.MappingNode:
		for i := 0; i < len(s.DependsOn.Content); i += 2 {
			out = append(out, s.DependsOn.Content[i].Value)
		}
	}
	return out
}

// readEnvExample reads KEY=VALUE lines.
func readEnvExample(t *testing.T, p string) map[string]string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatalf("%v: every env_file of docker-compose.yml needs a committed example beside it", err)
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(k) {
			t.Errorf("%s:%d: not KEY=VALUE", p, ln)
			continue
		}
		vars[k] = v
	}
	return vars
}

// workerEnv is every variable the worker container gets from its env files' examples.
func serviceEnv(t *testing.T, c *compose, name string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, f := range envFiles(t, name, c.Services[name]) {
		for k, v := range readEnvExample(t, filepath.Join(root, f+".example")) {
			env[k] = v
		}
	}
	for k, v := range c.Services[name].Environment {
		env[k] = v
	}
	return env
}

func TestRequiredServices(t *testing.T) {
	c := loadCompose(t)
	for _, name := range requiredServices {
		if c.Services[name] == nil {
			t.Errorf("docker-compose.yml has no service %q", name)
		}
	}
	for name, s := range c.Services {
		if s.Image == "" && s.Build.Kind == 0 {
			t.Errorf("service %s has neither image nor build", name)
		}
		if s.Build.Kind != 0 {
			var b struct {
				Context    string `yaml:"context"`
				Dockerfile string `yaml:"dockerfile"`
			}
			if s.Build.Kind == yaml.ScalarNode {
				b.Context = s.Build.Value
			} else if err := s.Build.Decode(&b); err != nil {
				t.Errorf("service %s: build: %v", name, err)
			}
			if b.Dockerfile == "" {
				b.Dockerfile = "Dockerfile"
			}
			if _, err := os.Stat(filepath.Join(root, b.Context, b.Dockerfile)); err != nil {
				t.Errorf("service %s builds from %s: %v", name, b.Context, err)
			}
		}
		for _, dep := range dependsOn(t, s) {
			if c.Services[dep] == nil {
				t.Errorf("service %s depends on %q, which is not a service", name, dep)
			}
		}
		for _, m := range mounts(t, name, s) {
			if m.bind {
				if _, err := os.Stat(filepath.Join(root, m.source)); err != nil {
					t.Errorf("service %s mounts %s, which is not in the repository: %v", name, m.source, err)
				}
			} else if _, ok := c.Volumes[m.source]; !ok {
				t.Errorf("service %s mounts volume %q, which is not declared under volumes:", name, m.source)
			}
		}
	}
	for _, name := range []string{"sql-primary", "sql-verify"} {
		s := c.Services[name]
		if s == nil {
			continue
		}
		if s.Image != "mcr.microsoft.com/mssql/server:2022-latest" || s.Environment["ACCEPT_EULA"] != "Y" {
			t.Errorf("service %s: want SQL Server 2022 with ACCEPT_EULA=Y: image %q, env %v", name, s.Image, s.Environment)
		}
		if serviceEnv(t, c, name)["MSSQL_SA_PASSWORD"] == "" {
			t.Errorf("service %s: MSSQL_SA_PASSWORD must come from its env file", name)
		}
	}
}

func TestHostPortsDoNotClash(t *testing.T) {
	c := loadCompose(t)
	used := map[string]string{}
	names := make([]string, 0, len(c.Services))
	for name := range c.Services {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, p := range c.Services[name].Ports {
			host, _, proto := parsePort(t, name, p)
			if host == "" {
				continue // container port only: the engine picks a free host port
			}
			key := host + "/" + proto
			if other, dup := used[key]; dup {
				t.Errorf("host port %s is published by both %s and %s", key, other, name)
			}
			used[key] = name
		}
	}
	if len(used) < 5 {
		t.Errorf("only %d host ports published (%v): Temporal, the UI, both SQL Servers and the SMB servers should be reachable", len(used), used)
	}
}

// parsePort reads [IP:]HOST:CONTAINER[/proto] or CONTAINER[/proto].
func parsePort(t *testing.T, svc, p string) (host, container, proto string) {
	t.Helper()
	proto = "tcp"
	if i := strings.LastIndex(p, "/"); i >= 0 {
		p, proto = p[:i], p[i+1:]
	}
	parts := strings.Split(p, ":")
	switch len(parts) {
	case 1:
		return "", parts[0], proto
	case 2:
		return parts[0], parts[1], proto
	case 3:
		return parts[1], parts[2], proto
	}
	t.Errorf("service %s: port %q is not [IP:]HOST:CONTAINER", svc, p)
	return "", "", proto
}

func containerPorts(t *testing.T, name string, s *service) map[string]bool {
	ports := map[string]bool{}
	for _, p := range s.Ports {
		_, cp, _ := parsePort(t, name, p)
		ports[cp] = true
	}
	return ports
}

// checkAddress: host:port names a compose service that publishes that container port.
func checkAddress(t *testing.T, c *compose, file, what, addr string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Errorf("%s: %s %q: %v", file, what, addr, err)
		return
	}
	s := c.Services[host]
	if s == nil {
		t.Errorf("%s: %s %q: host %q is not a docker-compose.yml service", file, what, addr, host)
		return
	}
	if !containerPorts(t, host, s)[port] {
		t.Errorf("%s: %s %q: service %s does not publish container port %s (ports %v)", file, what, addr, host, port, s.Ports)
	}
}

// Every host the example configuration and the compose configuration name is
// a service of the stack, on a port it serves.
func TestConfigsNameComposeServices(t *testing.T) {
	c := loadCompose(t)
	for _, file := range []string{"config.example.yaml", "deploy/config.compose.yaml"} {
		cfg, err := config.Load(filepath.Join(root, file))
		if err != nil {
			t.Errorf("%s does not load:\n%v", file, err)
			continue
		}
		checkAddress(t, c, file, "temporal.address", cfg.Temporal.Address)
		for _, s := range cfg.SQLInstances {
			checkAddress(t, c, file, "sql_instances "+s.Name+" address", s.Address)
		}
		for _, b := range cfg.BackupServers {
			if b.Loc.Scheme != "smb" {
				t.Errorf("%s: backup server %s: want an smb:// location on a compose service, got %q", file, b.Name, b.Location)
				continue
			}
			checkAddress(t, c, file, "backup server "+b.Name+" location", net.JoinHostPort(b.Loc.Host, fmt.Sprint(b.Loc.Port)))
		}
	}
}

func TestWorkerConfigIsMounted(t *testing.T) {
	c := loadCompose(t)
	w := c.Services["worker"]
	if w == nil {
		t.Fatal("no worker service")
	}
	args := append(append([]string{}, w.Entrypoint...), w.Command...)
	cfgPath := ""
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			cfgPath = args[i+1]
		} else if v, ok := strings.CutPrefix(a, "--config="); ok {
			cfgPath = v
		}
	}
	if cfgPath == "" {
		t.Fatalf("worker command %q has no --config PATH", args)
	}
	m, ok := mountFor(mounts(t, "worker", w), path.Clean(cfgPath))
	if !ok {
		t.Fatalf("worker reads --config %s, which is in none of its volumes %v", cfgPath, w.Volumes)
	}
	if !m.bind || m.target != path.Clean(cfgPath) {
		t.Fatalf("worker --config %s should be a file mounted from the repository, got %+v", cfgPath, m)
	}
	if !m.readOnly {
		t.Errorf("worker config mount %s should be read-only (:ro)", m.source)
	}
	cfg, err := config.Load(filepath.Join(root, m.source))
	if err != nil {
		t.Fatalf("the worker's config %s does not load:\n%v", m.source, err)
	}

	// Its secrets are references the worker's environment resolves.
	env := serviceEnv(t, c, "worker")
	refs := map[string]string{}
	for _, s := range cfg.SQLInstances {
		refs["sql_instances "+s.Name] = s.Password.Env
		if s.Password.File != "" {
			if _, ok := mountFor(mounts(t, "worker", w), s.Password.File); !ok {
				t.Errorf("%s: password_file %s of %s is not mounted into the worker", m.source, s.Password.File, s.Name)
			}
		}
	}
	for _, b := range cfg.BackupServers {
		if b.SMB != nil {
			refs["backup_servers "+b.Name+" smb"] = b.SMB.Password.Env
		}
	}
	for who, name := range refs {
		if name != "" && env[name] == "" {
			t.Errorf("%s: %s names password_env %s, which the worker's env files do not define", m.source, who, name)
		}
	}
	if len(refs) == 0 {
		t.Error("the compose config references no secrets: SQL and SMB need passwords")
	}
}

// The SQL Server paths of each backup server are the volume its Samba
// service shares, mounted in the source and the verification instance.
func TestBackupVolumesAreShared(t *testing.T) {
	c := loadCompose(t)
	cfg, err := config.Load(filepath.Join(root, "deploy/config.compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sharePath := sambaSharePath(t, "backup")
	serviceOf := func(addr string) string { h, _, _ := net.SplitHostPort(addr); return h }
	for _, b := range cfg.BackupServers {
		smbSvc := c.Services[b.Loc.Host]
		if smbSvc == nil {
			t.Errorf("backup server %s: no service %s", b.Name, b.Loc.Host)
			continue
		}
		if b.Loc.Share != "backup" {
			t.Errorf("backup server %s: share %q, but deploy/samba/smb.conf exports [backup]", b.Name, b.Loc.Share)
		}
		shared, ok := mountFor(mounts(t, b.Loc.Host, smbSvc), sharePath)
		if !ok || shared.bind {
			t.Errorf("backup server %s: service %s does not hold %s in a named volume", b.Name, b.Loc.Host, sharePath)
			continue
		}
		// Who must see this server's files: the source of every database that writes here, and the verifier.
		users := map[string]bool{}
		for _, db := range cfg.Databases {
			for _, s := range db.BackupServers {
				if s == b.Name {
					inst, _ := cfg.SQLInstance(db.Instance)
					users[serviceOf(inst.Address)] = false // writes
				}
			}
		}
		if v, ok := cfg.SQLInstance(b.VerifyInstance); ok {
			if _, writes := users[serviceOf(v.Address)]; !writes {
				users[serviceOf(v.Address)] = true // only reads
			}
		}
		for svc, readOnlyOK := range users {
			for _, p := range b.UNCPaths {
				m, ok := mountFor(mounts(t, svc, c.Services[svc]), p)
				if !ok || m.source != shared.source {
					t.Errorf("backup server %s: %s writes/reads %s, which is not volume %s in service %s", b.Name, svc, p, shared.source, svc)
					continue
				}
				if m.readOnly && !readOnlyOK {
					t.Errorf("backup server %s: %s backs up to %s but mounts it read-only", b.Name, svc, p)
				}
			}
		}
		if len(users) < 2 {
			t.Errorf("backup server %s: used by %v; want the source and the verification instance", b.Name, users)
		}
	}
}

func sambaSharePath(t *testing.T, share string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "deploy/samba/smb.conf"))
	if err != nil {
		t.Fatal(err)
	}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok && section == share && strings.TrimSpace(k) == "path" {
			return path.Clean(strings.TrimSpace(v))
		}
	}
	t.Fatalf("deploy/samba/smb.conf has no [%s] path", share)
	return ""
}

// testparm is Samba's own checker of smb.conf (make test installs samba).
func TestSambaConfig(t *testing.T) {
	bin, err := exec.LookPath("testparm")
	if err != nil {
		t.Fatalf("testparm not found: install samba (scripts/test-deps.sh, run by make test): %v", err)
	}
	out, err := exec.Command(bin, "-s", filepath.Join(root, "deploy/samba/smb.conf")).CombinedOutput()
	if err != nil || strings.Contains(string(out), "Unknown parameter") || strings.Contains(string(out), "Ignoring unknown") {
		t.Fatalf("testparm rejects deploy/samba/smb.conf: %v\n%s", err, out)
	}
	for _, want := range []string{"[backup]", "valid users = backup", "server signing = required"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("testparm output lacks %q:\n%s", want, out)
		}
	}
	df, err := os.ReadFile(filepath.Join(root, "deploy/samba/Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^COPY\s+(\S+)`).FindAllStringSubmatch(string(df), -1) {
		if _, err := os.Stat(filepath.Join(root, "deploy/samba", m[1])); err != nil {
			t.Errorf("deploy/samba/Dockerfile copies %s: %v", m[1], err)
		}
	}
}

// Secrets come from env files that exist as committed examples, never inline.
func TestEnvFiles(t *testing.T) {
	c := loadCompose(t)
	secretish := regexp.MustCompile(`(?i)(PASSWORD|PWD|SECRET|TOKEN|API_KEY)`)
	for name, s := range c.Services {
		for k := range s.Environment {
			if secretish.MatchString(k) {
				t.Errorf("service %s sets %s inline in docker-compose.yml: move it to deploy/.env (env_file)", name, k)
			}
		}
		for _, f := range envFiles(t, name, s) {
			readEnvExample(t, filepath.Join(root, f+".example"))
			if !ignored(t, f) {
				t.Errorf("env file %s (service %s) holds secrets but is not git-ignored: add it to deploy/.gitignore", f, name)
			}
		}
	}
	needs := map[string][]string{
		"postgresql": {"POSTGRES_PASSWORD"}, "temporal": {"POSTGRES_PWD"}, "bak01": {"SMB_PASSWORD"}, "bak02": {"SMB_PASSWORD"},
	}
	for svc, vars := range needs {
		env := serviceEnv(t, c, svc)
		for _, v := range vars {
			if env[v] == "" {
				t.Errorf("service %s needs %s from its env file", svc, v)
			}
		}
	}
	pg, tp := serviceEnv(t, c, "postgresql"), serviceEnv(t, c, "temporal")
	if pg["POSTGRES_PASSWORD"] != tp["POSTGRES_PWD"] {
		t.Error("deploy/.env.example: POSTGRES_PASSWORD (PostgreSQL) and POSTGRES_PWD (Temporal) must be equal")
	}
}

// ignored reports whether deploy/.gitignore covers a compose-relative file under deploy/.
func ignored(t *testing.T, f string) bool {
	rel, ok := strings.CutPrefix(path.Clean(f), "deploy/")
	if !ok {
		return false
	}
	data, err := os.ReadFile(filepath.Join(root, "deploy/.gitignore"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == rel || line == "/"+rel {
			return true
		}
	}
	return false
}

// The compose stack registers exactly the search attributes the workflows use.
func TestSearchAttributesRegistered(t *testing.T) {
	c := loadCompose(t)
	s := c.Services["temporal-search-attributes"]
	if s == nil {
		t.Fatal("no temporal-search-attributes service")
	}
	script := ""
	for _, m := range mounts(t, "temporal-search-attributes", s) {
		if m.bind && strings.HasSuffix(m.source, ".sh") {
			script = m.source
		}
	}
	data, err := os.ReadFile(filepath.Join(root, script))
	if err != nil {
		t.Fatalf("registration script: %v", err)
	}
	got := map[string]string{}
	for _, m := range regexp.MustCompile(`\b(Backup[A-Za-z]+):(Keyword|Int|Text|Bool|Double|Datetime|KeywordList)\b`).FindAllStringSubmatch(string(data), -1) {
		got[m[1]] = m[2]
	}
	want := workflowAttributes(t)
	if len(want) == 0 {
		t.Fatal("found no search attribute keys in workflows/*.go")
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s registers %v; the workflows declare %v", script, got, want)
	}
}

// workflowAttributes reads the search attribute keys the workflows declare
// (temporal.NewSearchAttributeKeyKeyword("BackupDatabase"), ...) from their
// source, so this test does not need the workflows package to compile.
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

// The worker image builds the repository's two commands.
func TestDockerfileBuildsTheCommands(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(df, -1)
	if len(froms) < 2 || !strings.HasPrefix(froms[0][1], "golang:1.26") || strings.HasPrefix(froms[len(froms)-1][1], "golang") {
		t.Errorf("want a golang:1.26 build stage and a slim runtime stage, got %v", froms)
	}
	if !regexp.MustCompile(`(?m)^ENTRYPOINT \["/usr/local/bin/worker"\]`).MatchString(df) {
		t.Error("the image's entrypoint should be the worker (compose passes --config)")
	}
	for _, cmd := range []string{"worker", "starter"} {
		if !strings.Contains(df, "./"+cmd+" ") && !strings.Contains(df, "./"+cmd+"\n") {
			t.Errorf("Dockerfile does not build ./%s", cmd)
		}
		files, _ := filepath.Glob(filepath.Join(root, cmd, "*.go"))
		isMain := false
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && regexp.MustCompile(`(?m)^package main\b`).Match(b) {
				isMain = true
			}
		}
		if !isMain {
			t.Errorf("Dockerfile builds ./%s, but %s/ holds no package main", cmd, cmd)
		}
	}
}

// Services the README tells people to use (`docker compose logs worker`,
// `docker compose exec sql-primary ...`) exist.
func TestReadmeNamesComposeServices(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatalf("README.md: %v (the product card requires it)", err)
	}
	c := loadCompose(t)
	cmdRE := regexp.MustCompile("docker[ -]compose\\s+(?:-\\S+\\s+(?:\\S+\\s+)?)*?(logs|up|exec|restart|stop|start|ps|build|run|pull|rm|kill|top)\\b([^`|&;#\\n]*)")
	for _, m := range cmdRE.FindAllStringSubmatch(string(data), -1) {
		verb, args := m[1], strings.Fields(m[2])
		var named []string
		for _, a := range args {
			if strings.HasPrefix(a, "-") {
				continue
			}
			named = append(named, a)
			if verb == "exec" || verb == "run" {
				break // the rest is the command run inside
			}
		}
		for _, n := range named {
			if !regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`).MatchString(n) {
				continue // a placeholder such as <service>
			}
			if c.Services[n] == nil {
				t.Errorf("README.md: %q names service %q, which docker-compose.yml does not define", strings.TrimSpace(m[0]), n)
			}
		}
	}
}
