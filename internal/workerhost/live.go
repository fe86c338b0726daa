package workerhost

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/config"
)

// DefaultPoll is how often a worker checks its configuration file for a
// change. Reading a few kilobytes and hashing them costs nothing, and the
// activities re-read the file themselves when they miss an entry.
const DefaultPoll = 3 * time.Second

// LiveConfig is a configuration file the worker re-reads while it runs:
// when its content changes, on SIGHUP, and when an activity misses an
// entry (activities.LiveConfig). A file that loads replaces the whole
// configuration at once; one that does not is logged with its file:line
// errors and the configuration in force stays.
type LiveConfig struct {
	file   string
	adjust func(*config.Config)
	log    *zap.Logger
	cur    atomic.Pointer[config.Config]

	mu       sync.Mutex // one reload at a time; guards the fields below
	seen     [sha256.Size]byte
	readErr  string // the read error last logged, not to repeat it every poll
	onChange []func(*config.Config)
}

// LoadLive loads file. adjust, when not nil, is applied to every
// configuration loaded (a command-line override such as --task-queue).
func LoadLive(file string, log *zap.Logger, adjust func(*config.Config)) (*LiveConfig, error) {
	if log == nil {
		log = zap.NewNop()
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read config: %w (pass the file with --config; config.example.yaml documents every key)", err)
	}
	cfg, err := config.Parse(data, file)
	if err != nil {
		return nil, err
	}
	if adjust != nil {
		adjust(cfg)
	}
	l := &LiveConfig{file: file, adjust: adjust, log: log.With(zap.String("file", file)), seen: sha256.Sum256(data)}
	l.cur.Store(cfg)
	return l, nil
}

// File is the configuration file's name.
func (l *LiveConfig) File() string { return l.file }

// Config is the configuration in force.
func (l *LiveConfig) Config() *config.Config { return l.cur.Load() }

// Reload re-reads the file if its content changed and returns the
// configuration then in force.
func (l *LiveConfig) Reload() *config.Config { return l.reload(false) }

// OnChange calls f with each configuration that replaces the one in force,
// right after the swap. f must not block or call Reload.
func (l *LiveConfig) OnChange(f func(*config.Config)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onChange = append(l.onChange, f)
}

// Watch re-reads the file every poll (DefaultPoll when 0) and at once on
// SIGHUP, until ctx ends. The returned function stops it.
func (l *LiveConfig) Watch(ctx context.Context, poll time.Duration) func() {
	if poll <= 0 {
		poll = DefaultPoll
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				l.reload(false)
			case <-hup:
				l.log.Info("SIGHUP: re-reading the config file")
				l.reload(true)
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}

// reload re-reads the file; force parses it (and logs the outcome) even when
// its content is what was read last.
func (l *LiveConfig) reload(force bool) *config.Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.cur.Load()
	data, err := os.ReadFile(l.file)
	if err != nil {
		// An editor replacing the file may leave it missing for a moment:
		// keep what is in force and say so once.
		if msg := err.Error(); force || msg != l.readErr {
			l.readErr = msg
			l.log.Error("config file not re-read: the worker keeps the configuration in force", zap.Error(err))
		}
		return cur
	}
	l.readErr = ""
	sum := sha256.Sum256(data)
	if sum == l.seen && !force {
		return cur
	}
	l.seen = sum // a file that does not load is reported once, not every poll
	cfg, err := config.Parse(data, l.file)
	if err != nil {
		l.log.Error("config file not reloaded: the worker keeps the configuration in force until the file loads",
			zap.Strings("errors", errorLines(err)))
		return cur
	}
	if l.adjust != nil {
		l.adjust(cfg)
	}
	if !reflect.DeepEqual(cfg.Temporal, cur.Temporal) {
		// The worker's connection and task queue are set at start.
		l.log.Warn("config reloaded, except its temporal: section: a change there takes effect when the worker restarts")
		cfg.Temporal = cur.Temporal
	}
	l.cur.Store(cfg)
	added, removed := diffNames(databaseNames(cur), databaseNames(cfg))
	l.log.Info("config reloaded", zap.Int("databases", len(cfg.Databases)), zap.Int("sql_instances", len(cfg.SQLInstances)),
		zap.Int("backup_servers", len(cfg.BackupServers)), zap.Strings("added", added), zap.Strings("removed", removed))
	for _, f := range l.onChange {
		f(cfg)
	}
	return cfg
}

// errorLines is one "file:line: message" per problem, as config.Errors
// holds them.
func errorLines(err error) []string {
	var errs config.Errors
	if !errors.As(err, &errs) {
		return []string{err.Error()}
	}
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

func databaseNames(c *config.Config) []string {
	out := make([]string, 0, len(c.Databases))
	for i := range c.Databases {
		out = append(out, c.Databases[i].ID())
	}
	return out
}

// diffNames is what after has and before lacks, and the reverse.
func diffNames(before, after []string) (added, removed []string) {
	for _, n := range after {
		if !slices.Contains(before, n) {
			added = append(added, n)
		}
	}
	for _, n := range before {
		if !slices.Contains(after, n) {
			removed = append(removed, n)
		}
	}
	return added, removed
}
