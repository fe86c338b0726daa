package preflight

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/evidence"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// allServer is a login holding every server permission the cycle needs,
// without being sysadmin.
func allServer(major int) serverFacts {
	f := serverFacts{Login: "bk", Major: major, EngineEdition: tsql.EngineEditionEnterprise, Edition: "Enterprise Edition (64-bit)", Perms: map[string]bool{}}
	for _, p := range serverPerms(major) {
		f.Perms[p] = true
	}
	return f
}

func allDB() databaseFacts {
	return databaseFacts{State: "ONLINE", Connect: true, Backup: true, SeqExists: true, SeqSelect: true, SeqUpdate: true, SizeBytes: 1 << 30}
}

func testDB() *config.Database {
	return &config.Database{Name: "Sales", Instance: "sql01", BackupServers: []string{"bak01", "bak02"},
		Policy: config.Policy{Sequence: config.SequenceTable, Compression: true}}
}

func find(t *testing.T, cs []Check, name string) Check {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, cs)
	return Check{}
}

func statuses(cs []Check) map[string]Status {
	m := map[string]Status{}
	for _, c := range cs {
		m[c.Name] = c.Status
	}
	return m
}

func allOK(t *testing.T, what string, cs []Check) {
	t.Helper()
	for _, c := range cs {
		if c.Status != OK {
			t.Errorf("%s: %s is %s (%s), want OK", what, c.Name, c.Status, c.Detail)
		}
	}
}

// A login holding exactly the minimal grants passes every check; so does
// sysadmin, whatever HAS_PERMS_BY_NAME says about single permissions.
func TestMinimalGrantsAndSysadminPass(t *testing.T) {
	for _, major := range []int{13, 15, 16} {
		f := allServer(major)
		allOK(t, "source", sourceInstanceChecks("sql01", f))
		allOK(t, "verify", verifyInstanceChecks("sqlverify", f, msdbFacts{RestoreHistory: true, BackupSet: true}))
		allOK(t, "database", databaseChecks(testDB(), f, allDB()))
	}
	sa := serverFacts{Login: "sa", Sysadmin: true, Major: 16, Perms: map[string]bool{}}
	allOK(t, "sysadmin source", sourceInstanceChecks("sql01", sa))
	allOK(t, "sysadmin verify", verifyInstanceChecks("sqlverify", sa, msdbFacts{}))
	allOK(t, "sysadmin database", databaseChecks(testDB(), sa, databaseFacts{State: "ONLINE", SizeBytes: 1}))
	c := find(t, verifyInstanceChecks("sqlverify", allServer(16), msdbFacts{RestoreHistory: true, BackupSet: true}), "DBCC CHECKDB, sanity queries")
	if !strings.Contains(c.Detail, "owns it and is db_owner") {
		t.Errorf("CHECKDB detail %q does not say the restoring login owns the copy", c.Detail)
	}
}

