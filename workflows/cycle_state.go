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
}

func newCycle(ctx workflow.Context, in CycleInput) *cycle {
	return &cycle{in: in, hb: longHeartbeat, progress: Progress{Database: in.Database, Step: activities.StepPlan, Outcome: OutcomeRunning}}
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
	return c.upsert(ctx,
		AttrDatabase.ValueSet(c.in.Database),
		AttrOutcome.ValueSet(OutcomeRunning))
}

func (c *cycle) step(ctx workflow.Context, step string) {
	c.progress.Step = step
	c.progress.Percent, c.progress.Bytes = 0, 0
	c.stepBegan = workflow.Now(ctx)
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
	_ = c.upsert(ctx, AttrSequence.ValueSet(seq))
}

func (c *cycle) setServer(ctx workflow.Context, server string) {
	if c.server == server {
		return
	}
	c.server = server
	c.progress.Server = server
	_ = c.upsert(ctx, AttrServer.ValueSet(server))
}

func (c *cycle) outcome(ctx workflow.Context, outcome string) {
	c.progress.Outcome = outcome
	_ = c.upsert(ctx, AttrOutcome.ValueSet(outcome))
	c.details(ctx)
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
