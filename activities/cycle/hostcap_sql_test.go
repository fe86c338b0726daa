package cycle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// reload points the fixture at the site's configuration after
// site.Reconfigure.
func (f *sqlFixture) reload() {
	f.cfg = f.site.Config
	f.acts.Cycle.Config = f.cfg
}

// A verification instance that cannot host the copy fails the RESTORE step
// at once (non-retryable), naming what it cannot do and the fix; the set is
// not judged (no evidence), and no RESTORE that SQL Server would refuse is
// sent.
func TestSQLRestoreRefusesAHostThatCannotHoldTheCopy(t *testing.T) {
	qatSource := func(c *sqlsim.Config) {
		c.QAT = true
		c.Configuration = map[string]int64{sqlsim.OptionHardwareOffload: 1, sqlsim.OptionBackupCompressionAlg: 2}
	}
	cases := []struct {
		name    string
		site    sitetest.Options
		source  func(*sqlsim.Config)
		verify  func(*sqlsim.Config)
		before  func(f *sqlFixture)
		typ     string
		want    []string
		restore bool // SQL Server is asked (its own up-front refusal is the proof)
	}{
		{name: "Express and a database over 10 GB", site: sitetest.Options{FreeSize: 11 << 30},
			verify: func(c *sqlsim.Config) { c.Edition = "Express" }, typ: activities.ErrInvalidConfig,
			want: []string{"Express", "10 GB", "11.0 GiB"}},
		{name: "FILESTREAM disabled", site: sitetest.Options{Filestream: true}, typ: activities.ErrInvalidConfig,
			want: []string{"FILESTREAM", "filestream access level"}},
		{name: "FILESTREAM on Linux", site: sitetest.Options{Filestream: true},
			verify: func(c *sqlsim.Config) {
				c.Platform, c.Configuration = sqlsim.PlatformLinux, map[string]int64{sqlsim.OptionFilestreamAccessLevel: 2}
			},
			before: linuxPaths, typ: activities.ErrInvalidConfig, want: []string{"FILESTREAM", "Linux", "Windows"}},
		{name: "contained database authentication off", site: sitetest.Options{Contained: true}, typ: activities.ErrInvalidConfig,
			want: []string{"contained", "EXEC sp_configure 'contained database authentication', 1; RECONFIGURE;"}},
		{name: "QAT_DEFLATE without the accelerator", source: qatSource, typ: activities.ErrInvalidConfig,
			want: []string{"QAT_DEFLATE", "Intel QAT"}},
		{name: "restore directory missing", before: func(f *sqlFixture) {
			srv, _ := f.cfg.BackupServer("bak02")
			srv.RestoreDataDir = `D:\restore\nodir`
		}, typ: activities.ErrInvalidConfig, want: []string{`D:\restore\nodir`, "restore_data_dir", "does not exist"}},
		{name: "Linux with UNC paths", verify: func(c *sqlsim.Config) { c.Platform = sqlsim.PlatformLinux },
			typ: activities.ErrInvalidConfig, want: []string{"Linux", "UNC", `\\bak02\backup`, "sql_paths"}},
		{name: "too little space, SQL Server's own check", site: sitetest.Options{FreeSize: 64 << 20},
			before:  func(f *sqlFixture) { f.verify.SetShareQuota(`D:\restore`, 32<<20) },
			typ:     activities.ErrVerifyInstanceFull,
			want:    []string{"3257", "free space"},
			restore: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.site
			o.Database, o.LogicalName = "Sales", "Sales'data"
			f := newSQLFixtureOf(t, o)
			if tc.source != nil {
				f.src = f.site.RestartSource(tc.source)
			}
			_, verify := f.copiedSet()
			if tc.verify != nil {
				f.verify = f.site.RestartVerify(tc.verify)
			}
			if tc.before != nil {
				tc.before(f)
			}
			err := f.run(f.acts.Restore, verify, nil)
			ae := appErrorOf(t, err)
			if ae.Type() != tc.typ || !ae.NonRetryable() || activities.Evidence(ae.Type()) != "" {
				t.Fatalf("%v\n(type %s, non-retryable %v); want non-retryable %s, no evidence", err, ae.Type(), ae.NonRetryable(), tc.typ)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
			if got := statements(f.verify, "RESTORE DATABASE"); len(got) != 0 && !tc.restore {
				t.Errorf("a RESTORE was sent: %+v", got)
			}
		})
	}
}