// Each server permission missing in turn is MISSING (ALTER ANY CONNECTION:
// WARN) with the GRANT that fixes it.
func TestEachServerPermissionMissing(t *testing.T) {
	cases := []struct {
		major   int
		drop    []string
		role    string // "source" or "verify"
		check   string
		status  Status
		fix     string
		also    string // another check that fails with it
		alsoFix string
	}{
		{16, []string{tsql.PermCreateAnyDatabase}, "source", tsql.PermCreateAnyDatabase, Missing, "GRANT CREATE ANY DATABASE TO [bk];", "", ""},
		{16, []string{tsql.PermViewServerState, tsql.PermViewServerPerformanceState}, "source", tsql.PermViewServerPerformanceState, Missing,
			"GRANT VIEW SERVER PERFORMANCE STATE TO [bk];", "", ""},
		{15, []string{tsql.PermViewServerState}, "source", tsql.PermViewServerState, Missing, "GRANT VIEW SERVER STATE TO [bk];", "", ""},
		{16, []string{tsql.PermAlterAnyConnection}, "source", tsql.PermAlterAnyConnection, Warn, "GRANT ALTER ANY CONNECTION TO [bk];", "", ""},
		{16, []string{tsql.PermCreateAnyDatabase}, "verify", tsql.PermCreateAnyDatabase, Missing, "GRANT CREATE ANY DATABASE TO [bk];",
			"DBCC CHECKDB, sanity queries", "GRANT CREATE ANY DATABASE TO [bk];"},
		{14, []string{tsql.PermViewServerState}, "verify", tsql.PermViewServerState, Missing, "GRANT VIEW SERVER STATE TO [bk];", "", ""},
	}
	for _, tc := range cases {
		f := allServer(tc.major)
		for _, p := range tc.drop {
			f.Perms[p] = false
		}
		var cs []Check
		if tc.role == "source" {
			cs = sourceInstanceChecks("sql01", f)
		} else {
			cs = verifyInstanceChecks("sqlverify", f, msdbFacts{RestoreHistory: true, BackupSet: true})
		}
		c := find(t, cs, tc.check)
		if c.Status != tc.status || c.Fix != tc.fix {
			t.Errorf("%s without %v: %s is %s, fix %q; want %s, %q", tc.role, tc.drop, tc.check, c.Status, c.Fix, tc.status, tc.fix)
		}
		for _, o := range cs {
			if o.Name != tc.check && o.Name != tc.also && o.Status != OK {
				t.Errorf("%s without %v: %s is %s too", tc.role, tc.drop, o.Name, o.Status)
			}
		}
		if tc.also != "" {
			if o := find(t, cs, tc.also); o.Status != Missing || o.Fix != tc.alsoFix {
				t.Errorf("%s without %v: %s is %s, fix %q", tc.role, tc.drop, tc.also, o.Status, o.Fix)
			}
		}
	}
	// VIEW SERVER STATE covers VIEW SERVER PERFORMANCE STATE on 2022.
	f := allServer(16)
	f.Perms[tsql.PermViewServerPerformanceState] = false
	if c := find(t, sourceInstanceChecks("sql01", f), tsql.PermViewServerPerformanceState); c.Status != OK {
		t.Errorf("VIEW SERVER STATE alone on 2022: %s", c.Status)
	}
	// dbcreator and processadmin count even where HAS_PERMS_BY_NAME does not list them.
	f = serverFacts{Login: "bk", Major: 16, DBCreator: true, ProcessAdmin: true,
		Perms: map[string]bool{tsql.PermViewServerPerformanceState: true}}
	allOK(t, "dbcreator + processadmin", verifyInstanceChecks("sqlverify", f, msdbFacts{RestoreHistory: true, BackupSet: true}))
	// CREATE DATABASE granted in master is enough for RESTORE HEADERONLY.
	f = allServer(16)
	f.Perms[tsql.PermCreateAnyDatabase], f.MasterCreateDB = false, true
	if c := find(t, sourceInstanceChecks("sql01", f), tsql.PermCreateAnyDatabase); c.Status != OK || !strings.Contains(c.Detail, "in master") {
		t.Errorf("CREATE DATABASE in master: %+v", c)
	}
}

// msdb's restore history: SELECT on both tables, with CREATE USER when the
// login has no user in msdb.
func TestRestoreHistoryGrants(t *testing.T) {
	cs := verifyInstanceChecks("sqlverify", allServer(16), msdbFacts{BackupSet: true})
	c := find(t, cs, "SELECT msdb.dbo.restorehistory")
	if c.Status != Missing || c.Fix != "USE [msdb]; IF DATABASE_PRINCIPAL_ID(N'bk') IS NULL CREATE USER [bk] FOR LOGIN [bk]; GRANT SELECT ON [dbo].[restorehistory] TO [bk];" {
		t.Errorf("restorehistory: %s %q", c.Status, c.Fix)
	}
	cs = verifyInstanceChecks("sqlverify", allServer(16), msdbFacts{RestoreHistory: true})
	c = find(t, cs, "SELECT msdb.dbo.backupset")
	if c.Status != Missing || c.Fix != "USE [msdb]; IF DATABASE_PRINCIPAL_ID(N'bk') IS NULL CREATE USER [bk] FOR LOGIN [bk]; GRANT SELECT ON [dbo].[backupset] TO [bk];" {
		t.Errorf("backupset: %s %q", c.Status, c.Fix)
	}
}

