package catalog

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

var now = time.Date(2026, 12, 31, 12, 0, 0, 0, time.UTC)

// set builds a manifest of db/seq in state, last changed `age` before now.
func set(db string, seq int64, state State, age time.Duration) *Manifest {
	at := now.Add(-age)
	m := New("sql01", db, seq, at.Add(-time.Hour))
	m.Options.Stripes = 2
	for i := 1; i <= 2; i++ {
		m.Stripes = append(m.Stripes, Stripe{Name: tsql.StripeFileName("sql01", db, seq, i, 2), Size: 10})
	}
	if state == StateFailed {
		_ = m.Fail(StepCopy, EvidenceHashMismatch, "remote copy differs", at)
		return m
	}
	for _, s := range []State{StateCopied, StateRestored, StateChecked, StateVerified} {
		if order[s] > order[state] {
			break
		}
		_ = m.Advance(s, at)
	}
	m.UpdatedAt = at
	return m
}

func on(server string, ms ...*Manifest) []ServerManifest {
	out := make([]ServerManifest, len(ms))
	for i, m := range ms {
		out[i] = ServerManifest{Server: server, Manifest: m}
	}
	return out
}

func file(name string, age time.Duration) FileInfo {
	return FileInfo{Name: name, Size: 10, ModTime: now.Add(-age)}
}

// summary renders deletions as "server db#seq reason" for table comparison.
func summary(ds []Deletion) []string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s %s#%d %s", d.Server, d.Set.Database, d.Set.Sequence, d.Reason))
	}
	return out
}

