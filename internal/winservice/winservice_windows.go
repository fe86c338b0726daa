package winservice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/eventlog"
	"golang.org/x/sys/windows/svc/mgr"
)

// eventTypes are the event types the service's event log source writes.
const eventTypes = eventlog.Error | eventlog.Warning | eventlog.Info

// connect opens the Service Control Manager.
func connect() (*mgr.Mgr, error) {
	m, err := mgr.Connect()
	if err != nil {
		return nil, fmt.Errorf("connect to the Service Control Manager: %w (run it from an elevated prompt: Run as administrator)", err)
	}
	return m, nil
}

// withService runs f on installed service s.
func withService(s Service, f func(*mgr.Service) error) error {
	m, err := connect()
	if err != nil {
		return err
	}
	defer m.Disconnect()
	h, err := m.OpenService(s.Name)
	if err != nil {
		return fmt.Errorf("service %s: %w (installed? `sc.exe query %s`; install it with `worker service install --config FILE`)", s.Name, err, s.Name)
	}
	defer h.Close()
	return f(h)
}

// Install registers s: started automatically (delayed, after the network),
// restarted after a failure (RecoveryActions), with its event log source.
func Install(s Service, stdout io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program's path: %w", err)
	}
	m, err := connect()
	if err != nil {
		return err
	}
	defer m.Disconnect()
	if h, err := m.OpenService(s.Name); err == nil {
		h.Close()
		return fmt.Errorf("service %s exists: `worker service uninstall --name %s` first, or choose another --name", s.Name, s.Name)
	}
	h, err := m.CreateService(s.Name, exe, mgr.Config{
		DisplayName:      s.DisplayName,
		Description:      s.Description,
		StartType:        mgr.StartAutomatic,
		DelayedAutoStart: true,
		ErrorControl:     mgr.ErrorNormal,
		ServiceStartName: s.Account,
	}, s.Args...)
	if err != nil {
		return fmt.Errorf("create service %s: %w", s.Name, err)
	}
	defer h.Close()
	if err := configure(h, s); err != nil {
		_ = h.Delete()
		return err
	}
	if err := eventlog.InstallAsEventCreate(s.Name, eventTypes); err != nil && !strings.Contains(err.Error(), "exists") {
		_ = h.Delete()
		return fmt.Errorf("register event log source %s: %w", s.Name, err)
	}
	fmt.Fprintf(stdout, "service %s installed (%s): starts at boot; after a failure the Service Control Manager restarts it after %s\n",
		s.Name, s.DisplayName, RecoveryText())
	fmt.Fprintf(stdout, "  command: %s %s\n", exe, strings.Join(s.Args, " "))
	fmt.Fprintf(stdout, "  log:     %s; start-up failures also in the event log (Application, source %s)\n", s.LogFile, s.Name)
	fmt.Fprintf(stdout, "start it: worker service start --name %s\n", s.Name)
	return nil
}

// configure sets what CreateService does not: the recovery actions, also
// after a non-zero exit (how the worker reports a failure, rather than by
// crashing), and a pre-shutdown timeout long enough for the graceful stop.
func configure(h *mgr.Service, s Service) error {
	actions := make([]mgr.RecoveryAction, len(RecoveryActions))
	for i, a := range RecoveryActions {
		actions[i] = mgr.RecoveryAction{Type: mgr.ServiceRestart, Delay: a.Delay}
	}
	if err := h.SetRecoveryActions(actions, uint32(RecoveryReset.Seconds())); err != nil {
		return fmt.Errorf("set the recovery actions of %s: %w", s.Name, err)
	}
	if err := h.SetRecoveryActionsOnNonCrashFailures(true); err != nil {
		return fmt.Errorf("set the recovery actions of %s: %w", s.Name, err)
	}
	// SERVICE_PRESHUTDOWN_INFO, which x/sys/windows does not declare.
	info := struct{ PreshutdownTimeout uint32 }{uint32(s.StopWait.Milliseconds())}
	if err := windows.ChangeServiceConfig2(h.Handle, windows.SERVICE_CONFIG_PRESHUTDOWN_INFO, (*byte)(unsafe.Pointer(&info))); err != nil {
		return fmt.Errorf("set the pre-shutdown timeout of %s: %w", s.Name, err)
	}
	return nil
}

