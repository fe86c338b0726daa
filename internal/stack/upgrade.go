package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The files of `stack --upgrade`: the request names the new build, the
// result is "ok" or the error.
const (
	upgradeRequest = "upgrade.request"
	upgradeResult  = "upgrade.result"
)

// UpgradeRequests delivers the upgrades RequestUpgrade asks for (SIGUSR1 to
// the supervisor, the new build in <state>/upgrade.request) and writes each
// one's outcome to <state>/upgrade.result. For Options.Upgrades.
func UpgradeRequests(ctx context.Context, stateDir string) <-chan Upgrade {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	out := make(chan Upgrade)
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
			}
			result := make(chan error, 1)
			b, err := os.ReadFile(filepath.Join(stateDir, upgradeRequest))
			if err == nil {
				select {
				case out <- Upgrade{Worker: strings.TrimSpace(string(b)), Result: result}:
				case <-ctx.Done():
					return
				}
				select {
				case err = <-result:
				case <-ctx.Done():
					err = ctx.Err()
				}
			}
			text := "ok\n"
			if err != nil {
				text = err.Error() + "\n"
			}
			_ = os.WriteFile(filepath.Join(stateDir, upgradeResult), []byte(text), 0o644)
		}
	}()
	return out
}

// RequestUpgrade asks the stack running on stateDir to replace its workers
// with the build bin (Upgrade) and waits for the outcome.
func RequestUpgrade(stateDir, bin string, timeout time.Duration) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		return fmt.Errorf("stack: %s is not a worker binary: build the new worker first (go build -o %s ./worker)", bin, bin)
	}
	pid, err := readPid(filepath.Join(stateDir, PidFile))
	if err != nil || !alive(pid) {
		return fmt.Errorf("stack: no stack runs on %s: start it with make stack", stateDir)
	}
	result := filepath.Join(stateDir, upgradeResult)
	if err := os.Remove(result); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.WriteFile(filepath.Join(stateDir, upgradeRequest), []byte(bin+"\n"), 0o644); err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		return fmt.Errorf("stack: signal the supervisor (pid %d): %w", pid, err)
	}
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		b, err := os.ReadFile(result)
		if err != nil {
			if !alive(pid) {
				return fmt.Errorf("stack: the supervisor (pid %d) ended during the upgrade: see %s", pid, filepath.Join(stateDir, "logs"))
			}
			continue
		}
		if text := strings.TrimSpace(string(b)); text != "ok" {
			return errors.New(text)
		}
		return nil
	}
	return fmt.Errorf("stack: the upgrade did not end within %s: see %s", timeout, filepath.Join(stateDir, "logs"))
}
