// Package deploy checks the production-like stack (docker-compose.yml, the
// worker's Dockerfile and the files under deploy/) without a Docker engine:
// the compose file is loaded and validated by the Compose Specification's own
// loader (compose-go, what `docker compose` uses), its scripts are run with
// stand-ins for the container tools, and everything is cross-checked against
// the configuration the worker will load.
package deploy

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/graph"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/distribution/reference"

	"github.com/backupcycle/backupcycle/internal/config"
)

const root = ".." // the repository root, where docker-compose.yml lives

// The services the README, config.example.yaml and deploy/config.compose.yaml rely on.
var requiredServices = []string{
	"postgresql", "temporal-schema", "temporal", "temporal-namespace", "temporal-ui",
	"bak01", "bak02", "sql-primary", "sql-verify", "demo-database", "source-login", "verify-login", "worker-secrets", "worker", "starter",
}

// finalStep is the one-shot service nothing waits for: the last thing the stack does.
const finalStep = "starter"

var (
	projectOnce sync.Once
	project     *types.Project
	projectErr  error
)

// loadCompose loads docker-compose.yml as `docker compose` does (schema
// validation, defaults, consistency of references), once per test binary.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	projectOnce.Do(func() {
		abs, err := filepath.Abs(root)
		if err != nil {
			projectErr = err
			return
		}
		opts, err := cli.NewProjectOptions([]string{filepath.Join(abs, "docker-compose.yml")},
			cli.WithWorkingDirectory(abs), cli.WithResolvedPaths(true), cli.WithConsistency(true))
		if err != nil {
			projectErr = err
			return
		}
		project, projectErr = opts.LoadProject(context.Background())
	})
	if projectErr != nil {
		t.Fatalf("docker-compose.yml does not load: %v", projectErr)
	}
	return project
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return s
}

// repoRel is an absolute path of the repository as a slash path relative to
// its root, or "" when it is outside.
func repoRel(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(abs, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ""
	}
	return filepath.ToSlash(rel)
}

// oneShot reports whether a service runs once and exits (an init step)
// rather than running for as long as the stack does.
func oneShot(s types.ServiceConfig) bool {
	return s.Restart == types.RestartPolicyNo || strings.HasPrefix(s.Restart, types.RestartPolicyOnFailure)
}

// mountFor is the volume that holds p inside the service's containers (the deepest one).
func mountFor(s types.ServiceConfig, p string) (types.ServiceVolumeConfig, bool) {
	var best types.ServiceVolumeConfig
	found := false
	for _, m := range s.Volumes {
		target := path.Clean(m.Target)
		if (p == target || strings.HasPrefix(p, target+"/")) && (!found || len(target) > len(path.Clean(best.Target))) {
			best, found = m, true
		}
	}
	return best, found
}

// hostPath maps a path inside a service's containers to the repository file
// a bind mount puts there ("" when no bind mount of the repository does).
func hostPath(t *testing.T, s types.ServiceConfig, p string) string {
	t.Helper()
	m, ok := mountFor(s, p)
	if !ok || m.Type != types.VolumeTypeBind {
		return ""
	}
	rest := strings.TrimPrefix(p, path.Clean(m.Target))
	return filepath.Join(m.Source, filepath.FromSlash(rest))
}

func TestComposeLoads(t *testing.T) {
	p := loadCompose(t)
	if p.Name != "backupcycle" {
		t.Errorf("project name %q, want backupcycle (the README's `docker compose` commands and volume names assume it)", p.Name)
	}
	for _, name := range requiredServices {
		if _, err := p.GetService(name); err != nil {
			t.Errorf("docker-compose.yml: %v", err)
		}
	}
	for name, s := range p.Services {
		if len(s.EnvFiles) > 0 {
			t.Errorf("service %s reads env_file %v: passwords are compose secrets, settings belong in environment:", name, s.EnvFiles)
		}
		if s.Build != nil {
			df := s.Build.Dockerfile
			if df == "" {
				df = "Dockerfile"
			}
			if !filepath.IsAbs(df) {
				df = filepath.Join(s.Build.Context, df)
			}
			if _, err := os.Stat(df); err != nil {
				t.Errorf("service %s builds from %s: %v", name, s.Build.Context, err)
			}
		}
		for _, m := range s.Volumes {
			switch m.Type {
			case types.VolumeTypeBind:
				if repoRel(t, m.Source) == "" {
					t.Errorf("service %s mounts %s, which is outside the repository", name, m.Source)
				} else if _, err := os.Stat(m.Source); err != nil {
					t.Errorf("service %s mounts %s, which is not in the repository: %v", name, repoRel(t, m.Source), err)
				}
				if !m.ReadOnly {
					t.Errorf("service %s mounts repository file %s read-write: add :ro", name, repoRel(t, m.Source))
				}
			case types.VolumeTypeVolume:
				if _, ok := p.Volumes[m.Source]; !ok {
					t.Errorf("service %s mounts volume %q, which is not declared under volumes:", name, m.Source)
				}
			}
		}
	}
}

