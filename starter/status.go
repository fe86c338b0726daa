package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/starter/client"
)

func statusCommand(e *env) *cobra.Command {
	f := client.StatusFilter{}
	var asJSON, fromManifests bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "show the latest cycles per database: step, sequence, server, outcome, times, live progress, retries",
		Long: `Shows the latest cycles, newest first: step, sequence, backup server, outcome, times; for a running cycle
its progress (the progress query, answered by a worker) and, when a step is being retried, the attempt, the
last failure and when the next attempt starts (kept by Temporal, no worker needed).

--from-manifests answers from the manifests on the backup servers instead: per database the last verified
set, its age, copies, time to recover (measured: its restore + CHECKDB; and predicted by the plan's formulas from
the rates of the sets before it, or from the assumed site for a step never measured) and last failure; exit 1
when any database is out of its rpo/rto.`,
		Args: noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if fromManifests {
				cfg, err := e.requireConfig(cmd)
				if err != nil {
					return err
				}
				return lastProven(ctx, e, cfg, f.Database, asJSON)
			}
			if f.Limit < 1 {
				return usageError{msg: fmt.Sprintf("--limit %d: give 1 or more", f.Limit)}
			}
			if f.Instance != "" && e.configFile != "" {
				cfg, err := e.loadConfig()
				if err != nil {
					return err
				}
				if _, ok := cfg.SQLInstance(f.Instance); !ok {
					return usageError{msg: fmt.Sprintf("--instance %q is not defined in sql_instances of %s", f.Instance, cfg.File)}
				}
			}
			c, ctx, done, err := e.session(ctx)
			if err != nil {
				return err
			}
			defer done()
			cycles, err := c.CycleStatus(ctx, f)
			if err != nil {
				return err
			}
			if asJSON {
				out := statusJSON{Namespace: c.Namespace(), Cycles: []cycleStatusJSON{}}
				for _, s := range cycles {
					out.Cycles = append(out.Cycles, cycleStatusOf(s))
				}
				return writeJSON(e.stdout, out)
			}
			if len(cycles) == 0 {
				fmt.Fprintf(e.stdout, "no backup cycles found on namespace %s for query %s\n", c.Namespace(), client.StatusQuery(f))
				return nil
			}
			for _, s := range cycles {
				writeCycleStatus(e.stdout, s)
			}
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Database, "database", "", "only cycles of this database, by name (the BackupDatabase search attribute; with --from-manifests: this exact name on every instance)")
	fl.StringVar(&f.Instance, "instance", "", "only cycles of this source instance (the BackupInstance search attribute)")
	fl.IntVar(&f.Limit, "limit", 10, "show at most this many cycles, newest first")
	fl.DurationVar(&f.ProgressTimeout, "progress-timeout", client.DefaultProgressTimeout, "how long a running cycle's progress query may take (a worker answers it)")
	fl.BoolVar(&fromManifests, "from-manifests", false, "answer from the manifests on the backup servers of --config: per database the last verified set, its age, copies, time to recover and last failure; exit 1 when any database is out of its rpo/rto")
	jsonFlag(cmd, &asJSON, "print the cycles")
	return cmd
}

func writeCycleStatus(w io.Writer, s client.CycleSummary) {
	db := dash(tsql.Printable(s.Database))
	if s.Instance != "" {
		db += "@" + tsql.Printable(s.Instance)
	}
	fmt.Fprintf(w, "%s  %s  database %s  step %s  seq %s  server %s  outcome %s\n", s.WorkflowID, s.Status,
		db, dash(s.Step), seqText(s.Sequence), dash(s.Server), dash(s.Outcome))
	fmt.Fprintf(w, "    started %s", stamp(s.Start))
	if !s.Close.IsZero() {
		fmt.Fprintf(w, ", closed %s (%s)", stamp(s.Close), plan.RoundDuration(s.Close.Sub(s.Start)))
	}
	fmt.Fprintf(w, ", run %s\n", s.RunID)
	switch {
	case s.Progress != nil:
		p := s.Progress
		diff := ""
		if p.Base > 0 {
			diff = fmt.Sprintf(" (a differential on seq %d)", p.Base)
		}
		fmt.Fprintf(w, "    progress: step %s %.0f%%%s%s%s\n", p.Step, p.Percent, bytesText(p.Bytes), timingsText(p.Timings), diff)
		if p.Error != "" {
			fmt.Fprintf(w, "    last error: %s\n", p.Error)
		}
	case s.ProgressErr != "":
		fmt.Fprintf(w, "    progress: %s\n", s.ProgressErr)
	}
	for _, a := range s.Pending {
		if line := pendingText(a); line != "" {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
	if s.PendingErr != "" {
		fmt.Fprintf(w, "    activities: %s\n", s.PendingErr)
	}
}

// pendingText is one line for an activity that is being retried (or
// paused): attempt, when the next one starts, the last failure. An
// activity on its first attempt says nothing the progress line does not.
func pendingText(a client.PendingActivity) string {
	if a.Attempt <= 1 && a.LastFailure == "" && a.State != "Paused" {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "retrying: activity %s attempt %d", a.Type, a.Attempt)
	if a.MaximumAttempts > 0 {
		fmt.Fprintf(&b, " of %d", a.MaximumAttempts)
	}
	fmt.Fprintf(&b, " (%s)", strings.ToLower(a.State))
	if !a.NextAttempt.IsZero() {
		fmt.Fprintf(&b, ", next attempt %s", stamp(a.NextAttempt))
	}
	if !a.Expiration.IsZero() {
		fmt.Fprintf(&b, ", gives up %s", stamp(a.Expiration))
	}
	if a.LastFailure != "" {
		fmt.Fprintf(&b, "; last failure")
		if a.LastFailureType != "" {
			fmt.Fprintf(&b, " [%s]", a.LastFailureType)
		}
		fmt.Fprintf(&b, ": %s", strings.ReplaceAll(a.LastFailure, "\n", " "))
	}
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func seqText(n int64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func bytesText(n int64) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%s)", humanBytes(n))
}

// timingsText lists the steps finished so far with their times.
func timingsText(t activities.Timings) string {
	var parts []string
	for _, s := range []struct {
		name string
		d    time.Duration
	}{{"backup", t.Backup}, {"copy", t.Copy}, {"restore", t.Restore}, {"CHECKDB", t.CheckDB}, {"sanity", t.Sanity}} {
		if s.d > 0 {
			parts = append(parts, s.name+" "+plan.RoundDuration(s.d).String())
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; took " + strings.Join(parts, ", ")
}

// predictedText puts the plan's prediction of a set's time to recover
// beside the measured one, each step with its rate and where the rate came
// from: the sets before it ("measured on set N") or the assumed site.
func predictedText(p *status.Prediction) string {
	if p == nil {
		return ""
	}
	rate := func(r plan.StepRate) string {
		if r.Source == plan.SourceCycle {
			return fmt.Sprintf("%.0f MB/s measured on set %d", r.MBps, r.Sequence)
		}
		return fmt.Sprintf("%.0f MB/s %s", r.MBps, r.Source)
	}
	return fmt.Sprintf("; predicted %s (restore %s at %s + CHECKDB %s at %s)", p.TimeToRecover,
		p.Restore, rate(p.RestoreRate), p.CheckDB, rate(p.CheckDBRate))
}
