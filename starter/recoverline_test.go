package main

import (
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/workflows"
)

// A recover waiting for a backup server says so, and for which, on its
// progress line.
func TestRecoverLineSaysWhatItWaitsFor(t *testing.T) {
	w := "waits for the backup server, tried again every 10s: backup server bak01: connection refused"
	line := recoverLine(workflows.RecoverStatus{Step: "restore-full", Sequence: 7, Waiting: w})
	if !strings.HasPrefix(line, "  step restore-full (set 7)") || !strings.HasSuffix(line, "  "+w) {
		t.Errorf("line %q, want the step and what it waits for", line)
	}
	if line := recoverLine(workflows.RecoverStatus{Step: "restore-full", Sequence: 7}); strings.Contains(line, "waits") {
		t.Errorf("line %q of a step that waits for nothing", line)
	}
}
