package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// demoCycles is how many cycles --dev --demo runs: two show the round robin.
const demoCycles = 2

// cycleTimeout bounds one demo cycle (the default database takes seconds
// per step; this only keeps a stuck demo from hanging a script).
const cycleTimeout = 30 * time.Minute

// runDemoCycles runs the demo's backup cycles one after the other and
// prints each result. It fails on the first cycle that is not verified.
func runDemoCycles(ctx context.Context, c *client.Client, stdout io.Writer, workflowURL func(id, run string) string) ([]workflows.CycleResult, error) {
	var results []workflows.CycleResult
	for i := 1; i <= demoCycles; i++ {
		fmt.Fprintf(stdout, "cycle %d of %d: backing up %s (plan, sequence, backup, catalog, copy, restore, CHECKDB, sanity checks)...\n",
			i, demoCycles, devenv.Database)
		cctx, cancel := context.WithTimeout(ctx, cycleTimeout)
		run, err := runOrJoinCycle(cctx, c)
		cancel()
		if u := workflowURL(run.WorkflowID, run.RunID); u != "" && run.WorkflowID != "" && err != nil {
			fmt.Fprintf(stdout, "  Web UI:   %s\n", u)
		}
		if err != nil {
			return results, fmt.Errorf("demo cycle %d of %d: %w", i, demoCycles, shortCycleError(run.WorkflowID, err))
		}
		printCycle(stdout, i, run, workflowURL(run.WorkflowID, run.RunID))
		results = append(results, run.Result)
	}
	return results, nil
}

// shortCycleError keeps the cycle's own failure (its message and error type)
// instead of Temporal's nested chain, which repeats the message per layer.
func shortCycleError(workflowID string, err error) error {
	var appErr *temporal.ApplicationError
	if workflowID == "" || !errors.As(err, &appErr) {
		return err
	}
	return fmt.Errorf("workflow %s: %s [%s]", workflowID, appErr.Message(), appErr.Type())
}

// printCycle prints one verified cycle: set, servers, files, step times.
func printCycle(w io.Writer, i int, run client.CycleRun, uiURL string) {
	r := run.Result
	fmt.Fprintf(w, "cycle %d of %d: VERIFIED %s sequence %d: backed up to %s, copied to %s, restored as %s on %s, CHECKDB clean, sanity checks hold\n",
		i, demoCycles, r.Database, r.Sequence, r.Server, r.Remote, r.VerifyDatabase, devenv.VerifyInstance)
	var total int64
	names := make([]string, 0, len(r.Stripes))
	for _, s := range r.Stripes {
		total += s.Size
		names = append(names, s.Name)
	}
	fmt.Fprintf(w, "  files:    %d stripes, %s: %s + %s, on %s\n", len(r.Stripes), humanSize(total), strings.Join(names, ", "),
		r.Manifest, strings.Join(r.Locations, " and "))
	t := r.Timings
	fmt.Fprintf(w, "  times:    backup %s, copy %s, restore %s, CHECKDB %s (sanity %s): %s from backup to proven restorable\n",
		round(t.Backup), round(t.Copy), round(t.Restore), round(t.CheckDB), round(t.Sanity), round(t.Total))
	if len(r.Deleted) > 0 {
		var del []string
		for _, d := range r.Deleted {
			del = append(del, fmt.Sprintf("seq %d on %s", d.Sequence, d.Server))
		}
		fmt.Fprintf(w, "  retention deleted: %s\n", strings.Join(del, ", "))
	}
	if im := r.Immutable; im != nil {
		fmt.Fprintf(w, "  immutable: %d objects (%s) on %s, locked %s until %s, %s sent in %s\n", im.Objects, humanSize(im.Bytes), im.Target,
			im.Mode, im.RetainUntil.Format(time.RFC3339), humanSize(im.Sent), round(im.Duration))
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "  warning:  %s\n", warn)
	}
	fmt.Fprintf(w, "  workflow: %s\n", run.WorkflowID)
	if uiURL != "" {
		fmt.Fprintf(w, "  Web UI:   %s\n", uiURL)
	}
}

// demoSummary is the closing line of the demo's cycles.
func demoSummary(results []workflows.CycleResult) string {
	var servers []string
	for _, r := range results {
		servers = append(servers, fmt.Sprintf("%s (seq %d)", r.Server, r.Sequence))
	}
	return fmt.Sprintf("demo: %d of %d cycles verified, round robin %s", len(results), demoCycles, strings.Join(servers, " -> "))
}

// showImmutable prints the object store's verdict: the probe that a locked
// object there can be neither deleted, shortened nor overwritten with the
// worker's credentials. The demo fails when a cycle made no immutable copy.
func showImmutable(w io.Writer, results []workflows.CycleResult) error {
	probe := ""
	for i, r := range results {
		if r.Immutable == nil {
			return fmt.Errorf("demo cycle %d of %d: no immutable copy on %s: %s", i+1, demoCycles, devenv.ObjectStore, strings.Join(r.Warnings, "; "))
		}
		if r.Immutable.Probed || probe == "" {
			probe = r.Immutable.Probe
		}
	}
	fmt.Fprintf(w, "object store %s: %s\n", devenv.ObjectStore, probe)
	return nil
}

func round(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func filesSize(paths []string) int64 {
	var n int64
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
