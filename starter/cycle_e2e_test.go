package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// startSiteWorker starts the emulated site in a new state directory and an
// in-process worker of the real BackupCycle and activities on task queue tq.
func startSiteWorker(t *testing.T, tq string) (*devenv.Site, string) {
	t.Helper()
	site, state := startSite(t, devenv.Options{})
	siteWorker(t, site, tq)
	return site, state
}

// startSite starts the emulated site of o (its state directory, database
// size and Temporal server set here) in a new state directory, stopped
// when the test ends; its parent directory is traversable by others.
func startSite(t *testing.T, o devenv.Options) (*devenv.Site, string) {
	t.Helper()
	o.StateDir, o.DatabaseSize, o.TemporalAddress = t.TempDir(), devenv.MinDatabaseSize, srv.FrontendAddress()
	if err := os.Chmod(filepath.Dir(o.StateDir), 0o711); err != nil {
		t.Fatal(err)
	}
	site, err := devenv.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Stop() })
	return site, o.StateDir
}

// siteWorker runs the real workflows and activities against site on tq.
func siteWorker(t *testing.T, site *devenv.Site, tq string) {
	t.Helper()
	c := sdk(t)
	acts := activities.New(zap.NewNop())
	acts.Cycle = activities.CycleDeps{Config: site.Config, Signal: c.SignalWorkflow}
	w := sdkworker.New(c, tq, sdkworker.Options{})
	workflows.Register(w, acts)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
}

