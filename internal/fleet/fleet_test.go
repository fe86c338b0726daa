package fleet

import (
	"math/rand/v2"
	"testing"
)

func TestOrderLargestFirstStable(t *testing.T) {
	items := []Item{
		{Instance: "b", Database: "x", SizeBytes: 10},
		{Instance: "a", Database: "z", SizeBytes: 30},
		{Instance: "a", Database: "y", SizeBytes: 10},
		{Instance: "a", Database: "unknown"},
	}
	Order(items)
	want := []string{"a/z", "a/y", "b/x", "a/unknown"}
	for i, it := range items {
		if it.Key() != want[i] {
			t.Fatalf("order %d = %s, want %s (all: %v)", i, it.Key(), want[i], items)
		}
	}
}

func TestPoolLimits(t *testing.T) {
	p := NewPool(Limits{Total: 3, Instances: map[string]int{"sql01": 2, "sql02": 2}, Servers: map[string]int{"bak01": 2, "bak02": 1}})
	a := Item{Instance: "sql01", Database: "A", Servers: []string{"bak01", "bak02"}}
	b := Item{Instance: "sql01", Database: "B", Servers: []string{"bak01", "bak03"}}
	c := Item{Instance: "sql02", Database: "C", Servers: []string{"bak02", "bak01"}}
	d := Item{Instance: "sql02", Database: "D", Servers: []string{"bak04", "bak05"}}
	p.Take(a)
	if p.Fits(c) {
		t.Fatal("C fits although bak02 (limit 1) is held by A")
	}
	if !p.Fits(b) {
		t.Fatal("B does not fit: sql01 1/2, bak01 1/2, bak03 unlimited-by-default 0/1")
	}
	p.Take(b)
	if p.Fits(Item{Instance: "sql01", Database: "E", Servers: []string{"bak05", "bak06"}}) {
		t.Fatal("a third sql01 cycle fits its limit of 2")
	}
	if !p.Fits(d) {
		t.Fatal("D does not fit")
	}
	p.Take(d)
	if p.Fits(Item{Instance: "sql03", Database: "F", Servers: []string{"bak07", "bak08"}}) {
		t.Fatal("a fourth cycle fits the total of 3")
	}
	p.Release(a)
	if !p.Fits(c) {
		t.Fatal("C does not fit after A ended")
	}
	if got := p.Next([]Item{{Instance: "sql01", Database: "G", Servers: []string{"bak03", "bak01"}}, c}); got != 1 {
		t.Fatalf("Next = %d, want 1 (G waits for bak03, held by B)", got)
	}
}

// TestPoolNeverExceeds drives a random run and checks every limit after
// each start, as the Fleet workflow uses the pool.
func TestPoolNeverExceeds(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		r := rand.New(rand.NewPCG(seed, 0))
		l := Limits{Total: 1 + r.IntN(6), Instances: map[string]int{"i0": 1 + r.IntN(3), "i1": 1 + r.IntN(3)},
			Servers: map[string]int{"s0": 1 + r.IntN(3), "s1": 1 + r.IntN(3), "s2": 1 + r.IntN(3)}}
		var pending []Item
		for i := 0; i < 40; i++ {
			s1 := r.IntN(3)
			s2 := (s1 + 1 + r.IntN(2)) % 3
			pending = append(pending, Item{Instance: []string{"i0", "i1"}[r.IntN(2)], Database: string(rune('A' + i)),
				SizeBytes: int64(r.IntN(5)), Servers: []string{[]string{"s0", "s1", "s2"}[s1], []string{"s0", "s1", "s2"}[s2]}})
		}
		Order(pending)
		p := NewPool(l)
		var running []Item
		done := 0
		for done < 40 {
			for {
				i := p.Next(pending)
				if i < 0 {
					break
				}
				p.Take(pending[i])
				running = append(running, pending[i])
				pending = append(pending[:i], pending[i+1:]...)
				check(t, seed, l, running)
			}
			if len(running) == 0 {
				t.Fatalf("seed %d: nothing runs and %d wait: the pool deadlocked", seed, len(pending))
			}
			k := r.IntN(len(running))
			p.Release(running[k])
			running = append(running[:k], running[k+1:]...)
			done++
		}
	}
}

func check(t *testing.T, seed uint64, l Limits, running []Item) {
	t.Helper()
	inst, srv := map[string]int{}, map[string]int{}
	for _, it := range running {
		inst[it.Instance]++
		for _, s := range unique(it.Servers) {
			srv[s]++
		}
	}
	if len(running) > l.Total {
		t.Fatalf("seed %d: %d running, total limit %d", seed, len(running), l.Total)
	}
	for n, c := range inst {
		if c > l.Instances[n] {
			t.Fatalf("seed %d: %s runs %d, limit %d", seed, n, c, l.Instances[n])
		}
	}
	for n, c := range srv {
		if c > l.Servers[n] {
			t.Fatalf("seed %d: %s holds %d, limit %d", seed, n, c, l.Servers[n])
		}
	}
}
