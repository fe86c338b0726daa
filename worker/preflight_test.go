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
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
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

// A login that connects but lacks one grant (VIEW SERVER PERFORMANCE STATE
// on SQL Server 2022): the start-up check logs that permission as a
// warning with the GRANT that fixes it, and nothing else.
func TestStartupPreflightLogsMissingGrant(t *testing.T) {
	in, err := sqlsim.New(sqlsim.Config{Name: "sql01", ListenAddr: "127.0.0.1:0", DataDir: t.TempDir(), MajorVersion: 16,
		Principals: []sqlsim.Login{{Name: "bk", Password: "Pw-worker-7a", Server: []string{tsql.PermCreateAnyDatabase},
			Databases: map[string][]string{"Sales": {tsql.RoleDBBackupOperator}, "msdb": {tsql.PermSelect}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	if err := in.CreateDatabase(sqlsim.DatabaseSpec{Name: "Sales", Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WORKER_PREFLIGHT_TEST_PW", "Pw-worker-7a")
	bak := t.TempDir()
	cfg := &config.Config{File: "test.yaml",
		SQLInstances: []config.SQLInstance{{Name: "sql01", Address: in.Addr(), User: "bk", Encrypt: "disable",
			Password: config.SecretRef{Env: "WORKER_PREFLIGHT_TEST_PW"}, ConnectTimeout: 5 * time.Second}},
		BackupServers: []config.BackupServer{{Name: "bak01", Location: bak, Loc: config.Location{Scheme: "file", Path: bak}}},
		Databases: []config.Database{{Name: "Sales", Instance: "sql01", BackupServers: []string{"bak01"},
			Policy: config.Policy{Sequence: config.SequenceCatalog}}},
		// What loading a heartbeat_timeout of 30s records.
		Warnings: []config.Error{{File: "test.yaml", Line: 3, Path: "defaults.heartbeat_timeout", Msg: "heartbeat_timeout 30s is under 3 minutes"}},
	}
	core, logs := observer.New(zapcore.InfoLevel)
	stop := startupPreflight(context.Background(), cfg, zap.New(core))
	deadline := time.Now().Add(30 * time.Second)
	for logs.FilterMessageSnippet("preflight: ").FilterLevelExact(zapcore.InfoLevel).Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	missing := logs.FilterMessage("preflight: permission missing").All()
	if len(missing) != 1 {
		t.Fatalf("missing permissions logged: %v", logs.All())
	}
	m := missing[0].ContextMap()
	if missing[0].Level != zapcore.WarnLevel || m["instance"] != "sql01" || m["check"] != tsql.PermViewServerPerformanceState ||
		m["fix"] != "GRANT VIEW SERVER PERFORMANCE STATE TO [bk];" {
		t.Errorf("logged %v %v", missing[0].Level, m)
	}
	found := false
	for _, w := range logs.FilterMessage("preflight: warning").All() {
		found = found || w.ContextMap()["check"] == "defaults.heartbeat_timeout"
	}
	if !found {
		t.Errorf("the configuration's heartbeat_timeout warning was not logged: %v", logs.All())
	}
}
