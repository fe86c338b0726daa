package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/drill"
	"github.com/backupcycle/backupcycle/activities/recover"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// The recovery entries: one run in eight recovers LogTarget (its workload
// commits all along and its chain is proven) instead of running a cycle,
// started as an operator or a schedule starts it:
//
//   - EntryRecover: `starter recover` (client.StartRecover) to a point
//     drawn in the proven window, or latest, into RecoverScratch on
//     verify01, which the harness drops after I12 (and before the start,
//     when an earlier run left it);
//   - EntryDrill: `starter drill` (client.StartDrill) with such a point;
//   - EntryDrillSchedule: a trigger of its drill schedule (drill: in
//     logYAML: a point of the last 10 minutes of the proven window).
//
// Each may get one fault of its own: the worker restoring log n of m
// killed, verify01 crashing at a percent of a RESTORE LOG once n logs are
// restored, one backup server gone for the run (its smbd killed, its share
// unreachable for every SQL instance), or a log file the recover needs
// deleted or damaged on one server (put back after the run). I12
// (recovercheck.go) judges how each ended.

// Entry points of the recovery entries.
const (
	EntryRecover       = "recover"        // client.StartRecover, as `starter recover`
	EntryDrill         = "drill"          // client.StartDrill, as `starter drill`
	EntryDrillSchedule = "drill-schedule" // a trigger of the database's drill schedule
)

// Faults of the recovery entries.
const (
	FaultRecoverWorkerKill Fault = "recover-worker-kill"  // the worker restoring log n of m killed
	FaultRecoverCrash      Fault = "recover-target-crash" // verify01 crashes at a percent of the next RESTORE (LOG) once n logs are restored
	FaultServerGone        Fault = "backup-server-gone"   // Server's smbd killed and its share unreachable for SQL Server, for the run
	FaultRecoverLogFile    Fault = "recover-log-file"     // a log file the recover needs deleted or damaged on Server, put back after the run
)

// recoverFaultWeights: how often each is drawn for a recovery entry; the
// first is none.
var recoverFaultWeights = []weighted[Fault]{{FaultNone, 2}, {FaultRecoverWorkerKill, 2}, {FaultRecoverCrash, 2},
	{FaultServerGone, 2}, {FaultRecoverLogFile, 2}}

func isRecoverFault(f Fault) bool {
	return slices.ContainsFunc(recoverFaultWeights[1:], func(w weighted[Fault]) bool { return w.v == f })
}

// RecoverScratch is the name a recover entry restores LogTarget under on
// verify01.
const RecoverScratch = "DBA_recover"

// drillCopy is the name of LogTarget's drill copy (drill.name's default).
var drillCopy = strings.ReplaceAll(config.DefaultDrillName, "{db}", LogTarget.Database)

// RecoverPlan is a recovery entry's choices (Plan.Recover).
type RecoverPlan struct {
	Entry string
	// Latest asks for the newest point; else Point places the point in
	// the proven window (a drill from the schedule picks its own).
	Latest bool
	Point  uint64
	// LogAt: a mid-chain fault hits once this share of the logs (5 to
	// 95 %) is restored.
	LogAt float64
	// Damage: FaultRecoverLogFile flips a byte of the file instead of
	// deleting it.
	Damage bool
}

// Recovers reports whether the run is a recovery entry.
func (p Plan) Recovers() bool { return p.Recover.Entry != "" }

func (rp RecoverPlan) String() string {
	switch {
	case rp.Entry == EntryDrillSchedule:
		return "(the drill's own point)"
	case rp.Latest:
		return "(latest)"
	}
	return "(a point of the proven window)"
}

// drawRecover makes run p a recovery entry one time in eight (always the
// same draws in the same order). A forced recovery fault makes every run
// one; a forced cycle fault none.
func drawRecover(r *rand.Rand, force Fault, p *Plan) {
	on := r.IntN(8) == 0
	rp := RecoverPlan{Entry: []string{EntryRecover, EntryRecover, EntryDrill, EntryDrillSchedule}[r.IntN(4)], Latest: r.IntN(3) == 0,
		Point: r.Uint64(), LogAt: 0.05 + 0.9*r.Float64(), Damage: r.IntN(2) == 0}
	fault := pick(r, recoverFaultWeights)
	pct := 5 + r.Float64()*90
	server := Servers[r.IntN(len(Servers))]
	switch {
	case isRecoverFault(force):
		on, fault = true, force
	case force != "":
		on = false
	}
	if !on {
		return
	}
	p.Recover, p.Entry, p.Target, p.Fault, p.Server = rp, rp.Entry, LogTarget, fault, server
	p.Step, p.Percent, p.Dwell, p.Twin, p.Blank, p.NoInst = "", 0, 0, false, "", false
	switch fault {
	case FaultRecoverWorkerKill:
		p.Step, p.Percent = recover.StepLogs, 100*rp.LogAt // of the logs
	case FaultRecoverCrash:
		p.Step, p.Percent = recover.StepLogs, pct // of the RESTORE
	}
}

