package crashtest

// Names as SQL Server resolves them: by the instance's collation. On a
// case-insensitive instance every spelling of a database is one database,
// with one workflow id, one set of file names and its databases: entry's
// settings; on a case-sensitive one, names that differ only in case are two
// databases whose files never meet, even on a share that matches file names
// case-insensitively while the worker reads it case-sensitively.

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/workflows"
)

// collation sets both instances' server collation.
func collation(name string) func(*sitetest.Options) {
	return func(o *sitetest.Options) { o.Collation = name }
}

// sanityRuns counts the statements of the verification instance that carry
// marker (a sanity query of one databases: entry).
func sanityRuns(in *sqlsim.Instance, marker string) int {
	n := 0
	for _, r := range in.Statements() {
		if strings.Contains(r.SQL, marker) {
			n++
		}
	}
	return n
}

// TestNamesResolveCaseInsensitively: the default collation is
// case-insensitive. The configuration names the database `sales`, with a
// sanity check of its own; the instance has `Sales`. The fleet backs it up
// with that check and under the same workflow id as `starter run --database
// sales`; while a cycle runs, starts of Sales and SALES run no second one;
// a start of "sales " (a trailing blank) is refused.
func TestNamesResolveCaseInsensitively(t *testing.T) {
	const marker = "entry_of_sales"
	s := newSite(t, "Sales", smallDB, fmt.Sprintf("      - name: entry-check\n        query: SELECT COUNT_BIG(*) AS %s FROM dbo.Orders\n        at_least: 1\n", marker))
	s.reconfigure(func(y string) string {
		if !strings.Contains(y, "  - name: \"Sales\"\n") {
			t.Fatalf("no Sales entry in the site's configuration:\n%s", y)
		}
		return strings.Replace(y, "  - name: \"Sales\"\n", "  - name: \"sales\"\n", 1)
	}, "sales")
	inst := s.source()
	canonical := workflows.CycleWorkflowID(inst, "Sales")
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s.inProcessWorker(c)
	sc := s.starterClient(c, srv)
	ctx := context.Background()

	// The nightly fleet.
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "fleet-" + s.tq, TaskQueue: s.tq},
		workflows.FleetName, workflows.FleetInput{Instances: []string{inst}})
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := waitFor[workflows.FleetResult](t, run, 3*time.Minute)
	if err != nil {
		t.Fatalf("fleet: %v", err)
	}
	if len(fleet.Outcomes) != 1 {
		t.Fatalf("fleet outcomes %+v, want one database", fleet.Outcomes)
	}
	o := fleet.Outcomes[0]
	if o.Outcome != workflows.OutcomeVerified || o.WorkflowID != canonical {
		t.Errorf("fleet: %+v, want Sales verified under %s", o, canonical)
	}
	if n := sanityRuns(s.verify, marker); n == 0 {
		t.Errorf("the fleet's cycle did not run the sanity check of the databases: entry \"sales\": its settings were dropped")
	}

	// starter run --database sales: the same database, the same id.
	before := sanityRuns(s.verify, marker)
	res, err := finish(t, c, startCycle(t, sc, inst, "sales"), cycleLimit)
	if err != nil {
		t.Fatalf("starter run --database sales: %v", err)
	}
	if res.RunBy != canonical || res.Database != "Sales" {
		t.Errorf("starter run --database sales ran under %q as %q, want under the fleet's id %s as Sales", res.RunBy, res.Database, canonical)
	}
	if sanityRuns(s.verify, marker) == before {
		t.Errorf("starter run --database sales did not run the entry's sanity check")
	}
	for _, f := range s.sets() {
		if f.m.Database != "Sales" {
			t.Errorf("manifest %s records database %q: every set of the database is recorded under its sys.databases spelling Sales", f, f.m.Database)
		}
	}

	// One cycle at a time, whatever the spelling.
	backupsBefore := len(statementsOn(s.src, func(d string) bool { return strings.EqualFold(d, "Sales") }, "BACKUP DATABASE"))
	s.src.SetThrottle(1 << 20)
	first := startCycle(t, sc, inst, "Sales")
	until(t, "the first cycle's BACKUP", time.Minute, func() bool { return running(s.src, "BACKUP DATABASE") })
	for _, spelling := range []string{"SALES", "sales", "Sales"} {
		r, err := sc.StartCycle(ctx, workflows.CycleInput{Database: spelling, Instance: inst})
		if err != nil {
			if !strings.Contains(err.Error(), canonical) {
				t.Errorf("start of %s refused with %v, which does not name the running cycle %s", spelling, err, canonical)
			}
			continue
		}
		got, err := finish(t, c, r, cycleLimit)
		if err != nil || got.Skipped == "" || got.HeldBy != canonical {
			t.Errorf("start of %s while %s runs: %+v %v, want skipped, held by %s", spelling, canonical, got, err, canonical)
		}
	}
	s.src.SetThrottle(0)
	if _, err := finish(t, c, first, 3*time.Minute); err != nil {
		t.Errorf("the running cycle: %v", err)
	}
	if n := len(statementsOn(s.src, func(d string) bool { return strings.EqualFold(d, "Sales") }, "BACKUP DATABASE")) - backupsBefore; n != 1 {
		t.Errorf("%d BACKUP DATABASE statements of Sales while it was started four times, want 1", n)
	}

	// The Web UI's input with a trailing blank.
	_, err = finish(t, c, s.startRaw(c, "webui-"+rand.Text()[:12], map[string]any{"database": "sales "}), cycleLimit)
	if errorType(err) != activities.ErrInvalidConfig || !strings.Contains(err.Error(), "blank") {
		t.Errorf("Web UI input {\"database\":\"sales \"}: %v (type %s), want InvalidConfig naming the blank", err, errorType(err))
	}
}

