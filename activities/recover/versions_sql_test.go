package recover

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/storage/local"
)

// The source is upgraded in the middle of a chain (SQL Server 2019 to
// 2022): its full and first log were written by 2019, its second log by
// 2022, and the chain record keeps each log's build. A 2019 target
// restores the full and the first log, never the second: the plan refuses
// it before anything is restored, naming the log and its version
// (InvalidConfig, the environment); and a RESTORE LOG that meets the
// version anyway (a plan from a record written before logs kept their
// build) is that refusal too, never CorruptBackup.
func TestRecoverRefusesALogOfANewerVersionThanTheTarget(t *testing.T) {
	v2019 := func(c *sqlsim.Config) { c.MajorVersion, c.ProductVersion = 15, "15.0.4385.2" }
	f := newFixture(t, sitetest.Options{SourceConfig: v2019, VerifyConfig: v2019})
	f.history(1)
	f.site.RestartSource(func(c *sqlsim.Config) { c.MajorVersion, c.ProductVersion = 16, "" })
	f.commit(3)
	if second := f.logAndCopy(); second.Number != 2 {
		t.Fatalf("the log after the upgrade is number %d, want 2", second.Number)
	}
	if got := f.logVersions(false); got != "bak01: [1:15.0.4385 2:16.0.4135]; bak02: [1:15.0.4385 2:16.0.4135]" {
		t.Fatalf("chain records keep %s, want each log's build", got)
	}

	in := Request{Database: "Sales", Instance: "sql01", ToInstance: sitetest.VerifyInstance, As: "Sales_upgraded", Latest: true}
	var p Plan
	err := f.run(New(nil).PlanRecover, PlanInput{Request: in}, &p)
	if errType(err) != activities.ErrInvalidConfig || !strings.Contains(err.Error(), "log 2 of chain") || !strings.Contains(err.Error(), "16.0.4135") {
		t.Fatalf("plan over a log of a newer version: %v, want InvalidConfig naming log 2 and 16.0.4135", err)
	}

	// Records of an earlier build, without the logs' versions: planned on
	// the full's, and the RESTORE LOG of log 2 meets the version.
	f.logVersions(true)
	f.must(New(nil).PlanRecover, PlanInput{Request: in}, &p)
	tg := Target{Database: p.Database, Instance: p.Instance, To: p.Target, Name: p.Name}
	var full StepOutput
	f.must(New(nil).RestoreFull, RestoreFullInput{Target: tg, Step: p.Restore.Full(), Moves: p.Moves, BufferCount: p.BufferCount,
		MaxTransferSize: p.MaxTransferSize, Intent: p.Intent}, &full)
	logsOf := p.Restore.Logs()
	if len(logsOf) != 2 {
		t.Fatalf("plan restores %d logs, want 2", len(logsOf))
	}
	f.must(New(nil).RestoreLog, RestoreLogInput{Target: tg, Step: logsOf[0], Index: 1, Count: 2, Copy: full.Copy}, nil)
	err = f.run(New(nil).RestoreLog, RestoreLogInput{Target: tg, Step: logsOf[1], Index: 2, Count: 2, Copy: full.Copy}, nil)
	if errType(err) != activities.ErrInvalidConfig || !strings.Contains(err.Error(), "SQL Server 2022") || !strings.Contains(err.Error(), "says nothing about the backup") {
		t.Fatalf("RESTORE LOG of a newer version: %v, want InvalidConfig naming the versions, not CorruptBackup", err)
	}
}

// logVersions says the build each chain record of Sales on bak01 and bak02
// keeps per log; forget rewrites the records without them, as an earlier
// build wrote them.
func (f *fixture) logVersions(forget bool) string {
	f.t.Helper()
	ctx := context.Background()
	keys, err := f.site.Config.ManifestKeyRing()
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, srv := range []string{"bak01", "bak02"} {
		st, err := local.Open(ctx, f.site.Dirs[srv])
		if err != nil {
			f.t.Fatal(err)
		}
		l, err := catalog.ListChains(ctx, catalog.StorageFS{Storage: st}, keys, catalog.Of("sql01", "Sales"))
		if err != nil || len(l.Broken) > 0 {
			f.t.Fatalf("chain records on %s: %v %v", srv, err, l.Broken)
		}
		var vs []string
		for _, r := range l.Records {
			for i := range r.Logs {
				vs = append(vs, fmt.Sprintf("%d:%s", r.Logs[i].Number, r.Logs[i].SoftwareVersion))
				r.Logs[i].SoftwareVersion = ""
			}
			if forget {
				if err := catalog.SaveChain(ctx, catalog.StorageFS{Storage: st}, keys, r); err != nil {
					f.t.Fatal(err)
				}
			}
		}
		out = append(out, fmt.Sprintf("%s: %v", srv, vs))
	}
	return strings.Join(out, "; ")
}