func TestDatabaseChecks(t *testing.T) {
	f := allServer(16)
	d := allDB()
	d.Backup, d.Connect = false, false
	c := find(t, databaseChecks(testDB(), f, d), tsql.PermBackupDatabase)
	if c.Status != Missing || c.Fix != "USE [Sales]; IF DATABASE_PRINCIPAL_ID(N'bk') IS NULL CREATE USER [bk] FOR LOGIN [bk]; ALTER ROLE [db_backupoperator] ADD MEMBER [bk];" {
		t.Errorf("BACKUP DATABASE without a user: %s %q", c.Status, c.Fix)
	}
	d = allDB()
	d.Backup = false
	c = find(t, databaseChecks(testDB(), f, d), tsql.PermBackupDatabase)
	if c.Fix != "USE [Sales]; ALTER ROLE [db_backupoperator] ADD MEMBER [bk];" {
		t.Errorf("BACKUP DATABASE with a user: %q", c.Fix)
	}

	for state, want := range map[string]string{"": "no database", "RESTORING": "RESTORING", "OFFLINE": "OFFLINE"} {
		d := allDB()
		d.State = state
		cs := databaseChecks(testDB(), f, d)
		c := find(t, cs, "database available")
		if c.Status != Missing || !strings.Contains(c.Detail, want) || c.Fix == "" || len(cs) != 1 {
			t.Errorf("state %q: %+v (of %d checks)", state, c, len(cs))
		}
	}

	d = allDB()
	d.SeqUpdate = false
	c = find(t, databaseChecks(testDB(), f, d), "sequence table")
	if c.Status != Missing || c.Fix != "USE [Sales]; GRANT SELECT, UPDATE ON [DBBackup].[Sequence] TO [bk];" || !strings.Contains(c.Detail, "UPDATE") {
		t.Errorf("sequence without UPDATE: %s %q %q", c.Status, c.Detail, c.Fix)
	}
	// Absent and not creatable: the fix creates it (idempotent) and grants.
	d = allDB()
	d.SeqExists, d.SeqSelect, d.SeqUpdate = false, false, false
	c = find(t, databaseChecks(testDB(), f, d), "sequence table")
	setup, _ := tsql.SequenceSetup("Sales")
	if c.Status != Missing || !strings.HasPrefix(c.Fix, setup[0]+";\n") || !strings.HasSuffix(c.Fix, "GRANT SELECT, UPDATE ON [DBBackup].[Sequence] TO [bk];") {
		t.Errorf("sequence absent: %s %q", c.Status, c.Fix)
	}
	// Absent, but the login may create it (ALTER on the database).
	d.Alter = true
	if c := find(t, databaseChecks(testDB(), f, d), "sequence table"); c.Status != OK {
		t.Errorf("sequence absent with ALTER: %s", c.Status)
	}
	// sequence: utc writes nothing to the source.
	db := testDB()
	db.Sequence = config.SequenceUTC
	if _, ok := statuses(databaseChecks(db, f, allDB()))["sequence table"]; ok {
		t.Error("sequence: utc still checks the sequence table")
	}

	d = allDB()
	d.SizeBytes = -1
	if c := find(t, databaseChecks(testDB(), f, d), "size"); c.Status != Warn || !strings.Contains(c.Detail, "unknown") {
		t.Errorf("unknown size: %+v", c)
	}
}

func TestCompressionAndEdition(t *testing.T) {
	for _, tc := range []struct {
		engine  int
		edition string
		want    Status
	}{
		{tsql.EngineEditionExpress, "Express Edition (64-bit)", Warn},
		{tsql.EngineEditionStandard, "Web Edition (64-bit)", Warn},
		{tsql.EngineEditionStandard, "Standard Edition (64-bit)", OK},
		{tsql.EngineEditionEnterprise, "Developer Edition (64-bit)", OK},
	} {
		f := allServer(16)
		f.EngineEdition, f.Edition = tc.engine, tc.edition
		c := find(t, databaseChecks(testDB(), f, allDB()), "backup compression")
		if c.Status != tc.want || (tc.want == Warn && !strings.Contains(c.Fix, "compression: false")) {
			t.Errorf("%s: %+v", tc.edition, c)
		}
		db := testDB()
		db.Compression = false
		if _, ok := statuses(databaseChecks(db, f, allDB()))["backup compression"]; ok {
			t.Errorf("%s: compression: false still checked", tc.edition)
		}
	}
}

