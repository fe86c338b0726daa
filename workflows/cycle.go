package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
	cycleacts "github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/metrics"
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
	// Resume, when set, finishes that set instead of taking a new backup:
	// a set an outage left written, copied, restored or checked (never one
	// marked failed or cancelled) is copied if needed, restored, checked and
	// verified by this run.
	Resume int64 `json:"resume,omitempty"`
	// Differential takes a differential backup on the newest verified full
	// (diff_backup) instead of a full one, proven on top of it; without a
	// verified full to base it on, the cycle ends skipped.
	Differential bool `json:"differential,omitempty"`
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
	// Base is a differential's base: the verified full set it holds the
	// changes since; 0 for a full.
	Base int64 `json:"base,omitempty"`
	// Failed lists sequences this run marked failed on its way (a BACKUP
	// that did not complete), oldest first.
	Failed  []int64             `json:"failed,omitempty"`
	Deleted []activities.SetRef `json:"deleted,omitempty"` // removed by retention
	// Immutable is the verified set's copy to its object store
	// (immutable_copy), when the database has one and it was made.
	Immutable *cycleacts.ImmutableOutput `json:"immutable,omitempty"`
	// Evidence are the evidence ledger's records of the set, one per
	// backup server holding it (evidence: configured with a signing key).
	Evidence []activities.EvidenceRecord `json:"evidence,omitempty"`
	// Warnings are problems after verification that did not un-verify the
	// set (verification database not dropped, retention failed).
	Warnings []string `json:"warnings,omitempty"`
	// Skipped is set, and nothing else, when this start did not run a cycle
	// because another cycle of the database holds its workflow id (HeldBy),
	// or, with SkipReason activities.SkipNotPreferredReplica, because no
	// replica of the database's availability group can back it up now.
	Skipped    string `json:"skipped,omitempty"`
	SkipReason string `json:"skip_reason,omitempty"`
	HeldBy     string `json:"held_by,omitempty"`
	// RunBy is the workflow id that ran the cycle when this start launched
	// it under the database's own id.
	RunBy string `json:"run_by,omitempty"`
}

// Outcomes, as in the BackupOutcome search attribute.
const (
	OutcomeRunning   = "running"
	OutcomeVerified  = "verified"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
	OutcomeSkipped   = "skipped"
)

// StepLaunch is the step of a start that hands the cycle to the database's
// own workflow id.
const StepLaunch = "launch"

// ProgressQuery is the query that returns a cycle's Progress.
const ProgressQuery = "progress"

// Progress is what the `progress` query returns.
type Progress struct {
	Database string             `json:"database"`
	Step     string             `json:"step"`
	Sequence int64              `json:"seq,omitempty"`
	Server   string             `json:"server,omitempty"`
	Base     int64              `json:"base,omitempty"` // a differential's base set
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
	// longHeartbeat is every activity's heartbeat timeout until the plan
	// gives one: minutes, so that a stalled worker, network or Temporal
	// server does not cancel a running statement.
	longHeartbeat = plan.DefaultHeartbeat
	// shortDeadline bounds every attempt of a short step together
	// (ScheduleToClose): one that keeps failing ends the cycle instead of
	// holding the database while its schedule skips. The plan gives the
	// long steps' bounds.
	shortDeadline = time.Hour
)

// a is only used to name activity methods; the worker registers the real one.
// Not nil: the steps still in package activities are methods of its
// embedded *activities.Activities, reached through it.
var a = &cycleacts.Activities{}