// recRun is a recovery entry's state in its run.
type recRun struct {
	began time.Time
	// point is the point asked (zero: latest, or the drill's own).
	point time.Time
	// child is the Recover's workflow id (the drill's child).
	child string
	// snap is the chain as the harness read it before the start.
	snap recoverSnap
	// gone is the backup server away for the run; atEnd heals what the
	// run's faults keep away until its end.
	gone  string
	atEnd []heal
	// rows are the drill copy's rows, read while it existed, and what the
	// drill said of its Recover then.
	rows   []commitRow
	rowsOf *workflows.RecoverStatus
	// ended is when the entry's workflow closed (set by the outcome).
	ended time.Time
}

// recoverSnap is what the harness reads of LogTarget's chain before a
// recovery entry starts: the window a point is drawn in, and the newest
// proven log a recover to the latest point must reach (held intact on a
// server that is not gone).
type recoverSnap struct {
	chain      int64
	lo, hi     time.Time // the proven window (UTC)
	newest     int64     // newest proven log held intact on a reachable server
	newestText string
	logs       []catalog.LogBackup // the walk from the newest verified full
}

// recoverRun starts the run's recovery entry, injects its fault and
// follows it until it closes or RunLimit passes.
func (s *Sim) recoverRun(ctx context.Context, r *run) error {
	p := r.plan
	rr := &recRun{}
	r.rec = rr
	if p.Entry == EntryRecover {
		// An earlier run's copy: the operator drops a scratch restore.
		if err := s.dropScratch(ctx, RecoverScratch); err != nil {
			r.note("drop the earlier %s on %s: %v", RecoverScratch, Verify01, err)
		}
	}
	s.recoverBefore(r)
	defer func() {
		for _, h := range rr.atEnd {
			if err := h.do(); err != nil {
				r.note("heal %s: %v", h.what, err)
			}
		}
	}()
	s.freshLog(ctx)
	rr.snap = s.C.snapRecover(ctx, rr.gone)
	if !p.Recover.Latest && p.Entry != EntryDrillSchedule && rr.snap.hi.After(rr.snap.lo) {
		span := int64(rr.snap.hi.Sub(rr.snap.lo))
		rr.point = rr.snap.lo.Add(time.Duration(p.Recover.Point % uint64(span))).Truncate(time.Millisecond)
	} else if !p.Recover.Latest && p.Entry != EntryDrillSchedule {
		r.note("no proven window of %s to draw a point in: latest", LogTarget)
	}
	if p.Fault == FaultRecoverLogFile {
		if err := s.spoilLog(r); err != nil {
			return err
		}
	}
	rr.began = time.Now()
	if err := s.startRecover(ctx, r); err != nil {
		return err
	}
	s.watchRecover(ctx, r)
	return nil
}

// freshLog waits a while for a log backup of LogTarget started since the
// run's estate was applied (which may have restarted its instance on
// another clock), so that the newest log the entry restores was taken on
// the source's clock of now.
func (s *Sim) freshLog(ctx context.Context) {
	since := time.Now()
	if n := len(s.C.estates); n > 0 {
		since = s.C.estates[n-1].from
	}
	for deadline := time.Now().Add(3 * LogEvery); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(500 * time.Millisecond) {
		for _, srv := range Servers {
			parts, _, err := s.C.chainParts(ctx, srv)
			if err != nil {
				continue
			}
			for _, p := range parts {
				for _, l := range p.Logs {
					if (l.State == catalog.LogWritten || l.State == catalog.LogCopied) && l.BackupStartUTC.After(since) {
						return
					}
				}
			}
		}
	}
}

