package devserver

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestServerLogFilterMutesWarningsOnStop(t *testing.T) {
	obs, logs := observer.New(zapcore.DebugLevel)
	f := &levelFilter{base: zapcore.WarnLevel}
	l := zap.New(obs).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return &levelCore{Core: c, filter: f} }))
	child := l.With(zap.String("service", "history"))

	child.Info("chatty")
	child.Warn("kept")
	f.stopping.Store(true)
	child.Warn("shutdown noise")
	l.Error("still kept")

	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Message)
	}
	if len(got) != 2 || got[0] != "kept" || got[1] != "still kept" {
		t.Errorf("logged %q, want [kept still kept]", got)
	}
}