// An instance that is both source and verification gets one row per
// server permission, with both reasons and the worse status.
func TestReportMergesAndRenders(t *testing.T) {
	f := allServer(16)
	f.Perms[tsql.PermCreateAnyDatabase] = false
	f.Perms[tsql.PermAlterAnyDatabase] = false
	r := &Report{Config: "site.yaml", headers: map[string]string{}}
	r.add(Check{Kind: KindInstance, Instance: "sql01", Name: "login", Status: OK, Detail: "connected"})
	r.add(sourceInstanceChecks("sql01", f)...)
	r.add(verifyInstanceChecks("sql01", f, msdbFacts{RestoreHistory: true, BackupSet: true})...)
	r.add(databaseChecks(testDB(), f, allDB())...)
	r.finish()
	n := 0
	for _, c := range r.Checks {
		if c.Name == tsql.PermCreateAnyDatabase {
			n++
			if !strings.Contains(c.For, "source") || !strings.Contains(c.For, "verification") {
				t.Errorf("merged reasons: %q", c.For)
			}
		}
	}
	if n != 1 {
		t.Errorf("CREATE ANY DATABASE listed %d times, want once", n)
	}
	// CREATE ANY DATABASE, CHECKDB (follows from CREATE).
	if r.OK || r.Missing != 2 || r.Err() == nil {
		t.Errorf("OK %v, missing %d, err %v", r.OK, r.Missing, r.Err())
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"SQL instance sql01", "database sql01/Sales", "MISSING  CREATE ANY DATABASE",
		"fix:                            GRANT CREATE ANY DATABASE TO [bk];", "preflight: ", "2 MISSING"} {
		if !strings.Contains(text, want) {
			t.Errorf("text report lacks %q:\n%s", want, text)
		}
	}
	out.Reset()
	if err := r.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.OK || back.Missing != 2 || len(back.Checks) != len(r.Checks) || len(back.MissingChecks()) != 2 {
		t.Errorf("JSON round trip: %+v", back)
	}
	if c := back.MissingChecks()[0]; c.Kind != KindInstance || c.Instance != "sql01" || c.Fix == "" {
		t.Errorf("JSON check: %+v", c)
	}

	ok := &Report{}
	ok.add(Check{Kind: KindInstance, Instance: "sql01", Name: "login", Status: OK})
	ok.add(Check{Kind: KindInstance, Instance: "sql01", Name: tsql.PermAlterAnyConnection, Status: Warn})
	ok.finish()
	if !ok.OK || ok.Err() != nil || ok.Warnings != 1 {
		t.Errorf("a warning alone: OK %v err %v warnings %d", ok.OK, ok.Err(), ok.Warnings)
	}
}

func TestNeedOfPlannedSets(t *testing.T) {
	a, b := testDB(), testDB()
	b.Name, b.Compression = "HR", false
	sizes := map[*config.Database]dbSize{a: {bytes: 400 << 20}, b: {bytes: 100 << 20}}
	n := needOf(Options{CompressionFactor: 4}, []*config.Database{a, b}, sizes)
	if n.Planned != 100<<20+100<<20 || n.Worst != 500<<20 || len(n.Unknown) != 0 {
		t.Errorf("need = %+v", n)
	}
	// An edition without compression writes the full size.
	sizes[a] = dbSize{bytes: 400 << 20, uncompressed: true}
	if n := needOf(Options{CompressionFactor: 4}, []*config.Database{a}, sizes); n.Planned != 400<<20 {
		t.Errorf("uncompressed edition: %+v", n)
	}
	delete(sizes, b)
	if n := needOf(Options{CompressionFactor: 4}, []*config.Database{a, b}, sizes); len(n.Unknown) != 1 || n.Unknown[0] != "sql01/HR" {
		t.Errorf("unknown size: %+v", n)
	}
}

// The worker logs what is not OK as warnings with the stable keys
// instance, db and server, and one summary line.
func TestLogUsesStableKeys(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	r := &Report{}
	r.add(Check{Kind: KindInstance, Instance: "sql01", Name: "login", Status: OK},
		Check{Kind: KindDatabase, Instance: "sql01", Database: "Sales", Name: tsql.PermBackupDatabase, Status: Missing,
			Fix: "USE [Sales]; ALTER ROLE [db_backupoperator] ADD MEMBER [bk];"},
		Check{Kind: KindServer, Server: "bak01", Name: "free space", Status: Warn, Detail: "unknown"})
	r.finish()
	r.Log(zap.New(core))
	warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
	if len(warns) != 2 {
		t.Fatalf("%d warnings, want 2: %v", len(warns), logs.All())
	}
	m := warns[0].ContextMap()
	if m["instance"] != "sql01" || m["db"] != "Sales" || m["check"] != tsql.PermBackupDatabase || m["status"] != "MISSING" ||
		m["fix"] != "USE [Sales]; ALTER ROLE [db_backupoperator] ADD MEMBER [bk];" {
		t.Errorf("missing permission logged as %v", m)
	}
	if m := warns[1].ContextMap(); m["server"] != "bak01" || m["status"] != "WARN" {
		t.Errorf("warning logged as %v", m)
	}
	if info := logs.FilterLevelExact(zapcore.InfoLevel).All(); len(info) != 1 || info[0].ContextMap()["missing"] != int64(1) {
		t.Errorf("summary: %v", info)
	}
}

