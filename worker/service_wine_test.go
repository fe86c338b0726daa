//go:build wine && linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// The Windows service mode, driven through Wine's Service Control Manager
// (`make test-windows`, which installs Wine): the worker built for Windows
// is started by `worker service start`, runs under svc.Run with its config
// and a secret read by Windows file paths, polls a real Temporal server
// (a health check from here is answered by the service's process), stops
// gracefully on `worker service stop`, reports a start that fails, and is
// removed by `worker service uninstall`; `service run` at a prompt says
// what to run instead.
//
// Wine 8 cannot run `worker service install`: its Service Control Manager
// refuses the delayed automatic start (ChangeServiceConfig2 level 3), does
// not keep recovery actions (level 2 is accepted and dropped) and has no
// failure-actions flag (level 4), and its event log is a stub. So the test
// registers the service with sc.exe, with the command line install writes
// (runArgs); install's other settings and the events are Windows' alone.
func TestWindowsServiceUnderWine(t *testing.T) {
	w := newWine(t)
	dir := t.TempDir()
	exe := filepath.Join(dir, "worker.exe")
	began := time.Now()
	build := exec.Command(goTool(t), "build", "-o", exe, ".")
	build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the worker for Windows: %v\n%s", err, out)
	}
	t.Logf("worker.exe built in %s", time.Since(began).Round(time.Millisecond))

	srv, err := devserver.Start(context.Background(), devserver.Options{UIPort: devserver.NoUI, SearchAttributes: workflows.SearchAttributeTypes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })

	// The secrets are named relative to the config, with Windows
	// separators: the worker resolves them by Windows path rules.
	for _, d := range []string{"secrets", "bak01", "bak02"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(dir, "secrets", "manifest-key"), "0123456789abcdef0123456789abcdef0123456789abcdef\r\n")
	writeFile(t, filepath.Join(dir, "secrets", "sql01.txt"), "backup-password\r\n")
	cfg := filepath.Join(dir, "backupcycle.yaml")
	writeFile(t, cfg, fmt.Sprintf(wineSite, srv.FrontendAddress(), winPath(dir)))

	// At a prompt, `service run` says what to run instead, and writes no
	// log file: only a process the Service Control Manager started is one.
	prompt := filepath.Join(dir, "prompt.log")
	out, err := w.output(winPath(exe), "service", "run", "--name", "backupcycle-worker-wine", "--log-file", winPath(prompt), "--config", winPath(cfg))
	if err == nil || !strings.Contains(out, "`worker service run` is what the Service Control Manager starts: use `worker service start --name backupcycle-worker-wine`") {
		t.Errorf("service run at a prompt: %v, %q", err, out)
	}
	if _, err := os.Stat(prompt); err == nil {
		t.Errorf("service run at a prompt wrote %s", prompt)
	}

	so := serviceOptions{action: actionInstall, name: "backupcycle-worker-wine", logFile: winPath(filepath.Join(dir, "service.log")),
		run: options{configFile: winPath(cfg)}}
	cmdline := quoteArgs(append([]string{winPath(exe)}, so.runArgs()...))
	w.run(t, "sc", "create", so.name, "binpath=", cmdline, "start=", "demand", "displayname=", so.displayName())

	// start: the worker polls Temporal, then the service is RUNNING.
	began = time.Now()
	out = w.run(t, winPath(exe), "service", "start", "--name", so.name)
	m := regexp.MustCompile(`service backupcycle-worker-wine running \(pid (\d+)\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("service start: %q", out)
	}
	t.Logf("service start: RUNNING after %s", time.Since(began).Round(time.Millisecond))
	pid, _ := strconv.Atoi(m[1])

	c, err := client.Dial(context.Background(), config.Temporal{Address: srv.FrontendAddress()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	h, err := c.RunHealthCheck(hctx)
	cancel()
	if err != nil {
		t.Fatalf("health check against the service: %v\nthe service's log:\n%s", err, readFile(t, filepath.Join(dir, "service.log")))
	}
	// The service's process answered, and it read the manifest key by the
	// config's relative Windows path.
	if h.Result.Worker.PID != pid || h.Result.Worker.ManifestAuthentication != "hmac-sha256, key 2026-01 signs" {
		t.Errorf("health check answered by %+v, want pid %d (the service) with the key file read", h.Result.Worker, pid)
	}

	began = time.Now()
	if out := w.run(t, winPath(exe), "service", "stop", "--name", so.name); !strings.Contains(out, "service backupcycle-worker-wine stopped") {
		t.Errorf("service stop: %q", out)
	}
	t.Logf("service stop: STOPPED after %s", time.Since(began).Round(time.Millisecond))
	log := readFile(t, filepath.Join(dir, "service.log"))
	for _, want := range []string{
		"backupcycle worker ready in", "manifests: hmac-sha256, key 2026-01 signs",
		"The backupcycle worker (service backupcycle-worker-wine) started: it polls Temporal.",
		"Stopped Worker", "The backupcycle worker (service backupcycle-worker-wine) stopped.",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the service's log lacks %q:\n%s", want, log)
		}
	}
	// The start-up checks opened each backup server's location, a Windows
	// path, and wrote, listed and read back a file there (the SQL instances
	// listen nowhere: their checks fail). Wine 8 cannot delete a file the
	// way Go's os.Root does (FileDispositionInformationEx: "Invalid
	// function"), so the removal is Windows' alone.
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"status":"MISSING"`) && strings.Contains(line, `"server":"bak0`) &&
			!(strings.Contains(line, `"check":"delete"`) && strings.Contains(line, "Invalid function.")) {
			t.Errorf("a backup server's check failed: %s", line)
		}
	}

	// A start that fails: the service stops with its exit code, start says
	// where to look, and the log says why.
	writeFile(t, cfg, "temporal:\n  address: [\n")
	out, err = w.output(winPath(exe), "service", "start", "--name", so.name)
	if err == nil || !strings.Contains(out, "service backupcycle-worker-wine did not start (exit code 1): the event log says why") {
		t.Errorf("service start with a config that does not load: %v, %q", err, out)
	}
	log = readFile(t, filepath.Join(dir, "service.log"))
	if !strings.Contains(log, "did not start: ") || !strings.Contains(log, "The config file does not load") {
		t.Errorf("the service's log lacks the failed start:\n%s", log)
	}

	if out := w.run(t, winPath(exe), "service", "uninstall", "--name", so.name); !strings.Contains(out, "service backupcycle-worker-wine removed") {
		t.Errorf("service uninstall: %q", out)
	}
	if out, err := w.output(winPath(exe), "service", "start", "--name", so.name); err == nil ||
		!strings.Contains(out, "service backupcycle-worker-wine: ") || !strings.Contains(out, "installed?") {
		t.Errorf("service start after uninstall: %v, %q", err, out)
	}
}

