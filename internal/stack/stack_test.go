//go:build stack

// The production-shaped stack, run for real (`make test-stack`, about four
// minutes on 2 cores once the Temporal programs are built): it is kept out of
// `make test` by its build tag.
package stack_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/stack"
)

const repo = "../.."

// build builds a command of this module into dir.
func build(t *testing.T, dir, pkg string) string { return buildTags(t, dir, pkg, "") }

// buildTags builds a command of this module with build tags into dir.
func buildTags(t *testing.T, dir, pkg, tags string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-tags", tags, "-o", out, pkg)
	cmd.Dir = repo
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %q %s: %v\n%s", tags, pkg, err, b)
	}
	return out
}

// temporalTools is the directory of the Temporal programs, built once.
func temporalTools(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("bash", filepath.Join(repo, "scripts", "temporal-tools.sh")).Output()
	if err != nil {
		t.Fatalf("scripts/temporal-tools.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// removeOutside removes what a stack on state keeps outside it: the
// PostgreSQL cluster under stack.PostgresRoot and the backup servers'
// shares, when they live outside the state directory
// (devenv.Options.ShareRoot): <state>/site/<server>/backup links to them.
func removeOutside(state string) {
	_ = os.RemoveAll(stack.PostgresDir(state))
	links, _ := filepath.Glob(filepath.Join(state, "site", "*", "backup"))
	for _, l := range links {
		if fi, err := os.Lstat(l); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			if target, err := filepath.EvalSymlinks(l); err == nil {
				_ = os.RemoveAll(filepath.Dir(target))
			}
		}
	}
}

// running is a stack command started by the test: every process it starts
// inherits the environment variable mark, by which leftovers are found.
type running struct {
	cmd    *exec.Cmd
	lines  chan string
	output *bytes.Buffer
	exited chan error
}

func startStack(t *testing.T, bin, state, tools, worker, mark string) *running {
	t.Helper()
	cmd := exec.Command(bin, "--state-dir", state, "--tools", tools, "--worker", worker, "--repo", repo)
	cmd.Env = append(os.Environ(), mark)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &running{cmd: cmd, lines: make(chan string, 100), output: &bytes.Buffer{}, exited: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		close(r.lines)
	}()
	go func() {
		err := cmd.Wait()
		pw.Close()
		r.exited <- err
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
		_ = stack.Stop(state, time.Minute)
	})
	return r
}

// ready reads the stack's output until it is ready and returns the lines.
func (r *running) ready(t *testing.T, timeout time.Duration) []string {
	t.Helper()
	var lines []string
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				t.Fatalf("the stack exited before it was ready:\n%s", strings.Join(lines, "\n"))
			}
			lines = append(lines, l)
			if strings.HasPrefix(l, "  stop:") {
				return lines
			}
		case <-deadline:
			t.Fatalf("the stack was not ready after %s:\n%s", timeout, strings.Join(lines, "\n"))
		}
	}
}

// stopped waits for the stack command to exit and returns the rest of its
// output.
func (r *running) stopped(t *testing.T, timeout time.Duration) string {
	t.Helper()
	var rest []string
	done := time.After(timeout)
	for {
		select {
		case l, ok := <-r.lines:
			if ok {
				rest = append(rest, l)
				continue
			}
			r.lines = nil
		case err := <-r.exited:
			if r.lines != nil {
				for l := range r.lines {
					rest = append(rest, l)
				}
			}
			if err != nil {
				t.Fatalf("the stack exited with %v:\n%s", err, strings.Join(rest, "\n"))
			}
			return strings.Join(rest, "\n")
		case <-done:
			t.Fatalf("the stack did not stop within %s:\n%s", timeout, strings.Join(rest, "\n"))
		}
	}
}

// leftovers are the processes whose environment holds mark.
func leftovers(t *testing.T, mark string) []string {
	t.Helper()
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil || !bytes.Contains(env, []byte(mark+"\x00")) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		out = append(out, fmt.Sprintf("pid %s: %s", filepath.Base(d), strings.ReplaceAll(string(cmdline), "\x00", " ")))
	}
	return out
}

