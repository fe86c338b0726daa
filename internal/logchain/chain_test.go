package logchain

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// lsn makes a 23-digit LSN, as real ones are, from a counter.
func lsn(n uint64) LSN { return LSN(fmt.Sprintf("171266580%014d", n)) }

var t0 = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

// genChain is a whole chain: a full, then n log backups a minute apart,
// each ending where the next begins; the first began before the full
// ended (logs run during a full). Extra verified fulls are taken every
// fullEvery logs, their LastLSN inside the log taken after them.
func genChain(r *rand.Rand, id int64, n, fullEvery int) Chain {
	pos := uint64(1000 + r.IntN(1000))
	base := Full{Sequence: 1, BackupSetGUID: "guid-1", FirstLSN: lsn(pos), CheckpointLSN: lsn(pos + 1), LastLSN: lsn(pos + 5),
		Finish: t0, Verified: true}
	c := Chain{ID: id, Fulls: []Full{base}}
	at := t0
	cur := pos // the first log starts at the full's FirstLSN
	for i := 1; i <= n; i++ {
		next := cur + 10 + uint64(r.IntN(100))
		if i == 1 {
			next = pos + 6 + uint64(r.IntN(50))
		}
		start := at.Add(time.Minute)
		l := Log{Number: int64(i), FirstLSN: lsn(cur), LastLSN: lsn(next), Start: start, Finish: start.Add(2 * time.Second),
			Files: []File{{Name: fmt.Sprintf("log%d", i), Size: 1, SHA256: strings.Repeat("a", 64)}}}
		c.Logs = append(c.Logs, l)
		at, cur = start, next
		if fullEvery > 0 && i%fullEvery == 0 && i < n {
			seq := int64(len(c.Fulls) + 1)
			c.Fulls = append(c.Fulls, Full{Sequence: seq, BackupSetGUID: fmt.Sprintf("guid-%d", seq), FirstLSN: lsn(cur + 1),
				CheckpointLSN: lsn(cur + 2), LastLSN: lsn(cur + 3), Finish: at.Add(30 * time.Second), Verified: true})
		}
	}
	return c
}