// recoverBefore applies the fault that holds for the whole run: a backup
// server gone.
func (s *Sim) recoverBefore(r *run) {
	p := r.plan
	if p.Fault != FaultServerGone {
		return
	}
	srv := s.F.SMB[p.Server]
	srv.Kill()
	for _, in := range s.F.Instances {
		in.SetShareUnreachable(UNC(p.Server), true)
	}
	r.rec.gone = p.Server
	r.injected, r.at = true, fmt.Sprintf("before-start (%s gone: smbd killed, %s unreachable)", p.Server, UNC(p.Server))
	r.rec.atEnd = append(r.rec.atEnd, heal{what: p.Server + " back", do: func() error {
		for _, in := range s.F.Instances {
			in.SetShareUnreachable(UNC(p.Server), false)
		}
		return restartSMB(srv)
	}})
}

// spoilLog deletes, or flips a byte of, one file of a log backup the
// recover will restore (of the walk, up to the point), on p.Server when its
// record names it there, else on the other; the original is put back at
// the end of the run.
func (s *Sim) spoilLog(r *run) error {
	p, rr := r.plan, r.rec
	type cand struct{ server, name string }
	var cands []cand
	for _, l := range rr.snap.logs {
		if !rr.point.IsZero() && l.BackupStartUTC.After(rr.point.Add(LogEvery)) {
			break
		}
		for _, f := range l.Files {
			srv := p.Server
			if !slices.Contains(l.Servers, srv) && len(l.Servers) > 0 {
				srv = l.Servers[0]
			}
			if s.C.logFileIntact(srv, f) == "" {
				cands = append(cands, cand{srv, f.Name})
			}
		}
	}
	if len(cands) == 0 {
		r.note("no log file of %s's chain to spoil", LogTarget)
		return nil
	}
	c := cands[p.Pick%uint64(len(cands))]
	path := filepath.Join(s.F.ShareDir(c.server), c.name)
	orig, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	what := "deleted"
	if p.Recover.Damage && len(orig) > 0 {
		off := int64(p.Offset % uint64(len(orig)))
		if err := sqlsim.FlipByte(path, off); err != nil {
			return err
		}
		what = fmt.Sprintf("byte %d flipped", off)
	} else if err := os.Remove(path); err != nil {
		return err
	}
	// I9 gives the product its grace for the file; it is whole again after
	// the run.
	s.C.deletedLog(c.server, c.name)
	r.injected, r.at = true, fmt.Sprintf("before-start (log file %s on %s %s)", c.name, c.server, what)
	rr.atEnd = append(rr.atEnd, heal{what: "put back " + c.name + " on " + c.server, do: func() error {
		return os.WriteFile(path, orig, 0o644)
	}})
	return nil
}

// startRecover starts the entry's workflow as its entry point does.
func (s *Sim) startRecover(ctx context.Context, r *run) error {
	p, rr := r.plan, r.rec
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sc := s.F.Starter()
	var ref wfRef
	var run sdkclient.WorkflowRun
	var err error
	switch p.Entry {
	case EntryRecover:
		in := workflows.RecoverInput{Database: LogTarget.Database, Instance: LogTarget.Instance, ToInstance: Verify01, As: RecoverScratch,
			AsOf: rr.point, Latest: rr.point.IsZero()}
		rr.child = workflows.RecoverWorkflowID(Verify01, RecoverScratch)
		if run, err = sc.StartRecover(sctx, in); err == nil {
			ref = wfRef{ID: run.GetID(), RunID: run.GetRunID(), Entry: p.Entry}
		}
	case EntryDrill:
		in := workflows.DrillInput{Database: LogTarget.Database, Instance: LogTarget.Instance, AsOf: rr.point, Latest: rr.point.IsZero()}
		rr.child = workflows.RecoverWorkflowID(Verify01, drillCopy)
		if run, err = sc.StartDrill(sctx, in); err == nil {
			ref = wfRef{ID: run.GetID(), RunID: run.GetRunID(), Entry: p.Entry}
		}
	case EntryDrillSchedule:
		rr.child = workflows.RecoverWorkflowID(Verify01, drillCopy)
		ref, err = s.trigger(sctx, client.DrillScheduleID(LogTarget.Instance, LogTarget.Database), LogTarget, p.Entry)
	default:
		return fmt.Errorf("chaos: unknown recovery entry %q", p.Entry)
	}
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &started):
		r.note("%s refused: %v", p.Entry, err)
	case err != nil:
		return fmt.Errorf("chaos: %s of %s: %w", p.Entry, LogTarget, err)
	case ref.ID != "":
		r.refs = append(r.refs, ref)
	default:
		r.note("the drill schedule started nothing")
	}
	return nil
}

