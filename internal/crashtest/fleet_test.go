package crashtest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	cycleacts "github.com/backupcycle/backupcycle/activities/cycle"
	fleetacts "github.com/backupcycle/backupcycle/activities/fleet"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
	"github.com/backupcycle/backupcycle/internal/tsql"
	starter "github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// opLog records, per backup server, when a stripe file of a set was open
// through the worker's storage (the copy reads and writes them).
type opLog struct {
	mu  sync.Mutex
	ops []op
}

// op is one use of a backup server on behalf of one set's owner
// (instance@database), from start to end.
type op struct {
	server, owner, what string
	start, end          time.Time
}

func (l *opLog) add(o op) {
	l.mu.Lock()
	l.ops = append(l.ops, o)
	l.mu.Unlock()
}

// recordingStorage is a storage.Storage that logs every stripe file it
// opens until the file is closed.
type recordingStorage struct {
	storage.Storage
	server string
	log    *opLog
}

func (r recordingStorage) track(name, what string) func() {
	// The copy writes and reads back <stripe>.partial before renaming it.
	p, ok := tsql.ParseStripeFileName(strings.TrimSuffix(name, copier.DefaultTempSuffix))
	if !ok {
		return func() {}
	}
	start := time.Now()
	return func() { r.log.add(op{server: r.server, owner: p.Owner(), what: what, start: start, end: time.Now()}) }
}

type trackedReader struct {
	storage.Reader
	done func()
}

func (t trackedReader) Close() error { t.done(); return t.Reader.Close() }

type trackedWriter struct {
	storage.Writer
	done func()
}

func (t trackedWriter) Close() error { t.done(); return t.Writer.Close() }

func (r recordingStorage) OpenRead(ctx context.Context, name string) (storage.Reader, error) {
	f, err := r.Storage.OpenRead(ctx, name)
	if err != nil {
		return nil, err
	}
	return trackedReader{f, r.track(name, "read")}, nil
}

func (r recordingStorage) Create(ctx context.Context, name string) (storage.Writer, error) {
	f, err := r.Storage.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return trackedWriter{f, r.track(name, "write")}, nil
}

func (r recordingStorage) OpenWrite(ctx context.Context, name string) (storage.Writer, error) {
	f, err := r.Storage.OpenWrite(ctx, name)
	if err != nil {
		return nil, err
	}
	return trackedWriter{f, r.track(name, "write")}, nil
}

// uncFile finds the backup server and stripe file a statement names.
var uncFile = regexp.MustCompile(`\\\\(bak0[12])\\backup\\([^']+?\.bak)'`)

// sqlOps are the emulators' own records of the statements that used a
// backup server (BACKUP writing a stripe, RESTORE reading one) and, for
// sources, the BACKUPs per instance.
func sqlOps(instances map[string]*sqlsim.Instance) (byServer []op, backups map[string][]op) {
	backups = map[string][]op{}
	for name, in := range instances {
		for _, s := range in.Statements() {
			if s.End.IsZero() {
				continue
			}
			for _, m := range uncFile.FindAllStringSubmatch(s.SQL, -1) {
				p, ok := tsql.ParseStripeFileName(m[2])
				if !ok {
					continue
				}
				o := op{server: m[1], owner: p.Owner(), what: name + " " + s.Kind, start: s.Start, end: s.End}
				byServer = append(byServer, o)
				if s.Kind == "BACKUP DATABASE" {
					backups[name] = append(backups[name], o)
				}
			}
		}
	}
	return byServer, backups
}

// peakOwners is the most distinct owners with an operation open at one
// instant, and when.
func peakOwners(ops []op) (int, time.Time, []string) {
	best, at, who := 0, time.Time{}, []string(nil)
	for _, o := range ops {
		owners := map[string]bool{}
		for _, x := range ops {
			if !x.start.After(o.start) && x.end.After(o.start) {
				owners[x.owner] = true
			}
		}
		if len(owners) > best {
			best, at, who = len(owners), o.start, nil
			for k := range owners {
				who = append(who, k)
			}
			sort.Strings(who)
		}
	}
	return best, at, who
}

// fleetSite is two source instances selecting their databases by pattern,
// a verification instance, and backup servers bak01 and bak02.
type fleetSite struct {
	root      string
	instances map[string]*sqlsim.Instance // by configuration name
	cfg       *config.Config
	tq        string
	log       *opLog
	dbNames   map[string][]string // databases created per source instance
}

