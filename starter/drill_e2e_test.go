package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/drill"
	"github.com/backupcycle/backupcycle/activities/logs"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/evidence"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/workflows"
)

// rowsDrill is the product's drill activities, the recovered copy's
// dbo.CommitLog read before the workflow drops it.
type rowsDrill struct {
	*drill.Activities
	read func(copy string) []int64
	mu   sync.Mutex
	rows []int64
}

func (r *rowsDrill) CheckDrill(ctx context.Context, in drill.CheckInput) (drill.CheckOutput, error) {
	out, err := r.Activities.CheckDrill(ctx, in)
	if err == nil {
		rows := r.read(in.Name)
		r.mu.Lock()
		r.rows = rows
		r.mu.Unlock()
	}
	return out, err
}

// A drill of Sales, end to end: the demo's site with log backups (a
// verified full, five log backups copied to bak02), drill: in the
// configuration, the real workflows and activities on the embedded
// Temporal server. The Drill's Recover child restores Sales as Sales_drill
// on sqlverify to a point between two log backups; the copy holds exactly
// the rows the source committed at or before it; the copy is dropped; the
// drill record on both backup servers says what happened; `status
// --from-manifests` judges the database by it, and by rto.
func TestDrillOfSalesEndToEnd(t *testing.T) {
	const tq = "tq-e2e-drill"
	site, state := startSite(t, devenv.Options{LogBackups: true})
	withDrill(t, site, "drill: {every: 24h}\n    rto: 1h")

	pass, err := os.ReadFile(filepath.Join(state, "secrets", "sa.password"))
	if err != nil {
		t.Fatal(err)
	}
	open := func(in *sqlsim.Instance) *sql.DB {
		c, err := sql.Open("sqlserver", in.DSN(devenv.AdminLogin, strings.TrimSpace(string(pass)), "master"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	count := func(in *sqlsim.Instance, q string) (n int) {
		c := open(in)
		defer c.Close()
		if err := c.QueryRow(q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	rows := func(in *sqlsim.Instance, db string, upTo time.Time) []int64 {
		c := open(in)
		defer c.Close()
		r, err := c.Query("SELECT id, committed_at FROM [" + db + "].dbo.CommitLog")
		if err != nil {
			t.Error(err)
			return nil
		}
		defer r.Close()
		var ids []int64
		for r.Next() {
			var id int64
			var at time.Time
			if err := r.Scan(&id, &at); err != nil {
				t.Error(err)
				return nil
			}
			if upTo.IsZero() || !at.After(upTo) {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		return ids
	}

	c := sdk(t)
	acts := activities.New(zap.NewNop())
	acts.Cycle = activities.CycleDeps{Config: site.Config, Signal: c.SignalWorkflow}
	checked := &rowsDrill{Activities: drill.New(acts), read: func(name string) []int64 { return rows(site.Verify, name, time.Time{}) }}
	env := verifiedSiteWorker(t, c, tq, site, acts, checked)
	var taken []logs.BackupLogOutput
	commit := func(n int) {
		for range n {
			if err := site.Source.CommitNow(devenv.Database); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	commit(5)
	for range 5 {
		commit(4)
		v, err := env.ExecuteActivity(logs.New(nil).BackupLog, logs.BackupLogInput{Database: devenv.Database, Instance: devenv.SourceInstance})
		var out logs.BackupLogOutput
		if err == nil {
			err = v.Get(&out)
		}
		if err != nil || out.Number == 0 {
			t.Fatalf("BackupLog: %+v, %v", out, err)
		}
		if _, err := env.ExecuteActivity(logs.New(nil).CopyLogs, logs.CopyLogsInput{Database: devenv.Database, Instance: devenv.SourceInstance,
			Chain: out.Chain}); err != nil {
			t.Fatalf("CopyLogs: %v", err)
		}
		taken = append(taken, out)
	}
	point := taken[2].Finish.Add(taken[3].Start.Sub(taken[2].Finish) / 2).Truncate(time.Millisecond)

	began := time.Now()
	id := workflows.DrillWorkflowID(devenv.SourceInstance, devenv.Database)
	code, out, errs := on(t, tq, "drill", "--config", site.ConfigFile, "--database", devenv.Database, "--as-of", point.Format(time.RFC3339Nano), "--wait")
	t.Logf("starter drill --wait:\n%s%s", out, errs)
	if code != exitOK {
		t.Fatalf("drill --wait: exit %d", code)
	}
	for _, re := range []string{
		`(?m)^DRILL PASSED Sales: recovered as Sales_drill on sqlverify to ` + regexp.QuoteMeta(point.UTC().Format(time.RFC3339Nano)) +
			` \(stopat; workflow drill/sql01/Sales, recover recover/sqlverify/Sales_drill\)$`,
		`(?m)^  rto:      time to recover \S+, within the rto of 1h$`,
		`(?m)^  restored: set 1 and 4 log backup\(s\) of chain 1 \(logs 1-4\) to the point \S+, read from bak0[12](, bak0[12])?$`,
		`(?m)^  checks:   sanity checks orders-present, order-lines-present, regions-complete, activity-fresh hold; CHECKDB not run \(drill.checkdb\)$`,
		// Predicted at its start (no drill before it: a second a log
		// assumed), against what it measured.
		`(?m)^  predicted: full \S+, measured \S+, error [-+]\S+ \(x[0-9.]+\); logs 4s, measured \S+, error -\S+ \(x0\.[0-9]+\); ` +
			`restore \S+, measured \S+, error [-+]\S+ \(x[0-9.]+\)$`,
		`(?m)^  copy:     Sales_drill dropped$`,
		`(?m)^  recorded: on bak01, bak02$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("drill --wait output lacks %s", re)
		}
	}
	var st workflows.DrillStatus
	if err := c.GetWorkflow(context.Background(), id, "").Get(context.Background(), &st); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	res := st.Result
	t.Logf("drill: %s wall, rto %s, recovery point %s, logs %d-%d, sanity %v", took, res.RTO, res.RecoveryPoint, res.FirstLog, res.LastLog, res.Sanity)

	// The Recover child ran, to the point, from the full and logs 1-4.
	if st.Recover == nil || st.RecoverID != workflows.RecoverWorkflowID(devenv.VerifyInstance, "Sales_drill") {
		t.Fatalf("no Recover child: %+v", st)
	}
	child, err := c.DescribeWorkflowExecution(context.Background(), st.RecoverID, "")
	if err != nil || child.WorkflowExecutionInfo.GetParentExecution().GetWorkflowId() != id {
		t.Errorf("the Recover %s is not the drill's child: %v %v", st.RecoverID, child, err)
	}
	if res.Outcome != catalog.DrillPassed || !res.Dropped || res.Instance != devenv.VerifyInstance || res.Database != "Sales_drill" ||
		!res.RecoveryPoint.Equal(point) || res.Sequence != 1 || res.Chain != 1 || res.FirstLog != 1 || res.LastLog != 4 ||
		res.RTO <= 0 || res.RTO > took || len(res.Sanity) != 4 {
		t.Errorf("drill result: %+v", res)
	}

	// The copy held exactly the rows committed at or before the point.
	checked.mu.Lock()
	got := checked.rows
	checked.mu.Unlock()
	want, all := rows(site.Source, devenv.Database, point.UTC()), rows(site.Source, devenv.Database, time.Time{})
	if !slices.Equal(got, want) || len(got) <= 5 || len(got) >= len(all) {
		t.Errorf("the drill copy held %d rows %v, the source committed %d by %s (%d in all)", len(got), got, len(want), point, len(all))
	}

	// Dropped afterwards.
	if n := count(site.Verify, "SELECT COUNT(*) FROM sys.databases WHERE name = N'Sales_drill'"); n != 0 {
		t.Errorf("Sales_drill still on sqlverify (%d)", n)
	}

	// The record, signed, on both backup servers.
	keys, err := site.Config.ManifestKeyRing()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range devenv.BackupServers {
		st, err := local.Open(context.Background(), site.BackupDirs[s])
		if err != nil {
			t.Fatal(err)
		}
		r, err := catalog.LoadDrill(context.Background(), catalog.StorageFS{Storage: st}, keys, devenv.SourceInstance, devenv.Database)
		st.Close()
		if err != nil || r == nil || !r.Trusted() || len(r.Drills) != 1 || r.Scratch != nil || r.Last().RunID != res.RunID || r.Last().RTO != res.RTO {
			t.Errorf("drill record on %s: %+v %v", s, r, err)
		}
	}

	// The prediction made at its start: the full at the restore rate, four
	// logs at the assumed second each (no drill had measured them), no
	// recovery yet; each step's error against the measured times.
	p := res.Predicted
	if p == nil || p.LogCount != 4 || p.LogFrom != "assumed" || p.LogOverhead != time.Second || p.Full <= 0 || p.Recovery != 0 ||
		p.LogBytes != res.LogBytes || res.LogFastest <= 0 || res.LogFastest > res.Steps.Logs {
		t.Errorf("drill prediction %+v (log bytes %d, fastest %s, logs %s)", p, res.LogBytes, res.LogFastest, res.Steps.Logs)
	}
	if e, ok := catalog.ErrorOf(res.PredictionError, catalog.PredictLogs); !ok || e.Measured != res.Steps.Logs || e.Error != res.Steps.Logs-p.Logs {
		t.Errorf("logs' prediction error %+v in %+v", e, res.PredictionError)
	}

	// And in the evidence ledger of both, after the set's record: it
	// verifies, and the report shows the drill against its rto.
	code, out, errs = on(t, tq, "evidence", "verify", "--config", site.ConfigFile)
	for _, s := range devenv.BackupServers {
		if code != exitOK || !strings.Contains(out, "OK    "+s+" sql01/Sales: 2 record(s), head 2") {
			t.Errorf("evidence verify: exit %d\n%s%s", code, out, errs)
		}
	}
	today := time.Now().UTC().Format(time.DateOnly)
	code, out, errs = on(t, tq, "evidence", "report", "--config", site.ConfigFile, "--from", today, "--to", today, "--json")
	var er evidence.Report
	if err := json.Unmarshal([]byte(out), &er); code != exitOK || err != nil || len(er.Databases) != 1 {
		t.Fatalf("evidence report: exit %d %v %s\n%s", code, err, errs, out)
	}
	if d := er.Databases[0]; d.Sets != 1 || len(d.DrillResults) != 1 || !d.DrillResults[0].MetRTO || d.DrillResults[0].TargetRTOSeconds != 3600 ||
		d.DrillResults[0].RTOSeconds != res.RTO.Seconds() || !d.DrillResults[0].RecoveryPoint.Equal(point) || d.LastKind != evidence.KindDrill {
		t.Errorf("evidence report: %+v", d)
	}

	// status: green with rto 1h; red once rto is below the measured RTO.
	judge := func() (int, status.Database, string) {
		code, out, errs := on(t, tq, "status", "--config", site.ConfigFile, "--from-manifests", "--json")
		var r status.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Databases) != 1 {
			t.Fatalf("status --from-manifests: exit %d %v %s\n%s", code, err, errs, out)
		}
		return code, r.Databases[0], out
	}
	code, d, out := judge()
	if code != exitOK || d.OutOfObjectives || d.LastDrill == nil || d.LastDrill.RunID != res.RunID || d.LastDrill.RTO != res.RTO ||
		len(d.LastDrill.PredictionError) != len(res.PredictionError) {
		t.Errorf("status with rto 1h: exit %d, %+v\n%s", code, d, out)
	}
	_, out, _ = on(t, tq, "status", "--config", site.ConfigFile, "--from-manifests")
	t.Logf("starter status --from-manifests:\n%s", out)
	if !regexp.MustCompile(`; drill passed [^;]* on sqlverify, restore predicted \S+, error [-+]\S+ \(x[0-9.]+\)`).MatchString(out) {
		t.Errorf("status line lacks the drill's prediction error")
	}

	rto := res.RTO / 2
	withDrill(t, site, "drill: {every: 24h}\n    rto: "+rto.String())
	code, d, out = judge()
	if code == exitOK || !d.OutOfObjectives || !slices.ContainsFunc(d.Reasons, func(r string) bool { return strings.Contains(r, "above the RTO of") }) {
		t.Errorf("status with rto %s: exit %d, %+v\n%s", rto, code, d, out)
	}

	// A second drill predicts its logs from what the first measured: the
	// per-log cost it saw, no longer the assumed second.
	if code, out, errs := on(t, tq, "drill", "--config", site.ConfigFile, "--database", devenv.Database, "--latest", "--wait"); code != exitOK {
		t.Fatalf("second drill: exit %d\n%s%s", code, out, errs)
	}
	var st2 workflows.DrillStatus
	if err := c.GetWorkflow(context.Background(), id, "").Get(context.Background(), &st2); err != nil {
		t.Fatal(err)
	}
	p2 := st2.Result.Predicted
	t.Logf("second drill: predicted %+v, errors %+v", p2, st2.Result.PredictionError)
	if p2 == nil || p2.LogFrom != "drill" || p2.LogOverhead <= 0 || p2.LogOverhead >= time.Second || p2.LogOverhead > res.Steps.Logs/4 ||
		st2.Recover == nil || p2.LogCount != st2.Recover.LogsDone {
		t.Errorf("second drill's prediction %+v, the first measured logs %s for 4", p2, res.Steps.Logs)
	}
}

// verifiedSiteWorker runs a worker of the product's workflows and
// activities (drills: the drill activities to register) on task queue tq,
// runs a verified cycle of the site's Sales through the starter, and
// returns an activity environment for the log chain's activities.
func verifiedSiteWorker(t testing.TB, c sdkclient.Client, tq string, site *devenv.Site, acts *activities.Activities, drills any) *testsuite.TestActivityEnvironment {
	t.Helper()
	w := sdkworker.New(c, tq, sdkworker.Options{})
	// The product's registration, with the drill's activities given.
	workflows.RegisterWith(w, acts, workflows.Overrides{Drill: drills})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	if code, out, errs := on(t, tq, "run", "--config", site.ConfigFile, "--database", devenv.Database, "--wait"); code != exitOK {
		t.Fatalf("run --wait: exit %d\n%s%s", code, out, errs)
	}
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(nopLog{})
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(logs.New(acts))
	return env
}

// withDrill writes Sales's drill settings (the lines given, after its
// log_proof) into the site's configuration, and loads it back.
func withDrill(t testing.TB, site *devenv.Site, lines string) {
	t.Helper()
	b, err := os.ReadFile(site.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if i := strings.Index(text, "\n    drill: "); i >= 0 {
		text = text[:i+1]
	}
	text = strings.TrimRight(text, "\n") + "\n    " + lines + "\n"
	if err := os.WriteFile(site.ConfigFile, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(site.ConfigFile)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	*site.Config = *c
}

// The drill's ownership guard over real TDS: a database named like the
// drill's copy that no drill created stops the drill before anything is
// restored, and is never dropped; the copy a crashed drill left (its
// scratch recorded by PrepareDrill, the Recover done, the worker gone
// before DropDrill) is dropped by the next drill, which then passes.
func TestDrillDropsOnlyItsOwnCopy(t *testing.T) {
	const tq = "tq-e2e-drill-own"
	site, state := startSiteWorker(t, tq)
	withDrill(t, site, "drill: {every: 24h}")
	if code, out, errs := on(t, tq, "run", "--config", site.ConfigFile, "--database", devenv.Database, "--wait"); code != exitOK {
		t.Fatalf("run --wait: exit %d\n%s%s", code, out, errs)
	}
	pass, err := os.ReadFile(filepath.Join(state, "secrets", "sa.password"))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("sqlserver", site.Verify.DSN(devenv.AdminLogin, strings.TrimSpace(string(pass)), "master"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	exists := func() bool {
		var n int
		if err := admin.QueryRow("SELECT COUNT(*) FROM sys.databases WHERE name = N'Sales_drill'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	c := sdk(t)
	id := workflows.DrillWorkflowID(devenv.SourceInstance, devenv.Database)
	drillNow := func() (workflows.DrillStatus, error) {
		run, err := c.ExecuteWorkflow(context.Background(), sdkclient.StartWorkflowOptions{ID: id, TaskQueue: tq},
			workflows.DrillName, drill.Request{Database: devenv.Database})
		if err != nil {
			t.Fatal(err)
		}
		var st workflows.DrillStatus
		return st, run.Get(context.Background(), &st)
	}

	// Someone's database of that name: refused, kept.
	if _, err := admin.Exec("CREATE DATABASE [Sales_drill]"); err != nil {
		t.Fatal(err)
	}
	if _, err := drillNow(); err == nil || !strings.Contains(err.Error(), "TargetDatabaseExists") || !strings.Contains(err.Error(), "no drill created it") {
		t.Errorf("a drill over a database it did not create: %v", err)
	}
	if !exists() {
		t.Fatal("the drill dropped a database it did not create")
	}
	if _, err := admin.Exec("DROP DATABASE [Sales_drill]"); err != nil {
		t.Fatal(err)
	}

	// A crashed drill: prepared (its scratch recorded), recovered, never
	// dropped.
	acts := activities.New(zap.NewNop())
	acts.Cycle = activities.CycleDeps{Config: site.Config}
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(nopLog{})
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(drill.New(acts))
	v, err := env.ExecuteActivity(drill.New(nil).PrepareDrill, drill.Request{Database: devenv.Database})
	var p drill.Plan
	if err == nil {
		err = v.Get(&p)
	}
	if err != nil || p.Scratch == nil {
		t.Fatalf("PrepareDrill: %+v %v", p, err)
	}
	if code, out, errs := on(t, tq, "recover", "--config", site.ConfigFile, "--database", devenv.Database, "--to-instance", devenv.VerifyInstance,
		"--as", "Sales_drill", "--latest", "--wait"); code != exitOK {
		t.Fatalf("recover --wait: exit %d\n%s%s", code, out, errs)
	}
	st, err := drillNow()
	if err != nil || !strings.Contains(st.Leftover, "left by an earlier drill") || st.Result.Outcome != catalog.DrillPassed || !st.Result.Dropped {
		t.Errorf("the drill after a crashed one: %v\n%+v", err, st)
	}
	if exists() {
		t.Error("Sales_drill still on sqlverify after the drill")
	}
}