// The verification login owns the copy it restores: RESTORE ... REPLACE
// over it and DROP DATABASE of it need no ALTER ANY DATABASE, which is not
// asked for.
func TestVerificationNeedsNoAlterAnyDatabase(t *testing.T) {
	f := allServer(16)
	f.Perms[tsql.PermAlterAnyDatabase] = false
	cs := verifyInstanceChecks("sqlverify", f, msdbFacts{RestoreHistory: true, BackupSet: true})
	allOK(t, "verification without ALTER ANY DATABASE", cs)
	for _, c := range cs {
		if c.Name == tsql.PermAlterAnyDatabase {
			t.Errorf("ALTER ANY DATABASE still checked: %+v", c)
		}
	}
}

// sequence: catalog reads the source's msdb.dbo.backupset: without SELECT
// a warning with the GRANT (the cycle runs on the servers' numbers alone).
func TestSourceBackupHistoryGrant(t *testing.T) {
	c := backupHistoryCheck("sql01", allServer(16), msdbFacts{RestoreHistory: true})
	if c.Status != Warn || c.Fix != "USE [msdb]; IF DATABASE_PRINCIPAL_ID(N'bk') IS NULL CREATE USER [bk] FOR LOGIN [bk]; GRANT SELECT ON [dbo].[backupset] TO [bk];" {
		t.Errorf("source backupset: %s %q", c.Status, c.Fix)
	}
	if c := backupHistoryCheck("sql01", allServer(16), msdbFacts{BackupSet: true}); c.Status != OK {
		t.Errorf("source backupset held: %+v", c)
	}
}

// twoServerSite is a site of two SQL instances and two backup servers
// nobody reaches, with one database.
const twoServerSite = `sql_instances:
  - {name: sql01, address: "127.0.0.1:1", user: sa, password_env: X, encrypt: disable}
  - {name: sqlverify, address: "127.0.0.1:2", user: sa, password_env: X, encrypt: disable}
backup_servers:
  - {name: bak01, unc_paths: ['\\bak01\backup'], location: /srv/backup, verify_instance: sqlverify, restore_data_dir: 'R:\data', restore_log_dir: 'R:\log'}
  - {name: bak02, unc_paths: ['\\bak02\backup'], location: /srv/backup, verify_instance: sqlverify, restore_data_dir: 'R:\data', restore_log_dir: 'R:\log'}
databases:
  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02]}
`

// The configuration's warnings (a heartbeat_timeout under 3 minutes) are
// reported as warnings of the configuration file, with the fix.
func TestConfigWarningsReported(t *testing.T) {
	cfg, err := config.Parse([]byte("\ndefaults:\n  heartbeat_timeout: 30s\n"+twoServerSite), "site.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cs := configChecks(cfg)
	if len(cs) != 2 || cs[0].Kind != KindConfig || cs[0].Status != Warn || cs[0].Name != "defaults.heartbeat_timeout" ||
		!strings.Contains(cs[0].Detail, "site.yaml:3") || !strings.Contains(cs[0].Fix, "heartbeat_timeout: 4m") {
		t.Fatalf("config checks %+v", cs)
	}
	r := &Report{Config: "site.yaml", headers: map[string]string{}}
	r.add(cs...)
	r.finish()
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "\nconfiguration\n") || !strings.Contains(out.String(), "WARN") || r.Warnings != 2 || !r.OK {
		t.Errorf("report:\n%s", out.String())
	}
}

