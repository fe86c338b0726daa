package activities

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
)

// A step's progress signals start once there is progress to show: none at
// its start (the workflow shows the step at 0 % already; a signal is a
// history event and a workflow task), then one per 10 points.
func TestProgressSignalsStartWithProgress(t *testing.T) {
	var mu sync.Mutex
	var sent []float64
	a := New(nil)
	a.Cycle = CycleDeps{Signal: func(_ context.Context, _, _, name string, arg any) error {
		if p, ok := arg.(StepProgress); ok && name == ProgressSignal {
			mu.Lock()
			sent = append(sent, p.Percent)
			mu.Unlock()
		}
		return nil
	}}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(func(ctx context.Context) error {
		rep := a.newReporter(ctx, StepCopy, 7)
		stop := rep.every(5*time.Millisecond, nil, nil)
		time.Sleep(20 * time.Millisecond) // beats at 0 %
		for _, p := range []float64{5, 12, 15, 40} {
			rep.setPercent(p)
		}
		stop()
		return nil
	}, activity.RegisterOptions{Name: "step"})
	if _, err := env.ExecuteActivity("step"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []float64{12, 40}; !slices.Equal(sent, want) {
		t.Errorf("progress signals at %v %%, want %v", sent, want)
	}
}