// Uninstall stops s if it runs and removes it and its event log source.
func Uninstall(s Service, stdout io.Writer) error {
	return withService(s, func(h *mgr.Service) error {
		if st, err := h.Query(); err == nil && st.State != svc.Stopped {
			if err := stopAndWait(h, s, stdout); err != nil {
				return err
			}
		}
		if err := h.Delete(); err != nil {
			return fmt.Errorf("delete service %s: %w", s.Name, err)
		}
		if err := eventlog.Remove(s.Name); err != nil {
			fmt.Fprintf(stdout, "event log source %s not removed: %v\n", s.Name, err)
		}
		fmt.Fprintf(stdout, "service %s removed\n", s.Name)
		return nil
	})
}

// Start starts s and waits until the worker polls Temporal or the service
// stopped.
func Start(s Service, stdout io.Writer) error {
	return withService(s, func(h *mgr.Service) error {
		if err := h.Start(); err != nil {
			return fmt.Errorf("start service %s: %w", s.Name, err)
		}
		st, err := waitState(h, svc.Running, StartWait+10*time.Second)
		if err != nil {
			return err
		}
		if st.State != svc.Running {
			return fmt.Errorf("service %s did not start (exit code %d): the event log says why (Event Viewer, Windows Logs > Application, source %s)",
				s.Name, st.ServiceSpecificExitCode, s.Name)
		}
		fmt.Fprintf(stdout, "service %s running (pid %d)\n", s.Name, st.ProcessId)
		return nil
	})
}

// Stop stops s gracefully and waits until it has.
func Stop(s Service, stdout io.Writer) error {
	return withService(s, func(h *mgr.Service) error { return stopAndWait(h, s, stdout) })
}

func stopAndWait(h *mgr.Service, s Service, stdout io.Writer) error {
	if _, err := h.Control(svc.Stop); err != nil {
		return fmt.Errorf("stop service %s: %w", s.Name, err)
	}
	wait := s.StopWait + 10*time.Second
	st, err := waitState(h, svc.Stopped, wait)
	if err != nil {
		return err
	}
	if st.State != svc.Stopped {
		return fmt.Errorf("service %s did not stop within %s (state %d)", s.Name, wait, st.State)
	}
	fmt.Fprintf(stdout, "service %s stopped\n", s.Name)
	return nil
}

