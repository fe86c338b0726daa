package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one process of the stack: its own process group (so that a stop
// reaches what it started, and Ctrl-C on the terminal reaches only the
// supervisor, which stops the processes in order), its output in
// <state>/logs/<name>.log, its pid in <state>/pids/<name> (what
// `stack --stop` ends when the supervisor itself was killed).
type proc struct {
	name, log, pidFile string
	cmd                *exec.Cmd
	done               chan struct{}
	err                error
}

// spec is how to run a process.
type spec struct {
	name string
	argv []string
	env  []string
	dir  string
	cred *syscall.Credential // nil: as the supervisor's user
}

// start starts s; the process is killed with the supervisor (Pdeathsig) if
// that dies without stopping it.
func (st *stack) start(s spec) (*proc, error) {
	p := &proc{name: s.name, log: filepath.Join(st.logs, s.name+".log"), pidFile: filepath.Join(st.pids, s.name), done: make(chan struct{})}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("stack: %s: log file: %w", s.name, err)
	}
	p.cmd = exec.Command(s.argv[0], s.argv[1:]...)
	p.cmd.Env, p.cmd.Dir, p.cmd.Stdout, p.cmd.Stderr = s.env, s.dir, f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: s.cred}
	fmt.Fprintf(f, "--- %s: %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(s.argv, " "))
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("stack: start %s (%s): %w", s.name, s.argv[0], err)
	}
	if err := os.WriteFile(p.pidFile, []byte(strconv.Itoa(p.cmd.Process.Pid)+"\n"), 0o644); err != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		f.Close()
		return nil, fmt.Errorf("stack: %s: %w", s.name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		_ = os.Remove(p.pidFile)
		close(p.done)
	}()
	return p, nil
}

// runOnce runs a one-shot step to its end; its error carries the end of its
// log.
func (st *stack) runOnce(ctx context.Context, s spec) error {
	p, err := st.start(s)
	if err != nil {
		return err
	}
	// A step that waits for a process of the stack (the namespace step for
	// the server) ends with it.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	select {
	case <-p.done:
	case q := <-st.watch(wctx):
		_ = p.stop(10 * time.Second)
		return q.exited()
	case <-ctx.Done():
		_ = p.stop(10 * time.Second)
		return ctx.Err()
	}
	if p.err != nil {
		return fmt.Errorf("stack: %s failed (%v):\n%s", s.name, p.err, tail(p.log, 15))
	}
	return nil
}

// stop sends sig to the process group, then SIGKILL after grace.
func (p *proc) stopWith(sig syscall.Signal, grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return fmt.Errorf("stack: %s did not stop within %s of %s: killed", p.name, grace, sig)
}

func (p *proc) stop(grace time.Duration) error { return p.stopWith(syscall.SIGTERM, grace) }

// exited is the error of a process that ended while the stack runs.
func (p *proc) exited() error {
	return fmt.Errorf("stack: %s exited (%v); its log %s ends:\n%s", p.name, p.err, p.log, tail(p.log, 15))
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Stop ends the stack that runs on stateDir: SIGTERM to its supervisor,
// which stops every process in order, and then, should the supervisor have
// been killed without doing so, each process group it left in
// <state>/pids. It returns once none is left.
func Stop(stateDir string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if pid, err := readPid(filepath.Join(stateDir, PidFile)); err == nil && alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		if alive(pid) {
			return fmt.Errorf("stack: the supervisor (pid %d) did not stop within %s: see %s", pid, timeout, filepath.Join(stateDir, "logs"))
		}
	}
	entries, err := os.ReadDir(filepath.Join(stateDir, "pids"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(stateDir, "pids", e.Name())
		if pid, err := readPid(p); err == nil && alive(pid) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		_ = os.Remove(p)
	}
	return nil
}

func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}
