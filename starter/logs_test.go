package main

import (
	"context"
	"strings"
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

// `starter logs start` twice: one run, the second start names it again.
func TestLogsStartIsIdempotent(t *testing.T) {
	id := workflows.LogChainWorkflowID("sql01", "Sales")
	code, first, errs := on(t, "tq-logs-start", "logs", "start", "--instance", "sql01", "--database", "Sales")
	if code != exitOK || !strings.HasPrefix(first, "log chain "+id+", run ") {
		t.Fatalf("first start: exit %d, out %q, err %q", code, first, errs)
	}
	t.Cleanup(func() { terminate(t, id) })
	code, second, errs := on(t, "tq-logs-start", "logs", "start", "--instance", "sql01", "--database", "Sales")
	if code != exitOK || second != first {
		t.Fatalf("second start: exit %d, out %q (first %q), err %q", code, second, first, errs)
	}
	if code, _, errs := on(t, "tq-logs-start", "logs"); code == exitOK || !strings.Contains(errs, "--database") {
		t.Fatalf("logs without --database: exit %d, err %q", code, errs)
	}
}
