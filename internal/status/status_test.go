package status

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

var now = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// verified builds the manifest of a set taken at taken that went the whole
// chain, with a restore and CHECKDB of the given lengths.
func verified(t *testing.T, inst, db string, seq int64, taken time.Time, restore, checkdb time.Duration) *catalog.Manifest {
	t.Helper()
	m := catalog.New(inst, db, seq, taken)
	at := taken
	for _, s := range []catalog.State{catalog.StateCopied, catalog.StateRestored, catalog.StateChecked, catalog.StateVerified} {
		at = at.Add(time.Minute)
		if s == catalog.StateRestored {
			if err := m.SetTiming(catalog.StepRestore, at, at.Add(restore)); err != nil {
				t.Fatal(err)
			}
			at = at.Add(restore)
		}
		if s == catalog.StateChecked {
			if err := m.SetTiming(catalog.StepCheckDB, at, at.Add(checkdb)); err != nil {
				t.Fatal(err)
			}
			at = at.Add(checkdb)
		}
		if err := m.Advance(s, at); err != nil {
			t.Fatal(err)
		}
	}
	m.Proof = &catalog.Proof{VerifyInstance: "sqlv02", VerifyDatabase: db + "_verify", BackupSetGUID: "g", RestoredAt: at, CheckedAt: at}
	return m
}

