package workflows

import (
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/logs"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// LogProof proves a database's log chain on the verification instance
// (log_proof: standby): one long-running workflow per database, beside its
// LogChain, that keeps the standby copy and applies each log backup to it
// as soon as the chain's copy lane says it is copied (signal
// LogProofCopiedSignal), and at least once per log_backup.every.
//
// A workflow of its own rather than a lane of LogChain: seeding the
// standby copy restores a whole full backup, which may take hours, and a
// lane would hold LogChain's continue-as-new (it drains its lanes first,
// and stops taking log backups meanwhile) or cut the RESTORE short. Its
// history stays small: a round is a timer or a signal and one ApplyLogs
// (about 10 events), and it continues as new every roundsPerRun rounds.
// LogChain starts it (an abandoned child under logproof/<instance>/<db>,
// one per database) and signals it after each copy; the signal costs
// LogChain two events per copy.

// LogProof names: the workflow type, its query (LogProofStatus), the
// signal the copy lane sends and the one the proof sends back to LogChain
// (ProofProgress) when the standby copy moved.
const (
	LogProofName         = "LogProof"
	LogProofQuery        = "logproof"
	LogProofCopiedSignal = "logs-copied"
	LogChainProofSignal  = "proof-progress"
)

// ProofProgress is what LogChain shows of the proof: the newest log
// applied and when it started (the lag is measured from it), the standby
// copy, the last error. Sent only when it changed, so that LogChain's
// history grows by a signal per applied batch at most.
type ProofProgress struct {
	Mode           string    `json:"mode"`
	Through        int64     `json:"through,omitempty"`
	ThroughStart   time.Time `json:"through_start,omitzero"`
	Standby        string    `json:"standby,omitempty"`
	VerifyInstance string    `json:"verify_instance,omitempty"`
	Error          string    `json:"error,omitempty"`
}

// proofProgress receives the proof's progress (LogChainProofSignal) for
// the status and the details; it adds no command.
func (lc *logChain) proofProgress(ctx workflow.Context) {
	ch := workflow.GetSignalChannel(ctx, LogChainProofSignal)
	for {
		var p ProofProgress
		if !ch.Receive(ctx, &p) {
			return
		}
		lc.st.Proof = &p
		lc.refreshLag(workflow.Now(ctx))
		lc.details(ctx)
	}
}

// tellChain sends p to the database's LogChain when it differs from what
// was sent last; a chain that is not running misses nothing (the next
// change is sent again).
func tellChain(ctx workflow.Context, in LogProofInput, last *ProofProgress, p ProofProgress) {
	if *last == p || workflow.GetVersion(ctx, "logproof-progress-signal", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	*last = p
	_ = workflow.SignalExternalWorkflow(ctx, LogChainWorkflowID(in.Instance, in.Database), "", LogChainProofSignal, p)
}

// roundsPerRun bounds a run's history (about 10 events a round).
const roundsPerRun = 100

// LogProofWorkflowID is the id of the database's proof workflow:
// logproof/<instance>/<database>, escaped as LogChainWorkflowID is.
func LogProofWorkflowID(instance, database string) string {
	return "logproof/" + strings.TrimPrefix(LogChainWorkflowID(instance, database), "logchain/")
}

// LogProofInput names the database (configuration keys).
type LogProofInput struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
}

// LogProofStatus is what the `logproof` query returns (and the Web UI's
// current details show).
type LogProofStatus struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	Mode     string `json:"mode"`
	// Standby is the standby copy on VerifyInstance, seeded from set
	// Sequence of chain Chain.
	Standby        string `json:"standby,omitempty"`
	VerifyInstance string `json:"verify_instance,omitempty"`
	Chain          int64  `json:"chain,omitempty"`
	Sequence       int64  `json:"sequence,omitempty"`
	// Through is the newest log applied, ThroughStart when it started:
	// the copy holds everything committed before it. Lag is how far
	// behind the present that was at the last round.
	Through      int64         `json:"through,omitempty"`
	ThroughStart time.Time     `json:"through_start,omitzero"`
	Lag          time.Duration `json:"lag"`
	RedoLSN      string        `json:"redo_lsn,omitempty"`
	Seeds        int           `json:"seeds"` // seedings by this run
	Rounds       int           `json:"rounds"`
	Waiting      string        `json:"waiting,omitempty"`
	LastError    string        `json:"last_error,omitempty"`
}

