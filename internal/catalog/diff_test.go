package catalog

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// diffOn makes m a differential on base, with the base's GUID and LSN.
func diffOn(m, base *Manifest) *Manifest {
	m.Differential = &DiffBase{Sequence: base.Sequence, BackupSetGUID: fmt.Sprintf("guid-%d", base.Sequence), LSN: "1000"}
	return m
}

// A differential's claim names the base its plan chose before the BACKUP
// runs; the base's LSN comes with the header and is recorded with it. Only
// a differential fails on a foreign base.
func TestDifferentialBaseLSNAndForeignBase(t *testing.T) {
	claim := NewPending("sql01", "Sales", 9, now, "wf", "run")
	claim.Differential = &DiffBase{Sequence: 7, BackupSetGUID: "guid-7"}
	b, err := Encode(claim)
	if err != nil {
		t.Fatalf("a differential's claim without the base's LSN: %v", err)
	}
	if _, err := Decode(b); err != nil {
		t.Fatal(err)
	}
	written := sample("Sales", 9)
	written.Differential = &DiffBase{Sequence: 7, BackupSetGUID: "guid-7"}
	if _, err := Encode(written); err == nil || !strings.Contains(err.Error(), "base's LSN") {
		t.Errorf("a written differential without its base's LSN: %v", err)
	}
	if err := claim.Fail(StepCatalog, EvidenceForeignBase, "its base is a full backup no set of the product holds", now); err != nil {
		t.Fatal(err)
	}
	if _, err := Encode(claim); err != nil {
		t.Errorf("a differential failed on a foreign base: %v", err)
	}
	full := NewPending("sql01", "Sales", 10, now, "wf", "run")
	if err := full.Fail(StepCatalog, EvidenceForeignBase, "x", now); err != nil {
		t.Fatal(err)
	}
	if _, err := Encode(full); err == nil || !strings.Contains(err.Error(), "foreign_base") {
		t.Errorf("a full failed on a foreign base: %v", err)
	}
}

// The rotation is the full backups': a differential, wherever it was
// written, does not move the next full to the other server.
func TestLastServerIgnoresDifferentials(t *testing.T) {
	full := set("Sales", 7, StateVerified, 48*time.Hour)
	full.PrimaryServer = "BAK01"
	d := diffOn(set("Sales", 8, StateVerified, time.Hour), full)
	d.PrimaryServer = "BAK02"
	if got := LastServer(Of("sql01", "Sales"), []*Manifest{full, d}); got != "BAK01" {
		t.Errorf("LastServer = %q, want BAK01 (the newest full's primary)", got)
	}
}

// Retention of differentials: only those of the newest verified full on a
// server matter for a restore (a differential restores only on top of its
// own base); the newest keep_verified of them are kept, every other
// verified differential goes, before its base. A differential never takes
// a full's place among keep_verified, nor protects itself as newest.
func TestRetentionOfDifferentials(t *testing.T) {
	day := 24 * time.Hour
	policy := Retention{KeepVerified: 2, DeleteFailedAfter: day, DeleteAbandonedAfter: 3 * day}
	f1 := set("Sales", 1, StateVerified, 5*day)
	d2 := diffOn(set("Sales", 2, StateVerified, 4*day), f1)
	f3 := set("Sales", 3, StateVerified, 3*day)
	d4 := diffOn(set("Sales", 4, StateVerified, 2*day), f3)
	f5 := set("Sales", 5, StateVerified, day+time.Hour)
	d6 := diffOn(set("Sales", 6, StateVerified, 20*time.Hour), f5)
	d7 := diffOn(set("Sales", 7, StateVerified, 10*time.Hour), f5)
	d8 := diffOn(set("Sales", 8, StateVerified, time.Hour), f5)
	d9 := diffOn(set("Sales", 9, StateFailed, 2*day), f5) // failed, older than delete_failed_after
	got, err := Decide(policy, on("BAK01", f1, d2, f3, d4, f5, d6, d7, d8, d9), nil, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"BAK01 Sales#2 superseded", "BAK01 Sales#4 superseded", "BAK01 Sales#6 superseded", "BAK01 Sales#9 failed", "BAK01 Sales#1 superseded"}
	if s := summary(got); !slices.Equal(s, want) {
		t.Errorf("deleted %v\nwant    %v", s, want)
	}
	for _, d := range got {
		if d.Set.Sequence == 4 && !strings.Contains(d.Detail, "set 3") {
			t.Errorf("detail of the differential of an older full: %q", d.Detail)
		}
	}

	// The base a kept differential needs is the newest full: it stays
	// whatever keep_verified says, and so do its differentials.
	got, err = Decide(Retention{KeepVerified: 1, DeleteAbandonedAfter: 3 * day}, on("BAK01", f3, d4, f5, d8), nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if s := summary(got); !slices.Equal(s, []string{"BAK01 Sales#4 superseded", "BAK01 Sales#3 superseded"}) {
		t.Errorf("keep_verified 1: deleted %v", s)
	}
}