func failed(t *testing.T, inst, db string, seq int64, taken time.Time, step catalog.Step, ev catalog.Evidence) *catalog.Manifest {
	t.Helper()
	m := catalog.New(inst, db, seq, taken)
	if err := m.Fail(step, ev, "DBCC CHECKDB found 2 allocation errors", taken.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	return m
}

func find(t *testing.T, ds []Database, inst, db string) Database {
	t.Helper()
	for _, d := range ds {
		if d.Instance == inst && d.Database == db {
			return d
		}
	}
	t.Fatalf("no answer for %s/%s in %+v", inst, db, ds)
	return Database{}
}

var def = Objectives{RPO: Duration(26 * time.Hour)}

func TestAgeAndCopiesOnTwoServers(t *testing.T) {
	m := verified(t, "sql01", "Sales", 42, now.Add(-5*time.Hour), 8*time.Minute, 4*time.Minute)
	older := verified(t, "sql01", "Sales", 41, now.Add(-29*time.Hour), time.Minute, time.Minute)
	// The copy target's manifest of the same set, also verified; the primary
	// holds the older set only.
	got := Summarize(now, []Target{{Instance: "sql01", Database: "Sales", Objectives: def}}, def, []Found{
		{Server: "bak02", Manifest: m}, {Server: "bak01", Manifest: m}, {Server: "bak01", Manifest: older},
	})
	if len(got) != 1 {
		t.Fatalf("got %d databases, want 1: %+v", len(got), got)
	}
	d := got[0]
	v := d.LastVerified
	if v == nil || v.Sequence != 42 {
		t.Fatalf("last verified = %+v, want seq 42", v)
	}
	if time.Duration(v.Age) != 5*time.Hour || !v.TakenAt.Equal(now.Add(-5*time.Hour)) {
		t.Errorf("age %s taken %s, want 5h taken %s", v.Age, v.TakenAt, now.Add(-5*time.Hour))
	}
	if strings.Join(v.Servers, ",") != "bak01,bak02" {
		t.Errorf("servers %v, want [bak01 bak02]", v.Servers)
	}
	if time.Duration(v.Restore) != 8*time.Minute || time.Duration(v.CheckDB) != 4*time.Minute || time.Duration(v.TimeToRecover) != 12*time.Minute {
		t.Errorf("restore %s checkdb %s recover %s, want 8m 4m 12m", v.Restore, v.CheckDB, v.TimeToRecover)
	}
	if v.VerifyInstance != "sqlv02" || !d.Configured || d.OutOfObjectives || d.LastFailure != nil {
		t.Errorf("got %+v, want configured, within objectives, no failure", d)
	}
}

func TestRPOExceeded(t *testing.T) {
	m := verified(t, "sql01", "Sales", 42, now.Add(-27*time.Hour), time.Minute, time.Minute)
	d := Summarize(now, []Target{{Instance: "sql01", Database: "Sales", Objectives: def}}, def, []Found{{Server: "bak01", Manifest: m}})[0]
	if !d.OutOfObjectives || len(d.Reasons) != 1 || !strings.Contains(d.Reasons[0], "above the RPO of 26h") {
		t.Fatalf("27h old set with RPO 26h: out %v reasons %q", d.OutOfObjectives, d.Reasons)
	}
	// Just inside the objective is green.
	m2 := verified(t, "sql01", "Sales", 43, now.Add(-25*time.Hour), time.Minute, time.Minute)
	d = Summarize(now, []Target{{Instance: "sql01", Database: "Sales", Objectives: def}}, def, []Found{{Server: "bak01", Manifest: m}, {Server: "bak01", Manifest: m2}})[0]
	if d.OutOfObjectives || d.LastVerified.Sequence != 43 {
		t.Fatalf("25h old set: out %v reasons %q seq %d", d.OutOfObjectives, d.Reasons, d.LastVerified.Sequence)
	}
}

func TestRTOExceededAndUnset(t *testing.T) {
	m := verified(t, "sql01", "Big", 7, now.Add(-time.Hour), 3*time.Hour, 90*time.Minute)
	rto := Objectives{RPO: def.RPO, RTO: Duration(4 * time.Hour)}
	d := Summarize(now, []Target{{Instance: "sql01", Database: "Big", Objectives: rto}}, def, []Found{{Server: "bak01", Manifest: m}})[0]
	if !d.OutOfObjectives || len(d.Reasons) != 1 || !strings.Contains(d.Reasons[0], "time to recover 4h30m is above the RTO of 4h") {
		t.Fatalf("4h30 to recover with RTO 4h: out %v reasons %q", d.OutOfObjectives, d.Reasons)
	}
	// RTO 0 is no objective.
	d = Summarize(now, []Target{{Instance: "sql01", Database: "Big", Objectives: def}}, def, []Found{{Server: "bak01", Manifest: m}})[0]
	if d.OutOfObjectives {
		t.Fatalf("RTO unset: out of objectives: %q", d.Reasons)
	}
}

func TestFailureNewerThanLastVerified(t *testing.T) {
	ok := verified(t, "sql01", "Sales", 42, now.Add(-30*time.Hour), time.Minute, time.Minute)
	bad := failed(t, "sql01", "Sales", 43, now.Add(-6*time.Hour), catalog.StepCheckDB, catalog.EvidenceCheckDBFailed)
	old := failed(t, "sql01", "Sales", 40, now.Add(-80*time.Hour), catalog.StepRestore, catalog.EvidenceCorruptBackup)
	d := Summarize(now, nil, def, []Found{{Server: "bak01", Manifest: ok}, {Server: "bak02", Manifest: bad}, {Server: "bak01", Manifest: old}})[0]
	f := d.LastFailure
	if f == nil || f.Sequence != 43 || f.Type != "checkdb_failed" || f.Step != catalog.StepCheckDB || f.State != catalog.StateFailed ||
		strings.Join(f.Servers, ",") != "bak02" || !strings.Contains(f.Reason, "allocation errors") {
		t.Fatalf("last failure = %+v, want seq 43 checkdb_failed at checkdb on bak02", f)
	}
	// Found only in manifests: default objectives, not configured; 30h > 26h.
	if d.Configured || !d.OutOfObjectives || d.LastVerified.Sequence != 42 {
		t.Fatalf("got %+v", d)
	}

	// A failure older than the last verified set is not reported.
	newer := verified(t, "sql01", "Sales", 44, now.Add(-time.Hour), time.Minute, time.Minute)
	d = Summarize(now, nil, def, []Found{{Server: "bak01", Manifest: ok}, {Server: "bak02", Manifest: bad}, {Server: "bak01", Manifest: newer}})[0]
	if d.LastFailure != nil || d.OutOfObjectives {
		t.Fatalf("failure before the last verified set: %+v", d)
	}

	// A cancelled run counts as the last failure, typed "cancelled".
	c := catalog.New("sql01", "Sales", 45, now.Add(-30*time.Minute))
	if err := c.Cancel(catalog.StepCopy, "cancelled by the user", now.Add(-20*time.Minute)); err != nil {
		t.Fatal(err)
	}
	d = Summarize(now, nil, def, []Found{{Server: "bak01", Manifest: newer}, {Server: "bak01", Manifest: c}})[0]
	if d.LastFailure == nil || d.LastFailure.Type != "cancelled" || d.LastFailure.Step != catalog.StepCopy {
		t.Fatalf("cancelled set: %+v", d.LastFailure)
	}
}

func TestNeverVerifiedAndInProgress(t *testing.T) {
	pending := catalog.NewPending("sql01", "New", 1, now.Add(-time.Minute), "wf", "run")
	ds := Summarize(now, []Target{{Instance: "sql01", Database: "New", Objectives: def}, {Instance: "sql02", Database: "Empty", Objectives: def}}, def,
		[]Found{{Server: "bak01", Manifest: pending}})
	if len(ds) != 2 {
		t.Fatalf("got %d databases, want 2", len(ds))
	}
	for _, d := range ds {
		if d.LastVerified != nil || d.LastFailure != nil || !d.OutOfObjectives || d.Reasons[0] != "no verified backup set on any backup server" {
			t.Errorf("%s/%s: %+v", d.Instance, d.Database, d)
		}
	}
}

func TestEveryLegalNameAndJSON(t *testing.T) {
	names := []string{`O'Brien's "Shop"`, `a]b`, `x@y`, `Müller_数据库`, `sp ace`, `back\slash`}
	var found []Found
	var targets []Target
	for i, n := range names {
		found = append(found, Found{Server: "bak01", Manifest: verified(t, "sql01", n, int64(i+1), now.Add(-time.Hour), time.Minute, time.Minute)})
		targets = append(targets, Target{Instance: "sql01", Database: n, Objectives: def})
	}
	ds := Summarize(now, targets, def, found)
	if len(ds) != len(names) {
		t.Fatalf("got %d databases, want %d", len(ds), len(names))
	}
	for i, n := range names {
		d := find(t, ds, "sql01", n)
		if d.LastVerified == nil || d.LastVerified.Sequence != int64(i+1) || !d.Configured {
			t.Errorf("%q: %+v", n, d)
		}
	}
	b, err := json.Marshal(Report{At: now, Databases: ds})
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	d := find(t, back.Databases, "sql01", `O'Brien's "Shop"`)
	if time.Duration(d.LastVerified.Age) != time.Hour || time.Duration(d.RPO) != 26*time.Hour {
		t.Fatalf("JSON round trip: age %s rpo %s", d.LastVerified.Age, d.RPO)
	}
	if !strings.Contains(string(b), `"age_seconds":3600`) || !strings.Contains(string(b), `"rpo_seconds":93600`) {
		t.Fatalf("JSON does not give seconds: %s", b)
	}
}

func TestDurationString(t *testing.T) {
	for d, want := range map[time.Duration]string{
		26 * time.Hour: "26h", 4*time.Hour + 30*time.Minute + 20*time.Second: "4h30m", 9 * time.Minute: "9m",
		12*time.Second + 400*time.Millisecond: "12s", 0: "0s", 61 * time.Second: "1m1s",
	} {
		if got := Duration(d).String(); got != want {
			t.Errorf("%v: got %q, want %q", d, got, want)
		}
	}
}

// withHeader gives m the HEADERONLY finish wall as a source `offset` ahead
// of UTC reported it; offset nil: as manifests recorded it before they kept
// the offset.
func withHeader(m *catalog.Manifest, wall time.Time, offset *int) *catalog.Manifest {
	m.Header = &catalog.Header{FirstLSN: "1", LastLSN: "2", BackupFinish: wall}
	if offset != nil {
		m.Header.SetUTCOffset(*offset)
	}
	return m
}

// The age is from the instant the backup finished: a source at UTC+2 whose
// set finished 25 h ago (its wall clock 23 h ago, read as UTC) is out of an
// rpo of 24h; at UTC-5 a set 20 h old (wall clock 25 h ago) is within it.
// A manifest without the offset is aged as before, and says so.
func TestAgeFromTheSourcesInstant(t *testing.T) {
	rpo := Objectives{RPO: Duration(24 * time.Hour)}
	target := []Target{{Instance: "sql01", Database: "Sales", Objectives: rpo}}
	east, west := 120, -300
	for _, tc := range []struct {
		name    string
		taken   time.Duration // real age
		offset  *int
		age     time.Duration
		red     bool
		unknown bool
	}{
		{"east", 25 * time.Hour, &east, 25 * time.Hour, true, false},
		{"west", 20 * time.Hour, &west, 20 * time.Hour, false, false},
		{"east, offset unknown", 25 * time.Hour, nil, 23 * time.Hour, false, true},
	} {
		real := now.Add(-tc.taken)
		off := 120
		if tc.offset != nil {
			off = *tc.offset
		}
		m := withHeader(verified(t, "sql01", "Sales", 9, real, time.Minute, time.Minute), real.Add(time.Duration(off)*time.Minute), tc.offset)
		d := Summarize(now, target, rpo, []Found{{Server: "bak01", Manifest: m}})[0]
		v := d.LastVerified
		if time.Duration(v.Age) != tc.age || d.OutOfObjectives != tc.red || v.OffsetUnknown != tc.unknown {
			t.Errorf("%s: age %s, out of objectives %v, offset unknown %v; want %s, %v, %v", tc.name, v.Age, d.OutOfObjectives,
				v.OffsetUnknown, Duration(tc.age), tc.red, tc.unknown)
		}
	}
}

// A replica's sets from before its availability group was configured
// count for the group's database of that name, even with the same number
// as another replica's; a database of the replica the group does not have
// keeps its own line.
func TestAvailabilityGroupAliases(t *testing.T) {
	def := Objectives{RPO: Duration(26 * time.Hour)}
	aliases := Aliases{"sql01": "ag1", "sql02": "ag1"}
	got := SummarizeWith(now, []Target{{Instance: "ag1", Database: "Sales", Objectives: def}}, def, []Found{
		{Server: "bak01", Manifest: verified(t, "sql01", "Sales", 3, now.Add(-50*time.Hour), time.Minute, time.Minute)},
		{Server: "bak01", Manifest: verified(t, "sql02", "Sales", 3, now.Add(-30*time.Hour), time.Minute, time.Minute)},
		{Server: "bak01", Manifest: failed(t, "sql02", "Sales", 4, now.Add(-2*time.Hour), catalog.StepCheckDB, catalog.EvidenceCheckDBFailed)},
		{Server: "bak01", Manifest: verified(t, "sql01", "Local", 1, now.Add(-time.Hour), time.Minute, time.Minute)},
	}, aliases)
	if len(got) != 2 {
		t.Fatalf("lines %+v, want ag1/Sales and sql01/Local", got)
	}
	d := find(t, got, "ag1", "Sales")
	if d.LastVerified == nil || d.LastVerified.TakenAt != now.Add(-30*time.Hour) || d.LastFailure == nil || d.LastFailure.Sequence != 4 {
		t.Errorf("ag1/Sales: %+v / %+v, want sql02's set 3 verified and its set 4 failed since", d.LastVerified, d.LastFailure)
	}
	find(t, got, "sql01", "Local")
}
