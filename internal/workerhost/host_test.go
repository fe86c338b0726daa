package workerhost

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/config"
)

// TestWorkerRunsAsManyActivitiesAsTheLimitsAllow: the worker's activity
// concurrency comes from the configuration, not the SDK's default of 1,000:
// the sum of every SQL instance's max_concurrent (a running cycle holds a
// slot of its instance and runs one activity at a time) plus the
// headroom; it follows the configured limits.
func TestWorkerRunsAsManyActivitiesAsTheLimitsAllow(t *testing.T) {
	file := filepath.Join(t.TempDir(), "backupcycle.yaml")
	writeFile(t, file, strings.Replace(liveSite, "  - name: sql01\n", "  - name: sql01\n    max_concurrent: 3\n", 1))
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	want := 3 + 1 + ActivityHeadroom // sql01 3, verify 1 (the default)
	if got := WorkerOptions(cfg).MaxConcurrentActivityExecutionSize; got != want {
		t.Errorf("MaxConcurrentActivityExecutionSize = %d, want %d", got, want)
	}
	if o := WorkerOptions(cfg); o.MaxHeartbeatThrottleInterval == 0 || o.WorkerStopTimeout == 0 {
		t.Errorf("worker options %+v lost the heartbeat throttle or the stop timeout", o)
	}
}