// BackupCycle runs one complete backup cycle of one database (seed 000, "When
// Is a Backup Valid?"): back up to the round-robin primary, catalog, copy to
// the remote site, restore there, CHECKDB, sanity checks. Only then is the
// set verified, and only then does retention run.
//
// Exactly one cycle of an (instance, database) runs at a time, whatever
// started it: the cycle runs under CycleWorkflowID, and a start under any
// other id (a schedule's, the Web UI's) launches it there as a child or, when
// a cycle holds that id, ends skipped naming it.
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
		return CycleResult{}, c.end(ctx, err)
	}
	if plan.Unresolved != "" {
		if plan, err = c.resolve(ctx, plan); err != nil {
			return CycleResult{}, c.end(ctx, err)
		}
	}
	// From here on the cycle is the database's as its instance spells it
	// (the plan resolved the start's name): its id, files, manifests and
	// search attributes, whatever spelling started it.
	c.rename(plan)
	if plan.NotPreferred != "" {
		return c.skip(ctx, plan, plan.NotPreferred, activities.SkipNotPreferredReplica), nil
	}
	// A differential without a verified full to prove it on is not taken.
	// Only a start asking for a differential gets here: the commands of
	// every full cycle's history stay as they were.
	if plan.NoDifferentialBase != "" {
		return c.skip(ctx, plan, plan.NoDifferentialBase, activities.SkipNoDifferentialBase), nil
	}
	if id := CycleWorkflowID(plan.Instance, c.in.Database); workflow.GetInfo(ctx).WorkflowExecution.ID != id {
		return c.launch(ctx, id, plan)
	}
	// Within its instance's and servers' max_concurrent, whatever started
	// it (slots.go).
	if len(plan.Slots) > 0 && c.changed(ctx, "concurrency-slots") {
		if err := c.acquire(ctx, plan); err != nil {
			return CycleResult{}, c.end(ctx, err)
		}
	}
	res, err := c.run(ctx, plan)
	if err != nil {
		return CycleResult{}, c.end(ctx, err)
	}
	return res, nil
}

