package recovery

import (
	"fmt"
	"testing"
	"time"
)

// reclock puts set m and the logs of servers' chains numbered in logs on
// a clock offset minutes from UTC (the same instants, other wall clocks).
func reclock(servers []Server, m int64, logs []int64, offset int) {
	for _, s := range servers {
		for _, mf := range s.Manifests {
			if mf.Sequence == m {
				h := mf.Header
				h.BackupStart = h.BackupStartUTC.Add(time.Duration(offset) * time.Minute)
				h.BackupFinish = h.BackupFinishUTC.Add(time.Duration(offset) * time.Minute)
				h.SetUTCOffset(offset)
			}
		}
		for _, r := range s.Chains {
			for i := range r.Logs {
				l := &r.Logs[i]
				for _, n := range logs {
					if l.Number == n {
						l.BackupStart = l.BackupStartUTC.Add(time.Duration(offset) * time.Minute)
						l.BackupFinish = l.BackupFinishUTC.Add(time.Duration(offset) * time.Minute)
						l.SetUTCOffset(offset)
					}
				}
			}
		}
	}
}

// STOPAT is read on the source's clock (its local time, "RESTORE
// Statements - Arguments", STOPAT), and so are the commit times SQL Server
// compares it with. When that clock went back between the full and the
// point (a time zone change, the end of daylight saving time), commits
// made before the point carry later clock times than the point's: no
// STOPAT names it (SQL Server stops before it, or refuses with 4335 when
// the full already ended later on the clock). When it changed while the
// log that holds the point was written, that log's commits are on two
// clocks, which one STOPAT cannot split at the point. The plan refuses
// such points, saying why and from when a point is named again; one after
// a clock that went forward earlier, or restored from a full taken after
// the clock went back, is planned as any other.
func TestChooseRefusesAPointTheSourcesClockWentBackBefore(t *testing.T) {
	// Set 1 and logs 1-3 at UTC+05:30, then the source's clock at UTC+1
	// from log 4 on (set 2 and logs 4-8).
	back := estate()
	reclock(back, 1, []int64{1, 2, 3}, 330)
	c := Build(back)
	// Log 4 holds the point: its commits are on both clocks.
	_, err := Choose(c, Point{At: at(55)})
	unreachable(t, err, "clock changed from UTC+05:30 to UTC+01:00 between log 3 of chain 1 and log 4 of chain 1", "two clocks")
	// Log 5 holds it, written on one clock, but the commits of logs 1-4
	// read up to 16:30 on the clock, later than the point's 12:10 (without
	// set 2, restored from set 1).
	var noSet2 []Server
	for _, sv := range back {
		sv.Manifests = sv.Manifests[:1]
		noSet2 = append(noSet2, sv)
	}
	_, err = Choose(Build(noSet2), Point{At: at(70)})
	unreachable(t, err, "clock went back from UTC+05:30 to UTC+01:00 between log 3 of chain 1 and log 4 of chain 1", "16:30:00",
		"recover to a point after 2026-03-01T15:30:00Z")
	// From set 2, taken on the new clock, with logs on it: planned.
	p, err := Choose(c, Point{At: at(80)})
	if err != nil || p.Full().Sequence != 2 || fmt.Sprint(numbers(p)) != "[4 5 6]" || p.StopAtOffsetMinutes != 60 {
		t.Fatalf("at minute 80: set %d logs %v offset %d, %v; want set 2, logs 4-6 at UTC+1", p.Full().Sequence, numbers(p), p.StopAtOffsetMinutes, err)
	}
	// The clock went forward instead (UTC, then UTC+1) between logs 2
	// and 3: every earlier commit reads earlier on it.
	fwd := estate()
	reclock(fwd, 1, []int64{1, 2}, 0)
	p, err = Choose(Build(fwd), Point{At: at(55)})
	if err != nil || p.Full().Sequence != 1 || fmt.Sprint(numbers(p)) != "[1 2 3 4]" || p.StopAtOffsetMinutes != 60 {
		t.Fatalf("clock forward, minute 55: set %d logs %v offset %d, %v; want set 1, logs 1-4 at UTC+1", p.Full().Sequence, numbers(p),
			p.StopAtOffsetMinutes, err)
	}
	// ... but between logs 3 and 4, where log 4 holds the point: its
	// commits are on two clocks, some made after the point reading earlier
	// than it on the new one.
	fwd = estate()
	reclock(fwd, 1, []int64{1, 2, 3}, 0)
	_, err = Choose(Build(fwd), Point{At: at(55)})
	unreachable(t, err, "clock changed from UTC+00:00 to UTC+01:00 between log 3 of chain 1 and log 4 of chain 1", "two clocks")
}

// Accepted leaves out exactly what Choose refuses: with the source's clock
// back 40 minutes before log 4 (UTC+01:40 to UTC+01:00) and no newer full,
// the points log 4 holds (its commits on two clocks) and those up to
// minute 100 (the commits of logs 1-3 read up to 12:40 on the clock, 11:40
// UTC when it reads 12:40 again) are refused; the span after starts at
// minute 100 to the millisecond.
func TestAcceptedLeavesOutThePointsChooseRefuses(t *testing.T) {
	back := estate()
	reclock(back, 1, []int64{1, 2, 3}, 100)
	var noSet2 []Server
	for _, sv := range back {
		sv.Manifests = sv.Manifests[:1]
		noSet2 = append(noSet2, sv)
	}
	c := Build(noSet2)
	spans := Accepted(c, at(0), at(120))
	var got []string
	for _, s := range spans {
		got = append(got, fmt.Sprintf("%s-%s", s.From.Sub(t0), s.To.Sub(t0)))
		for _, p := range []time.Time{s.From, s.From.Add(s.To.Sub(s.From) / 2), s.To} {
			if _, err := Choose(c, Point{At: p}); err != nil {
				t.Errorf("span %s: %s refused: %v", got[len(got)-1], p.Sub(t0), err)
			}
		}
	}
	// The logs start every 15 minutes: an instant a log starts at is left out.
	want := "[0s-14m59.999s 15m0.001s-29m59.999s 30m0.001s-44m59.999s 1h40m0s-1h44m59.999s 1h45m0.001s-2h0m0s]"
	if fmt.Sprint(got) != want {
		t.Fatalf("accepted %v, want %v", got, want)
	}
	if _, err := Choose(c, Point{At: at(100).Add(-time.Millisecond)}); err == nil {
		t.Fatal("a millisecond before minute 100 planned, want it refused")
	}
}
