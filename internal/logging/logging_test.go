package logging

import (
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestSDKLoggerFieldsAndWith(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	var l log.Logger = NewSDKLogger(zap.New(core))

	l.Info("started", KeyDB, "Sales", KeySeq, 42)
	child := l.(log.WithLogger).With(KeyServer, "bak01")
	child.Warn("slow", "err", errors.New("boom"), 7, "seven", "dangling")
	l.Debug("parent has no server field")

	entries := logs.AllUntimed()
	if len(entries) != 3 {
		t.Fatalf("got %d entries, want 3", len(entries))
	}
	first := entries[0].ContextMap()
	if first[KeyDB] != "Sales" || first[KeySeq] != int64(42) || entries[0].Level != zapcore.InfoLevel {
		t.Errorf("first entry: level %v fields %v", entries[0].Level, first)
	}
	second := entries[1].ContextMap()
	if second[KeyServer] != "bak01" || second["err"] != "boom" || second["7"] != "seven" || second[BadKey] != "dangling" {
		t.Errorf("second entry fields %v", second)
	}
	if entries[1].Level != zapcore.WarnLevel {
		t.Errorf("second entry level %v, want warn", entries[1].Level)
	}
	if _, ok := entries[2].ContextMap()[KeyServer]; ok {
		t.Errorf("With mutated the parent logger: %v", entries[2].ContextMap())
	}
}

func TestSDKLoggerCallerIsTheCallSite(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	NewSDKLogger(zap.New(core, zap.AddCaller())).Error("x")
	entry := logs.All()[0]
	if got := entry.Caller.File; got == "" || !strings.Contains(got, "logging_test.go") {
		t.Errorf("caller = %q, want this test file", got)
	}
}

func TestNewRejectsBadLevel(t *testing.T) {
	t.Setenv(LevelEnv, "loud")
	if _, err := New(false); err == nil || !strings.Contains(err.Error(), LevelEnv) {
		t.Fatalf("New with %s=loud: err = %v, want one naming %s", LevelEnv, err, LevelEnv)
	}
	t.Setenv(LevelEnv, "warn")
	z, err := New(true)
	if err != nil {
		t.Fatal(err)
	}
	if z.Core().Enabled(zapcore.InfoLevel) || !z.Core().Enabled(zapcore.WarnLevel) {
		t.Errorf("level from %s=warn not applied", LevelEnv)
	}
}
