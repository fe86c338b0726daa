package workflows

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	fleetacts "github.com/backupcycle/backupcycle/activities/fleet"
	"github.com/backupcycle/backupcycle/internal/fleet"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// FleetWorkflowID is the id `starter fleet` starts the Fleet under, so two
// manual runs do not overlap; a schedule's runs get the schedule's ids.
const FleetWorkflowID = "backupcycle-fleet"

// FleetQuery is the query that returns a fleet run's FleetStatus.
const FleetQuery = "fleet"

// Fleet outcomes of one database, besides OutcomeVerified and OutcomeFailed.
const (
	// OutcomeAlreadyRunning: a cycle of the database held its workflow id
	// (a manual run, its own schedule); this run left it alone.
	OutcomeAlreadyRunning = "skipped-already-running"
	// OutcomeNotReached: the window ended before a slot was free.
	OutcomeNotReached = "not-reached"
	// OutcomeNotRun: the plan left it out (offline, snapshot, an instance
	// that could not be read, a configuration problem); Reason says why.
	OutcomeNotRun = "not-run"
	// OutcomeNotPreferred: no replica of the database's availability
	// group could back it up (none the preferred backup replica, or the
	// one that is cannot back up); Reason says what each answered. Not a
	// failure.
	OutcomeNotPreferred = "skipped-" + activities.SkipNotPreferredReplica
)

// fa is only used to name the Fleet's activity methods.
var fa *fleetacts.Activities

// defaultStartsPerRun is how many cycles one run of the Fleet starts
// before it continues as new (each child adds about a dozen events).
const defaultStartsPerRun = 100

// FleetInput starts a Fleet run. Everything is optional.
type FleetInput struct {
	// Instances limits the run to these source instances; empty: all.
	Instances []string `json:"instances,omitempty"`
	// StartsPerRun bounds the cycles one workflow run starts before it
	// continues as new (default 100).
	StartsPerRun int `json:"starts_per_run,omitempty"`
	// Carry is what a run hands to its continuation when it continues as
	// new. A start with it is refused, and a continuation holds it to the
	// configuration in force (CheckFleetCarry): never set it.
	Carry *FleetCarry `json:"carry,omitempty"`
}

// FleetCarry is the state a Fleet run continues with.
type FleetCarry struct {
	Began    time.Time         `json:"began"`
	Deadline time.Time         `json:"deadline"`
	Limits   fleet.Limits      `json:"limits"`
	Pending  []fleet.Item      `json:"pending"`
	Outcomes []DatabaseOutcome `json:"outcomes"`
	Runs     int               `json:"runs"`
}

// DatabaseOutcome is what the night did with one database.
type DatabaseOutcome struct {
	Instance string `json:"instance"`
	Database string `json:"database"`
	// Outcome is verified, failed, cancelled, skipped-already-running,
	// skipped-not-preferred-replica, not-reached or not-run.
	Outcome    string        `json:"outcome"`
	Type       string        `json:"type,omitempty"` // the error type of a failure
	Sequence   int64         `json:"seq,omitempty"`
	WorkflowID string        `json:"workflow_id,omitempty"`
	SizeBytes  int64         `json:"size_bytes,omitempty"`
	Duration   time.Duration `json:"duration,omitempty"`
	// Reason explains a failure, a skip or a not-run, capped in length.
	Reason string `json:"reason,omitempty"`
}

// FleetResult is a finished Fleet run: every database's outcome, in the
// order they ended, and the counts.
type FleetResult struct {
	Began    time.Time         `json:"began"`
	Ended    time.Time         `json:"ended"`
	Counts   map[string]int    `json:"counts"`
	Outcomes []DatabaseOutcome `json:"outcomes"`
}

// FleetStatus is what the fleet query returns while the run goes on.
type FleetStatus struct {
	Began    time.Time         `json:"began"`
	Deadline time.Time         `json:"deadline"`
	Running  []string          `json:"running"`
	Pending  []string          `json:"pending"`
	Counts   map[string]int    `json:"counts"`
	Outcomes []DatabaseOutcome `json:"outcomes"`
	Usage    string            `json:"usage"`
}