// run is the cycle itself, under the database's own workflow id.
func (c *cycle) run(ctx workflow.Context, plan activities.Plan) (CycleResult, error) {
	in := c.in
	var manifest activities.ManifestOutput
	copied := false
	if in.Resume > 0 {
		set, err := c.resume(ctx, plan)
		if err != nil {
			return CycleResult{}, err
		}
		manifest = activities.ManifestOutput{Manifest: set.Manifest, Stripes: set.Stripes}
		copied = set.State != cycleacts.ResumeFromCopy
	} else {
		// Sequence + backup, with a new sequence after a lost SQL host and
		// fail-over to the next backup server when the primary is lost.
		backup, err := c.backup(ctx, plan)
		if err != nil {
			return CycleResult{}, err
		}

		c.step(ctx, activities.StepCatalog)
		err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout:    30 * time.Minute,
			ScheduleToCloseTimeout: shortDeadline,
			HeartbeatTimeout:       c.hb,
			RetryPolicy:            retry(10*time.Second, 10),
			Summary:                fmt.Sprintf("catalog %s seq %d on %s", in.Database, c.seq, c.server),
		}), a.WriteManifest, activities.ManifestInput{
			Database: in.Database, Instance: c.instance, Entry: c.entry, Sequence: c.seq, Server: c.server, Backup: backup,
			Replica: c.replica,
		}).Get(ctx, &manifest)
		if err != nil {
			return CycleResult{}, err
		}
	}

	remote := plan.RemoteFor(c.server)
	if copied && len(c.holders) > 1 {
		remote = c.holders[len(c.holders)-1] // a resumed set is verified where it was copied to
	}
	if !copied {
		c.step(ctx, activities.StepCopy)
		c.holders = []string{c.server, remote}
		var out activities.CopyOutput
		// The deadline covers every retry: a remote server that stays down
		// fails the cycle, and the set stays `written` (not failed: it is
		// intact on the primary).
		err := workflow.ExecuteActivity(withOptions(ctx, c.copyOptions(plan, remote,
			fmt.Sprintf("copy %s seq %d from %s to %s", in.Database, c.seq, c.server, remote))), a.CopyToRemote, activities.CopyInput{
			Database: in.Database, Instance: c.instance, Entry: c.entry, Sequence: c.seq, From: c.server, To: remote,
		}).Get(ctx, &out)
		if err != nil {
			// Retries stop at the deadline with the last error (or a timeout):
			// anything but a non-retryable type (or a cancel) means "remote
			// not back in time".
			if !cancelled(ctx, err) && !slices.Contains(activities.NonRetryableErrorTypes, errorType(err)) {
				return CycleResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
					"copy of %s seq %d from %s to %s did not finish within the copy deadline %s: check %s, or raise the deadline; the set stays written on %s",
					in.Database, c.seq, c.server, remote, orDefault(plan.Limits.CopyDeadline, defaultCopyDeadline),
					remote, c.server), activities.ErrCopyDeadlineExceeded, err)
			}
			return CycleResult{}, err
		}
		c.progress.Timings.Copy = out.Duration
	}

	upgradeTestStep(ctx)
	verify := activities.VerifyInput{
		Database: in.Database, Instance: c.instance, Entry: c.entry, Sequence: c.seq, Server: remote,
		SourceUTCOffsetMinutes: plan.Source.UTCOffsetMinutes,
	}
	if err := c.restoreAndCheck(ctx, plan, verify); err != nil {
		return CycleResult{}, err
	}

	c.step(ctx, activities.StepSanity)
	var sanity activities.StepOutput
	err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		// Queries on a cold multi-terabyte copy read it as CHECKDB does; the
		// activity heartbeats while they run.
		StartToCloseTimeout:    orDefault(plan.Limits.CheckDBTimeout, defaultCheckDBTimeout),
		ScheduleToCloseTimeout: deadline(plan.Limits.CheckDBDeadline, plan.Limits.CheckDBTimeout, defaultCheckDBTimeout),
		HeartbeatTimeout:       c.hb,
		WaitForCancellation:    true,
		RetryPolicy:            retry(10*time.Second, 5),
		Summary:                fmt.Sprintf("sanity checks of %s seq %d on its restored copy", in.Database, c.seq),
	}), a.SanityChecks, verify).Get(ctx, &sanity)
	if err != nil {
		return CycleResult{}, err
	}
	c.progress.Timings.Sanity = sanity.Duration
	t := &c.progress.Timings
	t.Total = t.Backup + t.Copy + t.Restore + t.CheckDB

	c.step(ctx, activities.StepVerified)
	err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    10 * time.Minute,
		ScheduleToCloseTimeout: shortDeadline,
		HeartbeatTimeout:       c.hb,
		RetryPolicy:            retry(5*time.Second, 10),
		Summary:                fmt.Sprintf("mark %s seq %d verified on %s", in.Database, c.seq, strings.Join(c.holders, ", ")),
	}), a.MarkVerified, activities.MarkInput{
		Database: in.Database, Instance: c.instance, Entry: c.entry, Sequence: c.seq, Servers: c.holders, Timings: c.progress.Timings,
	}).Get(ctx, nil)
	if err != nil {
		return CycleResult{}, err
	}
	c.verified = true
	if c.batched {
		c.settle(ctx, OutcomeVerified) // shown with the next step
	} else {
		c.outcome(ctx, OutcomeVerified)
	}
	metrics.CycleEnded(workflow.GetMetricsHandler(ctx), metrics.OutcomeVerified, "")

	result := CycleResult{
		Database: in.Database, Instance: c.instance, Sequence: c.seq, Server: c.server, Remote: remote, Base: c.base,
		VerifyDatabase: c.verifyDB,
		Manifest:       manifest.Manifest, Stripes: manifest.Stripes, Locations: c.holders,
		Timings: c.progress.Timings, Failed: c.progress.Failed,
	}
	for _, w := range plan.Warnings {
		result.Warnings = append(result.Warnings, "plan: "+w)
	}

	// The set is verified from here on: what follows is housekeeping, and its
	// failure is reported, never turned into an unverified set.
	// With nothing between them, the copy is dropped while retention runs:
	// both start in one workflow task, under the step retention.
	together := c.batched && plan.Immutable == "" && !plan.Evidence
	if !plan.KeepVerifyDB && !together {
		c.step(ctx, activities.StepDropVerifyDB)
		result.Warnings = notDropped(ctx, c.dropVerifyDB(ctx, verify), result.Warnings)
	}

	// A locked copy on the object store, from the verified set: its
	// failure is a warning, never an unverified set.
	if plan.Immutable != "" && c.changed(ctx, "immutable-copy") {
		c.step(ctx, activities.StepImmutableCopy)
		var imm cycleacts.ImmutableOutput
		err = workflow.ExecuteActivity(withOptions(ctx, c.copyOptions(plan, plan.Immutable,
			fmt.Sprintf("immutable copy of %s seq %d to %s", in.Database, c.seq, plan.Immutable))), a.CopyImmutable, cycleacts.ImmutableInput{
			Database: in.Database, Instance: c.instance, Entry: c.entry, Sequence: c.seq, Servers: c.holders, Target: plan.Immutable,
		}).Get(ctx, &imm)
		if err != nil {
			c.log(ctx).Warn("immutable copy not made: the set stays verified", "target", plan.Immutable, "error", err)
			result.Warnings = append(result.Warnings, fmt.Sprintf("immutable copy to %s not made: %v", plan.Immutable, err))
		} else {
			result.Immutable = &imm
			// Earlier sets it also copied (theirs had failed): what is
			// left is the next cycle's, and status names each set.
			if imm.CatchUpError != "" {
				c.log(ctx).Warn("immutable copies of earlier sets not all made", "target", plan.Immutable, "caught_up", imm.CaughtUp, "error", imm.CatchUpError)
				result.Warnings = append(result.Warnings, fmt.Sprintf("immutable copies of earlier sets to %s not all made: %s", plan.Immutable, imm.CatchUpError))
			}
		}
	}

	// The evidence ledger's record, once the manifest is final (the
	// immutable copy's outcome is in it): a warning when it fails, never
	// an unverified set.
	if plan.Evidence && c.changed(ctx, "evidence-ledger") {
		c.step(ctx, activities.StepEvidence)
		var ev activities.EvidenceOutput
		err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout:    10 * time.Minute,
			ScheduleToCloseTimeout: shortDeadline,
			HeartbeatTimeout:       c.hb,
			RetryPolicy:            retry(10*time.Second, 3),
			Summary:                fmt.Sprintf("evidence of %s seq %d on %s", in.Database, c.seq, strings.Join(c.holders, ", ")),
		}), a.RecordSetEvidence, activities.EvidenceInput{
			Database: in.Database, Instance: c.instance, Entry: c.entry, Sequence: c.seq, Servers: c.holders,
			Immutable: immutableTarget(result.Immutable),
		}).Get(ctx, &ev)
		if err != nil {
			c.log(ctx).Warn("evidence not recorded: the set stays verified", "error", err)
			result.Warnings = append(result.Warnings, "evidence not recorded: "+err.Error())
		}
		for _, n := range ev.NotRecorded {
			result.Warnings = append(result.Warnings, "evidence not recorded on "+n)
		}
		result.Evidence = ev.Recorded
	}

	c.step(ctx, activities.StepRetention)
	var dropped workflow.Future
	if !plan.KeepVerifyDB && together {
		dropped = c.dropVerifyDB(ctx, verify)
	}
	var kept activities.RetentionOutput
	retained := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Minute,
		ScheduleToCloseTimeout: 2 * shortDeadline, // a large share lists slowly
		HeartbeatTimeout:       c.hb,
		RetryPolicy:            retry(10*time.Second, 5),
		Summary:                "retention of " + in.Database,
	}), a.ApplyRetention, activities.RetentionInput{
		Database: in.Database, Instance: c.instance, Entry: c.entry, Servers: retentionServers(plan), Protect: c.seq,
	})
	if dropped != nil {
		result.Warnings = notDropped(ctx, dropped, result.Warnings)
	}
	if err := retained.Get(ctx, &kept); err != nil {
		result.Warnings = append(result.Warnings, "retention not applied: "+err.Error())
	}
	result.Deleted = kept.Deleted

	c.step(ctx, activities.StepDone)
	c.log(ctx).Info("backup cycle verified", "total", c.progress.Timings.Total)
	return result, nil
}

