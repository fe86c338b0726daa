package preflight

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

const estatePw = "Estate-Pw-4e1b77"

// startEstateInstance starts an emulated instance with sa/estatePw.
func startEstateInstance(t *testing.T, cfg sqlsim.Config) *sqlsim.Instance {
	t.Helper()
	cfg.DataDir, cfg.Logins = t.TempDir(), map[string]string{"sa": estatePw}
	in, err := sqlsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	return in
}

func estateExec(t *testing.T, in *sqlsim.Instance, q string) {
	t.Helper()
	db, err := sql.Open("sqlserver", in.DSN("sa", estatePw, "master"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// A misconfigured estate: a Windows source whose database allocates 11 GiB,
// verified on SQL Server Express on Linux, which is given a UNC path to
// bak01, a restore volume nearly full of a kept copy and a log directory
// that does not exist. One preflight run names every problem, each with its
// fix, and nothing else is missing. The table is the list of what such an
// estate gets wrong: a check added to preflight adds its row.
func TestMisconfiguredEstate(t *testing.T) {
	root := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{"bak01", "bak02", "restore/data"} {
		dirs[d] = filepath.Join(root, d)
		if err := os.MkdirAll(dirs[d], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src := startEstateInstance(t, sqlsim.Config{Name: "sql01",
		Shares: map[string]string{`\\bak01\backup`: dirs["bak01"], `\\bak02\backup`: dirs["bak02"]}})
	for _, spec := range []sqlsim.DatabaseSpec{{Name: "Sales", Size: 1 << 20, FreeSize: 11 << 30}, {Name: "Tiny", Size: 1 << 20}} {
		if err := src.CreateDatabase(spec); err != nil {
			t.Fatal(err)
		}
	}
	verify := startEstateInstance(t, sqlsim.Config{Name: "sqlverify", Edition: "Express", Platform: sqlsim.PlatformLinux,
		Shares: map[string]string{"/mnt/bak01": dirs["bak01"], "/mnt/bak02": dirs["bak02"], "/var/opt/mssql/restore": filepath.Join(root, "restore")}})
	// A copy kept on the restore volume, which then has 64 MiB in all.
	estateExec(t, src, `BACKUP DATABASE [Tiny] TO DISK = '\\bak01\backup\tiny.bak' WITH INIT, FORMAT`)
	estateExec(t, verify, `RESTORE DATABASE [Tiny_kept] FROM DISK = '/mnt/bak01/tiny.bak' WITH MOVE 'Tiny' TO '/var/opt/mssql/restore/data/tiny.mdf', MOVE 'Tiny_log' TO '/var/opt/mssql/restore/data/tiny.ldf'`)
	verify.SetShareQuota("/var/opt/mssql/restore", 64<<20)

	t.Setenv(srcPwEnv, estatePw)
	cfg, err := config.Parse([]byte(`
sql_instances:
  - {name: sql01, address: "`+src.Addr()+`", user: sa, password_env: `+srcPwEnv+`, encrypt: disable}
  - {name: sqlverify, address: "`+verify.Addr()+`", user: sa, password_env: `+srcPwEnv+`, encrypt: disable}
backup_servers:
  - name: bak01
    unc_paths: ['\\bak01\backup']
    location: `+dirs["bak01"]+`
    verify_instance: sqlverify
    restore_data_dir: /var/opt/mssql/restore/data
    restore_log_dir: /var/opt/mssql/restore/nolog
  - name: bak02
    unc_paths: ['\\bak02\backup']
    sql_paths: {sqlverify: [/mnt/bak02]}
    location: `+dirs["bak02"]+`
    verify_instance: sqlverify
    restore_data_dir: /var/opt/mssql/restore/data
    restore_log_dir: /var/opt/mssql/restore/nolog
databases:
  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02], sequence: utc}
`), "estate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, text := runPreflight(t, cfg, "")

	problems := []struct {
		instance, check string
		detail, fix     []string
	}{
		{"sqlverify", "paths to bak01", []string{"Linux", `\\bak01\backup`}, []string{"sql_paths: {sqlverify: [/mnt/bak01]}"}},
		{"sqlverify", "edition for sql01/Sales", []string{"Express", "11.0 GiB"}, []string{"Standard, Enterprise or Developer"}},
		{"sqlverify", "restore_log_dir of bak01", []string{"/var/opt/mssql/restore/nolog does not exist"}, []string{"create /var/opt/mssql/restore/nolog"}},
		{"sqlverify", "restore_log_dir of bak02", []string{"/var/opt/mssql/restore/nolog does not exist"}, []string{"create /var/opt/mssql/restore/nolog"}},
		{"sqlverify", "free space restore_data_dir of bak01", []string{"11.0 GiB needed", "Tiny_kept"}, []string{"free ", "point restore_data_dir at a volume"}},
		{"sqlverify", "free space restore_data_dir of bak02", []string{"11.0 GiB needed"}, []string{"free "}},
	}
	for _, p := range problems {
		c := findIn(t, r, KindInstance, p.instance, p.check)
		if c.Status != Missing {
			t.Errorf("%s/%s is %s (%s), want MISSING", p.instance, p.check, c.Status, c.Detail)
		}
		for _, w := range p.detail {
			if !strings.Contains(c.Detail, w) {
				t.Errorf("%s/%s: the detail does not say %q: %s", p.instance, p.check, w, c.Detail)
			}
		}
		for _, w := range p.fix {
			if !strings.Contains(c.Fix, w) || !strings.Contains(text, w) {
				t.Errorf("%s/%s: the fix does not say %q: %s", p.instance, p.check, w, c.Fix)
			}
		}
	}
	if r.OK || r.Missing != len(problems) {
		var missing []string
		for _, c := range r.MissingChecks() {
			missing = append(missing, c.Instance+"/"+c.Name)
		}
		t.Errorf("%d MISSING (%v), want exactly the %d above:\n%s", r.Missing, missing, len(problems), text)
	}
	// What is right is said so: the source sees both servers, bak02's
	// path is the Linux instance's own.
	for _, ok := range []struct{ instance, check string }{{"sql01", "sees bak01"}, {"sql01", "sees bak02"}, {"sqlverify", "paths to bak02"},
		{"sqlverify", "restore_data_dir of bak01"}} {
		if c := findIn(t, r, KindInstance, ok.instance, ok.check); c.Status != OK {
			t.Errorf("%s/%s is %s: %s", ok.instance, ok.check, c.Status, c.Detail)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Log(text)
	}
}