// Every image the stack pulls names a release, so that `docker compose up`
// next month runs what was tested; images built here start from a named tag.
func TestImagesPinned(t *testing.T) {
	p := loadCompose(t)
	for name, s := range p.Services {
		if s.Image == "" && s.Build == nil {
			t.Errorf("service %s has neither image nor build", name)
			continue
		}
		if s.Image != "" {
			checkPinned(t, "service "+name, s.Image, s.Build == nil)
		}
		if s.Build != nil {
			df := filepath.Join(s.Build.Context, cmpOr(s.Build.Dockerfile, "Dockerfile"))
			data, err := os.ReadFile(df)
			if err != nil {
				t.Errorf("service %s: %v", name, err)
				continue
			}
			froms := regexp.MustCompile(`(?m)^FROM\s+(?:--platform=\S+\s+)?(\S+)`).FindAllStringSubmatch(string(data), -1)
			if len(froms) == 0 {
				t.Errorf("%s has no FROM", repoRel(t, df))
			}
			stages := map[string]bool{}
			for _, m := range regexp.MustCompile(`(?mi)^FROM\s+\S+(?:\s+\S+)?\s+AS\s+(\S+)`).FindAllStringSubmatch(string(data), -1) {
				stages[m[1]] = true
			}
			for _, f := range froms {
				if !stages[f[1]] {
					checkPinned(t, repoRel(t, df), f[1], false)
				}
			}
		}
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// checkPinned: an explicit tag (or digest) that is not latest; a pulled
// image's tag must also name a version.
func checkPinned(t *testing.T, who, image string, pulled bool) {
	t.Helper()
	ref, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		t.Errorf("%s: image %q: %v", who, image, err)
		return
	}
	if _, ok := ref.(reference.Digested); ok {
		return
	}
	tagged, ok := ref.(reference.Tagged)
	if !ok {
		t.Errorf("%s: image %q has no tag: it means latest; name a release", who, image)
		return
	}
	tag := strings.ToLower(tagged.Tag())
	if strings.Contains(tag, "latest") {
		t.Errorf("%s: image %q: tag %q moves; name a release", who, image, tagged.Tag())
	}
	if pulled && !regexp.MustCompile(`\d+\.\d+|\d+-cu\d+`).MatchString(tag) {
		t.Errorf("%s: image %q: tag %q names no release (want e.g. 1.32.0, 16.13, 2022-CU27-ubuntu-22.04)", who, image, tagged.Tag())
	}
}

// The stack runs the Temporal server, schema tool and Web UI releases the
// tests embed (go.mod), so what `go test` proves is what compose runs; and
// `make stack` builds them from go.mod's tool lines (internal/stack checks
// those against the images too).
func TestTemporalMatchesEmbeddedServer(t *testing.T) {
	p := loadCompose(t)
	module := map[string]string{
		"temporalio/server":      "go.temporal.io/server",
		"temporalio/admin-tools": "go.temporal.io/server",
		"temporalio/ui":          "github.com/temporalio/ui-server/v2",
	}
	seen := map[string]bool{}
	for name, s := range p.Services {
		ref, err := reference.ParseNormalizedNamed(s.Image)
		if err != nil {
			continue
		}
		repo := reference.Path(ref)
		if mod, ok := module[repo]; ok {
			seen[repo] = true
			v := moduleVersion(t, mod)
			if tagged, ok := ref.(reference.Tagged); !ok || tagged.Tag() != v {
				t.Errorf("service %s runs %s; go.mod has %s v%s, so want %s:%s", name, s.Image, mod, v, repo, v)
			}
		}
	}
	want := module
	for repo := range want {
		if !seen[repo] {
			t.Errorf("no service runs %s", repo)
		}
	}
}

// moduleVersion is the version of a required module without its "v".
func moduleVersion(t *testing.T, mod string) string {
	t.Helper()
	return strings.TrimPrefix(goList(t, "{{.Version}}", mod), "v")
}

func goList(t *testing.T, format, mod string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", format, mod).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", mod, err)
	}
	return strings.TrimSpace(string(out))
}

