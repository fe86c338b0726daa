package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

var quietLogger = sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

// Bounds of one run: the cycles must close within RunLimit of the start
// (faults heal well before); after the run is healed, SettleLimit more.
const (
	RunLimit    = 4 * time.Minute
	SettleLimit = 3 * time.Minute
	tick        = 100 * time.Millisecond
)

// Sim runs the simulation's cycles one after another on a fleet and checks
// the invariants after each.
type Sim struct {
	F    *Fleet
	C    *Checker
	Seed uint64
	Out  io.Writer
	// Force, when set, is the fault of every run (see Draw).
	Force Fault

	Runs, Faults, Violations int
	// Unreadable counts how the cycles of runs ended whose verification
	// instance could not read their sets.
	Unreadable map[string]int
	// Twins counts the databases named like a set (twin.go).
	Twins TwinStats
	// Outcomes counts the cycles by how they ended ("verified", "failed
	// <type>", "cancelled", "skipped", "terminated").
	Outcomes map[string]int
	// Recovers counts the recovery entries by how they ended
	// (recoverentry.go).
	Recovers map[string]int
	streak   map[Target]streak
}

// NewSim is a simulation on f with seed, printing to out.
func NewSim(f *Fleet, seed uint64, out io.Writer) *Sim {
	return &Sim{F: f, C: NewChecker(f), Seed: seed, Out: out}
}

func (s *Sim) printf(format string, args ...any) {
	fmt.Fprintf(s.Out, "chaos: "+format+"\n", args...)
}

// wfRef is a workflow run the simulation started (or found running).
type wfRef struct {
	ID, RunID, Entry string
}

// run is the state of one run.
type run struct {
	plan     Plan
	start    time.Time
	refs     []wfRef
	injected bool
	at       string // where the fault was injected
	notes    []string
	heals    []heal
	// sql-crash, sql-lost-connection: armed on instance for op until it
	// fires (the instance goes down / the statement's connection is closed)
	armedOn, armedOp string
	dropsBefore      int
	// step tracking of the observed cycle
	step      string
	stepSince time.Time
	pct       float64
	seq       int64

	lastStallCheck time.Time
	missed         bool // the fault could not be applied at its point: not tried again

	// source is the instance the target's BACKUP runs on (a replica for
	// the group's database; "" when no replica would back it up).
	source string
	// twin is the database named like the set this run makes, created
	// before it (Sim.twin), and that set's number.
	twin    string
	twinSeq int64
	// unreadable says why the estate keeps verify01 from reading the
	// run's sets ("" when it can); swapped: Estate.VerifySwap was applied.
	unreadable string
	swapped    bool
	// rec is a recovery entry's state (nil for a cycle).
	rec *recRun
	// uploadBytes is the size of the set the immutable copy uploads (0:
	// not read yet), cutStripes its stripes.
	uploadBytes int64
	cutStripes  []catalog.Stripe
	// cut is the multipart upload vault-upload-cut cut (nil: none was).
	cut *cutUpload
}

type heal struct {
	due  time.Time
	what string
	do   func() error
}

func (r *run) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

func (r *run) later(d time.Duration, what string, do func() error) {
	r.heals = append(r.heals, heal{due: time.Now().Add(d), what: what, do: do})
}

// CanonicalID is the one workflow id of a database's cycle.
func CanonicalID(t Target) string { return workflows.CycleWorkflowID(t.Instance, t.Database) }

