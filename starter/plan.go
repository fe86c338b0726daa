package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/starter/client"
)

func planCommand(e *env) *cobra.Command {
	req := client.PlanRequest{Assumptions: client.DefaultAssumptions()}
	a := &req.Assumptions
	var size, logVolume string
	var noCatalog bool
	var logsSince, logEvery time.Duration
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "print the plan of a cycle without touching anything: workflow id, servers, stripes, memory, names, estimated times",
		Long: `Prints what a cycle of the database would do and how long each step should take. The estimates use the
throughputs measured on the database's last verified sets (the slowest of the newest three per step, read from the
manifests on its backup servers) where there are any, and the throughput flags for every other step; the output
says which is which. --no-catalog reads nothing and estimates from the flags alone.`,
		Args: noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if req.Database == "" {
				return usageError{msg: "--database NAME is required: the database to plan, as configured under databases:"}
			}
			if size != "" {
				n, err := config.ParseSize(size)
				if err != nil {
					return usageError{msg: fmt.Sprintf("--size %q: %v", size, err)}
				}
				req.SizeBytes = int64(n)
			}
			var perMinute int64
			if logVolume != "" {
				n, err := config.ParseSize(logVolume)
				if err != nil {
					return usageError{msg: fmt.Sprintf("--log-volume %q: %v (the log the database writes a minute, e.g. 512MiB)", logVolume, err)}
				}
				perMinute = int64(n)
			}
			if logsSince < 0 || logEvery < 0 {
				return usageError{msg: "--logs-since and --log-every must not be negative"}
			}
			cfg, err := e.requireConfig(cmd)
			if err != nil {
				return err
			}
			var m *client.Measured
			if !noCatalog {
				rctx, cancel := e.withTimeout(ctx, defaultTimeout)
				got, err := client.MeasuredThroughput(rctx, cfg, req.Instance, req.Database, nil)
				cancel()
				if err == nil { // else PlanCycle names the unknown database
					m, req.Measured = &got, got.Throughput
				}
			}
			p, err := client.PlanCycle(cfg, req)
			if errors.Is(err, client.ErrNameTooLong) {
				// Show every name and its limit, then fail: a cycle would.
				writePlan(e.stdout, p, req.SizeBytes, m)
				return err
			}
			if err != nil {
				return err
			}
			writePlan(e.stdout, p, req.SizeBytes, m)
			if p.Estimate != nil {
				if err := writeSiteLoss(e.stdout, p, req.SizeBytes, perMinute, logsSince, logEvery); err != nil {
					return err
				}
			}
			if m != nil {
				// The restore to the newest point, step by step, from what
				// the backup servers hold and measured; with differentials
				// both restores, through the differential and without.
				rctx, cancel := e.withTimeout(ctx, defaultTimeout)
				facts, err := client.ReadRecoveryFacts(rctx, cfg, req.Instance, req.Database, nil)
				cancel()
				if err != nil {
					return err
				}
				c, err := client.CompareRecovery(p, facts, m.Throughput)
				if err != nil {
					return err
				}
				writeRecovery(e.stdout, c, p.DiffEvery > 0)
			}
			return nil
		}),
	}
	fs := cmd.Flags()
	fs.StringVar(&req.Database, "database", "", "database to plan (its name under databases: in the config); required")
	fs.StringVar(&req.Instance, "instance", "", "source SQL instance, when the database name is configured on several")
	fs.StringVar(&size, "size", "", "database size to estimate for: data + log, e.g. 500GiB or 2TiB (no estimates without it)")
	fs.StringVar(&req.LastServer, "last-server", "", "previous cycle's primary backup server (the real cycle reads it from the manifests)")
	fs.Int64Var(&req.Sequence, "seq", 1, "sequence number for the example file names")
	fs.Float64Var(&a.NICMBps, "nic-mbps", a.NICMBps, "assumed throughput per NIC path, MB/s")
	fs.Float64Var(&a.BackupLUNReadMBps, "backup-read-mbps", a.BackupLUNReadMBps, "assumed backup server LUN sequential read, MB/s per LUN")
	fs.Float64Var(&a.BackupLUNWriteMBps, "backup-write-mbps", a.BackupLUNWriteMBps, "assumed backup server LUN sequential write, MB/s per LUN")
	fs.IntVar(&a.BackupLUNs, "backup-luns", a.BackupLUNs, "backup server LUNs used in parallel")
	fs.Float64Var(&a.DataLUNReadMBps, "data-read-mbps", a.DataLUNReadMBps, "assumed database data LUN sequential read, MB/s per LUN")
	fs.Float64Var(&a.DataLUNWriteMBps, "data-write-mbps", a.DataLUNWriteMBps, "assumed database data LUN sequential write, MB/s per LUN")
	fs.IntVar(&a.DataLUNs, "data-luns", a.DataLUNs, "database data LUNs used in parallel")
	fs.Float64Var(&a.CopyMBps, "copy-mbps", a.CopyMBps, "assumed primary -> remote backup server copy throughput, MB/s")
	fs.Float64Var(&a.CompressionFactor, "compression-factor", 0, fmt.Sprintf("uncompressed / compressed size (default %d with compression: true, else 1)", client.DefaultCompressionFactor))
	fs.BoolVar(&a.InstantFileInit, "instant-file-init", false, "the verification instance has instant file initialization (restore writes once)")
	fs.IntVar(&a.Cores, "cores", 0, "CPU cores of the SQL host, for stripes: auto (0 = unknown)")
	fs.StringVar(&logVolume, "log-volume", "", "transaction log the database writes a minute, e.g. 512MiB: the site-loss recover then replays the log backups since the full")
	fs.DurationVar(&logsSince, "logs-since", 24*time.Hour, "how long after the full the site is lost (the log backups to replay): the worst case is just before the next full")
	fs.DurationVar(&logEvery, "log-every", 0, "log backup interval (default: the database's log_backup.every, else 1m)")
	fs.BoolVar(&noCatalog, "no-catalog", false, "do not read the manifests on the backup servers: estimate from the throughput flags alone")
	return cmd
}

