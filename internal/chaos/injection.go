package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// watch follows the run until its cycles close or RunLimit passes,
// injecting the fault at its point and healing on schedule.
func (s *Sim) watch(ctx context.Context, r *run) {
	deadline := r.start.Add(RunLimit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(tick)
		s.doHeals(r)
		if r.armedOn != "" && !r.injected {
			switch {
			case r.plan.Fault == FaultSQLCrash && !s.F.InstanceUp(r.armedOn):
				// The armed crash fired: the host comes back after a while.
				r.injected, r.at = true, fmt.Sprintf("%s@%.0f%% (%s crashed in %s)", r.plan.Step, r.plan.Percent, r.armedOn, r.armedOp)
				name := r.armedOn
				r.later(r.plan.Heal, "restart "+name, func() error { return s.F.RestartInstance(name) })
			case r.plan.Fault == FaultSQLLostConn && dropped(s.F.Instances[r.armedOn]) > r.dropsBefore:
				r.injected, r.at = true, fmt.Sprintf("%s@%.0f%% (connection to %s dropped in %s)", r.plan.Step, r.plan.Percent, r.armedOn, r.armedOp)
			}
		}
		ref, ok := s.observed(ctx, r)
		if ok {
			if pr, ok := s.progress(ctx, ref); ok {
				if pr.Step != r.step {
					r.step, r.stepSince = pr.Step, time.Now()
				}
				r.pct, r.seq = pr.Percent, pr.Sequence
				if r.plan.Estate.VerifySwap && !r.swapped && r.step == activities.StepCopy {
					s.swapVerify(r)
				}
				if !r.injected && s.due(r) {
					s.inject(ctx, r, ref)
				}
			}
		}
		if len(r.heals) > 0 {
			continue
		}
		s.unstall(ctx, r)
		open := false
		for _, ref := range r.refs {
			if s.running(ctx, ref) {
				open = true
				break
			}
		}
		if !open {
			if o, err := s.openCycles(ctx); err == nil && len(o) == 0 {
				return
			}
		}
	}
	if ctx.Err() == nil {
		r.note("the cycles did not close within %s of the start", RunLimit)
	}
}

// StallLimit is how long an activity may stay started on a dead worker:
// with the simulation's 5 s heartbeat timeout a heartbeating activity is
// retried well before. One that is not waits for its StartToClose timeout
// (up to 30 min): the simulation notes the stall and, as an operator
// would, terminates the cycle.
const StallLimit = 45 * time.Second

// unstall terminates the open cycles whose pending activity has been
// started on a dead worker for longer than StallLimit.
func (s *Sim) unstall(ctx context.Context, r *run) {
	c := s.F.Client()
	if c == nil || time.Since(r.lastStallCheck) < time.Second {
		return
	}
	r.lastStallCheck = time.Now()
	dead := map[string]bool{}
	for _, w := range s.F.workers {
		dead[w.Identity] = !w.Alive()
	}
	open, err := s.openCycles(ctx)
	if err != nil {
		return
	}
	for _, ref := range open {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := c.DescribeWorkflowExecution(dctx, ref.ID, ref.RunID)
		cancel()
		if err != nil {
			continue
		}
		for _, pa := range d.GetPendingActivities() {
			if pa.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED || !dead[pa.GetLastWorkerIdentity()] {
				continue
			}
			since := pa.GetLastStartedTime().AsTime()
			if time.Since(since) < StallLimit {
				continue
			}
			r.note("stall: activity %s (attempt %d) of %s started %s ago on %s, which was killed, and is not retried before its StartToClose timeout: terminated",
				pa.GetActivityType().GetName(), pa.GetAttempt(), ref.ID, time.Since(since).Round(time.Second), pa.GetLastWorkerIdentity())
			if err := c.TerminateWorkflow(ctx, ref.ID, ref.RunID, "chaos: activity stalled on a killed worker"); err != nil {
				r.note("terminate %s: %v", ref.ID, err)
			}
			break
		}
	}
}

