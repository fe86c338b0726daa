package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/credtest"
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/internal/workerhost"
	"github.com/backupcycle/backupcycle/workflows"
)

const (
	unitFile    = "../deploy/systemd/backupcycle-worker.service"
	unitEnvFile = "../deploy/systemd/worker.env"
)

// unit is a systemd unit file: section -> key -> values in order (a key
// may repeat, an empty assignment resets it).
type unit map[string]map[string][]string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value in a section: %q", path, n, line)
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if v == "" {
				u[section][k] = []string{""}
				continue
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// last is the value in force of key in [Service].
func (u unit) last(key string) string {
	v := u["Service"][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// credentials are the unit's LoadCredential= ids and source files.
func (u unit) credentials() map[string]string {
	m := map[string]string{}
	for _, v := range u["Service"]["LoadCredential"] {
		id, src, _ := strings.Cut(v, ":")
		m[id] = src
	}
	return m
}

// systemdTool is the path of systemd's tool name (systemd-analyze),
// installed by scripts/test-deps.sh.
func systemdTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s checks the unit: install systemd (make test-deps): %v", name, err)
	}
	return p
}

// verifiableUnit is the unit with its ExecStart program replaced by an
// executable that exists here (systemd-analyze verify checks it).
func verifiableUnit(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), filepath.Base(unitFile))
	data = []byte(strings.ReplaceAll(string(data), "/usr/local/bin/backupcycle-worker", self))
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// systemd itself finds nothing to say about the unit: no unknown key, no
// bad value (which it would only warn about and ignore, leaving the
// sandbox weaker than it reads).
func TestSystemdUnitVerifies(t *testing.T) {
	analyze := systemdTool(t, "systemd-analyze")
	p := verifiableUnit(t)
	cmd := exec.Command(analyze, "verify", p)
	cmd.Dir = filepath.Dir(p)
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unitFile, err, out)
	}
}

// maxExposure is the highest `systemd-analyze security` exposure the unit
// may have (0 safest, 10 unrestricted; below 2 "OK"). The rest is what a
// worker needs: the network to reach Temporal, SQL Server and the shares.
const maxExposure = 2.0

func TestSystemdUnitSecurityExposure(t *testing.T) {
	analyze := systemdTool(t, "systemd-analyze")
	p := verifiableUnit(t)
	out, err := exec.Command(analyze, "security", "--offline=yes", "--no-pager", p).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security printed no exposure level:\n%s", out)
	}
	exposure, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security: exposure %.1f", exposure)
	if exposure > maxExposure {
		t.Errorf("exposure %.1f, want at most %.1f:\n%s", exposure, maxExposure, out)
	}
}

// The unit's sandbox and its stop: what systemd-analyze scores only in
// part, and what the worker relies on.
func TestSystemdUnitHardening(t *testing.T) {
	u := readUnit(t, unitFile)
	for key, want := range map[string]string{
		"DynamicUser": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"NoNewPrivileges": "yes", "CapabilityBoundingSet": "", "AmbientCapabilities": "", "PrivateDevices": "yes",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX", "Restart": "on-failure", "KillSignal": "SIGTERM",
		"ExecReload": "/bin/kill -HUP $MAINPID", "Type": "exec", "UMask": "0077",
	} {
		if got, ok := u["Service"][key]; !ok || u.last(key) != want {
			t.Errorf("[Service] %s=%q, want %q", key, got, want)
		}
	}
	if got := u["Service"]["SystemCallFilter"]; len(got) == 0 || got[0] != "@system-service" {
		t.Errorf("SystemCallFilter=%q, want @system-service first (an allow list)", got)
	}
	// PrivateUsers= would show the credentials' owner, root, as nobody,
	// and the worker refuses a secret file another user owns.
	if _, ok := u["Service"]["PrivateUsers"]; ok {
		t.Error("PrivateUsers= is set: the worker would refuse its credentials")
	}
	stop, err := time.ParseDuration(strings.TrimSuffix(u.last("TimeoutStopSec"), "s") + "s")
	if err != nil || stop < workerhost.StopTimeout+20*time.Second {
		t.Errorf("TimeoutStopSec=%q: want room for the graceful stop (%s for the activities, then their reports)", u.last("TimeoutStopSec"), workerhost.StopTimeout)
	}
	if creds := u.credentials(); len(creds) == 0 {
		t.Error("no LoadCredential=: the secrets would have to be in the environment or readable by the dynamic user")
	}
	exec := u.last("ExecStart")
	if !strings.Contains(exec, "--config /etc/backupcycle/config.yaml") || !strings.Contains(exec, "$WORKER_ARGS") {
		t.Errorf("ExecStart=%s: want --config /etc/backupcycle/config.yaml and $WORKER_ARGS", exec)
	}
	// The example environment file only sets variables (all commented
	// out), as EnvironmentFile= reads it.
	env, err := os.ReadFile(unitEnvFile)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(env), "\n") {
		if l = strings.TrimSpace(l); l != "" && l[0] != '#' && !regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(l) {
			t.Errorf("%s:%d: %q is not VAR=value", unitEnvFile, i+1, l)
		}
	}
}

