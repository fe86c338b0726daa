package health

import (
	"os"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/backupcycle/backupcycle/activities"
)

func TestHealthReportsThisProcess(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	base := activities.New(zap.New(core))
	base.Version = "1.2.3"
	acts := New(base)

	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(acts)

	before := time.Now().UTC()
	val, err := env.ExecuteActivity(acts.Health)
	if err != nil {
		t.Fatal(err)
	}
	var info HealthInfo
	if err := val.Get(&info); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if info.Host != host || info.PID != os.Getpid() || info.Version != "1.2.3" || info.GoVersion == "" {
		t.Errorf("info = %+v, want host %q pid %d version 1.2.3", info, host, os.Getpid())
	}
	if info.Time.Before(before.Add(-time.Second)) || info.Time.After(time.Now().Add(time.Second)) {
		t.Errorf("info.Time = %v, not now", info.Time)
	}
	entries := logs.FilterMessage("health check").All()
	if len(entries) != 1 || entries[0].ContextMap()["activity"] != "Health" {
		t.Errorf("want one log entry tagged activity=Health, got %v", logs.All())
	}
}

func TestHealthDefaultsVersionToBuildInfo(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	acts := New(activities.New(nil))
	env.RegisterActivity(acts)
	val, err := env.ExecuteActivity(acts.Health)
	if err != nil {
		t.Fatal(err)
	}
	var info HealthInfo
	if err := val.Get(&info); err != nil {
		t.Fatal(err)
	}
	if info.Version == "" || info.Version != BuildVersion() {
		t.Errorf("version = %q, want BuildVersion() = %q", info.Version, BuildVersion())
	}
}