// linuxPaths gives the Linux verification instance what it needs besides
// the UNC paths: the backup servers' shares mounted on its host, and the
// restore directories in its own syntax.
func linuxPaths(f *sqlFixture) {
	f.t.Helper()
	for _, srv := range sitetest.Servers {
		if err := f.verify.AddShare("/mnt/"+srv, f.dirs[srv]); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := f.verify.AddShare("/var/opt/mssql/restore", f.dirs["restore"]); err != nil {
		f.t.Fatal(err)
	}
	addr := f.verify.Addr()
	f.site.Reconfigure(func(y string) string {
		for _, srv := range sitetest.Servers {
			y = strings.Replace(y, "    unc_paths: ['"+sitetest.UNC(srv)+"']\n",
				"    unc_paths: ['"+sitetest.UNC(srv)+"']\n    sql_paths: {"+sitetest.VerifyInstance+": [/mnt/"+srv+"]}\n", 1)
		}
		y = strings.ReplaceAll(y, `restore_data_dir: 'D:\restore\data'`, "restore_data_dir: /var/opt/mssql/restore/data")
		return strings.ReplaceAll(y, `restore_log_dir: 'D:\restore\log'`, "restore_log_dir: /var/opt/mssql/restore/log")
	})
	f.reload()
	v, _ := f.cfg.SQLInstance(sitetest.VerifyInstance)
	v.Address = addr
}

// A Windows source and a Linux verification instance: the source writes
// through the UNC paths, the Linux instance restores the copy from where
// the share is mounted on its host (sql_paths); the set is verified.
func TestSQLLinuxVerificationInstanceWithItsOwnPaths(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, verify := f.copiedSet()
	f.verify = f.site.RestartVerify(func(c *sqlsim.Config) { c.Platform = sqlsim.PlatformLinux })
	linuxPaths(f)
	var out activities.StepOutput
	f.must(f.acts.Restore, verify, &out)
	r := statements(f.verify, "RESTORE DATABASE")
	if len(r) != 1 || !strings.Contains(r[0].SQL, "/mnt/bak02/") || !strings.Contains(r[0].SQL, "/var/opt/mssql/restore/data/") {
		t.Fatalf("RESTORE statements %+v; want one reading /mnt/bak02 into /var/opt/mssql/restore", r)
	}
	f.must(f.acts.CheckDB, verify, nil)
}

// A Linux source cannot write to UNC paths: the plan refuses it and names
// sql_paths; a BACKUP sent anyway fails with operating system error 2,
// which is a path that does not exist (InvalidConfig), never a corrupt set.
func TestSQLLinuxSourceWithUNCPaths(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	f.src = f.site.RestartSource(func(c *sqlsim.Config) { c.Platform = sqlsim.PlatformLinux })
	err := f.run(f.acts.PlanCycle, activities.PlanInput{Database: "Sales"}, nil)
	if ae := appErrorOf(t, err); ae.Type() != activities.ErrInvalidConfig || !ae.NonRetryable() ||
		!strings.Contains(err.Error(), "Linux") || !strings.Contains(err.Error(), "sql_paths") {
		t.Errorf("plan of a Linux source with UNC paths: %v", err)
	}
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
	err = f.run(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: 2}, nil)
	if ae := appErrorOf(t, err); ae.Type() != activities.ErrInvalidConfig || !ae.NonRetryable() || activities.Evidence(ae.Type()) != "" {
		t.Errorf("BACKUP of a Linux source to UNC paths: %v (type %s); want InvalidConfig, never CorruptBackup", err, ae.Type())
	}
}

