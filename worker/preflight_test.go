package main

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/backupcycle/backupcycle/internal/config"
)

// At start-up the worker checks the permissions in the background and logs
// each missing one as a warning with the stable keys; it never stops.
func TestStartupPreflightLogsMissingAsWarnings(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	t.Setenv("WORKER_PREFLIGHT_TEST_PW", "Pw-unused-1")
	bak := t.TempDir()
	cfg := &config.Config{File: "test.yaml",
		SQLInstances: []config.SQLInstance{{Name: "sql01", Address: dead, User: "bk", Encrypt: "disable",
			Password: config.SecretRef{Env: "WORKER_PREFLIGHT_TEST_PW"}, ConnectTimeout: 2 * time.Second}},
		BackupServers: []config.BackupServer{{Name: "bak01", Location: bak, Loc: config.Location{Scheme: "file", Path: bak}}},
		Databases:     []config.Database{{Name: "Sales", Instance: "sql01", BackupServers: []string{"bak01"}}},
	}
	core, logs := observer.New(zapcore.InfoLevel)
	stop := startupPreflight(context.Background(), cfg, zap.New(core))
	deadline := time.Now().Add(30 * time.Second)
	for len(logs.FilterMessage("preflight: permission missing").All()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	missing := logs.FilterMessage("preflight: permission missing").All()
	if len(missing) != 1 {
		t.Fatalf("warnings: %v", logs.All())
	}
	if m := missing[0].ContextMap(); missing[0].Level != zapcore.WarnLevel || m["instance"] != "sql01" || m["check"] != "login" {
		t.Errorf("logged %v %v", missing[0].Level, m)
	}
	if logs.FilterMessageSnippet("1 MISSING").Len() != 1 {
		t.Errorf("no summary line: %v", logs.All())
	}
	for _, e := range logs.All() {
		for _, v := range e.ContextMap() {
			if s, ok := v.(string); ok && s == "Pw-unused-1" {
				t.Errorf("a log line holds the password: %v", e)
			}
		}
	}
}
