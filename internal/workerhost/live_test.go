package workerhost

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/backupcycle/backupcycle/internal/config"
)

const liveSite = `temporal:
  address: 127.0.0.1:7233
sql_instances:
  - name: sql01
    address: 127.0.0.1:1
    user: backup
    password_env: BACKUPCYCLE_TEST_UNSET
  - name: verify
    address: 127.0.0.1:2
    user: backup
    password_env: BACKUPCYCLE_TEST_UNSET
backup_servers:
  - name: bak01
    unc_paths: ['/var/opt/mssql/backup/bak01']
    location: /srv/bak01
    verify_instance: verify
    restore_data_dir: /data
    restore_log_dir: /log
  - name: bak02
    unc_paths: ['/var/opt/mssql/backup/bak02']
    location: /srv/bak02
    verify_instance: verify
    restore_data_dir: /data
    restore_log_dir: /log
databases:
  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
`

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10s", what)
		}
	}
}

func hasDatabase(c *config.Config, name string) bool {
	_, err := c.Database("sql01", name)
	return err == nil
}

// The poll swaps in a file that loads and keeps the configuration in force
// when it does not, logging each problem with its file and line once.
func TestLiveConfigFollowsTheFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "backupcycle.yaml")
	writeFile(t, file, liveSite)
	core, logs := observer.New(zapcore.InfoLevel)
	live, err := LoadLive(file, zap.New(core), func(c *config.Config) { c.Temporal.TaskQueue = "near-bak01" })
	if err != nil {
		t.Fatal(err)
	}
	first := live.Config()
	if !hasDatabase(first, "Sales") || first.Temporal.TaskQueue != "near-bak01" {
		t.Fatalf("loaded %+v", first)
	}
	var changes atomic.Int32
	live.OnChange(func(*config.Config) { changes.Add(1) })
	stop := live.Watch(context.Background(), 20*time.Millisecond)
	defer stop()

	// Broken: Orders lacks its instance. Kept: the configuration in force.
	writeFile(t, file, liveSite+"  - name: Orders\n    backup_servers: [bak01, bak02]\n")
	waitFor(t, "log of the failed reload", func() bool { return logs.FilterMessageSnippet("not reloaded").Len() > 0 })
	time.Sleep(100 * time.Millisecond) // several more polls of the same broken file
	failed := logs.FilterMessageSnippet("not reloaded").All()
	if len(failed) != 1 || failed[0].Level != zapcore.ErrorLevel {
		t.Fatalf("failed reloads logged: %v", failed)
	}
	errs := anyStrings(failed[0].ContextMap()["errors"])
	line := fmt.Sprintf("%s:%d: ", file, strings.Count(liveSite, "\n")+1) // the Orders entry
	if len(errs) != 1 || !strings.HasPrefix(errs[0], line) || !strings.Contains(errs[0], `missing required key "instance"`) {
		t.Errorf("logged errors %v, want one starting %q", errs, line)
	}
	if live.Config() != first || changes.Load() != 0 {
		t.Fatal("a file that does not load replaced the configuration in force")
	}

	// Fixed, and the temporal: section changed too: Orders is in force, the
	// connection settings stay those the worker started with.
	fixed := strings.Replace(liveSite, "127.0.0.1:7233", "temporal.example:7233", 1) + "  - name: Orders\n    instance: sql01\n    backup_servers: [bak01, bak02]\n"
	writeFile(t, file, fixed)
	waitFor(t, "reload of the fixed file", func() bool { return hasDatabase(live.Config(), "Orders") })
	now := live.Config()
	if now.Temporal != first.Temporal || changes.Load() != 1 {
		t.Errorf("after the reload: temporal %+v (want %+v), %d changes (want 1)", now.Temporal, first.Temporal, changes.Load())
	}
	if logs.FilterMessageSnippet("except its temporal: section").Len() != 1 {
		t.Errorf("no warning that the temporal: change needs a restart: %v", logs.All())
	}
	ok := logs.FilterMessage("config reloaded").All()
	if len(ok) != 1 || !strings.Contains(strings.Join(anyStrings(ok[0].ContextMap()["added"]), ","), "sql01/Orders") {
		t.Errorf("reload logged as %v", ok)
	}
}

func anyStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// An activity that misses an entry re-reads the file at once (Reload), not
// at the next poll; SIGHUP re-reads and reports even an unchanged file.
func TestLiveConfigReloadAndSIGHUP(t *testing.T) {
	file := filepath.Join(t.TempDir(), "backupcycle.yaml")
	writeFile(t, file, liveSite)
	core, logs := observer.New(zapcore.InfoLevel)
	live, err := LoadLive(file, zap.New(core), nil)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, file, liveSite+"  - name: Orders\n    instance: sql01\n    backup_servers: [bak01, bak02]\n")
	if c := live.Reload(); !hasDatabase(c, "Orders") || live.Config() != c {
		t.Fatal("Reload did not swap in the changed file")
	}
	if c := live.Reload(); c != live.Config() || logs.FilterMessage("config reloaded").Len() != 1 {
		t.Fatal("Reload of an unchanged file loaded it again")
	}

	stop := live.Watch(context.Background(), time.Hour) // no poll during the test
	defer stop()
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := self.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "reload on SIGHUP", func() bool { return logs.FilterMessage("config reloaded").Len() == 2 })
	if logs.FilterMessageSnippet("SIGHUP").Len() != 1 {
		t.Errorf("SIGHUP not logged: %v", logs.All())
	}

	// A file that cannot be read keeps the configuration too.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	before := live.Config()
	if live.Reload() != before || logs.FilterMessageSnippet("not re-read").Len() != 1 {
		t.Errorf("a missing file: config swapped or not logged: %v", logs.All())
	}
}
