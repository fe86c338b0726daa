package deploy

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"unicode"

	"github.com/compose-spec/compose-go/v2/types"
)

var secretRefRE = regexp.MustCompile(`/run/secrets/([A-Za-z0-9_.-]+)`)

// runsWorker reports whether the service's process is the worker: the image's
// own entrypoint (the worker) or an explicit one.
func runsWorker(s types.ServiceConfig) bool {
	return s.Build != nil && (len(s.Entrypoint) == 0 || path.Base(s.Entrypoint[0]) == "worker")
}

// secretsUsed is every secret a service's processes read: /run/secrets/NAME
// in its entrypoint, command, healthcheck and environment, and, for the
// worker, the password_file and key_file entries of the configuration it runs with (the
// starter's run, status, schedule and health --worker-only only talk to
// Temporal and never resolve them).
func secretsUsed(t *testing.T, s types.ServiceConfig) map[string]bool {
	t.Helper()
	used := map[string]bool{}
	var texts []string
	texts = append(texts, s.Entrypoint...)
	texts = append(texts, s.Command...)
	if s.HealthCheck != nil {
		texts = append(texts, s.HealthCheck.Test...)
	}
	for _, v := range s.Environment {
		if v != nil {
			texts = append(texts, *v)
		}
	}
	if cfgPath := flagValue(append(slices.Clone(s.Entrypoint), s.Command...), "--config"); cfgPath != "" && runsWorker(s) {
		if hp := hostPath(t, s, cfgPath); hp != "" {
			if rel := repoRel(t, hp); rel != "" {
				cfg := loadConfig(t, rel)
				for _, si := range cfg.SQLInstances {
					texts = append(texts, si.Password.File)
				}
				for _, b := range cfg.BackupServers {
					if b.SMB != nil {
						texts = append(texts, b.SMB.Password.File)
					}
				}
				for _, k := range cfg.ManifestKeys {
					texts = append(texts, k.File)
				}
			}
		}
	}
	for _, txt := range texts {
		for _, m := range secretRefRE.FindAllStringSubmatch(txt, -1) {
			used[m[1]] = true
		}
	}
	return used
}

