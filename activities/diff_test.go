package activities

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// fullAt is a full set seq of Sales taken at at, advanced to state, with a
// header (its BACKUP completed), held on servers.
func fullAt(t *testing.T, seq int64, at time.Time, state catalog.State, servers ...string) *catalog.Manifest {
	t.Helper()
	m := catalog.New("sql01", "Sales", seq, at)
	m.PrimaryServer, m.Servers = servers[0], servers
	m.Header = &catalog.Header{BackupSetGUID: fmt.Sprintf("guid-%d", seq), FirstLSN: "1", LastLSN: "2", BackupFinish: at}
	m.Header.SetUTCOffset(0)
	for _, s := range catalog.Chain[slices.Index(catalog.Chain, catalog.StateWritten)+1 : slices.Index(catalog.Chain, state)+1] {
		if err := m.Advance(s, at); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// The base of a differential: the newest verified full that is not
// COPY_ONLY, with the servers holding it; none, with why, when there is no
// verified full, when a later full of the product's completed its BACKUP
// (SQL Server's base now) but is not verified, or when a differential on
// the base found a foreign full since.
func TestDiffBase(t *testing.T) {
	d := catalog.Of("sql01", "Sales")
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	if _, _, why := diffBase(d, nil); !strings.Contains(why, "no verified full backup") {
		t.Fatalf("no sets: %q", why)
	}
	f1 := fullAt(t, 1, t0, catalog.StateVerified, "bak01", "bak02")
	f2 := fullAt(t, 2, t0.Add(24*time.Hour), catalog.StateVerified, "bak02", "bak01")
	copyOnly := fullAt(t, 3, t0.Add(30*time.Hour), catalog.StateVerified, "bak01", "bak02")
	copyOnly.Options.CopyOnly = true
	diff := fullAt(t, 4, t0.Add(31*time.Hour), catalog.StateVerified, "bak02", "bak01")
	diff.Differential = &catalog.DiffBase{Sequence: 2, BackupSetGUID: "guid-2", LSN: "1"}
	base, holders, why := diffBase(d, []*catalog.Manifest{f1, f2, copyOnly, diff})
	if why != "" || base.Sequence != 2 || !slices.Equal(holders, []string{"bak02", "bak01"}) {
		t.Fatalf("base %v holders %v why %q, want set 2 (not the COPY_ONLY 3 nor the differential 4) on both servers", base, holders, why)
	}

	written := fullAt(t, 5, t0.Add(40*time.Hour), catalog.StateWritten, "bak01")
	if _, _, why := diffBase(d, []*catalog.Manifest{f1, f2, written}); !strings.Contains(why, "set 5") || !strings.Contains(why, "--resume 5") {
		t.Errorf("a later written full: %q", why)
	}
	failed := fullAt(t, 5, t0.Add(40*time.Hour), catalog.StateWritten, "bak01")
	if err := failed.Fail(catalog.StepCheckDB, catalog.EvidenceCheckDBFailed, "8928", t0.Add(41*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, _, why := diffBase(d, []*catalog.Manifest{f1, f2, failed}); !strings.Contains(why, "is failed") || strings.Contains(why, "--resume") {
		t.Errorf("a later failed full: %q", why)
	}

	foreign := catalog.NewPending("sql01", "Sales", 6, t0.Add(50*time.Hour), "wf", "run")
	foreign.Differential = &catalog.DiffBase{Sequence: 2, BackupSetGUID: "guid-2"}
	if err := foreign.Fail(catalog.StepCatalog, catalog.EvidenceForeignBase, "DifferentialBaseMoved: a DBA's full", t0.Add(50*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, _, why := diffBase(d, []*catalog.Manifest{f1, f2, foreign}); !strings.Contains(why, "did not take") || !strings.Contains(why, "a DBA's full") {
		t.Errorf("after a foreign full: %q", why)
	}
}