// writePlan prints the plan; m is what the manifests said (nil: not read).
func writePlan(w io.Writer, p client.CyclePlan, size int64, m *client.Measured) {
	contacted := "nothing was contacted"
	if m != nil && len(m.Read) > 0 {
		contacted = "read the manifests on " + strings.Join(m.Read, ", ") + ", nothing else was contacted"
	}
	fmt.Fprintf(w, "plan for %s (source %s); %s\n", tsql.Printable(p.Database), p.Address, contacted)
	for _, n := range p.Names {
		if n.What == "workflow id" {
			fmt.Fprintf(w, "workflow:  %s (every cycle of this database runs under this id)\n", n.Name)
		}
	}
	last := p.LastServer
	if last == "" {
		last = "none given; the cycle reads it from the manifests"
	}
	fmt.Fprintf(w, "rotation:  %s (last primary: %s)\n", strings.Join(p.Rotation, " -> "), last)
	fmt.Fprintf(w, "primary:   %s, copy to %s, restore + CHECKDB on %s\n", p.Primary, p.Remote, p.VerifyInstance)
	if ps := p.ProofSpace; ps.Mode != "" {
		if size > 0 {
			fmt.Fprintf(w, "log proof: %s on %s\n", ps, p.VerifyInstance)
		} else {
			fmt.Fprintf(w, "log proof: %s: %d copies at once on %s; %s (give --size for the bytes)\n", ps.Mode, ps.Copies, p.VerifyInstance, ps.Assumption)
		}
	}
	how := "configured"
	if p.StripesAuto {
		how = "auto"
	}
	fmt.Fprintf(w, "stripes:   %d (%s) over %d NIC paths, %d per NIC\n", p.Stripes, how, len(p.NICPaths), p.Stripes/max(len(p.NICPaths), 1))
	if p.StripesAuto && p.CycleStripes != p.Stripes {
		fmt.Fprintf(w, "           (the cycle's plan step does not know size or cores yet and chooses %d; set stripes: %d to get this layout)\n", p.CycleStripes, p.Stripes)
	}
	for _, s := range p.Layout {
		fmt.Fprintf(w, "  %2d  %s\n", s.Index, s.Path)
	}
	t := p.Tuning
	fmt.Fprintf(w, "tuning:    compression %v, BUFFERCOUNT %s, MAXTRANSFERSIZE %s, BLOCKSIZE %s\n", p.Compression,
		orDefault(int64(t.BufferCount), false), orDefault(int64(t.MaxTransferSize), true), orDefault(int64(t.BlockSize), true))
	budget := "no budget set"
	if p.MemoryBudget > 0 {
		budget = "budget " + humanBytes(p.MemoryBudget)
	}
	if p.MemoryErr != "" {
		fmt.Fprintf(w, "memory:    REFUSED: %s\n", p.MemoryErr)
	} else {
		fmt.Fprintf(w, "memory:    %s of backup buffers (BUFFERCOUNT x MAXTRANSFERSIZE), %s: ok\n", humanBytes(p.MemoryBytes), budget)
	}
	writeNames(w, p.Names)
	a := p.Assumptions
	fmt.Fprintf(w, "assumed:   NIC %g MB/s x %d (source) / %d (remote); backup LUN read %g, write %g MB/s x %d; data LUN read %g, write %g MB/s x %d; copy %g MB/s; compression factor %g; instant file init %v\n",
		a.NICMBps, p.Source.NICs, p.RemoteHW.NICs, a.BackupLUNReadMBps, a.BackupLUNWriteMBps, a.BackupLUNs,
		a.DataLUNReadMBps, a.DataLUNWriteMBps, a.DataLUNs, a.CopyMBps, a.CompressionFactor, a.InstantFileInit)
	if p.Estimate != nil {
		writeMeasured(w, m, p.Rates) // what the estimates use
	} else if m != nil {
		writeMeasured(w, m, m.Throughput)
	}
	if p.Estimate == nil {
		fmt.Fprintf(w, "estimates: give --size (data + log, e.g. 2TiB) for backup, copy, restore and CHECKDB times\n")
		return
	}
	est, r := p.Estimate, p.Rates
	fmt.Fprintf(w, "estimates for %s (seed 000 formulas; CHECKDB is a lower bound):\n", humanBytes(size))
	if r.Backup.Measured() {
		fmt.Fprintf(w, "  backup   %10s  at %.0f MB/s, %s\n", hm(est.Backup), r.Backup.MBps, measuredWhere(r.Backup))
	} else {
		fmt.Fprintf(w, "  backup   %10s  at %.0f MB/s, limited by %s\n", hm(est.Backup), est.BackupRate.MBps, est.BackupRate.Bottleneck)
	}
	cf := a.CompressionFactor
	if r.CompressionFactor > 0 {
		cf = r.CompressionFactor
	}
	if r.Copy.Measured() {
		fmt.Fprintf(w, "  copy     %10s  %s at %.0f MB/s, %s\n", hm(est.Copy), humanBytes(int64(float64(size)/cf)), r.Copy.MBps, measuredWhere(r.Copy))
	} else {
		fmt.Fprintf(w, "  copy     %10s  %s at %g MB/s\n", hm(est.Copy), humanBytes(int64(float64(size)/cf)), a.CopyMBps)
	}
	if r.Restore.Measured() {
		fmt.Fprintf(w, "  restore  %10s  at %.0f MB/s, %s\n", hm(est.Restore), r.Restore.MBps, measuredWhere(r.Restore))
	} else {
		fmt.Fprintf(w, "  restore  %10s  at %.0f MB/s, limited by %s\n", hm(est.Restore), est.RestoreRate.MBps, est.RestoreRate.Bottleneck)
	}
	if r.CheckDB.Measured() {
		fmt.Fprintf(w, "  CHECKDB  %10s  at %.0f MB/s, %s\n", hm(est.CheckDB), r.CheckDB.MBps, measuredWhere(r.CheckDB))
	} else {
		fmt.Fprintf(w, "  CHECKDB  %10s  at %g MB/s\n", hm(est.CheckDB), p.RemoteHW.DatabaseReadMBps())
	}
	fmt.Fprintf(w, "  cycle    %10s  from backup to proven restorable\n", hm(est.Total))
}