// Run performs run i: draws its plan, starts the cycle, injects the fault,
// heals the fleet, waits for every cycle to close and checks the invariants.
func (s *Sim) Run(ctx context.Context, i int) error {
	r := &run{plan: Draw(s.Seed, i, s.Force), start: time.Now()}
	p := r.plan
	s.Runs++

	s.C.EstateApplying(time.Now())
	changes, err := s.F.ApplyEstate(ctx, p.Estate)
	if err != nil {
		return fmt.Errorf("chaos: estate of run %d: %w", i, err)
	}
	if len(changes) > 0 {
		r.note("estate: %s", strings.Join(changes, "; "))
	}
	if p.Target.Instance == AGroup {
		r.note("group: %s", p.Estate.Group())
	}
	s.C.EstateFrom(time.Now(), p.Estate)
	r.source = s.sourceOf(ctx, p)
	r.unreadable = unreadableWhy(p, p.Estate, r.source)
	if p.Estate.SourceCheckDB && r.source != "" {
		if err := s.F.IntegrityCheck(ctx, r.source, p.Target.Database); err != nil {
			r.note("DBA's CHECKDB of %s on %s: %v", p.Target.Database, r.source, err)
		}
	}
	if p.Recovers() {
		if err := s.recoverRun(ctx, r); err != nil {
			return err
		}
	} else if err := s.cycleRun(ctx, r); err != nil {
		return err
	}
	// Heal whatever is still away, disarm a crash that did not fire, and
	// let every cycle finish.
	for _, h := range r.heals {
		if err := h.do(); err != nil {
			r.note("heal %s: %v", h.what, err)
		}
	}
	r.heals = nil
	if err := s.F.Heal(ctx); err != nil {
		return fmt.Errorf("heal the fleet after run %d: %w", i, err)
	}
	if r.armedOn != "" && !r.injected {
		s.disarm(r)
	}
	s.settle(ctx, r)
	if r.cut != nil {
		s.cutResumed(ctx, r)
	}
	if r.injected {
		s.Faults++
	}
	s.twinMet(r)
	var outcomes, errs, classes []string
	var recNotes Notes
	if p.Recovers() {
		outcomes, errs, recNotes = s.recoverOutcome(ctx, r)
	} else {
		outcomes, errs, classes = s.outcomes(ctx, r)
	}
	s.tally(r, classes)
	s.C.logs.pitDraw = p.Pick ^ p.Offset
	vs, notes := s.C.Check(ctx, errs)
	notes = append(recNotes, notes...)
	at := r.at
	if !r.injected {
		at = p.Where()
		if p.Fault != FaultNone {
			at += " (not reached)"
		}
	}
	desc := fmt.Sprintf("%s/%s via %s", p.Target.Instance, p.Target.Database, p.Entry)
	if p.Recovers() {
		desc += " " + p.Recover.String()
	} else if n := spell(p.Target.Database, p.Estate.Spell); p.Entry == EntryWebUI && blanked(n, p.Blank) != p.Target.Database {
		desc += fmt.Sprintf(" (as %q)", blanked(n, p.Blank))
	} else if n != p.Target.Database && p.Entry != EntrySchedule {
		desc += fmt.Sprintf(" (as %q)", n)
	}
	if p.Fault != FaultNone {
		desc += fmt.Sprintf(", fault %s at %s", p.Fault, at)
	}
	s.printf("run %d: %s: %s (%.1fs)", i, desc, strings.Join(outcomes, "; "), time.Since(r.start).Seconds())
	for _, n := range append(r.notes, notes...) {
		s.printf("  note: %s", s.C.redact(n))
	}
	// The violation line's step is one token (the run line has the details).
	where, _, _ := strings.Cut(at, " ")
	if !r.injected && p.Fault != FaultNone {
		where += ",not-reached"
	}
	for _, v := range vs {
		s.Violations++
		s.printf("violation I%d seed %d run %d fault %s step %s: %s", v.Invariant, s.Seed, i, p.Fault, where, v.Detail)
		s.printf("  replay: make chaos SEED=%d RUNS=%d", s.Seed, i+1)
	}
	return nil
}

// cycleRun starts the run's cycle after the faults that come before it,
// and follows it.
func (s *Sim) cycleRun(ctx context.Context, r *run) error {
	p := r.plan
	if err := s.before(ctx, r); err != nil {
		return err
	}
	if err := s.twin(ctx, r); err != nil {
		return err
	}
	if err := s.arm(r); err != nil {
		return err
	}
	ref, err := s.startCycle(ctx, p.Entry, p, "")
	if err != nil {
		return err
	}
	if ref.ID != "" {
		r.refs = append(r.refs, ref)
	}
	s.watch(ctx, r)
	return nil
}

// StuckAfter is how many of a database's cycles in a row may fail the same
// way (whatever the faults) before the simulation says it is stuck.
const StuckAfter = 3