func TestRetentionDecide(t *testing.T) {
	day := 24 * time.Hour
	policy := Retention{KeepVerified: 2, DeleteFailedAfter: day, DeleteAbandonedAfter: 3 * day, DeleteOrphansAfter: 2 * day}
	join := func(parts ...[]ServerManifest) []ServerManifest {
		var out []ServerManifest
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name      string
		policy    Retention
		manifests []ServerManifest
		files     map[string][]FileInfo
		inFlight  []SetKey
		want      []string
	}{
		{
			name:   "keep the newest K verified per server",
			policy: policy,
			manifests: join(
				on("BAK01", set("Sales", 1, StateVerified, 9*day), set("Sales", 3, StateVerified, 7*day), set("Sales", 5, StateVerified, 5*day), set("Sales", 7, StateVerified, 3*day)),
				on("BAK02", set("Sales", 2, StateVerified, 8*day), set("Sales", 4, StateVerified, 6*day)),
			),
			want: []string{"BAK01 Sales#1 superseded", "BAK01 Sales#3 superseded"},
		},
		{
			name:      "K counts per database",
			policy:    Retention{KeepVerified: 1, DeleteAbandonedAfter: day},
			manifests: on("BAK01", set("A", 1, StateVerified, day), set("B", 2, StateVerified, day), set("A", 3, StateVerified, day)),
			want:      []string{"BAK01 A#1 superseded"},
		},
		{
			name:      "K=0 still keeps the newest verified set, however old",
			policy:    Retention{KeepVerified: 0, DeleteFailedAfter: 0, DeleteAbandonedAfter: day},
			manifests: on("BAK01", set("Sales", 1, StateVerified, 400*day), set("Sales", 2, StateVerified, 300*day)),
			want:      []string{"BAK01 Sales#1 superseded"},
		},
		{
			name:   "the newest verified set survives on every server holding it",
			policy: Retention{KeepVerified: 0, DeleteAbandonedAfter: day},
			manifests: join(
				on("BAK01", set("Sales", 10, StateVerified, 30*day), set("Sales", 8, StateVerified, 40*day)),
				on("BAK02", set("Sales", 10, StateVerified, 30*day), set("Sales", 9, StateVerified, 35*day)),
			),
			want: []string{"BAK01 Sales#8 superseded", "BAK02 Sales#9 superseded"},
		},
		{
			name:   "a server whose newest verified set is older than another server's keeps it",
			policy: Retention{KeepVerified: 0, DeleteAbandonedAfter: day},
			manifests: join(
				on("BAK01", set("Sales", 10, StateVerified, day)),
				on("BAK02", set("Sales", 7, StateVerified, 9*day), set("Sales", 5, StateVerified, 11*day)),
			),
			want: []string{"BAK02 Sales#5 superseded"},
		},
		{
			name:   "failed sets go after DeleteFailedAfter, never the verified ones",
			policy: policy,
			manifests: on("BAK01",
				set("Sales", 1, StateVerified, 10*day),
				set("Sales", 2, StateFailed, 2*day),     // old failure: delete
				set("Sales", 3, StateFailed, time.Hour), // recent failure: keep for now
			),
			want: []string{"BAK01 Sales#2 failed"},
		},
		{
			name:   "abandoned sets (never verified nor failed) go after DeleteAbandonedAfter",
			policy: policy,
			manifests: on("BAK01",
				set("Sales", 1, StateVerified, 10*day),
				set("Sales", 2, StateWritten, 4*day),
				set("Sales", 3, StateCopied, 4*day),
				set("Sales", 4, StateChecked, 4*day),
				set("Sales", 5, StateRestored, 2*day), // not old enough
				set("Sales", 6, StateWritten, time.Minute),
			),
			want: []string{"BAK01 Sales#2 abandoned", "BAK01 Sales#3 abandoned", "BAK01 Sales#4 abandoned"},
		},
		{
			name:      "an unverified set newer than the newest verified is still abandoned when old",
			policy:    policy,
			manifests: on("BAK01", set("Sales", 1, StateVerified, 10*day), set("Sales", 9, StateCopied, 5*day)),
			want:      []string{"BAK01 Sales#9 abandoned"},
		},
		{
			name:      "sets of running cycles are never touched",
			policy:    policy,
			manifests: on("BAK01", set("Sales", 1, StateVerified, 10*day), set("Sales", 2, StateWritten, 9*day)),
			files: map[string][]FileInfo{"BAK01": {
				file("sql01@Sales_00000002_1of2.bak", 9*day), file("sql01@Sales_00000002.manifest.json", 9*day),
				file("sql01@Sales_00000003_1of2.bak", 9*day), // orphan of a running cycle (BACKUP not finished)
			}},
			inFlight: []SetKey{{"sql01", "Sales", 2}, {"sql01", "Sales", 3}},
			want:     nil,
		},
		{
			name:      "orphan stripes without a manifest go after DeleteOrphansAfter",
			policy:    policy,
			manifests: on("BAK01", set("Sales", 1, StateVerified, 10*day)),
			files: map[string][]FileInfo{"BAK01": {
				file("sql01@Sales_00000001_1of2.bak", 10*day), file("sql01@Sales_00000001_2of2.bak", 10*day), file("sql01@Sales_00000001.manifest.json", 10*day),
				file("sql01@Sales_00000002_1of2.bak", 3*day), file("sql01@Sales_00000002_2of2.bak", 3*day), // crashed backup: orphan
				file("sql01@Sales_00000003_1of2.bak", time.Hour),                                                // too young
				file("sql01@Sales_00000004_1of2.bak", 3*day), file("sql01@Sales_00000004.manifest.json", 3*day), // manifest unreadable: keep
				file("notes.txt", 100*day), file("Other.bak", 100*day), // not ours
				file(".sql01@Sales_00000001.manifest.json.tmp-0a1b2c", 3*day), // crashed manifest write
				file(".sql01@Sales_00000001.manifest.json.tmp-ffffff", time.Hour),
			}},
			want: []string{"BAK01 Sales#1 orphan", "BAK01 Sales#2 orphan"},
		},
		{
			name:   "orphan age defaults to DeleteAbandonedAfter",
			policy: Retention{KeepVerified: 1, DeleteAbandonedAfter: 3 * day},
			files: map[string][]FileInfo{"BAK02": {
				file("sql01@Sales_00000002_1of2.bak", 2*day),
				file("sql01@Sales_00000003_1of2.bak", 4*day),
			}},
			want: []string{"BAK02 Sales#3 orphan"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decide(tt.policy, tt.manifests, tt.files, now, tt.inFlight...)
			if err != nil {
				t.Fatal(err)
			}
			if s := summary(got); !reflect.DeepEqual(s, tt.want) {
				t.Errorf("deletions\n  %s\nwant\n  %s", strings.Join(s, "\n  "), strings.Join(tt.want, "\n  "))
			}
			// Whatever else happens, the newest verified set of each database stays.
			newest := map[string]int64{}
			for _, sm := range tt.manifests {
				if m := sm.Manifest; m.Verified() && m.Sequence > newest[m.Database] {
					newest[m.Database] = m.Sequence
				}
			}
			for _, d := range got {
				if s, ok := newest[d.Set.Database]; ok && s == d.Set.Sequence && d.Reason != ReasonOrphan {
					t.Errorf("deletes the newest verified set: %+v", d)
				}
				for _, f := range d.Files {
					if f == tsql.ManifestFileName(d.Set.Instance, d.Set.Database, newest[d.Set.Database]) {
						t.Errorf("deletes the manifest of the newest verified set: %+v", d)
					}
				}
			}
		})
	}
}

