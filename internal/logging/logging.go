// Package logging builds the product's zap logger and adapts it to the
// Temporal SDK's log.Logger, so SDK and product logs are one stream with the
// same encoder and the same keys.
package logging

import (
	"fmt"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Stable log keys. Dashboards and greps depend on them: add, never rename.
const (
	KeyDB         = "db"
	KeySeq        = "seq"
	KeyStep       = "step"
	KeyServer     = "server"
	KeyWorkflowID = "workflow_id"
	KeyRunID      = "run_id"
	KeyTaskQueue  = "task_queue"
	KeyNamespace  = "namespace"
	KeyAddress    = "address"
)

// LevelEnv names the environment variable that overrides the log level
// (debug, info, warn, error) without a flag in every command.
const LevelEnv = "BACKUPCYCLE_LOG_LEVEL"

// New returns the process logger writing to stderr: a human console encoder
// when dev is true (devworker, the demo), JSON otherwise (one object per
// line for log shippers). The level is info unless LevelEnv says otherwise.
func New(dev bool) (*zap.Logger, error) {
	level := zapcore.InfoLevel
	if s := os.Getenv(LevelEnv); s != "" {
		l, err := zapcore.ParseLevel(s)
		if err != nil {
			return nil, fmt.Errorf("%s=%q is not a log level: use debug, info, warn or error", LevelEnv, s)
		}
		level = l
	}
	return NewAt(dev, level), nil
}

// NewAt is New with an explicit level (tests, commands with a --log-level flag).
func NewAt(dev bool, level zapcore.Level) *zap.Logger {
	var enc zapcore.Encoder
	if dev {
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	} else {
		ec := zap.NewProductionEncoderConfig()
		ec.TimeKey = "ts"
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(ec)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(os.Stderr), level)
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel))
}

// NewFile is a JSON logger (the production encoding) appending to the file
// at path, at the level LevelEnv names (info by default): the structured
// log of a process whose terminal shows human-readable lines instead. The
// returned close flushes and closes the file.
func NewFile(path string) (*zap.Logger, func(), error) {
	level := zapcore.InfoLevel
	if s := os.Getenv(LevelEnv); s != "" {
		l, err := zapcore.ParseLevel(s)
		if err != nil {
			return nil, nil, fmt.Errorf("%s=%q is not a log level: use debug, info, warn or error", LevelEnv, s)
		}
		level = l
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open the log file %s: %w", path, err)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.TimeKey = "ts"
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(ec), zapcore.Lock(f), level)
	log := zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel))
	return log, func() { _ = log.Sync(); _ = f.Close() }, nil
}
