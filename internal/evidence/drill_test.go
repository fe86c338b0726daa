package evidence

import (
	"context"
	"testing"
	"time"
)

// A drill restored from the immutable copy names the store, its location
// and the set in its record (schema 2), which verifies and which the
// report carries to the drill's line; another drill's record stays schema
// 1, as builds before the immutable source wrote and read it.
func TestDrillRecordNamesItsImmutableSource(t *testing.T) {
	s := newSite(t)
	s.verifiedSet(1)
	ctx := context.Background()
	src := &ImmutableSource{Store: "vault", Location: "s3://backups/site-a", Sequence: 1}
	for i, from := range []*ImmutableSource{nil, src} {
		r := &Record{Kind: KindDrill, Server: server, Instance: inst, Database: dbName, RecoveryPoint: t0.Add(time.Hour),
			Set: &Set{Sequence: 1}, Drill: &Drill{Point: "latest", RTOSeconds: 60, MetRTO: true, Passed: true, Immutable: from},
			WorkflowID: "drill/sql01/Sales", RunID: "run-" + string(rune('a'+i)), Worker: "test-build"}
		if _, err := (Appender{Key: s.key, Now: func() time.Time { return t0.Add(time.Duration(2+i) * time.Hour) }}).Append(ctx, s.st, r); err != nil {
			t.Fatal(err)
		}
		if want := 1 + i; r.Schema != want {
			t.Errorf("drill record %d written as schema %d, want %d", i, r.Schema, want)
		}
	}
	res := s.verify(false)
	if !res.OK() || res.Records != 3 {
		t.Fatalf("verify: %+v", res)
	}
	var drills []*Drill
	for i := range res.Verified {
		if res.Verified[i].Kind == KindDrill {
			drills = append(drills, res.Verified[i].Drill)
		}
	}
	if len(drills) != 2 || drills[0].Immutable != nil || drills[1].Immutable == nil || *drills[1].Immutable != *src {
		t.Fatalf("drills read back: %+v", drills)
	}
	rep := Summarize(res.Verified, t0, t0.Add(24*time.Hour))
	lines := rep.Databases[0].DrillResults
	if len(lines) != 2 || lines[0].Immutable != nil || lines[1].Immutable == nil || *lines[1].Immutable != *src {
		t.Errorf("report drill lines: %+v", lines)
	}
}
