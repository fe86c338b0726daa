package chaos

import (
	"github.com/backupcycle/backupcycle/internal/tsql"

	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
)

// I12 takes the stable error types from package activities' source: every
// Err... constant, wherever in the package it is declared.
func TestErrorTypesAreActivities(t *testing.T) {
	got := errorTypes()
	for _, want := range []string{activities.ErrRecoveryPointUnreachable, activities.ErrHashMismatch, activities.ErrSQLHostUnreachable,
		activities.ErrStatementLeftRunning, activities.ErrTargetDatabaseExists} {
		if !slices.Contains(got, want) {
			t.Errorf("error types %v lack %s", got, want)
		}
	}
}

// A recover that failed names why with a stable type, in whatever
// wrapping Temporal hands it back; a timeout or a type of no one's is a
// violation, a recover the harness stopped is not judged.
func TestI12JudgesFailures(t *testing.T) {
	c := &Checker{}
	named := fmt.Errorf("workflow execution error: %w", temporal.NewNonRetryableApplicationError("no restore reaches it", activities.ErrRecoveryPointUnreachable, nil))
	if f, n := c.judgeFailure("recover a", named); len(f) != 0 || len(n) != 1 || !strings.Contains(n[0], "no restore reaches it") {
		t.Errorf("RecoveryPointUnreachable: %v %v, want no finding, a note of why", f, n)
	}
	for name, err := range map[string]error{
		"a timeout":     temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE, nil),
		"no one's type": temporal.NewApplicationError("something", "Whatever"),
		"a plain error": fmt.Errorf("it broke"),
	} {
		if f, _ := c.judgeFailure("recover b", err); len(f) != 1 {
			t.Errorf("%s: %v, want one finding", name, f)
		}
	}
	if f, n := c.judgeFailure("recover c", temporal.NewCanceledError()); len(f) != 0 || len(n) != 1 {
		t.Errorf("cancelled: %v %v, want skipped", f, n)
	}
	if c.recs.failed != 4 || c.recs.skip["cancelled"] != 1 {
		t.Errorf("counted %+v", c.recs)
	}
}

// A drill's record says its point as the Recover was asked it: the latest,
// or an instant.
func TestDrillClaimReadsTheRecordsPoint(t *testing.T) {
	at := time.Date(2026, 3, 1, 2, 15, 0, 123e6, time.UTC)
	for _, tc := range []struct {
		point  string
		latest bool
		asked  time.Time
	}{
		{"the latest point the backups reach", true, time.Time{}},
		{at.Format(time.RFC3339Nano), false, at},
	} {
		cl, err := drillClaim("drill", &catalog.DrillResult{Point: tc.point, RecoveryPoint: at, Sequence: 3, Chain: 1, FirstLog: 2, LastLog: 5})
		if err != nil || cl.latest != tc.latest || !cl.asked.Equal(tc.asked) || cl.seq != 3 || cl.first != 2 || cl.last != 5 {
			t.Errorf("%q: %+v, %v", tc.point, cl, err)
		}
	}
	if _, err := drillClaim("drill", &catalog.DrillResult{Point: "yesterday"}); err == nil {
		t.Error("a point neither the latest nor an instant: no error")
	}
}

// One run in eight is a recovery entry of LogTarget; the draws of the
// cycles before it are those of builds without them, so a cycle run keeps
// its plan.
func TestRecoveryEntriesAreDrawnOneInEight(t *testing.T) {
	n := 0
	for i := range 4000 {
		p := Draw(7, i, "")
		if !p.Recovers() {
			continue
		}
		n++
		if p.Target != LogTarget || p.Entry != p.Recover.Entry || p.Fault != FaultNone && !isRecoverFault(p.Fault) {
			t.Fatalf("run %d: %s", i, p)
		}
	}
	if n < 400 || n > 600 {
		t.Errorf("%d recovery entries in 4000 runs, want about 500", n)
	}
	if p := Draw(7, 3, FaultServerGone); !p.Recovers() || p.Fault != FaultServerGone {
		t.Errorf("a forced recovery fault: %s", p)
	}
	for i := range 50 {
		if p := Draw(7, i, FaultWorkerKill); p.Recovers() {
			t.Fatalf("run %d with a forced cycle fault is a recovery entry: %s", i, p)
		}
	}
}