// watchRecover follows the entry until it closes or RunLimit passes:
// heals on schedule, the mid-chain fault once its log is reached, the
// drill copy's rows while it exists.
func (s *Sim) watchRecover(ctx context.Context, r *run) {
	deadline := r.start.Add(RunLimit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(tick)
		s.doHeals(r)
		if r.armedOn != "" && !r.injected && !s.F.InstanceUp(r.armedOn) {
			what := r.armedOp
			for _, st := range slices.Backward(s.F.Instances[r.armedOn].Statements()) {
				if st.Outcome == "crashed" {
					what = fmt.Sprintf("%s of %s", st.Kind, st.Database)
					break
				}
			}
			r.injected, r.at = true, fmt.Sprintf("%s (%s crashed at %.0f%% of %s)", r.at, r.armedOn, r.plan.Percent, what)
			r.later(r.plan.Heal, "restart "+r.armedOn, func() error { return s.F.RestartInstance(Verify01) })
		}
		if !r.injected && !r.missed && r.armedOn == "" {
			// A drill's Recover id names an earlier drill's until this
			// drill starts its own.
			if st, ok := s.recoverStatus(ctx, r.rec.child); ok && !st.Started.Before(r.rec.began.Add(-time.Second)) {
				s.recoverInject(ctx, r, st)
			}
		}
		s.drillRows(ctx, r)
		if len(r.heals) > 0 {
			continue
		}
		s.unstall(ctx, r)
		open := slices.ContainsFunc(r.refs, func(ref wfRef) bool { return s.running(ctx, ref) })
		if !open {
			if o, err := s.openCycles(ctx); err == nil && len(o) == 0 {
				return
			}
		}
	}
	if ctx.Err() == nil {
		r.note("the %s did not close within %s of the start", r.plan.Entry, RunLimit)
	}
}

// recoverStatus asks the Recover id where it stands.
func (s *Sim) recoverStatus(ctx context.Context, id string) (workflows.RecoverStatus, bool) {
	var st workflows.RecoverStatus
	c := s.F.Client()
	if c == nil || id == "" {
		return st, false
	}
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	v, err := c.QueryWorkflow(qctx, id, "", workflows.RecoverQuery)
	if err != nil || v.Get(&st) != nil {
		return st, false
	}
	return st, true
}

// recoverInject applies a mid-chain fault once the Recover has restored
// its share of the logs (at least one left): the worker running it killed,
// or verify01 armed to crash at a percent of its next RESTORE.
func (s *Sim) recoverInject(ctx context.Context, r *run, st workflows.RecoverStatus) {
	p := r.plan
	if p.Fault != FaultRecoverWorkerKill && p.Fault != FaultRecoverCrash {
		return
	}
	switch {
	case st.Outcome != workflows.RecoverRunning || st.Step == recover.StepFinish || st.Step == recover.StepDone:
		r.missed = true
		r.note("the recover ended its logs (%s, %d of %d restored) before the fault", st.Step, st.LogsDone, st.LogsTotal)
		return
	case st.Step != recover.StepLogs || st.LogsTotal == 0:
		return
	}
	n := min(int(p.Recover.LogAt*float64(st.LogsTotal)), st.LogsTotal-1)
	if st.LogsDone < n {
		return
	}
	at := fmt.Sprintf("restore-logs (%d of %d restored, log %d next)", st.LogsDone, st.LogsTotal, st.CurrentLog)
	if p.Fault == FaultRecoverCrash {
		if err := s.F.Instances[Verify01].CrashAt(sqlsim.OpRestore, p.Percent); err != nil {
			r.missed = true
			r.note("arm %s: %v", Verify01, err)
			return
		}
		r.armedOn, r.armedOp, r.at = Verify01, sqlsim.OpRestore, at
		return
	}
	w := s.activeWorker(ctx, wfRef{ID: r.rec.child}, p.Pick)
	if w == nil {
		r.missed = true
		r.note("no live worker to kill")
		return
	}
	w.Kill()
	r.injected, r.at = true, at+" ("+w.Identity+" killed)"
	r.later(p.Heal/4, "start a worker", func() error { _, err := s.F.StartWorker(); return err })
}

