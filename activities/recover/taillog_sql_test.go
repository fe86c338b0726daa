package recover

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/logs"
	"github.com/backupcycle/backupcycle/internal/sitetest"
)

// A recover over the source database itself to the latest point: refused
// without --tail-log (what was committed after the newest log backup would
// be written over); with it, the tail is backed up WITH NORECOVERY as the
// chain's next log (hashed, on the chain's server), the source is left
// RESTORING, the plan made again ends with the tail, and the database
// restored over the source holds every row committed before the tail.
func TestRecoverOverTheSourceWithItsTailLog(t *testing.T) {
	f := newFixture(t, sitetest.Options{})
	hist := f.history(2)
	for range 4 {
		f.commit(1) // after the newest log backup: only the tail holds them
		time.Sleep(20 * time.Millisecond)
	}
	all := rows(t, f.site.Source, "Sales", time.Time{})
	in := Request{Database: "Sales", Instance: "sql01", ToInstance: "sql01", As: "Sales", Replace: true, Latest: true}
	var p Plan
	err := f.run(New(nil).PlanRecover, PlanInput{Request: in}, &p)
	if errType(err) != activities.ErrTailLogNeeded || !strings.Contains(err.Error(), "--tail-log") {
		t.Fatalf("over the source to the latest without --tail-log: %v, want %s", err, activities.ErrTailLogNeeded)
	}
	if st := sourceState(t, f); st != "ONLINE" {
		t.Fatalf("the refused recover touched the source: %s", st)
	}
	// Elsewhere, or to an earlier point, no tail is asked for.
	f.must(New(nil).PlanRecover, PlanInput{Request: Request{Database: "Sales", ToInstance: sitetest.VerifyInstance, As: "Sales_dr", Latest: true}}, &p)

	in.TailLog = true
	f.must(New(nil).PlanRecover, PlanInput{Request: in}, &p)
	if !p.OverSource || !slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, "left RESTORING") }) {
		t.Fatalf("plan before the tail: over source %v, warnings %q: want it to say the source is left RESTORING", p.OverSource, p.Warnings)
	}
	if st := sourceState(t, f); st != "ONLINE" {
		t.Fatalf("planning touched the source: %s", st)
	}
	var tail logs.BackupLogOutput
	f.must(logs.New(nil).BackupLog, logs.BackupLogInput{Database: "Sales", Instance: "sql01", Tail: true}, &tail)
	if tail.Number != hist[1].Number+1 || tail.Chain != hist[1].Chain || tail.FirstLSN != hist[1].LastLSN || tail.Files != 1 || tail.Bytes == 0 {
		t.Fatalf("tail %+v does not continue the chain after %+v", tail, hist[1])
	}
	if st := sourceState(t, f); st != "RESTORING" {
		t.Fatalf("after the tail-log backup the source is %s, want RESTORING", st)
	}
	p, fin, outs := f.recoverFrom(PlanInput{Request: in, Tail: &Tail{Chain: tail.Chain, Number: tail.Number, Server: tail.Server, Finish: tail.Finish}})
	lg := p.Restore.Logs()
	if last := lg[len(lg)-1]; last.Number != tail.Number || last.Files[0].SHA256 == "" || p.Restore.RecoveryPointFrom != "the tail-log backup's finish" {
		t.Fatalf("the plan ends with %+v (%s), want the tail, log %d, hashed", last, p.Restore.RecoveryPointFrom, tail.Number)
	}
	if fin.State != "ONLINE" || len(outs)-1 != len(lg) {
		t.Fatalf("finish %+v after %d logs, want ONLINE after %d", fin, len(outs)-1, len(lg))
	}
	got := rows(t, f.site.Source, "Sales", time.Time{})
	if !slices.Equal(got, all) {
		t.Fatalf("restored over the source: %d rows, %d were committed before the tail", len(got), len(all))
	}
	t.Logf("tail: log %d of chain %d, %d bytes; %d rows back in Sales", tail.Number, tail.Chain, tail.Bytes, len(got))
}

func sourceState(t *testing.T, f *fixture) string {
	t.Helper()
	var st string
	if err := master(t, f.site.Source).QueryRow("SELECT state_desc FROM sys.databases WHERE name = N'Sales'").Scan(&st); err != nil {
		t.Fatal(err)
	}
	return st
}