// Every service that keeps running has a healthcheck, every service that
// runs once is an init step something waits for, and nothing waits for a
// service merely to have started.
func TestHealthchecks(t *testing.T) {
	p := loadCompose(t)
	waitedFor := map[string]string{}
	for name, s := range p.Services {
		for dep, d := range s.DependsOn {
			waitedFor[dep] = d.Condition
			ds, err := p.GetService(dep)
			if err != nil {
				t.Errorf("service %s depends on %q: %v", name, dep, err)
				continue
			}
			want := types.ServiceConditionHealthy
			if oneShot(ds) {
				want = types.ServiceConditionCompletedSuccessfully
			}
			if d.Condition != want {
				t.Errorf("service %s depends on %s with condition %q; want %q (started is not ready)", name, dep, d.Condition, want)
			}
		}
	}
	for name, s := range p.Services {
		if oneShot(s) {
			if s.Restart != types.RestartPolicyNo {
				t.Errorf("one-shot service %s has restart %q; want \"no\" (a failed init step must stay failed and visible)", name, s.Restart)
			}
			if _, ok := waitedFor[name]; !ok && name != finalStep {
				t.Errorf("one-shot service %s: nothing waits for it (depends_on ... condition: service_completed_successfully)", name)
			}
			continue
		}
		if s.Restart != types.RestartPolicyUnlessStopped && s.Restart != types.RestartPolicyAlways {
			t.Errorf("service %s: restart %q; a long-running service restarts (unless-stopped)", name, s.Restart)
		}
		hc := s.HealthCheck
		if hc == nil || hc.Disable || len(hc.Test) < 2 || (hc.Test[0] != "CMD" && hc.Test[0] != "CMD-SHELL") {
			t.Errorf("long-running service %s has no healthcheck", name)
			continue
		}
		if hc.Interval == nil || hc.Timeout == nil || hc.Retries == nil || *hc.Retries == 0 {
			t.Errorf("service %s: healthcheck without interval, timeout and retries", name)
		}
		if hc.Test[0] == "CMD" && !strings.HasPrefix(hc.Test[1], "/") && s.Build != nil {
			t.Errorf("service %s: healthcheck runs %q; give the absolute path in the image", name, hc.Test[1])
		}
	}
}

// The init steps run in the order the stack needs, by the conditions compose
// waits on; compose-go's own graph walk gives the start order.
func TestInitStepsOrder(t *testing.T) {
	p := loadCompose(t)
	healthy, done := types.ServiceConditionHealthy, types.ServiceConditionCompletedSuccessfully
	edges := []struct{ svc, dep, cond string }{
		{"temporal-schema", "postgresql", healthy},
		{"temporal", "temporal-schema", done},
		{"temporal-namespace", "temporal", healthy},
		{"temporal-ui", "temporal", healthy},
		{"sql-primary", "bak01", healthy}, {"sql-primary", "bak02", healthy},
		{"sql-verify", "bak01", healthy}, {"sql-verify", "bak02", healthy},
		{"demo-database", "sql-primary", healthy},
		{"source-login", "demo-database", done}, {"verify-login", "sql-verify", healthy},
		{"worker", "temporal-namespace", done}, {"worker", "demo-database", done},
		{"worker", "source-login", done}, {"worker", "verify-login", done},
		{"worker", "sql-primary", healthy}, {"worker", "sql-verify", healthy},
		{"worker", "bak01", healthy}, {"worker", "bak02", healthy}, {"worker", "worker-secrets", done},
		{"starter", "temporal-namespace", done}, {"starter", "worker", healthy},
	}
	for _, e := range edges {
		s := service(t, p, e.svc)
		d, ok := s.DependsOn[e.dep]
		if !ok || d.Condition != e.cond {
			t.Errorf("service %s must wait for %s (%s); has %+v", e.svc, e.dep, e.cond, s.DependsOn)
		}
	}

	var mu sync.Mutex
	var order []string
	err := graph.InDependencyOrder(context.Background(), p, func(_ context.Context, name string, _ types.ServiceConfig) error {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, name)
		return nil
	}, graph.WithMaxConcurrency(1))
	if err != nil {
		t.Fatalf("start order: %v", err)
	}
	pos := map[string]int{}
	for i, n := range order {
		pos[n] = i
	}
	for _, chain := range [][]string{
		{"postgresql", "temporal-schema", "temporal", "temporal-namespace", "worker", "starter"},
		{"bak01", "sql-primary", "demo-database", "source-login", "worker"},
		{"sql-verify", "verify-login", "worker"},
		{"worker-secrets", "worker"},
	} {
		for i := 1; i < len(chain); i++ {
			if pos[chain[i-1]] >= pos[chain[i]] {
				t.Errorf("start order %v: %s must come before %s", order, chain[i-1], chain[i])
			}
		}
	}
	if order[len(order)-1] != finalStep {
		t.Errorf("start order %v: the last step should be %s (the schedule, once everything else is up)", order, finalStep)
	}
}