// writeSiteLoss prints the recover the case study plans for after losing
// the primary site (plan.SiteLoss): the full over the network from the
// remote backup server onto a server like the source, then the log backups
// of logsSince at perMinute bytes a minute, each at the assumed cost of a
// RESTORE LOG, against the database's rto.
func writeSiteLoss(w io.Writer, p client.CyclePlan, size, perMinute int64, logsSince, logEvery time.Duration) error {
	if logEvery == 0 {
		logEvery = p.LogEvery
	}
	if logEvery == 0 {
		logEvery = time.Minute
	}
	in := plan.SiteLoss{Hardware: p.Source, PerLog: plan.DefaultLogOverhead,
		Workload: plan.Workload{DataBytes: size, CompressionFactor: p.Assumptions.CompressionFactor, InstantFileInit: p.Assumptions.InstantFileInit}}
	if perMinute > 0 {
		in.Logs = int(logsSince / logEvery)
		in.LogBytes = int64(float64(perMinute) * logsSince.Minutes())
	}
	e, err := plan.EstimateSiteLoss(in)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "site loss: the recover from %s alone onto a server like the source (seed 000 restore formula, over the network):\n", p.Remote)
	fmt.Fprintf(w, "  full     %10s  at %.0f MB/s, limited by %s\n", hm(e.Full), e.FullRate.MBps, e.FullRate.Bottleneck)
	if in.Logs > 0 {
		fmt.Fprintf(w, "  logs     %10s  %d log backups (one every %s for %s) of %s: %s at %s a log (assumed until a drill measures it) + %s at %.0f MB/s\n",
			hm(e.Logs), in.Logs, logEvery, logsSince, humanBytes(in.LogBytes), hm(e.LogsPerLog), plan.DefaultLogOverhead, hm(e.LogsBytes), e.FullRate.MBps)
	} else {
		fmt.Fprintf(w, "  logs               give --log-volume (the log written a minute) to add the log backups since the full\n")
	}
	verdict := "no rto configured"
	switch {
	case p.RTO > 0 && e.Total <= p.RTO:
		verdict = fmt.Sprintf("within the rto of %s (%s to spare)", p.RTO, hm(p.RTO-e.Total))
	case p.RTO > 0:
		verdict = fmt.Sprintf("OVER the rto of %s by %s", p.RTO, hm(e.Total-p.RTO))
	}
	fmt.Fprintf(w, "  recover  %10s  %s\n", hm(e.Total), verdict)
	return nil
}