// An unmounted mount point: the Linux source's path to bak01 is an empty
// local directory, not the share. The BACKUP never starts (it would fill
// the SQL host's disk): SQL Server does not see the probe the worker wrote
// through location, and the error names the path. Mounted, the BACKUP
// runs; the probe is not repeated for every cycle, and always removed.
func TestSQLUnmountedMountPointIsFoundBeforeTheBackup(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	local := filepath.Join(f.site.Root, "unmounted")
	if err := os.MkdirAll(local, 0o755); err != nil {
		t.Fatal(err)
	}
	f.src = f.site.RestartSource(func(c *sqlsim.Config) {
		c.Platform = sqlsim.PlatformLinux
		c.Shares = map[string]string{"/mnt/bak01": local, "/mnt/bak02": f.dirs["bak02"]}
	})
	addr := f.src.Addr()
	f.site.Reconfigure(func(y string) string {
		for _, srv := range sitetest.Servers {
			y = strings.Replace(y, "    unc_paths: ['"+sitetest.UNC(srv)+"']\n",
				"    unc_paths: ['"+sitetest.UNC(srv)+"']\n    sql_paths: {sql01: [/mnt/"+srv+"]}\n", 1)
		}
		return y
	})
	f.reload()
	src, _ := f.cfg.SQLInstance("sql01")
	src.Address = addr
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
	err := f.run(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: 2}, nil)
	if ae := appErrorOf(t, err); ae.Type() != activities.ErrInvalidConfig || !ae.NonRetryable() ||
		!strings.Contains(err.Error(), "/mnt/bak01") || !strings.Contains(err.Error(), "mounted") {
		t.Fatalf("BACKUP through an unmounted mount point: %v", err)
	}
	if got := statements(f.src, "BACKUP DATABASE"); len(got) != 0 {
		t.Errorf("a BACKUP was sent: %+v", got)
	}
	for _, dir := range []string{local, f.dirs["bak01"]} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.Contains(e.Name(), "probe") {
				t.Errorf("probe file %s left in %s", e.Name(), dir)
			}
		}
	}

	// Mounted: the BACKUP runs, and the next cycle does not probe again.
	if err := f.src.Stop(); err != nil {
		t.Fatal(err)
	}
	f.src = f.site.RestartSource(func(c *sqlsim.Config) {
		c.Platform = sqlsim.PlatformLinux
		c.Shares = map[string]string{"/mnt/bak01": f.dirs["bak01"], "/mnt/bak02": f.dirs["bak02"]}
	})
	for i := range 2 {
		f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
		f.must(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: 2}, nil)
		if name := tsql.StripeFileName("sql01", "Sales", seq, 1, 2); !fileExists(filepath.Join(f.dirs["bak01"], name)) {
			t.Errorf("backup %d: %s not on bak01", i, name)
		}
	}
	if got := statements(f.src, "RESTORE HEADERONLY"); len(got) != 1 {
		t.Errorf("probes read by SQL Server: %d, want 1 (the result is kept for a while)", len(got))
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// NTFS's limit on a heavily fragmented file (operating system error 665) is
// not an unreachable server: the cycle stops with the fix instead of failing
// over to the next server, which meets the same limit.
func TestSQLFileSystemLimitNamesTheFix(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	f.src.SetShareFileLimit(sitetest.UNC("bak01"), 64<<10)
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
	err := f.run(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: 2}, nil)
	ae := appErrorOf(t, err)
	if ae.Type() != activities.ErrFileSystemLimit || !ae.NonRetryable() || activities.Evidence(ae.Type()) != "" {
		t.Fatalf("%v (type %s); want non-retryable %s", err, ae.Type(), activities.ErrFileSystemLimit)
	}
	for _, w := range []string{"665", "stripes", "format /L"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q: %v", w, err)
		}
	}
}

// Copies kept on the verification instance (keep_verify_db) fill its
// restore volume: the next RESTORE is refused before it is sent, with the
// space it needs (FILELISTONLY's allocated sizes, not the backup's) and the
// space there is.
func TestSQLRestoreChecksFreeSpaceFirst(t *testing.T) {
	f := newSQLFixtureOf(t, sitetest.Options{Database: "Sales", FreeSize: 32 << 20,
		Extra: "    verify_name: \"{db}_{seq}_v\"\n    keep_verify_db: true\n"})
	f.verify.SetShareQuota(`D:\restore`, 256<<20)
	_, first := f.copiedSet()
	f.must(f.acts.Restore, first, nil)
	used := int64(0)
	filepath.WalkDir(f.dirs["restore"], func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				used += fi.Size()
			}
		}
		return nil
	})
	f.verify.SetShareQuota(`D:\restore`, used+16<<20)
	_, second := f.copiedSet()
	err := f.run(f.acts.Restore, second, nil)
	ae := appErrorOf(t, err)
	if ae.Type() != activities.ErrVerifyInstanceFull || !ae.NonRetryable() || activities.Evidence(ae.Type()) != "" {
		t.Fatalf("%v (type %s); want non-retryable %s", err, ae.Type(), activities.ErrVerifyInstanceFull)
	}
	for _, w := range []string{`D:\restore\data`, "16.0 MiB free", "Sales_00000001_v"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q: %v", w, err)
		}
	}
	if got := statements(f.verify, "RESTORE DATABASE"); len(got) != 1 {
		t.Errorf("RESTORE statements %d, want only the first", len(got))
	}
}
