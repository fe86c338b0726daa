package client

import (
	"context"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/workflows"
)

func TestCycleWorkflowIDIsOnePerDatabase(t *testing.T) {
	cases := []struct{ instance, db, want string }{
		{"sql01", "Sales", "backup-sql01-Sales"},
		{"", "Sales", "backup-Sales"},
		{"sql01", "Sales.v2_x", "backup-sql01-Sales.v2_x"},
		// Changed characters add a hash of the real names, so the two do not share an id.
		{"sql01", "Sales]; DROP DATABASE x--", "backup-sql01-Sales_DROP_DATABASE_x_-"},
		{"sql01", "Sales_DROP_DATABASE_x_", "backup-sql01-Sales_DROP_DATABASE_x_"},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		got := CycleWorkflowID(tc.instance, tc.db)
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("CycleWorkflowID(%q, %q) = %q, want prefix %q", tc.instance, tc.db, got, tc.want)
		}
		if seen[got] {
			t.Errorf("CycleWorkflowID(%q, %q) = %q is not unique", tc.instance, tc.db, got)
		}
		seen[got] = true
		if again := CycleWorkflowID(tc.instance, tc.db); again != got {
			t.Errorf("not stable: %q then %q", got, again)
		}
	}
	// A dash inside a name is ambiguous with the separator: hashed too.
	if a, b := CycleWorkflowID("a-b", "c"), CycleWorkflowID("a", "b-c"); a == b {
		t.Errorf("instance a-b/db c and instance a/db b-c share id %q", a)
	}
}

func TestStartCycleNeedsADatabase(t *testing.T) {
	c := &Client{namespace: "default", taskQueue: workflows.TaskQueue}
	_, err := c.StartCycle(context.Background(), workflows.CycleInput{})
	if err == nil || !strings.Contains(err.Error(), "no database given") {
		t.Errorf("err = %v", err)
	}
}

func TestStatusQueryQuotesTheDatabase(t *testing.T) {
	if got := StatusQuery(StatusFilter{}); got != "WorkflowType = 'BackupCycle'" {
		t.Errorf("query = %q", got)
	}
	got := StatusQuery(StatusFilter{Database: `Sal'es`})
	if want := `WorkflowType = 'BackupCycle' AND BackupDatabase = 'Sal\'es'`; got != want {
		t.Errorf("query = %q, want %q", got, want)
	}
	// A backslash is filtered client-side (see StatusQuery).
	if got := StatusQuery(StatusFilter{Database: `a\b`}); got != "WorkflowType = 'BackupCycle'" {
		t.Errorf("query = %q", got)
	}
}

func TestScheduleSpecValidation(t *testing.T) {
	for _, tc := range []struct {
		spec ScheduleSpec
		want string
	}{
		{ScheduleSpec{Cron: "0 1 * *"}, `cron "0 1 * *" has 4 fields`},
		{ScheduleSpec{Jitter: -1}, "jitter -1ns is negative"},
		{ScheduleSpec{CatchupWindow: 1}, "below Temporal's minimum of 10s"},
		{ScheduleSpec{TimeZone: "Mars/Olympus"}, `time zone "Mars/Olympus" is unknown`},
	} {
		err := tc.spec.withDefaults().validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.spec, err, tc.want)
		}
	}
	if err := (ScheduleSpec{TimeZone: "Europe/Berlin", Jitter: 30 * 60e9}).withDefaults().validate(); err != nil {
		t.Errorf("valid spec: %v", err)
	}
}