// What each init step runs: the scripts are repository files mounted into
// the container, and they do their step (the script tests run them).
func TestInitStepsRun(t *testing.T) {
	p := loadCompose(t)
	for svc, script := range map[string]string{
		"temporal-schema":    "deploy/temporal/setup-schema.sh",
		"temporal-namespace": "deploy/temporal/setup-namespace.sh",
		"demo-database":      "deploy/sql/demo-database.sql",
		"source-login":       "deploy/sql/login-source.sql",
		"verify-login":       "deploy/sql/login-verify.sql",
		"worker-secrets":     "deploy/install-secrets.sh",
	} {
		s := service(t, p, svc)
		found := false
		for _, a := range append(slices.Clone(s.Entrypoint), s.Command...) {
			if hp := hostPath(t, s, a); hp != "" && repoRel(t, hp) == script {
				found = true
			}
		}
		if !found {
			t.Errorf("service %s does not run %s (entrypoint %q, command %q)", svc, script, s.Entrypoint, s.Command)
		}
	}

	// The demo database is the one the compose configuration backs up, made
	// with the SQL Server image's own sqlcmd.
	demo := service(t, p, "demo-database")
	if demo.Image != service(t, p, "sql-primary").Image {
		t.Errorf("demo-database runs %s; want the SQL Server image of sql-primary (its sqlcmd)", demo.Image)
	}
	args := strings.Join(demo.Entrypoint, " ")
	for _, want := range []string{"/opt/mssql-tools18/bin/sqlcmd", "-S sql-primary", " -b"} {
		if !strings.Contains(args, want) {
			t.Errorf("demo-database entrypoint %q lacks %q", demo.Entrypoint, want)
		}
	}
	sql, err := os.ReadFile(filepath.Join(root, "deploy/sql/demo-database.sql"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, "deploy/config.compose.yaml")
	for _, db := range cfg.Databases {
		if !regexp.MustCompile(`(?i)IF DB_ID\(N'` + regexp.QuoteMeta(db.Name) + `'\) IS NULL\s+BEGIN\s+CREATE DATABASE \[` + regexp.QuoteMeta(db.Name) + `\]`).Match(sql) {
			t.Errorf("deploy/sql/demo-database.sql does not create database %s (if missing) that deploy/config.compose.yaml backs up", db.Name)
		}
		for _, c := range db.SanityChecks {
			for _, table := range regexp.MustCompile(`(?i)FROM\s+(dbo\.\w+)`).FindAllStringSubmatch(c.Query, -1) {
				if !regexp.MustCompile(`(?i)CREATE TABLE ` + regexp.QuoteMeta(table[1]) + `\b`).Match(sql) {
					t.Errorf("sanity check %s reads %s, which deploy/sql/demo-database.sql does not create", c.Name, table[1])
				}
			}
		}
	}

	// The last step applies the fleet schedule with the mounted configuration.
	st := service(t, p, finalStep)
	cmd := append(slices.Clone(st.Entrypoint), st.Command...)
	if len(cmd) == 0 || path.Base(cmd[0]) != "starter" || !slices.Contains(cmd, "schedule") || !slices.Contains(cmd, "apply") || !slices.Contains(cmd, "--fleet") {
		t.Errorf("service %s runs %q; want the starter applying the fleet schedule", finalStep, cmd)
	}
	if cfgPath := flagValue(cmd, "--config"); cfgPath == "" || hostPath(t, st, cfgPath) == "" {
		t.Errorf("service %s: --config %q is not a file mounted from the repository", finalStep, cfgPath)
	}
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

func loadConfig(t *testing.T, rel string) *config.Config {
	t.Helper()
	cfg, err := config.Load(filepath.Join(root, rel))
	if err != nil {
		t.Fatalf("%s does not load:\n%v", rel, err)
	}
	return cfg
}

func TestHostPorts(t *testing.T) {
	p := loadCompose(t)
	used := map[string]string{}
	names := p.ServiceNames()
	sort.Strings(names)
	for _, name := range names {
		for _, port := range service(t, p, name).Ports {
			if port.Published == "" {
				continue // container port only: the engine picks a free host port
			}
			if port.HostIP != "127.0.0.1" {
				t.Errorf("service %s publishes %s on %q: bind it to 127.0.0.1 (SQL Server with sa, SMB and Temporal without auth)", name, port.Published, port.HostIP)
			}
			key := port.Published + "/" + port.Protocol
			if other, dup := used[key]; dup {
				t.Errorf("host port %s is published by both %s and %s", key, other, name)
			}
			used[key] = name
		}
	}
	for _, want := range []string{"7233/tcp", "8080/tcp", "9090/tcp", "1433/tcp", "1434/tcp", "4451/tcp", "4452/tcp"} {
		if used[want] == "" {
			t.Errorf("host port %s is not published (the README uses it); published: %v", want, used)
		}
	}
}

// checkAddress: host:port names a compose service that publishes that container port.
func checkAddress(t *testing.T, p *types.Project, file, what, addr string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Errorf("%s: %s %q: %v", file, what, addr, err)
		return
	}
	s, err := p.GetService(host)
	if err != nil {
		t.Errorf("%s: %s %q: host %q is not a docker-compose.yml service", file, what, addr, host)
		return
	}
	for _, sp := range s.Ports {
		if fmt.Sprint(sp.Target) == port {
			return
		}
	}
	t.Errorf("%s: %s %q: service %s does not serve container port %s (ports %v)", file, what, addr, host, port, s.Ports)
}

// Every host the example configuration and the compose configuration name is
// a service of the stack, on a port it serves.
func TestConfigsNameComposeServices(t *testing.T) {
	p := loadCompose(t)
	for _, file := range []string{"config.example.yaml", "deploy/config.compose.yaml"} {
		cfg := loadConfig(t, file)
		checkAddress(t, p, file, "temporal.address", cfg.Temporal.Address)
		for _, s := range cfg.SQLInstances {
			checkAddress(t, p, file, "sql_instances "+s.Name+" address", s.Address)
		}
		for _, b := range cfg.BackupServers {
			if b.Loc.Scheme != "smb" {
				t.Errorf("%s: backup server %s: want an smb:// location on a compose service, got %q", file, b.Name, b.Location)
				continue
			}
			checkAddress(t, p, file, "backup server "+b.Name+" location", net.JoinHostPort(b.Loc.Host, fmt.Sprint(b.Loc.Port)))
		}
	}
}

// The worker and the starter read the compose configuration, mounted
// read-only from the repository, and the worker serves /metrics where the
// stack publishes it.
func TestWorkerConfigIsMounted(t *testing.T) {
	p := loadCompose(t)
	for _, name := range []string{"worker", finalStep} {
		s := service(t, p, name)
		args := append(slices.Clone(s.Entrypoint), s.Command...)
		cfgPath := flagValue(args, "--config")
		if cfgPath == "" {
			t.Errorf("service %s runs %q without --config PATH", name, args)
			continue
		}
		m, ok := mountFor(s, path.Clean(cfgPath))
		if !ok || m.Type != types.VolumeTypeBind || path.Clean(m.Target) != path.Clean(cfgPath) {
			t.Errorf("service %s: --config %s should be a file mounted from the repository, got %+v", name, cfgPath, m)
			continue
		}
		if rel := repoRel(t, m.Source); rel != "deploy/config.compose.yaml" {
			t.Errorf("service %s reads %s; want deploy/config.compose.yaml", name, rel)
		}
	}
	w := service(t, p, "worker")
	addr := flagValue(append(slices.Clone(w.Entrypoint), w.Command...), "--metrics-addr")
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("worker --metrics-addr %q: %v (the README points at /metrics)", addr, err)
	}
	published := false
	for _, sp := range w.Ports {
		published = published || fmt.Sprint(sp.Target) == port
	}
	if !published {
		t.Errorf("worker serves /metrics on %s, which it does not publish (ports %v)", port, w.Ports)
	}
}

