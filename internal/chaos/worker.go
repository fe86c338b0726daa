package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/logging"
	"github.com/backupcycle/backupcycle/internal/workerhost"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// Environment of a worker process: the test binary started again with
// EnvWorker=1 runs RunWorker instead of the tests (see chaos_test.go).
const (
	EnvWorker   = "BC_CHAOS_WORKER"
	EnvConfig   = "BC_CHAOS_CONFIG"
	EnvIdentity = "BC_CHAOS_IDENTITY"
)

// HeartbeatTimeout of the long activities in the simulation: a dead worker's
// activity is retried after 5 s instead of the production minute.
const HeartbeatTimeout = 5 * time.Second

// RunWorker is the worker process: the production wiring (worker/run.go and
// worker/activities.go) with the simulation's short heartbeat timeout and
// poll, and the product's JSON logger on stderr (a file the parent scans).
func RunWorker() error {
	cfg, err := config.Load(os.Getenv(EnvConfig))
	if err != nil {
		return err
	}
	ScaleLogChain(cfg)
	log := logging.NewAt(false, zapcore.DebugLevel)
	defer func() { _ = log.Sync() }()
	opts, err := client.Options(cfg.Temporal, log)
	if err != nil {
		return err
	}
	opts.Identity = os.Getenv(EnvIdentity)
	// The server may be restarting: try for a while.
	var c sdkclient.Client
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err = sdkclient.DialContext(ctx, opts)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dial Temporal at %s: %w", cfg.Temporal.Address, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	defer c.Close()
	w := worker.New(c, cfg.Temporal.TaskQueue, worker.Options{
		WorkerStopTimeout:            10 * time.Second,
		MaxHeartbeatThrottleInterval: time.Second,
		// The production worker's: an interrupted attempt is reported
		// as such, not as the failure of what it was reading.
		Interceptors: workerhost.Interceptors(),
	})
	acts := activities.New(log)
	acts.Cycle = activities.CycleDeps{Config: cfg, Signal: c.SignalWorkflow, Poll: 200 * time.Millisecond,
		HeartbeatTimeout: HeartbeatTimeout}
	workflows.Register(w, acts)
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	// As the production worker does (workerhost.Serve): every database with
	// log_backup has its log chain running, started now if it is not.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if ids, err := client.New(c, cfg.Temporal, log).EnsureLogChains(ctx, cfg); err != nil {
		log.Warn("log chains not all started: the next start of the worker tries again", zap.Error(err))
	} else if len(ids) > 0 {
		log.Info("log chains running", zap.Strings("workflow_ids", ids))
	}
	// ... and every database with drill: has its drill schedule.
	if _, _, err := client.New(c, cfg.Temporal, log).EnsureDrillSchedules(ctx, cfg); err != nil {
		log.Warn("drill schedules not all kept: the next start of the worker tries again", zap.Error(err))
	}
	cancel()
	<-worker.InterruptCh()
	return nil
}

// Worker is one worker process of the fleet.
type Worker struct {
	Identity string
	LogFile  string
	cmd      *exec.Cmd
	done     chan struct{}
	frozen   bool
	// killed: the harness killed it (a fault, a heal, the end); exit is how
	// the process ended (I14: no worker ends on its own).
	killed bool
	exit   error
}

// startWorker starts the test binary (bin) in worker mode with its output
// (the zap log) appended to logFile.
func startWorker(bin, cfgPath, identity, logFile string) (*Worker, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), EnvWorker+"=1", EnvConfig+"="+cfgPath, EnvIdentity+"="+identity)
	cmd.Stdout, cmd.Stderr = f, f
	// A test binary that dies must not leave workers behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("chaos: start worker %s: %w", identity, err)
	}
	w := &Worker{Identity: identity, LogFile: logFile, cmd: cmd, done: make(chan struct{})}
	go func() { w.exit = cmd.Wait(); close(w.done) }()
	return w, nil
}

// Alive reports whether the process has not exited.
func (w *Worker) Alive() bool {
	select {
	case <-w.done:
		return false
	default:
		return true
	}
}

// Kill is a crash: SIGKILL, nothing reported to Temporal or SQL Server.
func (w *Worker) Kill() {
	w.killed = true
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
	}
}

// Freeze stops the process (SIGSTOP): a hung worker whose connections stay open.
func (w *Worker) Freeze() {
	_ = w.cmd.Process.Signal(syscall.SIGSTOP)
	w.frozen = true
}

// Thaw resumes a frozen worker (SIGCONT): it goes on with whatever it was doing.
func (w *Worker) Thaw() {
	_ = w.cmd.Process.Signal(syscall.SIGCONT)
	w.frozen = false
}

// Crashed says how the process ended when it ended without the harness
// killing it ("" while it runs, or when the harness killed it).
func (w *Worker) Crashed() string {
	if w.Alive() || w.killed {
		return ""
	}
	if w.exit == nil {
		return "exited with status 0"
	}
	return w.exit.Error()
}

func workerLogName(dir string, n int) string {
	return filepath.Join(dir, fmt.Sprintf("worker-%02d.log", n))
}