func newFleetSite(t testing.TB, perInstance int, extraConfig string) *fleetSite {
	t.Helper()
	n := siteSeq.Add(1)
	s := &fleetSite{root: t.TempDir(), instances: map[string]*sqlsim.Instance{}, log: &opLog{}, dbNames: map[string][]string{},
		tq: fmt.Sprintf("fleet-%d", n)}
	_, shares, vshares := sitetest.MakeDirs(t, s.root)
	mk := func(name string, sh map[string]string) *sqlsim.Instance {
		return sitetest.StartInstance(t, name, filepath.Join(s.root, name), sh)
	}
	src1, src2 := fmt.Sprintf("fsql01-%d", n), fmt.Sprintf("fsql02-%d", n)
	s.instances[src1] = mk("sql01", shares)
	s.instances[src2] = mk("sql02", shares)
	verify := mk("verify01", vshares)
	s.instances["verify01"] = verify
	for name, prefix := range map[string]string{src1: "App", src2: "Shop"} {
		in := s.instances[name]
		// DBA exists on both: the same name on two instances.
		dbs := []string{"DBA", "Scratch"}
		for i := 1; i < perInstance; i++ {
			dbs = append(dbs, fmt.Sprintf("%s%02d", prefix, i))
		}
		s.dbNames[name] = dbs
		for i, db := range dbs {
			if err := in.CreateDatabase(sqlsim.DatabaseSpec{Name: db, Size: int64(512+64*(i%9)) << 10}); err != nil {
				t.Fatal(err)
			}
		}
	}
	y := fmt.Sprintf(`
defaults:
  stripes: 1
  compression: false
  verify_name: "{instance}_{db}_verify"
sql_instances:
  - {name: %[1]s, address: %[2]s, user: sa, password_env: %[5]s, encrypt: disable, max_concurrent: 3,
     databases: [USER_DATABASES, -Scratch], backup_servers: [bak01, bak02]}
  - {name: %[3]s, address: %[4]s, user: sa, password_env: %[5]s, encrypt: disable, max_concurrent: 3,
     databases: [USER_DATABASES, -Scratch], backup_servers: [bak02, bak01]}
  - {name: verify01, address: %[6]s, user: sa, password_env: %[5]s, encrypt: disable}
backup_servers:
  - {name: bak01, unc_paths: ['\\bak01\backup'], location: %[7]s, verify_instance: verify01,
     restore_data_dir: 'D:\restore\data', restore_log_dir: 'D:\restore\log', max_concurrent: 2}
  - {name: bak02, unc_paths: ['\\bak02\backup'], location: %[8]s, verify_instance: verify01,
     restore_data_dir: 'D:\restore\data', restore_log_dir: 'D:\restore\log', max_concurrent: 2}
fleet:
  max_concurrent: 8
%[9]s`, src1, s.instances[src1].Addr(), src2, s.instances[src2].Addr(), envSQLPass, verify.Addr(),
		shares[sitetest.UNC("bak01")], shares[sitetest.UNC("bak02")], extraConfig)
	path := filepath.Join(s.root, "backupcycle.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	if s.cfg, err = config.Load(path); err != nil {
		t.Fatalf("config: %v", err)
	}
	return s
}

// worker runs the product's activities in this process, every backup
// server opened through the recording storage.
func (s *fleetSite) worker(t testing.TB, c client.Client) {
	t.Helper()
	s.startWorker(t, c, newActivities(s.cfg, c), workerOptions())
}

// startWorker runs acts on a worker with opts, every backup server opened
// through the recording storage.
func (s *fleetSite) startWorker(t testing.TB, c client.Client, acts *activities.Activities, opts worker.Options) {
	t.Helper()
	acts.Cycle.OpenStorage = func(ctx context.Context, srv *config.BackupServer) (storage.Storage, error) {
		st, err := status.Open(ctx, srv)
		if err != nil {
			return nil, err
		}
		return recordingStorage{Storage: st, server: srv.Name, log: s.log}, nil
	}
	w := worker.New(c, s.tq, opts)
	workflows.Register(w, acts)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
}