// tally counts the cycles' outcomes and notes a database whose cycles keep
// failing the same way (a liveness problem: not an invariant, but nothing
// gets verified any more).
func (s *Sim) tally(r *run, classes []string) {
	if s.Outcomes == nil {
		s.Outcomes, s.streak = map[string]int{}, map[Target]streak{}
	}
	for _, c := range classes {
		s.Outcomes[c]++
		if r.unreadable != "" {
			if s.Unreadable == nil {
				s.Unreadable = map[string]int{}
			}
			s.Unreadable[c]++
		}
	}
	if r.unreadable != "" {
		r.note("estate: %s", r.unreadable)
	}
	t := r.plan.Target
	st := s.streak[t]
	// A failure the run explains (the estate keeps verify01 from reading
	// the sets, a Web UI start typed the name with a blank and was
	// refused) is what the product must do: it ends a streak rather than
	// adding to it.
	explained := r.unreadable != "" || r.plan.Blank != ""
	switch {
	case slices.Contains(classes, "verified"):
		st = streak{}
	case len(classes) > 0 && strings.HasPrefix(classes[0], "failed") && explained:
		st = streak{}
	case len(classes) > 0 && strings.HasPrefix(classes[0], "failed"):
		if st.class != classes[0] {
			st = streak{class: classes[0], from: r.plan.Run}
		}
		st.n++
		if st.n == StuckAfter {
			r.note("stuck: the last %d cycles of %s (runs %d..%d) all %s", st.n, t, st.from, r.plan.Run, st.class)
			from, run, class := st.from, r.plan.Run, st.class
			s.C.later = append(s.C.later, func(add addFunc) { s.C.poisoned(t, from, run, class, add) })
		}
	}
	s.streak[t] = st
}

type streak struct {
	class string
	from  int
	n     int
}

// OutcomeSummary is the tally of the cycles' outcomes.
func (s *Sim) OutcomeSummary() string {
	keys := make([]string, 0, len(s.Outcomes))
	for k := range s.Outcomes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return s.Outcomes[keys[i]] > s.Outcomes[keys[j]] || (s.Outcomes[keys[i]] == s.Outcomes[keys[j]] && keys[i] < keys[j])
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", s.Outcomes[k], k)
	}
	return "cycles: " + strings.Join(parts, ", ")
}

// EstateSummary says how the cycles ended whose verification instance
// could not read their sets, and what the twins met.
func (s *Sim) EstateSummary() string {
	s.Twins.Removed = s.twinsRemoved()
	return fmt.Sprintf("estates: cycles whose verification instance could not read their set: %s; twins: %s", counts(s.Unreadable), s.Twins)
}

// counts lists a tally as "n key" by key.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}

// Summary is the simulation's last line.
func (s *Sim) Summary() string {
	return fmt.Sprintf("chaos: %d runs, %d faults, %d invariant violations (seed %d)", s.Runs, s.Faults, s.Violations, s.Seed)
}

// startCycle starts a cycle of p.Target through entry. A refused start
// (already running, skipped by the schedule) is a note, not an error. A
// start the user types (starter run, the Web UI) spells the name as the
// estate says and names the group's database through the group or a
// replica; a resume names the set's database as its manifests do.
func (s *Sim) startCycle(ctx context.Context, entry string, p Plan, suffix string) (wfRef, error) {
	c := s.F.Client()
	if c == nil {
		return wfRef{}, nil
	}
	in := workflows.CycleInput{Database: spell(p.Target.Database, p.Estate.Spell), Instance: p.Target.Instance}
	if in.Instance == AGroup {
		in.Instance = p.Estate.Via
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if entry == EntryStarter && suffix == "" && p.Pick%3 == 0 {
		if seq := s.unfinished(p); seq > 0 {
			entry, in.Resume = EntryResume, seq
			in.Database, in.Instance = p.Target.Database, p.Target.Instance
		}
	}
	switch entry {
	case EntryStarter, EntryResume:
		run, err := s.F.Starter().StartCycle(sctx, in)
		var already *client.AlreadyRunningError
		if errors.As(err, &already) {
			return wfRef{Entry: entry}, nil
		}
		if err != nil {
			return wfRef{}, fmt.Errorf("chaos: starter run %s: %w", p.Target, err)
		}
		if in.Resume > 0 {
			entry = fmt.Sprintf("%s %d", entry, in.Resume)
		}
		return wfRef{ID: run.GetID(), RunID: run.GetRunID(), Entry: entry}, nil
	case EntryWebUI:
		if p.NoInst {
			in.Instance = ""
		}
		// A Web UI user types the name, blanks and all.
		in.Database = blanked(in.Database, p.Blank)
		run, err := c.ExecuteWorkflow(sctx, sdkclient.StartWorkflowOptions{ID: p.WebID + suffix, TaskQueue: taskQueue},
			workflows.BackupCycleName, in)
		if err != nil {
			return wfRef{}, fmt.Errorf("chaos: Web UI start of %s: %w", p.Target, err)
		}
		return wfRef{ID: run.GetID(), RunID: run.GetRunID(), Entry: entry}, nil
	case EntrySchedule:
		return s.trigger(sctx, client.ScheduleID(p.Target.Instance, p.Target.Database), p.Target, entry)
	}
	return wfRef{}, fmt.Errorf("chaos: unknown entry point %q", entry)
}

// trigger triggers the schedule id of t and returns the workflow it
// started (no id when none showed within 10 s).
func (s *Sim) trigger(ctx context.Context, id string, t Target, entry string) (wfRef, error) {
	sc := s.F.Starter()
	before, err := sc.DescribeSchedule(ctx, id)
	if err != nil {
		return wfRef{}, fmt.Errorf("chaos: schedule %s of %s: %w", id, t, err)
	}
	if err := sc.TriggerSchedule(ctx, id); err != nil {
		return wfRef{}, fmt.Errorf("chaos: trigger schedule %s of %s: %w", id, t, err)
	}
	// The started workflow shows in the schedule's recent actions.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		d, err := s.F.Client().ScheduleClient().GetHandle(ctx, id).Describe(ctx)
		if err != nil {
			continue
		}
		if n := len(d.Info.RecentActions); n > 0 {
			last := d.Info.RecentActions[n-1]
			if last.StartWorkflowResult != nil && last.StartWorkflowResult.WorkflowID != before.LastWorkflowID {
				return wfRef{ID: last.StartWorkflowResult.WorkflowID, RunID: last.StartWorkflowResult.FirstExecutionRunID, Entry: entry}, nil
			}
		}
	}
	return wfRef{Entry: entry}, nil
}

