package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/plan"
)

// CycleInput starts one BackupCycle. It holds configuration keys only: the
// activities resolve addresses, paths and passwords inside the worker.
type CycleInput struct {
	Database string `json:"database"`
	// Instance names the source instance when the database name is
	// configured on several; "" otherwise.
	Instance string `json:"instance,omitempty"`
	// LastServer optionally names the previous cycle's primary backup
	// server; empty means "read it from the manifests".
	LastServer string `json:"last_server,omitempty"`
}

// CycleResult is a verified backup set and what it took to prove it.
type CycleResult struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	Sequence int64  `json:"seq"`
	Server   string `json:"server"` // primary backup server
	Remote   string `json:"remote"` // remote copy, restored and checked there
	// VerifyDatabase is the restored copy on the remote verification instance.
	VerifyDatabase string              `json:"verify_database"`
	Manifest       string              `json:"manifest"`
	Stripes        []activities.Stripe `json:"stripes"`
	// Locations are the backup servers holding the verified set.
	Locations []string           `json:"locations"`
	Timings   activities.Timings `json:"timings"`
	// Failed lists sequences this run marked failed on its way (a lost SQL
	// host or backup server), oldest first.
	Failed  []int64             `json:"failed,omitempty"`
	Deleted []activities.SetRef `json:"deleted,omitempty"` // removed by retention
	// Warnings are problems after verification that did not un-verify the
	// set (verification database not dropped, retention failed).
	Warnings []string `json:"warnings,omitempty"`
}

// Outcomes, as in the BackupOutcome search attribute.
const (
	OutcomeRunning  = "running"
	OutcomeVerified = "verified"
	OutcomeFailed   = "failed"
)

// ProgressQuery is the query that returns a cycle's Progress.
const ProgressQuery = "progress"

// Progress is what the `progress` query returns.
type Progress struct {
	Database string             `json:"database"`
	Step     string             `json:"step"`
	Sequence int64              `json:"seq,omitempty"`
	Server   string             `json:"server,omitempty"`
	Percent  float64            `json:"percent"`
	Bytes    int64              `json:"bytes"`
	Outcome  string             `json:"outcome"`
	Timings  activities.Timings `json:"timings"`
	Failed   []int64            `json:"failed,omitempty"`
	Error    string             `json:"error,omitempty"`
}

// Defaults for Plan.Limits left at zero.
const (
	defaultHostWait       = 30 * time.Minute
	defaultServerWait     = 30 * time.Minute
	defaultCopyDeadline   = 6 * time.Hour
	defaultBackupTimeout  = 12 * time.Hour
	defaultRestoreTimeout = 12 * time.Hour
	defaultCheckDBTimeout = 12 * time.Hour
	defaultRestoreRounds  = 3
	firstWait             = 10 * time.Second
	maxWait               = 5 * time.Minute
	longHeartbeat         = time.Minute
)

// a is only used to name activity methods; the worker registers the real one.
var a *activities.Activities

