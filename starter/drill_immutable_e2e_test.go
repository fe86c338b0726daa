package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/drill"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/workflows"
)

// A drill from the immutable copy, end to end on the dev site with its
// object store: the verified set copied to vault01 by the cycle is read
// there (its manifest authenticated), staged on bak02 under staging/ with
// every SHA-256 checked, restored as Sales_drill on sqlverify and checked;
// the staged files are removed and the drill record says the immutable
// copy was its source. Then a stripe changed on the store (a new version
// over the locked one) fails the next drill with HashMismatch naming the
// object, the staged files are removed again, and the set stays verified.
func TestDrillFromTheImmutableCopy(t *testing.T) {
	const tq = "tq-e2e-drill-immutable"
	site, _ := startSite(t, devenv.Options{ObjectStore: true})
	withDrill(t, site, "drill: {every: 24h, from: immutable}")
	c := sdk(t)
	acts := activities.New(zap.NewNop())
	acts.Cycle = activities.CycleDeps{Config: site.Config, Signal: c.SignalWorkflow}
	env := verifiedSiteWorker(t, c, tq, site, acts, drill.New(acts))
	env.RegisterActivity(drill.New(acts))

	db := &site.Config.Databases[0]
	staging := db.StagingServer()
	if srv, ok := site.Config.BackupServer(staging); ok {
		t.Logf("staging on %s at %s", staging, srv.Location)
	}
	dir := config.StagingDir + "/" + tsql.NamesOf(devenv.SourceInstance, devenv.Database).Owner()
	stagedFiles := func() []string {
		var names []string
		_ = filepath.WalkDir(filepath.Join(site.BackupDirs[staging], config.StagingDir), func(p string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				names = append(names, p)
			}
			return nil
		})
		return names
	}
	id := workflows.DrillWorkflowID(devenv.SourceInstance, devenv.Database)
	code, out, errs := on(t, tq, "drill", "--config", site.ConfigFile, "--database", devenv.Database, "--wait")
	t.Logf("starter drill --wait:\n%s%s", out, errs)
	if code != exitOK {
		t.Fatalf("drill --wait: exit %d", code)
	}
	for _, re := range []string{
		`(?m)^DRILL PASSED Sales: recovered as Sales_drill on sqlverify to \S+ \(full's start; workflow drill/sql01/Sales, recover recover/sqlverify/Sales_drill\)$`,
		`(?m)^  restored: set 1 to the point the latest point the backups reach, read from ` + staging + `$`,
		`(?m)^  immutable: [0-9]+ object\(s\) of set 1 from vault01 \(s3://\S+\), staged on ` + staging + ` in ` + regexp.QuoteMeta(dir) + `, removed after$`,
		`(?m)^  copy:     Sales_drill dropped$`,
		`(?m)^  recorded: on bak01, bak02$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("drill --wait output lacks %s", re)
		}
	}
	keys, err := site.Config.ManifestKeyRing()
	if err != nil {
		t.Fatal(err)
	}
	var st workflows.DrillStatus
	if err := c.GetWorkflow(context.Background(), id, "").Get(context.Background(), &st); err != nil {
		t.Fatal(err)
	}
	res := st.Result
	im := res.Immutable
	set1 := func(s string) *catalog.Manifest {
		st, err := local.Open(context.Background(), site.BackupDirs[s])
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		m, err := catalog.Load(context.Background(), catalog.StorageFS{Storage: st}, keys, activities.SetsOf(db), 1)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// Every stripe of set 1, and its manifest last.
	want := []string{}
	for _, s := range set1("bak01").Stripes {
		want = append(want, s.Name)
	}
	want = append(want, set1("bak01").FileName())
	if res.Outcome != catalog.DrillPassed || res.From != config.DrillFromImmutable || res.Sequence != 1 || res.LastLog != 0 || im == nil ||
		im.Store != devenv.ObjectStore || im.Staging != staging || im.Dir != dir || !im.Removed || !slices.Equal(im.Objects, want) {
		t.Errorf("drill result: %+v, immutable %+v", res, im)
	}
	if left := stagedFiles(); len(left) != 0 {
		t.Errorf("staged files left after the drill: %v", left)
	}
	record := func(server string) *catalog.DrillRecord {
		st, err := local.Open(context.Background(), site.BackupDirs[server])
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		r, err := catalog.LoadDrill(context.Background(), catalog.StorageFS{Storage: st}, keys, devenv.SourceInstance, devenv.Database)
		if err != nil || r == nil || !r.Trusted() {
			t.Fatalf("drill record on %s: %+v %v", server, r, err)
		}
		return r
	}
	for _, s := range devenv.BackupServers {
		if r := record(s); r.Last().Immutable == nil || r.Last().Immutable.Store != devenv.ObjectStore || r.Last().RunID != res.RunID {
			t.Errorf("drill record on %s: %+v", s, r.Last())
		}
	}

	// Staging again finds every file staged with its SHA-256 and copies
	// nothing; unstaging removes them all.
	var p drill.Plan
	v, err := env.ExecuteActivity(drill.New(acts).PrepareDrill, drill.Request{Database: devenv.Database, From: config.DrillFromImmutable})
	if err == nil {
		err = v.Get(&p)
	}
	if err != nil || p.Immutable == nil || !slices.Equal(p.Immutable.Objects(), want) {
		t.Fatalf("PrepareDrill: %+v, %v", p, err)
	}
	stage := func() (o drill.StageOutput) {
		v, err := env.ExecuteActivity(drill.New(acts).StageDrill, p.StageInput())
		if err == nil {
			err = v.Get(&o)
		}
		if err != nil {
			t.Fatalf("StageDrill: %v", err)
		}
		return o
	}
	if first := stage(); first.Objects != len(want) || first.Sent != first.Bytes || first.Already != 0 {
		t.Errorf("first staging: %+v", first)
	}
	if again := stage(); again.Objects != len(want) || again.Sent != 0 || again.Already != len(want) {
		t.Errorf("staging again: %+v, want every file found staged and nothing sent", again)
	}
	if n := len(stagedFiles()); n != len(want) {
		t.Errorf("%d files staged, want %d", n, len(want))
	}
	var un drill.UnstageOutput
	v, err = env.ExecuteActivity(drill.New(acts).UnstageDrill, p.StageInput())
	if err == nil {
		err = v.Get(&un)
	}
	if err != nil || un.Removed != len(want) || len(stagedFiles()) != 0 {
		t.Errorf("UnstageDrill: %+v, %v; left %v", un, err, stagedFiles())
	}

	// status shows when the immutable copy was last proven restorable.
	judge := func() (int, status.Database, string) {
		code, out, errs := on(t, tq, "status", "--config", site.ConfigFile, "--from-manifests", "--json")
		var r status.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Databases) != 1 {
			t.Fatalf("status --from-manifests: exit %d %v %s\n%s", code, err, errs, out)
		}
		_, text, _ := on(t, tq, "status", "--config", site.ConfigFile, "--from-manifests")
		return code, r.Databases[0], text
	}
	code, d, text := judge()
	t.Logf("starter status --from-manifests:\n%s", text)
	if p := d.ImmutableProven; code != exitOK || d.OutOfObjectives || p == nil || p.RunID != res.RunID || p.Store != devenv.ObjectStore || p.Sequence != 1 ||
		!strings.Contains(text, "; immutable copy on vault01 proven restorable ") {
		t.Errorf("status after the drill from the immutable copy: exit %d, %+v, proven %+v\n%s", code, d, p, text)
	}

	// The evidence ledger names the immutable source of the drill, and
	// the report says so on its line.
	today := time.Now().UTC().Format(time.DateOnly)
	code, out, errs = on(t, tq, "evidence", "report", "--config", site.ConfigFile, "--from", today, "--to", today)
	if want := fmt.Sprintf(" from the immutable copy (set 1 on %s, %s): recovered in ", devenv.ObjectStore, im.Location); code != exitOK ||
		!strings.Contains(out, want) {
		t.Errorf("evidence report lacks %q: exit %d\n%s%s", want, code, out, errs)
	}

	// A stripe of set 1 changed on the object store: a new version over
	// the locked one, which reads now return.
	stripe := im.Objects[0]
	changeObject(t, site, stripe)
	code, out, errs = on(t, tq, "drill", "--config", site.ConfigFile, "--database", devenv.Database, "--wait")
	t.Logf("starter drill --wait after an object changed:\n%s%s", out, errs)
	if code == exitOK {
		t.Errorf("drill after an object changed on the store: exit %d, want a failure", code)
	}
	failed := record("bak01").Last()
	if failed.Outcome != catalog.DrillFailed || failed.ErrorType != activities.ErrHashMismatch || !strings.Contains(failed.Error, "object "+stripe) ||
		failed.Immutable == nil || !failed.Immutable.Removed || failed.Sequence != 0 {
		t.Errorf("failed drill's record: %+v", failed)
	}
	if left := stagedFiles(); len(left) != 0 {
		t.Errorf("staged files left after the failed drill: %v", left)
	}
	code, d, text = judge()
	if p := d.ImmutableProven; code == exitOK || !d.OutOfObjectives || p == nil || p.RunID != res.RunID ||
		!slices.ContainsFunc(d.Reasons, func(r string) bool { return strings.Contains(r, "the last recovery drill failed (HashMismatch)") }) {
		t.Errorf("status after the failed drill: exit %d, %+v\n%s", code, d, text)
	}
	for _, s := range devenv.BackupServers {
		if m := set1(s); m.State != catalog.StateVerified {
			t.Errorf("set 1 on %s after the failed drill: %s; want it verified still", s, m.State)
		}
	}
}
