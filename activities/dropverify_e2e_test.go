package activities_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
)

// The set is verified before its copy is dropped: a verification instance
// that cannot be reached then does not hold the cycle in retries. The
// cycle ends verified within seconds with a warning that the copy was
// left, and the next cycle, the instance back, replaces and drops it.
func TestE2EVerifyInstanceUnreachableAtDrop(t *testing.T) {
	f := activities.NewSQLFixture(t, "Sales", fastWaits)
	acts := f.Acts()
	v := f.Verify()
	var (
		mu      sync.Mutex
		stopped time.Time
		down    = true
	)
	e := newE2E(t, f, map[string]any{
		"DropVerifyDB": func(ctx context.Context, in activities.VerifyInput) error {
			mu.Lock()
			if down && stopped.IsZero() {
				if err := v.Stop(); err != nil {
					t.Error(err)
				}
				stopped = time.Now()
			}
			mu.Unlock()
			return acts.DropVerifyDB(ctx, in)
		},
	})
	res, run, err := e.cycle("Sales")
	ended := time.Now()
	if err != nil {
		t.Fatalf("cycle with the verification instance down at the drop: %v", err)
	}
	mu.Lock()
	took := ended.Sub(stopped)
	down = false
	mu.Unlock()
	steps := stepsOf(t, e.c, run)
	t.Logf("seq %d verified; from the instance's stop to the cycle's end %s, DropVerifyDB attempts %d; warnings %q",
		res.Sequence, took.Round(time.Millisecond), steps.attempts["DropVerifyDB"], res.Warnings)
	if took > 15*time.Second {
		t.Errorf("the cycle ended %s after the verification instance stopped, want under 15s: the set was verified already", took.Round(time.Millisecond))
	}
	if m := f.Manifest(res.Server, res.Sequence); m.State != catalog.StateVerified {
		t.Errorf("set %d on %s: %s, want verified", res.Sequence, res.Server, m.State)
	}
	warned := false
	for _, w := range res.Warnings {
		warned = warned || (strings.Contains(w, res.VerifyDatabase) && strings.Contains(w, "next cycle"))
	}
	if !warned {
		t.Errorf("no warning names the copy %s left for the next cycle: %q", res.VerifyDatabase, res.Warnings)
	}

	if err := v.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := v.DatabaseFiles(res.VerifyDatabase); err != nil {
		t.Fatalf("the copy %s is not on the verification instance after its drop failed: %v", res.VerifyDatabase, err)
	}
	next, _, err := e.cycle("Sales")
	if err != nil || len(next.Warnings) != 0 {
		t.Fatalf("next cycle: %v, warnings %q", err, next.Warnings)
	}
	if next.VerifyDatabase != res.VerifyDatabase {
		t.Fatalf("next cycle verified in %s, want the left copy's name %s", next.VerifyDatabase, res.VerifyDatabase)
	}
	if _, err := v.DatabaseFiles(res.VerifyDatabase); err == nil {
		t.Errorf("the left copy %s is still on the verification instance after the next cycle", res.VerifyDatabase)
	}
}
