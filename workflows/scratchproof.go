package workflows

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/logs"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// ScratchProof runs a database's proofs that restore a scratch copy on the
// verification instance: the point-in-time proof every pit_proof.every
// (both log_proof modes) and, with log_proof: nightly, the nightly proof
// once a day. One long-running workflow per database
// (scratchproof/<instance>/<db>), started by LogChain beside it.
//
// A workflow of its own rather than a step of LogProof: each proof
// restores a whole full backup (hours for a large database) and then
// CHECKDB, while LogProof's standby rounds come every minute and continue
// as new every hundred rounds; a proof inside it would stall the standby
// or hold its continue-as-new for hours. Here the two proofs run one after
// the other, so they never share the scratch copy, and the history stays
// small: a proof is a timer, a side effect (the random target), a proof
// activity and the drop, about 15 events; at most two a day, and the run
// continues as new every proofsPerRun proofs carrying when each last ran.

// ScratchProof names.
const (
	ScratchProofName  = "ScratchProof"
	ScratchProofQuery = "scratchproof"
)

// proofsPerRun bounds a run's history (about 15 events a proof).
const proofsPerRun = 30

// nightlyEvery is how often log_proof: nightly proves the chain.
const nightlyEvery = 24 * time.Hour

// ScratchProofWorkflowID is the database's id: scratchproof/<instance>/<db>.
func ScratchProofWorkflowID(instance, database string) string {
	return "scratchproof/" + strings.TrimPrefix(LogChainWorkflowID(instance, database), "logchain/")
}

// ScratchProofInput names the database; LastPIT and LastNightly are when
// each proof last ran (carried over continue-as-new; zero: due now).
type ScratchProofInput struct {
	Database    string    `json:"database"`
	Instance    string    `json:"instance"`
	LastPIT     time.Time `json:"last_pit,omitzero"`
	LastNightly time.Time `json:"last_nightly,omitzero"`
}

// ScratchProofStatus is what the `scratchproof` query returns.
type ScratchProofStatus struct {
	Database    string            `json:"database"`
	Instance    string            `json:"instance"`
	Mode        string            `json:"mode"`
	PITEvery    time.Duration     `json:"pit_every"`
	LastPIT     *logs.ProofOutput `json:"last_pit,omitempty"`
	LastNightly *logs.ProofOutput `json:"last_nightly,omitempty"`
	Next        string            `json:"next,omitempty"` // pit or nightly
	NextAt      time.Time         `json:"next_at,omitzero"`
	Proofs      int               `json:"proofs"`
	LastError   string            `json:"last_error,omitempty"`
}

// ScratchProof runs the database's scratch-copy proofs (see above).
func ScratchProof(ctx workflow.Context, in ScratchProofInput) (ScratchProofStatus, error) {
	st := ScratchProofStatus{Database: in.Database, Instance: in.Instance}
	if err := workflow.SetQueryHandler(ctx, ScratchProofQuery, func() (ScratchProofStatus, error) { return st, nil }); err != nil {
		return st, err
	}
	if in.Database == "" || in.Instance == "" {
		return st, temporal.NewNonRetryableApplicationError(
			`ScratchProof input names no database or instance: pass the configuration keys, e.g. {"database":"Sales","instance":"sql01"}`,
			activities.ErrInvalidConfig, nil)
	}
	var plan logs.LogPlan
	if err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, ScheduleToCloseTimeout: 10 * time.Minute, RetryPolicy: retry(5*time.Second, 10),
		Summary: "log plan " + tsql.Printable(in.Database),
	}), la.LogPlan, logs.LogPlanInput{Database: in.Database, Instance: in.Instance}).Get(ctx, &plan); err != nil {
		return st, err
	}
	st.Mode, st.PITEvery = plan.ProofMode, plan.PITEvery
	if !plan.Enabled {
		scratchDetails(ctx, st)
		return st, nil // no log backups: nothing to prove
	}
	nightly := plan.ProofMode == "nightly"
	for st.Proofs < proofsPerRun {
		// The proof due first; the nightly one first when both are.
		st.Next, st.NextAt = "pit", in.LastPIT.Add(plan.PITEvery)
		if in.LastPIT.IsZero() {
			st.NextAt = workflow.Now(ctx)
		}
		if nightly {
			at := in.LastNightly.Add(nightlyEvery)
			if in.LastNightly.IsZero() {
				at = workflow.Now(ctx)
			}
			if !at.After(st.NextAt) {
				st.Next, st.NextAt = "nightly", at
			}
		}
		scratchDetails(ctx, st)
		if wait := st.NextAt.Sub(workflow.Now(ctx)); wait > 0 {
			if err := workflow.Sleep(ctx, wait); err != nil {
				return st, err
			}
		}
		st.Proofs++
		var out logs.ProofOutput
		var err error
		if st.Next == "nightly" {
			err = runProof(ctx, la.NightlyProof, logs.NightlyProofInput{Database: in.Database, Instance: in.Instance}, &out,
				"nightly proof of "+tsql.Printable(in.Database))
			in.LastNightly, st.LastNightly = workflow.Now(ctx), &out
		} else {
			// The target's place in the proven window, drawn once and
			// recorded: a retry or a replay restores to the same instant.
			var fraction float64
			if err := workflow.SideEffect(ctx, func(workflow.Context) any { return rand.Float64() }).Get(&fraction); err != nil {
				return st, err
			}
			err = runProof(ctx, la.PITProof, logs.PITProofInput{Database: in.Database, Instance: in.Instance, Fraction: fraction}, &out,
				"point-in-time proof of "+tsql.Printable(in.Database))
			in.LastPIT, st.LastPIT = workflow.Now(ctx), &out
		}
		switch {
		case err != nil && cancelled(ctx, err):
			return st, err
		case err != nil:
			st.LastError = err.Error()
			workflow.GetLogger(ctx).Warn("proof failed: it runs again when next due", "db", in.Database, "proof", st.Next, "error", err)
		case !out.OK && out.Skipped == "":
			st.LastError = st.Next + " proof: " + out.Detail
		default:
			st.LastError = ""
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			break
		}
	}
	return st, workflow.NewContinueAsNewError(ctx, ScratchProofName, in)
}