func (s *fleetSite) source(i int) (string, *sqlsim.Instance) {
	var names []string
	for n := range s.instances {
		if n != "verify01" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names[i], s.instances[names[i]]
}

// TestFleetWithinLimits is the nightly run over 50 databases on two
// instances, selected by pattern: every limit holds, as the emulators and
// the storage recorded their own concurrent work; a database created after
// the configuration was written is included; one corrupt database fails
// alone; excluded and offline databases are reported, not run.
func TestFleetWithinLimits(t *testing.T) {
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s := newFleetSite(t, 25, "")
	name1, src1 := s.source(0)
	name2, src2 := s.source(1)
	// Created after the configuration: picked up by USER_DATABASES.
	if err := src1.CreateDatabase(sqlsim.DatabaseSpec{Name: "Late", Size: 4 << 20}); err != nil {
		t.Fatal(err)
	}
	// One corrupt page: BACKUP WITH CHECKSUM refuses it.
	if err := src2.CorruptPage("Shop07", 1, 20); err != nil {
		t.Fatal(err)
	}
	// Offline: reported, not run.
	db, err := sql.Open("sqlserver", src2.DSN("sa", sqlPassword, "master"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := src2.CreateDatabase(sqlsim.DatabaseSpec{Name: "Archive"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("ALTER DATABASE [Archive] SET OFFLINE"); err != nil {
		t.Fatal(err)
	}
	s.worker(t, c)

	began := time.Now()
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "fleet-" + s.tq, TaskQueue: s.tq},
		workflows.FleetName, workflows.FleetInput{StartsPerRun: 20})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	var res workflows.FleetResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("fleet: %v", err)
	}
	took := time.Since(began)

	byKey := map[string]workflows.DatabaseOutcome{}
	for _, o := range res.Outcomes {
		byKey[o.Instance+"/"+o.Database] = o
	}
	if res.Counts[workflows.OutcomeVerified] != 50 || res.Counts[workflows.OutcomeFailed] != 1 {
		t.Errorf("counts %v, want 50 verified (49 + Late) and 1 failed", res.Counts)
	}
	if o := byKey[name2+"/Shop07"]; o.Outcome != workflows.OutcomeFailed || o.Type == "" {
		t.Errorf("Shop07: %+v, want failed with an error type", o)
	}
	for _, k := range []string{name1 + "/Late", name1 + "/DBA", name2 + "/DBA"} {
		if o := byKey[k]; o.Outcome != workflows.OutcomeVerified {
			t.Errorf("%s: %+v, want verified", k, o)
		}
	}
	for _, k := range []string{name1 + "/Scratch", name2 + "/Scratch", name2 + "/Archive"} {
		if o := byKey[k]; o.Outcome != workflows.OutcomeNotRun || o.Reason == "" {
			t.Errorf("%s: %+v, want not-run with the reason (excluded / offline)", k, o)
		}
	}

	// The limits, from the emulators' statement logs and the storage's
	// log of open stripe files, never from the workflow's counters.
	sqlByServer, backups := sqlOps(s.instances)
	s.log.mu.Lock()
	all := append(append([]op(nil), sqlByServer...), s.log.ops...)
	s.log.mu.Unlock()
	for _, server := range []string{"bak01", "bak02"} {
		var ops []op
		for _, o := range all {
			if o.server == server {
				ops = append(ops, o)
			}
		}
		if len(ops) < 50 {
			t.Errorf("%s: only %d operations recorded: the logs do not see the run", server, len(ops))
		}
		if n, at, who := peakOwners(ops); n > 2 {
			t.Errorf("%s: %d sets in use at %s (%v), limit 2", server, n, at.Format(time.RFC3339Nano), who)
		} else {
			t.Logf("%s: peak %d sets at once over %d operations", server, n, len(ops))
		}
	}
	for _, name := range []string{name1, name2} {
		if n, at, who := peakOwners(backups[name]); n > 3 {
			t.Errorf("%s: %d BACKUPs at %s (%v), limit 3", name, n, at.Format(time.RFC3339Nano), who)
		}
	}
	t.Logf("fleet of %d databases: %s (%v)", len(res.Outcomes), took.Round(time.Second), res.Counts)
}

// TestFleetSchedule: the fleet's schedule, as `starter schedule --apply
// --fleet` creates it, triggered, runs the Fleet workflow, which verifies
// the selected databases.
func TestFleetSchedule(t *testing.T) {
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s := newFleetSite(t, 2, "")
	s.worker(t, c)
	sc := starter.New(c, config.Temporal{Address: srv.FrontendAddress(), Namespace: srv.Namespace(), TaskQueue: s.tq}, zap.NewNop())
	ctx := context.Background()
	// A cron that does not come due during the test: it runs when triggered.
	res, err := sc.ApplyFleetSchedule(ctx, starter.ScheduleSpec{Cron: "0 3 29 2 *"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.DeleteSchedule(context.Background(), res.ScheduleID) })
	if err := sc.TriggerSchedule(ctx, res.ScheduleID); err != nil {
		t.Fatal(err)
	}
	var wfID string
	until(t, "the schedule to start the fleet", time.Minute, func() bool {
		d, err := sc.DescribeSchedule(ctx, res.ScheduleID)
		wfID = d.LastWorkflowID
		return err == nil && wfID != ""
	})
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var out workflows.FleetResult
	if err := c.GetWorkflow(wctx, wfID, "").Get(wctx, &out); err != nil {
		t.Fatalf("scheduled fleet %s: %v", wfID, err)
	}
	if out.Counts[workflows.OutcomeVerified] != 4 || !strings.HasPrefix(wfID, workflows.FleetWorkflowID) {
		t.Errorf("scheduled fleet %s: %v, want the 4 selected databases verified", wfID, out.Counts)
	}
}

// TestCopyOnServerTaskQueue: a backup server with a task_queue gets its
// copies run by the worker polling that queue (one next to the server);
// the cycle's other steps stay on the cycle's queue.
func TestCopyOnServerTaskQueue(t *testing.T) {
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s := newFleetSite(t, 2, "")
	copyQueue := s.tq + "-bak01"
	for i := range s.cfg.BackupServers {
		if s.cfg.BackupServers[i].Name == "bak01" {
			s.cfg.BackupServers[i].TaskQueue = copyQueue
		}
	}
	s.worker(t, c)
	// The worker next to bak01: the same activities, its own queue.
	var ranHere sync.Map
	acts := newActivities(s.cfg, c)
	w := worker.New(c, copyQueue, workerOptions())
	workflows.Register(w, acts)
	w.RegisterActivityWithOptions(func(ctx context.Context, in activities.CopyInput) (activities.CopyOutput, error) {
		ranHere.Store(in.Database, true)
		return cycleacts.New(acts).CopyToRemote(ctx, in)
	}, activity.RegisterOptions{Name: "CopyToRemote", DisableAlreadyRegisteredCheck: true})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	name, _ := s.source(0)
	for _, db := range []string{"DBA", "App01"} {
		run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: workflows.CycleWorkflowID(name, db), TaskQueue: s.tq},
			workflows.BackupCycleName, workflows.CycleInput{Database: db, Instance: name})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wait(t, run, 3*time.Minute); err != nil {
			t.Fatalf("cycle of %s: %v", db, err)
		}
		h := history(t, c, run)
		var queues []string
		for _, ev := range h.events.Events {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "CopyToRemote" {
				queues = append(queues, a.GetTaskQueue().GetName())
			}
		}
		if len(queues) != 1 || queues[0] != copyQueue {
			t.Errorf("%s: CopyToRemote scheduled on %v, want %s (bak01 is in every copy of this rotation)", db, queues, copyQueue)
		}
		if _, ok := ranHere.Load(db); !ok {
			t.Errorf("%s: the copy did not run on the worker polling %s", db, copyQueue)
		}
	}
}

