package preflight

import (
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sitetest"
)

// A misconfigured estate (sitetest.Estate: an older SQL Server Express on
// Linux verifying an 11 GiB TDE database without its certificate, a UNC
// path for that Linux instance, a restore volume too small, a log directory
// missing): one preflight run names every problem
// of sitetest.EstateProblems, each with its fix, and nothing else is
// missing; what is right is said so.
func TestMisconfiguredEstate(t *testing.T) {
	e := sitetest.NewEstate(t)
	cfg, err := config.Parse([]byte(e.YAML), "estate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, text := runPreflight(t, cfg, "")
	for _, p := range sitetest.EstateProblems {
		var c Check
		if p.Database != "" {
			c = findDatabaseCheck(t, r, p.Instance, p.Database, p.Check, text)
		} else {
			c = findIn(t, r, KindInstance, p.Instance, p.Check)
		}
		if c.Status != Missing {
			t.Errorf("%s/%s is %s (%s), want MISSING", p.Instance, p.Check, c.Status, c.Detail)
		}
		for _, w := range p.Detail {
			if !strings.Contains(c.Detail, w) {
				t.Errorf("%s/%s: the detail does not say %q: %s", p.Instance, p.Check, w, c.Detail)
			}
		}
		for _, w := range p.Fix {
			if !strings.Contains(c.Fix, w) || !strings.Contains(text, w) {
				t.Errorf("%s/%s: the fix does not say %q: %s", p.Instance, p.Check, w, c.Fix)
			}
		}
	}
	if r.OK || r.Missing != len(sitetest.EstateProblems) {
		var missing []string
		for _, c := range r.MissingChecks() {
			missing = append(missing, c.Instance+"/"+c.Name)
		}
		t.Errorf("%d MISSING (%v), want exactly the %d of sitetest.EstateProblems", r.Missing, missing, len(sitetest.EstateProblems))
	}
	// The source sees both servers; bak02's path is the Linux instance's own.
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

// findDatabaseCheck is the check of that name about database db of
// instance.
func findDatabaseCheck(t *testing.T, r *Report, instance, db, name, text string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Kind == KindDatabase && c.Instance == instance && c.Database == db && c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q of %s/%s in the report:\n%s", name, instance, db, text)
	return Check{}
}

// A standby copy stays beside the cycle's copy: the restore volume needs
// room for two. Ledger's copy (40 MiB) fits the estate's restore volume
// once, not twice; with the nightly proof, assumed scheduled apart from the
// cycle, one copy at a time fits.
func TestStandbyNeedsRoomForTwoCopies(t *testing.T) {
	e := sitetest.NewEstate(t)
	cfg, err := config.Parse([]byte(e.YAML), "estate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	space := func(mode string) Check {
		t.Helper()
		for i := range cfg.Databases {
			if cfg.Databases[i].Name == "Ledger" {
				cfg.Databases[i].LogProof = mode
			}
		}
		r, text := runPreflight(t, cfg, "Ledger")
		c := findIn(t, r, KindInstance, "sqlverify", "free space restore_data_dir of bak01")
		if p := findIn(t, r, KindInstance, "sqlverify", "log proof space for sql01/Ledger"); !strings.Contains(p.Detail, mode) {
			t.Errorf("log proof space for %s: %+v\n%s", mode, p, text)
		}
		return c
	}
	if c := space("standby"); c.Status != Missing || !strings.Contains(c.Detail, "2 copies of sql01/Ledger (log_proof standby)") {
		t.Errorf("standby: %s %s, want MISSING naming the two copies", c.Status, c.Detail)
	}
	if c := space("nightly"); c.Status != OK {
		t.Errorf("nightly: %s %s, want OK (one copy at a time)", c.Status, c.Detail)
	}
}