func granted(s types.ServiceConfig) map[string]bool {
	g := map[string]bool{}
	for _, sc := range s.Secrets {
		g[sc.Source] = true
	}
	return g
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Each service is given exactly the secrets its processes read, and no
// password is written into docker-compose.yml.
func TestSecretsPerService(t *testing.T) {
	p := loadCompose(t)
	if len(p.Secrets) == 0 {
		t.Fatal("docker-compose.yml declares no secrets")
	}
	secretish := regexp.MustCompile(`(?i)(PASSWORD|PWD|SECRET|TOKEN|API_KEY)`)
	usedAnywhere := map[string]bool{}
	for name, s := range p.Services {
		used, got := secretsUsed(t, s), granted(s)
		for n := range used {
			usedAnywhere[n] = true
		}
		if fmt.Sprint(keys(used)) != fmt.Sprint(keys(got)) {
			t.Errorf("service %s is given secrets %v but reads %v: give each service exactly what it uses", name, keys(got), keys(used))
		}
		for n := range got {
			if _, ok := p.Secrets[n]; !ok {
				t.Errorf("service %s uses secret %q, which is not declared under secrets:", name, n)
			}
		}
		for k, v := range s.Environment {
			if secretish.MatchString(k) && (v == nil || !strings.HasPrefix(*v, "/run/secrets/")) {
				t.Errorf("service %s sets %s in its environment: a password is a compose secret (set %s_FILE=/run/secrets/..., or start through deploy/secret-env.sh)", name, k, k)
			}
		}
	}
	for n, sec := range p.Secrets {
		if !usedAnywhere[n] {
			t.Errorf("secret %s is given to no service that reads it", n)
		}
		rel := repoRel(t, sec.File)
		if !strings.HasPrefix(rel, "deploy/secrets/") {
			t.Errorf("secret %s is read from %q; want a file under deploy/secrets/ (written by deploy/make-secrets.sh)", n, sec.File)
			continue
		}
		// git itself says whether the file would be committed.
		if err := exec.Command("git", "-C", root, "check-ignore", "-q", rel).Run(); err != nil {
			t.Errorf("secret file %s is not git-ignored (deploy/.gitignore): %v", rel, err)
		}
	}
}

// makeSecrets runs deploy/make-secrets.sh into dir and returns its output.
func makeSecrets(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.Command("sh", filepath.Join(root, "deploy/make-secrets.sh"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("deploy/make-secrets.sh %s: %v\n%s", dir, err, out)
	}
	return string(out)
}

// deploy/make-secrets.sh writes one file per declared secret, with a
// password SQL Server accepts, readable by the containers' users and only
// listed by the owner, and never replaces one (the services keep the
// password of their first start).
func TestMakeSecrets(t *testing.T) {
	p := loadCompose(t)
	dir := filepath.Join(t.TempDir(), "secrets")
	makeSecrets(t, dir)
	var want []string
	for _, sec := range p.Secrets {
		want = append(want, filepath.Base(sec.File))
	}
	sort.Strings(want)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	values := map[string]string{}
	for _, e := range entries {
		got = append(got, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		pw := strings.TrimSuffix(string(b), "\n")
		if strings.ContainsAny(pw, "\r\n") {
			t.Errorf("%s: more than one line", e.Name())
		}
		if !sqlServerAccepts(pw) {
			t.Errorf("%s: the password does not meet SQL Server's policy (8+ characters from three of upper, lower, digit, symbol)", e.Name())
		}
		for other, v := range values {
			if v == pw {
				t.Errorf("%s and %s hold the same password", e.Name(), other)
			}
		}
		values[e.Name()] = pw
		if fi, _ := e.Info(); fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v; want 0644 (compose mounts it as it is for mssql, postgres, temporal and nonroot)", e.Name(), fi.Mode().Perm())
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("deploy/make-secrets.sh writes %v; docker-compose.yml declares %v", got, want)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: mode %v (%v); want 0700", dir, fi.Mode().Perm(), err)
	}

	out := makeSecrets(t, dir)
	if strings.Contains(out, "created") {
		t.Errorf("second run created files:\n%s", out)
	}
	for name, v := range values {
		if b, _ := os.ReadFile(filepath.Join(dir, name)); strings.TrimSuffix(string(b), "\n") != v {
			t.Errorf("second run changed %s", name)
		}
	}
}

func sqlServerAccepts(pw string) bool {
	var upper, lower, digit, symbol int
	for _, r := range pw {
		switch {
		case unicode.IsUpper(r):
			upper = 1
		case unicode.IsLower(r):
			lower = 1
		case unicode.IsDigit(r):
			digit = 1
		default:
			symbol = 1
		}
	}
	return len(pw) >= 8 && upper+lower+digit+symbol >= 3
}

// container is a service's process run here: container paths of bind mounts
// are the repository files, /run/secrets/NAME a file holding a test password
// for each secret the service is given (and nothing for the others), and the
// image's tools stand-ins.
type container struct {
	t       *testing.T
	svc     types.ServiceConfig
	secrets string            // directory standing for /run/secrets
	tools   map[string]string // absolute container path or command name -> stand-in
	bin     string            // directory of stand-ins put first on PATH
	volumes map[string]string // named volume -> directory standing for it
	env     []string
}

func newContainer(t *testing.T, svc types.ServiceConfig) *container {
	return newContainerWith(t, svc, map[string]string{})
}

// newContainerWith is newContainer with named volumes standing in
// directories shared with other containers (volume name -> directory,
// created and added when missing).
func newContainerWith(t *testing.T, svc types.ServiceConfig, volumes map[string]string) *container {
	t.Helper()
	dir := t.TempDir()
	c := &container{t: t, svc: svc, secrets: filepath.Join(dir, "secrets"), bin: filepath.Join(dir, "bin"), tools: map[string]string{}, volumes: volumes}
	for _, m := range svc.Volumes {
		if m.Type == types.VolumeTypeVolume && volumes[m.Source] == "" {
			volumes[m.Source] = filepath.Join(t.TempDir(), m.Source)
			if err := os.MkdirAll(volumes[m.Source], 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, d := range []string{c.secrets, c.bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name := range granted(svc) {
		if err := os.WriteFile(filepath.Join(c.secrets, name), []byte(testPassword(name)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// testPassword holds characters a careless script would mangle.
func testPassword(secret string) string { return "Pw 1$'" + secret + `"*` }

// tool installs a stand-in shell script for an image's tool: name is a
// command looked up on PATH or an absolute path in the image.
func (c *container) tool(name, script string) string {
	c.t.Helper()
	p := filepath.Join(c.bin, path.Base(name))
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		c.t.Fatal(err)
	}
	c.tools[name] = p
	return p
}

// mapArg turns a container path (or VAR=path) into its stand-in here.
func (c *container) mapArg(a string) string {
	if prefix, v, ok := strings.Cut(a, "="); ok && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(prefix) {
		return prefix + "=" + c.mapPath(v)
	}
	return c.mapPath(a)
}

func (c *container) mapPath(a string) string {
	if stub, ok := c.tools[a]; ok {
		return stub
	}
	if name, ok := strings.CutPrefix(a, "/run/secrets/"); ok {
		return filepath.Join(c.secrets, name)
	}
	if strings.HasPrefix(a, "/") {
		if hp := hostPath(c.t, c.svc, a); hp != "" {
			return hp
		}
		if m, ok := mountFor(c.svc, a); ok && m.Type == types.VolumeTypeVolume {
			return filepath.Join(c.volumes[m.Source], filepath.FromSlash(strings.TrimPrefix(a, path.Clean(m.Target))))
		}
	}
	return a
}

// run runs argv as the container would, with the service's environment.
func (c *container) run(argv []string, extraEnv ...string) (string, error) {
	c.t.Helper()
	args := make([]string, len(argv))
	for i, a := range argv {
		args[i] = c.mapArg(a)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = []string{"PATH=" + c.bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + c.t.TempDir()}
	for k, v := range c.svc.Environment {
		if v != nil {
			cmd.Env = append(cmd.Env, k+"="+c.mapPath(*v))
		}
	}
	cmd.Env = append(cmd.Env, extraEnv...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var secretEnvArgRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=/run/secrets/(.+)$`)

// Every process started through deploy/secret-env.sh (entrypoints and
// healthchecks) gets its password from its own secret, as the variable the
// image reads.
func TestSecretsReachTheirProcess(t *testing.T) {
	p := loadCompose(t)
	checked := 0
	for name, s := range p.Services {
		argvs := map[string][]string{"entrypoint": s.Entrypoint}
		if s.HealthCheck != nil && len(s.HealthCheck.Test) > 1 && s.HealthCheck.Test[0] == "CMD" {
			argvs["healthcheck"] = s.HealthCheck.Test[1:]
		}
		for what, argv := range argvs {
			i := slices.IndexFunc(argv, func(a string) bool { return strings.HasSuffix(a, "/secret-env.sh") })
			dash := slices.Index(argv, "--")
			if i < 0 || dash < i {
				continue
			}
			t.Run(name+"/"+what, func(t *testing.T) {
				c := newContainer(t, s)
				log := filepath.Join(t.TempDir(), "env")
				// The real command replaced by one that records its environment.
				probe := c.tool("probe", `env > "$PROBE_LOG"`+"\n")
				run := append(slices.Clone(argv[:dash+1]), probe)
				out, err := c.run(run, "PROBE_LOG="+log)
				if err != nil {
					t.Fatalf("%q: %v\n%s", argv, err, out)
				}
				env, err := os.ReadFile(log)
				if err != nil {
					t.Fatalf("%q did not run its command: %v\n%s", argv, err, out)
				}
				for _, a := range argv[i+1 : dash] {
					m := secretEnvArgRE.FindStringSubmatch(a)
					if m == nil {
						t.Errorf("%q: argument %q is not VAR=/run/secrets/NAME", argv, a)
						continue
					}
					if !strings.Contains(string(env), "\n"+m[1]+"="+testPassword(m[2])+"\n") && !strings.HasPrefix(string(env), m[1]+"="+testPassword(m[2])+"\n") {
						t.Errorf("%q: the command does not get %s from secret %s", argv, m[1], m[2])
					}
				}
			})
			checked++
		}
	}
	if checked < 8 {
		t.Errorf("only %d entrypoints and healthchecks start through deploy/secret-env.sh; want the Temporal server and schema tool, both SQL Servers (and their healthchecks), the demo database and both backup servers", checked)
	}
}

// deploy/secret-env.sh: the value is the first line of the file, exactly;
// every failure names the variable and the file and the fix, never a value.
func TestSecretEnv(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(root, "deploy/secret-env.sh")
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "s3cr3t with 'quotes' $HOME \\n and spaces\r\nsecond line\n")
	other := write("other", "x-Other-1")
	empty := write("empty", "\n")
	run := func(args ...string) (string, int) {
		out, err := exec.Command("sh", append([]string{script}, args...)...).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}

	out, code := run("A_PW="+good, "B="+other, "--", "sh", "-c", `printf '%s|%s' "$A_PW" "$B"`)
	if code != 0 || out != `s3cr3t with 'quotes' $HOME \n and spaces|x-Other-1` {
		t.Errorf("exported %q (exit %d); want the first line of each file, verbatim", out, code)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"A=" + filepath.Join(dir, "missing"), "--", "true"}, 1, "A: cannot read " + filepath.Join(dir, "missing")},
		{[]string{"A=" + empty, "--", "true"}, 1, "A: " + empty + " is empty"},
		{[]string{"1A=" + good, "--", "true"}, 2, "not an environment variable name"},
		{[]string{"A-B=" + good, "--", "true"}, 2, "not an environment variable name"},
		{[]string{"A=" + good, "true"}, 2, "usage"},
		{[]string{"A=" + good, "--"}, 2, "usage"},
		{nil, 2, "usage"},
	} {
		out, code := run(tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("secret-env.sh %q: exit %d, %q; want exit %d and %q", tc.args, code, out, tc.code, tc.want)
		}
		if strings.Contains(out, "s3cr3t") || strings.Contains(out, "x-Other-1") {
			t.Errorf("secret-env.sh %q printed a password: %q", tc.args, out)
		}
	}
}

// nonrootUID is the uid of distroless' nonroot user, which the worker image
// runs as (USER nonroot:nonroot).
const nonrootUID = 65532

// The worker reads a password_file only when no other user may read it and
// it belongs to the worker's user (or root), and compose mounts a secret
// file with the owner and mode it has on the host (0644, so that the images
// running as other users can read theirs). So every password file of the
// worker's configuration lies in a volume it mounts read-only, where a
// one-shot step it waits for installs it: the right secret, owned by the
// image's user, mode 0400, in a directory only that user may list.
func TestWorkerPasswordFiles(t *testing.T) {
	p := loadCompose(t)
	w := service(t, p, "worker")
	df, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^USER nonroot:nonroot$`).Match(df) {
		t.Fatalf("Dockerfile: the worker image no longer runs as nonroot:nonroot (uid %d), which the password files belong to", nonrootUID)
	}
	cfg := loadConfig(t, "deploy/config.compose.yaml")
	var files []string
	for _, si := range cfg.SQLInstances {
		files = append(files, si.Password.File)
	}
	for _, b := range cfg.BackupServers {
		if b.SMB != nil {
			files = append(files, b.SMB.Password.File)
		}
	}
	volumes := map[string]string{}
	installed := map[string]bool{} // one-shot services run
	for _, f := range files {
		if f == "" {
			continue
		}
		m, ok := mountFor(w, f)
		if !ok || m.Type != types.VolumeTypeVolume {
			t.Errorf("worker: password_file %s is not in a volume a one-shot step installs it into: compose would mount it as it is on the host (0644), which the worker refuses", f)
			continue
		}
		if !m.ReadOnly {
			t.Errorf("worker mounts volume %s read-write: its password files are the install step's to write", m.Source)
		}
		var step string
		for name, s := range p.Services {
			if oneShot(s) && slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool {
				return v.Type == types.VolumeTypeVolume && v.Source == m.Source && !v.ReadOnly
			}) {
				step = name
			}
		}
		if step == "" {
			t.Errorf("worker: no one-shot service writes volume %s, where password_file %s lies", m.Source, f)
			continue
		}
		if d, ok := w.DependsOn[step]; !ok || d.Condition != types.ServiceConditionCompletedSuccessfully {
			t.Errorf("worker does not wait for %s to complete, which installs its password files", step)
		}
		if !installed[step] {
			installed[step] = true
			s := service(t, p, step)
			c := newContainerWith(t, s, volumes)
			for run := 1; run <= 2; run++ { // every `docker compose up` runs it again
				if out, err := c.run(s.Entrypoint); err != nil {
					t.Fatalf("%s, run %d: %q: %v\n%s", step, run, s.Entrypoint, err, out)
				}
			}
		}
		host := filepath.Join(volumes[m.Source], filepath.FromSlash(strings.TrimPrefix(f, path.Clean(m.Target))))
		fi, err := os.Stat(host)
		if err != nil {
			t.Errorf("%s did not install password_file %s: %v", step, f, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != 0o400 || st.Uid != nonrootUID || st.Gid != nonrootUID {
			t.Errorf("%s: mode %v, owner %d:%d; want 0400 and the worker's %d:%d", f, fi.Mode().Perm(), st.Uid, st.Gid, nonrootUID, nonrootUID)
		}
		if b, _ := os.ReadFile(host); strings.TrimSuffix(string(b), "\n") != testPassword(path.Base(f)) {
			t.Errorf("%s holds %q, want the secret %s", f, b, path.Base(f))
		}
		dfi, err := os.Stat(filepath.Dir(host))
		if err != nil {
			t.Fatal(err)
		}
		if dst := dfi.Sys().(*syscall.Stat_t); dfi.Mode().Perm() != 0o500 || dst.Uid != nonrootUID {
			t.Errorf("%s: directory mode %v, owner %d; want 0500 and the worker's", path.Dir(f), dfi.Mode().Perm(), dst.Uid)
		}
	}
}

// deploy/install-secrets.sh: each failure names the file and the fix,
// never a value, and installs nothing half-way.
func TestInstallSecretsErrors(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(root, "deploy/install-secrets.sh")
	good := filepath.Join(dir, "good")
	empty := filepath.Join(dir, "empty")
	for p, content := range map[string]string{good: "s3cr3t-Value\n", empty: ""} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dest := filepath.Join(dir, "dest")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"65532:65532", dest, filepath.Join(dir, "missing")}, 1, "cannot read " + filepath.Join(dir, "missing")},
		{[]string{"65532:65532", dest, empty}, 1, empty + " is empty"},
		{[]string{"65532:65532", dest, dir}, 1, "cannot read " + dir},
		{[]string{"nonroot", dest, good}, 2, "usage"},
		{[]string{"65532", dest, good}, 2, "usage"},
		{[]string{"65532:65532", dest}, 2, "usage"},
	} {
		out, err := exec.Command("sh", append([]string{script}, tc.args...)...).CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code || !strings.Contains(string(out), tc.want) {
			t.Errorf("install-secrets.sh %q: exit %d, %q; want exit %d and %q", tc.args, code, out, tc.code, tc.want)
		}
		if strings.Contains(string(out), "s3cr3t") {
			t.Errorf("install-secrets.sh %q prints a password: %q", tc.args, out)
		}
		if entries, _ := os.ReadDir(dest); len(entries) != 0 {
			t.Errorf("install-secrets.sh %q left %d files in %s", tc.args, len(entries), dest)
		}
	}
}
