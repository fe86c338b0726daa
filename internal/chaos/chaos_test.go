package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

var (
	seedFlag = flag.Uint64("chaos.seed", 0, "seed of the simulation (default $CHAOS_SEED, else 1)")
	runsFlag = flag.Int("chaos.runs", 0, "number of runs (default $CHAOS_RUNS, else 4)")
	keepFlag = flag.Bool("chaos.keep", false, "keep the fleet's directory (shares, logs, Temporal file) for a post-mortem")
)

// Defaults for `make test`: a few runs with a fixed seed.
const (
	defaultSeed = 1
	defaultRuns = 4
)

func TestMain(m *testing.M) {
	// The simulation kills workers with SIGKILL: a worker is this test
	// binary started again in worker mode.
	if os.Getenv(EnvWorker) == "1" {
		if err := RunWorker(); err != nil {
			fmt.Fprintln(os.Stderr, "chaos worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func setting(flagValue uint64, env string, def uint64) (uint64, error) {
	if flagValue != 0 {
		return flagValue, nil
	}
	if v := os.Getenv(env); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s=%q is not a non-negative integer", env, v)
		}
		return n, nil
	}
	return def, nil
}

// TestChaos runs the simulation: CHAOS_RUNS runs with CHAOS_SEED (or the
// -chaos.* flags), printing each run, each violation with its replay, and
// the summary line last. It fails when an invariant was violated.
func TestChaos(t *testing.T) {
	seed, err := setting(*seedFlag, "CHAOS_SEED", defaultSeed)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := setting(uint64(max(*runsFlag, 0)), "CHAOS_RUNS", defaultRuns)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f, err := Start(ctx, Options{Keep: *keepFlag})
	if err != nil {
		t.Fatalf("chaos fleet: %v", err)
	}
	defer f.Close()
	if *keepFlag {
		fmt.Printf("chaos: fleet in %s\n", f.Root)
	}
	sim := NewSim(f, seed, os.Stdout)
	if v := os.Getenv("CHAOS_FAULT"); v != "" {
		// Every run gets this fault (debugging one kind); the summary says so.
		if sim.Force, err = ParseFault(v); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("chaos: CHAOS_FAULT=%s: every run gets this fault\n", v)
	}
	began := time.Now()
	for i := range int(runs) {
		if err := sim.Run(ctx, i); err != nil {
			// The harness itself broke: what ran so far is still reported.
			fmt.Printf("chaos: run %d aborted the simulation: %s\n", i, sim.C.redact(err.Error()))
			t.Fail()
			break
		}
	}
	fmt.Printf("chaos: %d runs took %s (%.1fs per run)\n", sim.Runs, time.Since(began).Round(time.Second),
		time.Since(began).Seconds()/float64(max(sim.Runs, 1)))
	fmt.Printf("chaos: %s\n", sim.OutcomeSummary())
	fmt.Printf("chaos: %s\n", sim.EstateSummary())
	fmt.Printf("chaos: %s\n", sim.RecoverSummary())
	fmt.Printf("chaos: %s\n", sim.C.Stats())
	if sim.Violations > 0 {
		t.Fail()
	}
	fmt.Println(sim.Summary())
}
