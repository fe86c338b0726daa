package logchain

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// without is c with the logs of refs taken out of the files (deleted).
func without(c Chain, refs []LogRef) Chain {
	out := c
	out.Logs = slices.Clone(c.Logs)
	for i, l := range out.Logs {
		if slices.Contains(refs, LogRef{c.ID, l.Number}) {
			out.Logs[i].Files = nil
		}
	}
	return out
}

// Property: after the chain-aware retention deletes what it allows, every
// kept verified full from the oldest kept on restores exactly the logs it
// restored before, and the newest verified full is kept.
func TestRetainKeepsEveryPointFromTheOldestKeptFull(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 13))
		var chains []Chain
		for id := int64(1); id <= int64(1+r.IntN(3)); id++ {
			c := genChain(r, id, 2+r.IntN(40), 1+r.IntN(8))
			for i := range c.Fulls {
				c.Fulls[i].BackupSetGUID = fmt.Sprintf("c%d-%s", id, c.Fulls[i].BackupSetGUID)
				c.Fulls[i].Verified = r.IntN(4) > 0
			}
			chains = append(chains, c)
		}
		var all []Full
		var ids []int64
		for _, c := range chains {
			for _, f := range c.Fulls {
				if f.Verified {
					all, ids = append(all, f), append(ids, c.ID)
				}
			}
		}
		var kept []string
		keepN := r.IntN(len(all) + 1)
		for _, f := range all[len(all)-keepN:] {
			kept = append(kept, f.BackupSetGUID)
		}
		ret := Retain(chains, kept)
		if len(all) == 0 {
			if len(ret.DeleteLogs) != 0 || len(ret.KeepFulls) != 0 {
				t.Fatalf("seed %d: without a verified full, retention deletes %v", seed, ret.DeleteLogs)
			}
			continue
		}
		if newest := all[len(all)-1]; !slices.Contains(ret.KeepFulls, newest.BackupSetGUID) {
			t.Fatalf("seed %d: the newest verified full %s is not kept: %v", seed, newest.BackupSetGUID, ret.KeepFulls)
		}
		first := len(all) - max(keepN, 1)
		for j := first; j < len(all); j++ {
			f, id := all[j], ids[j]
			for _, c := range chains {
				if c.ID != id {
					continue
				}
				before, _ := c.Restorable(f)
				after := without(c, ret.DeleteLogs)
				got, gap := after.Restorable(f)
				if gap != nil || len(got) != len(before) {
					t.Fatalf("seed %d: full %s of chain %d restored %d logs before retention, %d after (gap %v)", seed, f.BackupSetGUID, id, len(before), len(got), gap)
				}
			}
			for _, c := range chains {
				if c.ID > id {
					for _, l := range c.Logs {
						if slices.Contains(ret.DeleteLogs, LogRef{c.ID, l.Number}) {
							t.Fatalf("seed %d: %v of a chain after the kept full's is deleted", seed, LogRef{c.ID, l.Number})
						}
					}
				}
			}
		}
		// Everything deleted is older than the oldest kept full.
		oldest, oldestID := all[first], ids[first]
		for _, ref := range ret.DeleteLogs {
			if ref.Chain > oldestID {
				t.Fatalf("seed %d: %v deleted, after the oldest kept full's chain %d", seed, ref, oldestID)
			}
			if ref.Chain == oldestID && oldest.LastLSN.Less(chains[ref.Chain-1].Logs[ref.Number-1].LastLSN) {
				t.Fatalf("seed %d: %v deleted though it ends after the oldest kept full", seed, ref)
			}
		}
		for _, id := range ret.DeleteChains {
			if id >= oldestID {
				t.Fatalf("seed %d: chain %d deleted, not before the oldest kept full's chain %d", seed, id, oldestID)
			}
		}
	}
}

func TestRetainNothingVerified(t *testing.T) {
	c := genChain(rand.New(rand.NewPCG(5, 5)), 1, 5, 0)
	c.Fulls[0].Verified = false
	if r := Retain([]Chain{c}, nil); len(r.DeleteLogs) != 0 || len(r.DeleteChains) != 0 {
		t.Fatalf("%+v", r)
	}
}
