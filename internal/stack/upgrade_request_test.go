package stack

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// `stack --upgrade BIN` hands the new build to the running supervisor and
// prints what the upgrade ended with: nil, or the error that stopped it.
func TestUpgradeRequestReachesTheSupervisor(t *testing.T) {
	state := t.TempDir()
	bin := filepath.Join(t.TempDir(), "worker.new")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := RequestUpgrade(state, bin, time.Second); err == nil || !strings.Contains(err.Error(), "no stack runs") {
		t.Fatalf("without a supervisor: %v, want \"no stack runs\"", err)
	}
	if err := os.WriteFile(filepath.Join(state, PidFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RequestUpgrade(state, filepath.Join(state, "missing"), time.Second); err == nil || !strings.Contains(err.Error(), "not a worker binary") {
		t.Fatalf("a missing binary: %v, want \"not a worker binary\"", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	upgrades := UpgradeRequests(ctx, state)
	for _, outcome := range []error{nil, os.ErrPermission} {
		got := make(chan error, 1)
		go func() { got <- RequestUpgrade(state, bin, 30*time.Second) }()
		select {
		case u := <-upgrades:
			if u.Worker != bin {
				t.Errorf("the supervisor got %q, want %q", u.Worker, bin)
			}
			u.Result <- outcome
		case <-time.After(30 * time.Second):
			t.Fatal("the supervisor got no upgrade")
		}
		err := <-got
		if (outcome == nil) != (err == nil) || (outcome != nil && err.Error() != outcome.Error()) {
			t.Errorf("the upgrade ended with %v; stack --upgrade returned %v", outcome, err)
		}
	}
}
