package cycle_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/workflows"
)

// A verification instance that cannot read the source's backups (older
// version, no TDE certificate, the 2019 CU16 backup format on CU15) is an
// environment problem: the cycle fails at once with InvalidConfig, before
// the BACKUP when the plan can see it, and a set already copied stays
// copied, to be verified with `--resume` once the instance is fixed.

// quickWaits make the retries of the old behaviour (20 restores) short
// enough to be seen failing.
const quickWaits = `    sql_host_wait:
      initial: 100ms
      max_interval: 1s
      give_up_after: 10s
`

// gated is one test's worker whose CopyToRemote first runs a hook, once.
type gated struct {
	*e2e
	mu         sync.Mutex
	beforeCopy func()
}

func newGated(t *testing.T, f *cycle.SQLFixture) *gated {
	t.Helper()
	g := &gated{}
	acts := f.Acts()
	g.e2e = newE2E(t, f, map[string]any{
		"CopyToRemote": func(ctx context.Context, in activities.CopyInput) (activities.CopyOutput, error) {
			g.mu.Lock()
			hook := g.beforeCopy
			g.beforeCopy = nil
			g.mu.Unlock()
			if hook != nil {
				hook()
			}
			return acts.CopyToRemote(ctx, in)
		},
	})
	return g
}

// refusedAtPlan runs a cycle that must fail at its plan with InvalidConfig
// naming every want, with no BACKUP sent.
func (g *gated) refusedAtPlan(t *testing.T, db string, want ...string) {
	t.Helper()
	_, run, err := g.cycle(db)
	t.Logf("cycle: %s: %v", cycleErrorType(err), err)
	if cycleErrorType(err) != activities.ErrInvalidConfig {
		t.Fatalf("cycle: %s %v, want InvalidConfig at the plan", cycleErrorType(err), err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not name %q: %v", w, err)
		}
	}
	if n := len(cycle.Statements(g.f.Source(), "BACKUP DATABASE")); n != 0 {
		t.Errorf("%d BACKUP statements sent, want none (the plan knew)", n)
	}
	steps := stepsOf(t, g.c, run)
	if steps.counts["Backup"][0] != 0 || steps.attempts["PlanCycle"] != 1 {
		t.Errorf("Backup scheduled %d times, PlanCycle attempts %d; want 0 and 1", steps.counts["Backup"][0], steps.attempts["PlanCycle"])
	}
}

// refusedAtRestore runs a cycle whose plan cannot see the verification
// instance (down until the copy starts): it must fail at the RESTORE with
// InvalidConfig naming every want, after one attempt, and leave the set
// copied. It returns the set.
func (g *gated) refusedAtRestore(t *testing.T, db string, want ...string) int64 {
	t.Helper()
	verify := g.f.Verify()
	if err := verify.Stop(); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	g.beforeCopy = func() {
		if err := verify.Start(); err != nil {
			t.Error(err)
		}
	}
	g.mu.Unlock()
	_, run, err := g.cycle(db)
	p := g.progress(run)
	t.Logf("cycle with the plan blind to the verification instance: seq %d, %s: %v", p.Sequence, cycleErrorType(err), err)
	if cycleErrorType(err) != activities.ErrInvalidConfig {
		t.Errorf("cycle: %s, want InvalidConfig (an environment problem, neither evidence nor an outage)", cycleErrorType(err))
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not name %q: %v", w, err)
		}
	}
	steps := stepsOf(t, g.c, run)
	if steps.attempts["Restore"] != 1 {
		t.Errorf("Restore attempts %d, want 1: no retry reads the backup on that instance", steps.attempts["Restore"])
	}
	if n := steps.counts["MarkFailed"][0]; n != 0 {
		t.Errorf("MarkFailed scheduled %d times: the set is not evidence-failed", n)
	}
	for _, s := range []string{"bak01", "bak02"} {
		m := g.f.ManifestOf(s, db, p.Sequence)
		if m == nil || m.State != catalog.StateCopied {
			t.Errorf("set %d on %s: %v, want copied", p.Sequence, s, m)
		}
	}
	return p.Sequence
}

// resumed runs `starter run --resume seq` (the workflow input) and wants
// the set verified on both servers.
func (g *gated) resumed(t *testing.T, db string, seq int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := g.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.CycleWorkflowID("sql01", db), TaskQueue: g.tq},
		workflows.BackupCycleName, workflows.CycleInput{Database: db, Resume: seq})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.CycleResult
	if err := run.Get(ctx, &res); err != nil || res.Sequence != seq {
		t.Fatalf("resume of set %d: seq %d, %v", seq, res.Sequence, err)
	}
	for _, s := range []string{"bak01", "bak02"} {
		if m := g.f.ManifestOf(s, db, seq); m == nil || m.State != catalog.StateVerified {
			t.Errorf("set %d on %s after the resume: %v, want verified", seq, s, m)
		}
	}
}