// BackupCycle runs one complete backup cycle of one database (seed 000, "When
// Is a Backup Valid?"): back up to the round-robin primary, catalog, copy to
// the remote site, restore there, CHECKDB, sanity checks. Only then is the
// set verified, and only then does retention run.
func BackupCycle(ctx workflow.Context, in CycleInput) (CycleResult, error) {
	c := newCycle(ctx, in)
	if in.Database == "" {
		return CycleResult{}, c.fail(ctx, temporal.NewNonRetryableApplicationError(
			"BackupCycle input has no database: pass the database's configuration key, e.g. {\"database\":\"Sales\"}",
			activities.ErrInvalidConfig, nil))
	}
	if err := c.start(ctx); err != nil {
		return CycleResult{}, err
	}

	c.step(ctx, activities.StepPlan)
	plan, err := c.plan(ctx)
	if err != nil {
		return CycleResult{}, c.fail(ctx, err)
	}

	// Sequence + backup, with a new sequence after a lost SQL host and fail-over
	// to the next backup server when the primary is lost.
	backup, err := c.backup(ctx, plan)
	if err != nil {
		return CycleResult{}, c.fail(ctx, err)
	}

	c.step(ctx, activities.StepCatalog)
	var manifest activities.ManifestOutput
	err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Minute,
		RetryPolicy:         retry(10*time.Second, 10),
	}), a.WriteManifest, activities.ManifestInput{
		Database: in.Database, Instance: c.instance, Sequence: c.seq, Server: c.server, Backup: backup,
	}).Get(ctx, &manifest)
	if err != nil {
		return CycleResult{}, c.fail(ctx, err)
	}

	c.step(ctx, activities.StepCopy)
	remote := plan.RemoteFor(c.server)
	c.holders = []string{c.server, remote}
	var copied activities.CopyOutput
	err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		// The deadline covers every retry: a remote server that stays down
		// fails the cycle, and the set stays `written` (not failed: it is
		// intact on the primary).
		ScheduleToCloseTimeout: orDefault(plan.Limits.CopyDeadline, defaultCopyDeadline),
		StartToCloseTimeout:    orDefault(plan.Limits.CopyDeadline, defaultCopyDeadline),
		HeartbeatTimeout:       orDefault(plan.Limits.Heartbeat, longHeartbeat),
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        orDefault(plan.Limits.CopyRetry, 5*time.Second),
			BackoffCoefficient:     2,
			MaximumInterval:        orDefault(plan.Limits.CopyRetryMax, time.Minute),
			NonRetryableErrorTypes: activities.NonRetryableErrorTypes,
		},
	}), a.CopyToRemote, activities.CopyInput{
		Database: in.Database, Instance: c.instance, Sequence: c.seq, From: c.server, To: remote,
	}).Get(ctx, &copied)
	if err != nil {
		// Retries stop at the deadline with the last error (or a timeout):
		// anything but a non-retryable type means "remote not back in time".
		if !slices.Contains(activities.NonRetryableErrorTypes, errorType(err)) {
			return CycleResult{}, c.fail(ctx, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"copy of %s seq %d from %s to %s did not finish within the copy deadline %s: check %s, or raise the deadline; the set stays written on %s",
				in.Database, c.seq, c.server, remote, orDefault(plan.Limits.CopyDeadline, defaultCopyDeadline),
				remote, c.server), activities.ErrCopyDeadlineExceeded, err))
		}
		return CycleResult{}, c.fail(ctx, err)
	}
	c.progress.Timings.Copy = copied.Duration

	verify := activities.VerifyInput{
		Database: in.Database, Instance: c.instance, Sequence: c.seq, Server: remote,
	}
	if err := c.restoreAndCheck(ctx, plan, verify); err != nil {
		return CycleResult{}, c.fail(ctx, err)
	}

	c.step(ctx, activities.StepSanity)
	var sanity activities.StepOutput
	err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    orDefault(plan.Limits.Heartbeat, longHeartbeat),
		RetryPolicy:         retry(10*time.Second, 5),
	}), a.SanityChecks, verify).Get(ctx, &sanity)
	if err != nil {
		return CycleResult{}, c.fail(ctx, err)
	}
	c.progress.Timings.Sanity = sanity.Duration
	t := &c.progress.Timings
	t.Total = t.Backup + t.Copy + t.Restore + t.CheckDB

	c.step(ctx, activities.StepVerified)
	err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		RetryPolicy:         retry(5*time.Second, 10),
	}), a.MarkVerified, activities.MarkInput{
		Database: in.Database, Instance: c.instance, Sequence: c.seq, Servers: c.holders, Timings: c.progress.Timings,
	}).Get(ctx, nil)
	if err != nil {
		return CycleResult{}, c.fail(ctx, err)
	}
	c.outcome(ctx, OutcomeVerified)

	result := CycleResult{
		Database: in.Database, Instance: c.instance, Sequence: c.seq, Server: c.server, Remote: remote,
		VerifyDatabase: c.verifyDB,
		Manifest:       manifest.Manifest, Stripes: manifest.Stripes, Locations: c.holders,
		Timings: c.progress.Timings, Failed: c.progress.Failed,
	}

	// The set is verified from here on: what follows is housekeeping, and its
	// failure is reported, never turned into an unverified set.
	if !plan.KeepVerifyDB {
		c.step(ctx, activities.StepDropVerifyDB)
		err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 30 * time.Minute,
			RetryPolicy:         retry(10*time.Second, 5),
		}), a.DropVerifyDB, verify).Get(ctx, nil)
		if err != nil {
			result.Warnings = append(result.Warnings, "verification database not dropped: "+err.Error())
		}
	}

	c.step(ctx, activities.StepRetention)
	var kept activities.RetentionOutput
	err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Minute,
		RetryPolicy:         retry(10*time.Second, 5),
	}), a.ApplyRetention, activities.RetentionInput{
		Database: in.Database, Instance: c.instance, Servers: retentionServers(plan), Protect: c.seq,
	}).Get(ctx, &kept)
	if err != nil {
		result.Warnings = append(result.Warnings, "retention not applied: "+err.Error())
	}
	result.Deleted = kept.Deleted

	c.step(ctx, activities.StepDone)
	c.log(ctx).Info("backup cycle verified", "total", c.progress.Timings.Total)
	return result, nil
}