// waitState polls the service until it is in state want, has stopped, or
// timeout passed, and returns its last status.
func waitState(h *mgr.Service, want svc.State, timeout time.Duration) (svc.Status, error) {
	deadline := time.Now().Add(timeout)
	for {
		st, err := h.Query()
		if err != nil {
			return st, fmt.Errorf("query the service: %w", err)
		}
		if st.State == want || st.State == svc.Stopped || time.Now().After(deadline) {
			return st, nil
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// Run runs the worker as service s, which the Service Control Manager
// started, with its output appended to s.LogFile.
func Run(ctx context.Context, s Service, run RunFunc) error {
	h := &handler{s: s, ctx: ctx, run: run}
	if elog, err := eventlog.Open(s.Name); err == nil {
		h.elog = elog
		defer elog.Close()
	}
	// Whether the Service Control Manager started this process is what
	// connecting to it says: svc.IsWindowsService guesses from the parent
	// process and its session, which is not 0 everywhere a Service Control
	// Manager runs services (Wine's is in session 1).
	err := svc.Run(s.Name, h)
	if errors.Is(err, windows.ERROR_FAILED_SERVICE_CONTROLLER_CONNECT) {
		return fmt.Errorf("`worker service run` is what the Service Control Manager starts: use `worker service start --name %s`, or run `worker --config FILE` at a prompt", s.Name)
	}
	if err != nil {
		h.event(eventlog.Error, EventStartFailed, StartFailedMessage(s, err))
		return err
	}
	return h.err
}

// openLog sends the process's output to s.LogFile: the worker logs to
// stderr and prints to stdout, and a service has neither. The standard
// handles too, so that a panic's trace lands in the file.
func (h *handler) openLog() (io.Closer, error) {
	out, err := os.OpenFile(h.s.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open the log file: %w", err)
	}
	os.Stdout, os.Stderr = out, out
	_ = windows.SetStdHandle(windows.STD_OUTPUT_HANDLE, windows.Handle(out.Fd()))
	_ = windows.SetStdHandle(windows.STD_ERROR_HANDLE, windows.Handle(out.Fd()))
	h.out = out
	return out, nil
}

// handler runs the worker while the Service Control Manager says so.
type handler struct {
	s    Service
	ctx  context.Context
	run  RunFunc
	out  io.Writer
	elog *eventlog.Log
	err  error // the worker's failure, for the exit code of the process
}

// event writes msg to the log file and the event log.
func (h *handler) event(kind, id uint32, msg string) {
	fmt.Fprintln(os.Stderr, strings.ReplaceAll(msg, "\r\n", " "))
	if h.elog == nil {
		return
	}
	switch kind {
	case eventlog.Error:
		_ = h.elog.Error(id, msg)
	case eventlog.Warning:
		_ = h.elog.Warning(id, msg)
	default:
		_ = h.elog.Info(id, msg)
	}
}

// Execute is the service: the worker runs until it fails, or a stop,
// pre-shutdown or shutdown request cancels its context, which stops it as
// SIGTERM does on Linux (the activities in flight get their time, the
// attempts they ended are reported). A failure ends the service with a
// service-specific exit code, which the recovery actions restart.
func (h *handler) Execute(_ []string, req <-chan svc.ChangeRequest, status chan<- svc.Status) (bool, uint32) {
	const accepts = svc.AcceptStop | svc.AcceptShutdown | svc.AcceptPreShutdown
	// Only now is this process a service: at a prompt svc.Run fails
	// before, and nothing is written to the log file.
	out, err := h.openLog()
	if err != nil {
		return h.failed(err, false)
	}
	defer out.Close()
	startHint := uint32(StartWait.Milliseconds())
	checkpoint := uint32(1)
	status <- svc.Status{State: svc.StartPending, WaitHint: startHint, CheckPoint: checkpoint}
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	readyC := make(chan struct{})
	var once sync.Once
	ready := func() { once.Do(func() { close(readyC) }) }
	done := make(chan error, 1)
	go func() { done <- h.run(ctx, ready, h.out) }()
	// A start that takes a while reports progress, so that the Service
	// Control Manager does not take it for hung.
	progress := time.NewTicker(5 * time.Second)
	defer progress.Stop()
	running := false
	for {
		select {
		case <-progress.C:
			if !running {
				checkpoint++
				status <- svc.Status{State: svc.StartPending, WaitHint: startHint, CheckPoint: checkpoint}
			}
		case <-readyC:
			readyC, running = nil, true
			status <- svc.Status{State: svc.Running, Accepts: accepts}
			h.event(eventlog.Info, EventStarted, StartedMessage(h.s))
		case err := <-done:
			return h.failed(err, running)
		case c := <-req:
			switch c.Cmd {
			case svc.Interrogate:
				status <- c.CurrentStatus
			case svc.Stop, svc.Shutdown, svc.PreShutdown:
				status <- svc.Status{State: svc.StopPending, WaitHint: uint32(h.s.StopWait.Milliseconds())}
				cancel()
				if err := <-done; err != nil {
					return h.failed(err, running)
				}
				h.event(eventlog.Info, EventStopped, StoppedMessage(h.s))
				return false, 0
			}
		}
	}
}

// failed records the worker's failure (err nil: it ended unasked) in the
// event log and returns the exit code that makes the Service Control
// Manager apply the recovery actions.
func (h *handler) failed(err error, running bool) (bool, uint32) {
	if err == nil {
		err = errors.New("the worker ended without being asked to stop")
	}
	h.err = err
	if running {
		h.event(eventlog.Error, EventFailed, FailedMessage(h.s, err))
	} else {
		h.event(eventlog.Error, EventStartFailed, StartFailedMessage(h.s, err))
	}
	return true, 1
}
