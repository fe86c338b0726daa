package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/conformance"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// probeLogin is the login `starter conformance` runs as in the tests: only
// what its help says it needs.
const probeLogin = "conformance_probe"

// conformanceSite is an emulated source (Berlin time) and verification
// instance (UTC) whose configured logins hold only CREATE ANY DATABASE,
// VIEW SERVER STATE and SELECT in msdb, and on the source the view of the
// certificate Sales's encryption: names (VIEW ANY DEFINITION, the
// emulator's stand-in for VIEW DEFINITION on it), which both hold. The instances are throttled so that
// the scratch database's BACKUP, RESTORE and CHECKDB last seconds, as a
// few hundred megabytes do on a real server.
func conformanceSite(t *testing.T) *sitetest.Site {
	t.Helper()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	site := sitetest.New(t, sitetest.Options{Database: "Sales",
		Extra:        "    encryption: {algorithm: AES_192, server_certificate: BackupCert}\n",
		SourceConfig: func(c *sqlsim.Config) { c.TimeZone = berlin },
		VerifyConfig: func(c *sqlsim.Config) { c.TimeZone = time.UTC }})
	cert, err := site.Source.CreateCertificate("BackupCert", "backup encryption")
	if err != nil {
		t.Fatal(err)
	}
	if err := site.Verify.ImportCertificate(cert); err != nil {
		t.Fatal(err)
	}
	for _, in := range []*sqlsim.Instance{site.Source, site.Verify} {
		server := []string{tsql.PermCreateAnyDatabase, "VIEW SERVER STATE"}
		if in == site.Source {
			server = append(server, tsql.PermViewAnyDefinition)
		}
		if err := in.SetLogin(sqlsim.Login{Name: probeLogin, Password: sitetest.Password, Server: server,
			Databases: map[string][]string{"msdb": {tsql.PermSelect}}}); err != nil {
			t.Fatal(err)
		}
	}
	site.Source.SetThrottle(1 << 20)
	site.Verify.SetThrottle(2 << 20)
	site.Reconfigure(func(y string) string { return strings.ReplaceAll(y, "user: sa", "user: "+probeLogin) })
	return site
}

// leftovers are the databases and files of conformance runs still on the
// site.
func leftovers(t *testing.T, site *sitetest.Site) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{site.Dirs["bak01"], site.Dirs["bak02"]} {
		files, _ := filepath.Glob(filepath.Join(dir, conformance.ScratchPrefix+"*"))
		out = append(out, files...)
		probes, _ := filepath.Glob(filepath.Join(dir, "backupcycle-probe-*"))
		out = append(out, probes...)
	}
	for name, in := range map[string]*sqlsim.Instance{"source": site.Source, "verify": site.Verify} {
		db, err := sql.Open("sqlserver", in.DSN("sa", sitetest.Password, "master"))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := db.Query("SELECT name FROM sys.databases")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(n, conformance.ScratchPrefix) {
				out = append(out, name+":"+n)
			}
		}
		rows.Close()
		db.Close()
	}
	return out
}

