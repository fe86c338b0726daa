package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/starter/client"
)

func statusCmd(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
	f := client.StatusFilter{}
	fs.StringVar(&f.Database, "database", "", "only cycles of this database (the BackupDatabase search attribute; with --from-manifests: this exact name on every instance)")
	fs.IntVar(&f.Limit, "limit", 10, "show at most this many cycles, newest first")
	fs.DurationVar(&f.ProgressTimeout, "progress-timeout", client.DefaultProgressTimeout, "how long a running cycle's progress query may take (a worker answers it)")
	asJSON := fs.Bool("json", false, "print the cycles as JSON")
	fromManifests := fs.Bool("from-manifests", false, "answer from the manifests on the backup servers of --config: per database the last verified set, its age, copies, time to recover and last failure; exit 1 when any database is out of its rpo/rto")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *fromManifests {
		cfg, err := e.requireConfig(fs)
		if err != nil {
			return err
		}
		return lastProven(ctx, e, cfg, f.Database, *asJSON)
	}
	if f.Limit < 1 {
		return usageError{msg: fmt.Sprintf("--limit %d: give 1 or more", f.Limit)}
	}
	c, err := e.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	cycles, err := c.CycleStatus(ctx, f)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(cycles)
	}
	if len(cycles) == 0 {
		fmt.Fprintf(e.stdout, "no backup cycles found on namespace %s for query %s\n", c.Namespace(), client.StatusQuery(f))
		return nil
	}
	for _, s := range cycles {
		db := dash(s.Database)
		if s.Instance != "" {
			db += "@" + s.Instance
		}
		fmt.Fprintf(e.stdout, "%s  %s  database %s  step %s  seq %s  server %s  outcome %s\n", s.WorkflowID, s.Status,
			db, dash(s.Step), seqText(s.Sequence), dash(s.Server), dash(s.Outcome))
		fmt.Fprintf(e.stdout, "    started %s", stamp(s.Start))
		if !s.Close.IsZero() {
			fmt.Fprintf(e.stdout, ", closed %s (%s)", stamp(s.Close), rnd(s.Close.Sub(s.Start)))
		}
		fmt.Fprintf(e.stdout, ", run %s\n", s.RunID)
		switch {
		case s.Progress != nil:
			p := s.Progress
			fmt.Fprintf(e.stdout, "    progress: step %s %.0f%%%s%s\n", p.Step, p.Percent, bytesText(p.Bytes), timingsText(p.Timings))
			if p.Error != "" {
				fmt.Fprintf(e.stdout, "    last error: %s\n", p.Error)
			}
		case s.ProgressErr != "":
			fmt.Fprintf(e.stdout, "    progress: %s\n", s.ProgressErr)
		}
	}
	return nil
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
			parts = append(parts, s.name+" "+rnd(s.d).String())
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; took " + strings.Join(parts, ", ")
}