func TestRetentionFiles(t *testing.T) {
	day := 24 * time.Hour
	m := set("Sales", 2, StateFailed, 2*day)
	files := map[string][]FileInfo{"BAK01": {
		file("sql01@Sales~8de4e0ea_00000002_1of2.bak", 2*day), file("sql01@Sales~8de4e0ea_00000002_2of2.bak", 2*day),
		file("sql01@Sales~8de4e0ea_00000002_3of3.bak", 2*day), // a stripe the manifest does not list (earlier attempt)
		file("sql01@Sales~8de4e0ea_00000002.manifest.json", 2*day),
		file("sql01@Sales~8de4e0ea_00000020_1of2.bak", 2*day), // another set with a longer number: not part of it
		file("sql01@Sales_00000002_1of2.bak", 2*day),          // a legacy-named file of another set 2: not part of it
	}}
	got, err := Decide(Retention{DeleteFailedAfter: day, DeleteAbandonedAfter: 3 * day, DeleteOrphansAfter: 3 * day}, on("BAK01", m), files, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("got %v", summary(got))
	}
	want := []string{"sql01@Sales~8de4e0ea_00000002_1of2.bak", "sql01@Sales~8de4e0ea_00000002_2of2.bak", "sql01@Sales~8de4e0ea_00000002_3of3.bak", "sql01@Sales~8de4e0ea_00000002.manifest.json"}
	if !reflect.DeepEqual(got[0].Files, want) {
		t.Errorf("files %v, want %v (stripes first, manifest last)", got[0].Files, want)
	}
	if !strings.Contains(got[0].Detail, "failed at copy") || !strings.Contains(got[0].Detail, "remote copy differs") {
		t.Errorf("detail %q", got[0].Detail)
	}
	// A hostile database name maps to its file-name form and back.
	h := set("a/b", 1, StateWritten, 10*day)
	got, _ = Decide(Retention{DeleteAbandonedAfter: day}, on("S", h), nil, now)
	if len(got) != 1 || got[0].Files[len(got[0].Files)-1] != "sql01@a%2Fb_00000001.manifest.json" || got[0].Set.Database != "a/b" {
		t.Errorf("hostile name deletion %+v", got)
	}
}

func TestRetentionValidate(t *testing.T) {
	bad := []struct {
		r   Retention
		msg string
	}{
		{Retention{KeepVerified: -1, DeleteAbandonedAfter: time.Hour}, "keep_verified = -1"},
		{Retention{DeleteAbandonedAfter: 0}, "delete_abandoned_after = 0s must be positive"},
		{Retention{DeleteFailedAfter: -time.Hour, DeleteAbandonedAfter: time.Hour}, "delete_failed_after = -1h0m0s"},
		{Retention{DeleteAbandonedAfter: time.Hour, DeleteOrphansAfter: -1}, "delete_orphans_after"},
	}
	for _, b := range bad {
		_, err := Decide(b.r, nil, nil, now)
		if err == nil || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("Decide(%+v) = %v, want mention of %q", b.r, err, b.msg)
		}
	}
}