// dropVerifyDB drops the set's restored copy (DropVerifyDB).
func (c *cycle) dropVerifyDB(ctx workflow.Context, verify activities.VerifyInput) workflow.Future {
	// A verification instance that cannot be reached now does not hold
	// the verified cycle in retries: the copy is left to the next cycle.
	verify.Cleanup = workflow.GetVersion(ctx, "drop-verify-cleanup", workflow.DefaultVersion, 1) == 1
	return workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Minute,
		ScheduleToCloseTimeout: shortDeadline,
		HeartbeatTimeout:       c.hb,
		RetryPolicy:            retry(10*time.Second, 5),
		Summary:                fmt.Sprintf("drop the verification copy of %s seq %d", verify.Database, verify.Sequence),
	}), a.DropVerifyDB, verify)
}

// notDropped adds the warning of a drop that failed: the set stays
// verified.
func notDropped(ctx workflow.Context, dropped workflow.Future, warnings []string) []string {
	if err := dropped.Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("verification database not dropped: the set stays verified", "error", err)
		return append(warnings, "verification database not dropped: "+err.Error())
	}
	return warnings
}

// immutableTarget is the object store the set was copied to, for its
// servers' ledgers to follow; "" when it was not copied.
func immutableTarget(out *cycleacts.ImmutableOutput) string {
	if out == nil || out.State != string(catalog.ImmutableCopied) {
		return ""
	}
	return out.Target
}