// maxReason caps the text of one database's outcome: a fleet's history
// holds hundreds of them.
const maxReason = 600

// Fleet is the nightly run of a whole configuration: a BackupCycle child
// for every database the instances' selections pick (resolved from
// sys.databases tonight, so a new database is protected without a config
// change), largest first, never more at once than each SQL instance's,
// each backup server's (primary and remote both count) and the fleet's
// max_concurrent. A database's failure never stops the others. Each child
// runs under the database's own workflow id, the same one-cycle-per-
// database lock every other entry point goes through: a cycle already
// running is reported, not duplicated. Cycles start only within the
// window; the run continues as new before its history grows large.
//
// One Fleet covers the whole configuration (rather than one per instance)
// because the backup servers are shared across instances: only one run
// that sees every cycle can keep a server within its limit. Instances
// narrows it when per-instance schedules are wanted.
func Fleet(ctx workflow.Context, in FleetInput) (FleetResult, error) {
	f := &fleetRun{}
	if err := workflow.SetQueryHandler(ctx, FleetQuery, func() (FleetStatus, error) { return f.status(), nil }); err != nil {
		return FleetResult{}, fmt.Errorf("register %s query: %w", FleetQuery, err)
	}
	if in.Carry != nil {
		var err error
		if f.carry, err = f.continued(ctx, in); err != nil {
			return FleetResult{}, err
		}
	} else {
		var p fleetacts.FleetPlan
		err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout:    30 * time.Minute,
			ScheduleToCloseTimeout: shortDeadline,
			HeartbeatTimeout:       2 * time.Minute,
			RetryPolicy:            retry(10*time.Second, 5),
			Summary:                "resolve the selection of every instance and order the databases by size",
		}), fa.PlanFleet, fleetacts.FleetInput{Instances: in.Instances}).Get(ctx, &p)
		if err != nil {
			return FleetResult{}, err
		}
		// Runs before this version started no log chains.
		if workflow.GetVersion(ctx, "fleet-log-chains", workflow.DefaultVersion, 1) >= 1 {
			ensureLogChains(ctx, p.LogChains)
		}
		// Plans before this version list no schedules of selected
		// databases; runs before it kept none.
		if len(p.Drills)+len(p.Diffs) > 0 && workflow.GetVersion(ctx, "fleet-selected-schedules", workflow.DefaultVersion, 1) >= 1 {
			keepSelectedSchedules(ctx, p)
		}
		now := workflow.Now(ctx)
		f.carry = FleetCarry{Began: now, Deadline: now.Add(p.Window), Limits: p.Limits, Pending: p.Items}
		for _, n := range p.NotRun {
			f.carry.Outcomes = append(f.carry.Outcomes, DatabaseOutcome{Instance: n.Instance, Database: n.Database,
				Outcome: OutcomeNotRun, Type: n.Type, Reason: capText(n.Reason)})
		}
	}
	f.pool = fleet.NewPool(f.carry.Limits)
	f.running = map[string]fleet.Item{}
	startsPerRun := in.StartsPerRun
	if startsPerRun <= 0 {
		startsPerRun = defaultStartsPerRun
	}
	f.details(ctx)

	sel := workflow.NewSelector(ctx)
	started, draining := 0, false
	for {
		for !draining && ctx.Err() == nil && workflow.Now(ctx).Before(f.carry.Deadline) {
			i := f.pool.Next(f.carry.Pending)
			if i < 0 {
				break
			}
			it := f.carry.Pending[i]
			f.carry.Pending = append(f.carry.Pending[:i:i], f.carry.Pending[i+1:]...)
			f.start(ctx, sel, it)
			started++
			draining = started >= startsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
		}
		f.details(ctx)
		if len(f.running) == 0 {
			break
		}
		sel.Select(ctx) // one cycle ended
	}

	if ctx.Err() != nil {
		return FleetResult{}, temporal.NewCanceledError("fleet run cancelled")
	}
	if draining && len(f.carry.Pending) > 0 && workflow.Now(ctx).Before(f.carry.Deadline) {
		f.carry.Runs++
		workflow.GetLogger(ctx).Info("fleet continues as new", "pending", len(f.carry.Pending), "done", len(f.carry.Outcomes))
		carry := f.carry
		return FleetResult{}, workflow.NewContinueAsNewError(ctx, FleetName, FleetInput{Instances: in.Instances,
			StartsPerRun: in.StartsPerRun, Carry: &carry})
	}
	for _, it := range f.carry.Pending {
		f.carry.Outcomes = append(f.carry.Outcomes, DatabaseOutcome{Instance: it.Instance, Database: it.Database,
			Outcome: OutcomeNotReached, SizeBytes: it.SizeBytes,
			Reason: fmt.Sprintf("the window (%s after %s) ended before a slot was free", f.carry.Deadline.Sub(f.carry.Began),
				f.carry.Began.Format(time.RFC3339))})
	}
	f.carry.Pending = nil
	f.details(ctx)
	res := FleetResult{Began: f.carry.Began, Ended: workflow.Now(ctx), Counts: f.counts(), Outcomes: f.carry.Outcomes}
	workflow.GetLogger(ctx).Info("fleet run done", "counts", res.Counts)
	return res, nil
}