// plan runs PlanCycle and fills in the run's identity.
func (c *cycle) plan(ctx workflow.Context) (activities.Plan, error) {
	var plan activities.Plan
	err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy:         retry(5*time.Second, 5),
	}), a.PlanCycle, activities.PlanInput{
		Database: c.in.Database, Instance: c.in.Instance, LastServer: c.in.LastServer,
	}).Get(ctx, &plan)
	if err != nil {
		return plan, err
	}
	if len(plan.Rotation) == 0 || plan.Remote == "" || slices.Contains(plan.Rotation[:1], plan.Remote) {
		return plan, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"plan for %s has no backup server (rotation %v) or no remote server distinct from the primary (%q): list them in the database's config",
			c.in.Database, plan.Rotation, plan.Remote), activities.ErrInvalidConfig, nil)
	}
	c.instance = plan.Instance
	c.log(ctx).Info("cycle planned", "primary", plan.Rotation[0], "last_server", plan.LastServer,
		"last_server_source", plan.LastServerSource, "stripes", plan.Stripes, "remote", plan.Remote)
	return plan, nil
}

// backup allocates a sequence and backs up to the primary, handling the crash
// table's first rows: a lost SQL host means "mark failed, wait, new sequence";
// a lost backup server means "mark failed, next server, new sequence".
func (c *cycle) backup(ctx workflow.Context, plan activities.Plan) (activities.BackupOutput, error) {
	hostWait := newBackoff(orDefault(plan.Limits.HostWait, defaultHostWait), plan.Limits)
	serverWait := newBackoff(orDefault(plan.Limits.ServerWait, defaultServerWait), plan.Limits)
	next := 0 // index in plan.Rotation
	unreachable := 0
	for {
		server := plan.Rotation[next]
		c.setServer(ctx, server)

		c.step(ctx, activities.StepSequence)
		var seq int64
		err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 5 * time.Minute,
			RetryPolicy:         retry(5*time.Second, 5, activities.ErrSQLHostUnreachable),
		}), a.AllocateSequence, activities.SequenceInput{Database: c.in.Database, Instance: c.instance}).Get(ctx, &seq)
		if err != nil {
			if errorType(err) == activities.ErrSQLHostUnreachable {
				if werr := c.wait(ctx, hostWait, activities.StepWaitingForSQLHost, err); werr != nil {
					return activities.BackupOutput{}, werr
				}
				continue
			}
			return activities.BackupOutput{}, err
		}
		c.setSequence(ctx, seq)

		c.step(ctx, activities.StepBackup)
		var out activities.BackupOutput
		err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: orDefault(plan.Limits.BackupTimeout, defaultBackupTimeout),
			// A dead worker is noticed within a minute; the retry re-attaches
			// to the statement still running on the SQL instance.
			HeartbeatTimeout: orDefault(plan.Limits.Heartbeat, longHeartbeat),
			RetryPolicy: retry(10*time.Second, 10,
				activities.ErrSQLHostUnreachable, activities.ErrBackupTargetUnreachable),
		}), a.Backup, activities.BackupInput{
			Database: c.in.Database, Instance: c.instance, Sequence: seq, Server: server, Stripes: plan.Stripes,
		}).Get(ctx, &out)
		if err == nil {
			c.progress.Timings.Backup = out.Duration
			c.progress.Percent, c.progress.Bytes = 100, out.Bytes
			return out, nil
		}

		switch errorType(err) {
		case activities.ErrSQLHostUnreachable:
			c.markFailed(ctx, activities.StepBackup, err, []string{server})
			if werr := c.wait(ctx, hostWait, activities.StepWaitingForSQLHost, err); werr != nil {
				return activities.BackupOutput{}, werr
			}
		case activities.ErrBackupTargetUnreachable:
			c.markFailed(ctx, activities.StepBackup, err, []string{server})
			next = (next + 1) % len(plan.Rotation)
			unreachable++
			if unreachable%len(plan.Rotation) == 0 {
				// Every server of the rotation failed in turn: wait for one.
				if werr := c.wait(ctx, serverWait, activities.StepWaitingForBackupServer, err); werr != nil {
					return activities.BackupOutput{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
						"no backup server of %s reachable (%v) after waiting %s: check the shares and the network",
						c.in.Database, plan.Rotation, serverWait.limit), activities.ErrNoBackupServerReachable, err)
				}
			}
		default:
			return activities.BackupOutput{}, err
		}
	}
}

