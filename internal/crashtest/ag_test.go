package crashtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/internal/preflight"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/internal/tsql"
	starter "github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// agSite is an Always On availability group over two source instances
// (replicas a and b, both selecting USER_DATABASES), database Sales in the
// group on both, Local on a alone, a verification instance and backup
// servers bak01 and bak02.
type agSite struct {
	t              *testing.T
	root, cfgPath  string
	a, b, verify   *sqlsim.Instance
	nameA, nameB   string // their configuration names
	group          string // the group's configuration name
	g              *sqlsim.AvailabilityGroup
	shares, vshare map[string]string
	cfg            *config.Config
	tq             string
	w              worker.Worker
}

// newAGSite starts the site with the group's AUTOMATED_BACKUP_PREFERENCE
// preference, a the primary and b a secondary (readable or not).
func newAGSite(t *testing.T, preference string, readableB bool) *agSite {
	t.Helper()
	n := siteSeq.Add(1)
	s := &agSite{t: t, root: t.TempDir(), nameA: fmt.Sprintf("agsql01-%d", n), nameB: fmt.Sprintf("agsql02-%d", n),
		group: fmt.Sprintf("agsales-%d", n), tq: fmt.Sprintf("ag-%d", n)}
	_, s.shares, s.vshare = sitetest.MakeDirs(t, s.root)
	s.a = sitetest.StartInstance(t, "sqlA", filepath.Join(s.root, "sqlA"), s.shares)
	s.b = sitetest.StartInstance(t, "sqlB", filepath.Join(s.root, "sqlB"), s.shares)
	s.verify = sitetest.StartInstance(t, "verify01", filepath.Join(s.root, "verify01"), s.vshare)
	for _, in := range []*sqlsim.Instance{s.a, s.b} {
		if err := in.CreateDatabase(sqlsim.DatabaseSpec{Name: "Sales", Size: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.a.CreateDatabase(sqlsim.DatabaseSpec{Name: "Local", Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	var err error
	if s.g, err = sqlsim.NewAvailabilityGroup("AG_Sales", preference); err != nil {
		t.Fatal(err)
	}
	if err := s.g.AddReplica(s.a, sqlsim.ReplicaOptions{Primary: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.g.AddReplica(s.b, sqlsim.ReplicaOptions{Readable: readableB}); err != nil {
		t.Fatal(err)
	}
	if err := s.g.AddDatabase("Sales"); err != nil {
		t.Fatal(err)
	}
	return s
}

// configure writes and loads the configuration: with the group when
// group is true (else the replicas are two instances, as before the group
// was configured), extra appended.
func (s *agSite) configure(group bool, extra string) {
	s.t.Helper()
	groups := ""
	if group {
		groups = fmt.Sprintf("availability_groups:\n  - {name: %s, availability_group: AG_Sales, replicas: [%s, %s]}\n", s.group, s.nameA, s.nameB)
	}
	y := fmt.Sprintf(`
defaults:
  stripes: 1
  compression: false
  retention: {keep_verified: 3}
sql_instances:
  - {name: %[1]s, address: %[2]s, user: sa, password_env: %[5]s, encrypt: disable, databases: [USER_DATABASES], backup_servers: [bak01, bak02]}
  - {name: %[3]s, address: %[4]s, user: sa, password_env: %[5]s, encrypt: disable, databases: [USER_DATABASES], backup_servers: [bak01, bak02]}
  - {name: verify01, address: %[6]s, user: sa, password_env: %[5]s, encrypt: disable}
backup_servers:
  - {name: bak01, unc_paths: ['\\bak01\backup'], location: %[7]s, verify_instance: verify01,
     restore_data_dir: 'D:\restore\data', restore_log_dir: 'D:\restore\log'}
  - {name: bak02, unc_paths: ['\\bak02\backup'], location: %[8]s, verify_instance: verify01,
     restore_data_dir: 'D:\restore\data', restore_log_dir: 'D:\restore\log'}
%[9]s%[10]s`, s.nameA, s.a.Addr(), s.nameB, s.b.Addr(), envSQLPass, s.verify.Addr(),
		s.shares[sitetest.UNC("bak01")], s.shares[sitetest.UNC("bak02")], groups, extra)
	s.cfgPath = filepath.Join(s.root, "backupcycle.yaml")
	if err := os.WriteFile(s.cfgPath, []byte(y), 0o600); err != nil {
		s.t.Fatal(err)
	}
	var err error
	if s.cfg, err = config.Load(s.cfgPath); err != nil {
		s.t.Fatalf("config: %v", err)
	}
}

// worker (re)starts the site's worker on its configuration.
func (s *agSite) worker(c client.Client) {
	s.t.Helper()
	if s.w != nil {
		s.w.Stop()
	}
	s.w = worker.New(c, s.tq, workerOptions())
	workflows.Register(s.w, newActivities(s.cfg, c))
	if err := s.w.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(s.w.Stop)
}

// starter is the product's starter client on the site's task queue.
func (s *agSite) starter(srv *devserver.Server, c client.Client) *starter.Client {
	return starter.New(c, config.Temporal{Address: srv.FrontendAddress(), Namespace: srv.Namespace(), TaskQueue: s.tq}, zap.NewNop())
}

// salesLines are the instances status --from-manifests shows Sales under,
// and the line of the group.
func (s *agSite) salesLines() ([]string, status.Database) {
	var lines []string
	var group status.Database
	for _, d := range status.Load(context.Background(), s.cfg, nil, time.Now()).Databases {
		if d.Database == "Sales" {
			lines = append(lines, d.Instance)
			if d.Instance == s.group {
				group = d
			}
		}
	}
	return lines, group
}

// fleet runs the Fleet over the whole configuration and returns its
// outcomes by instance/database.
func (s *agSite) fleet(c client.Client, n int) (workflows.FleetResult, map[string]workflows.DatabaseOutcome) {
	s.t.Helper()
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: fmt.Sprintf("fleet-%s-%d", s.tq, n), TaskQueue: s.tq},
		workflows.FleetName, workflows.FleetInput{})
	if err != nil {
		s.t.Fatal(err)
	}
	res, err := waitFor[workflows.FleetResult](s.t, run, 5*time.Minute)
	if err != nil {
		s.t.Fatalf("fleet: %v", err)
	}
	by := map[string]workflows.DatabaseOutcome{}
	for _, o := range res.Outcomes {
		by[o.Instance+"/"+o.Database] = o
	}
	return res, by
}

// salesBackups are the completed BACKUP DATABASE statements of Sales on in.
func salesBackups(in *sqlsim.Instance) []sqlsim.StatementRecord {
	var out []sqlsim.StatementRecord
	for _, st := range sitetest.Statements(in, "BACKUP DATABASE") {
		if strings.Contains(st.SQL, "[Sales]") && st.Outcome == "ok" {
			out = append(out, st)
		}
	}
	return out
}

// backedUpOnce checks the BACKUPs of Sales so far, wantA on a and wantB
// on b, the newest on the secondary on, COPY_ONLY, into the group's files.
func (s *agSite) backedUpOnce(t *testing.T, when string, on *sqlsim.Instance, wantA, wantB int) {
	t.Helper()
	onA, onB := salesBackups(s.a), salesBackups(s.b)
	if len(onA) != wantA || len(onB) != wantB {
		t.Fatalf("%s: %d BACKUPs of Sales on %s, %d on %s; want %d and %d", when, len(onA), s.nameA, len(onB), s.nameB, wantA, wantB)
	}
	last := onB[len(onB)-1]
	if on == s.a {
		last = onA[len(onA)-1]
	}
	if !strings.Contains(last.SQL, "COPY_ONLY") {
		t.Errorf("%s: the secondary's BACKUP is not COPY_ONLY: %s", when, last.SQL)
	}
	if owner, want := ownerOf(t, last), tsql.OwnerOf(s.group, "Sales"); owner != want {
		t.Errorf("%s: files named %s, want the group's %s", when, owner, want)
	}
}

var stripeOf = regexp.MustCompile(`\\\\bak0[12]\\backup\\([^']+?\.bak)'`)

// ownerOf is the <instance>@<db> part of the stripe a BACKUP wrote.
func ownerOf(t *testing.T, st sqlsim.StatementRecord) string {
	t.Helper()
	m := stripeOf.FindStringSubmatch(st.SQL)
	if m == nil {
		t.Fatalf("no stripe in %s", st.SQL)
	}
	p, ok := tsql.ParseStripeFileName(m[1])
	if !ok {
		t.Fatalf("stripe name %s does not parse", m[1])
	}
	return p.Owner()
}

// TestAGFleetBacksUpOnceOnThePreferredReplica: two replicas configured,
// both selecting USER_DATABASES, preference SECONDARY: the fleet backs the
// availability database up once, on the readable secondary, COPY_ONLY,
// named by the group; after a fail-over the next night continues the same
// sequence on the other replica (now the secondary), and status sees one
// database.
func TestAGFleetBacksUpOnceOnThePreferredReplica(t *testing.T) {
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s := newAGSite(t, sqlsim.PreferSecondary, true)
	s.configure(true, "")
	s.worker(c)

	res, by := s.fleet(c, 1)
	key := s.group + "/Sales"
	first := by[key]
	if first.Outcome != workflows.OutcomeVerified || first.WorkflowID != workflows.CycleWorkflowID(s.group, "Sales") {
		t.Fatalf("first night: Sales is %+v, want verified as %s (outcomes %v)", first, key, res.Outcomes)
	}
	if o := by[s.nameA+"/Local"]; o.Outcome != workflows.OutcomeVerified {
		t.Errorf("Local, outside the group: %+v, want verified under %s", o, s.nameA)
	}
	for _, k := range []string{s.nameA + "/Sales", s.nameB + "/Sales"} {
		if o, ok := by[k]; ok {
			t.Errorf("Sales backed up as a replica's own database too: %s %+v", k, o)
		}
	}
	s.backedUpOnce(t, "first night", s.b, 0, 1)

	// Fail-over: b is the primary, a a secondary that allows no
	// connections (it was added without Readable).
	if err := s.g.Failover(s.b); err != nil {
		t.Fatal(err)
	}
	_, by = s.fleet(c, 2)
	second := by[key]
	if second.Outcome != workflows.OutcomeVerified || second.Sequence <= first.Sequence {
		t.Fatalf("after the fail-over: %+v, want verified with a sequence above %d", second, first.Sequence)
	}
	s.backedUpOnce(t, "after the fail-over", s.a, 1, 1)

	lines, d := s.salesLines()
	if d.LastVerified == nil || d.LastVerified.Sequence != second.Sequence {
		t.Errorf("status of %s: %+v, want its last verified set %d", key, d.LastVerified, second.Sequence)
	}
	if !slices.Equal(lines, []string{s.group}) {
		t.Errorf("status shows Sales under %v, want one line, %s", lines, s.group)
	}
}

// TestAGPreferPrimaryAndStartThroughSecondary: preference PRIMARY; a
// start through the secondary resolves to the group's cycle, which backs
// up once, on the primary. With SECONDARY_ONLY and the only secondary not
// synchronizing, no replica can back up: the fleet reports
// skipped-not-preferred-replica, no BACKUP runs, nothing fails.
func TestAGPreferPrimaryAndStartThroughSecondary(t *testing.T) {
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s := newAGSite(t, sqlsim.PreferPrimary, false)
	s.configure(true, "")
	s.worker(c)
	sc := s.starter(srv, c)

	run := startCycle(t, sc, s.nameB, "Sales")
	res, err := wait(t, run, 3*time.Minute)
	if err != nil {
		t.Fatalf("cycle started through the secondary: %v", err)
	}
	if res.RunBy != workflows.CycleWorkflowID(s.group, "Sales") || res.Instance != s.group {
		t.Errorf("start through %s: ran by %q for %q, want the group's cycle %s", s.nameB, res.RunBy, res.Instance, workflows.CycleWorkflowID(s.group, "Sales"))
	}
	if a, b := len(salesBackups(s.a)), len(salesBackups(s.b)); a != 1 || b != 0 {
		t.Fatalf("PRIMARY: %d BACKUPs of Sales on the primary, %d on the secondary; want 1 and 0", a, b)
	}

	if err := s.g.SetPreference(sqlsim.PreferSecondaryOnly); err != nil {
		t.Fatal(err)
	}
	if err := s.g.SetSynchronizationState(s.b, "Sales", sqlsim.NotSynchronizing); err != nil {
		t.Fatal(err)
	}
	fr, by := s.fleet(c, 1)
	o := by[s.group+"/Sales"]
	if o.Outcome != workflows.OutcomeNotPreferred || !strings.Contains(o.Reason, s.nameA) || !strings.Contains(o.Reason, "NOT SYNCHRONIZING") {
		t.Errorf("SECONDARY_ONLY, secondary not synchronizing: %+v, want %s naming each replica's answer", o, workflows.OutcomeNotPreferred)
	}
	if fr.Counts[workflows.OutcomeFailed] != 0 || fr.Counts[workflows.OutcomeNotPreferred] != 1 {
		t.Errorf("fleet counts %v", fr.Counts)
	}
	if a, b := len(salesBackups(s.a)), len(salesBackups(s.b)); a != 1 || b != 0 {
		t.Errorf("a skipped cycle ran a BACKUP: %d on the primary, %d on the secondary", a, b)
	}
}

// TestAGOwnsBackupChainOnSecondary: owns_backup_chain on a database of the
// group whose preferred backup replica is a secondary is refused: preflight
// names it on that replica with the fix, and the cycle fails InvalidConfig
// at its plan, before any BACKUP.
func TestAGOwnsBackupChainOnSecondary(t *testing.T) {
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s := newAGSite(t, sqlsim.PreferSecondary, false)
	s.configure(true, fmt.Sprintf("databases:\n  - {name: Sales, instance: %s, backup_servers: [bak01, bak02], owns_backup_chain: true}\n", s.group))
	s.worker(c)

	rep, err := preflight.Run(context.Background(), preflight.Options{Config: s.cfg, Database: "Sales"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ch := range rep.Checks {
		if ch.Name != "owns_backup_chain" {
			continue
		}
		switch ch.Instance {
		case s.nameB:
			found = ch.Status == preflight.Missing && strings.Contains(ch.Fix, "AUTOMATED_BACKUP_PREFERENCE = PRIMARY") &&
				strings.Contains(ch.Fix, "owns_backup_chain")
		case s.nameA:
			if ch.Status != preflight.OK {
				t.Errorf("owns_backup_chain on the primary, not preferred: %+v", ch)
			}
		}
	}
	if !found || rep.OK {
		t.Errorf("preflight does not refuse owns_backup_chain on the preferred secondary %s: %+v", s.nameB, rep.Checks)
	}

	sc := s.starter(srv, c)
	_, err = wait(t, startCycle(t, sc, s.group, "Sales"), 3*time.Minute)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrInvalidConfig || !strings.Contains(err.Error(), "owns_backup_chain") ||
		!strings.Contains(err.Error(), "step plan") {
		t.Errorf("cycle with owns_backup_chain on the preferred secondary: %v, want InvalidConfig at step plan naming owns_backup_chain", err)
	}
	if a, b := len(sitetest.Statements(s.a, "BACKUP DATABASE")), len(sitetest.Statements(s.b, "BACKUP DATABASE")); a+b != 0 {
		t.Errorf("%d BACKUP statements ran on the replicas, want none", a+b)
	}
}

// TestAGKeepsSetsWrittenBeforeTheGroup: sets the replicas wrote under
// their own names before the group was configured stay the database's: the
// group's sequence goes on above them, status shows one database, and
// retention counts them with the group's sets (keep_verified 3 of 4: the
// oldest goes, as it would have among one instance's sets).
func TestAGKeepsSetsWrittenBeforeTheGroup(t *testing.T) {
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s := newAGSite(t, sqlsim.PreferSecondary, true)
	s.configure(false, "")
	s.worker(c)
	sc := s.starter(srv, c)
	var before []int64
	for _, inst := range []string{s.nameA, s.nameA, s.nameB} {
		res, err := wait(t, startCycle(t, sc, inst, "Sales"), 3*time.Minute)
		if err != nil {
			t.Fatalf("cycle of %s/Sales before the group: %v", inst, err)
		}
		if !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "list them under availability_groups") }) {
			t.Errorf("cycle of %s/Sales, an availability database of no configured group: warnings %v, want the one naming availability_groups", inst, res.Warnings)
		}
		before = append(before, res.Sequence)
	}

	s.configure(true, "")
	s.worker(c)
	res, err := wait(t, startCycle(t, sc, s.group, "Sales"), 3*time.Minute)
	if err != nil {
		t.Fatalf("the group's first cycle: %v", err)
	}
	if top := slices.Max(before); res.Sequence <= top {
		t.Errorf("the group's first set is %d, not above the replicas' sets %v", res.Sequence, before)
	}
	var deleted []string
	for _, d := range res.Deleted {
		deleted = append(deleted, fmt.Sprintf("%s:%d", d.Server, d.Sequence))
	}
	slices.Sort(deleted)
	if want := []string{fmt.Sprintf("bak01:%d", before[0]), fmt.Sprintf("bak02:%d", before[0])}; !slices.Equal(deleted, want) {
		t.Errorf("retention deleted %v, want the oldest set %d on both servers (%v): the sets before the group count", deleted, before[0], want)
	}
	lines, d := s.salesLines()
	if !slices.Equal(lines, []string{s.group}) || d.LastVerified == nil || d.LastVerified.Sequence != res.Sequence {
		t.Errorf("status shows Sales under %v, want one line, %s", lines, s.group)
	}
	// The kept sets are still where they were, under their own names.
	for _, kept := range []struct {
		owner string
		seq   int64
	}{{s.nameA, before[1]}, {s.nameB, before[2]}} {
		name := tsql.ManifestFileName(kept.owner, "Sales", kept.seq)
		if _, err := os.Stat(filepath.Join(s.shares[sitetest.UNC("bak01")], name)); err != nil {
			t.Errorf("set %s written before the group is gone: %v", name, err)
		}
	}
}