// writeRecovery prints the restore of a database to its newest point
// (nil: no verified full): with differentials (diffs) both restores and
// which is shorter; then each step of the restore a recover would run now,
// and the newest drill's predicted and measured steps.
func writeRecovery(w io.Writer, c *client.RecoveryComparison, diffs bool) {
	if c == nil {
		fmt.Fprintf(w, "recovery:  no verified full yet: nothing to estimate a restore from\n")
		return
	}
	f, e, r := c.Facts, c.Estimate, c.Rates
	fmt.Fprintf(w, "recovery:  to the newest point, from full seq %d (%s) at %.0f MB/s (%s): %s\n", f.Full.Sequence,
		humanBytes(f.Full.Header.BackupSize), r.Restore.MBps, rateWhere(r.Restore, "the flags above"), hm(e.Full))
	if diffs {
		writeDiffRecovery(w, c)
	}
	writePredicted(w, c)
	writeDrillError(w, f.LastDrill())
}

// writeDiffRecovery prints both restores of a database with
// differentials and which is shorter.
func writeDiffRecovery(w io.Writer, c *client.RecoveryComparison) {
	f, e := c.Facts, c.Estimate
	fmt.Fprintf(w, "  full + %s since it (%s at %s)  %s\n", logsText(f.Logs), humanBytes(f.LogBytesSinceFull), logReplayText(c.Rates.Logs),
		hm(e.FullAndLogs))
	if f.Diff == nil {
		fmt.Fprintf(w, "  full + differential: no verified differential on seq %d yet: the first one gives this estimate\n", f.Full.Sequence)
		return
	}
	fmt.Fprintf(w, "  full + differential seq %d (%s) + %s since it (%s)  %s\n", f.Diff.Sequence, humanBytes(f.Diff.Header.BackupSize),
		logsText(f.LogsSinceDiff), humanBytes(f.LogBytesSinceDiff), hm(e.FullDiffAndLogs))
	if e.DiffShortens() {
		fmt.Fprintf(w, "  differentials shorten this recovery by %s\n", hm(e.FullAndLogs-e.FullDiffAndLogs))
		return
	}
	fmt.Fprintf(w, "  differentials lengthen this recovery by %s: they cost more than the logs they spare; diff_backup: {every: 0s} turns them off for this database\n",
		hm(e.FullDiffAndLogs-e.FullAndLogs))
}