// drillRows reads the drill copy's rows once the drill's Recover
// recovered it and its checks run (the copy exists until the drop).
func (s *Sim) drillRows(ctx context.Context, r *run) {
	rr := r.rec
	if r.plan.Entry == EntryRecover || rr.rows != nil || len(r.refs) == 0 {
		return
	}
	c := s.F.Client()
	if c == nil {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var st workflows.DrillStatus
	v, err := c.QueryWorkflow(qctx, r.refs[0].ID, r.refs[0].RunID, workflows.DrillQuery)
	if err != nil || v.Get(&st) != nil || st.Step != drill.StepChecks || st.Recover == nil || st.Recover.Outcome != workflows.RecoverRecovered {
		return
	}
	rows, err := s.scratchRows(ctx, drillCopy)
	if err == nil && rows != nil {
		rr.rows, rr.rowsOf = rows, st.Recover
	}
}

// scratchRows reads dbo.CommitLog of name on verify01 (the harness's own
// connection).
func (s *Sim) scratchRows(ctx context.Context, name string) ([]commitRow, error) {
	conn, err := s.F.DB(Verify01)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	rows, err := queryCommitRows(ctx, conn, name)
	if err == nil && rows == nil {
		rows = []commitRow{}
	}
	return rows, err
}

// scratchExists reports whether name exists on verify01.
func (s *Sim) scratchExists(ctx context.Context, name string) (bool, error) {
	conn, err := s.F.DB(Verify01)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var n int
	err = conn.QueryRowContext(qctx, "SELECT COUNT(*) FROM sys.databases WHERE name = @p1", name).Scan(&n)
	return n > 0, err
}

// dropScratch drops name on verify01 when it exists.
func (s *Sim) dropScratch(ctx context.Context, name string) error {
	ok, err := s.scratchExists(ctx, name)
	if err != nil || !ok {
		return err
	}
	q, err := tsql.QuoteIdent(name)
	if err != nil {
		return err
	}
	return s.F.exec(ctx, Verify01, "DROP DATABASE "+q)
}

// recoverOutcome reads how the entry ended, judges it (I12: its findings
// go to the next Check), then drops the recover's scratch copy. It
// returns the run line's outcomes, the error texts (I6) and notes.
func (s *Sim) recoverOutcome(ctx context.Context, r *run) ([]string, []string, Notes) {
	p, rr := r.plan, r.rec
	if len(r.refs) == 0 {
		return []string{"nothing started"}, nil, nil
	}
	ref := r.refs[0]
	c := s.F.Client()
	if c == nil {
		return []string{ref.ID + ": Temporal down"}, nil, nil
	}
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	var rst workflows.RecoverStatus
	var dst workflows.DrillStatus
	var err error
	if p.Entry == EntryRecover {
		err = c.GetWorkflow(gctx, ref.ID, ref.RunID).Get(gctx, &rst)
	} else {
		err = c.GetWorkflow(gctx, ref.ID, ref.RunID).Get(gctx, &dst)
	}
	cancel()
	rr.ended = time.Now()
	what := fmt.Sprintf("%s %s (run %s)", p.Entry, ref.ID, ref.RunID)
	var out, errs []string
	var fs []finding
	var notes, n Notes
	class := "completed"
	if err != nil {
		errs = append(errs, err.Error())
		class = outcomeClass(err)
		out = append(out, fmt.Sprintf("%s %s: %s", p.Entry, class, short(err.Error())))
		fs, n = s.C.judgeFailure(what, err)
		notes = append(notes, n...)
	}
	// A drill started under another id than the database's drill id (the
	// schedule's) runs as a child under that id: its record and its copy
	// are the child's. One that found a drill running there was skipped.
	skipped := false
	if err == nil && p.Entry != EntryRecover {
		switch {
		case dst.Skipped != "":
			skipped = true
			out = append(out, "drill skipped: "+short(dst.Skipped))
		case dst.RunBy != "" && dst.Result.WorkflowID != "":
			ref = wfRef{ID: dst.Result.WorkflowID, RunID: dst.Result.RunID, Entry: ref.Entry}
		}
	}
	switch {
	case err != nil, skipped:
	case p.Entry == EntryRecover:
		cl := recoverClaimOf(what, rst, rr.began)
		out = append(out, fmt.Sprintf("recover %s to %s: set %d, logs %d..%d, point %s (%s), %s", rst.Outcome, rst.Point, rst.Sequence, cl.first, cl.last,
			stamp(rst.RecoveryPoint), rst.RecoveryPointFrom, rst.Times.Total.Round(time.Millisecond)))
		rows, rerr := s.scratchRows(ctx, RecoverScratch)
		if rerr != nil {
			fs = append(fs, finding{key: what + "|read", detail: fmt.Sprintf("%s completed (%s) but %s on %s cannot be read: %v", what, rst.Outcome,
				RecoverScratch, Verify01, rerr)})
			break
		}
		cl.rows = rows
		f, n := s.C.checkClaim(ctx, cl, rr.snap)
		fs, notes = append(fs, f...), append(notes, n...)
	default:
		d := s.C.drillResult(ctx, ref)
		if d == nil {
			fs = append(fs, finding{key: what + "|record", detail: what + " passed but no drill record on either backup server holds it"})
			break
		}
		out = append(out, fmt.Sprintf("drill %s to %s: set %d, logs %d..%d, point %s (%s), rto %s, dropped %v", d.Outcome, d.Point, d.Sequence, d.FirstLog,
			d.LastLog, stamp(d.RecoveryPoint), d.RecoveryPointFrom, d.RTO.Round(time.Millisecond), d.Dropped))
		cl, cerr := drillClaim(what, d)
		if cerr != nil {
			fs = append(fs, finding{key: what + "|point", detail: what + ": " + cerr.Error()})
			break
		}
		if rr.rowsOf != nil && rr.rowsOf.Sequence == d.Sequence && rr.rowsOf.RecoveryPoint.Equal(d.RecoveryPoint) {
			cl.rows = rr.rows
		}
		f, n := s.C.checkClaim(ctx, cl, rr.snap)
		fs, notes = append(fs, f...), append(notes, n...)
	}
	s.tallyRecover(p.Entry + " " + class)
	if p.Entry != EntryRecover && class != "terminated" && !skipped {
		f, n := s.drillDropped(ctx, what, ref, err)
		fs, notes = append(fs, f...), append(notes, n...)
	}
	if t := s.C.touchedSource(rr.began, rr.ended); len(t) > 0 {
		fs = append(fs, finding{key: what + "|source", detail: fmt.Sprintf("%s touched the source database %s: %s", what, LogTarget, strings.Join(t, "; "))})
	}
	if p.Entry == EntryRecover {
		if err := s.dropScratch(ctx, RecoverScratch); err != nil {
			notes = append(notes, fmt.Sprintf("drop %s on %s: %v", RecoverScratch, Verify01, err))
		}
	}
	if len(fs) > 0 {
		s.C.later = append(s.C.later, func(add addFunc) {
			for _, f := range fs {
				add(12, f.key, "%s", f.detail)
			}
		})
	}
	return out, errs, notes
}

// drillDropped (I12) checks that a drill that ended left no copy behind,
// unless its record says why it could not drop it.
func (s *Sim) drillDropped(ctx context.Context, what string, ref wfRef, err error) ([]finding, Notes) {
	ok, qerr := s.scratchExists(ctx, drillCopy)
	if qerr != nil {
		return nil, Notes{fmt.Sprintf("I12: whether %s is on %s: %v", drillCopy, Verify01, qerr)}
	}
	if !ok {
		return nil, nil
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() == activities.ErrTargetDatabaseExists {
		return nil, Notes{fmt.Sprintf("%s is on %s and the drill refused it as not its own", drillCopy, Verify01)}
	}
	if d := s.C.drillResult(ctx, ref); d != nil && !d.Dropped && d.DropError != "" {
		return nil, Notes{fmt.Sprintf("%s left on %s: its record says why: %s", drillCopy, Verify01, d.DropError)}
	}
	return []finding{{key: what + "|dropped", detail: fmt.Sprintf("%s ended but its copy %s is still on %s and its record says nothing of why", what, drillCopy, Verify01)}}, nil
}

// tallyRecover counts the recovery entries by how they ended.
func (s *Sim) tallyRecover(class string) {
	if s.Recovers == nil {
		s.Recovers = map[string]int{}
	}
	s.Recovers[class]++
}

// RecoverSummary is the tally of the recovery entries and of I12.
func (s *Sim) RecoverSummary() string {
	n := 0
	for _, v := range s.Recovers {
		n += v
	}
	return fmt.Sprintf("recovery entries: %d (%s); %s", n, counts(s.Recovers), s.C.recs.stats())
}
