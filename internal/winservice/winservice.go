// Package winservice runs a worker as a Windows service: it registers the
// service with the Service Control Manager (automatic start, recovery
// actions, an event log source), starts and stops it, and runs the worker
// under svc.Run, turning a stop, pre-shutdown or shutdown request into the
// cancellation that stops the worker gracefully (what SIGTERM does on
// Linux). What the service is — its timings, recovery actions and event
// messages — is portable and tested on every platform; the Service Control
// Manager calls are in winservice_windows.go.
package winservice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/config"
)

// Service says what to register and how to describe it in messages.
type Service struct {
	// Name is the service's name and its event log source.
	Name        string
	DisplayName string
	Description string
	// Account is the account the service runs as: empty for LocalSystem,
	// NT SERVICE\Name for its virtual account, DOMAIN\name$ for a group
	// managed service account.
	Account string
	// Args follow the executable on the service's command line.
	Args []string
	// ConfigFile and LogFile are named in the event log messages; the
	// worker's output goes to LogFile (a service has no console).
	ConfigFile, LogFile string
	// StopWait is how long a stop may take (StopWaitFor).
	StopWait time.Duration
}

// RunFunc runs the worker until ctx ends (return nil) or it fails. It
// calls ready once the worker polls Temporal, and writes what it prints to
// stdout.
type RunFunc func(ctx context.Context, ready func(), stdout io.Writer) error

// ErrNotWindows is what the service functions return on other platforms.
var ErrNotWindows = errors.New("the service mode is for Windows: on Linux run the worker under systemd with " +
	"deploy/systemd/backupcycle-worker.service (README, \"Running the worker as a service\")")

// RecoveryStep is one of the Service Control Manager's actions after the
// service failed: restart it after Delay.
type RecoveryStep struct{ Delay time.Duration }

// RecoveryActions restart the worker after it failed (a start-up failure
// such as Temporal unreachable, or a fatal error while running): soon the
// first time, then backing off so that a cause that persists (a bad
// config) does not restart it in a tight loop. The last action repeats
// for every later failure until RecoveryReset passes without one.
var RecoveryActions = []RecoveryStep{{10 * time.Second}, {30 * time.Second}, {2 * time.Minute}}

// RecoveryReset is how long the service must run without failing before
// the failure count starts over.
const RecoveryReset = 24 * time.Hour

// StartWait is the wait hint of the start: dialling Temporal and checking
// its search attributes take up to 5 s each, more on a loaded host.
const StartWait = time.Minute

// StopWaitFor is how long the Service Control Manager is told to wait for
// a worker whose activities get stopTimeout to finish when it stops (and
// the pre-shutdown timeout): the attempts they ended are reported after,
// with room to spare.
func StopWaitFor(stopTimeout time.Duration) time.Duration { return stopTimeout + 20*time.Second }

// Event ids of the service's event log source, one per kind of event, for
// filters and alerts.
const (
	EventStarted     = 1
	EventStopped     = 2
	EventStartFailed = 100
	EventFailed      = 101
)

// RecoveryText describes RecoveryActions: "10s, 30s, then every 2m0s; the
// count resets after 24h0m0s without a failure".
func RecoveryText() string {
	ds := make([]string, len(RecoveryActions))
	for i, a := range RecoveryActions {
		ds[i] = a.Delay.String()
	}
	last := len(ds) - 1
	return fmt.Sprintf("%s, then every %s; the count resets after %s without a failure",
		strings.Join(ds[:last], ", "), ds[last], RecoveryReset)
}

// StartFailedMessage is the event log message of a worker that did not
// start: what failed, where to look, what the Service Control Manager
// does next and how to retry at once.
func StartFailedMessage(s Service, err error) string {
	return fmt.Sprintf("The backupcycle worker (service %s) did not start: %s\r\n\r\n%s\r\n\r\n"+
		"Config: %s\r\nLog: %s\r\n"+
		"The Service Control Manager restarts it after %s. Fix the cause, then run: worker service start --name %s",
		s.Name, oneLine(err), startFailedHint(err), s.ConfigFile, s.LogFile, RecoveryText(), s.Name)
}

// startFailedHint says where to look for a start-up failure's cause.
func startFailedHint(err error) string {
	var errs config.Errors
	switch {
	case errors.As(err, &errs):
		return "The config file does not load: correct the lines named above."
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission):
		return "A file the worker needs (named above) is missing or the service's account may not read it: " +
			"correct the path, or give the account read access to it."
	}
	return "Check that Temporal is reachable from this host at the config's temporal.address (firewall, DNS, TLS), " +
		"and that the service's account can read the config and the secret files it names."
}

// FailedMessage is the event log message of a worker that stopped on an
// error after it had started.
func FailedMessage(s Service, err error) string {
	return fmt.Sprintf("The backupcycle worker (service %s) stopped on an error: %s\r\n\r\nLog: %s\r\n"+
		"The Service Control Manager restarts it after %s.", s.Name, oneLine(err), s.LogFile, RecoveryText())
}

// StartedMessage and StoppedMessage are the event log messages of a start
// and of a requested stop.
func StartedMessage(s Service) string {
	return fmt.Sprintf("The backupcycle worker (service %s) started: it polls Temporal. Log: %s", s.Name, s.LogFile)
}

func StoppedMessage(s Service) string {
	return fmt.Sprintf("The backupcycle worker (service %s) stopped.", s.Name)
}

// oneLine is err's text on one line.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }
