package winservice

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/config"
)

// The recovery actions restart a failed worker, backing off, and a
// service that ran RecoveryReset without failing starts over at the first.
func TestRecoveryActions(t *testing.T) {
	if len(RecoveryActions) < 2 {
		t.Fatalf("%d recovery actions: want a first quick restart and a slower one that repeats", len(RecoveryActions))
	}
	for i, a := range RecoveryActions {
		if a.Delay < 5*time.Second {
			t.Errorf("action %d restarts after %s: a cause that persists would restart it in a tight loop", i, a.Delay)
		}
		if i > 0 && a.Delay <= RecoveryActions[i-1].Delay {
			t.Errorf("action %d waits %s, not longer than the one before (%s)", i, a.Delay, RecoveryActions[i-1].Delay)
		}
	}
	if RecoveryReset < time.Hour {
		t.Errorf("the failure count resets after %s: a worker failing every hour would never back off", RecoveryReset)
	}
	if got, want := RecoveryText(), "10s, 30s, then every 2m0s; the count resets after 24h0m0s without a failure"; got != want {
		t.Errorf("RecoveryText() = %q, want %q", got, want)
	}
}

// The Service Control Manager waits longer for a stop than the worker
// gives its activities.
func TestStopWait(t *testing.T) {
	if w := StopWaitFor(10 * time.Second); w < 25*time.Second {
		t.Errorf("StopWaitFor(10s) = %s: the attempts ended at 10 s are reported after", w)
	}
}

// A start-up failure's event names the service, the cause, where to look
// for that kind of cause, the config and log files, what the Service
// Control Manager does next and the command that retries.
func TestStartFailedMessage(t *testing.T) {
	s := Service{Name: "backupcycle-worker", ConfigFile: `C:\backupcycle\config.yaml`, LogFile: `C:\backupcycle\backupcycle-worker.log`}
	badConfig := config.Errors{{File: s.ConfigFile, Line: 3, Msg: "missing required key \"address\""}}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"config", fmt.Errorf("load: %w", badConfig), "The config file does not load: correct the lines named above."},
		{"missing file", fmt.Errorf("read config: %w", fs.ErrNotExist), "is missing or the service's account may not read it"},
		{"access denied", fmt.Errorf("open: %w", fs.ErrPermission), "is missing or the service's account may not read it"},
		{"temporal", errors.New("dial Temporal at temporal:7233: context deadline exceeded"), "Check that Temporal is reachable"},
	} {
		m := StartFailedMessage(s, c.err)
		for _, want := range []string{
			"The backupcycle worker (service backupcycle-worker) did not start: " + strings.ReplaceAll(c.err.Error(), "\n", " "),
			c.want, "Config: " + s.ConfigFile, "Log: " + s.LogFile,
			"restarts it after " + RecoveryText(), "worker service start --name backupcycle-worker",
		} {
			if !strings.Contains(m, want) {
				t.Errorf("%s: the message lacks %q:\n%s", c.name, want, m)
			}
		}
	}
	if m := FailedMessage(s, errors.New("worker stopped on a fatal error: x")); !strings.Contains(m, "stopped on an error: worker stopped on a fatal error: x") ||
		!strings.Contains(m, "restarts it after") {
		t.Errorf("FailedMessage: %s", m)
	}
}
