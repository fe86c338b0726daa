package main

import (
	"context"
	"testing"

	"github.com/backupcycle/backupcycle/workflows"
)

// One log chain per database, whoever starts it: a second start returns
// the running chain (same run), never a second one nor a replaced one.
func TestEnsureLogChainIsIdempotent(t *testing.T) {
	c := testClient(t, "logchain-ensure")
	ctx := context.Background()
	first, err := c.EnsureLogChain(ctx, "sql01", "Sales")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.SDK().TerminateWorkflow(context.Background(), first.GetID(), "", "test done") })
	second, err := c.EnsureLogChain(ctx, "sql01", "Sales")
	if err != nil {
		t.Fatal(err)
	}
	if first.GetID() != workflows.LogChainWorkflowID("sql01", "Sales") || second.GetRunID() != first.GetRunID() {
		t.Fatalf("starts gave %s/%s and %s/%s: want one run under %s", first.GetID(), first.GetRunID(), second.GetID(),
			second.GetRunID(), workflows.LogChainWorkflowID("sql01", "Sales"))
	}
}