func TestLSNCompare(t *testing.T) {
	for _, tt := range []struct {
		a, b LSN
		want int
	}{{"9", "10", -1}, {"10", "9", 1}, {"0010", "10", 0}, {"17126658000000314600037", "17126658000000314600038", -1}, {"99999999999999999999", "100000000000000000000", -1}} {
		if got := tt.a.Cmp(tt.b); got != tt.want {
			t.Errorf("%s vs %s: %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
	for _, bad := range []LSN{"", "12a", "-1", LSN(strings.Repeat("1", 26))} {
		if bad.Valid() {
			t.Errorf("%q is valid", bad)
		}
	}
}

// Property: in a whole chain every full's first log is the one holding its
// LastLSN, nothing is missing, every point from the base on is reachable.
func TestWholeChainsProperties(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		c := genChain(r, 1, 1+r.IntN(60), r.IntN(10))
		if err := c.Validate(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if g := c.Gaps(); len(g) != 0 {
			t.Fatalf("seed %d: whole chain has gaps %v", seed, g)
		}
		for _, f := range c.Fulls {
			i, ok, gap := c.FirstAfter(f)
			if !ok || gap != nil || !c.Logs[i].Contains(f.LastLSN) {
				t.Fatalf("seed %d: first log after full %d: %d %v %v", seed, f.Sequence, i, ok, gap)
			}
			for _, l := range c.Logs[:i] {
				if l.Contains(f.LastLSN) {
					t.Fatalf("seed %d: log %d also contains full %d's LastLSN", seed, l.Number, f.Sequence)
				}
			}
			logs, gap := c.Restorable(f)
			if gap != nil || len(logs) != len(c.Logs)-i {
				t.Fatalf("seed %d: restorable after full %d: %d logs, gap %v", seed, f.Sequence, len(logs), gap)
			}
		}
		last := c.Logs[len(c.Logs)-1]
		pt := t0.Add(time.Duration(r.Int64N(int64(last.Start.Sub(t0)) + 1)))
		tg := c.LogsTo(pt)
		if !tg.Reachable || tg.Proven {
			t.Fatalf("seed %d: %s: reachable %v proven %v: %s", seed, pt, tg.Reachable, tg.Proven, tg.Why)
		}
		if end := tg.Logs[len(tg.Logs)-1]; end.Start.Before(pt) || len(tg.Logs) > 1 && !tg.Logs[len(tg.Logs)-2].Start.Before(pt) {
			t.Fatalf("seed %d: %s: the last log (%d, %s) is not the first that started by then", seed, pt, end.Number, end.Start)
		}
		if tg.Full.Finish.After(pt) {
			t.Fatalf("seed %d: full %d finished after %s", seed, tg.Full.Sequence, pt)
		}
		if tg := c.LogsTo(last.Start.Add(time.Second)); tg.Reachable {
			t.Fatalf("seed %d: a point after the newest log's start is reachable", seed)
		}
	}
}

// Property: removing one log (lost, or a foreign one not adopted) makes
// exactly one gap, which names the logs around it, and only fulls taken
// after it reach the points after it.
func TestMissingLogMakesOneNamedGap(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 9))
		c := genChain(r, 3, 3+r.IntN(40), 0)
		k := 1 + r.IntN(len(c.Logs)-2) // an inner log: 2..n-1 (index k)
		foreign := r.IntN(2) == 0
		if foreign {
			c.Logs[k].Foreign = &Foreign{Tool: "Ola DatabaseBackup", User: `CORP\sqlagent`, Path: `\\nas\logs\Sales.trn`}
			c.Logs[k].Files = nil
		} else {
			c.Logs = append(c.Logs[:k:k], c.Logs[k+1:]...)
			for i := k; i < len(c.Logs); i++ {
				c.Logs[i].Number = int64(i + 1) // renumbered: the record holds what it holds
			}
		}
		gaps := c.Gaps()
		if len(gaps) != 1 {
			t.Fatalf("seed %d: %d gaps: %v", seed, len(gaps), gaps)
		}
		g := gaps[0]
		if g.After != int64(k) || g.Before != int64(k+1) {
			t.Fatalf("seed %d: gap after %d before %d, want after %d before %d", seed, g.After, g.Before, k, k+1)
		}
		if foreign != (g.Reason() == BreakForeign) {
			t.Fatalf("seed %d: foreign %v but reason %s", seed, foreign, g.Reason())
		}
		msg := g.String()
		if foreign && (!strings.Contains(msg, "Ola DatabaseBackup") || !strings.Contains(msg, `\\nas\logs\Sales.trn`) || !strings.Contains(msg, "adopt_foreign_logs")) {
			t.Fatalf("seed %d: foreign gap message does not name the tool, path and fix: %s", seed, msg)
		}
		if !foreign && !strings.Contains(msg, string(g.From)) {
			t.Fatalf("seed %d: gap message does not name the LSN: %s", seed, msg)
		}
		logs, gap := c.Restorable(c.Base())
		if gap == nil || len(logs) != k {
			t.Fatalf("seed %d: restorable %d logs (want %d) gap %v", seed, len(logs), k, gap)
		}
		after := c.Logs[len(c.Logs)-1].Start
		if tg := c.LogsTo(after); tg.Reachable || tg.Why == "" {
			t.Fatalf("seed %d: the point after the gap is reachable from the base", seed)
		}
		h := HealthOf(&c, after, 26*time.Hour)
		if !h.Red || len(h.Gaps) != 1 {
			t.Fatalf("seed %d: health %+v", seed, h)
		}
		// A full verified after the hole makes the later points reachable
		// again, and status green.
		f := Full{Sequence: 9, BackupSetGUID: "guid-9", FirstLSN: c.Logs[len(c.Logs)-1].FirstLSN, CheckpointLSN: c.Logs[len(c.Logs)-1].FirstLSN,
			LastLSN: c.Logs[len(c.Logs)-1].FirstLSN, Finish: c.Logs[len(c.Logs)-2].Finish, Verified: true}
		if f.LastLSN.Less(g.From) || f.LastLSN == g.From {
			continue
		}
		c.Fulls = append(c.Fulls, f)
		if tg := c.LogsTo(after); !tg.Reachable || tg.Full.Sequence != 9 {
			t.Fatalf("seed %d: after the new full: %+v", seed, tg)
		}
		if h := HealthOf(&c, after, 26*time.Hour); len(h.Gaps) != 0 {
			t.Fatalf("seed %d: gaps after the newest verified full: %v", seed, h.Gaps)
		}
	}
}