// logReplayText says how logs are replayed: their bytes' rate and each
// log's cost, and where each came from.
func logReplayText(l plan.LogReplay) string {
	out := fmt.Sprintf("%s MB/s, %s", mbps(l.Rate.MBps), rateWhere(l.Rate, "the restore rate"))
	switch {
	case l.From == plan.SourceAssumed:
		out += fmt.Sprintf(", + %s a log assumed: a drill (drill:) measures both", l.PerLog)
	case l.PerLog > 0:
		out += fmt.Sprintf(", + %s a log measured by the drill of %s", plan.RoundDuration(l.PerLog), stamp(l.At))
	}
	return out
}

// mbps renders a rate: whole MB/s, a slow one (a drill's log bytes) with
// its first digits.
func mbps(v float64) string {
	if v < 10 {
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
	return fmt.Sprintf("%.0f", v)
}

// writePredicted prints each step of the restore a recover would run now,
// as the plan predicts it (what a drill or a recover records at its
// start).
func writePredicted(w io.Writer, c *client.RecoveryComparison) {
	f, p, r := c.Facts, c.Predicted, c.Rates
	what := fmt.Sprintf("full seq %d", f.Full.Sequence)
	if f.Diff != nil {
		what += fmt.Sprintf(" + differential seq %d", f.Diff.Sequence)
	}
	if f.LogsSinceDiff > 0 {
		what += " + " + logsText(f.LogsSinceDiff)
	}
	fmt.Fprintf(w, "  predicted steps of a recover now (%s):\n", what)
	fmt.Fprintf(w, "    full          %10s  %s at %.0f MB/s\n", rd(p.Full), humanBytes(p.FullBytes), p.RestoreMBps)
	if f.Diff != nil {
		fmt.Fprintf(w, "    differential  %10s  %s at %.0f MB/s\n", rd(p.Diff), humanBytes(p.DiffBytes), p.RestoreMBps)
	}
	if p.LogCount > 0 {
		fmt.Fprintf(w, "    logs          %10s  %s of %s at %s\n", rd(p.Logs), logsText(p.LogCount), humanBytes(p.LogBytes), logReplayText(r.Logs))
	}
	if p.Recovery > 0 {
		fmt.Fprintf(w, "    recovery      %10s  as the drill of %s measured it\n", rd(p.Recovery), stamp(r.RecoveryAt))
	}
	fmt.Fprintf(w, "    restore       %10s  from the full's RESTORE to the database online\n", rd(p.Restore()))
	fmt.Fprintf(w, "    CHECKDB       %10s  of the copy at %.0f MB/s, %s (a drill with drill.checkdb runs it)\n", rd(p.CheckDB), p.CheckDBMBps,
		rateWhere(r.CheckDB, "the flags above"))
}

// writeDrillError prints what the newest drill predicted of its steps at
// its start beside what it measured, and the error of each (nil: no
// drill).
func writeDrillError(w io.Writer, d *catalog.DrillResult) {
	if d == nil {
		fmt.Fprintf(w, "  drill:     none recorded: a drill (drill:) measures these steps and the error of their prediction\n")
		return
	}
	if len(d.PredictionError) == 0 {
		s := d.Steps
		fmt.Fprintf(w, "  drill:     %s %s measured full %s, logs %s, recovery %s, checks %s (recorded before drills kept their prediction)\n",
			d.Outcome, stamp(d.At), rd(s.Full), rd(s.Logs), rd(s.Recovery), rd(s.Checks))
		return
	}
	fmt.Fprintf(w, "  drill:     %s %s, predicted at its start against measured (error = measured - predicted):\n", d.Outcome, stamp(d.At))
	for _, e := range d.PredictionError {
		fmt.Fprintf(w, "    %-13s %10s  measured %s  error %s\n", stepName(e.Step), rd(e.Predicted), rd(e.Measured), errorText(e))
	}
}

// stepName is a predicted step as the plan's lines name it.
func stepName(step string) string {
	switch step {
	case catalog.PredictDiff:
		return "differential"
	case catalog.PredictCheckDB:
		return "CHECKDB"
	}
	return step
}

// errorText is a step's error: signed, and as a ratio where something was
// predicted.
func errorText(e catalog.StepError) string {
	sign := "+"
	if e.Error < 0 {
		sign = "-"
	}
	out := sign + rd(e.Error.Abs())
	if e.Ratio > 0 {
		out += fmt.Sprintf(" (x%.2f)", e.Ratio)
	}
	return out
}

// rateWhere says where a rate comes from; assumed names what it assumes.
func rateWhere(r plan.StepRate, assumed string) string {
	switch {
	case r.Source == plan.SourceDrill:
		return "measured by the drill of " + stamp(r.At)
	case r.Measured():
		return measuredWhere(r)
	}
	return assumed
}

func logsText(n int) string {
	if n == 1 {
		return "1 log"
	}
	return fmt.Sprintf("%d logs", n)
}

// writeMeasured says which steps the manifests measured and which the
// flags give, and which servers could not be read.
func writeMeasured(w io.Writer, m *client.Measured, t plan.Throughput) {
	if m == nil {
		return
	}
	var measured, given []string
	for _, s := range []struct {
		name string
		r    plan.StepRate
	}{{"backup", t.Backup}, {"copy", t.Copy}, {"restore", t.Restore}, {"CHECKDB", t.CheckDB}} {
		if s.r.Measured() {
			measured = append(measured, fmt.Sprintf("%s %.0f MB/s (%s)", s.name, s.r.MBps, measuredWhere(s.r)))
		} else {
			given = append(given, s.name)
		}
	}
	switch {
	case len(m.Read) == 0:
		fmt.Fprintf(w, "measured:  no backup server could be read: every step from the flags above\n")
	case len(measured) == 0:
		fmt.Fprintf(w, "measured:  nothing yet (no verified set with step timings of %s long or more): every step from the flags above\n", plan.MinMeasuredDuration)
	case len(given) == 0:
		fmt.Fprintf(w, "measured:  %s; the flags above give none of the estimates\n", strings.Join(measured, ", "))
	default:
		fmt.Fprintf(w, "measured:  %s; %s from the flags above\n", strings.Join(measured, ", "), strings.Join(given, ", "))
	}
	if t.CompressionFactor > 0 {
		fmt.Fprintf(w, "           compression factor %.2f measured (the smallest of the last sets)\n", t.CompressionFactor)
	}
	names := make([]string, 0, len(m.Unread))
	for n := range m.Unread {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "           %s not read, its sets are not counted: %s\n", n, m.Unread[n])
	}
}