// wineSite is a config for the service: Temporal at %[1]s, the backup
// servers' locations under the Windows path %[2]s, the secrets in files
// named relative to it.
const wineSite = `temporal:
  address: %[1]s
manifest_keys:
  - {id: "2026-01", key_file: 'secrets\manifest-key'}
sql_instances:
  - {name: sql01, address: 127.0.0.1:1, user: backup, password_file: 'secrets\sql01.txt'}
  - {name: verify, address: 127.0.0.1:2, user: backup, password_file: 'secrets\sql01.txt'}
backup_servers:
  - name: bak01
    unc_paths: ['\\bak01\backup']
    location: %[2]s\bak01
    verify_instance: verify
    restore_data_dir: D:\data
    restore_log_dir: D:\log
  - name: bak02
    unc_paths: ['\\bak02\backup']
    location: %[2]s\bak02
    verify_instance: verify
    restore_data_dir: D:\data
    restore_log_dir: D:\log
databases:
  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02]}
`

// wineEnv is a private Wine prefix: its own registry, Service Control
// Manager and wineserver, stopped when the test ends.
type wineEnv struct{ env []string }

func newWine(t *testing.T) *wineEnv {
	t.Helper()
	for _, tool := range []string{"wine", "wineserver", "x86_64-w64-mingw32-dlltool", "x86_64-w64-mingw32-ld"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s: %v: `make test-windows` installs Wine and the MinGW-w64 binutils (scripts/test-deps.sh)", tool, err)
		}
	}
	prefix := filepath.Join(t.TempDir(), "prefix")
	w := &wineEnv{env: append(os.Environ(), "WINEPREFIX="+prefix, "WINEDEBUG=-all", "WINEDLLOVERRIDES=mscoree,mshtml=", "DISPLAY=")}
	t.Cleanup(w.kill)
	began := time.Now()
	w.run(t, "wineboot", "--init")
	t.Logf("Wine prefix initialised in %s", time.Since(began).Round(time.Millisecond))
	// Go programs since 1.24 take their random numbers from ProcessPrng in
	// bcryptprimitives.dll (Windows 10 and later), which Wine 8 lacks: a
	// DLL whose only export forwards it to advapi32's RtlGenRandom.
	def := filepath.Join(t.TempDir(), "bcryptprimitives.def")
	writeFile(t, def, "LIBRARY bcryptprimitives.dll\nEXPORTS\nProcessPrng = advapi32.SystemFunction036\n")
	obj := strings.TrimSuffix(def, ".def") + ".o"
	dll := filepath.Join(prefix, "drive_c", "windows", "system32", "bcryptprimitives.dll")
	for _, args := range [][]string{
		{"x86_64-w64-mingw32-dlltool", "-d", def, "-e", obj, "-D", "bcryptprimitives.dll"},
		{"x86_64-w64-mingw32-ld", "-shared", "--entry", "0", "-o", dll, obj},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// Wine shuts its services down once no other program runs in the
	// prefix (a service is a "system" process to it): cmd.exe waiting on
	// its input is that program until the test ends.
	keeper := exec.Command("wine", "cmd.exe")
	keeper.Env = w.env
	stdin, err := keeper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := keeper.Start(); err != nil {
		t.Fatalf("wine cmd.exe: %v", err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		w.kill()
		_ = keeper.Wait()
	})
	return w
}

// kill ends every process of the prefix, the service's among them.
func (w *wineEnv) kill() {
	k := exec.Command("wineserver", "-k")
	k.Env = w.env
	_ = k.Run()
}

// output runs a Windows program under Wine and returns what it printed.
func (w *wineEnv) output(prog string, args ...string) (string, error) {
	cmd := exec.Command("wine", append([]string{prog}, args...)...)
	cmd.Env = w.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// run is output that fails the test on an error.
func (w *wineEnv) run(t *testing.T, prog string, args ...string) string {
	t.Helper()
	out, err := w.output(prog, args...)
	if err != nil {
		t.Fatalf("wine %s %q: %v\n%s", prog, args, err, out)
	}
	return out
}

// winPath is the Windows path of a Linux one: Wine's Z: drive is /.
func winPath(p string) string { return `Z:` + strings.ReplaceAll(p, "/", `\`) }

// quoteArgs is a Windows command line of args (none has a quote).
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if strings.ContainsAny(a, " \t") {
			q[i] = `"` + a + `"`
		}
	}
	return strings.Join(q, " ")
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