// sandboxUID is the user the sandboxed worker runs as, standing for the
// dynamic user systemd allocates.
const sandboxUID = 65534

// sandboxScript builds, in a new mount namespace, what the unit's
// sandbox settings make of the file system, then runs "$@" as sandboxUID
// without capabilities or new privileges: the staged install (APP) at
// /mnt/app, the credentials (CREDS) read-only at /mnt/credentials,
// ProtectSystem=strict (every mount read-only but /proc, /sys, /dev),
// PrivateTmp=, ProtectHome=, PrivateDevices= (a /dev of null, zero, full,
// random, urandom), NoNewPrivileges=, an empty CapabilityBoundingSet=.
// Before the worker, the same restrictions run a probe that prints what
// they allow, so that an emulation that did nothing fails the test.
const sandboxScript = `set -eu
mount --make-rprivate /
mount -t tmpfs -o mode=0755 tmpfs /mnt
mkdir /mnt/app /mnt/credentials
mount --bind "$APP" /mnt/app
mount --bind -o ro "$CREDS" /mnt/credentials
mount -o remount,bind,ro /mnt/credentials
for m in $(awk '{print $5}' /proc/self/mountinfo | sort -u); do
  case "$m" in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*) continue;; esac
  mount -o remount,bind,ro "$m" 2>/dev/null || true
done
mount -t tmpfs -o mode=1777 tmpfs /tmp
for d in /home /root /run/user; do
  if [ -d "$d" ]; then mount -t tmpfs -o ro,mode=0755 tmpfs "$d"; fi
done
mount -t tmpfs -o mode=0755,nosuid tmpfs /dev
mknod -m 0666 /dev/null c 1 3
mknod -m 0666 /dev/zero c 1 5
mknod -m 0666 /dev/full c 1 7
mknod -m 0666 /dev/random c 1 8
mknod -m 0666 /dev/urandom c 1 9
ln -s /proc/self/fd /dev/fd
drop() { setpriv --reuid=$SANDBOX_UID --regid=$SANDBOX_UID --clear-groups --no-new-privs --bounding-set=-all --inh-caps=-all "$@"; }
drop sh -c '
  echo "probe: uid $(id -u)"
  grep -E "^(CapEff|CapBnd|NoNewPrivs):" /proc/self/status | sed "s/^/probe: /"
  for p in /etc /usr /var /mnt/app /mnt/credentials /dev/shm /tmp; do
    if ( : > "$p/.sandbox-probe" ) 2>/dev/null; then echo "probe: writable $p"; rm -f "$p/.sandbox-probe"; fi
  done
  for h in /root /home; do
    if [ -n "$(ls -A "$h" 2>/dev/null)" ]; then echo "probe: a home is visible: $h"; fi
  done
  if [ -e /dev/sda ] || [ -e /dev/vda ] || [ -e /dev/mem ]; then echo "probe: a disk device is visible"; fi
  echo "probe: done"' >&2
exec setpriv --reuid=$SANDBOX_UID --regid=$SANDBOX_UID --clear-groups --no-new-privs --bounding-set=-all --inh-caps=-all \
  env -i PATH=/usr/bin:/bin CREDENTIALS_DIRECTORY=/mnt/credentials "$@"
`