// The real BackupCycle with the real activities, in-process, against the
// emulated site (two sqlsim instances, two backup directories): `run --wait`
// prints a verified set, `status` shows it, and a running cycle answers the
// progress query.
func TestRunWaitAndStatusWithARealCycle(t *testing.T) {
	const tq = "tq-e2e"
	site, _ := startSiteWorker(t, tq)
	id := client.CycleWorkflowID(devenv.SourceInstance, devenv.Database)

	code, out, errs := on(t, tq, "run", "--config", site.ConfigFile, "--database", devenv.Database, "--wait")
	if code != exitOK {
		t.Fatalf("run --wait: exit %d\n%s%s", code, out, errs)
	}
	t.Logf("run --wait:\n%s", out)
	for _, re := range []string{
		`(?m)^VERIFIED Sales sequence 1 \(workflow ` + id + `\)$`,
		`(?m)^  backed up to bak01, copied to bak02, restored as Sales_verify_00000001, CHECKDB clean, sanity checks hold$`,
		`(?m)^  set:     4 stripes, manifest sql01@Sales~8de4e0ea_00000001.manifest.json, on bak01 and bak02$`,
		`(?m)^  times:   backup \S+, copy \S+, restore \S+, CHECKDB \S+, sanity \S+; total \S+$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("run --wait output lacks %s:\n%s", re, out)
		}
	}

	// A slow second cycle: running, it answers the progress query.
	// Slow enough that a loaded machine still sees it running past its first
	// progress signal (percent_complete, signalled in 10 % steps); lifted
	// once seen.
	site.Source.SetThrottle(24 << 10)
	if code, out, errs := on(t, tq, "run", "--config", site.ConfigFile, "--database", devenv.Database); code != exitOK {
		t.Fatalf("second run: %d %s%s", code, out, errs)
	}
	eventually(t, func() string {
		code, out, errs := on(t, tq, "status", "--database", devenv.Database, "--limit", "2")
		lines := strings.Split(out, "\n")
		if code != exitOK || len(lines) < 6 ||
			!strings.HasPrefix(lines[0], id+"  Running  database Sales@sql01  step backup  seq 2  server bak02  outcome running") ||
			!regexp.MustCompile(`^    progress: step backup [1-9]\d*% \(\d+\.\d \S+\)$`).MatchString(lines[2]) ||
			!strings.HasPrefix(lines[3], id+"  Completed  database Sales@sql01  step done  seq 1  server bak01  outcome verified") {
			return fmt.Sprintf("status: exit %d\n%s%s", code, out, errs)
		}
		t.Logf("status:\n%s", out)
		return ""
	})
	site.Source.SetThrottle(0)
	cl := testClient(t, tq)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := cl.SDK().GetWorkflow(ctx, id, "")
	res, err := cl.WaitCycle(ctx, run, devenv.Database)
	if err != nil || res.Result.Sequence != 2 || res.Result.Server != "bak02" {
		t.Errorf("second cycle: %+v, %v", res.Result, err)
	}

	// `run --wait --json`: the result with its times in seconds; `status
	// --json` the closed cycles with theirs.
	code, out, errs = on(t, tq, "run", "--config", site.ConfigFile, "--database", devenv.Database, "--wait", "--json")
	if code != exitOK {
		t.Fatalf("run --wait --json: exit %d\n%s%s", code, out, errs)
	}
	checkJSONStyle(t, "run --wait --json", out)
	var rj cycleRunJSON
	if err := json.Unmarshal([]byte(out), &rj); err != nil || rj.WorkflowID != id || rj.Result.Sequence != 3 || len(rj.Result.Stripes) == 0 ||
		rj.Result.Timings.Total <= 0 || rj.Result.Timings.Total > 600 || rj.Result.Timings.Backup <= 0 || rj.Result.Timings.Backup > rj.Result.Timings.Total {
		t.Errorf("run --wait --json: %v\n%s", err, out)
	}
	// status lists cycles from Temporal's visibility store, which takes
	// the close a moment after the workflow closed.
	eventually(t, func() string {
		code, out, errs := on(t, tq, "status", "--database", devenv.Database, "--json", "--limit", "3")
		checkJSONStyle(t, "status --json", out)
		var sj statusJSON
		if err := json.Unmarshal([]byte(out), &sj); code != exitOK || err != nil || len(sj.Cycles) != 3 {
			return fmt.Sprintf("status --json: exit %d %v %s\n%s", code, err, errs, out)
		}
		for _, c := range sj.Cycles {
			if c.Status != "Completed" || c.Outcome != "verified" || c.Duration == nil || *c.Duration <= 0 || *c.Duration > 600 || c.ClosedAt == "" {
				return fmt.Sprintf("closed cycle: %+v", c)
			}
		}
		return ""
	})

	// The site signs its manifests (manifest_keys): every set the cycles
	// wrote is authenticated, and counts.
	code, out, errs = on(t, tq, "status", "--config", site.ConfigFile, "--from-manifests", "--json")
	var r status.Report
	if err := json.Unmarshal([]byte(out), &r); code != exitOK || err != nil || r.Authentication != status.AuthenticationHMAC || len(r.Databases) != 1 ||
		r.Databases[0].LastVerified == nil || r.Databases[0].LastVerified.Sequence != 3 || len(r.Databases[0].Unauthenticated) != 0 {
		t.Errorf("status --from-manifests: exit %d %v %s\n%s", code, err, errs, out)
	}
}

// A damaged page in the source: `run --wait` exits 1 with the cycle's own
// reason and error type (the source database is damaged) in one line.
func TestRunWaitReportsAFailedCycleInOneLine(t *testing.T) {
	const tq = "tq-e2e-fail"
	site, state := startSiteWorker(t, tq)
	files, err := filepath.Glob(filepath.Join(state, devenv.SourceInstance, "volume-d", "*.mdf"))
	if err != nil || len(files) != 1 {
		t.Fatalf("primary data file: %v %v", files, err)
	}
	if err := sqlsim.FlipByte(files[0], 20*sqlsim.PageSize+500); err != nil {
		t.Fatal(err)
	}
	code, out, errs := on(t, tq, "run", "--config", site.ConfigFile, "--database", devenv.Database, "--wait")
	if code != exitFail || strings.Contains(out, "VERIFIED") || strings.Count(errs, "\n") != 1 ||
		!regexp.MustCompile(`^starter: backup cycle backup-sql01-Sales of Sales failed: .*page \(1:20\).* \[SourceDatabaseDamaged\]\n$`).MatchString(errs) {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
}