// TestNamesDifferingInCaseStayApart: a case-sensitive (BIN2) instance holds
// Sales and sales, two databases. Each runs under its own workflow id, and
// the second's cycle changes no byte of the first's verified set, although
// SQL Server writes to a share that matches file names case-insensitively
// and the worker reads the same directory case-sensitively. A start of
// SALES, which names neither, is refused.
func TestNamesDifferingInCaseStayApart(t *testing.T) {
	s := newSite(t, "Sales", smallDB, "", collation("Latin1_General_BIN2"))
	if err := s.src.CreateDatabase(sqlsim.DatabaseSpec{Name: "sales", Size: smallDB, DataFiles: 2}); err != nil {
		t.Fatal(err)
	}
	inst := s.source()
	// sales is picked by the instance's selection, with the defaults.
	s.reconfigure(func(y string) string {
		marker := "    encrypt: disable\n  - name: " + "verify01" + "\n"
		if !strings.Contains(y, marker) {
			t.Fatalf("no %q in the site's configuration:\n%s", marker, y)
		}
		return strings.Replace(y, marker, "    encrypt: disable\n    databases: [USER_DATABASES]\n    backup_servers: [bak01, bak02]\n  - name: verify01\n", 1)
	}, "Sales")
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s.inProcessWorker(c)
	sc := s.starterClient(c, srv)

	upper, err := finish(t, c, startCycle(t, sc, inst, "Sales"), cycleLimit)
	if err != nil {
		t.Fatalf("cycle of Sales: %v", err)
	}
	var theirs []foundSet
	for _, f := range s.setsOf(inst, "Sales", 0) {
		if f.m.State == catalog.StateVerified {
			theirs = append(theirs, f)
		}
	}
	if len(theirs) == 0 {
		t.Fatalf("no verified set of Sales: %v", s.sets())
	}
	kept := s.filesOf(theirs)

	run := startCycle(t, sc, inst, "sales")
	lower, err := finish(t, c, run, cycleLimit)
	if err != nil {
		t.Errorf("cycle of sales: %v", err)
	}
	if bad := unchanged(kept, s.hashes()); len(bad) > 0 {
		t.Errorf("the cycle of sales (seq %d) changed or removed files of Sales's verified set: %v", lower.Sequence, bad)
	}
	for _, f := range theirs {
		if bad := s.intact(f); len(bad) > 0 {
			t.Errorf("Sales's verified set after the cycle of sales: %v", bad)
		}
	}
	ids := map[string]string{"Sales": workflows.CycleWorkflowID(inst, "Sales"), "sales": workflows.CycleWorkflowID(inst, "sales")}
	if ids["Sales"] == ids["sales"] || run.GetID() != ids["sales"] || lower.Database != "sales" || upper.Database != "Sales" {
		t.Errorf("ids %v, the cycle of sales ran as %s for %q (Sales: %q): want two databases, two ids", ids, run.GetID(), lower.Database, upper.Database)
	}
	if n := len(s.verifiedSets(inst, "sales")); n == 0 {
		t.Errorf("no verified set of sales: %v", s.sets())
	}

	_, err = finish(t, c, startCycle(t, sc, inst, "SALES"), cycleLimit)
	if errorType(err) != activities.ErrDatabaseNotFound || !strings.Contains(err.Error(), "Sales") || !strings.Contains(err.Error(), "sales") {
		t.Errorf("start of SALES on a case-sensitive instance: %v (type %s), want DatabaseNotFound naming Sales and sales", err, errorType(err))
	}
}