// ensureLogChains keeps the log chain of every database the plan resolved
// with log_backup running, those a selection picks included (the worker's
// start knows only the databases: entries): a child under the database's
// one chain id, abandoned (it outlives the night), whose start is refused
// when the chain already runs, which is left alone, never replaced. It
// waits only for the starts; one that fails is logged and tried again by
// the next run, and never fails the night's backups.
func ensureLogChains(ctx workflow.Context, chains []fleetacts.FleetLogChain) {
	type start struct {
		c   fleetacts.FleetLogChain
		fut workflow.ChildWorkflowFuture
	}
	var starts []start
	for _, c := range chains {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:            LogChainWorkflowID(c.Instance, c.Database),
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
			StaticSummary:         "log chain of " + CycleSummary(c.Instance, c.Database, "", ""),
			TypedSearchAttributes: temporal.NewSearchAttributes(AttrDatabase.ValueSet(c.Database), AttrInstance.ValueSet(c.Instance)),
		})
		starts = append(starts, start{c, workflow.ExecuteChildWorkflow(cctx, LogChainName, LogChainInput{Database: c.Database, Instance: c.Instance})})
	}
	started, running := 0, 0
	for _, s := range starts {
		err := s.fut.GetChildWorkflowExecution().Get(ctx, nil)
		switch {
		case err == nil:
			started++
		case temporal.IsWorkflowExecutionAlreadyStartedError(err):
			running++
		default:
			workflow.GetLogger(ctx).Warn("log chain not started: the next fleet run tries again", "db", s.c.Database,
				"instance", s.c.Instance, "error", err)
		}
	}
	if len(starts) > 0 {
		workflow.GetLogger(ctx).Info("log chains ensured", "started", started, "already_running", running, "of", len(starts))
	}
}

// keepSelectedSchedules keeps the drill and differential schedules of the
// databases the plan resolved through a selection (the worker's start
// keeps only the databases: entries'), as ensureLogChains keeps their log
// chains: a failure is logged and tried again by the next run, and never
// fails the night's backups.
func keepSelectedSchedules(ctx workflow.Context, p fleetacts.FleetPlan) {
	actx := withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         retry(5*time.Second, 3),
		Summary:             "keep the drill and differential schedules of the databases the selections pick",
	})
	var ids []string
	err := workflow.ExecuteActivity(actx, fa.KeepSelectedSchedules, fleetacts.SelectedSchedules{Drills: p.Drills, Diffs: p.Diffs}).Get(ctx, &ids)
	if err != nil {
		workflow.GetLogger(ctx).Warn("schedules of selected databases not all kept: the next fleet run tries again", "error", err)
		return
	}
	workflow.GetLogger(ctx).Info("schedules of selected databases kept", "schedule_ids", ids)
}

