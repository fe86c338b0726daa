package workflows

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/backupcycle/backupcycle/activities"
)

// Every cycle, whatever started it (`starter run`, the Web UI, a schedule, a
// fleet run), keeps to its instance's and its backup servers'
// max_concurrent: it holds one slot of each while it runs. Slot k of a
// resource is a workflow run under the id SlotWorkflowID(kind, name, k),
// started as the cycle's child: Temporal runs at most one workflow per id,
// so a resource with limit n is held by at most n cycles, and the server
// terminates a slot when its cycle closes (ParentClosePolicy TERMINATE),
// however it closes: completed, failed, cancelled, terminated, timed out.
// No worker has to be alive to give a slot back, and none can leak it.
//
// A cycle takes its slots in one global order (activities.SlotOrder) and
// waits, polling, for the next one while holding those before it: two
// cycles never wait for each other. A fleet run's children take theirs
// too: the fleet's own pool, with the same limits, only decides when it
// starts them.

// SlotName is the workflow type of a slot.
const SlotName = "ConcurrencySlot"

// SlotInput names a slot and the cycle holding it, for the Web UI.
type SlotInput struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Index  int    `json:"index"`
	Limit  int    `json:"limit"`
	Holder string `json:"holder"`
}

// ConcurrencySlot is held by the cycle that started it until that cycle
// closes: it waits for nothing and ends when the server terminates it with
// its parent (or when it is cancelled).
func ConcurrencySlot(ctx workflow.Context, in SlotInput) error {
	_ = workflow.Await(ctx, func() bool { return false })
	return nil
}

// SlotWorkflowID is the workflow id of slot index of a resource:
// slot-<kind>-<name>-<index>, escaped as CycleWorkflowID.
func SlotWorkflowID(kind, name string, index int) string {
	return workflowID("slot-"+kind, name, strconv.Itoa(index))
}

// Waiting for a slot: first and longest interval between tries.
const (
	slotFirstWait = 15 * time.Second
	slotMaxWait   = 2 * time.Minute
)

// acquire takes one slot of each of the plan's resources, in order,
// waiting for each while the resource is full. A cancel while it waits
// ends the cycle as cancelled; nothing was started.
func (c *cycle) acquire(ctx workflow.Context, plan activities.Plan) error {
	slots := slices.Clone(plan.Slots)
	activities.SlotOrder(slots)
	// The slots outlive a cancel of the cycle: they are held through its
	// cleanup, until it closes.
	sctx, _ := workflow.NewDisconnectedContext(ctx)
	holder := workflow.GetInfo(ctx).WorkflowExecution.ID
	// A plan that found free slots (Slot.Free) has them tried first.
	hinted := slices.ContainsFunc(slots, func(s activities.Slot) bool { return len(s.Free) > 0 }) &&
		c.changed(ctx, "slot-free-first")
	if !hinted {
		for i := range slots {
			slots[i].Free = nil
		}
	}
	if c.batched {
		// Usually every slot is free: all of them at once, in one
		// workflow task; from the first that is not, one at a time.
		taken, err := c.takeTogether(sctx, slots, holder)
		if err != nil {
			return err
		}
		slots = slots[taken:]
	}
	for _, s := range slots {
		wait, waited := slotFirstWait, false
		for {
			got, err := c.takeSlot(sctx, s, slotOrder(s), holder)
			if err != nil {
				return err
			}
			if got {
				break
			}
			if !waited {
				waited = true
				c.step(ctx, activities.StepWaitingForSlot)
				c.log(ctx).Info("waiting for a slot: max_concurrent cycles hold it", "kind", s.Kind, "name", s.Name, "limit", s.Limit)
			}
			if err := workflow.Sleep(ctx, wait); err != nil {
				return err
			}
			wait = min(2*wait, slotMaxWait)
		}
	}
	return nil
}

// takeSlot starts the first free slot of s as a child of the cycle, in
// order (slotOrder: those of s.Free first); false when every one is held.
func (c *cycle) takeSlot(ctx workflow.Context, s activities.Slot, order []int, holder string) (bool, error) {
	for _, k := range order {
		var exec workflow.Execution
		err := c.startSlot(ctx, s, k, holder).GetChildWorkflowExecution().Get(ctx, &exec)
		if err == nil {
			return true, nil
		}
		if !temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			return false, err
		}
	}
	return false, nil
}

// takeTogether starts the first slot to try of each of slots (in their
// order) at once, then, where that one was held, the resource's others one
// at a time. It returns how many of slots, from the first, it holds: at a
// resource that is full it gives back those it took after it (cancelled,
// and awaited), for a cycle never waits for a slot while it holds a later
// one.
func (c *cycle) takeTogether(ctx workflow.Context, slots []activities.Slot, holder string) (int, error) {
	type start struct {
		child  workflow.ChildWorkflowFuture
		cancel workflow.CancelFunc
	}
	starts := make([]start, len(slots))
	for i, s := range slots {
		cctx, cancel := workflow.WithCancel(ctx)
		starts[i] = start{c.startSlot(cctx, s, slotOrder(s)[0], holder), cancel}
	}
	full := -1 // the first resource with no free slot
	for i, st := range starts {
		err := st.child.GetChildWorkflowExecution().Get(ctx, nil)
		if full >= 0 {
			if err == nil {
				st.cancel()
				_ = st.child.Get(ctx, nil) // ends cancelled: the slot is free again
			}
			continue
		}
		if err == nil {
			continue
		}
		if !temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			return i, err
		}
		got, err := c.takeSlot(ctx, slots[i], slotOrder(slots[i])[1:], holder)
		if err != nil {
			return i, err
		}
		if !got {
			full = i
		}
	}
	if full < 0 {
		return len(slots), nil
	}
	return full, nil
}

// startSlot starts slot k of s as a child of the cycle.
func (c *cycle) startSlot(ctx workflow.Context, s activities.Slot, k int, holder string) workflow.ChildWorkflowFuture {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            SlotWorkflowID(s.Kind, s.Name, k),
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_TERMINATE,
		StaticSummary:         fmt.Sprintf("slot %d of %d of %s %s, held by %s", k, s.Limit, s.Kind, s.Name, holder),
	})
	return workflow.ExecuteChildWorkflow(cctx, SlotName, SlotInput{Kind: s.Kind, Name: s.Name, Index: k, Limit: s.Limit, Holder: holder})
}

// slotOrder is the order takeSlot tries the slots of s in: those of s.Free
// (within the limit, each once), then the others from 1 up.
func slotOrder(s activities.Slot) []int {
	n := max(s.Limit, 1)
	var out []int
	for _, k := range s.Free {
		if k >= 1 && k <= n && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	for k := 1; k <= n; k++ {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}
