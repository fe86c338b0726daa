// Package fleet decides which backup cycles of a night's run start when:
// largest database first, never more cycles at once than each SQL
// instance, each backup server (as primary or as remote copy target) and the
// whole configuration allow. It is pure and deterministic, so the Fleet
// workflow runs it directly.
package fleet

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Item is one database of the night's run and what its cycle occupies.
type Item struct {
	Instance string `json:"instance"`
	Database string `json:"database"`
	// SizeBytes is the allocated size of its data files (0 when unknown:
	// those go last).
	SizeBytes int64 `json:"size_bytes"`
	// Servers are the backup servers the cycle writes to or copies to: the
	// primary of its rotation and the remote copy target.
	Servers []string `json:"servers"`
}

// Key names the item in messages and maps: instance/database.
func (it Item) Key() string { return it.Instance + "/" + it.Database }

// Limits are the max_concurrent settings the run obeys. A name missing from
// Instances or Servers has the limit 1.
type Limits struct {
	Total     int            `json:"total"`
	Instances map[string]int `json:"instances"`
	Servers   map[string]int `json:"servers"`
}

// Order sorts items largest first; equal sizes by instance, then name, so
// the order is the same on every run.
func Order(items []Item) {
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a.SizeBytes != b.SizeBytes {
			return a.SizeBytes > b.SizeBytes
		}
		if a.Instance != b.Instance {
			return a.Instance < b.Instance
		}
		return a.Database < b.Database
	})
}

// Pool counts what the running cycles occupy.
type Pool struct {
	limits    Limits
	total     int
	instances map[string]int
	servers   map[string]int
}

// NewPool is an empty pool under limits.
func NewPool(l Limits) *Pool {
	return &Pool{limits: l, instances: map[string]int{}, servers: map[string]int{}}
}

func limit(m map[string]int, name string) int {
	if n, ok := m[name]; ok && n > 0 {
		return n
	}
	return 1
}

// Fits reports whether it can start now.
func (p *Pool) Fits(it Item) bool {
	total := p.limits.Total
	if total <= 0 {
		total = 1
	}
	if p.total >= total || p.instances[it.Instance] >= limit(p.limits.Instances, it.Instance) {
		return false
	}
	for _, s := range unique(it.Servers) {
		if p.servers[s] >= limit(p.limits.Servers, s) {
			return false
		}
	}
	return true
}

// Take records it as running. It panics when it does not fit: the caller
// asks Fits (or Next) first.
func (p *Pool) Take(it Item) {
	if !p.Fits(it) {
		panic(fmt.Sprintf("fleet: %s does not fit the limits", it.Key()))
	}
	p.total++
	p.instances[it.Instance]++
	for _, s := range unique(it.Servers) {
		p.servers[s]++
	}
}

// Release records that it ended.
func (p *Pool) Release(it Item) {
	p.total--
	p.instances[it.Instance]--
	for _, s := range unique(it.Servers) {
		p.servers[s]--
	}
}

// Running is the number of cycles the pool holds.
func (p *Pool) Running() int { return p.total }

// Next is the index in pending (ordered by Order) of the first item that
// fits now, or -1. A large database that must wait for a server does not
// hold back a smaller one that fits elsewhere; it comes first again as soon
// as its resources free up, since pending keeps its order.
func (p *Pool) Next(pending []Item) int {
	for i, it := range pending {
		if p.Fits(it) {
			return i
		}
	}
	return -1
}

// Summary is the pool's occupation for the Web UI: "2/4 total; sql01 1/3, ...".
func (p *Pool) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d running", p.total, max(p.limits.Total, 1))
	for _, part := range []struct {
		used   map[string]int
		limits map[string]int
	}{{p.instances, p.limits.Instances}, {p.servers, p.limits.Servers}} {
		names := make([]string, 0, len(part.limits))
		for n := range part.limits {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(&b, " · %s %d/%d", n, part.used[n], limit(part.limits, n))
		}
	}
	return b.String()
}

// unique drops empty and repeated names: a server counts once per cycle.
func unique(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