// TestSetsNamedBeforeStillCount: sets on the shares under the names a
// build before case-safe file names wrote (no naming recorded, names byte
// for byte: <inst>@Sales_00000001_1of2.bak) remain the database's. A set
// such a build left copied is resumed and verified under its own names;
// the next cycles' numbers go on above it; retention removes it, by its own
// names, once newer verified sets supersede it.
func TestSetsNamedBeforeStillCount(t *testing.T) {
	const db = "Sales"
	s := newSite(t, db, smallDB, "    retention:\n      keep_verified: 2\n")
	inst := s.source()
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s.inProcessWorker(c)
	sc := s.starterClient(c, srv)

	first, err := finish(t, c, startCycle(t, sc, inst, db), cycleLimit)
	if err != nil {
		t.Fatalf("first cycle: %v", err)
	}
	// Make set 1 what the earlier build would have left after an outage:
	// copied, never restored, every file under its byte-for-byte name.
	legacy := func(seq int64, i, n int) string { return fmt.Sprintf("%s@%s_%08d_%dof%d.bak", inst, db, seq, i, n) }
	legacyManifest := fmt.Sprintf("%s@%s_%08d.manifest.json", inst, db, first.Sequence)
	for _, f := range s.setsOf(inst, db, first.Sequence) {
		dir := s.dirs[f.server]
		m := f.m
		for i, st := range m.Stripes {
			name := legacy(m.Sequence, i+1, len(m.Stripes))
			if err := os.Rename(filepath.Join(dir, st.Name), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			m.Stripes[i].Name = name
		}
		cut := slices.IndexFunc(m.History, func(h catalog.Transition) bool { return h.State == catalog.StateCopied })
		m.Naming, m.State, m.History, m.Proof, m.VerifyDB, m.Entry = "", catalog.StateCopied, m.History[:cut+1], nil, "", ""
		m.UpdatedAt = m.History[cut].At
		for _, st := range []catalog.Step{catalog.StepRestore, catalog.StepCheckDB, catalog.StepSanity} {
			delete(m.Timings, st)
		}
		data, err := catalog.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, legacyManifest), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, f.file)); err != nil {
			t.Fatal(err)
		}
		seqFiles, _ := filepath.Glob(filepath.Join(dir, "*.sequence.json"))
		for _, p := range seqFiles {
			if err := os.Rename(p, filepath.Join(dir, inst+"@"+db+".sequence.json")); err != nil {
				t.Fatal(err)
			}
		}
	}
	legacyFiles := func(seq int64) []string {
		var out []string
		for _, server := range backupServers {
			got, _ := filepath.Glob(filepath.Join(s.dirs[server], fmt.Sprintf("%s@%s_%08d*", inst, db, seq)))
			out = append(out, got...)
		}
		return out
	}
	if n := len(legacyFiles(first.Sequence)); n != 6 {
		t.Fatalf("%d files of set %d under its legacy names, want 6 (2 stripes and a manifest on each server)", n, first.Sequence)
	}

	// Resumed: verified under its own names.
	resumed, err := finish(t, c, s.startRaw(c, workflows.CycleWorkflowID(inst, db), map[string]any{"database": db, "instance": inst, "resume": first.Sequence}), cycleLimit)
	if err != nil || resumed.Sequence != first.Sequence {
		t.Fatalf("resume of the legacy set %d: %+v %v", first.Sequence, resumed, err)
	}
	for _, f := range s.setsOf(inst, db, first.Sequence) {
		if f.file != legacyManifest || f.m.Naming != "" || f.m.State != catalog.StateVerified {
			t.Errorf("after the resume: %s (naming %q), want verified under %s, its naming kept", f, f.m.Naming, legacyManifest)
		}
		for _, bad := range s.intact(f) {
			t.Errorf("after the resume: %s", bad)
		}
	}
	if n := len(legacyFiles(first.Sequence)); n != 6 {
		t.Errorf("%d files of set %d under its legacy names after the resume, want 6", n, first.Sequence)
	}

	// The numbers go on above it; retention (keep 2) removes it when two
	// newer sets are verified.
	for want := first.Sequence + 1; want <= first.Sequence+2; want++ {
		res, err := finish(t, c, startCycle(t, sc, inst, db), cycleLimit)
		if err != nil || res.Sequence != want {
			t.Fatalf("cycle after the legacy set: seq %d %v, want %d", res.Sequence, err, want)
		}
	}
	if left := legacyFiles(first.Sequence); len(left) != 0 {
		t.Errorf("retention kept the superseded legacy set %d: %v", first.Sequence, left)
	}
	if n := len(s.verifiedSets(inst, db)); n != 2 {
		t.Errorf("%d verified sets, want 2 (keep_verified)", n)
	}
}
