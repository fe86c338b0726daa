package recover

import (
	"slices"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/sitetest"
)

// A step of a long restore sequence reads what the first step reads: the
// rows of msdb's restore history each RestoreLog reads to find what was
// restored already do not grow with the number of logs restored before
// it, so that a week of log backups a minute restores in time linear in
// their number.
func TestRestoreLogReadsTheSameAtEveryStep(t *testing.T) {
	const n = 12
	f := newFixture(t, sitetest.Options{})
	f.commit(10)
	f.verified()
	for range n {
		f.commit(1)
		f.logAndCopy()
	}
	var p Plan
	f.must(New(nil).PlanRecover, PlanInput{Request: Request{Database: "Sales", ToInstance: sitetest.VerifyInstance, As: "Sales_long", Latest: true}}, &p)
	logsOf := p.Restore.Logs()
	if len(logsOf) != n {
		t.Fatalf("plan: %d logs, want %d", len(logsOf), n)
	}
	tg := Target{Database: "Sales", Instance: "sql01", To: sitetest.VerifyInstance, Name: "Sales_long", AsGiven: true}
	var full StepOutput
	f.must(New(nil).RestoreFull, RestoreFullInput{Target: tg, Step: p.Restore.Full(), Moves: p.Moves, Intent: p.Intent}, &full)
	v := f.site.Verify
	var rowsPerStep, stmtsPerStep []int64
	for i, l := range logsOf {
		before := len(v.Statements())
		var o StepOutput
		f.must(New(nil).RestoreLog, RestoreLogInput{Target: tg, Step: l, Index: i + 1, Count: n, Copy: full.Copy}, &o)
		if o.Skipped {
			t.Fatalf("log %d: %+v, want applied", i+1, o)
		}
		// msdb's history; not the polls of the RESTORE while it runs,
		// whose number follows its time.
		var rows, stmts int64
		for _, s := range v.Statements()[before:] {
			if strings.Contains(strings.ToLower(s.SQL), "msdb.") {
				rows, stmts = rows+s.Rows, stmts+1
			}
		}
		rowsPerStep, stmtsPerStep = append(rowsPerStep, rows), append(stmtsPerStep, stmts)
	}
	t.Logf("msdb rows read per step %v, msdb queries per step %v", rowsPerStep, stmtsPerStep)
	if slices.Max(rowsPerStep) != rowsPerStep[0] || slices.Min(rowsPerStep) != rowsPerStep[0] {
		t.Fatalf("the rows of msdb a RestoreLog reads grow with the logs restored before it: %v (log 1 to %d)", rowsPerStep, n)
	}
	if slices.Max(stmtsPerStep) != stmtsPerStep[0] || slices.Min(stmtsPerStep) != stmtsPerStep[0] {
		t.Fatalf("the msdb queries a RestoreLog sends differ between steps: %v (log 1 to %d)", stmtsPerStep, n)
	}
	// Each log restored once, the sequence still complete.
	var fin FinishOutput
	f.must(New(nil).FinishRecover, FinishInput{Target: tg, Copy: full.Copy}, &fin)
	if fin.State != "ONLINE" || len(fin.LogsRestored) != n {
		t.Fatalf("finish %+v, want ONLINE with %d logs", fin, n)
	}
}