// TestCycleSequenceIsTheCyclesOwn: a backup cycle's sequence statements on
// the source are told apart from what a recovery entry must never send.
func TestCycleSequenceIsTheCyclesOwn(t *testing.T) {
	setup, err := tsql.SequenceSetup("DBA")
	if err != nil {
		t.Fatal(err)
	}
	next, err := tsql.SequenceNext("DBA")
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range append(setup[1:], next) {
		if !cycleSequence(sql) {
			t.Errorf("cycleSequence(%q) = false, want true", sql)
		}
	}
	for _, sql := range []string{"UPDATE [DBA].[dbo].[CommitLog] SET n = 1", "RESTORE DATABASE [DBA] FROM DISK = N'x'", "DROP DATABASE [DBA]"} {
		if cycleSequence(sql) {
			t.Errorf("cycleSequence(%q) = true, want false", sql)
		}
	}
}

// The last log's rows are read on one clock only when the source ran on
// one from the start of the step before it to the end of it, as the
// harness set its zones: equal offsets recorded for the two steps do not
// say so (a restart into another zone and back, or an offset recorded
// wrong). Seed 20261220 runs 122..125: log 4 taken on UTC, the source
// restarted in Asia/Kolkata, then in Europe/Berlin, log 5 taken there.
func TestSourceClockIsTheHarnessZonesOverTheLastLog(t *testing.T) {
	day := func(hms string) time.Time {
		v, err := time.Parse("2006-01-02 15:04:05.000", "2026-12-02 "+hms)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	zoned := func(zone string) Estate {
		e := baseEstate
		e.Zone[estateIndex(LogTarget.Instance)] = zone
		return e
	}
	run := func(c *Checker, applying, from, zone string) {
		c.EstateApplying(day(applying))
		c.EstateFrom(day(from), zoned(zone))
	}
	c := NewChecker(nil)
	run(c, "16:56:48.000", "16:56:50.000", "UTC")
	run(c, "16:57:37.000", "16:57:40.000", "Asia/Kolkata")
	run(c, "16:57:58.000", "16:58:00.000", "Europe/Berlin")
	run(c, "16:58:22.000", "16:58:25.000", "Europe/Berlin")
	// Log 4 started on UTC's clock, log 5 ended on Berlin's.
	if off, ok := c.sourceClock(day("16:57:15.000"), day("17:58:31.533")); ok {
		t.Fatalf("UTC, then Kolkata, then Berlin over log 5: one clock (%+d min)", off)
	}
	// Both on Berlin's, after the restart.
	if off, ok := c.sourceClock(day("17:58:05.000"), day("17:58:31.533")); !ok || off != 60 {
		t.Fatalf("Berlin throughout: %+d min, %v; want +60", off, ok)
	}
	// Berlin, Kolkata and Berlin again: equal offsets at both ends.
	back := NewChecker(nil)
	run(back, "16:57:58.000", "16:58:00.000", "Europe/Berlin")
	run(back, "16:58:10.000", "16:58:12.000", "Asia/Kolkata")
	run(back, "16:58:22.000", "16:58:25.000", "Europe/Berlin")
	if off, ok := back.sourceClock(day("17:58:05.000"), day("17:58:31.533")); ok {
		t.Fatalf("Berlin, Kolkata, Berlin over log 5: one clock (%+d min)", off)
	}
	// A wall clock no zone of the source read then names no instant.
	if off, ok := c.sourceClock(day("03:00:00.000"), day("17:58:31.533")); ok {
		t.Fatalf("a start no clock of the source read: one clock (%+d min)", off)
	}
}