// copyOptions are those of a copy from the primary to server: all its
// attempts within the copy deadline, retried at the copy_wait pace while
// the server is away, stopped (and awaited) on cancel, on a worker next to
// the servers when they have a task_queue.
func (c *cycle) copyOptions(plan activities.Plan, server, summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		ScheduleToCloseTimeout: orDefault(plan.Limits.CopyDeadline, defaultCopyDeadline),
		StartToCloseTimeout:    orDefault(plan.Limits.CopyDeadline, defaultCopyDeadline),
		HeartbeatTimeout:       c.hb,
		WaitForCancellation:    true, // a cancelled copy stops writing before its files are removed
		TaskQueue:              plan.CopyQueue(c.server, server),
		Summary:                summary,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        orDefault(plan.Limits.CopyRetry, 5*time.Second),
			BackoffCoefficient:     2,
			MaximumInterval:        orDefault(plan.Limits.CopyRetryMax, time.Minute),
			NonRetryableErrorTypes: activities.NonRetryableErrorTypes,
		},
	}
}

// backup allocates a sequence and backs up to the primary, handling the crash
// table's first rows: a lost SQL host means "mark failed, wait, new sequence";
// a lost backup server means "mark failed, next server, new sequence".
func (c *cycle) backup(ctx workflow.Context, plan activities.Plan) (activities.BackupOutput, error) {
	hostWait := newBackoff(orDefault(plan.Limits.HostWait, defaultHostWait), plan.Limits)
	serverWait := newBackoff(orDefault(plan.Limits.ServerWait, defaultServerWait), plan.Limits)
	next := 0 // index in plan.Rotation
	unreachable := 0
	inUse := 0 // numbers found used by another run, in a row
	const maxInUse = 5
	sameSeq := false
	planned := plan.Sequence // allocated by the plan, for the first try
	for {
		server := plan.Rotation[next]
		c.setServer(ctx, server)

		var seq int64
		var err error
		if sameSeq {
			// The set's files are held by its earlier BACKUP: back up
			// the same number again (a retry recognises it complete).
			seq, sameSeq = c.seq, false
		} else if planned != 0 {
			seq, planned = planned, 0
		} else {
			c.step(ctx, activities.StepSequence)
			err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
				StartToCloseTimeout:    5 * time.Minute,
				ScheduleToCloseTimeout: shortDeadline / 2,
				HeartbeatTimeout:       c.hb,
				RetryPolicy:            retry(5*time.Second, 5, activities.ErrSQLHostUnreachable, activities.ErrDatabaseUnavailable),
				Summary:                "allocate the next sequence number of " + c.in.Database,
			}), a.AllocateSequence, activities.SequenceInput{Database: c.in.Database, Instance: c.instance, Entry: c.entry,
				Method: plan.Mode.Sequence, Replica: c.replica}).Get(ctx, &seq)
		}
		if err != nil {
			if t := errorType(err); t == activities.ErrSQLHostUnreachable || t == activities.ErrDatabaseUnavailable {
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
			StartToCloseTimeout:    orDefault(plan.Limits.BackupTimeout, defaultBackupTimeout),
			ScheduleToCloseTimeout: deadline(plan.Limits.BackupDeadline, plan.Limits.BackupTimeout, defaultBackupTimeout),
			// A dead worker is noticed within the heartbeat timeout; the
			// retry re-attaches to the statement still running on the SQL
			// instance.
			HeartbeatTimeout:    c.hb,
			WaitForCancellation: true,
			RetryPolicy: retry(10*time.Second, 10,
				activities.ErrSQLHostUnreachable, activities.ErrBackupTargetUnreachable,
				activities.ErrDatabaseUnavailable, activities.ErrBackupDeviceInUse),
			Summary: fmt.Sprintf("BACKUP %s seq %d to %s, %d stripes", c.in.Database, seq, server, plan.Stripes),
		}), a.Backup, activities.BackupInput{
			Database: c.in.Database, Instance: c.instance, Entry: c.entry, Sequence: seq, Server: server, Stripes: plan.Stripes,
			Mode: plan.RunMode(), Replica: c.replica,
		}).Get(ctx, &out)
		if err == nil {
			c.backedUp = true
			c.progress.Timings.Backup = out.Duration
			c.progress.Percent, c.progress.Bytes = 100, out.Bytes
			return out, nil
		}
		if cancelled(ctx, err) {
			return activities.BackupOutput{}, err
		}

		switch errorType(err) {
		case activities.ErrSequenceInUse:
			// Another run's set holds this number on the server (a database
			// restored from an older backup, a worker's clock): nothing of
			// it was touched and nothing is ours; the next allocation skips
			// past it.
			c.log(ctx).Warn("sequence number in use on the backup server: allocating another", "error", err)
			c.seq, c.holders = 0, nil
			if inUse++; inUse > maxInUse {
				return activities.BackupOutput{}, err
			}
		case activities.ErrBackupDeviceInUse:
			// Another BACKUP (this set's earlier attempt, which this login
			// cannot see without VIEW SERVER STATE) still holds the files:
			// nothing is known against the set; wait, then the same number.
			c.log(ctx).Warn("backup files held by a running BACKUP: waiting for it", "error", err)
			if werr := c.wait(ctx, hostWait, activities.StepWaitingForSQLHost, err); werr != nil {
				return activities.BackupOutput{}, werr
			}
			sameSeq = true
		case activities.ErrDatabaseUnavailable:
			// The source database is offline, restoring or recovering:
			// nothing was written; wait for it, then a new number.
			if werr := c.wait(ctx, hostWait, activities.StepWaitingForSQLHost, err); werr != nil {
				return activities.BackupOutput{}, werr
			}
		case activities.ErrSQLHostUnreachable:
			c.markFailed(ctx, activities.StepBackup, err, []string{server}, catalog.EvidenceBackupIncomplete)
			if werr := c.wait(ctx, hostWait, activities.StepWaitingForSQLHost, err); werr != nil {
				return activities.BackupOutput{}, werr
			}
		case activities.ErrBackupTargetUnreachable:
			c.markFailed(ctx, activities.StepBackup, err, []string{server}, catalog.EvidenceBackupIncomplete)
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
		c.restoreStarted = true
		var restored activities.StepOutput
		err := workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout:    orDefault(plan.Limits.RestoreTimeout, defaultRestoreTimeout),
			ScheduleToCloseTimeout: deadline(plan.Limits.RestoreDeadline, plan.Limits.RestoreTimeout, defaultRestoreTimeout),
			HeartbeatTimeout:       c.hb,
			// A cancelled RESTORE stops before the copy is dropped.
			WaitForCancellation: true,
			// A lost verification instance is retried here: the retry
			// re-attaches to a running RESTORE or starts it again (REPLACE).
			RetryPolicy: retry(orDefault(plan.Limits.WaitInitial, 15*time.Second), 20),
			Summary:     fmt.Sprintf("RESTORE %s seq %d from %s", verify.Database, verify.Sequence, verify.Server),
		}), a.Restore, verify).Get(ctx, &restored)
		if err != nil {
			return err
		}
		c.progress.Timings.Restore = restored.Duration
		c.verifyDB = restored.VerifyDatabase

		c.step(ctx, activities.StepCheckDB)
		var checked activities.StepOutput
		err = workflow.ExecuteActivity(withOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout:    orDefault(plan.Limits.CheckDBTimeout, defaultCheckDBTimeout),
			ScheduleToCloseTimeout: deadline(plan.Limits.CheckDBDeadline, plan.Limits.CheckDBTimeout, defaultCheckDBTimeout),
			HeartbeatTimeout:       c.hb,
			WaitForCancellation:    true,
			RetryPolicy:            retry(orDefault(plan.Limits.WaitInitial, 15*time.Second), 10, activities.ErrSQLHostUnreachable),
			Summary:                fmt.Sprintf("DBCC CHECKDB of the restored %s seq %d", verify.Database, verify.Sequence),
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
