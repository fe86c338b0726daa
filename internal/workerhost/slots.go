package workerhost

import (
	"context"
	"errors"
	"math/rand/v2"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/workflows"
)

// maxSlotLookups bounds the lookups per resource: with every slot of a
// large limit held, the cycle waits anyway.
const maxSlotLookups = 8

// FreeSlots is activities.CycleDeps.FreeSlots on c: the first slot of s
// whose workflow does not run, looked up from a random index so that
// cycles planned at the same moment spread over the free ones. Nil when
// none was found (every slot looked at is held, or Temporal did not
// answer): the cycle then tries its slots in order, as without a hint.
func FreeSlots(c sdkclient.Client) func(context.Context, activities.Slot) []int {
	return func(ctx context.Context, s activities.Slot) []int {
		n := max(s.Limit, 1)
		first := rand.IntN(n)
		for i := range min(n, maxSlotLookups) {
			k := (first+i)%n + 1
			d, err := c.DescribeWorkflowExecution(ctx, workflows.SlotWorkflowID(s.Kind, s.Name, k), "")
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) || (err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING) {
				return []int{k}
			}
		}
		return nil
	}
}