// restoreAndCheck restores the remote copies and runs CHECKDB. A verification
// instance lost during CHECKDB leaves nothing to check: restore again (same
// sequence), a bounded number of times.
func (c *cycle) restoreAndCheck(ctx workflow.Context, plan activities.Plan, verify activities.VerifyInput) error {
	rounds := plan.Limits.RestoreRounds
	if rounds <= 0 {
		rounds = defaultRestoreRounds
	}
	for round := 1; ; round++ {
		c.step(ctx, activities.StepRestore)
		var restored activities.StepOutput
		err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: orDefault(plan.Limits.RestoreTimeout, defaultRestoreTimeout),
			HeartbeatTimeout:    orDefault(plan.Limits.Heartbeat, longHeartbeat),
			// A lost verification instance is retried here: the retry
			// re-attaches to a running RESTORE or starts it again (REPLACE).
			RetryPolicy: retry(orDefault(plan.Limits.WaitInitial, 15*time.Second), 20),
		}), a.Restore, verify).Get(ctx, &restored)
		if err != nil {
			return err
		}
		c.progress.Timings.Restore = restored.Duration
		c.verifyDB = restored.VerifyDatabase

		c.step(ctx, activities.StepCheckDB)
		var checked activities.StepOutput
		err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: orDefault(plan.Limits.CheckDBTimeout, defaultCheckDBTimeout),
			HeartbeatTimeout:    orDefault(plan.Limits.Heartbeat, longHeartbeat),
			RetryPolicy:         retry(orDefault(plan.Limits.WaitInitial, 15*time.Second), 10, activities.ErrSQLHostUnreachable),
		}), a.CheckDB, verify).Get(ctx, &checked)
		if err == nil {
			c.progress.Timings.CheckDB = checked.Duration
			return nil
		}
		if errorType(err) != activities.ErrSQLHostUnreachable || round >= rounds {
			return err
		}
		c.log(ctx).Warn("verification instance lost during CHECKDB: restoring again", "round", round, "error", err)
	}
}

// cycle is the state of one run, read by the progress query.
type cycle struct {
	in       CycleInput
	instance string // the source instance, from the plan
	verifyDB string // the restored copy's name, from Restore
	progress Progress
	seq      int64
	server   string
	holders  []string // servers that may hold files of the current set
}

func newCycle(ctx workflow.Context, in CycleInput) *cycle {
	return &cycle{in: in, progress: Progress{Database: in.Database, Step: activities.StepPlan, Outcome: OutcomeRunning}}
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
	_ = c.upsert(ctx, AttrStep.ValueSet(step))
	c.details(ctx)
}

func (c *cycle) setSequence(ctx workflow.Context, seq int64) {
	c.seq = seq
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
	s := fmt.Sprintf("**%s** · step **%s** · outcome **%s**\n\n", p.Database, p.Step, p.Outcome)
	if p.Sequence != 0 {
		s += fmt.Sprintf("sequence **%d** on **%s**", p.Sequence, p.Server)
		if p.Percent > 0 || p.Bytes > 0 {
			s += fmt.Sprintf(" · %.0f %% · %s", p.Percent, plan.FormatBytes(p.Bytes))
		}
		s += "\n\n"
	}
	t := p.Timings
	s += "| backup | copy | restore | CHECKDB | sanity | total |\n|---|---|---|---|---|---|\n"
	s += fmt.Sprintf("| %s | %s | %s | %s | %s | %s |\n", round(t.Backup), round(t.Copy), round(t.Restore),
		round(t.CheckDB), round(t.Sanity), round(t.Total))
	if len(p.Failed) > 0 {
		s += fmt.Sprintf("\nmarked failed on the way: %v\n", p.Failed)
	}
	if p.Error != "" {
		s += "\n**error:** " + p.Error + "\n"
	}
	workflow.SetCurrentDetails(ctx, s)
}

// wait sleeps for the next backoff interval with step shown, or returns the
// cause once the total wait is used up.
func (c *cycle) wait(ctx workflow.Context, b *backoff, step string, cause error) error {
	d, ok := b.next()
	if !ok {
		return cause
	}
	c.step(ctx, step)
	c.log(ctx).Warn("waiting before trying again", "wait", d, "error", cause)
	return workflow.Sleep(ctx, d)
}