// The worker runs, and stops, under the unit's sandbox as far as it can be
// built without systemd (the seccomp filters, address families and
// /proc restrictions are systemd's alone): its ExecStart with
// EnvironmentFile='s WORKER_ARGS, as an unprivileged user without
// capabilities on a read-only file system, its secrets the unit's
// LoadCredential= ids written as systemd writes them (0400, root's, an ACL
// entry for the user) and named ${CREDENTIALS_DIRECTORY}/ID in its
// config. It polls a real Temporal server, reads the manifest key from its
// credential, and stops on the unit's KillSignal within TimeoutStopSec.
func TestWorkerRunsInTheSystemdSandbox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the sandbox is built with mount namespaces and the worker run as another user, as systemd does: run the test as root")
	}
	for _, tool := range []string{"unshare", "setpriv", "mount", "mknod", "awk"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the sandbox needs %s (util-linux, coreutils): %v", tool, err)
		}
	}
	u := readUnit(t, unitFile)
	creds := u.credentials()
	for _, id := range []string{"sql01-password", "bak-smb-password", "manifest-key"} {
		if _, ok := creds[id]; !ok {
			t.Fatalf("the unit has no LoadCredential=%s: the README's config names it", id)
		}
	}
	srv, err := devserver.Start(context.Background(), devserver.Options{UIPort: devserver.NoUI, SearchAttributes: workflows.SearchAttributeTypes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })

	stage := t.TempDir()
	app, credDir := filepath.Join(stage, "app"), filepath.Join(stage, "credentials")
	for _, d := range []string{app, credDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const manifestKey = "sandbox-manifest-key-0123456789abcdef0123456789"
	for id := range creds {
		content := "secret-of-" + id
		if id == "manifest-key" {
			content = manifestKey
		}
		if _, err := credtest.Write(credDir, id, []byte(content+"\n"), sandboxUID); err != nil {
			t.Fatal(err)
		}
	}

	// The credentials directory as systemd makes it: root's, the service's
	// user let in by an ACL entry (set after the mode: chmod resets the
	// ACL's mask).
	if err := os.Chmod(credDir, 0o500); err != nil {
		t.Fatal(err)
	}
	if err := credtest.SetUserACL(credDir, sandboxUID, credtest.Read|credtest.Execute); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(app, "backupcycle-worker")
	if out, err := exec.Command(goTool(t), "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// Two instances and two backup servers, as a cycle needs, their
	// secrets the unit's credentials.
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "temporal:\n  address: %s\nmanifest_keys:\n  - {id: \"2026-01\", key_file: \"${CREDENTIALS_DIRECTORY}/manifest-key\"}\nsql_instances:\n", srv.FrontendAddress())
	for i, name := range []string{"sql01", "verify"} {
		fmt.Fprintf(&cfg, "  - {name: %s, address: \"127.0.0.1:%d\", user: backup, password_file: \"${CREDENTIALS_DIRECTORY}/sql01-password\"}\n", name, i+1)
	}
	cfg.WriteString("backup_servers:\n")
	for _, name := range []string{"bak01", "bak02"} {
		fmt.Fprintf(&cfg, "  - {name: %s, unc_paths: ['\\\\127.0.0.1\\%[1]s'], location: \"smb://127.0.0.1:1/%[1]s\", verify_instance: verify,\n"+
			"     smb: {user: backup, password_file: \"${CREDENTIALS_DIRECTORY}/bak-smb-password\"}, restore_data_dir: 'C:\\data', restore_log_dir: 'C:\\log'}\n", name)
	}
	cfg.WriteString("databases:\n  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02]}\n")
	if err := os.WriteFile(filepath.Join(app, "config.yaml"), []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(filepath.Join(app, "config.yaml")); err != nil {
		t.Fatalf("the sandbox's config does not load: %v", err)
	}
	const queue = "backupcycle-sandbox"
	env := "WORKER_ARGS=--task-queue " + queue + "\nBACKUPCYCLE_LOG_LEVEL=info\n"

	// ExecStart, with the staged paths and EnvironmentFile='s variables
	// (an unquoted $VAR is split into words, as systemd does).
	vars := map[string]string{}
	for _, l := range strings.Split(env, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			vars[k] = v
		}
	}
	var argv, envv []string
	for _, w := range strings.Fields(u.last("ExecStart")) {
		switch {
		case w == "/usr/local/bin/backupcycle-worker":
			argv = append(argv, "/mnt/app/backupcycle-worker")
		case w == "/etc/backupcycle/config.yaml":
			argv = append(argv, "/mnt/app/config.yaml")
		case strings.HasPrefix(w, "$"):
			argv = append(argv, strings.Fields(vars[w[1:]])...)
		default:
			argv = append(argv, w)
		}
	}
	for k, v := range vars {
		envv = append(envv, k+"="+v)
	}
	slices.Sort(envv)
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "--", "sh", "-c", sandboxScript, "sandbox", "env"},
		append(envv, argv...)...)...)
	cmd.Env = append(os.Environ(), "APP="+app, "CREDS="+credDir, "SANDBOX_UID="+strconv.Itoa(sandboxUID))
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(stdout.String(), "backupcycle worker ready"); time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-exited:
			killed = true
			t.Fatalf("the sandboxed worker exited before it was ready: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandboxed worker is not ready after 2 minutes\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
		}
	}

	// The restrictions were in force.
	probe := stderr.String()
	for _, want := range []string{
		fmt.Sprintf("probe: uid %d", sandboxUID), "probe: CapEff:\t0000000000000000", "probe: CapBnd:\t0000000000000000",
		"probe: NoNewPrivs:\t1", "probe: writable /tmp", "probe: done",
	} {
		if !strings.Contains(probe, want) {
			t.Errorf("the sandbox probe lacks %q:\n%s", want, probe)
		}
	}
	for _, leak := range []string{"writable /etc", "writable /usr", "writable /var", "writable /mnt/app", "writable /mnt/credentials", "a home is visible", "a disk device"} {
		if strings.Contains(probe, "probe: "+leak) {
			t.Errorf("the sandbox leaks: %s", leak)
		}
	}

	banner := stdout.String()
	for _, want := range []string{"task queue " + queue, "manifests: hmac-sha256, key 2026-01 signs"} {
		if !strings.Contains(banner, want) {
			t.Errorf("the ready banner lacks %q (WORKER_ARGS, the manifest key credential):\n%s", want, banner)
		}
	}
	if strings.Contains(stderr.String(), "secret unavailable") {
		t.Errorf("a secret was not read from its credential:\n%s", stderr)
	}

	// KillSignal=, within TimeoutStopSec=: the graceful stop.
	sig := map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT}[u.last("KillSignal")]
	if sig == 0 {
		t.Fatalf("KillSignal=%s: the worker stops gracefully on SIGTERM or SIGINT", u.last("KillSignal"))
	}
	timeout, err := time.ParseDuration(strings.TrimSuffix(u.last("TimeoutStopSec"), "s") + "s")
	if err != nil {
		t.Fatalf("TimeoutStopSec=%s: %v", u.last("TimeoutStopSec"), err)
	}
	began := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		killed = true
		if err != nil {
			t.Errorf("the worker exited with %v on %s, want 0\nstderr:\n%s", err, u.last("KillSignal"), stderr)
		}
	case <-time.After(timeout):
		t.Fatalf("the worker did not stop within TimeoutStopSec=%s: systemd would kill it", timeout)
	}
	if !strings.Contains(stdout.String(), "worker stopped") {
		t.Errorf("no \"worker stopped\" after %s:\n%s", u.last("KillSignal"), stdout)
	}
	t.Logf("ready in the sandbox, stopped %s after %s", time.Since(began).Round(time.Millisecond), u.last("KillSignal"))
}
