package status

import (
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// diffOn makes m a differential on base.
func diffOn(m, base *catalog.Manifest) *catalog.Manifest {
	m.Differential = &catalog.DiffBase{Sequence: base.Sequence, BackupSetGUID: "base-guid", LSN: "1"}
	return m
}

// Status tells differentials from fulls: the newest verified full is the
// set a restore starts from; the newest verified differential on it is
// shown beside it, and the point it reaches is what the rpo and rto are
// judged by (its restore step restored its base too). A differential of an
// older full, or one newer than every full, never passes for a full.
func TestStatusDifferentialOnTheNewestFull(t *testing.T) {
	rto := Objectives{RPO: def.RPO, RTO: Duration(time.Hour), DiffEvery: Duration(6 * time.Hour)}
	old := verified(t, "sql01", "Sales", 40, now.Add(-60*time.Hour), 20*time.Minute, 10*time.Minute)
	oldDiff := diffOn(verified(t, "sql01", "Sales", 41, now.Add(-50*time.Hour), 25*time.Minute, 10*time.Minute), old)
	full := verified(t, "sql01", "Sales", 42, now.Add(-30*time.Hour), 20*time.Minute, 10*time.Minute)
	d1 := diffOn(verified(t, "sql01", "Sales", 43, now.Add(-8*time.Hour), 30*time.Minute, 10*time.Minute), full)
	d2 := diffOn(verified(t, "sql01", "Sales", 44, now.Add(-2*time.Hour), 40*time.Minute, 25*time.Minute), full)
	d := Summarize(now, []Target{{Instance: "sql01", Database: "Sales", Objectives: rto}}, def, []Found{
		{Server: "bak01", Manifest: old}, {Server: "bak01", Manifest: oldDiff}, {Server: "bak01", Manifest: full},
		{Server: "bak02", Manifest: full}, {Server: "bak01", Manifest: d1}, {Server: "bak01", Manifest: d2}, {Server: "bak02", Manifest: d2},
	})[0]
	if v := d.LastVerified; v == nil || v.Sequence != 42 || v.Base != 0 {
		t.Fatalf("last verified %+v, want the full 42", v)
	}
	ld := d.LastDifferential
	if ld == nil || ld.Sequence != 44 || ld.Base != 42 || time.Duration(ld.Age) != 2*time.Hour || strings.Join(ld.Servers, ",") != "bak01,bak02" {
		t.Fatalf("last differential %+v, want 44 on 42, 2h old, on both servers", ld)
	}
	// 30h since the full, but the differential reaches 2h ago: within rpo;
	// its restore (base and differential) + CHECKDB take 1h05m: above rto.
	if !d.OutOfObjectives || len(d.Reasons) != 1 || !strings.Contains(d.Reasons[0], "1h5m is above the RTO of 1h") {
		t.Fatalf("reasons %q, want only the rto of the differential's recover", d.Reasons)
	}

	// No differential on the newest full: the full alone, and its age.
	d = Summarize(now, []Target{{Instance: "sql01", Database: "Sales", Objectives: rto}}, def, []Found{
		{Server: "bak01", Manifest: old}, {Server: "bak01", Manifest: oldDiff}, {Server: "bak01", Manifest: full}})[0]
	if d.LastDifferential != nil || !strings.Contains(strings.Join(d.Reasons, ";"), "30h old, above the RPO") {
		t.Fatalf("without a differential on the newest full: %+v, reasons %q", d.LastDifferential, d.Reasons)
	}
}

// A differential a foreign full made useless is the news after the last
// verified full: shown as the last failure, a differential's, saying the
// next verified full is needed; it turns nothing red by itself. Without
// any verified full, status says differentials wait for one.
func TestStatusDifferentialOnAForeignFull(t *testing.T) {
	o := Objectives{RPO: def.RPO, DiffEvery: Duration(6 * time.Hour)}
	full := verified(t, "sql01", "Sales", 42, now.Add(-10*time.Hour), time.Minute, time.Minute)
	bad := catalog.NewPending("sql01", "Sales", 43, now.Add(-time.Hour), "wf", "run")
	bad.Differential = &catalog.DiffBase{Sequence: 42, BackupSetGUID: "base-guid"}
	if err := bad.Fail(catalog.StepCatalog, catalog.EvidenceForeignBase,
		"DifferentialBaseMoved: differential set 43 holds the changes since backup set X; differentials wait for the next verified full", now); err != nil {
		t.Fatal(err)
	}
	d := Summarize(now, []Target{{Instance: "sql01", Database: "Sales", Objectives: o}}, def, []Found{
		{Server: "bak01", Manifest: full}, {Server: "bak01", Manifest: bad}})[0]
	f := d.LastFailure
	if f == nil || f.Sequence != 43 || f.Base != 42 || f.Type != string(catalog.EvidenceForeignBase) || !strings.Contains(f.Reason, "next verified full") {
		t.Fatalf("last failure %+v, want the differential 43 on 42, foreign_base, naming the next full", f)
	}
	if d.OutOfObjectives || d.LastVerified.Sequence != 42 {
		t.Fatalf("%+v: reasons %q", d.LastVerified, d.Reasons)
	}
	d = Summarize(now, []Target{{Instance: "sql01", Database: "Sales", Objectives: o}}, def, nil)[0]
	if !d.OutOfObjectives || !strings.Contains(strings.Join(d.Reasons, ";"), "differentials (diff_backup) wait for a verified full") {
		t.Fatalf("no full: reasons %q", d.Reasons)
	}
}