// LogProof runs the database's standby proof (see the top of this file).
func LogProof(ctx workflow.Context, in LogProofInput) (LogProofStatus, error) {
	st := LogProofStatus{Database: in.Database, Instance: in.Instance}
	if err := workflow.SetQueryHandler(ctx, LogProofQuery, func() (LogProofStatus, error) { return st, nil }); err != nil {
		return st, err
	}
	if in.Database == "" || in.Instance == "" {
		return st, temporal.NewNonRetryableApplicationError(
			`LogProof input names no database or instance: pass the configuration keys, e.g. {"database":"Sales","instance":"sql01"}`,
			activities.ErrInvalidConfig, nil)
	}
	var plan logs.LogPlan
	if err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, ScheduleToCloseTimeout: 10 * time.Minute, RetryPolicy: retry(5*time.Second, 10),
		Summary: "log plan " + tsql.Printable(in.Database),
	}), la.LogPlan, logs.LogPlanInput{Database: in.Database, Instance: in.Instance}).Get(ctx, &plan); err != nil {
		return st, err
	}
	st.Mode = plan.ProofMode
	if !plan.Enabled || plan.ProofMode != "standby" {
		proofDetails(ctx, st)
		return st, nil // another proof mode, or no log backups: nothing to keep
	}
	copied := workflow.GetSignalChannel(ctx, LogProofCopiedSignal)
	var told ProofProgress
	for st.Rounds < roundsPerRun {
		st.Rounds++
		var out logs.ApplyLogsOutput
		err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
			// Seeding restores a full backup: hours for a large database.
			// Heartbeats show the worker is alive meanwhile.
			StartToCloseTimeout:    24 * time.Hour,
			ScheduleToCloseTimeout: 24 * time.Hour,
			HeartbeatTimeout:       time.Minute,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: 5 * time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
				MaximumAttempts: 5, NonRetryableErrorTypes: activities.NonRetryableErrorTypes},
			Summary: "apply log backups to the standby copy of " + tsql.Printable(in.Database),
		}), la.ApplyLogs, logs.ApplyLogsInput{Database: in.Database, Instance: in.Instance}).Get(ctx, &out)
		now := workflow.Now(ctx)
		switch {
		case err != nil && cancelled(ctx, err):
			return st, err
		case err != nil:
			st.LastError = err.Error()
			workflow.GetLogger(ctx).Warn("log backups not applied to the standby copy: the next round tries again", "db", in.Database, "error", err)
		default:
			st.LastError, st.Waiting = "", out.Waiting
			st.Standby, st.VerifyInstance, st.Chain, st.RedoLSN = out.Standby, out.Instance, out.Chain, out.RedoLSN
			if out.Sequence > 0 {
				st.Sequence = out.Sequence
			}
			if out.Seeded {
				st.Seeds++
			}
			if out.Through > 0 {
				st.Through, st.ThroughStart = out.Through, out.ThroughStart
			}
		}
		if !st.ThroughStart.IsZero() {
			st.Lag = now.Sub(st.ThroughStart)
		}
		proofDetails(ctx, st)
		tellChain(ctx, in, &told, ProofProgress{Mode: st.Mode, Through: st.Through, ThroughStart: st.ThroughStart, Standby: st.Standby,
			VerifyInstance: st.VerifyInstance, Error: st.LastError})
		// The next round: when a copy is signalled, at the latest after
		// one log_backup.every.
		timerCtx, cancel := workflow.WithCancel(ctx)
		timer := workflow.NewTimer(timerCtx, max(plan.Every, time.Minute))
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(timer, func(workflow.Future) {})
		sel.AddReceive(copied, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
		sel.Select(ctx)
		cancel()
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		for copied.ReceiveAsync(nil) {
			// Signals that came together make one round.
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			break
		}
	}
	return st, workflow.NewContinueAsNewError(ctx, LogProofName, in)
}

// proofDetails shows the proof in the Web UI ("Current details").
func proofDetails(ctx workflow.Context, s LogProofStatus) {
	out := fmt.Sprintf("**%s** on **%s** · log proof **%s**", tsql.Printable(s.Database), s.Instance, s.Mode)
	if s.Standby != "" {
		out += fmt.Sprintf("\n\nstandby **%s** on %s · chain %d from set %d · applied through log %d · lag %s",
			tsql.Printable(s.Standby), s.VerifyInstance, s.Chain, s.Sequence, s.Through, s.Lag.Round(time.Second))
	}
	if s.Waiting != "" {
		out += "\n\nwaiting: " + s.Waiting
	}
	if s.LastError != "" {
		out += "\n\n**error:** " + s.LastError
	}
	workflow.SetCurrentDetails(ctx, out)
}

// startLogProof starts the database's proof workflow, an abandoned child
// that outlives this run; one already running is left as it is.
func (lc *logChain) startLogProof(ctx workflow.Context) {
	if lc.plan.ProofMode != "standby" {
		return
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            LogProofWorkflowID(lc.in.Instance, lc.in.Database),
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		StaticSummary:         "log proof of " + tsql.Printable(lc.in.Database) + " on " + lc.in.Instance,
	})
	child := workflow.ExecuteChildWorkflow(cctx, LogProofName, LogProofInput{Database: lc.in.Database, Instance: lc.in.Instance})
	lc.proofStarting = true
	workflow.Go(ctx, func(g workflow.Context) {
		err := child.GetChildWorkflowExecution().Get(g, nil)
		lc.proofStarting = false
		if err != nil && !temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			workflow.GetLogger(ctx).Warn("log proof workflow not started", "db", lc.in.Database, "error", err)
		}
	})
}

// proofCopied tells the proof workflow that log backups were copied; one
// that is not running misses nothing (it applies what it finds).
func (lc *logChain) proofCopied(ctx workflow.Context) {
	if lc.plan.ProofMode != "standby" {
		return
	}
	_ = workflow.SignalExternalWorkflow(ctx, LogProofWorkflowID(lc.in.Instance, lc.in.Database), "", LogProofCopiedSignal, lc.st.Chain)
}