func (s *Sim) doHeals(r *run) {
	now := time.Now()
	var rest []heal
	for _, h := range r.heals {
		if now.Before(h.due) {
			rest = append(rest, h)
			continue
		}
		if err := h.do(); err != nil {
			r.note("heal %s: %v", h.what, err)
		}
	}
	r.heals = rest
}

// due reports whether the observed cycle reached the fault's point.
func (s *Sim) due(r *run) bool {
	p := r.plan
	if p.Step == "" || armed(p) || r.missed {
		return false
	}
	if p.Fault == FaultVaultCut && r.step == activities.StepImmutableCopy {
		after := s.cutAfter(r) // reads the set's stripes from its manifest
		if s.multipartCut(r) {
			// Cut once vault01 holds a part of a stripe and not all of
			// them: a multipart upload mid-way.
			return s.cutDue(r)
		}
		// The copy's percent comes with its heartbeats, seconds apart:
		// the upload's time at the store's bandwidth tells the point too.
		return r.pct >= p.Percent || time.Since(r.stepSince) >= after
	}
	cur, target := stepIndex(r.step), stepIndex(p.Step)
	switch {
	case cur < 0 || r.step == activities.StepDone:
		return false // waiting, failed, or over: the fault missed the cycle
	case cur > target:
		return true
	case cur < target:
		return false
	case hasPercent(p.Step):
		return r.pct >= p.Percent
	}
	return time.Since(r.stepSince) >= p.Dwell
}

// inject applies a fault aimed at a step of the observed cycle.
func (s *Sim) inject(ctx context.Context, r *run, ref wfRef) {
	p := r.plan
	at := r.step
	if hasPercent(r.step) {
		at = fmt.Sprintf("%s@%.0f%%", r.step, r.pct)
	}
	r.injected, r.at = true, at
	switch p.Fault {
	case FaultWorkerKill, FaultWorkerFreeze:
		w := s.activeWorker(ctx, ref, p.Pick)
		if w == nil {
			r.injected, r.missed = false, true
			r.note("no live worker to %s", p.Fault)
			return
		}
		r.at += " (" + w.Identity + ")"
		if p.Fault == FaultWorkerKill {
			w.Kill()
			r.later(p.Heal/4, "start a worker", func() error { _, err := s.F.StartWorker(); return err })
			return
		}
		w.Freeze()
		if _, err := s.F.StartWorker(); err != nil {
			r.note("start a worker: %v", err)
		}
		r.later(p.Heal, "thaw "+w.Identity, func() error { w.Thaw(); return nil })
	case FaultTemporalRestart:
		if err := s.F.StopTemporal(); err != nil {
			r.note("stop Temporal: %v", err)
		}
		r.later(p.Heal/4, "start Temporal", func() error { return s.F.StartTemporal(ctx) })
	case FaultSMBKill:
		srv := s.F.SMB[p.Server]
		srv.Kill()
		r.later(p.Heal, "restart smbd of "+p.Server, func() error { return restartSMB(srv) })
	case FaultSMBFreeze:
		srv := s.F.SMB[p.Server]
		srv.Freeze()
		r.later(p.Heal, "thaw smbd of "+p.Server, func() error { srv.Thaw(); return nil })
	case FaultSQLLostConn:
		// Between statements: every session to the source drops at once.
		if r.source == "" {
			r.injected, r.missed = false, true
			r.note("no replica backs %s up: no connection to drop", p.Target)
			return
		}
		s.F.Instances[r.source].DropConnections()
		r.at += " (every connection to " + r.source + " dropped)"
	case FaultSecondStart:
		ref, err := s.startCycle(ctx, p.Second, p, "-b")
		if err != nil {
			r.note("second start: %v", err)
		} else if ref.ID != "" {
			r.refs = append(r.refs, ref)
			r.at += " (started " + ref.ID + ")"
		} else {
			r.at += " (refused)"
		}
	case FaultCancel:
		if len(r.refs) > 0 && r.refs[0].ID != ref.ID && p.Pick%2 == 0 {
			// The user cancels the start they made (a launcher), not the
			// cycle it runs under the database's id.
			ref = r.refs[0]
		}
		if c := s.F.Client(); c != nil {
			if err := c.CancelWorkflow(ctx, ref.ID, ref.RunID); err != nil {
				r.note("cancel %s: %v", ref.ID, err)
			}
			r.at += " (" + ref.ID + ")"
		}
	case FaultFlipNew:
		what, err := s.flipWriting(p, r.source)
		if err != nil || what == "" {
			r.injected = false
			if r.step != activities.StepBackup || err != nil {
				// The BACKUP is over (or its files unknown): the fault missed.
				r.missed = true
				if err != nil {
					r.note("no BACKUP being written to damage: %v", err)
				}
			}
			return
		}
		r.at += " (" + what + ")"
	case FaultPlantLink, FaultPlantHuge, FaultPlantForged, FaultPlantWideSeq:
		what, err := s.plant(r)
		if err != nil || what == "" {
			r.injected, r.missed = false, true
			r.note("nothing planted on %s: %v", HostileServer, err)
			return
		}
		r.at += " (" + what + ")"
	case FaultVaultDown, FaultVaultCut, FaultVaultDelete:
		s.injectVault(ctx, r)
	default:
		r.injected, r.missed = false, true
	}
}

