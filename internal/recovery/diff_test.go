package recovery

import (
	"fmt"
	"testing"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// diff is the manifest of differential set seq on full base, in state,
// finished at minute fin, its LSNs [first, last), on servers.
func diff(seq int64, base *catalog.Manifest, state catalog.State, fin, first, last int, servers ...string) *catalog.Manifest {
	m := set(seq, state, fin, first, last, servers...)
	m.Differential = &catalog.DiffBase{Sequence: base.Sequence, BackupSetGUID: base.Header.BackupSetGUID, LSN: base.Header.FirstLSN}
	return m
}

// withDiffs is estate() with the manifests ms added on both servers.
func withDiffs(ms ...*catalog.Manifest) []Server {
	servers := estate()
	for i := range servers {
		servers[i].Manifests = append(servers[i].Manifests, ms...)
	}
	return servers
}

func setOf(servers []Server, seq int64) *catalog.Manifest {
	for _, m := range servers[0].Manifests {
		if m.Sequence == seq {
			return m
		}
	}
	panic(fmt.Sprint("no set ", seq))
}

// A verified differential on the chosen full that finished by the point
// goes between the full and the logs, which then start with the one
// holding its LastLSN; the newest such is taken. A differential is never a
// full of its own.
func TestChooseTakesTheNewestVerifiedDifferentialOnTheFull(t *testing.T) {
	s1 := setOf(estate(), 1)
	servers := withDiffs(
		diff(3, s1, catalog.StateVerified, 20, 22, 28, "bak01", "bak02"), // LastLSN 28: in log 2
		diff(4, s1, catalog.StateVerified, 35, 30, 38, "bak01", "bak02"), // LastLSN 38: in log 3
	)
	c := Build(servers)
	if len(c.Sets) != 2 || len(c.Diffs) != 2 {
		t.Fatalf("%d fulls and %d differentials, want 2 and 2", len(c.Sets), len(c.Diffs))
	}
	p, err := Choose(c, Point{At: at(40)})
	if err != nil {
		t.Fatal(err)
	}
	d, ok := p.Diff()
	if p.Full().Sequence != 1 || !ok || d.Kind != KindDiff || d.Sequence != 4 || len(d.Files) != 1 || d.Files[0].SHA256 == "" || len(d.Servers) != 2 {
		t.Fatalf("steps %+v, want set 1 then differential 4 with its files", p.Steps)
	}
	if got := numbers(p); fmt.Sprint(got) != "[3]" {
		t.Fatalf("logs %v, want [3]: the one after the differential's LastLSN", got)
	}
	if p.Steps[1].Kind != KindDiff || p.Steps[2].Kind != KindLog || !p.StopAt.Equal(at(40)) {
		t.Fatalf("order %v, stop at %s", p.Steps, p.StopAt)
	}
	// The latest from set 2: no differential on it, every log after it.
	p, err = Choose(c, Point{Latest: true})
	if _, ok := p.Diff(); err != nil || ok || p.Full().Sequence != 2 || fmt.Sprint(numbers(p)) != "[4 5 6 7 8]" {
		t.Fatalf("latest: set %d diff %v logs %v, %v", p.Full().Sequence, ok, numbers(p), err)
	}
	// Differentials alone restore nothing.
	only := []Server{{Name: "bak01", Manifests: []*catalog.Manifest{diff(3, s1, catalog.StateVerified, 20, 22, 28, "bak01")}}}
	_, err = Choose(Build(only), Point{Latest: true})
	unreachable(t, err, "no verified full backup")
}

// Differentials that do not fit are left out and the logs go on from the
// full: one on another base, one that finished after the point, one not
// verified, one held on no reachable server.
func TestChooseIgnoresDifferentialsThatDoNotFit(t *testing.T) {
	s1, s2 := setOf(estate(), 1), setOf(estate(), 2)
	other := *s1
	other.Header = &catalog.Header{BackupSetGUID: "0000000f-0000-0000-0000-000000000000", FirstLSN: s1.Header.FirstLSN}
	for name, m := range map[string]*catalog.Manifest{
		"another base":         diff(4, &other, catalog.StateVerified, 35, 30, 38, "bak01", "bak02"),
		"a later full's base":  diff(4, s2, catalog.StateVerified, 35, 30, 38, "bak01", "bak02"),
		"after the point":      diff(4, s1, catalog.StateVerified, 42, 30, 38, "bak01", "bak02"),
		"not verified":         diff(4, s1, catalog.StateCopied, 35, 30, 38, "bak01", "bak02"),
		"failed":               diff(4, s1, catalog.StateFailed, 35, 30, 38, "bak01", "bak02"),
		"on no reachable site": diff(4, s1, catalog.StateVerified, 35, 30, 38, "bak09"),
	} {
		if m.State == catalog.StateFailed {
			m.Failure = &catalog.Failure{Step: catalog.StepRestore, Evidence: catalog.EvidenceCorruptBackup, Reason: "corrupt", At: t0}
		}
		p, err := Choose(Build(withDiffs(m)), Point{At: at(40)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d, ok := p.Diff(); ok || p.Full().Sequence != 1 || fmt.Sprint(numbers(p)) != "[1 2 3]" {
			t.Fatalf("%s: differential %+v used, logs %v; want set 1 and logs 1-3", name, d, numbers(p))
		}
	}
}
