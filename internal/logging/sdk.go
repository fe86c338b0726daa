package logging

import (
	"fmt"

	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
)

// SDKLogger adapts a *zap.Logger to the Temporal SDK's log.Logger (with
// With and WithCallerSkip), turning the SDK's alternating key/value pairs
// into zap fields.
type SDKLogger struct {
	z *zap.Logger
}

var (
	_ log.Logger          = (*SDKLogger)(nil)
	_ log.WithLogger      = (*SDKLogger)(nil)
	_ log.WithSkipCallers = (*SDKLogger)(nil)
)

// NewSDKLogger wraps z for client.Options.Logger / worker options. The
// caller skip makes zap report the SDK's call site, not this adapter.
func NewSDKLogger(z *zap.Logger) *SDKLogger {
	return &SDKLogger{z: z.WithOptions(zap.AddCallerSkip(1))}
}

// Zap returns the underlying logger (with the adapter's caller skip).
func (l *SDKLogger) Zap() *zap.Logger { return l.z }

func (l *SDKLogger) Debug(msg string, keyvals ...any) { l.z.Debug(msg, Fields(keyvals...)...) }
func (l *SDKLogger) Info(msg string, keyvals ...any)  { l.z.Info(msg, Fields(keyvals...)...) }
func (l *SDKLogger) Warn(msg string, keyvals ...any)  { l.z.Warn(msg, Fields(keyvals...)...) }
func (l *SDKLogger) Error(msg string, keyvals ...any) { l.z.Error(msg, Fields(keyvals...)...) }

// With returns a child logger that prepends keyvals to every entry.
func (l *SDKLogger) With(keyvals ...any) log.Logger {
	return &SDKLogger{z: l.z.With(Fields(keyvals...)...)}
}

// WithCallerSkip returns a child logger skipping skip more stack frames.
func (l *SDKLogger) WithCallerSkip(skip int) log.Logger {
	return &SDKLogger{z: l.z.WithOptions(zap.AddCallerSkip(skip))}
}

// BadKey is the field name given to a trailing value without a key, so a
// malformed call still logs everything instead of dropping data.
const BadKey = "!badkey"

// Fields converts alternating key/value pairs to zap fields. Non-string keys
// are formatted with %v; a dangling last value is kept under BadKey.
func Fields(keyvals ...any) []zap.Field {
	if len(keyvals) == 0 {
		return nil
	}
	fields := make([]zap.Field, 0, (len(keyvals)+1)/2)
	for i := 0; i < len(keyvals); i += 2 {
		if i+1 == len(keyvals) {
			fields = append(fields, zap.Any(BadKey, keyvals[i]))
			break
		}
		key, ok := keyvals[i].(string)
		if !ok {
			key = fmt.Sprint(keyvals[i])
		}
		fields = append(fields, zap.Any(key, keyvals[i+1]))
	}
	return fields
}