// activeWorker is the worker running the observed cycle's pending activity,
// or a live worker chosen by pick.
func (s *Sim) activeWorker(ctx context.Context, ref wfRef, pick uint64) *Worker {
	live := s.F.Workers()
	var unfrozen []*Worker
	for _, w := range live {
		if !w.frozen {
			unfrozen = append(unfrozen, w)
		}
	}
	if len(unfrozen) == 0 {
		return nil
	}
	if c := s.F.Client(); c != nil {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		d, err := c.DescribeWorkflowExecution(dctx, ref.ID, ref.RunID)
		cancel()
		if err == nil {
			for _, pa := range d.GetPendingActivities() {
				for _, w := range unfrozen {
					if pa.GetLastWorkerIdentity() == w.Identity {
						return w
					}
				}
			}
		}
	}
	return unfrozen[pick%uint64(len(unfrozen))]
}

var diskRE = regexp.MustCompile(`DISK\s*=\s*N'((?:[^']|'')*)'`)

// flipWriting flips one byte already written of a stripe of the BACKUP
// running for the target on source (the set being made is never verified
// yet).
func (s *Sim) flipWriting(p Plan, source string) (string, error) {
	in := s.F.Instances[source]
	if in == nil {
		return "", nil
	}
	var stmt *sqlsim.StatementRecord
	for _, st := range in.Statements() {
		if st.Kind == "BACKUP DATABASE" && st.Outcome == "running" && strings.EqualFold(st.Database, p.Target.Database) {
			stmt = &st
		}
	}
	if stmt == nil {
		return "", nil
	}
	var paths []string
	for _, m := range diskRE.FindAllStringSubmatch(stmt.SQL, -1) {
		if lp := s.F.LocalPath(strings.ReplaceAll(m[1], "''", "'")); lp != "" {
			paths = append(paths, lp)
		}
	}
	if len(paths) == 0 {
		return "", fmt.Errorf("no stripe on a backup server in %q", stmt.SQL)
	}
	path := paths[p.Pick%uint64(len(paths))]
	fi, err := os.Stat(path)
	if err != nil || fi.Size() == 0 {
		return "", err
	}
	off := int64(p.Offset % uint64(fi.Size()))
	if err := sqlsim.FlipByte(path, off); err != nil {
		return "", err
	}
	s.C.Damaged(filepath.Base(path))
	return fmt.Sprintf("%s byte %d of %d", filepath.Base(path), off, fi.Size()), nil
}

// disarm removes a crash or lost connection armed for a statement the
// cycle never reached.
func (s *Sim) disarm(r *run) {
	s.F.Instances[r.armedOn].Disarm(r.armedOp)
}