// continued is the state a run continuing as new works from. The carried
// state is only accepted from the previous run of this chain (a start from
// the Web UI or a client with a carry is refused: it would set its own
// limits, window and databases), and is held to the configuration in
// force by an activity: the configuration's limits, a deadline within its
// window, only the databases it backs up.
func (f *fleetRun) continued(ctx workflow.Context, in FleetInput) (FleetCarry, error) {
	carry := *in.Carry
	if workflow.GetVersion(ctx, "fleet-carry-checked", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return carry, nil
	}
	if workflow.GetInfo(ctx).ContinuedExecutionRunID == "" {
		return carry, temporal.NewNonRetryableApplicationError(
			"Fleet input has a carry: only a Fleet run continuing as new hands one over; start a Fleet with {} or {\"instances\": [\"sql01\"]}",
			activities.ErrInvalidConfig, nil)
	}
	var chk fleetacts.FleetCarryCheck
	err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    5 * time.Minute,
		ScheduleToCloseTimeout: shortDeadline,
		RetryPolicy:            retry(10*time.Second, 5),
		Summary:                "hold the continued run to the configuration",
	}), fa.CheckFleetCarry, fleetacts.FleetCarryInput{Instances: in.Instances, Began: carry.Began, Deadline: carry.Deadline,
		Pending: carry.Pending}).Get(ctx, &chk)
	if err != nil {
		return carry, err
	}
	carry.Limits, carry.Deadline, carry.Pending = chk.Limits, chk.Deadline, chk.Pending
	for _, n := range chk.NotRun {
		carry.Outcomes = append(carry.Outcomes, DatabaseOutcome{Instance: n.Instance, Database: n.Database,
			Outcome: OutcomeNotRun, Type: n.Type, Reason: capText(n.Reason)})
	}
	return carry, nil
}

// fleetRun is the state of one Fleet workflow run.
type fleetRun struct {
	carry   FleetCarry
	pool    *fleet.Pool
	running map[string]fleet.Item // by Item.Key
}

// start launches the cycle of it under the database's own workflow id and
// adds its end to sel.
func (f *fleetRun) start(ctx workflow.Context, sel workflow.Selector, it fleet.Item) {
	f.pool.Take(it)
	f.running[it.Key()] = it
	id := CycleWorkflowID(it.Instance, it.Database)
	var primary, remote string
	if len(it.Servers) == 2 {
		primary, remote = it.Servers[0], it.Servers[1]
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		// Cancelling the fleet cancels its cycles, and waits for their
		// cleanup (statements stopped, unverified sets marked).
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation: true,
		StaticSummary:       CycleSummary(it.Instance, it.Database, primary, remote),
		TypedSearchAttributes: temporal.NewSearchAttributes(AttrDatabase.ValueSet(it.Database),
			AttrInstance.ValueSet(it.Instance)),
	})
	began := workflow.Now(ctx)
	child := workflow.ExecuteChildWorkflow(cctx, BackupCycleName, CycleInput{Database: it.Database, Instance: it.Instance})
	sel.AddFuture(child, func(fut workflow.Future) {
		var res CycleResult
		err := fut.Get(ctx, &res)
		f.pool.Release(it)
		delete(f.running, it.Key())
		o := DatabaseOutcome{Instance: it.Instance, Database: it.Database, WorkflowID: id, SizeBytes: it.SizeBytes,
			Duration: workflow.Now(ctx).Sub(began)}
		switch {
		case err == nil && res.SkipReason == activities.SkipNotPreferredReplica:
			o.Outcome, o.Reason = OutcomeNotPreferred, capText(res.Skipped)
		case err == nil:
			o.Outcome, o.Sequence = OutcomeVerified, res.Sequence
		case temporal.IsWorkflowExecutionAlreadyStartedError(err):
			o.Outcome, o.Duration = OutcomeAlreadyRunning, 0
			o.Reason = fmt.Sprintf("a cycle of %s/%s was running as workflow %s; one cycle per database runs at a time", it.Instance, it.Database, id)
		case temporal.IsCanceledError(err):
			o.Outcome, o.Reason = OutcomeCancelled, capText(err.Error())
		default:
			o.Outcome, o.Type, o.Reason = OutcomeFailed, errorType(err), capText(err.Error())
			if o.Type == "" {
				o.Type = "CycleFailed"
			}
		}
		f.carry.Outcomes = append(f.carry.Outcomes, o)
	})
}