// Two databases the selections pick on two instances (DBA on both), with
// their log chains proven on standby copies on one verification instance
// and the default standby_name "{db}_standby": their standby copies would
// have one name. The configuration check cannot see it (the names come
// from sys.databases); the Fleet's plan starts one chain and names the
// other with the fix, instead of letting the second chain's proofs be
// refused forever while its logs go unproven.
func TestFleetRefusesCollidingStandbyCopies(t *testing.T) {
	s := newFleetSite(t, 1, "")
	s.cfg.Defaults.OwnsBackupChain, s.cfg.Defaults.CopyOnly = true, false
	s.cfg.Defaults.LogBackup.Every = time.Minute
	s.cfg.Defaults.LogProof = "standby"
	acts := activities.New(zap.NewNop())
	acts.Cycle = activities.CycleDeps{Config: s.cfg}
	fp, err := fleetacts.New(acts).PlanFleet(context.Background(), fleetacts.FleetInput{})
	if err != nil {
		t.Fatal(err)
	}
	var chains []string
	for _, c := range fp.LogChains {
		chains = append(chains, c.Instance+"/"+c.Database)
	}
	refused := ""
	for _, nr := range fp.NotRun {
		if strings.Contains(nr.Reason, "standby") {
			refused = nr.Instance + "/" + nr.Database + ": " + nr.Reason
		}
	}
	if len(chains) != 1 || !strings.Contains(refused, `standby copy "DBA_standby" on verify01 would collide`) ||
		!strings.Contains(refused, "standby_name") {
		t.Fatalf("log chains %v, refused %q: want one DBA chain and the other named with the fix", chains, refused)
	}
	// Both databases still get their nightly cycle.
	if len(fp.Items) != 2 {
		t.Fatalf("fleet items %+v, want both DBA databases", fp.Items)
	}
}
