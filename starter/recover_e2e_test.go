package main

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/microsoft/go-mssqldb"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/logs"
	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// The bad night, end to end: the demo's site (sql01 with Sales and its
// commit-time workload, the remote site's sqlverify, bak01 and bak02), the
// real workflows and activities on the embedded Temporal server, the
// starter itself. A verified full and five log backups copied to bak02;
// then bak01 is gone (its server killed, its paths unreachable from
// sqlverify), and `starter recover --wait` restores Sales on sqlverify to
// a point between two log backups from bak02 alone. The copy holds
// exactly the rows the source committed at or before the point, and the
// output says so: the recovery point, what was read from where, the times.
func TestRecoverTheBadNightFromTheRemoteSiteAlone(t *testing.T) {
	const tq = "tq-e2e-recover"
	state := t.TempDir()
	// smbd's share user must reach the state directory: the backup
	// servers are Samba servers when Samba is installed.
	if err := os.Chmod(filepath.Dir(state), 0o711); err != nil {
		t.Fatal(err)
	}
	site, err := devenv.Start(context.Background(), devenv.Options{StateDir: state, DatabaseSize: devenv.MinDatabaseSize,
		TemporalAddress: srv.FrontendAddress(), LogBackups: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Stop() })
	t.Logf("%s", site.BackupMode())
	siteWorker(t, site, tq)
	if code, out, errs := on(t, tq, "run", "--config", site.ConfigFile, "--database", devenv.Database, "--wait"); code != exitOK {
		t.Fatalf("run --wait: exit %d\n%s%s", code, out, errs)
	}
	// Five log backups, each after a few commits spread over a second.
	acts := activities.New(zap.NewNop())
	acts.Cycle = activities.CycleDeps{Config: site.Config}
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(nopLog{})
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(logs.New(acts))
	commit := func(n int) {
		for range n {
			if err := site.Source.CommitNow(devenv.Database); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var taken []logs.BackupLogOutput
	commit(5)
	for range 5 {
		commit(4)
		v, err := env.ExecuteActivity(logs.New(nil).BackupLog, logs.BackupLogInput{Database: devenv.Database, Instance: devenv.SourceInstance})
		var out logs.BackupLogOutput
		if err == nil {
			err = v.Get(&out)
		}
		if err != nil || out.Number == 0 {
			t.Fatalf("BackupLog: %+v, %v", out, err)
		}
		if _, err := env.ExecuteActivity(logs.New(nil).CopyLogs, logs.CopyLogsInput{Database: devenv.Database, Instance: devenv.SourceInstance,
			Chain: out.Chain}); err != nil {
			t.Fatalf("CopyLogs: %v", err)
		}
		taken = append(taken, out)
	}
	// The point: between log 3 and log 4, after two of the four commits.
	point := taken[2].Finish.Add(taken[3].Start.Sub(taken[2].Finish) / 2).Truncate(time.Millisecond)

	// The primary site is gone: bak01's server, and its paths from sqlverify.
	if smb := site.SMB["bak01"]; smb != nil {
		smb.Kill()
	} else if err := os.Rename(site.BackupDirs["bak01"], site.BackupDirs["bak01"]+".gone"); err != nil {
		t.Fatal(err)
	}
	for _, p := range site.UNCPaths["bak01"] {
		site.Verify.SetShareUnreachable(p, true)
	}

	code, out, errs := on(t, tq, "recover", "--config", site.ConfigFile, "--database", devenv.Database, "--to-instance", devenv.VerifyInstance,
		"--as-of", point.Format(time.RFC3339Nano), "--wait")
	t.Logf("starter recover --wait:\n%s%s", out, errs)
	if code != exitOK {
		t.Fatalf("recover --wait: exit %d", code)
	}
	for _, re := range []string{
		`(?m)^RECOVERED Sales on sqlverify to ` + regexp.QuoteMeta(point.UTC().Format(time.RFC3339Nano)) + ` \(stopat; workflow recover/sqlverify/Sales\)$`,
		`(?m)^  restored: set 1 of Sales@sql01 and 4 log backup\(s\) of chain 1 \(logs 1-4, STOPAT reached in log 4\), read from bak02$`,
		`(?m)^  not read: bak01: `,
		`(?m)^  times:    plan \S+, full \S+, logs \S+ \(\S+ per log\), recovery \S+; time to recover \S+$`,
		// Predicted before it ran: no drill yet, a second a log assumed.
		`(?m)^  predicted: full \S+, measured \S+, error [-+]\S+ \(x[0-9.]+\); logs 4s, measured \S+, error -\S+ \(x0\.[0-9]+\); restore \S+, measured \S+, error [-+]\S+ \(x[0-9.]+\)$`,
		`(?m)^  msdb:     [1-4] log backup\(s\) restored into it since its full, each once; state ONLINE$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("recover --wait output lacks %s", re)
		}
	}
	pass, err := os.ReadFile(filepath.Join(state, "secrets", "sa.password"))
	if err != nil {
		t.Fatal(err)
	}
	rows := func(in *sqlsim.Instance, upTo time.Time) []int64 {
		db, err := sql.Open("sqlserver", in.DSN(devenv.AdminLogin, strings.TrimSpace(string(pass)), "master"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		r, err := db.Query("SELECT id, committed_at FROM [Sales].dbo.CommitLog")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var ids []int64
		for r.Next() {
			var id int64
			var at time.Time
			if err := r.Scan(&id, &at); err != nil {
				t.Fatal(err)
			}
			if upTo.IsZero() || !at.After(upTo) {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		return ids
	}
	// The source runs on UTC: STOPAT's wall clock is the point's.
	want, got, all := rows(site.Source, point.UTC()), rows(site.Verify, time.Time{}), rows(site.Source, time.Time{})
	if !slices.Equal(got, want) || len(got) <= 5 || len(got) >= len(all) {
		t.Fatalf("the recovered Sales holds %d rows, the source committed %d by %s (%d in all)", len(got), len(want), point, len(all))
	}
	t.Logf("recovered to %s: %d of %d rows", point.UTC().Format(time.RFC3339Nano), len(got), len(all))
}