// unfinished picks a set of p.Target an outage left written, copied,
// restored or checked on some server (0: none).
func (s *Sim) unfinished(p Plan) int64 {
	files, _ := s.C.scan()
	var seqs []int64
	for _, mf := range files {
		switch mf.M.State {
		case catalog.StateWritten, catalog.StateCopied, catalog.StateRestored, catalog.StateChecked:
		default:
			continue
		}
		if mf.ID.Instance == p.Target.Instance && mf.ID.Database == p.Target.Database && !slices.Contains(seqs, mf.ID.Sequence) {
			seqs = append(seqs, mf.ID.Sequence)
		}
	}
	if len(seqs) == 0 {
		return 0
	}
	slices.Sort(seqs)
	return seqs[(p.Pick/3)%uint64(len(seqs))]
}

// observed is the cycle the fault is aimed at: the canonical workflow when
// one runs that started in this run (a launcher's child), else the first
// workflow the run started.
func (s *Sim) observed(ctx context.Context, r *run) (wfRef, bool) {
	c := s.F.Client()
	if c == nil {
		return wfRef{}, false
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	id := CanonicalID(r.plan.Target)
	if d, err := c.DescribeWorkflowExecution(dctx, id, ""); err == nil {
		info := d.GetWorkflowExecutionInfo()
		if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && !info.GetStartTime().AsTime().Before(r.start.Add(-time.Second)) {
			return wfRef{ID: id, RunID: info.GetExecution().GetRunId()}, true
		}
	}
	if len(r.refs) > 0 {
		return r.refs[0], true
	}
	return wfRef{}, false
}

func (s *Sim) progress(ctx context.Context, ref wfRef) (workflows.Progress, bool) {
	var p workflows.Progress
	c := s.F.Client()
	if c == nil {
		return p, false
	}
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	v, err := c.QueryWorkflow(qctx, ref.ID, ref.RunID, workflows.ProgressQuery)
	if err != nil || v.Get(&p) != nil {
		return p, false
	}
	return p, true
}

// running reports whether a workflow run is still open; unknown counts as open.
func (s *Sim) running(ctx context.Context, ref wfRef) bool {
	c := s.F.Client()
	if c == nil {
		return true
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := c.DescribeWorkflowExecution(dctx, ref.ID, ref.RunID)
	if err != nil {
		var nf *serviceerror.NotFound
		return !errors.As(err, &nf)
	}
	return d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// openCycles lists every running workflow of the namespace but the log
// chain's.
func (s *Sim) openCycles(ctx context.Context) ([]wfRef, error) {
	c := s.F.Client()
	if c == nil {
		return nil, errors.New("Temporal is down")
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.ListWorkflow(lctx, &workflowservice.ListWorkflowExecutionsRequest{PageSize: 100, Query: "ExecutionStatus = 'Running'"})
	if err != nil {
		return nil, err
	}
	var out []wfRef
	for _, e := range resp.GetExecutions() {
		if longRunning(e.GetExecution().GetWorkflowId()) {
			continue
		}
		out = append(out, wfRef{ID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId()})
	}
	return out, nil
}

// longRunning reports whether id is a workflow that never ends by itself
// (a database's LogChain, LogProof or ScratchProof): a run does not wait
// for it.
func longRunning(id string) bool {
	for _, p := range []string{"logchain/", "logproof/", "scratchproof/"} {
		if strings.HasPrefix(id, p) {
			return true
		}
	}
	return false
}

// settle waits for every open workflow to close; what is still open after
// SettleLimit is terminated (and noted).
func (s *Sim) settle(ctx context.Context, r *run) {
	deadline := time.Now().Add(SettleLimit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		s.unstall(ctx, r)
		o, err := s.openCycles(ctx)
		if err == nil && len(o) == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	o, _ := s.openCycles(ctx)
	for _, ref := range o {
		r.note("workflow %s still running %s after the heal: terminated", ref.ID, SettleLimit)
		if c := s.F.Client(); c != nil {
			_ = c.TerminateWorkflow(ctx, ref.ID, ref.RunID, "chaos: did not finish")
		}
	}
}

// outcomes describes how each cycle of the run ended (its own starts, and
// the canonical cycle if it ran in this run) and returns their error texts.
func (s *Sim) outcomes(ctx context.Context, r *run) ([]string, []string, []string) {
	refs := append([]wfRef(nil), r.refs...)
	if c := s.F.Client(); c != nil {
		id := CanonicalID(r.plan.Target)
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := c.DescribeWorkflowExecution(dctx, id, "")
		cancel()
		if err == nil && !d.GetWorkflowExecutionInfo().GetStartTime().AsTime().Before(r.start.Add(-time.Second)) {
			run := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
			dup := false
			for _, ref := range refs {
				dup = dup || (ref.ID == id && ref.RunID == run)
			}
			if !dup {
				refs = append(refs, wfRef{ID: id, RunID: run, Entry: "child"})
			}
		}
	}
	// classes are the cycles' outcomes for the tally: a launcher's own
	// result is left out (its child is counted).
	var out, errs, classes []string
	if len(refs) == 0 {
		out = append(out, "nothing started")
	}
	for _, ref := range refs {
		c := s.F.Client()
		if c == nil {
			out = append(out, ref.ID+": Temporal down")
			continue
		}
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var res workflows.CycleResult
		err := c.GetWorkflow(gctx, ref.ID, ref.RunID).Get(gctx, &res)
		cancel()
		name := ref.Entry
		if ref.Entry == EntryWebUI {
			typ := ""
			var app *temporal.ApplicationError
			if errors.As(err, &app) {
				typ = app.Type()
			}
			var got *workflows.CycleResult
			if err == nil {
				got = &res
			}
			s.C.startRanAs(r.plan, ref, got, typ, r.injected)
		}
		if err != nil {
			errs = append(errs, err.Error())
			class := outcomeClass(err)
			if class == "failed" {
				out = append(out, fmt.Sprintf("%s failed: %s", name, short(err.Error())))
			} else {
				out = append(out, name+" "+class)
			}
			if !launcher(ref, r.plan.Target) {
				classes = append(classes, class)
			}
			continue
		}
		switch {
		case res.Skipped != "" && res.SkipReason != "":
			out = append(out, fmt.Sprintf("%s skipped %s: %s", name, res.SkipReason, short(res.Skipped)))
			classes = append(classes, "skipped "+res.SkipReason)
		case res.Skipped != "":
			out = append(out, fmt.Sprintf("%s skipped (held by %s)", name, res.HeldBy))
			classes = append(classes, "skipped")
		case res.RunBy != "":
			out = append(out, fmt.Sprintf("%s launched %s: verified seq %d %s->%s", name, res.RunBy, res.Sequence, res.Server, res.Remote))
		default:
			out = append(out, fmt.Sprintf("%s verified seq %d %s->%s", name, res.Sequence, res.Server, res.Remote))
			classes = append(classes, "verified")
		}
	}
	return out, errs, classes
}

// outcomeClass is how a workflow that ended with err ended: "cancelled",
// "terminated", "failed <type>" or "failed" (no type).
func outcomeClass(err error) string {
	var canceled *temporal.CanceledError
	var app *temporal.ApplicationError
	var term *temporal.TerminatedError
	switch {
	case errors.As(err, &canceled):
		return "cancelled"
	case errors.As(err, &term):
		return "terminated"
	case errors.As(err, &app):
		return "failed " + app.Type()
	}
	return "failed"
}

// launcher reports whether ref is a start under another id than the
// database's own (it launches the cycle there, or is skipped).
func launcher(ref wfRef, t Target) bool { return ref.ID != CanonicalID(t) }

func short(s string) string {
	if len(s) > 160 {
		return s[:160] + "..."
	}
	return s
}
