package sitetest

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// Estate is a misconfigured estate for `starter preflight`: a Windows source
// on SQL Server 2022 whose database allocates 11 GiB (a backup of it is
// small: the space is free) and is encrypted with TDE, verified on SQL
// Server 2019 Express on Linux, which is older than the source, lacks the
// TDE certificate, is given a UNC path to bak01, has a restore volume of 64
// MiB already holding a kept copy, and a log directory that does not exist; Ledger (40 MiB) takes log
// backups with a standby copy but is in the SIMPLE recovery model. EstateProblems lists what
// preflight must find; a check added to preflight adds its row there and,
// when it needs one, its mistake here.
type Estate struct {
	Source, Verify *sqlsim.Instance
	// YAML is the configuration (passwords in PasswordEnv, which New sets).
	YAML string
}

// EstateProblem is one MISSING row the estate's preflight report holds:
// its instance (and database, for a check of one database) and check,
// words its detail and its fix say.
type EstateProblem struct {
	Instance, Database, Check string
	Detail, Fix               []string
}

// EstateProblems are every problem of the estate.
var EstateProblems = []EstateProblem{
	{"sql01", "Sales", "restores on sqlverify", []string{"15.0.4385.2", "16.0"}, []string{"upgrade sqlverify"}},
	{"sql01", "Sales", "TDE certificate on sqlverify", []string{"TDECert", "does not hold"}, []string{"CREATE CERTIFICATE"}},
	{"sqlverify", "", "paths to bak01", []string{"Linux", `\\bak01\backup`}, []string{"sql_paths: {sqlverify: [/mnt/bak01]}"}},
	{"sqlverify", "", "edition for sql01/Sales", []string{"Express", "11.0 GiB"}, []string{"Standard, Enterprise or Developer"}},
	{"sqlverify", "", "restore_log_dir of bak01", []string{"/var/opt/mssql/restore/nolog does not exist"}, []string{"create /var/opt/mssql/restore/nolog"}},
	{"sqlverify", "", "restore_log_dir of bak02", []string{"/var/opt/mssql/restore/nolog does not exist"}, []string{"create /var/opt/mssql/restore/nolog"}},
	{"sqlverify", "", "free space restore_data_dir of bak01", []string{"11.0 GiB needed", "Tiny_kept"}, []string{"free ", "point restore_data_dir at a volume"}},
	{"sqlverify", "", "free space restore_data_dir of bak02", []string{"11.0 GiB needed"}, []string{"free "}},
	{"sql01", "Ledger", "restores on sqlverify", []string{"15.0.4385.2", "16.0"}, []string{"upgrade sqlverify"}},
	{"sql01", "Ledger", "recovery model", []string{"SIMPLE", "4208"}, []string{"ALTER DATABASE [Ledger] SET RECOVERY FULL"}},
}

// NewEstate starts the estate's two instances and writes its backup
// directories under a temporary root.
func NewEstate(t testing.TB) *Estate {
	t.Helper()
	root := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{"bak01", "bak02", "restore/data"} {
		dirs[d] = filepath.Join(root, d)
		if err := os.MkdirAll(dirs[d], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	start := func(cfg sqlsim.Config) *sqlsim.Instance {
		cfg.DataDir, cfg.Logins = filepath.Join(root, cfg.Name), map[string]string{"sa": Password}
		return StartConfig(t, cfg)
	}
	e := &Estate{}
	e.Source = start(sqlsim.Config{Name: "sql01", Shares: map[string]string{`\\bak01\backup`: dirs["bak01"], `\\bak02\backup`: dirs["bak02"]}})
	// Ledger takes log backups, but a DBA left it in SIMPLE.
	for _, spec := range []sqlsim.DatabaseSpec{{Name: "Sales", Size: 1 << 20, FreeSize: 11 << 30}, {Name: "Ledger", Size: 40 << 20, RecoveryModel: "SIMPLE"}} {
		if err := e.Source.CreateDatabase(spec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Source.CreateCertificate("TDECert", "TDE certificate"); err != nil {
		t.Fatal(err)
	}
	if err := e.Source.EnableTDE("Sales", "TDECert"); err != nil {
		t.Fatal(err)
	}
	e.Verify = start(sqlsim.Config{Name: "sqlverify", Edition: "Express", Platform: sqlsim.PlatformLinux, ProductVersion: "15.0.4385.2",
		Shares: map[string]string{"/mnt/bak01": dirs["bak01"], "/mnt/bak02": dirs["bak02"], "/var/opt/mssql/restore": filepath.Join(root, "restore")}})
	// A copy kept on the restore volume, which then has 64 MiB in all (of a
	// backup taken there: the verification instance, older than the source,
	// restores none of the source's).
	if err := e.Verify.CreateDatabase(sqlsim.DatabaseSpec{Name: "Tiny", Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	estateExec(t, e.Verify, `BACKUP DATABASE [Tiny] TO DISK = '/mnt/bak01/tiny.bak' WITH INIT, FORMAT`)
	estateExec(t, e.Verify, `RESTORE DATABASE [Tiny_kept] FROM DISK = '/mnt/bak01/tiny.bak' WITH MOVE 'Tiny' TO '/var/opt/mssql/restore/data/tiny.mdf', MOVE 'Tiny_log' TO '/var/opt/mssql/restore/data/tiny.ldf'`)
	estateExec(t, e.Verify, `DROP DATABASE [Tiny]`)
	e.Verify.SetShareQuota("/var/opt/mssql/restore", 64<<20)
	if os.Getenv(PasswordEnv) != Password {
		t.Setenv(PasswordEnv, Password)
	}
	e.YAML = `sql_instances:
  - {name: sql01, address: "` + e.Source.Addr() + `", user: sa, password_env: ` + PasswordEnv + `, encrypt: disable}
  - {name: sqlverify, address: "` + e.Verify.Addr() + `", user: sa, password_env: ` + PasswordEnv + `, encrypt: disable}
backup_servers:
  - name: bak01
    unc_paths: ['\\bak01\backup']
    location: ` + dirs["bak01"] + `
    verify_instance: sqlverify
    restore_data_dir: /var/opt/mssql/restore/data
    restore_log_dir: /var/opt/mssql/restore/nolog
  - name: bak02
    unc_paths: ['\\bak02\backup']
    sql_paths: {sqlverify: [/mnt/bak02]}
    location: ` + dirs["bak02"] + `
    verify_instance: sqlverify
    restore_data_dir: /var/opt/mssql/restore/data
    restore_log_dir: /var/opt/mssql/restore/nolog
databases:
  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02], sequence: utc}
  - {name: Ledger, instance: sql01, backup_servers: [bak01, bak02], sequence: utc, owns_backup_chain: true, log_backup: {every: 1m}, log_proof: standby}
`
	return e
}

func estateExec(t testing.TB, in *sqlsim.Instance, q string) {
	t.Helper()
	db, err := sql.Open("sqlserver", in.DSN("sa", Password, "master"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