// The same database name on two instances is two databases: one instance's
// sets never protect, rank or delete the other's (issue: src2's retention
// deleted src1's only verified set).
func TestRetentionKeyedByInstance(t *testing.T) {
	day := 24 * time.Hour
	src1 := set("DBA", 1, StateVerified, 5*day) // src1's only verified set
	src2 := []*Manifest{set("DBA", 1, StateVerified, 4*day), set("DBA", 2, StateVerified, 3*day), set("DBA", 3, StateVerified, day)}
	for _, m := range src2 {
		m.SourceInstance = "sql02"
		m.Stripes = nil
		for i := 1; i <= 2; i++ {
			m.Stripes = append(m.Stripes, Stripe{Name: m.StripeFileName(i, 2), Size: 10})
		}
	}
	ms := on("BAK01", append([]*Manifest{src1}, src2...)...)
	got, err := Decide(Retention{KeepVerified: 1, DeleteAbandonedAfter: 30 * day}, ms, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range got {
		if d.Set.Instance != "sql02" {
			t.Errorf("deletes a set of another instance: %+v", d)
		}
	}
	if len(got) != 2 {
		t.Errorf("deletions %v, want sql02's sets 1 and 2", summary(got))
	}
}

// After a sequence rollback a lower number can be the newest set, and a
// higher number an old one: "newest" is when the manifest says the backup
// was taken.
func TestRetentionNewestByTimeNotNumber(t *testing.T) {
	day := 24 * time.Hour
	old := set("Sales", 7, StateVerified, 10*day) // taken 10 days ago under a high number
	newer := set("Sales", 5, StateVerified, day)  // taken yesterday, after the rollback
	got, err := Decide(Retention{KeepVerified: 1, DeleteAbandonedAfter: 30 * day}, on("BAK01", old, newer), nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if s := summary(got); len(s) != 1 || !strings.Contains(s[0], "Sales#7") {
		t.Errorf("deletions %v, want only the older set 7", s)
	}
	if nv, err := NewestVerified(Of("sql01", "Sales"), []*Manifest{old, newer}); err != nil || nv.Sequence != 5 {
		t.Errorf("NewestVerified = %v, %v; want set 5", nv, err)
	}
}

// taken is a verified set of Sales whose HEADERONLY finish reads wall (the
// source's clock, offset unknown, as manifests recorded it before they
// carried the offset) and that the worker marked verified at verifiedAt.
func taken(seq int64, wall, verifiedAt time.Time) *Manifest {
	m := set("Sales", seq, StateVerified, now.Sub(verifiedAt))
	m.Header = &Header{BackupSetGUID: fmt.Sprintf("g%d", seq), FirstLSN: "1", LastLSN: "2", BackupStart: wall.Add(-time.Minute), BackupFinish: wall}
	return m
}

// The source's clock went back between two sets (DST fall-back, a VM moved
// west, a clock corrected) and their manifests cannot say by how much: set
// 8, taken and verified after set 7, shows an earlier finish. A verified
// set newer than the kept one in sequence and in verification time (the
// worker's clock) is never deleted for it, on any server.
func TestRetentionKeepsASetNewerInSequenceAndVerification(t *testing.T) {
	day := 24 * time.Hour
	v7 := now.Add(-2 * time.Hour)
	s7 := taken(7, time.Date(2026, 10, 25, 2, 50, 0, 0, time.UTC), v7)                // 02:50 CEST
	s8 := taken(8, time.Date(2026, 10, 25, 2, 20, 0, 0, time.UTC), v7.Add(time.Hour)) // 02:20 CET, an hour later
	ms := append(on("BAK01", s7, s8), on("BAK02", s7, s8)...)
	got, err := Decide(Retention{KeepVerified: 1, DeleteAbandonedAfter: 30 * day}, ms, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range got {
		if d.Set.Sequence == 8 {
			t.Errorf("deletes set 8, verified after set 7 under a higher number: %+v", d)
		}
	}
	// A set higher in sequence but verified earlier than the kept one is
	// ordered by when it was taken, as before (a number reused after a
	// rollback of the source's sequence table).
	s9 := taken(9, time.Date(2026, 10, 20, 2, 0, 0, 0, time.UTC), v7.Add(-5*day))
	got, err = Decide(Retention{KeepVerified: 1, DeleteAbandonedAfter: 30 * day}, on("BAK01", s7, s9), nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if s := summary(got); len(s) != 1 || s[0] != "BAK01 Sales#9 superseded" {
		t.Errorf("deletions %v, want the older set 9 only", s)
	}
}

// TestRetentionLeavesNumbersNoCycleHandsOut: a file named like a set of the
// database but numbered above tsql.MaxSequence was not written by a cycle
// (none hands such a number out): retention never deletes it, however old,
// whatever it is (an orphan stripe, a manifest's temporary file).
func TestRetentionLeavesNumbersNoCycleHandsOut(t *testing.T) {
	day := 24 * time.Hour
	owner := tsql.OwnerOf("sql01", "Sales")
	files := map[string][]FileInfo{"BAK01": {
		file(owner+"_999999999999999999_1of1.bak", 30*day),
		file(owner+"_100000000000000_1of2.bak", 30*day),
		file("."+owner+"_999999999999999999.manifest.json.tmp-0a1b2c3d4e5f", 30*day),
		file(owner+"_00000007_1of1.bak", 30*day), // an orphan of a set of ours: deleted
	}}
	got, err := Decide(Retention{DeleteAbandonedAfter: day}, nil, files, now)
	if err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, d := range got {
		deleted = append(deleted, d.Files...)
	}
	if want := []string{owner + "_00000007_1of1.bak"}; !reflect.DeepEqual(deleted, want) {
		t.Errorf("deleted %v, want only %v", deleted, want)
	}
}