// Without manifest_keys preflight warns that manifests are not
// authenticated; with them it says which key signs, and a key it cannot
// read is missing (the worker could sign nothing), its value never shown.
func TestManifestKeysCheck(t *testing.T) {
	check := func(keys string) Check {
		t.Helper()
		cfg, err := config.Parse([]byte(keys+twoServerSite), "site.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return manifestKeysCheck(cfg)
	}
	if c := check(""); c.Status != Warn || !strings.Contains(c.Detail, "neither signed nor authenticated") || !strings.Contains(c.Fix, "manifest_keys") {
		t.Errorf("without keys: %+v, want a warning with the fix", c)
	}
	const value = "the key the workers sign with, 32 bytes or more"
	t.Setenv("PREFLIGHT_TEST_MANIFEST_KEY", value)
	keys := "manifest_keys:\n  - {id: k2, key_env: PREFLIGHT_TEST_MANIFEST_KEY}\n  - {id: k1, key_env: PREFLIGHT_TEST_MANIFEST_KEY}\n"
	if c := check(keys); c.Status != OK || c.Detail != "HMAC-SHA256: key k2 signs, k1 still verify" {
		t.Errorf("with keys: %+v", c)
	}
	t.Setenv("PREFLIGHT_TEST_MANIFEST_KEY", "")
	if c := check(keys); c.Status != Missing || !strings.Contains(c.Detail, "PREFLIGHT_TEST_MANIFEST_KEY is empty") {
		t.Errorf("key unreadable: %+v, want missing naming the variable", c)
	}
}

// With an evidence ledger preflight says which key signs; a key it cannot
// read is missing, its value never shown; public keys alone verify only.
func TestEvidenceCheck(t *testing.T) {
	key, enc, err := evidence.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	check := func(section string) Check {
		t.Helper()
		cfg, err := config.Parse([]byte("evidence:\n"+section+"  public_keys: ['"+key.Public().String()+"']\n"+twoServerSite), "site.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return evidenceCheck(cfg)
	}
	t.Setenv("PREFLIGHT_TEST_EVIDENCE_KEY", enc)
	if c := check("  signing_key_env: PREFLIGHT_TEST_EVIDENCE_KEY\n"); c.Status != OK || !strings.Contains(c.Detail, "Ed25519 key "+key.ID()+" signs") {
		t.Errorf("with a key: %+v", c)
	}
	t.Setenv("PREFLIGHT_TEST_EVIDENCE_KEY", "not base64!")
	if c := check("  signing_key_env: PREFLIGHT_TEST_EVIDENCE_KEY\n"); c.Status != Missing || !strings.Contains(c.Detail, "not base64") ||
		strings.Contains(c.Detail, "not base64!") {
		t.Errorf("key unreadable: %+v", c)
	}
	if c := check(""); c.Status != Warn || !strings.Contains(c.Detail, "records nothing") {
		t.Errorf("public keys only: %+v", c)
	}
}

// Agent jobs the login cannot read are not checked, and the row says what
// to look at; readable ones are judged by the copies' patterns.
func TestMaintenanceJobsCheck(t *testing.T) {
	c := maintenanceJobsCheck("sqlverify", "bk_ver", []string{"%_verify"}, nil, false)
	if c.Status != OK || !strings.Contains(c.Detail, "not checked") || !strings.Contains(c.Detail, "%_verify") {
		t.Errorf("unreadable: %+v", c)
	}
	steps := []jobStep{
		{Job: "Backup - ALL", Step: "full", Command: "EXECUTE dbo.DatabaseBackup @Databases = 'ALL_DATABASES', @BackupType = 'FULL'"},
		{Job: "Checks", Step: "check", Command: "EXECUTE dbo.DatabaseIntegrityCheck @Databases = 'USER_DATABASES, -%_verify'"},
	}
	c = maintenanceJobsCheck("sqlverify", "bk_ver", []string{"%_verify"}, steps, true)
	if c.Status != Warn || !strings.Contains(c.Detail, "Backup - ALL (step full)") || strings.Contains(c.Detail, "Checks") ||
		!strings.Contains(c.Fix, "-%_verify") {
		t.Errorf("readable: %+v", c)
	}
}

// A recovery model the login could not read is a warning naming why.
func TestRecoveryModelUnreadable(t *testing.T) {
	db := &config.Database{Name: "Sales", Instance: "sql01"}
	db.LogBackup.Every = time.Minute
	c := recoveryModelCheck(Check{}, db, serverFacts{Login: "bk"}, databaseFacts{RecoveryErr: errors.New("recovery model of Sales: no row")})
	if c.Status != Warn || !strings.Contains(c.Detail, "bk could not read it") || !strings.Contains(c.Detail, "no row") || !strings.Contains(c.Fix, "VIEW ANY DATABASE") {
		t.Errorf("unreadable recovery model: %+v", c)
	}
}