// measuredWhere says where a measured rate was seen.
func measuredWhere(r plan.StepRate) string {
	if r.Source == plan.SourceCalibration {
		return "measured by calibration " + stamp(r.At)
	}
	return fmt.Sprintf("measured on set %d of %s", r.Sequence, stamp(r.At))
}

// writeNames lists the derived names at their widest (sequence of 14
// digits), each with its length and limit.
func writeNames(w io.Writer, names []client.DerivedName) {
	if len(names) == 0 {
		return
	}
	fmt.Fprintf(w, "names:     at their widest (sequence %d)\n", tsql.MaxSequence)
	for _, n := range names {
		verdict := "ok"
		if n.Over {
			verdict = "OVER THE LIMIT"
		}
		fmt.Fprintf(w, "  %-30s %4d of %4d %-10s %s  %s\n", n.What, n.Len, n.Limit, n.Unit, verdict, tsql.Printable(n.Name))
	}
}

func orDefault(n int64, bytes bool) string {
	switch {
	case n == 0:
		return "SQL Server default"
	case bytes:
		return humanBytes(n)
	}
	return fmt.Sprint(n)
}

func humanBytes(n int64) string { return plan.FormatBytes(n) }

// rd renders a step's time as plan.RoundDuration does: a drill on a small
// database takes seconds.
func rd(d time.Duration) string { return plan.RoundDuration(d).String() }

// hm renders an estimate as 2h25m10s (seconds kept: small databases).
func hm(d time.Duration) string { return d.Round(time.Second).String() }
