package devenv_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/mssql"
)

const testSize = 16 << 20

func start(t *testing.T, dir string) *devenv.Site {
	t.Helper()
	s, err := devenv.Start(context.Background(), devenv.Options{StateDir: dir, DatabaseSize: testSize,
		TemporalAddress: "127.0.0.1:7399", Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// activityEnv runs the cycle's real activities on the site's configuration.
func activityEnv(s *devenv.Site) (*activities.Activities, *testsuite.TestActivityEnvironment) {
	acts := activities.New(nil)
	acts.Cycle = activities.CycleDeps{Config: s.Config, Poll: 50 * time.Millisecond}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	return acts, env
}

func run[T any](t *testing.T, env *testsuite.TestActivityEnvironment, fn, in any) T {
	t.Helper()
	var out T
	v, err := env.ExecuteActivity(fn, in)
	if err != nil {
		t.Fatalf("%T %+v: %v", in, in, err)
	}
	if v != nil && v.HasValue() {
		if err := v.Get(&out); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// The site's configuration drives the real activities end to end: backup
// over a UNC path to bak01, copy to bak02, restore and CHECKDB on the
// verification instance, and every sanity check of the config holds on the
// restored copy.
func TestSiteRunsTheCycleSteps(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	if !s.Created || s.CreateTime <= 0 {
		t.Fatalf("first start: Created %v after %s, want a new database", s.Created, s.CreateTime)
	}

	// The file on disk is the configuration returned, and it loads on its own.
	if s.ConfigFile != filepath.Join(dir, devenv.ConfigFile) {
		t.Errorf("config file %s", s.ConfigFile)
	}
	loaded, err := config.Load(s.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Temporal.Address != "127.0.0.1:7399" {
		t.Errorf("temporal address %q", loaded.Temporal.Address)
	}
	src, _ := loaded.SQLInstance(devenv.SourceInstance)
	if src.Address != s.Source.Addr() || src.Password.File == "" || src.Password.Env != "" {
		t.Errorf("sql01 in the config: %+v; want the emulator's address %s and a password file", src, s.Source.Addr())
	}
	text, _ := os.ReadFile(s.ConfigFile)
	pw, _ := os.ReadFile(src.Password.File)
	if strings.Contains(string(text), strings.TrimSpace(string(pw))) {
		t.Error("the password is written into the configuration")
	}
	if st, err := os.Stat(src.Password.File); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("password file: %v %v, want mode 0600", err, st)
	}
	for _, b := range devenv.BackupServers {
		srv, _ := loaded.BackupServer(b)
		if len(srv.UNCPaths) != 2 || srv.Loc.Scheme != "file" || srv.Loc.Path != s.BackupDirs[b] {
			t.Errorf("backup server %s: %+v", b, srv)
		}
	}

	// Sales: four data files over the two volumes, and a log.
	files, err := s.Source.DatabaseFiles(devenv.Database)
	if err != nil {
		t.Fatal(err)
	}
	vols := map[string]int{}
	var total int64
	for _, f := range files {
		vols[filepath.Base(filepath.Dir(f))]++
		if st, err := os.Stat(f); err == nil {
			total += st.Size()
		}
	}
	if len(files) != 5 || vols["volume-d"] != 2 || vols["volume-e"] != 3 || total < testSize {
		t.Errorf("Sales files %v (%d bytes): want 4 data files + log over volume-d and volume-e", files, total)
	}

	acts, env := activityEnv(s)
	plan := run[activities.Plan](t, env, acts.PlanCycle, activities.PlanInput{Database: devenv.Database})
	if plan.Rotation[0] != "bak01" || plan.Remote != "bak02" || plan.Stripes != 4 || plan.VerifyInstance != devenv.VerifyInstance {
		t.Fatalf("plan %+v", plan)
	}
	seq := run[int64](t, env, acts.AllocateSequence, activities.SequenceInput{Database: devenv.Database})
	b := run[activities.BackupOutput](t, env, acts.Backup, activities.BackupInput{Database: devenv.Database, Sequence: seq, Server: "bak01", Stripes: 4})
	nics := map[string]int{}
	for _, st := range b.Stripes {
		nics[strings.Split(st.Path, `\`)[2]]++
		if _, err := os.Stat(filepath.Join(s.BackupDirs["bak01"], st.Name)); err != nil {
			t.Errorf("stripe %s not in bak01's directory: %v", st.Name, err)
		}
	}
	if nics["bak01-nic1"] != 2 || nics["bak01-nic2"] != 2 {
		t.Errorf("stripes per NIC path: %v, want 2 and 2", nics)
	}
	run[activities.ManifestOutput](t, env, acts.WriteManifest, activities.ManifestInput{Database: devenv.Database, Sequence: seq, Server: "bak01", Backup: b})
	run[activities.CopyOutput](t, env, acts.CopyToRemote, activities.CopyInput{Database: devenv.Database, Sequence: seq, From: "bak01", To: "bak02"})
	verify := activities.VerifyInput{Database: devenv.Database, Sequence: seq, Server: "bak02"}
	r := run[activities.StepOutput](t, env, acts.Restore, verify)
	if want := fmt.Sprintf("Sales_verify_%08d", seq); r.VerifyDatabase != want {
		t.Errorf("restored as %q, want %q (one copy per set)", r.VerifyDatabase, want)
	}
	restored, err := s.Verify.DatabaseFiles(r.VerifyDatabase)
	if err != nil || len(restored) != 5 {
		t.Fatalf("restored copy %s: %v %v", r.VerifyDatabase, restored, err)
	}
	for _, f := range restored {
		if !strings.HasPrefix(f, filepath.Join(dir, devenv.VerifyInstance, "restore")) {
			t.Errorf("restored file %s outside the verification instance's restore volume", f)
		}
	}
	run[activities.StepOutput](t, env, acts.CheckDB, verify)
	sanity := run[activities.StepOutput](t, env, acts.SanityChecks, verify)
	if sanity.Checks != 4 {
		t.Errorf("sanity checks run: %d, want 4", sanity.Checks)
	}

	// A restart continues: same database (not created again), the sequence
	// goes on, the manifest written before is still there.
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	s2 := start(t, dir)
	if s2.Created {
		t.Error("second start created Sales again")
	}
	acts2, env2 := activityEnv(s2)
	if next := run[int64](t, env2, acts2.AllocateSequence, activities.SequenceInput{Database: devenv.Database}); next != seq+1 {
		t.Errorf("sequence after restart %d, want %d", next, seq+1)
	}
	st, err := os.ReadDir(s2.BackupDirs["bak01"])
	if err != nil {
		t.Fatal(err)
	}
	var manifests int
	for _, e := range st {
		if strings.HasSuffix(e.Name(), ".manifest.json") {
			manifests++
		}
	}
	if manifests != 1 {
		t.Errorf("bak01 after restart holds %d manifests, want 1", manifests)
	}
}

// The freshness stamp moves on every start, and the restored copy would
// see it: a site restarted after a day still passes `activity-fresh`.
func TestRestartStampsActivity(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	first := lastWrite(t, s)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // GETUTCDATE has (at least) second resolution
	s2 := start(t, dir)
	if second := lastWrite(t, s2); !second.After(first) {
		t.Errorf("LastWrite %s after restart, was %s: want later", second, first)
	}
}

func lastWrite(t *testing.T, s *devenv.Site) time.Time {
	t.Helper()
	inst, _ := s.Config.SQLInstance(devenv.SourceInstance)
	target, err := mssql.TargetFor(*inst, devenv.Database)
	if err != nil {
		t.Fatal(err)
	}
	db, err := mssql.Open(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v, _, err := db.QueryValue(context.Background(), "t", "SELECT MAX(LastWrite) FROM dbo.SiteActivity")
	if err != nil {
		t.Fatal(err)
	}
	tm, ok := v.(time.Time)
	if !ok {
		t.Fatalf("MAX(LastWrite) = %T %v", v, v)
	}
	return tm
}

func TestStartErrors(t *testing.T) {
	if _, err := devenv.Start(context.Background(), devenv.Options{}); err == nil || !strings.Contains(err.Error(), "StateDir is empty") {
		t.Errorf("no state dir: %v", err)
	}
	_, err := devenv.Start(context.Background(), devenv.Options{StateDir: t.TempDir(), DatabaseSize: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "use at least 4 MiB") {
		t.Errorf("tiny database: %v", err)
	}
}

// The emulator's catalog holds absolute paths: a moved state directory is
// refused with the fix instead of serving files from the old place.
func TestMovedStateDirIsRefused(t *testing.T) {
	root := t.TempDir()
	old, moved := filepath.Join(root, "a"), filepath.Join(root, "b")
	s := start(t, old)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(old, moved); err != nil {
		t.Fatal(err)
	}
	_, err := devenv.Start(context.Background(), devenv.Options{StateDir: moved, DatabaseSize: testSize})
	if err == nil || !strings.Contains(err.Error(), "was the state directory moved") || !strings.Contains(err.Error(), "remove "+moved) {
		t.Fatalf("start on a moved state directory: %v", err)
	}
}

// Two sites on one state directory would serve the same database files.
func TestStateDirIsLocked(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	_, err := devenv.Start(context.Background(), devenv.Options{StateDir: dir, DatabaseSize: testSize})
	if err == nil || !strings.Contains(err.Error(), "is in use by another `worker --dev`") {
		t.Fatalf("second start on a running site: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	start(t, dir) // free again
}