// ranOn checks that in ran exactly one statement of kind whose text holds
// mark, and that it ended ok.
func ranOn(t *testing.T, in *sqlsim.Instance, kind, mark string) {
	t.Helper()
	n := 0
	for _, st := range sitetest.Statements(in, kind) {
		if strings.Contains(st.SQL, mark) {
			n++
			if st.Outcome != "ok" {
				t.Errorf("the %s whose client vanished ended %q, want ok", kind, st.Outcome)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d %s statements with %q, want 1", n, kind, mark)
	}
}

// `starter conformance` against the emulator: every probe holds (the
// emulator behaves as the product assumes, and the probes see it), with
// only the permissions the help names; it says first what it creates, and
// removes all of it.
func TestConformanceEveryProbeHoldsOnTheEmulator(t *testing.T) {
	site := conformanceSite(t)
	var out, errb bytes.Buffer
	code := runIO(context.Background(), []string{"conformance", "--config", site.ConfigPath, "--instance", site.Instance,
		"--verify-instance", sitetest.VerifyInstance, "--size", "32KiB", "--yes", "--json"}, nil, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s\nreport:\n%s", code, errb.String(), out.String())
	}
	plan := errb.String()
	for _, want := range []string{"It will create", "on SQL instance " + site.Instance + ": database " + conformance.ScratchPrefix,
		"on backup server bak01", `\\bak01\backup\` + conformance.ScratchPrefix, "_copy", "_restoring", "CREATE DATABASE",
		"_enc.bak of " + conformance.ScratchPrefix, "WITH ENCRYPTION (ALGORITHM = AES_192, SERVER CERTIFICATE = BackupCert)"} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan on stderr lacks %q:\n%s", want, plan)
		}
	}
	checkJSONStyle(t, "conformance --json", out.String())
	var rep conformance.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	ids := []string{conformance.IDLastGoodRestored, conformance.IDLastGoodCheckDB, conformance.IDCheckDBPhases, conformance.IDBatchText,
		conformance.IDCreateDate, conformance.IDRestoreDate, conformance.IDVanishedBackup, conformance.IDVanishedRestore, conformance.IDDropRestoring,
		conformance.IDHeaderClock, conformance.IDGarbageMedia, conformance.IDMissingFile, conformance.IDLogForkAfterRestore,
		conformance.IDDifferentialBase, conformance.IDEncryptedBackup}
	if len(rep.Probes) != len(ids) {
		t.Fatalf("%d probes, want %d", len(rep.Probes), len(ids))
	}
	for i, p := range rep.Probes {
		if p.ID != ids[i] {
			t.Errorf("probe %d is %s, want %s", i, p.ID, ids[i])
		}
		if p.Verdict != conformance.Holds {
			t.Errorf("%s: %s: %s (%s)", p.ID, p.Verdict, p.Observed, p.Why)
		}
		if p.Assumption == "" || p.Observed == "" || p.IfFails == "" {
			t.Errorf("%s: assumption, observed or if_it_fails empty: %+v", p.ID, p)
		}
	}
	// Removed: the scratch database, the copy, the two backups, the log
	// chain probe's full, its differential and two log backups, the
	// encrypted backup (the RESTORING copy is dropped by its probe).
	if rep.Holds != len(ids) || rep.Fails != 0 || len(rep.Cleanup.Left) != 0 || len(rep.Cleanup.Removed) != 9 {
		t.Errorf("holds %d, fails %d, left %v, removed %v", rep.Holds, rep.Fails, rep.Cleanup.Left, rep.Cleanup.Removed)
	}
	if len(rep.Servers) != 2 || rep.Servers[0].UTCOffsetMinutes == 0 || rep.Servers[1].UTCOffsetMinutes != 0 {
		t.Errorf("servers: %+v", rep.Servers)
	}
	// The statements whose client vanished ran to their end on the
	// emulator.
	ranOn(t, site.Source, "BACKUP DATABASE", "_vanish.bak")
	ranOn(t, site.Verify, "RESTORE DATABASE", "NORECOVERY")
	if left := leftovers(t, site); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if t.Failed() {
		var text bytes.Buffer
		_ = rep.WriteText(&text)
		t.Log(text.String())
	}
}

// Without --verify-instance the copies are restored on the source under
// other names, beside the scratch database's files.
func TestConformanceOnOneInstance(t *testing.T) {
	site := conformanceSite(t)
	site.Source.SetThrottle(2 << 20)
	var out, errb bytes.Buffer
	code := runIO(context.Background(), []string{"conformance", "--config", site.ConfigPath, "--instance", site.Instance,
		"--size", "16KiB", "--yes", "--json"}, nil, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s\nreport:\n%s", code, errb.String(), out.String())
	}
	var rep conformance.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	if rep.VerifyInstance != site.Instance || len(rep.Servers) != 1 || rep.Holds != len(rep.Probes) {
		t.Errorf("verify instance %q, %d servers, %d of %d probes hold", rep.VerifyInstance, len(rep.Servers), rep.Holds, len(rep.Probes))
		for _, p := range rep.Probes {
			if p.Verdict != conformance.Holds {
				t.Logf("%s: %s: %s (%s)", p.ID, p.Verdict, p.Observed, p.Why)
			}
		}
	}
	if !strings.Contains(errb.String(), "beside the files of "+rep.Scratch.Database) {
		t.Errorf("the plan does not say where the copies go:\n%s", errb.String())
	}
	if left := leftovers(t, site); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// Interrupted (Ctrl-C) while the copy's CHECKDB runs: the CHECKDB is
// stopped, everything created is removed, the report says so, exit 1.
func TestConformanceInterruptedRemovesEverything(t *testing.T) {
	site := conformanceSite(t)
	release, err := site.Verify.HoldCheckDB(sqlsim.PhaseIViewCheck)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			for _, st := range sitetest.Statements(site.Verify, "DBCC CHECKDB") {
				if st.Outcome == "running" {
					time.Sleep(200 * time.Millisecond)
					cancel()
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var out, errb bytes.Buffer
	code := runIO(ctx, []string{"conformance", "--config", site.ConfigPath, "--instance", site.Instance,
		"--verify-instance", sitetest.VerifyInstance, "--size", "32KiB", "--yes"}, nil, &out, &errb)
	if code != exitFail || !strings.Contains(errb.String(), "interrupted") {
		t.Fatalf("exit %d, stderr %q, want 1 and interrupted:\n%s", code, errb.String(), out.String())
	}
	for _, want := range []string{"stopped early: interrupted", "removed: database " + conformance.ScratchPrefix, "_copy on " + sitetest.VerifyInstance} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "NOT REMOVED") {
		t.Errorf("something was not removed:\n%s", out.String())
	}
	for _, st := range sitetest.Statements(site.Verify, "DBCC CHECKDB") {
		if st.Outcome == "running" || st.Outcome == "ok" {
			t.Errorf("the held CHECKDB ended %q, want stopped", st.Outcome)
		}
	}
	if left := leftovers(t, site); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// Without --yes it asks; anything but yes creates nothing. Bad flags are
// usage errors.
func TestConformanceAsksFirst(t *testing.T) {
	site := conformanceSite(t)
	var out, errb bytes.Buffer
	code := runIO(context.Background(), []string{"conformance", "--config", site.ConfigPath, "--instance", site.Instance},
		strings.NewReader("n\n"), &out, &errb)
	if code != exitFail || !strings.Contains(errb.String(), "not confirmed: nothing was created") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if !strings.Contains(out.String(), "It will create") || !strings.Contains(out.String(), "Go ahead? [y/N]") {
		t.Errorf("no plan and question:\n%s", out.String())
	}
	if n := len(sitetest.Statements(site.Source, "CREATE DATABASE")); n != 0 {
		t.Errorf("%d CREATE DATABASE after a no", n)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"conformance", "--config", site.ConfigPath}, "--instance NAME is required"},
		{[]string{"conformance", "--config", site.ConfigPath, "--instance", "nope"}, `--instance "nope" is not in sql_instances`},
		{[]string{"conformance", "--config", site.ConfigPath, "--instance", site.Instance, "--server", "bak9"}, `--server "bak9"`},
		{[]string{"conformance", "--config", site.ConfigPath, "--instance", site.Instance, "--size", "lots"}, `--size "lots"`},
		{[]string{"conformance", "--instance", site.Instance}, "--config FILE is required"},
	} {
		code, _, errs := runStarter(t, tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}
