package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/spf13/cobra"

	calibrateacts "github.com/backupcycle/backupcycle/activities/calibrate"
	"github.com/backupcycle/backupcycle/internal/calibrate"
	"github.com/backupcycle/backupcycle/internal/calibrate/chart"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// calibrateCommand runs the Calibrate workflow for one database and writes
// its report (JSON), chart (PNG) and proposed configuration patch.
func calibrateCommand(e *env) *cobra.Command {
	var in calibrateacts.CalibrateInput
	var out string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "calibrate",
		Short: "measure the BACKUP settings a database's backup server sustains (NUL read speed, stripes over the NIC paths, MAXTRANSFERSIZE, BUFFERCOUNT) and propose a config patch",
		Long: `Runs the Calibrate workflow for one database: a BACKUP to NUL for the read speed of the data files, then
COPY_ONLY backups to the backup server's NIC paths over a grid of stripe counts, MAXTRANSFERSIZE and BUFFERCOUNT.
Each setting is a full backup of the database, so a calibration takes several backup times: run it in a quiet
window. A branch of the grid stops when a setting is clearly slower than the best; settings whose buffers exceed
memory_budget are skipped with the reason, never run. SQL Server's own figure (its 3014 message) is the measure.
Calibration files are removed after each setting, and on cancel or failure.

It waits for the end (no time limit unless --timeout is given), prints each setting as it is measured, then the
report and the proposed databases: entry, and writes calibration-<instance>-<database>.json and .png to --out.
The report is also kept on the backup server beside the manifests.`,
		Args: noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if in.Database == "" {
				return usageError{msg: "--database NAME is required: the database to calibrate, as configured or selected"}
			}
			inst, cfg, err := e.resolveInstance(in.Instance, in.Database)
			if err != nil {
				return err
			}
			in.Instance = inst
			if cfg != nil && in.Server != "" {
				if _, ok := cfg.BackupServer(in.Server); !ok {
					return usageError{msg: fmt.Sprintf("--server %q is not defined in backup_servers of %s", in.Server, cfg.File)}
				}
			}
			if out != "" {
				if fi, err := os.Stat(out); err != nil || !fi.IsDir() {
					return usageError{msg: fmt.Sprintf("--out %q is not a directory: create it or give another", out)}
				}
			}
			c, err := e.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			run, err := c.StartCalibration(ctx, in)
			if err != nil {
				return err
			}
			if !asJSON {
				fmt.Fprintf(e.stdout, "calibration of %s started: workflow %s, run %s\n", tsql.Printable(in.Database), run.GetID(), run.GetRunID())
			}
			wctx, cancel := e.withTimeout(ctx, 0)
			defer cancel()
			done := make(chan struct{})
			if !asJSON {
				go followCalibration(wctx, e.stdout, done, func(ctx context.Context) ([]calibrate.Result, error) {
					p, err := c.CalibrationStatus(ctx, run.GetID())
					return p.Results, err
				})
			}
			rep, err := c.WaitCalibration(wctx, run)
			close(done)
			if err != nil {
				return err
			}
			var files []string
			if out != "" {
				if files, err = writeCalibration(out, &rep); err != nil {
					return err
				}
			}
			if asJSON {
				return writeJSON(e.stdout, rep)
			}
			writeCalibrationReport(e.stdout, &rep)
			for _, f := range files {
				fmt.Fprintf(e.stdout, "wrote %s\n", f)
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&in.Database, "database", "", "the database to calibrate (required)")
	f.StringVar(&in.Instance, "instance", "", "its SQL instance (sql_instances name), when the name alone is ambiguous")
	f.StringVar(&in.Server, "server", "", "the backup server to write to (default: the first of the database's rotation)")
	f.StringVar(&out, "out", ".", `directory for calibration-<instance>-<database>.json and .png ("" writes none)`)
	jsonFlag(cmd, &asJSON, "print the report as JSON (no progress lines)")
	return cmd
}

// followCalibration prints each setting once it is measured, from the
// workflow's calibration query, until done.
func followCalibration(ctx context.Context, w io.Writer, done <-chan struct{}, results func(context.Context) ([]calibrate.Result, error)) {
	printed := 0
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rs, err := results(qctx)
		cancel()
		if err != nil {
			continue // not started yet, or between tasks: ask again
		}
		for ; printed < len(rs); printed++ {
			fmt.Fprintf(w, "  %s\n", resultLine(rs[printed]))
		}
	}
}

func resultLine(r calibrate.Result) string {
	if r.Failed != "" {
		return fmt.Sprintf("%-18s %-44s failed: %s", r.Phase, r.Point, r.Failed)
	}
	return fmt.Sprintf("%-18s %-44s %8.1f MB/s  %7.1f s", r.Phase, r.Point, r.MBps, r.Seconds)
}

// writeCalibrationReport prints the report for a DBA.
func writeCalibrationReport(w io.Writer, r *calibrate.Report) {
	fmt.Fprintf(w, "calibration of %s (%s) on %s, %d NIC paths, %s of data, %s\n", tsql.Printable(r.Database), r.Instance, r.Server, r.NICs,
		sizeOrUnknown(r.SizeBytes), r.Finished.Sub(r.Started).Round(time.Second))
	if r.ReadMBps > 0 {
		fmt.Fprintf(w, "  read speed (BACKUP TO DISK = 'NUL'): %.1f MB/s\n", r.ReadMBps)
	}
	for _, res := range r.Results {
		if !res.Null {
			fmt.Fprintf(w, "  %s\n", resultLine(res))
		}
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "  %-18s %-44s skipped: %s\n", s.Phase, s.Point, s.Reason)
	}
	if r.Best != nil {
		fmt.Fprintf(w, "best: %s at %.1f MB/s\n", r.Best.Point, r.Best.MBps)
	}
	if r.Proposed != nil {
		fmt.Fprintf(w, "proposed: %s at %.1f MB/s (the least buffer memory and files within %.0f%% of the best)\n", r.Proposed.Point, r.Proposed.MBps, calibrate.Gain*100)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if r.Patch != "" {
		fmt.Fprintf(w, "configuration patch (merge into the database's entry):\n%s", r.Patch)
	}
}

func sizeOrUnknown(b int64) string {
	if b <= 0 {
		return "unknown size"
	}
	return plan.FormatBytes(b)
}

var unsafeFile = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// writeCalibration writes the report and its chart into dir.
func writeCalibration(dir string, r *calibrate.Report) ([]string, error) {
	base := filepath.Join(dir, "calibration-"+unsafeFile.ReplaceAllString(r.Instance, "_")+"-"+unsafeFile.ReplaceAllString(r.Database, "_"))
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	files := []string{base + ".json"}
	if err := os.WriteFile(files[0], data, 0o644); err != nil {
		return nil, fmt.Errorf("write the calibration report: %w", err)
	}
	png, err := chart.PNG(r)
	if err != nil {
		return files, nil // nothing measured: no chart
	}
	if err := os.WriteFile(base+".png", png, 0o644); err != nil {
		return files, fmt.Errorf("write the calibration chart: %w", err)
	}
	return append(files, base+".png"), nil
}
