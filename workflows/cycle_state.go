package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The cycle's state and what it shows: the progress query, search
// attributes and the Web UI's current details.

// cycle is the state of one run, read by the progress query.
type cycle struct {
	// in is the start's input; Database becomes the database's name as the
	// plan resolved it (rename).
	in       CycleInput
	instance string // the source instance (or availability group), from the plan
	replica  string // the replica of its group the cycle backs up on (Plan.Replica)
	entry    string // the databases: entry spelled otherwise (Plan.Entry)
	// renamed: the plan resolved the start's name to another spelling,
	// which the next step's search attribute update records.
	renamed  bool
	verifyDB string // the restored copy's name, from Restore
	progress Progress
	seq      int64
	base     int64 // a differential's base set (the plan's), 0 for a full
	server   string
	holders  []string // servers that may hold files of the current set
	// backedUp: the current set's BACKUP completed (or the set was
	// resumed); before that, a failure leaves an incomplete set.
	backedUp bool
	// restoreStarted: this run restored (or began restoring) the
	// verification database; verified: MarkVerified succeeded.
	restoreStarted, verified bool
	// hb is the heartbeat timeout of activities that only keep alive.
	hb time.Duration
	// stepBegan is when the current step began (rate and ETA in details).
	stepBegan time.Time
	// batched: the run issues its commands in fewer workflow tasks and
	// events (versionBatched): search attribute updates wait in pending
	// for the next step's or outcome's single upsert, the slots are
	// started together, the plan allocates the sequence, the restored
	// copy is dropped while retention runs.
	batched bool
	pending []temporal.SearchAttributeUpdate
	// shownInstance and shownRename are what the search attributes of a
	// batched run already show of the plan's instance and resolved name.
	shownInstance string
	shownRename   bool
}

// versionBatched is the change that cut the cycle's workflow tasks and
// events. A run that takes it skips the GetVersion calls of the changes
// before it (changed): each would add a marker and an upsert of its own.
const versionBatched = "cycle-batched-commands"

// changed reports whether the run takes version 1 of change id, one that
// came before versionBatched: a batched run always does, without a marker.
func (c *cycle) changed(ctx workflow.Context, id string) bool {
	return c.batched || workflow.GetVersion(ctx, id, workflow.DefaultVersion, 1) == 1
}

func newCycle(ctx workflow.Context, in CycleInput) *cycle {
	return &cycle{in: in, hb: longHeartbeat, progress: Progress{Database: in.Database, Step: activities.StepPlan, Outcome: OutcomeRunning},
		batched: workflow.GetVersion(ctx, versionBatched, workflow.DefaultVersion, 1) == 1}
}

// start registers the progress query and signal and the first search attributes.
func (c *cycle) start(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (Progress, error) {
		return c.progress, nil
	}); err != nil {
		return fmt.Errorf("register %s query: %w", ProgressQuery, err)
	}
	signals := workflow.GetSignalChannel(ctx, activities.ProgressSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var p activities.StepProgress
			if !signals.Receive(ctx, &p) {
				return
			}
			// Signals of an earlier attempt or step arrive late: ignore them.
			if p.Step != c.progress.Step || p.Sequence != c.seq {
				continue
			}
			c.progress.Percent, c.progress.Bytes = p.Percent, p.Bytes
			c.details(ctx)
		}
	})
	if c.batched {
		c.set(ctx, AttrDatabase.ValueSet(c.in.Database), AttrOutcome.ValueSet(OutcomeRunning))
		return nil
	}
	return c.upsert(ctx,
		AttrDatabase.ValueSet(c.in.Database),
		AttrOutcome.ValueSet(OutcomeRunning))
}

func (c *cycle) step(ctx workflow.Context, step string) {
	c.progress.Step = step
	c.progress.Percent, c.progress.Bytes = 0, 0
	c.stepBegan = workflow.Now(ctx)
	if c.batched {
		// The instance and the resolved name once, when they change.
		c.set(ctx, AttrStep.ValueSet(step))
		if c.instance != c.shownInstance {
			c.set(ctx, AttrInstance.ValueSet(c.instance))
			c.shownInstance = c.instance
		}
		if c.renamed && !c.shownRename {
			c.set(ctx, AttrDatabase.ValueSet(c.in.Database))
			c.shownRename = true
		}
		c.flush(ctx)
		c.details(ctx)
		return
	}
	updates := []temporal.SearchAttributeUpdate{AttrStep.ValueSet(step)}
	if c.instance != "" {
		// Known from the plan on; it rides on the step's update, which
		// adds no event to the history.
		updates = append(updates, AttrInstance.ValueSet(c.instance))
	}
	if c.renamed {
		updates = append(updates, AttrDatabase.ValueSet(c.in.Database))
	}
	_ = c.upsert(ctx, updates...)
	c.details(ctx)
}