// markFailed marks the current set failed on servers, in a disconnected
// context so that it runs even when the workflow is being cancelled. Its own
// failure is logged: the set is already not verified, and retention removes
// files without a verified manifest.
func (c *cycle) markFailed(ctx workflow.Context, step string, cause error, servers []string) {
	if c.seq == 0 {
		return
	}
	reason := cause.Error()
	var appErr *temporal.ApplicationError
	if errors.As(cause, &appErr) {
		reason = appErr.Message()
		var bf activities.BackupFailure
		if appErr.HasDetails() && appErr.Details(&bf) == nil && bf.Started {
			reason = fmt.Sprintf("%s (at %.0f %%)", reason, bf.Percent)
		}
	}
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	err := workflow.ExecuteActivity(withOptions(dctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy:         retry(2*time.Second, 3),
	}), a.MarkFailed, activities.MarkInput{
		Database: c.in.Database, Instance: c.instance, Sequence: c.seq, Servers: servers, Timings: c.progress.Timings,
		Step: step, ErrorType: errorType(cause), Reason: reason,
	}).Get(dctx, nil)
	if err != nil {
		c.log(ctx).Error("set not marked failed", "error", err)
	}
	c.progress.Failed = append(c.progress.Failed, c.seq)
}

// fail ends the cycle: the current set (if any) is marked failed — except
// after a copy deadline, where it stays intact and `written` — the outcome is
// `failed` and the error returned carries a stable type.
func (c *cycle) fail(ctx workflow.Context, err error) error {
	step := c.progress.Step
	typ := errorType(err)
	if typ != activities.ErrCopyDeadlineExceeded && (len(c.progress.Failed) == 0 || c.progress.Failed[len(c.progress.Failed)-1] != c.seq) {
		servers := c.holders
		if len(servers) == 0 && c.server != "" {
			servers = []string{c.server}
		}
		c.markFailed(ctx, step, err, servers)
	}
	c.progress.Error = err.Error()
	c.progress.Step = activities.StepFailed
	_ = c.upsert(ctx, AttrStep.ValueSet(activities.StepFailed))
	c.outcome(ctx, OutcomeFailed)
	c.log(ctx).Error("backup cycle failed", "failed_step", step, "type", typ, "error", err)

	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && typ != "" {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("backup cycle of %s failed at step %s: %s", c.in.Database, step, appErr.Message()), typ, err)
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("backup cycle of %s failed at step %s: %v", c.in.Database, step, err), "CycleFailed", err)
}

func (c *cycle) log(ctx workflow.Context) log.Logger {
	return log.With(workflow.GetLogger(ctx), "db", c.in.Database, "seq", c.seq, "step", c.progress.Step, "server", c.server)
}

// errorType is the ApplicationError type in err's chain, or "".
func errorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

// retry is the usual policy: exponential from initial, at most attempts
// attempts, never retrying the non-retryable types nor the extra ones (which
// the workflow handles itself).
func retry(initial time.Duration, attempts int32, extra ...string) *temporal.RetryPolicy {
	types := append(append([]string(nil), activities.NonRetryableErrorTypes...), extra...)
	return &temporal.RetryPolicy{
		InitialInterval:        initial,
		BackoffCoefficient:     2,
		MaximumInterval:        20 * initial,
		MaximumAttempts:        attempts,
		NonRetryableErrorTypes: types,
	}
}

func withOptions(ctx workflow.Context, o workflow.ActivityOptions) workflow.Context {
	return workflow.WithActivityOptions(ctx, o)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// retentionServers are every server that may hold sets of the database:
// the rotation and every copy target, each once, in a stable order.
func retentionServers(plan activities.Plan) []string {
	servers := append([]string(nil), plan.Rotation...)
	extra := []string{plan.Remote}
	for _, s := range plan.Rotation {
		extra = append(extra, plan.Remotes[s])
	}
	for _, s := range extra {
		if s != "" && !slices.Contains(servers, s) {
			servers = append(servers, s)
		}
	}
	return servers
}

// backoff hands out doubling waits, from l.WaitInitial up to l.WaitMax,
// until their total reaches limit.
type backoff struct {
	limit, used, wait, max time.Duration
}

func newBackoff(limit time.Duration, l activities.Limits) *backoff {
	return &backoff{limit: limit, wait: orDefault(l.WaitInitial, firstWait), max: orDefault(l.WaitMax, maxWait)}
}

func (b *backoff) next() (time.Duration, bool) {
	if b.used >= b.limit {
		return 0, false
	}
	d := min(b.wait, b.limit-b.used)
	b.used += d
	b.wait = min(2*b.wait, b.max)
	return d, true
}

// round keeps durations readable: 1m23s, 4.56s, 120ms.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
