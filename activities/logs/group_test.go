package logs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/sitetest"
)

// A database of an availability group with log_backup: every step of its
// chain refuses it with InvalidConfig naming the limitation and the fix,
// before it touches a server (no instance is reachable here). The
// configuration refuses such a databases: entry at load; one a group's
// selection picks inherits log_backup from defaults:, which is what the
// loaded configuration is given here.
func TestLogChainOfAnAvailabilityGroupDatabaseIsRefused(t *testing.T) {
	site, _ := logSite(t)
	site.Reconfigure(func(y string) string {
		y = strings.Replace(y, "backup_servers:\n", "  - {name: sql02, address: '127.0.0.1:3', user: sa, password_env: "+sitetest.PasswordEnv+
			", encrypt: disable}\navailability_groups:\n  - {name: agsales, availability_group: AG_Sales, replicas: [sql01, sql02]}\nbackup_servers:\n", 1)
		y = strings.Replace(y, "log_backup: {every: 1m}", "log_backup: {every: 0s}", 1)
		return strings.Replace(y, "    instance: sql01\n", "    instance: agsales\n", 1)
	})
	cfg := site.Config
	for i := range cfg.Databases {
		cfg.Databases[i].LogBackup.Every = time.Minute
	}
	base := activities.New(nil)
	base.Cycle = activities.CycleDeps{Config: cfg, Poll: 20 * time.Millisecond}
	a := New(base)
	ctx := context.Background()
	check := func(step string, err error) {
		t.Helper()
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || appErr.Type() != activities.ErrInvalidConfig || !appErr.NonRetryable() {
			t.Fatalf("%s: %v, want a non-retryable InvalidConfig", step, err)
		}
		for _, want := range []string{"availability group agsales", "log_backup", "Sales"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: %q does not name %q", step, err, want)
			}
		}
	}
	_, err := a.LogPlan(ctx, LogPlanInput{Database: "Sales", Instance: "agsales"})
	check("LogPlan", err)
	_, err = a.BackupLog(ctx, BackupLogInput{Database: "Sales", Instance: "agsales"})
	check("BackupLog", err)
	_, err = a.CopyLogs(ctx, CopyLogsInput{Database: "Sales", Instance: "agsales", Chain: 1})
	check("CopyLogs", err)
}