func (c *cycle) setSequence(ctx workflow.Context, seq int64) {
	c.seq = seq
	c.backedUp = c.in.Resume > 0
	c.progress.Sequence = seq
	c.holders = []string{c.server}
	c.set(ctx, AttrSequence.ValueSet(seq))
}

func (c *cycle) setServer(ctx workflow.Context, server string) {
	if c.server == server {
		return
	}
	c.server = server
	c.progress.Server = server
	c.set(ctx, AttrServer.ValueSet(server))
}

// outcome records the cycle's outcome and shows it at once.
func (c *cycle) outcome(ctx workflow.Context, outcome string) {
	c.settle(ctx, outcome)
	c.flush(ctx)
	c.details(ctx)
}

// settle records the cycle's outcome; a batched run shows it with the
// next step.
func (c *cycle) settle(ctx workflow.Context, outcome string) {
	c.progress.Outcome = outcome
	c.set(ctx, AttrOutcome.ValueSet(outcome))
}

// set updates search attributes: at once in a run from before
// versionBatched, else with the next flush (step, outcome), in one upsert
// (one history event) with the others.
func (c *cycle) set(ctx workflow.Context, updates ...temporal.SearchAttributeUpdate) {
	if !c.batched {
		_ = c.upsert(ctx, updates...)
		return
	}
	c.pending = append(c.pending, updates...)
}

// flush sends the updates set since the last flush, in one upsert.
func (c *cycle) flush(ctx workflow.Context) {
	if len(c.pending) == 0 {
		return
	}
	_ = c.upsert(ctx, c.pending...)
	c.pending = nil
}

// upsert logs instead of failing: search attributes are for finding runs,
// and a server without them registered must not stop a backup.
func (c *cycle) upsert(ctx workflow.Context, updates ...temporal.SearchAttributeUpdate) error {
	err := workflow.UpsertTypedSearchAttributes(ctx, updates...)
	if err != nil {
		c.log(ctx).Warn("search attributes not updated", "error", err)
	}
	return err
}

// details shows the progress in the Web UI ("Current details"), in Markdown.
func (c *cycle) details(ctx workflow.Context) {
	p := c.progress
	s := fmt.Sprintf("**%s** · step **%s** · outcome **%s**\n\n", tsql.Printable(p.Database), p.Step, p.Outcome)
	if p.Sequence != 0 {
		s += fmt.Sprintf("sequence **%d** on **%s**", p.Sequence, p.Server)
		if p.Percent > 0 || p.Bytes > 0 {
			s += fmt.Sprintf(" · %.0f %% · %s", p.Percent, plan.FormatBytes(p.Bytes))
			if el := workflow.Now(ctx).Sub(c.stepBegan); el >= time.Second && p.Percent > 0 && p.Percent < 100 {
				if p.Bytes > 0 {
					s += fmt.Sprintf(" · %.1f MB/s", float64(p.Bytes)/1e6/el.Seconds())
				}
				eta := time.Duration(float64(el) * (100 - p.Percent) / p.Percent)
				s += fmt.Sprintf(" · ETA %s", plan.RoundDuration(eta))
			}
		}
		s += "\n\n"
	}
	t := p.Timings
	s += fmt.Sprintf("backup %s · copy %s · restore %s · CHECKDB %s · sanity %s · total %s\n", plan.RoundDuration(t.Backup), plan.RoundDuration(t.Copy),
		plan.RoundDuration(t.Restore), plan.RoundDuration(t.CheckDB), plan.RoundDuration(t.Sanity), plan.RoundDuration(t.Total))
	if len(p.Failed) > 0 {
		s += fmt.Sprintf("\nmarked failed on the way: %v\n", p.Failed)
	}
	if p.Error != "" {
		s += "\n**error:** " + p.Error + "\n"
	}
	workflow.SetCurrentDetails(ctx, s)
}