func (f *fleetRun) counts() map[string]int {
	c := map[string]int{}
	for _, o := range f.carry.Outcomes {
		c[o.Outcome]++
	}
	if n := len(f.running); n > 0 {
		c[OutcomeRunning] = n
	}
	if n := len(f.carry.Pending); n > 0 {
		c["pending"] = n
	}
	return c
}

func (f *fleetRun) status() FleetStatus {
	s := FleetStatus{Began: f.carry.Began, Deadline: f.carry.Deadline, Counts: f.counts(), Outcomes: f.carry.Outcomes,
		Running: []string{}, Pending: []string{}}
	for _, it := range f.carry.Pending {
		s.Pending = append(s.Pending, it.Key())
	}
	for k := range f.running {
		s.Running = append(s.Running, k)
	}
	slices.Sort(s.Running)
	if f.pool != nil {
		s.Usage = f.pool.Summary()
	}
	return s
}

// details shows the run in the Web UI ("Current details"): counts, what
// runs, and the latest outcomes. The table is a preformatted block: the UI
// draws Markdown tables without padding.
func (f *fleetRun) details(ctx workflow.Context) {
	st := f.status()
	var b strings.Builder
	fmt.Fprintf(&b, "**fleet** · began %s · window ends %s\n\n", st.Began.Format(time.RFC3339), st.Deadline.Format(time.RFC3339))
	var counts []string
	for _, k := range []string{OutcomeVerified, OutcomeFailed, OutcomeRunning, "pending", OutcomeAlreadyRunning, OutcomeNotPreferred, OutcomeNotReached, OutcomeNotRun, OutcomeCancelled} {
		if n := st.Counts[k]; n > 0 {
			counts = append(counts, fmt.Sprintf("%s **%d**", k, n))
		}
	}
	fmt.Fprintf(&b, "%s\n\n%s\n\n", strings.Join(counts, " · "), st.Usage)
	if len(st.Running) > 0 {
		fmt.Fprintf(&b, "running: %s\n\n", strings.Join(st.Running, ", "))
	}
	const shown = 25
	outs := st.Outcomes
	if len(outs) > shown {
		fmt.Fprintf(&b, "latest %d of %d outcomes:\n\n", shown, len(outs))
		outs = outs[len(outs)-shown:]
	}
	if len(outs) > 0 {
		b.WriteString("```\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "database\toutcome\tseq\tsize\ttook\ttype")
		for _, o := range outs {
			fmt.Fprintf(tw, "%s@%s\t%s\t%s\t%s\t%s\t%s\n", oneLine(o.Database), oneLine(o.Instance), o.Outcome,
				seqText(o.Sequence), plan.FormatBytes(o.SizeBytes), plan.RoundDuration(o.Duration), o.Type)
		}
		_ = tw.Flush()
		b.WriteString("```\n")
	}
	workflow.SetCurrentDetails(ctx, b.String())
}

func seqText(seq int64) string {
	if seq == 0 {
		return ""
	}
	return fmt.Sprint(seq)
}

// oneLine keeps a database name from breaking the block: invisible
// characters escaped (tsql.Printable), no backticks that would end it.
func oneLine(s string) string {
	return strings.ReplaceAll(tsql.Printable(s), "`", "'")
}

func capText(s string) string {
	if len(s) <= maxReason {
		return s
	}
	cut := maxReason
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf(" … (%d more bytes)", len(s)-cut)
}