// Source SQL Server 2022, verification instance 2019: the plan refuses
// before any BACKUP, naming both versions; a set whose RESTORE meets 3241
// stays copied (InvalidConfig, one attempt); once the verification
// instance is upgraded, --resume verifies it.
func TestE2EVerifyInstanceOlderThanSource(t *testing.T) {
	const db = "Versions"
	f := cycle.NewSQLFixtureOf(t, sitetest.Options{Database: db, Extra: quickWaits,
		VerifyConfig: func(c *sqlsim.Config) { c.ProductVersion = "15.0.4385.2" }})
	g := newGated(t, f)
	g.refusedAtPlan(t, db, "16.0.4135.4", "15.0.4385.2", "upgrade")
	seq := g.refusedAtRestore(t, db, "16.0.4135", "15.0.4385.2")
	f.RestartVerify(func(c *sqlsim.Config) { c.MajorVersion = 16 })
	g.resumed(t, db, seq)
	h := f.ManifestOf("bak02", db, seq).Header
	if h == nil || h.SoftwareVersion != "16.0.4135" || h.CompressionAlgorithm != "MS_XPRESS" {
		t.Errorf("manifest header: %+v, want the writer's version and the compression algorithm", h)
	}
}

// A TDE database whose certificate the verification instance lacks: the
// plan refuses naming the thumbprint, the certificate and the fix; a
// RESTORE that meets 33111 fails once with InvalidConfig and the set stays
// copied; with the certificate installed, --resume verifies it.
func TestE2ETDECertificateMissing(t *testing.T) {
	const db = "Encrypted"
	f := cycle.NewSQLFixtureOf(t, sitetest.Options{Database: db, Extra: quickWaits})
	cert, err := f.Source().CreateCertificate("TDECert", "TDE certificate")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Source().EnableTDE(db, "TDECert"); err != nil {
		t.Fatal(err)
	}
	g := newGated(t, f)
	g.refusedAtPlan(t, db, cert.ThumbprintText(), "TDECert", "CREATE CERTIFICATE")
	seq := g.refusedAtRestore(t, db, cert.ThumbprintText(), "TDECert", "CREATE CERTIFICATE")
	exported, err := f.Source().ExportCertificate("TDECert")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Verify().ImportCertificate(exported); err != nil {
		t.Fatal(err)
	}
	g.resumed(t, db, seq)
	if h := f.ManifestOf("bak01", db, seq).Header; h == nil || h.TDEThumbprint != cert.ThumbprintText() {
		t.Errorf("manifest header: %+v, want the TDE thumbprint %s", h, cert.ThumbprintText())
	}
}

// KB5014298: a compressed backup of a TDE database made on SQL Server 2019
// CU16, restored on CU15, fails with 9004 at severity 21 on a connection
// that stays open. That is the format, not the host: the plan refuses
// before the BACKUP, a RESTORE that meets it fails once with InvalidConfig
// (not 20 restores as SQLHostUnreachable), and after the patch --resume
// verifies the set.
func TestE2ETDECompressedFormatOnAnOlderCU(t *testing.T) {
	const db = "Format"
	f := cycle.NewSQLFixtureOf(t, sitetest.Options{Database: db, Extra: quickWaits,
		SourceConfig: func(c *sqlsim.Config) { c.ProductVersion = "15.0.4223.1" },
		VerifyConfig: func(c *sqlsim.Config) { c.ProductVersion = "15.0.4198.2" }})
	cert, err := f.Source().CreateCertificate("TDECert", "TDE certificate")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Verify().ImportCertificate(cert); err != nil {
		t.Fatal(err)
	}
	if err := f.Source().EnableTDE(db, "TDECert"); err != nil {
		t.Fatal(err)
	}
	g := newGated(t, f)
	g.refusedAtPlan(t, db, "KB5014298", "15.0.4223.1", "15.0.4198.2")
	seq := g.refusedAtRestore(t, db, "KB5014298", "15.0.4198.2")
	if got := cycle.Statements(f.Verify(), "RESTORE DATABASE"); len(got) != 1 {
		t.Errorf("RESTORE DATABASE statements on the verification instance: %d, want one", len(got))
	}
	f.RestartVerify(func(c *sqlsim.Config) { c.ProductVersion = "15.0.4223.1" })
	g.resumed(t, db, seq)
}
