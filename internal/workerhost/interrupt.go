package workerhost

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/activities"
)

// interrupted is how an attempt whose context ended before it did, not on
// the workflow's request, is reported (stopGrace applies it):
// activities.ErrActivityInterrupted, which every retry policy retries. The
// SDK ends an activity's context when its heartbeats do not reach Temporal
// within the heartbeat timeout (a server restarting, a network cut), when
// the worker stops, and when the activity is paused or reset. Whatever the
// attempt met after that, a read of a backup share failing with "context
// canceled", a connection closed under a statement, would otherwise be
// classified as the SQL host's or the backup server's failure, and the
// cycle acts on those: a BACKUP that completed was once taken for one that
// did not reach its backup server, and its set was marked failed as
// incomplete. A cancellation the workflow asked for keeps the attempt's own
// error (the SDK reports it as cancelled).
func interrupted(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	var canceled *temporal.CanceledError
	if errors.As(cause, &canceled) {
		return err
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrActivityInterrupted {
		return err
	}
	return temporal.NewApplicationErrorWithCause(
		fmt.Sprintf("the attempt was interrupted (%v) and is retried; what it met after that says nothing about the SQL host, the backup server or the set: %v", cause, err),
		activities.ErrActivityInterrupted, err)
}
