package devserver

import (
	"sort"
	"sync/atomic"

	"go.uber.org/zap/zapcore"
)

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// nopLogger silences the SDK clients the devserver uses for its own checks.
type nopLogger struct{}

func (nopLogger) Debug(string, ...any) {}
func (nopLogger) Info(string, ...any)  {}
func (nopLogger) Warn(string, ...any)  {}
func (nopLogger) Error(string, ...any) {}

// levelFilter is the server log filter: its base level, and errors only
// once Stop has begun.
type levelFilter struct {
	base     zapcore.LevelEnabler
	stopping atomic.Bool
}

func (f *levelFilter) Enabled(l zapcore.Level) bool {
	if f.stopping.Load() {
		return l >= zapcore.ErrorLevel
	}
	return f.base.Enabled(l)
}

// levelCore filters a core by a levelFilter that can change at run time
// (zap.IncreaseLevel is fixed once built).
type levelCore struct {
	zapcore.Core
	filter *levelFilter
}

func (c *levelCore) Enabled(l zapcore.Level) bool { return c.filter.Enabled(l) && c.Core.Enabled(l) }

func (c *levelCore) With(fields []zapcore.Field) zapcore.Core {
	return &levelCore{Core: c.Core.With(fields), filter: c.filter}
}

func (c *levelCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.filter.Enabled(e.Level) {
		return ce
	}
	return c.Core.Check(e, ce)
}
