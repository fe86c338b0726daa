package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// defaultLogEvery is --log-every: a demo shows a few log backups within
// seconds of its cycles.
const defaultLogEvery = 3 * time.Second

// runOrJoinCycle runs a cycle of Sales, or waits for the one that runs
// already: the log chain starts one for the full backup its first chain
// needs when the worker starts before any set exists.
func runOrJoinCycle(ctx context.Context, c *client.Client) (client.CycleRun, error) {
	in := workflows.CycleInput{Instance: devenv.SourceInstance, Database: devenv.Database}
	run, err := c.StartCycle(ctx, in)
	var running *client.AlreadyRunningError
	if errors.As(err, &running) {
		return c.WaitCycle(ctx, c.SDK().GetWorkflow(ctx, running.WorkflowID, running.RunID), in.Database)
	}
	if err != nil {
		return client.CycleRun{}, err
	}
	return c.WaitCycle(ctx, run, in.Database)
}

// demoLogs is how many log backups the demo waits to see copied.
const demoLogs = 3

// showLogChain waits until Sales's log chain has demoLogs log backups
// copied to the remote site (and the standby proof has applied one, if it
// does within the wait) and prints the chain: logs taken, copied, proven.
func showLogChain(ctx context.Context, c *client.Client, stdout io.Writer, every time.Duration) error {
	id := workflows.LogChainWorkflowID(devenv.SourceInstance, devenv.Database)
	proofID := workflows.LogProofWorkflowID(devenv.SourceInstance, devenv.Database)
	fmt.Fprintf(stdout, "log chain of %s: waiting for %d log backups copied to the remote site (one every %s; log_backup.every is 1m)...\n",
		devenv.Database, demoLogs, every)
	// The copies must come; the standby proof is shown as far as it got
	// shortly after (it also waits for its own timer, once a minute).
	wait := max(30*every, 30*time.Second)
	deadline := time.Now().Add(wait)
	var proofBy time.Time
	var st workflows.LogChainStatus
	var proof workflows.LogProofStatus
	var proofErr error
	for {
		v, err := c.SDK().QueryWorkflow(ctx, id, "", workflows.LogChainQuery)
		if err == nil {
			err = v.Get(&st)
		}
		if v, perr := c.SDK().QueryWorkflow(ctx, proofID, "", workflows.LogProofQuery); perr == nil {
			proofErr = v.Get(&proof)
		} else {
			proofErr = perr
		}
		copied := err == nil && st.CopiedThrough >= demoLogs
		if copied && proofBy.IsZero() {
			proofBy = time.Now().Add(10 * every)
		}
		switch {
		case copied && (proofErr == nil && proof.Through > 0 || time.Now().After(proofBy)):
		case !copied && time.Now().After(deadline):
			why := st.LastError + st.CopyError
			if err != nil {
				why = err.Error()
			}
			return fmt.Errorf("log chain of %s: %d log backups copied after %s, want %d: %s", devenv.Database, st.CopiedThrough, wait, demoLogs, why)
		default:
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(every / 2):
			}
			continue
		}
		break
	}
	fmt.Fprintf(stdout, "  chain %d: %d log backups taken (newest started %s ago), copied through %d from %s to %s; state %s\n",
		st.Chain, st.LastLog, round(time.Since(st.LastLogStart)), st.CopiedThrough, st.Server, st.CopyTo, st.State)
	switch {
	case proofErr != nil:
		fmt.Fprintf(stdout, "  proof:   not running yet (%s)\n", strings.SplitN(proofErr.Error(), "\n", 2)[0])
	case proof.Through > 0:
		fmt.Fprintf(stdout, "  proof:   standby %s on %s (from set %d) proven to log %d (everything committed before %s)\n",
			proof.Standby, proof.VerifyInstance, proof.Sequence, proof.Through, proof.ThroughStart.UTC().Format(time.RFC3339))
	default:
		fmt.Fprintf(stdout, "  proof:   standby %s on %s: no log applied yet (%s)\n", proof.Standby, proof.VerifyInstance, proof.Waiting+proof.LastError)
	}
	return nil
}