// Property: a standby copy walked by NextToApply from its full takes every
// log in order and is then up to date; proven-to follows the applied logs.
func TestNextToApplyWalksTheChain(t *testing.T) {
	for seed := uint64(1); seed <= 100; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		c := genChain(r, 1, 1+r.IntN(30), 0)
		redo := c.Base().LastLSN
		if to, _ := c.ProvenTo(); !to.Equal(c.Base().Finish) {
			t.Fatalf("seed %d: proven to %s before any log, want the full's finish", seed, to)
		}
		for want := int64(1); ; want++ {
			n, err := c.NextToApply(redo)
			if err != nil || n.Gap != nil {
				t.Fatalf("seed %d: %v %v", seed, err, n.Gap)
			}
			if n.UpToDate {
				if want != int64(len(c.Logs))+1 {
					t.Fatalf("seed %d: up to date after %d of %d logs", seed, want-1, len(c.Logs))
				}
				break
			}
			if n.Log.Number != want {
				t.Fatalf("seed %d: next is log %d, want %d", seed, n.Log.Number, want)
			}
			c.Logs[want-1].Proven = &Proof{At: n.Log.Finish, Mode: ProofStandby}
			redo = n.Log.LastLSN
			if to, _ := c.ProvenTo(); !to.Equal(n.Log.Start) {
				t.Fatalf("seed %d: proven to %s after log %d, want its start %s", seed, to, want, n.Log.Start)
			}
		}
		if tg := c.LogsTo(c.Logs[len(c.Logs)-1].Start); !tg.Proven {
			t.Fatalf("seed %d: every log applied but the newest point is not proven", seed)
		}
	}
}

func TestNextToApplyOutsideTheChain(t *testing.T) {
	c := genChain(rand.New(rand.NewPCG(1, 1)), 2, 5, 0)
	n, err := c.NextToApply(lsn(1)) // seeded from an older chain
	if err != nil || n.Gap == nil || n.Gap.Before != 1 {
		t.Fatalf("a copy before the chain: %+v %v", n, err)
	}
	if _, err := c.NextToApply("x"); err == nil {
		t.Fatal("a bad redo LSN is accepted")
	}
}

func TestBreakOf(t *testing.T) {
	if r, ok := BreakOf(4208); !ok || r != BreakSimple {
		t.Errorf("4208: %s %v", r, ok)
	}
	if r, ok := BreakOf(4214); !ok || r != BreakRecoveryModel {
		t.Errorf("4214: %s %v", r, ok)
	}
	if _, ok := BreakOf(3201); ok {
		t.Error("3201 (cannot open backup device) is no break of the chain")
	}
}

func TestHealth(t *testing.T) {
	c := genChain(rand.New(rand.NewPCG(2, 2)), 1, 10, 0)
	for i := range c.Logs {
		c.Logs[i].Proven = &Proof{At: c.Logs[i].Finish, Mode: ProofNightly}
	}
	newest := c.Logs[9].Start
	if h := HealthOf(&c, newest.Add(10*time.Minute), 15*time.Minute); h.Red {
		t.Fatalf("10 minutes behind with an rpo of 15: %v", h.Reasons)
	}
	h := HealthOf(&c, newest.Add(20*time.Minute), 15*time.Minute)
	if !h.Red || !strings.Contains(strings.Join(h.Reasons, ";"), "beyond the rpo") {
		t.Fatalf("20 minutes behind with an rpo of 15: %+v", h)
	}
	c.Break = &Break{Reason: BreakSimple, Detail: "BACKUP LOG failed with 4208", At: newest}
	if h := HealthOf(&c, newest, time.Hour); !h.Red || h.Broken == nil {
		t.Fatalf("broken chain: %+v", h)
	}
	if h := HealthOf(nil, newest, time.Hour); !h.Red {
		t.Fatal("no chain is not red")
	}
}

func TestValidate(t *testing.T) {
	c := genChain(rand.New(rand.NewPCG(3, 3)), 1, 4, 0)
	c.Logs[2].Number = 1
	c.Logs[1].LastLSN = "x"
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "position 3") || !strings.Contains(err.Error(), "log 2 last_lsn") {
		t.Fatalf("%v", err)
	}
}

// Unproven names the oldest log after the newest verified full that waited
// longer than the lag, and nothing while every such log is proven or young.
func TestUnprovenPastLag(t *testing.T) {
	c := genChain(rand.New(rand.NewPCG(7, 7)), 1, 10, 0)
	for i := range 6 {
		c.Logs[i].Proven = &Proof{At: c.Logs[i].Finish, Mode: ProofStandby}
	}
	seventh := c.Logs[6].Finish
	if l := c.Unproven(seventh.Add(14*time.Minute), 15*time.Minute); l != nil {
		t.Fatalf("log %d reported at 14m, lag 15m", l.Number)
	}
	if l := c.Unproven(seventh.Add(16*time.Minute), 15*time.Minute); l == nil || l.Number != 7 {
		t.Fatalf("at 16m past log 7: %+v, want log 7", l)
	}
	for i := range c.Logs {
		c.Logs[i].Proven = &Proof{At: c.Logs[i].Finish, Mode: ProofNightly}
	}
	if l := c.Unproven(seventh.Add(48*time.Hour), 15*time.Minute); l != nil {
		t.Fatalf("every log proven, yet log %d reported", l.Number)
	}
}
