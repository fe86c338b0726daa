package crashtest

// Regression tests of the product's guarantees: the paths by which a verified set could be
// overwritten, deleted or mislabelled. Each runs real cycles (embedded
// Temporal, a worker, emulated SQL Server over TDS, backup servers as local
// directories) and judges the backup servers by what their manifests record.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
	starter "github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// cycleLimit bounds one unthrottled cycle of a small database.
const cycleLimit = 90 * time.Second

// TestSequenceRollback: with `sequence: table` the counter lives in the
// source database; restoring that database from an older set rolls it back.
// No number may be handed out twice, and the verified set that held it
// keeps its bytes and its verified manifest.
func TestSequenceRollback(t *testing.T) {
	const db = "Rollback"
	// keep_verified 3: the two cycles after the rollback may not push set 3
	// out by retention either, so every change to it is a defect.
	s := newSite(t, db, smallDB, "    sequence: table\n    retention:\n      keep_verified: 3\n")
	src := s.source()
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s.inProcessWorker(c)
	sc := s.starterClient(c, srv)

	var seqs []int64
	for i := 1; i <= 3; i++ {
		res, err := finish(t, c, startCycle(t, sc, src, db), cycleLimit)
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		seqs = append(seqs, res.Sequence)
	}
	if !slices.Equal(seqs, []int64{1, 2, 3}) {
		t.Fatalf("first three cycles got sequences %v, want 1 2 3", seqs)
	}
	set3 := s.setsOf(src, db, 3)
	if len(set3) != 2 {
		t.Fatalf("set 3 has %d manifests, want one on each backup server: %v", len(set3), set3)
	}
	before := s.filesOf(set3)

	// The DBA restores the source database from set 2, counter included.
	set2 := s.setsOf(src, db, 2)
	if len(set2) == 0 {
		t.Fatal("set 2 has no manifest on any backup server")
	}
	var disks []string
	for _, st := range set2[0].m.Stripes {
		disks = append(disks, `\\`+set2[0].server+`\backup\`+st.Name)
	}
	stmt, err := tsql.RestoreDatabase(tsql.RestoreOptions{Database: db, Disks: disks, Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, s.src, stmt)
	qdb, _ := tsql.QuoteIdent(db)
	counter, err := queryInt(t, s.src, "SELECT Number FROM "+qdb+".["+tsql.SequenceSchema+"].["+tsql.SequenceTable+"] WHERE ID = 1")
	if err != nil || counter != 2 {
		t.Fatalf("after restoring %s from set 2 its sequence counter is %d (%v), want 2: the rollback did not happen", db, counter, err)
	}

	for i := 4; i <= 5; i++ {
		run := startCycle(t, sc, src, db)
		res, err := finish(t, c, run, cycleLimit)
		if err != nil {
			t.Errorf("cycle %d after the rollback: %v", i, err)
			// The number it used, verified or not.
			p, _ := progress(c, run)
			res.Sequence = p.Sequence
		}
		if res.Sequence != 0 && slices.Contains(seqs, res.Sequence) {
			t.Errorf("cycle %d after the rollback got sequence %d, already used (sequences so far %v)", i, res.Sequence, seqs)
		}
		seqs = append(seqs, res.Sequence)
	}

	if bad := unchanged(before, s.filesOf(s.setsOf(src, db, 3))); len(bad) > 0 {
		t.Errorf("files of verified set 3 changed or gone after the rollback: %v (of %v)", bad, sortedKeys(before))
	}
	// Exactly the two manifests of set 3 there were, still verified and
	// still the same run's.
	after := s.setsOf(src, db, 3)
	if len(after) != 2 {
		t.Errorf("set 3 has %d manifests after the rollback, want 2: %v", len(after), after)
	}
	for _, f := range after {
		if f.m.State != catalog.StateVerified {
			t.Errorf("set 3 on %s: %s, want still verified", f.server, f)
		}
		if f.m.Header == nil || set3[0].m.Header == nil || f.m.Header.BackupSetGUID != set3[0].m.Header.BackupSetGUID {
			t.Errorf("set 3 on %s now describes another backup: %+v, was %+v", f.server, f.m.Header, set3[0].m.Header)
		}
		for _, bad := range s.intact(f) {
			t.Errorf("set 3: %s", bad)
		}
	}
	s.checkNewestOnTwo(t, src, db)
	t.Logf("sequences: %v; manifests: %v", seqs, s.setsOf(src, db, 0))
}

// TestSameNameTwoInstances: DBA on sql01 and DBA on sql02 (different
// contents) share both backup servers. No cycle or retention of one may
// overwrite or delete a file of the other's sets, and each ends with its own
// verified sets on two servers.
func TestSameNameTwoInstances(t *testing.T) {
	const db = "DBA"
	s := newSite(t, db, smallDB, "")
	// The site's source instance and a second one (sql01 and sql02).
	one, two := s.source(), strings.Replace(s.source(), "sql01", "sql02", 1)
	src2 := s.addSource(two, db, 3*smallDB, fmt.Sprintf(`  - name: %q
    instance: %s
    backup_servers: [bak01, bak02]
    stripes: 2
    compression: false
    verify_name: "src2_{db}_verify"
    sanity_checks:
      - name: orders-present
        query: SELECT COUNT_BIG(*) FROM dbo.Orders
        at_least: 1
`, db, two))
	// Each restored copy must hold its own instance's data: the Orders count
	// of its source (the two differ).
	counts := map[string]int64{}
	for name, in := range map[string]*sqlsim.Instance{one: s.src, two: src2} {
		n, err := queryInt(t, in, "SELECT COUNT_BIG(*) FROM [DBA].[dbo].[Orders]")
		if err != nil {
			t.Fatalf("Orders of %s/%s: %v", name, db, err)
		}
		counts[name] = n
	}
	if counts[one] == counts[two] {
		t.Fatalf("both DBA databases have %d orders: the test needs different contents", counts[one])
	}
	s.reconfigure(func(y string) string {
		for _, inst := range []string{one, two} {
			check := fmt.Sprintf("      - name: orders-of-%s\n        query: SELECT COUNT_BIG(*) FROM dbo.Orders\n        equals: \"%d\"\n", inst, counts[inst])
			marker := "    instance: " + inst + "\n"
			i := strings.Index(y, marker)
			j := strings.Index(y[i:], "        at_least: 1\n")
			if i < 0 || j < 0 {
				t.Fatalf("no sanity_checks of %s/%s in the configuration", inst, db)
			}
			at := i + j + len("        at_least: 1\n")
			y = y[:at] + check + y[at:]
		}
		return y
	}, db)
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s.inProcessWorker(c)
	sc := s.starterClient(c, srv)

	other := map[string]string{one: two, two: one}
	verifiedOf := func(inst string) []foundSet {
		var out []foundSet
		for _, f := range s.setsOf(inst, db, 0) {
			if f.m.State == catalog.StateVerified {
				out = append(out, f)
			}
		}
		return out
	}
	for round := 1; round <= 3; round++ {
		for _, inst := range []string{one, two} {
			theirs := s.filesOf(verifiedOf(other[inst]))
			run := startCycle(t, sc, inst, db)
			res, err := finish(t, c, run, cycleLimit)
			if err != nil {
				t.Errorf("round %d: cycle of %s/%s: %v", round, inst, db, err)
				p, _ := progress(c, run)
				res.Sequence = p.Sequence
			} else if res.Instance != inst {
				t.Errorf("round %d: cycle of %s/%s reports instance %q", round, inst, db, res.Instance)
			}
			if bad := unchanged(theirs, s.hashes()); len(bad) > 0 {
				t.Errorf("round %d: the cycle of %s/%s (seq %d) overwrote or deleted files of %s/%s's verified sets: %v",
					round, inst, db, res.Sequence, other[inst], db, bad)
			}
		}
	}
	for _, inst := range []string{one, two} {
		s.checkNewestOnTwo(t, inst, db)
		if n := len(s.verifiedSets(inst, db)); n < 2 {
			t.Errorf("%s/%s ends with %d verified set(s), want at least 2 (retention keeps 2)", inst, db, n)
		}
	}
	for _, f := range s.sets() {
		t.Logf("manifest %s", f)
	}
}

// TestOneCyclePerDatabase starts one database through every entry point at
// once: the starter (canonical id), the Web UI (any id), `starter run`
// without --config (no instance) and its schedule. Exactly one cycle backs
// up and restores; the others end skipped or refused naming the running one;
// every verified set was restored from its own backup (msdb restore history).
func TestOneCyclePerDatabase(t *testing.T) {
	const db = "OnePerDB"
	s := newSite(t, db, 8<<20, "    keep_verify_db: true\n")
	src := s.source()
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s.inProcessWorker(c)
	sc := s.starterClient(c, srv)
	ctx := context.Background()

	// A schedule that does not come due during the test: it only runs when
	// triggered.
	applied, err := sc.ApplySchedules(ctx, s.cfg, starter.ScheduleSpec{Cron: "0 3 29 2 *"})
	if err != nil || len(applied) != 1 {
		t.Fatalf("schedule: %v %v", applied, err)
	}
	scheduleID := applied[0].ScheduleID
	t.Cleanup(func() { _ = sc.DeleteSchedule(context.Background(), scheduleID) })

	// The first cycle is slow (1 MiB/s per stream on both instances).
	s.src.SetThrottle(1 << 20)
	s.verify.SetThrottle(1 << 20)
	first := startCycle(t, sc, src, db)
	canonical := first.GetID()
	until(t, "the first cycle's BACKUP", time.Minute, func() bool { return running(s.src, "BACKUP DATABASE") })

	type entry struct {
		name string
		run  client.WorkflowRun
		err  error // refused at start
	}
	var others []entry
	webID := "webui-" + rand.Text()[:12]
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: webID, TaskQueue: s.tq},
		workflows.BackupCycleName, workflows.CycleInput{Database: db})
	others = append(others, entry{"web UI id " + webID, run, err})
	run, err = sc.StartCycle(ctx, workflows.CycleInput{Database: db})
	others = append(others, entry{"starter without instance", run, err})
	if err := sc.TriggerSchedule(ctx, scheduleID); err != nil {
		t.Fatalf("trigger schedule %s: %v", scheduleID, err)
	}
	var scheduled *client.ScheduleWorkflowExecution
	until(t, "the schedule's run", 30*time.Second, func() bool {
		d, err := c.ScheduleClient().GetHandle(ctx, scheduleID).Describe(ctx)
		if err == nil && len(d.Info.RecentActions) > 0 {
			scheduled = d.Info.RecentActions[len(d.Info.RecentActions)-1].StartWorkflowResult
		}
		return scheduled != nil
	})
	others = append(others, entry{"schedule " + scheduleID, c.GetWorkflow(ctx, scheduled.WorkflowID, scheduled.FirstExecutionRunID), nil})

	res, err := finish(t, c, first, 3*time.Minute)
	if err != nil {
		t.Errorf("the first cycle (%s): %v", canonical, err)
	}
	for _, e := range others {
		if e.err != nil {
			if !strings.Contains(e.err.Error(), canonical) {
				t.Errorf("%s refused with %q, which does not name the running cycle %s", e.name, e.err, canonical)
			}
			t.Logf("%s: refused: %v", e.name, e.err)
			continue
		}
		var out map[string]any
		err := finishInto(t, c, e.run, 3*time.Minute, &out)
		text, _ := json.Marshal(out)
		seq, _ := out["seq"].(float64)
		switch {
		case err != nil && !strings.Contains(err.Error(), canonical):
			t.Errorf("%s (workflow %s) ended with %v, which does not name the running cycle %s", e.name, e.run.GetID(), err, canonical)
		case err == nil && seq != 0 && seq != float64(res.Sequence):
			t.Errorf("%s (workflow %s) ran a cycle of its own (seq %.0f) alongside %s: %s", e.name, e.run.GetID(), seq, canonical, text)
		case err == nil && !strings.Contains(string(text), canonical):
			t.Errorf("%s (workflow %s) ended without naming the running cycle %s: %s", e.name, e.run.GetID(), canonical, text)
		}
		t.Logf("%s: workflow %s: %v %s", e.name, e.run.GetID(), err, text)
	}

	// The statement logs: one BACKUP of the database, and no restore, check
	// or drop of its verification copy while another one ran.
	backups := statementsOn(s.src, func(d string) bool { return d == db }, "BACKUP DATABASE")
	if len(backups) != 1 {
		t.Errorf("%d BACKUP DATABASE statements of %s, want 1 (one cycle)", len(backups), db)
	}
	for _, o := range overlaps(backups) {
		t.Errorf("two backups of %s at once: %s", db, o)
	}
	verifyDB := s.cfg.Databases[0].VerifyDatabaseName(0)
	verifySide := statementsOn(s.verify, func(d string) bool { return strings.EqualFold(d, verifyDB) },
		"RESTORE DATABASE", "DBCC CHECKDB", "DROP DATABASE")
	if len(verifySide) == 0 {
		t.Errorf("no RESTORE, CHECKDB or DROP of %s on the verification instance", verifyDB)
	}
	for _, o := range overlaps(verifySide) {
		t.Errorf("two cycles on the verification copy at once: %s", o)
	}

	// Every verified manifest's set was restored into its verification
	// database (msdb restore history), and where a manifest records the
	// proof, that very restore was of this set.
	history := restoreHistory(t, s.verify)
	verified := 0
	for _, f := range s.setsOf(src, db, 0) {
		if f.m.State != catalog.StateVerified {
			continue
		}
		verified++
		checkRestoredFrom(t, f, history)
	}
	if verified == 0 {
		t.Errorf("no verified set of %s at all: %v", db, s.setsOf(src, db, 0))
	}
}

// outageLimit bounds a cycle whose verification instance stays down from
// the copy on, by what the cycle promises (workflows' retry policies): the
// rest of a clean cycle (cycleLimit: the copy still runs), the RESTORE tried
// 20 times, its waits doubling from sql_host_wait.initial (100ms here) up to
// 20 times that, then the copy a RESTORE may have left dropped, tried 5
// times with waits doubling from 5s. Each of those 25 attempts (a refused
// connect) gets 3s for its scheduling on a loaded machine.
var outageLimit = cycleLimit + retryWaits(100*time.Millisecond, 20) + retryWaits(5*time.Second, 5) + 25*3*time.Second

// retryWaits is the total of the waits between attempts of workflows'
// retry policy: doubling from initial, at most 20 times initial.
func retryWaits(initial time.Duration, attempts int) time.Duration {
	var total time.Duration
	wait := initial
	for range attempts - 1 {
		total += wait
		wait = min(2*wait, 20*initial)
	}
	return total
}

// TestOutageKeepsSet: the verification instance goes down after the copy
// for longer than the cycle's retry budget. The cycle ends not verified,
// but nothing is known to be wrong with the set: it is not marked failed
// anywhere, its files stay intact, and after the instance returns a later
// cycle verifies.
func TestOutageKeepsSet(t *testing.T) {
	const db = "Outage"
	s := newSite(t, db, smallDB, `    sql_host_wait:
      initial: 100ms
      max_interval: 1s
      give_up_after: 5s
`, bandwidth("1MiB"))
	src := s.source()
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s.inProcessWorker(c)
	sc := s.starterClient(c, srv)

	good, err := finish(t, c, startCycle(t, sc, src, db), cycleLimit)
	if err != nil {
		t.Fatalf("clean cycle: %v", err)
	}
	goodFiles := s.filesOf(s.setsOf(src, db, good.Sequence))

	run := startCycle(t, sc, src, db)
	until(t, "the copy", time.Minute, func() bool {
		p, err := progress(c, run)
		return err == nil && p.Step == activities.StepCopy
	})
	s.verify.Crash()
	down := time.Now()
	_, err = finish(t, c, run, outageLimit)
	t.Logf("cycle with the verification instance down %s: %v", time.Since(down).Round(time.Second), err)
	if err == nil {
		t.Errorf("the cycle ended verified with its verification instance down")
	}
	p, _ := progress(c, run)
	seq := p.Sequence
	if seq == 0 || seq == good.Sequence {
		t.Fatalf("the outage cycle's sequence is %d (clean cycle %d)", seq, good.Sequence)
	}
	check := func(when string, allowVerified bool) {
		t.Helper()
		fs := s.setsOf(src, db, seq)
		if len(fs) != 2 {
			t.Errorf("%s: set %d has %d manifests, want one on each server (the copy finished): %v", when, seq, len(fs), fs)
		}
		for _, f := range fs {
			switch f.m.State {
			case catalog.StateCopied, catalog.StateRestored, catalog.StateChecked:
			case catalog.StateVerified:
				if !allowVerified {
					t.Errorf("%s: %s is verified though it was never checked", when, f)
				}
			default:
				t.Errorf("%s: %s, want still copied (or restored/checked): an outage is no evidence against the set (failure %+v)",
					when, f, f.m.Failure)
			}
			for _, bad := range s.intact(f) {
				t.Errorf("%s: %s", when, bad)
			}
		}
	}
	check("after the outage", false)
	outageFiles := s.filesOf(s.setsOf(src, db, seq))

	if err := s.verify.Start(); err != nil {
		t.Fatal(err)
	}
	later, err := finish(t, c, startCycle(t, sc, src, db), cycleLimit)
	if err != nil {
		t.Errorf("cycle after the verification instance returned: %v", err)
	}
	t.Logf("later cycle: seq %d", later.Sequence)
	check("after the later cycle", true)
	for _, f := range s.setsOf(src, db, seq) {
		t.Logf("outage set after the later cycle: %s", f)
	}
	if bad := unchanged(outageFiles, s.filesOf(s.setsOf(src, db, seq))); len(bad) > 0 {
		t.Errorf("files of set %d changed or gone: %v", seq, bad)
	}
	if bad := unchanged(goodFiles, s.hashes()); len(bad) > 0 {
		t.Errorf("files of the earlier verified set %d changed or gone: %v", good.Sequence, bad)
	}

	// `starter run --resume <seq>` finishes the set the outage left: the
	// input as JSON on the wire, under the database's workflow id.
	resumed, err := finish(t, c, s.startRaw(c, run.GetID(), map[string]any{"database": db, "instance": src, "resume": seq}), cycleLimit)
	if err != nil || resumed.Sequence != seq {
		t.Errorf("resume of set %d: seq %d, %v; want set %d verified", seq, resumed.Sequence, err, seq)
	}
	history := restoreHistory(t, s.verify)
	fs := s.setsOf(src, db, seq)
	if len(fs) != 2 {
		t.Errorf("set %d has %d manifests after the resume, want 2: %v", seq, len(fs), fs)
	}
	for _, f := range fs {
		if f.m.State != catalog.StateVerified {
			t.Errorf("after the resume: %s, want verified", f)
		} else {
			checkRestoredFrom(t, f, history)
		}
		for _, bad := range s.intact(f) {
			t.Errorf("after the resume: %s", bad)
		}
	}
	s.checkNewestOnTwo(t, src, db)
}

// TestSlowSanityCheck: a sanity query that runs longer than the heartbeat
// timeout (5 s here) is not a dead worker: the set is verified, with the
// checks run once.
func TestSlowSanityCheck(t *testing.T) {
	const db = "SlowSanity"
	s := newSite(t, db, smallDB, "")
	src := s.source()
	s.reconfigure(func(y string) string {
		return strings.Replace(y, "query: SELECT COUNT_BIG(*) FROM dbo.Orders",
			`query: "WAITFOR DELAY '00:00:12'; SELECT COUNT_BIG(*) FROM dbo.Orders"`, 1)
	}, db)
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s.inProcessWorker(c)
	sc := s.starterClient(c, srv)

	run := startCycle(t, sc, src, db)
	res, err := finish(t, c, run, time.Minute)
	if err != nil {
		t.Fatalf("cycle with a 12 s sanity query: %v", err)
	}
	h := history(t, c, run)
	if h.started["SanityChecks"] != 1 || h.completed["SanityChecks"] != 1 || h.failed["SanityChecks"] != 0 {
		t.Errorf("SanityChecks: %d attempts, %d completions, %d failures; want one attempt that completed",
			h.started["SanityChecks"], h.completed["SanityChecks"], h.failed["SanityChecks"])
	}
	fs := s.setsOf(src, db, res.Sequence)
	if len(fs) != 2 {
		t.Errorf("set %d has %d manifests, want 2: %v", res.Sequence, len(fs), fs)
	}
	for _, f := range fs {
		if f.m.State != catalog.StateVerified {
			t.Errorf("%s, want verified", f)
		}
	}
}

// TestCancelCycle cancels a cycle during the copy and another during
// CHECKDB: each ends Canceled, drops the verification database it restored,
// removes its partial files, leaves every earlier set as it was, and its
// manifest (where there is one) says cancelled.
func TestCancelCycle(t *testing.T) {
	cases := []struct {
		name, db, limit string
		slow            func(s *site)
		in              func(s *site, p workflows.Progress) bool
	}{
		{name: "copy", db: "CancelCopy", limit: "1MiB",
			slow: func(*site) {},
			in: func(s *site, p workflows.Progress) bool {
				return p.Step == activities.StepCopy && p.Percent >= 30
			}},
		{name: "checkdb", db: "CancelCheck",
			slow: func(s *site) { s.verify.SetThrottle(1 << 20) },
			in: func(s *site, p workflows.Progress) bool {
				return p.Step == activities.StepCheckDB && running(s.verify, "DBCC CHECKDB")
			}},
	}
	srv := sharedTemporal(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, srv)
			s := newSite(t, tc.db, 8<<20, "", bandwidth(tc.limit))
			src := s.source()
			s.inProcessWorker(c)
			sc := s.starterClient(c, srv)
			good, err := finish(t, c, startCycle(t, sc, src, tc.db), cycleLimit)
			if err != nil {
				t.Fatalf("clean cycle: %v", err)
			}
			before := s.hashes()
			tc.slow(s)

			run := startCycle(t, sc, src, tc.db)
			var at workflows.Progress
			until(t, "the cycle in step "+tc.name, time.Minute, func() bool {
				p, err := progress(c, run)
				at = p
				return err == nil && tc.in(s, p)
			})
			if err := c.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()); err != nil {
				t.Fatal(err)
			}
			_, err = finish(t, c, run, time.Minute)
			t.Logf("cancelled in step %s at %.0f %% (seq %d): %v", at.Step, at.Percent, at.Sequence, err)
			var canceled *temporal.CanceledError
			if !errors.As(err, &canceled) {
				t.Errorf("cancelled cycle ended with %v (type %q), want Canceled", err, errorType(err))
			}
			d, derr := c.DescribeWorkflowExecution(context.Background(), run.GetID(), run.GetRunID())
			if derr != nil {
				t.Fatal(derr)
			}
			if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED {
				t.Errorf("workflow status %s, want Canceled", st)
			}

			if names := databaseNames(t, s.verify); slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, tc.db) }) {
				t.Errorf("verification database left on %s after the cancel: %v", s.verify.Addr(), names)
			}
			if p := s.partialFiles(); len(p) > 0 {
				t.Errorf("partial files left after the cancel: %v", p)
			}
			if bad := unchanged(before, s.hashes()); len(bad) > 0 {
				t.Errorf("files of earlier sets changed or gone: %v", bad)
			}
			for _, f := range s.setsOf(src, tc.db, good.Sequence) {
				if f.m.State != catalog.StateVerified {
					t.Errorf("earlier set: %s, want still verified", f)
				}
			}
			cancelled := s.setsOf(src, tc.db, at.Sequence)
			if len(cancelled) == 0 {
				t.Errorf("the cancelled set %d has no manifest (its BACKUP had finished)", at.Sequence)
			}
			for _, f := range cancelled {
				if string(f.m.State) != "cancelled" {
					t.Errorf("cancelled set: %s, want state cancelled", f)
				}
			}
			// Every file left on a server is a manifest there or a stripe
			// such a manifest lists: nothing of the cancelled set lingers.
			if orphans := s.orphans(); len(orphans) > 0 {
				t.Errorf("files no manifest accounts for after the cancel: %v", orphans)
			}
		})
	}
}

// TestReplaceOnlyOwnVerifyDB: a database with the verification database's
// name that backupcycle did not restore is never replaced: the cycle fails
// with VerifyDatabaseInUse naming it, and it keeps every page. A copy
// backupcycle restored itself is still replaced by the next cycle.
func TestReplaceOnlyOwnVerifyDB(t *testing.T) {
	const db = "OwnVerify"
	s := newSite(t, db, smallDB, "    keep_verify_db: true\n")
	src := s.source()
	verifyDB := s.cfg.Databases[0].VerifyDatabaseName(1)
	if err := s.verify.CreateDatabase(sqlsim.DatabaseSpec{Name: verifyDB, Size: smallDB, LogicalName: "Foreign"}); err != nil {
		t.Fatal(err)
	}
	pages := func() map[string][32]byte {
		t.Helper()
		files, err := s.verify.DatabaseFiles(verifyDB)
		if err != nil {
			t.Fatalf("files of %s: %v", verifyDB, err)
		}
		out := map[string][32]byte{}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out[f] = sha256.Sum256(data)
		}
		return out
	}
	before := pages()
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s.inProcessWorker(c)
	sc := s.starterClient(c, srv)

	_, err := finish(t, c, startCycle(t, sc, src, db), cycleLimit)
	switch {
	case err == nil:
		t.Errorf("cycle succeeded over the foreign database %s, want VerifyDatabaseInUse", verifyDB)
	case errorType(err) != "VerifyDatabaseInUse" || !strings.Contains(err.Error(), verifyDB):
		t.Errorf("cycle failed with %v (type %q), want type VerifyDatabaseInUse naming %s", err, errorType(err), verifyDB)
	}
	restores := statementsOn(s.verify, func(d string) bool { return strings.EqualFold(d, verifyDB) }, "RESTORE DATABASE", "DROP DATABASE")
	if len(restores) > 0 {
		t.Errorf("%d RESTORE/DROP statements ran on the foreign database %s: %v", len(restores), verifyDB, restores[0].SQL)
	}
	if !slices.Contains(databaseNames(t, s.verify), verifyDB) {
		t.Fatalf("the foreign database %s is gone", verifyDB)
	}
	if bad := unchanged(before, pages()); len(bad) > 0 {
		t.Errorf("files of the foreign database %s changed: %v", verifyDB, bad)
	}

	// Without the foreign database, a cycle restores its copy, and the next
	// one replaces that copy: backupcycle restored it.
	stmt, err := tsql.DropDatabase(verifyDB)
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, s.verify, stmt)
	for i := 1; i <= 2; i++ {
		if _, err := finish(t, c, startCycle(t, sc, src, db), cycleLimit); err != nil {
			t.Errorf("cycle %d with its own verification copy: %v", i, err)
		}
	}
	s.checkNewestOnTwo(t, src, db)
}
