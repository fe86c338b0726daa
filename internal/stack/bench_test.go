//go:build stack

package stack_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/stack"
)

var frontendRE = regexp.MustCompile(`Temporal frontend: (\S+) \(namespace (\S+)\)`)

// BenchmarkStackFleetOverhead brings the stack up and runs
// internal/crashtest's BenchmarkFleetOverhead against it and, in the same
// run, against the embedded server (`make bench-stack`): cycles per
// minute, orchestration overhead, history and RPCs per cycle side by side,
// and the CPU per cycle of PostgreSQL and of the Temporal server (each
// with its child processes). The benchmark's fleet runs on a worker of its
// own task queue in the benchmark's process, with its own emulated site:
// the stack's workers and site stay idle.
func BenchmarkStackFleetOverhead(b *testing.B) {
	for i := 0; i < b.N; i++ {
		bin := b.TempDir()
		run := func(name string, args ...string) string {
			cmd := exec.Command(name, args...)
			cmd.Dir = repo
			out, err := cmd.Output()
			if err != nil {
				b.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
			}
			return strings.TrimSpace(string(out))
		}
		run("go", "build", "-o", bin, "./internal/stack/cmd/stack", "./worker")
		tools := run("bash", filepath.Join("scripts", "temporal-tools.sh"))
		state := b.TempDir()
		cmd := exec.Command(filepath.Join(bin, "stack"), "--state-dir", state, "--tools", tools, "--worker", filepath.Join(bin, "worker"),
			"--repo", repo)
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = stack.Stop(state, time.Minute)
			_ = cmd.Wait()
			removeOutside(state)
		})
		var lines []string
		sc := bufio.NewScanner(out)
		for sc.Scan() && !strings.HasPrefix(sc.Text(), "  stop:") {
			lines = append(lines, sc.Text())
		}
		go func() {
			for sc.Scan() {
			}
		}()
		m := frontendRE.FindStringSubmatch(strings.Join(lines, "\n"))
		if m == nil {
			b.Fatalf("the stack printed no frontend:\n%s", strings.Join(lines, "\n"))
		}
		var pids []string
		for _, name := range []string{"postgresql", "temporal"} {
			raw, err := os.ReadFile(filepath.Join(state, "pids", name))
			if err != nil {
				b.Fatalf("pid of the stack's %s: %v", name, err)
			}
			pids = append(pids, name+"="+strings.TrimSpace(string(raw)))
		}
		bench := exec.Command("go", "test", "-count=1", "-run", "^$", "-bench", "^BenchmarkFleetOverhead$", "-benchtime", "1x",
			"-timeout", "60m", "./internal/crashtest/")
		bench.Dir = repo
		bench.Env = append(os.Environ(), "BACKUPCYCLE_BENCH_FRONTEND="+m[1], "BACKUPCYCLE_BENCH_NAMESPACE="+m[2],
			"BACKUPCYCLE_BENCH_PIDS="+strings.Join(pids, ","))
		bench.Stdout, bench.Stderr = os.Stdout, os.Stderr
		b.Logf("fleet benchmark against %s (namespace %s), CPU of %s", m[1], m[2], strings.Join(pids, ", "))
		if err := bench.Run(); err != nil {
			b.Fatalf("BenchmarkFleetOverhead: %v", err)
		}
	}
}
