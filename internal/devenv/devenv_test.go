package devenv_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/backupcycle/backupcycle/activities"
	cycleacts "github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/selection"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/location"
)

const testSize = 16 << 20

// start starts a site with local backup directories (SambaOff); startMode
// chooses.
func start(t *testing.T, dir string) *devenv.Site {
	t.Helper()
	return startMode(t, dir, devenv.SambaOff)
}

func startMode(t *testing.T, dir string, mode devenv.SambaMode) *devenv.Site {
	t.Helper()
	s, err := devenv.Start(context.Background(), devenv.Options{StateDir: dir, DatabaseSize: testSize,
		TemporalAddress: "127.0.0.1:7399", Namespace: "default", Samba: mode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// activityEnv runs the cycle's real activities on the site's configuration.
func activityEnv(s *devenv.Site) (*cycleacts.Activities, *testsuite.TestActivityEnvironment) {
	acts := cycleacts.New(activities.New(nil))
	acts.Activities.Cycle = activities.CycleDeps{Config: s.Config, Poll: 50 * time.Millisecond}
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
	siteRunsTheCycleSteps(t, t.TempDir(), devenv.SambaOff)
}

// The same over Samba: the worker's side of every step goes over SMB.
func TestSiteRunsTheCycleStepsOverSamba(t *testing.T) {
	siteRunsTheCycleSteps(t, smbStateDir(t), devenv.SambaRequired)
}

func siteRunsTheCycleSteps(t *testing.T, dir string, mode devenv.SambaMode) {
	s := startMode(t, dir, mode)
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
		switch {
		case len(srv.UNCPaths) != 2:
			t.Errorf("backup server %s: %+v", b, srv)
		case mode == devenv.SambaOff && (srv.Loc.Scheme != "file" || srv.Loc.Path != s.BackupDirs[b] || srv.SMB != nil):
			t.Errorf("backup server %s: %+v, want the local directory", b, srv)
		case mode == devenv.SambaRequired && (srv.Loc.Scheme != "smb" || srv.Location != s.SMB[b].URL("backup") || srv.SMB == nil):
			t.Errorf("backup server %s: %+v, want its smbd", b, srv)
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
	s2 := startMode(t, dir, mode)
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
	if err == nil || !strings.Contains(err.Error(), "is in use by another devworker") {
		t.Fatalf("second start on a running site: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	start(t, dir) // free again
}

// smbStateDir is a state directory whose parents other users may search:
// smbd serves the backup directories as its share user (t.TempDir's parent
// is 0700).
func smbStateDir(t *testing.T) string {
	t.Helper()
	return sambatest.OpenTempDir(t, "devenv-smb-")
}

// With Samba installed the backup servers are served over SMB: the config
// names smb:// locations with a user and a password file (0600, never the
// password), a file the emulator side writes into a backup directory is
// visible over SMB with those credentials, a second Start on the same state
// still sees it, and Stop leaves no smbd.
func TestBackupServersOverSamba(t *testing.T) {
	dir := smbStateDir(t)
	for round := 1; round <= 2; round++ {
		s, err := devenv.Start(context.Background(), devenv.Options{StateDir: dir, DatabaseSize: testSize, Samba: devenv.SambaRequired})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		text, err := os.ReadFile(s.ConfigFile)
		if err != nil {
			t.Fatal(err)
		}
		var pids []int
		for _, b := range devenv.BackupServers {
			bs := findServer(t, s.Config, b)
			if !strings.HasPrefix(bs.Location, "smb://127.0.0.1:") || bs.Location != s.Locations[b] {
				t.Errorf("round %d: %s location %q, want smb://127.0.0.1:PORT/backup", round, b, bs.Location)
			}
			if bs.SMB == nil || bs.SMB.User == "" || bs.SMB.Password.File == "" || bs.SMB.Password.Env != "" {
				t.Fatalf("round %d: %s smb: %+v, want user and password_file", round, b, bs.SMB)
			}
			fi, err := os.Stat(bs.SMB.Password.File)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("round %d: password file %s: %v, %v; want mode 0600", round, bs.SMB.Password.File, fi, err)
			}
			pw, err := bs.SMB.Password.Resolve()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(text), pw) {
				t.Errorf("round %d: %s holds the SMB password of %s", round, s.ConfigFile, b)
			}
			name := fmt.Sprintf("probe-%s-%d.txt", b, round)
			want := []byte("written by the emulated site to " + b)
			if err := os.WriteFile(filepath.Join(s.BackupDirs[b], name), want, 0o644); err != nil {
				t.Fatal(err)
			}
			st, err := location.Open(context.Background(), bs.Location, storage.Credentials{User: bs.SMB.User, Password: pw})
			if err != nil {
				t.Fatalf("round %d: open %s with the configured credentials: %v", round, bs.Location, err)
			}
			for _, n := range []string{name, fmt.Sprintf("probe-%s-1.txt", b)} {
				if got := readOverSMB(t, st, n); !bytes.Equal(got, want) {
					t.Errorf("round %d: %s over SMB: %q, want %q", round, n, got, want)
				}
			}
			_ = st.Close()
			pids = append(pids, smbdPids(t, s.SMB[b].ConfigPath())...)
		}
		if len(pids) < 2 {
			t.Fatalf("round %d: smbd processes %v, want one per backup server", round, pids)
		}
		if err := s.Stop(); err != nil {
			t.Fatalf("round %d: Stop: %v", round, err)
		}
		for _, b := range devenv.BackupServers {
			if left := smbdPids(t, filepath.Join(dir, "samba-"+b, "smb.conf")); len(left) > 0 {
				t.Errorf("round %d: smbd of %s still running after Stop: %v", round, b, left)
			}
		}
	}
}

// readOverSMB is the whole of file name on st.
func readOverSMB(t *testing.T, st storage.Storage, name string) []byte {
	t.Helper()
	r, err := st.OpenRead(context.Background(), name)
	if err != nil {
		t.Fatalf("%s over SMB: %v", name, err)
	}
	defer r.Close()
	got := make([]byte, r.Size())
	if _, err := r.ReadAt(got, 0); err != nil && err != io.EOF {
		t.Fatalf("read %s over SMB: %v", name, err)
	}
	return got
}

func findServer(t *testing.T, c *config.Config, name string) config.BackupServer {
	t.Helper()
	for _, b := range c.BackupServers {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("backup server %s not in the config", name)
	return config.BackupServer{}
}

// smbdPids are the running processes whose command line names conf (smbd,
// its children, samba-dcerpcd and its workers), read from /proc.
func smbdPids(t *testing.T, conf string) []int {
	t.Helper()
	return sambatest.Running(conf)
}

// A clone in a home directory closed to other users (Debian's 0700, as
// t.TempDir's parent is): smbd's share user cannot reach the state
// directory, so each backup server's share moves to a directory of its own
// under the share root, with the sets a run without Samba left there, and
// the state directory links to it. The shares are served over SMB, what the
// emulator writes through the link is read over SMB, and a second start
// finds everything where it was.
func TestSambaServesAStateDirectoryClosedToSmbd(t *testing.T) {
	if sambatest.AsInvoker() {
		t.Skipf("run by uid %d, smbd's share user is that user, who reaches the state directory itself: nothing moves (TestDemoSiteServesSMBFromAClosedCloneAsItsUser)", os.Geteuid())
	}
	state := filepath.Join(t.TempDir(), "clone", ".demo")
	shareRoot := smbStateDir(t)
	s, err := devenv.Start(context.Background(), devenv.Options{StateDir: state, DatabaseSize: testSize, Samba: devenv.SambaOff})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range devenv.BackupServers {
		if err := os.WriteFile(filepath.Join(s.BackupDirs[b], "earlier-"+b+".txt"), []byte("a set of a run without Samba"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		s, err := devenv.Start(context.Background(), devenv.Options{StateDir: state, DatabaseSize: testSize, Samba: devenv.SambaRequired, ShareRoot: shareRoot})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if line := s.BackupMode(); !strings.Contains(line, "bak01 over SMB at smb://") || !strings.Contains(line, "smbd runs as root") ||
			!strings.Contains(line, "shares in "+shareRoot+"/") {
			t.Errorf("round %d: mode line %q: want SMB, as whom and where the shares are", round, line)
		}
		for _, b := range devenv.BackupServers {
			if fi, err := os.Lstat(s.BackupDirs[b]); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("round %d: %s: %v, %v; want a link to its share", round, s.BackupDirs[b], fi, err)
			}
			target, _ := filepath.EvalSymlinks(s.BackupDirs[b])
			if !strings.HasPrefix(target, shareRoot+"/") {
				t.Fatalf("round %d: %s links to %s, want a directory under %s", round, s.BackupDirs[b], target, shareRoot)
			}
			name := fmt.Sprintf("probe-%s-%d.txt", b, round)
			if err := os.WriteFile(filepath.Join(s.BackupDirs[b], name), []byte("through the link"), 0o644); err != nil {
				t.Fatal(err)
			}
			bs := findServer(t, s.Config, b)
			if !strings.HasPrefix(bs.Location, "smb://127.0.0.1:") {
				t.Fatalf("round %d: %s location %q, want smb://", round, b, bs.Location)
			}
			pw, err := bs.SMB.Password.Resolve()
			if err != nil {
				t.Fatal(err)
			}
			st, err := location.Open(context.Background(), bs.Location, storage.Credentials{User: bs.SMB.User, Password: pw})
			if err != nil {
				t.Fatalf("round %d: open %s: %v", round, bs.Location, err)
			}
			for n, want := range map[string]string{"earlier-" + b + ".txt": "a set of a run without Samba", name: "through the link",
				fmt.Sprintf("probe-%s-1.txt", b): "through the link"} {
				if got := readOverSMB(t, st, n); string(got) != want {
					t.Errorf("round %d: %s over SMB: %q, want %q", round, n, got, want)
				}
			}
			// A directory handle and a write: smbd's share-user processes
			// reach its lock databases too.
			if l, err := st.List(context.Background(), "probe-", ".txt"); err != nil || len(l) != round {
				t.Errorf("round %d: list over SMB: %v, %v; want %d probes", round, l, err, round)
			}
			w, err := st.Create(context.Background(), fmt.Sprintf("over-smb-%d.txt", round))
			if err != nil {
				t.Fatalf("round %d: create over SMB: %v", round, err)
			}
			if _, err := w.WriteAt([]byte("written over SMB"), 0); err != nil {
				t.Errorf("round %d: write over SMB: %v", round, err)
			}
			_ = w.Close()
			_ = st.Close()
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// Samba installed is Samba used: when it cannot serve the backup servers
// (here smbd run by root, whose share user reaches neither the state
// directory nor the share root), auto mode fails Start with the cause
// instead of leaving them local directories unnoticed. Run by another user,
// smbd reaches the state directory as that user and the share root is not
// used. Samba off keeps them local and the mode line says so.
func TestSambaAutoFailsWhenInstalledSambaCannotServe(t *testing.T) {
	closed := t.TempDir()
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(closed, "shares")
	state := t.TempDir()
	s, err := devenv.Start(context.Background(), devenv.Options{StateDir: state, DatabaseSize: testSize,
		TemporalAddress: "127.0.0.1:7399", Namespace: "default", ShareRoot: root})
	if sambatest.AsInvoker() {
		if err != nil || len(s.SMB) != len(devenv.BackupServers) {
			t.Fatalf("run by uid %d: %v; want the backup servers over SMB from the state directory", os.Geteuid(), err)
		}
		if _, err := os.Stat(root); err == nil {
			t.Errorf("run by uid %d: the share root %s was created", os.Geteuid(), root)
		}
		_ = s.Stop()
	} else {
		if err == nil {
			_ = s.Stop()
			t.Fatalf("Start served %s: want an error, the share root is closed to smbd's share user", s.BackupMode())
		}
		for _, want := range []string{"over Samba", "not left local directories", "not searchable", closed} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q: want %q", err, want)
			}
		}
		if left := smbdPids(t, state); len(left) > 0 {
			t.Errorf("smbd left running after the failed Start: %v", left)
		}
	}
	off := startMode(t, state, devenv.SambaOff)
	for _, b := range devenv.BackupServers {
		if off.Locations[b] != off.BackupDirs[b] {
			t.Errorf("Samba off: %s location %s, want %s", b, off.Locations[b], off.BackupDirs[b])
		}
	}
	want := "backup servers: bak01 as the local directory " + off.BackupDirs["bak01"] + ", bak02 as the local directory " +
		off.BackupDirs["bak02"] + " (local directories, not SMB: Samba off)"
	if line := off.BackupMode(); line != want {
		t.Errorf("mode line %q, want %q", line, want)
	}
}

// --dev-fleet: the small databases exist on sql01 and the configuration's
// selection picks them with Sales, each with the instance's rotation; a
// start without them writes the configuration `make demo` uses (Sales by
// name only) and keeps the databases for a later start.
func TestFleetDatabasesAreSelected(t *testing.T) {
	dir := t.TempDir()
	startFleet := func(n int) *devenv.Site {
		t.Helper()
		s, err := devenv.Start(context.Background(), devenv.Options{StateDir: dir, DatabaseSize: testSize, Samba: devenv.SambaOff, FleetDatabases: n})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	resolve := func(s *devenv.Site) []string {
		t.Helper()
		inst, _ := s.Config.SQLInstance(devenv.SourceInstance)
		target, err := mssql.TargetFor(*inst, "master")
		if err != nil {
			t.Fatal(err)
		}
		db, err := mssql.Open(context.Background(), target)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		found, err := selection.ReadNames(context.Background(), db, selection.Asked(s.Config, devenv.SourceInstance))
		if err != nil {
			t.Fatal(err)
		}
		r, err := selection.ForInstance(s.Config, devenv.SourceInstance, found)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, sel := range r.Selected {
			names = append(names, fmt.Sprintf("%s/%v", sel.Name, sel.Configured))
		}
		return names
	}

	s := startFleet(3)
	if got, want := strings.Join(resolve(s), " "), "CRM/false Inventory/false Payroll/false Sales/true"; got != want {
		t.Errorf("sql01's selection resolves to %q, want %q", got, want)
	}
	if got := strings.Join(s.FleetDatabases, " "); got != "Inventory Payroll CRM" {
		t.Errorf("Site.FleetDatabases = %q", got)
	}
	inst, _ := s.Config.SQLInstance(devenv.SourceInstance)
	if inst.MaxConcurrent != 2 {
		t.Errorf("sql01 max_concurrent %d, want 2 so the Fleet runs two at once", inst.MaxConcurrent)
	}
	crm, err := selection.DatabaseFor(s.Config, devenv.SourceInstance, "CRM", "")
	if err != nil || strings.Join(crm.BackupServers, " ") != "bak01 bak02" {
		t.Errorf("CRM's configuration: %+v, %v; want the rotation bak01, bak02", crm, err)
	}
	// Largest first is visible: the sizes differ.
	sizes := map[int64]bool{}
	for _, n := range s.FleetDatabases {
		files, err := s.Source.DatabaseFiles(n)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 4<<20 {
			t.Errorf("%s's data file is %d bytes, want a small one", n, st.Size())
		}
		sizes[st.Size()] = true
	}
	if len(sizes) != 3 {
		t.Errorf("fleet databases' data file sizes %v: want three different sizes", sizes)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}

	s = startFleet(0)
	if got := strings.Join(resolve(s), " "); got != "Sales/true" {
		t.Errorf("without fleet databases sql01 resolves to %q, want Sales only", got)
	}
	if text, _ := os.ReadFile(s.ConfigFile); strings.Contains(string(text), "USER_DATABASES") {
		t.Errorf("config without fleet databases selects by pattern:\n%s", text)
	}
	if _, err := s.Source.DatabaseFiles("CRM"); err != nil {
		t.Errorf("CRM after a start without fleet databases: %v, want it kept", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	s = startFleet(3) // continues: the databases exist, none is created again
	if got := len(resolve(s)); got != 4 {
		t.Errorf("third start selects %d databases, want 4", got)
	}
	_ = s.Stop()

	if _, err := devenv.Start(context.Background(), devenv.Options{StateDir: t.TempDir(), FleetDatabases: len(devenv.FleetDatabaseNames) + 1}); err == nil || !strings.Contains(err.Error(), "fleet databases: use 0 to") {
		t.Errorf("too many fleet databases: %v", err)
	}
}

// Options.TaskQueues gives a backup server a task_queue of its own in the
// site's configuration (the other keeps none), and names only the site's
// backup servers.
func TestTaskQueuesAreConfigured(t *testing.T) {
	s, err := devenv.Start(context.Background(), devenv.Options{StateDir: t.TempDir(), DatabaseSize: testSize, Samba: devenv.SambaOff,
		TaskQueues: map[string]string{"bak02": "backupcycle-bak02"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	got := map[string]string{}
	for _, b := range s.Config.BackupServers {
		got[b.Name] = b.TaskQueue
	}
	if got["bak01"] != "" || got["bak02"] != "backupcycle-bak02" {
		t.Errorf("task queues %v; want bak02 on backupcycle-bak02 and none for bak01", got)
	}
	_, err = devenv.Start(context.Background(), devenv.Options{StateDir: t.TempDir(), TaskQueues: map[string]string{"bak03": "q"}})
	if err == nil || !strings.Contains(err.Error(), `"bak03"`) {
		t.Errorf("task queue of an unknown server: %v; want an error naming it", err)
	}
}
