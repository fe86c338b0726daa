package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/workflows"
)

// Names that would forge output: a line break followed by what reads as
// another database's line, and U+202E RIGHT-TO-LEFT OVERRIDE, which makes
// a terminal show the rest of the line reversed.
var forgingNames = []string{"Sales\nOK   sql01 / Payroll: verified seq 9", "Sa\u202eles", "H\rR", "Ops\u2028OK"}

// unforged checks that out has exactly lines lines and holds none of the
// characters that break or reorder a line.
func unforged(t *testing.T, what, out string, lines int) {
	t.Helper()
	if n := strings.Count(out, "\n"); n != lines {
		t.Errorf("%s: %d lines, want %d:\n%s", what, n, lines, out)
	}
	for _, r := range []rune{'\r', '\u202e', '\u2028'} {
		if strings.ContainsRune(out, r) {
			t.Errorf("%s prints U+%04X raw:\n%q", what, r, out)
		}
	}
}

func TestStatusFromManifestsEscapesNames(t *testing.T) {
	var dbs strings.Builder
	for _, n := range forgingNames {
		dbs.WriteString("  - {name: " + strconv.Quote(n) + ", instance: sql01, backup_servers: [bak01, bak02]}\n")
	}
	file, bak01, _ := provenSite(t, dbs.String())
	for i, n := range forgingNames {
		provenSet(t, n, int64(10+i), 2*time.Hour, bak01)
	}
	code, out, errs := runStarter(t, "status", "--config", file, "--from-manifests")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	unforged(t, "status --from-manifests", out, len(forgingNames))
	if strings.Contains(out, "Payroll: verified seq 9\n") && strings.Contains(out, "\nOK   sql01 / Payroll") {
		t.Errorf("a database name printed a line of its own:\n%s", out)
	}
}

func TestFleetOutcomesEscapeNames(t *testing.T) {
	var outs []workflows.DatabaseOutcome
	for _, n := range forgingNames {
		outs = append(outs, workflows.DatabaseOutcome{Instance: "sql01", Database: n, Outcome: workflows.OutcomeFailed,
			Type: "CheckDBFailed", Reason: "CHECKDB of " + n + " found errors", Duration: time.Minute})
	}
	var b bytes.Buffer
	writeOutcomes(&b, outs)
	unforged(t, "fleet --wait", b.String(), len(forgingNames))
}
