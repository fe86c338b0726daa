package workflows

import (
	"errors"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
)

// Activity options and retry policies shared by the workflows, and the
// backoff of the cycle's waits.

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
// notAgainstSet are failures of the BACKUP step that say nothing against the
// set: another run's number, files a running BACKUP holds, a source database
// not available, a statement left running.
var notAgainstSet = []string{activities.ErrSequenceInUse, activities.ErrBackupDeviceInUse, activities.ErrDatabaseUnavailable,
	activities.ErrStatementLeftRunning}

// unconfirmedNotAgainstSet are failures of the BACKUP step that say nothing
// against the set either, recognised since versionUnconfirmed: a BACKUP
// that completed and whose stripes the worker could not measure, and an
// attempt whose context ended (heartbeats lost while Temporal restarted, the
// worker stopping), both when their retries ran out.
var unconfirmedNotAgainstSet = []string{activities.ErrBackupUnconfirmed, activities.ErrActivityInterrupted}

// versionUnconfirmed: a BACKUP step that ends in unconfirmedNotAgainstSet
// no longer marks its set failed as incomplete.
const versionUnconfirmed = "backup-unconfirmed-not-against-set"

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

// withOptions applies o with two guarantees: a heartbeat timeout never
// longer than one attempt, and a bound over all attempts (ScheduleToClose;
// twice StartToClose where a block gives none).
func withOptions(ctx workflow.Context, o workflow.ActivityOptions) workflow.Context {
	if o.StartToCloseTimeout > 0 && o.HeartbeatTimeout > o.StartToCloseTimeout {
		o.HeartbeatTimeout = o.StartToCloseTimeout
	}
	if o.ScheduleToCloseTimeout == 0 {
		o.ScheduleToCloseTimeout = 2 * o.StartToCloseTimeout
	}
	return workflow.WithActivityOptions(ctx, o)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// deadline is a long step's ScheduleToClose: the plan's, or (a plan from
// before the plan derived it) twice its attempt timeout.
func deadline(d, timeout, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return 2 * orDefault(timeout, def)
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
