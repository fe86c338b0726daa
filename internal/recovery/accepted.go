package recovery

import (
	"slices"
	"time"
)

// Span is the instants from From to To, both included.
type Span struct {
	From, To time.Time
}

// Accepted are the instants between from and to, to the millisecond, that
// Choose plans a restore to: what it refuses (shortly after the source's
// clock went back, a hole, before a full) left out. The plan's steps
// change only where a set or differential finished or a log started;
// between two such instants they are the same, and the one rule that
// refuses some of those points and not others (STOPAT names a point only
// once it reads later than every earlier commit on the clock, clockNames)
// accepts each later point once it accepts one. So each such stretch's
// first accepted point is found by bisection on Choose itself, and a
// caller picking a point here picks one Choose accepts. The instants
// themselves where the steps change are left out.
func Accepted(c Catalog, from, to time.Time) []Span {
	from, to = ceilMillis(from.UTC()), to.UTC().Truncate(time.Millisecond)
	if to.Before(from) {
		return nil
	}
	cuts := []time.Time{from.Add(-time.Millisecond), to.Add(time.Millisecond)}
	add := func(t time.Time) {
		if t.After(from) && t.Before(to) {
			cuts = append(cuts, t.UTC())
		}
	}
	for _, s := range c.Sets {
		add(s.Finish)
	}
	for _, d := range c.Diffs {
		add(d.Finish)
	}
	for _, ch := range c.Chains {
		for _, l := range ch.Logs {
			add(l.Start)
		}
	}
	slices.SortFunc(cuts, func(a, b time.Time) int { return a.Compare(b) })
	cuts = slices.CompactFunc(cuts, time.Time.Equal)
	ok := func(t time.Time) bool {
		_, err := Choose(c, Point{At: t})
		return err == nil
	}
	var out []Span
	for i := 1; i < len(cuts); i++ {
		// The milliseconds strictly between two cuts.
		lo, hi := ceilMillis(cuts[i-1].Add(time.Nanosecond)), cuts[i].Add(-time.Nanosecond).Truncate(time.Millisecond)
		end := hi
		if hi.Before(lo) {
			continue
		}
		// The first accepted millisecond: lo when it is (then all are),
		// none when hi is not, else bisected between a refused one (lo)
		// and an accepted one (hi).
		if !ok(lo) {
			if !ok(hi) {
				continue
			}
			for hi.Sub(lo) > time.Millisecond {
				mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Millisecond)
				if ok(mid) {
					hi = mid
				} else {
					lo = mid
				}
			}
			lo = hi
		}
		out = append(out, Span{From: lo, To: end})
	}
	return out
}

// ceilMillis is t rounded up to the millisecond.
func ceilMillis(t time.Time) time.Time {
	if r := t.Truncate(time.Millisecond); r.Before(t) {
		return r.Add(time.Millisecond)
	}
	return t
}