func noLeftovers(t *testing.T, mark string) {
	t.Helper()
	// A process group killed a moment ago may still be leaving.
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := leftovers(t, mark)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left running after the stack stopped:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var configRE = regexp.MustCompile(`--config (\S+) run --database Sales --wait`)

// The stack comes up from the compose file's own scripts on PostgreSQL,
// runs one verified cycle through the starter with bak02's copy on the
// worker of bak02's task queue, and stops on Ctrl-C leaving no process;
// brought up again on the same state directory (the schema and namespace
// steps find their work done), it stops on `stack --stop` likewise.
func TestStack(t *testing.T) {
	bin := t.TempDir()
	stackBin := build(t, bin, "./internal/stack/cmd/stack")
	worker := build(t, bin, "./worker")
	starter := build(t, bin, "./starter")
	tools := temporalTools(t)
	state := t.TempDir()
	t.Cleanup(func() { removeOutside(state) })
	raw := make([]byte, 8)
	_, _ = rand.Read(raw)
	mark := "BACKUPCYCLE_STACK_TEST=" + hex.EncodeToString(raw)

	began := time.Now()
	r := startStack(t, stackBin, state, tools, worker, mark)
	lines := r.ready(t, 4*time.Minute)
	t.Logf("first bring-up (initdb, schema, namespace, site created): %s\n%s", time.Since(began).Round(time.Second), strings.Join(lines, "\n"))
	// The check for leftovers sees the stack while it runs: the supervisor,
	// PostgreSQL, the server, the Web UI, the two workers, the smbds.
	if left := leftovers(t, mark); len(left) < 6 {
		t.Fatalf("only %d processes of the running stack carry %s:\n%s", len(left), mark, strings.Join(left, "\n"))
	}
	m := configRE.FindStringSubmatch(strings.Join(lines, "\n"))
	if m == nil {
		t.Fatalf("the stack printed no starter command:\n%s", strings.Join(lines, "\n"))
	}
	cycle := exec.Command(starter, "--config", m[1], "run", "--database", "Sales", "--wait")
	out, err := cycle.CombinedOutput()
	if err != nil {
		t.Fatalf("starter run --wait: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "VERIFIED Sales sequence 1") {
		t.Fatalf("starter run --wait printed no verified cycle:\n%s", out)
	}
	t.Logf("cycle:\n%s", out)
	// The remote copy went to bak02, whose copies run on the worker of its
	// task queue: that worker ran a copy.
	wlog, err := os.ReadFile(filepath.Join(state, "logs", "worker-bak02.log"))
	if err != nil {
		t.Fatal(err)
	}
	copied := regexp.MustCompile(`"msg":"set copied".*"activity":"CopyToRemote".*"server":"` + stack.CopyServer + `"`)
	if !copied.Match(wlog) {
		t.Errorf("the worker of task queue %s copied no set to %s; its log:\n%s", stack.CopyQueue, stack.CopyServer, wlog)
	}

	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest := r.stopped(t, 2*time.Minute)
	if !strings.Contains(rest, "stack stopped") {
		t.Errorf("after Ctrl-C the stack printed %q; want \"stack stopped\"", rest)
	}
	noLeftovers(t, mark)

	began = time.Now()
	r = startStack(t, stackBin, state, tools, worker, mark)
	lines = r.ready(t, 3*time.Minute)
	t.Logf("second bring-up (state kept): %s\n%s", time.Since(began).Round(time.Second), strings.Join(lines, "\n"))
	stopOut, err := exec.Command(stackBin, "--stop", "--state-dir", state).CombinedOutput()
	if err != nil {
		t.Fatalf("stack --stop: %v\n%s", err, stopOut)
	}
	r.stopped(t, 2*time.Minute)
	noLeftovers(t, mark)
	for _, f := range []string{stack.PidFile, "pids/postgresql", "pids/temporal", "pids/worker"} {
		if _, err := os.Stat(filepath.Join(state, f)); err == nil {
			t.Errorf("%s is left in the state directory after the stack stopped", f)
		}
	}
}