// The SQL Server paths of each backup server are the volume its Samba
// service shares, mounted in the source and the verification instance.
func TestBackupVolumesAreShared(t *testing.T) {
	p := loadCompose(t)
	cfg := loadConfig(t, "deploy/config.compose.yaml")
	sharePath := sambaSharePath(t, "backup")
	serviceOf := func(addr string) string { h, _, _ := net.SplitHostPort(addr); return h }
	for _, b := range cfg.BackupServers {
		smbSvc, err := p.GetService(b.Loc.Host)
		if err != nil {
			t.Errorf("backup server %s: %v", b.Name, err)
			continue
		}
		if b.Loc.Share != "backup" {
			t.Errorf("backup server %s: share %q, but deploy/samba/smb.conf exports [backup]", b.Name, b.Loc.Share)
		}
		shared, ok := mountFor(smbSvc, sharePath)
		if !ok || shared.Type != types.VolumeTypeVolume {
			t.Errorf("backup server %s: service %s does not hold %s in a named volume", b.Name, b.Loc.Host, sharePath)
			continue
		}
		// Who must see this server's files: the source of every database that
		// writes here, and the verifier, which restores from its unc_paths.
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
			s, err := p.GetService(svc)
			if err != nil {
				t.Errorf("backup server %s: %v", b.Name, err)
				continue
			}
			for _, up := range b.UNCPaths {
				m, ok := mountFor(s, up)
				if !ok || m.Source != shared.Source {
					t.Errorf("backup server %s: %s writes/reads %s, which is not volume %s in service %s", b.Name, svc, up, shared.Source, svc)
					continue
				}
				if m.ReadOnly && !readOnlyOK {
					t.Errorf("backup server %s: %s backs up to %s but mounts it read-only", b.Name, svc, up)
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
	for _, want := range []string{"[backup]", "valid users = backup", "server signing = required", "follow symlinks = No", "hide special files = Yes"} {
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

// The worker image builds the repository's two commands, and the starter the
// worker's healthcheck and the starter service run is where they look.
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
	if !regexp.MustCompile(`(?m)^COPY --from=\S+ .*\bstarter\b.* /usr/local/bin/`).MatchString(df) {
		t.Error("the runtime image should hold the starter in /usr/local/bin (the worker's healthcheck and the starter service run it)")
	}
	for _, cmd := range []string{"worker", "starter"} {
		if !regexp.MustCompile(`\./` + cmd + `(\s|$)`).MatchString(df) {
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
	p := loadCompose(t)
	for _, name := range []string{"worker", finalStep} {
		s := service(t, p, name)
		if s.Build == nil || repoRel(t, s.Build.Context) != "." {
			t.Errorf("service %s should build the repository's Dockerfile", name)
		}
	}
	if hc := service(t, p, "worker").HealthCheck; hc == nil || len(hc.Test) < 2 || hc.Test[1] != "/usr/local/bin/starter" {
		t.Errorf("worker healthcheck %v: want /usr/local/bin/starter health (the runtime image has no shell)", hc)
	}
}

// Services the README tells people to use (`docker compose logs worker`,
// `docker compose exec sql-primary ...`) exist.
func TestReadmeNamesComposeServices(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatalf("README.md: %v (the product card requires it)", err)
	}
	p := loadCompose(t)
	cmdRE := regexp.MustCompile("docker[ -]compose\\s+(?:-\\S+\\s+(?:\\S+\\s+)?)*?(logs|up|exec|restart|stop|start|ps|build|run|pull|rm|kill|top)\\b([^`|&;#\\n]*)")
	matches := cmdRE.FindAllStringSubmatch(string(data), -1)
	if len(matches) < 3 {
		t.Errorf("README.md shows %d docker compose commands; its compose walk-through needs up, ps and run at least", len(matches))
	}
	for _, m := range matches {
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
			if _, err := p.GetService(n); err != nil {
				t.Errorf("README.md: %q names service %q, which docker-compose.yml does not define", strings.TrimSpace(m[0]), n)
			}
		}
	}
}
