package client

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/workflows"
)

func TestCycleWorkflowIDIsReadableAndSafe(t *testing.T) {
	at := time.Date(2026, 11, 29, 20, 1, 2, 345e6, time.FixedZone("CET", 3600))
	if got := CycleWorkflowID("Sales", at); got != "backup-Sales-20261129T190102.345Z" {
		t.Errorf("id = %q", got)
	}
	if got := CycleWorkflowID("Sales]; DROP DATABASE x--", at); got != "backup-Sales_DROP_DATABASE_x---20261129T190102.345Z" {
		t.Errorf("hostile name: id = %q", got)
	}
}

func TestStartCycleNeedsADatabase(t *testing.T) {
	c := &Client{namespace: "default", taskQueue: workflows.TaskQueue}
	_, err := c.StartCycle(context.Background(), workflows.CycleInput{})
	if err == nil || !strings.Contains(err.Error(), "no database given") {
		t.Errorf("err = %v", err)
	}
}