// runProof runs one proof activity and then drops the scratch copy it
// leaves (also after a failed proof: the copy is never left behind).
func runProof(ctx workflow.Context, fn, in, out any, summary string) error {
	err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		// A full restore and CHECKDB: hours for a large database.
		StartToCloseTimeout:    24 * time.Hour,
		ScheduleToCloseTimeout: 24 * time.Hour,
		HeartbeatTimeout:       time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 30 * time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Minute,
			MaximumAttempts: 5, NonRetryableErrorTypes: activities.NonRetryableErrorTypes},
		Summary: summary,
	}), fn, in).Get(ctx, out)
	if err != nil && cancelled(ctx, err) {
		return err
	}
	var dbIn logs.DropProofInput
	switch v := in.(type) {
	case logs.PITProofInput:
		dbIn = logs.DropProofInput{Database: v.Database, Instance: v.Instance}
	case logs.NightlyProofInput:
		dbIn = logs.DropProofInput{Database: v.Database, Instance: v.Instance}
	}
	derr := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Minute, ScheduleToCloseTimeout: 2 * time.Hour, HeartbeatTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 30 * time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Minute,
			NonRetryableErrorTypes: activities.NonRetryableErrorTypes},
		Summary: "drop the proof copy of " + tsql.Printable(dbIn.Database),
	}), la.DropProofCopy, dbIn).Get(ctx, nil)
	if err == nil && derr != nil {
		err = fmt.Errorf("proof copy not dropped: %w", derr)
	}
	return err
}

// scratchDetails shows the proofs in the Web UI ("Current details").
func scratchDetails(ctx workflow.Context, s ScratchProofStatus) {
	out := fmt.Sprintf("**%s** on **%s** · log proof **%s** · point-in-time proof every %s", tsql.Printable(s.Database), s.Instance, s.Mode, s.PITEvery)
	for _, p := range []struct {
		what string
		o    *logs.ProofOutput
	}{{"point-in-time", s.LastPIT}, {"nightly", s.LastNightly}} {
		switch o := p.o; {
		case o == nil:
		case o.Skipped != "":
			out += fmt.Sprintf("\n\nlast %s proof: skipped (%s)", p.what, o.Skipped)
		default:
			out += fmt.Sprintf("\n\nlast %s proof: ok %v · set %d, logs %d-%d", p.what, o.OK, o.Sequence, o.FirstLog, o.LastLog)
			if !o.Target.IsZero() {
				out += " · to " + o.Target.UTC().Format(time.RFC3339Nano)
			}
			out += fmt.Sprintf(" · took %s · %s", o.Took.Round(time.Second), o.Detail)
		}
	}
	if !s.NextAt.IsZero() {
		out += fmt.Sprintf("\n\nnext: %s proof at %s", s.Next, s.NextAt.UTC().Format(time.RFC3339))
	}
	if s.LastError != "" {
		out += "\n\n**error:** " + s.LastError
	}
	workflow.SetCurrentDetails(ctx, out)
}

// startScratchProof starts the database's ScratchProof workflow, an
// abandoned child that outlives this run; one already running is left as
// it is.
func (lc *logChain) startScratchProof(ctx workflow.Context) {
	if workflow.GetVersion(ctx, "logchain-scratch-proof", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            ScratchProofWorkflowID(lc.in.Instance, lc.in.Database),
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		StaticSummary:         "point-in-time and nightly proofs of " + tsql.Printable(lc.in.Database) + " on " + lc.in.Instance,
	})
	child := workflow.ExecuteChildWorkflow(cctx, ScratchProofName, ScratchProofInput{Database: lc.in.Database, Instance: lc.in.Instance})
	lc.scratchStarting = true
	workflow.Go(ctx, func(g workflow.Context) {
		err := child.GetChildWorkflowExecution().Get(g, nil)
		lc.scratchStarting = false
		if err != nil && !temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			workflow.GetLogger(ctx).Warn("scratch proof workflow not started", "db", lc.in.Database, "error", err)
		}
	})
}
