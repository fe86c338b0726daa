package preflight

import (
	"bytes"
	"context"
	"database/sql"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/microsoft/go-mssqldb"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The emulator's permission model is SQL Server's (internal/sqlsim): these
// tests run preflight over real TDS against logins that hold exactly what
// they list.

const (
	srcLogin = "bk_src"
	verLogin = "bk_ver"
	srcPwEnv = "PREFLIGHT_TEST_SRC_PASSWORD"
	verPwEnv = "PREFLIGHT_TEST_VER_PASSWORD"
	srcPw    = "Src-Pw-7f3a91"
	verPw    = "Ver-Pw-0c55e2"
)

// startSite starts the demo's site (internal/devenv) with local backup
// directories.
func startSite(t *testing.T) *devenv.Site {
	t.Helper()
	s, err := devenv.Start(context.Background(), devenv.Options{StateDir: t.TempDir(), DatabaseSize: devenv.MinDatabaseSize,
		Samba: devenv.SambaOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// minimalSource and minimalVerify are the minimal grants config.example.yaml
// documents.
func minimalSource() sqlsim.Login {
	return sqlsim.Login{Name: srcLogin, Password: srcPw,
		Server:    []string{tsql.PermCreateAnyDatabase, tsql.PermViewServerPerformanceState, tsql.PermAlterAnyConnection},
		Databases: map[string][]string{devenv.Database: {tsql.RoleDBBackupOperator, tsql.PermSelect, tsql.PermUpdate}}}
}

func minimalVerify() sqlsim.Login {
	return sqlsim.Login{Name: verLogin, Password: verPw,
		Server:    []string{tsql.PermCreateAnyDatabase, tsql.PermViewServerPerformanceState, tsql.PermAlterAnyConnection},
		Databases: map[string][]string{"msdb": {tsql.PermSelect}}}
}

// restrict points the site's configuration at the two restricted logins
// (passwords by environment variable, as in production) and creates the
// sequence table as an administrator would, once.
func restrict(t *testing.T, s *devenv.Site) {
	t.Helper()
	t.Setenv(srcPwEnv, srcPw)
	t.Setenv(verPwEnv, verPw)
	for i := range s.Config.SQLInstances {
		in := &s.Config.SQLInstances[i]
		switch in.Name {
		case devenv.SourceInstance:
			in.User, in.Password = srcLogin, config.SecretRef{Env: srcPwEnv}
		case devenv.VerifyInstance:
			in.User, in.Password = verLogin, config.SecretRef{Env: verPwEnv}
		}
	}
	setLogin(t, s.Source, minimalSource())
	setLogin(t, s.Verify, minimalVerify())
	db := sourceAdmin(t, s)
	defer db.Close()
	setup, err := tsql.SequenceSetup(devenv.Database)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range setup {
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// sourceAdmin connects to the site's source as its administrator (sa),
// as a DBA would to prepare it.
func sourceAdmin(t *testing.T, s *devenv.Site) *sql.DB {
	t.Helper()
	pw, err := config.ResolveSecret(config.SecretRef{File: filepath.Join(filepath.Dir(s.ConfigFile), "secrets", "sa.password")})
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlserver", s.Source.DSN(devenv.AdminLogin, pw, "master"))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func setLogin(t *testing.T, in *sqlsim.Instance, l sqlsim.Login) {
	t.Helper()
	if err := in.SetLogin(l); err != nil {
		t.Fatal(err)
	}
}

// minimalSite is the site with the restricted logins (restrict), whose
// report is clean: the minimal grants miss nothing and do not warn.
func minimalSite(t *testing.T) (*devenv.Site, *Report) {
	t.Helper()
	s := startSite(t)
	restrict(t, s)
	r, text := runPreflight(t, s.Config, devenv.Database)
	if !r.OK || r.Warnings != 0 {
		t.Fatalf("minimal grants: missing %d, warnings %d:\n%s", r.Missing, r.Warnings, text)
	}
	return s, r
}

// preflightAs runs preflight of the site's database with login in place
// on instance, then gives both instances their minimal grants back.
func preflightAs(t *testing.T, s *devenv.Site, instance *sqlsim.Instance, login sqlsim.Login) (*Report, string) {
	t.Helper()
	setLogin(t, instance, login)
	defer func() {
		setLogin(t, s.Source, minimalSource())
		setLogin(t, s.Verify, minimalVerify())
	}()
	return runPreflight(t, s.Config, devenv.Database)
}

func runPreflight(t *testing.T, cfg *config.Config, database string) (*Report, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Run(ctx, Options{Config: cfg, Database: database, CompressionFactor: 4})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	return r, out.String()
}

// findIn is the check of that name about that instance, database or server.
func findIn(t *testing.T, r *Report, kind, where, name string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Kind == kind && c.Name == name && (c.Instance == where || c.Server == where) {
			return c
		}
	}
	t.Fatalf("no %s check %q of %s in the report", kind, name, where)
	return Check{}
}

// The demo's site (its least-privilege login, local backup directories) passes
// every check.
func TestDemoSiteIsClean(t *testing.T) {
	s := startSite(t)
	r, text := runPreflight(t, s.Config, "")
	if !r.OK || r.Missing != 0 || r.Warnings != 0 {
		t.Fatalf("demo site: missing %d, warnings %d:\n%s", r.Missing, r.Warnings, text)
	}
	for _, want := range []string{"SQL instance sql01", "SQL instance sqlverify", "database sql01/Sales", "backup server bak01",
		"backup server bak02", "OK       BACKUP DATABASE", "OK       write", "OK       delete", "OK       free space"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
}

// The minimal grants pass; a login lacking each of them in turn gets that
// permission MISSING with the statement that grants it, and nothing else
// (ALTER ANY CONNECTION is optional: a warning).
func TestEachMissingPermissionThroughTheEmulator(t *testing.T) {
	s, _ := minimalSite(t)

	without := func(l sqlsim.Login, server string, db string, perms ...string) sqlsim.Login {
		c := l
		c.Server = slices.DeleteFunc(slices.Clone(l.Server), func(p string) bool { return server != "" && slices.Contains(perms, p) })
		c.Databases = map[string][]string{}
		for k, v := range l.Databases {
			if k == db {
				v = slices.DeleteFunc(slices.Clone(v), func(p string) bool { return slices.Contains(perms, p) })
			}
			c.Databases[k] = v
		}
		return c
	}
	// A database the login has no entry for: no user there.
	noUser := func(l sqlsim.Login, db string) sqlsim.Login {
		c := l
		c.Databases = map[string][]string{}
		for k, v := range l.Databases {
			if k != db {
				c.Databases[k] = v
			}
		}
		return c
	}
	cases := []struct {
		name     string
		instance *sqlsim.Instance
		login    sqlsim.Login
		kind     string
		where    string
		want     map[string]string // check -> its fix
		status   Status
	}{
		{"source CREATE ANY DATABASE", s.Source, without(minimalSource(), "server", "", tsql.PermCreateAnyDatabase),
			KindInstance, devenv.SourceInstance,
			map[string]string{tsql.PermCreateAnyDatabase: "GRANT CREATE ANY DATABASE TO [bk_src];"}, Missing},
		{"source VIEW SERVER PERFORMANCE STATE", s.Source, without(minimalSource(), "server", "", tsql.PermViewServerPerformanceState),
			KindInstance, devenv.SourceInstance,
			map[string]string{tsql.PermViewServerPerformanceState: "GRANT VIEW SERVER PERFORMANCE STATE TO [bk_src];"}, Missing},
		{"source ALTER ANY CONNECTION", s.Source, without(minimalSource(), "server", "", tsql.PermAlterAnyConnection),
			KindInstance, devenv.SourceInstance,
			map[string]string{tsql.PermAlterAnyConnection: "GRANT ALTER ANY CONNECTION TO [bk_src];"}, Warn},
		{"BACKUP DATABASE", s.Source, without(minimalSource(), "", devenv.Database, tsql.RoleDBBackupOperator),
			KindDatabase, devenv.SourceInstance,
			map[string]string{tsql.PermBackupDatabase: "USE [Sales]; ALTER ROLE [db_backupoperator] ADD MEMBER [bk_src];"}, Missing},
		{"sequence UPDATE", s.Source, without(minimalSource(), "", devenv.Database, tsql.PermUpdate),
			KindDatabase, devenv.SourceInstance,
			map[string]string{"sequence table": "USE [Sales]; GRANT SELECT, UPDATE ON [DBBackup].[Sequence] TO [bk_src];"}, Missing},
		{"no user in Sales", s.Source, noUser(minimalSource(), devenv.Database),
			KindDatabase, devenv.SourceInstance,
			map[string]string{tsql.PermBackupDatabase: "USE [Sales]; IF DATABASE_PRINCIPAL_ID(N'bk_src') IS NULL CREATE USER [bk_src] FOR LOGIN [bk_src]; ALTER ROLE [db_backupoperator] ADD MEMBER [bk_src];",
				"sequence table": "CREATE USER [bk_src] FOR LOGIN [bk_src]; GRANT SELECT, UPDATE ON [DBBackup].[Sequence] TO [bk_src];"}, Missing},
		{"verification CREATE ANY DATABASE", s.Verify, without(minimalVerify(), "server", "", tsql.PermCreateAnyDatabase),
			KindInstance, devenv.VerifyInstance,
			map[string]string{tsql.PermCreateAnyDatabase: "GRANT CREATE ANY DATABASE TO [bk_ver];",
				"DBCC CHECKDB, sanity queries": "GRANT CREATE ANY DATABASE TO [bk_ver];"}, Missing},
		{"verification VIEW SERVER PERFORMANCE STATE", s.Verify, without(minimalVerify(), "server", "", tsql.PermViewServerPerformanceState),
			KindInstance, devenv.VerifyInstance,
			map[string]string{tsql.PermViewServerPerformanceState: "GRANT VIEW SERVER PERFORMANCE STATE TO [bk_ver];"}, Missing},
		{"msdb history", s.Verify, without(minimalVerify(), "", "msdb", tsql.PermSelect),
			KindInstance, devenv.VerifyInstance,
			map[string]string{"SELECT msdb.dbo.restorehistory": "GRANT SELECT ON [dbo].[restorehistory] TO [bk_ver];",
				"SELECT msdb.dbo.backupset": "GRANT SELECT ON [dbo].[backupset] TO [bk_ver];"}, Missing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, text := preflightAs(t, s, tc.instance, tc.login)
			for name, fix := range tc.want {
				c := findIn(t, r, tc.kind, tc.where, name)
				if c.Status != tc.status || !strings.Contains(c.Fix, fix) {
					t.Errorf("%s: %s, fix %q; want %s with %q", name, c.Status, c.Fix, tc.status, fix)
				}
				if !strings.Contains(text, fix) {
					t.Errorf("the text report does not print %q:\n%s", fix, text)
				}
			}
			for _, c := range r.Checks {
				// What the missing permission keeps preflight from asking
				// is a warning saying so, not another MISSING.
				dependent := c.Status == Warn && strings.HasPrefix(c.Detail, "not checked")
				if _, ok := tc.want[c.Name]; !ok && c.Status != OK && !dependent {
					t.Errorf("%s/%s is %s too: %s", c.Instance+c.Server, c.Name, c.Status, c.Detail)
				}
			}
			if wantOK := tc.status != Missing; r.OK != wantOK {
				t.Errorf("report OK = %v, want %v", r.OK, wantOK)
			}
		})
	}
}

// A wrong password is one MISSING login row naming the password reference,
// never the password; an unknown database is not available.
func TestLoginAndDatabaseProblems(t *testing.T) {
	s := startSite(t)
	restrict(t, s)
	t.Setenv(srcPwEnv, "Wrong-Pw-991")
	s.Config.Databases = append(s.Config.Databases, s.Config.Databases[0])
	s.Config.Databases[1].Name = "Payroll"
	r, text := runPreflight(t, s.Config, "")
	c := findIn(t, r, KindInstance, devenv.SourceInstance, "login")
	if c.Status != Missing || !strings.Contains(c.Fix, srcPwEnv) || !strings.Contains(c.Detail, "did not run") {
		t.Errorf("wrong password: %+v", c)
	}
	for _, secret := range []string{"Wrong-Pw-991", verPw} {
		if strings.Contains(text, secret) {
			t.Errorf("the report prints a password:\n%s", text)
		}
	}

	t.Setenv(srcPwEnv, srcPw)
	r, text = runPreflight(t, s.Config, "Payroll")
	c = findIn(t, r, KindDatabase, devenv.SourceInstance, "database available")
	if c.Status != Missing || c.Database != "Payroll" || !strings.Contains(c.Detail, `no database "Payroll"`) {
		t.Errorf("unknown database: %+v\n%s", c, text)
	}
	if _, err := Run(context.Background(), Options{Config: s.Config, Database: "Nope"}); err == nil || !strings.Contains(err.Error(), "Nope") {
		t.Errorf("a database that is not configured: %v", err)
	}
}

// SQL Server 2019 names VIEW SERVER STATE, and an Express edition has no
// backup compression: a warning saying what to change.
func TestOlderVersionAndExpressEdition(t *testing.T) {
	dir := t.TempDir()
	in, err := sqlsim.New(sqlsim.Config{Name: "sqlexpress", ListenAddr: "127.0.0.1:0", DataDir: dir, Edition: "Express", MajorVersion: 15,
		Principals: []sqlsim.Login{{Name: srcLogin, Password: srcPw, Server: []string{tsql.PermCreateAnyDatabase},
			Databases: map[string][]string{"Shop": {tsql.RoleDBBackupOperator}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	if err := in.CreateDatabase(sqlsim.DatabaseSpec{Name: "Shop", Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	t.Setenv(srcPwEnv, srcPw)
	cfg := shopConfig(t, "sqlexpress", in.Addr(), srcLogin, deadAddress(t))
	r, text := runPreflight(t, cfg, "Shop")
	if c := findIn(t, r, KindInstance, "sqlexpress", tsql.PermViewServerState); c.Status != Missing || c.Fix != "GRANT VIEW SERVER STATE TO [bk_src];" {
		t.Errorf("2019 without VIEW SERVER STATE: %+v", c)
	}
	if c := findIn(t, r, KindDatabase, "sqlexpress", "backup compression"); c.Status != Warn || !strings.Contains(c.Fix, "compression: false") {
		t.Errorf("Express with compression: %+v\n%s", c, text)
	}
	if c := findIn(t, r, KindDatabase, "sqlexpress", tsql.PermBackupDatabase); c.Status != OK {
		t.Errorf("BACKUP DATABASE through db_backupoperator: %+v", c)
	}
}

// shopConfig configures database Shop on source instance src (at srcAddr,
// logging in as user) and its copies verified on sqlverify (at verifyAddr,
// as sa), both passwords in srcPwEnv; the two backup servers share a local
// directory.
func shopConfig(t *testing.T, src, srcAddr, user, verifyAddr string) *config.Config {
	t.Helper()
	return shopConfigAt(t, src, srcAddr, user, verifyAddr, t.TempDir())
}

// shopConfigAt is shopConfig with both backup servers' location in bak.
func shopConfigAt(t *testing.T, src, srcAddr, user, verifyAddr, bak string) *config.Config {
	t.Helper()
	key := filepath.Join(t.TempDir(), "manifest.key")
	if err := os.WriteFile(key, []byte("the manifest key of the Shop site, 32 bytes or more\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
manifest_keys: [{id: shop, key_file: '`+key+`'}]
sql_instances:
  - {name: `+src+`, address: "`+srcAddr+`", user: `+user+`, password_env: `+srcPwEnv+`, encrypt: disable}
  - {name: sqlverify, address: "`+verifyAddr+`", user: sa, password_env: `+srcPwEnv+`, encrypt: disable}
backup_servers:
  - {name: bak01, unc_paths: ['\\bak01\backup'], location: `+bak+`, verify_instance: sqlverify, restore_data_dir: 'R:\data', restore_log_dir: 'R:\log'}
  - {name: bak02, unc_paths: ['\\bak02\backup'], location: `+bak+`, verify_instance: sqlverify, restore_data_dir: 'R:\data', restore_log_dir: 'R:\log'}
databases:
  - {name: Shop, instance: `+src+`, backup_servers: [bak01, bak02], sequence: utc, compression: true}
`), src+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// deadAddress is a loopback port nobody listens on.
func deadAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// sequence: catalog reads the source's msdb.dbo.backupset: a source login
// without SELECT there gets a warning with the GRANT; with it (the minimal
// grants of config.example.yaml) the report is clean.
func TestCatalogSequenceBackupHistoryThroughTheEmulator(t *testing.T) {
	s := startSite(t)
	restrict(t, s)
	s.Config.Databases[0].Sequence = config.SequenceCatalog
	r, text := runPreflight(t, s.Config, devenv.Database)
	c := findIn(t, r, KindInstance, devenv.SourceInstance, "SELECT msdb.dbo.backupset")
	if c.Status != Warn || !strings.Contains(c.Fix, "GRANT SELECT ON [dbo].[backupset] TO [bk_src];") || !strings.Contains(text, c.Fix) {
		t.Fatalf("source login without SELECT on msdb.dbo.backupset: %+v\n%s", c, text)
	}
	l := minimalSource()
	l.Databases["msdb"] = []string{tsql.PermSelect}
	setLogin(t, s.Source, l)
	r, text = runPreflight(t, s.Config, devenv.Database)
	if c := findIn(t, r, KindInstance, devenv.SourceInstance, "SELECT msdb.dbo.backupset"); c.Status != OK || !r.OK || r.Warnings != 0 {
		t.Fatalf("with SELECT on msdb: %+v, missing %d, warnings %d\n%s", c, r.Missing, r.Warnings, text)
	}
}

// sa opens the site's instance as its administrator.
func sa(t *testing.T, s *devenv.Site, in *sqlsim.Instance) *sql.DB {
	t.Helper()
	pw, err := config.ResolveSecret(config.SecretRef{File: filepath.Join(filepath.Dir(s.ConfigFile), "secrets", "sa.password")})
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlserver", in.DSN(devenv.AdminLogin, pw, "master"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// A source database whose pages carry no checksum, and a maintenance job
// on the verification instance that runs on every user database without
// excluding the restored copies: warnings with the fix.
func TestPageVerifyAndMaintenanceJobs(t *testing.T) {
	s := startSite(t)
	if _, err := sa(t, s, s.Source).ExecContext(context.Background(), "ALTER DATABASE ["+devenv.Database+"] SET PAGE_VERIFY TORN_PAGE_DETECTION"); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify.AddAgentJob("IndexOptimize - USER_DATABASES", sqlsim.AgentJobStep{Name: "optimize", Subsystem: "CmdExec",
		Command: `sqlcmd -E -S $(ESCAPE_SQUOTE(SRVR)) -Q "EXECUTE dbo.IndexOptimize @Databases = 'USER_DATABASES'" -b`}); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify.AddAgentJob("DatabaseIntegrityCheck", sqlsim.AgentJobStep{Name: "check", Subsystem: "TSQL",
		Command: "EXECUTE dbo.DatabaseIntegrityCheck @Databases = 'USER_DATABASES, -%_verify_%'", Database: "master"}); err != nil {
		t.Fatal(err)
	}
	r, text := runPreflight(t, s.Config, "")
	c := findIn(t, r, KindDatabase, devenv.SourceInstance, "page_verify")
	if c.Status != Warn || !strings.Contains(c.Detail, "TORN_PAGE_DETECTION") || !strings.Contains(c.Fix, "SET PAGE_VERIFY CHECKSUM") {
		t.Errorf("page_verify: %+v\n%s", c, text)
	}
	c = findIn(t, r, KindInstance, devenv.VerifyInstance, "maintenance jobs")
	if c.Status != Warn || !strings.Contains(c.Detail, "IndexOptimize - USER_DATABASES") || strings.Contains(c.Detail, "DatabaseIntegrityCheck") ||
		!strings.Contains(c.Fix, "-%_verify_%") {
		t.Errorf("maintenance jobs: %+v\n%s", c, text)
	}
	if r.Warnings != 2 {
		t.Errorf("%d warnings, want 2:\n%s", r.Warnings, text)
	}
}

// log_backup needs the FULL recovery model: BULK_LOGGED is a warning
// (no point in time inside a log backup holding bulk-logged changes),
// SIMPLE is MISSING with the ALTER DATABASE that fixes it, FULL is OK.
// The recovery model is switched as a DBA would, through real TDS.
func TestRecoveryModelOfALogBackupDatabase(t *testing.T) {
	s := startSite(t)
	s.Config.Databases[0].LogBackup.Every = time.Minute
	s.Config.Databases[0].OwnsBackupChain = true
	admin := sourceAdmin(t, s)
	defer admin.Close()
	for _, tc := range []struct {
		model  string
		status Status
		says   string
	}{
		{"BULK_LOGGED", Warn, "STOPAT"},
		{"SIMPLE", Missing, "4208"},
		{"FULL", OK, "FULL"},
	} {
		if _, err := admin.ExecContext(context.Background(), "ALTER DATABASE ["+devenv.Database+"] SET RECOVERY "+tc.model); err != nil {
			t.Fatal(err)
		}
		r, text := runPreflight(t, s.Config, devenv.Database)
		c := findDatabaseCheck(t, r, devenv.SourceInstance, devenv.Database, "recovery model", text)
		if c.Status != tc.status || !strings.Contains(c.Detail, tc.says) ||
			tc.status != OK && !strings.Contains(c.Fix, "ALTER DATABASE ["+devenv.Database+"] SET RECOVERY FULL") {
			t.Errorf("%s: %s %q fix %q, want %s saying %q and the ALTER DATABASE", tc.model, c.Status, c.Detail, c.Fix, tc.status, tc.says)
		}
	}
	// Without log_backup the recovery model is not asked.
	s.Config.Databases[0].LogBackup.Every = 0
	r, _ := runPreflight(t, s.Config, devenv.Database)
	for _, c := range r.Checks {
		if c.Name == "recovery model" {
			t.Errorf("a database without log_backup gets a recovery model row: %+v", c)
		}
	}
}
