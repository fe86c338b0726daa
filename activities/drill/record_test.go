package drill

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/storage/local"
)

// A drill refused at its plan (a copy of the drill's name it could not
// call its own) records its failure without a scratch: the record keeps
// the scratch of the earlier drill that left the copy, so the next drill
// can still recognise it. Before, the refused drill erased it, and every
// drill after it was refused ("no drill record names it").
func TestRecordDrillKeepsAnEarlierDrillsScratch(t *testing.T) {
	site := sitetest.New(t, sitetest.Options{Database: "Sales", NoSQL: true})
	acts := activities.New(zap.NewNop())
	acts.Cycle = activities.CycleDeps{Config: site.Config}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(New(acts))
	servers := []string{"bak01", "bak02"}
	now := time.Now().UTC()
	result := func(run, outcome string) catalog.DrillResult {
		return catalog.DrillResult{WorkflowID: "drill/sql01/Sales", RunID: run, Instance: "verify01", Database: "Sales_drill", Outcome: outcome,
			StartedAt: now, At: now}
	}
	scratch := &catalog.VerifyCopy{VerifyInstance: "verify01", VerifyDatabase: "Sales_drill", BackupSetGUID: "6AA34649-041A-4F00-9A7B-1D2E3F405162",
		InstanceTime: now, SentAt: now}
	record := func(in RecordInput) {
		t.Helper()
		in.Database, in.Servers = "Sales", servers
		if _, err := env.ExecuteActivity(New(nil).RecordDrill, in); err != nil {
			t.Fatal(err)
		}
	}
	// The first drill's copy was left (its drop failed).
	first := result("run-1", catalog.DrillFailed)
	first.DropError = "verify01 unreachable"
	record(RecordInput{Result: first, Scratch: scratch})
	// The next one was refused at its plan: no scratch of its own.
	refused := result("run-2", catalog.DrillFailed)
	refused.ErrorType = activities.ErrTargetDatabaseExists
	record(RecordInput{Result: refused})

	keys, err := site.Config.ManifestKeyRing()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		st, err := local.Open(context.Background(), site.Dirs[s])
		if err != nil {
			t.Fatal(err)
		}
		r, err := catalog.LoadDrill(context.Background(), catalog.StorageFS{Storage: st}, keys, "sql01", "Sales")
		st.Close()
		if err != nil || r == nil || len(r.Drills) != 2 || r.Scratch == nil || r.Scratch.BackupSetGUID != scratch.BackupSetGUID {
			t.Fatalf("drill record on %s: %+v, %v; want both drills and the first one's scratch", s, r, err)
		}
	}
}
