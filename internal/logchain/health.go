package logchain

import (
	"fmt"
	"time"
)

// Health is what status says of a database's log chain.
type Health struct {
	// ProvenTo is the latest instant the database is proven restorable to
	// (Chain.ProvenTo); zero when nothing is.
	ProvenTo time.Time
	// Red: the recovery point objective is missed, or the chain cannot
	// reach now; Reasons say why.
	Red     bool
	Reasons []string
	// Broken is the break of the current chain, when it ended and no new
	// chain started yet.
	Broken *Break
	// Gaps after the newest verified full: the points after them are not
	// reachable until a full backup taken after the hole is verified.
	Gaps []Gap
}

// HealthOf judges the database's current chain (the newest; nil when it
// has none) at now against rpo: RED when now - ProvenTo exceeds rpo, when
// the chain ended without a new one, or when a hole lies after its newest
// verified full (a foreign log backup not adopted keeps it RED until the
// next full backup is verified).
func HealthOf(current *Chain, now time.Time, rpo time.Duration) Health {
	var h Health
	if current == nil {
		h.Red = true
		h.Reasons = append(h.Reasons, "no log chain yet: it starts with the next verified full backup")
		return h
	}
	if t, ok := current.ProvenTo(); ok {
		h.ProvenTo = t
	}
	if current.Break != nil {
		h.Broken = current.Break
		h.Red = true
		h.Reasons = append(h.Reasons, fmt.Sprintf("log chain %d broke (%s: %s) at %s: a new chain starts with the next full backup",
			current.ID, current.Break.Reason, current.Break.Detail, current.Break.At.UTC().Format(time.RFC3339)))
	}
	if f, ok := newestVerified(current); ok {
		h.Gaps = current.GapsAfter(f)
	} else {
		h.Gaps = current.Gaps()
	}
	for _, g := range h.Gaps {
		h.Red = true
		h.Reasons = append(h.Reasons, g.String())
	}
	switch {
	case h.ProvenTo.IsZero():
		h.Red = true
		h.Reasons = append(h.Reasons, fmt.Sprintf("log chain %d is proven to no point yet: it needs a verified full backup", current.ID))
	case now.Sub(h.ProvenTo) > rpo:
		h.Red = true
		h.Reasons = append(h.Reasons, fmt.Sprintf("proven to %s, %s ago, beyond the rpo of %s", h.ProvenTo.UTC().Format(time.RFC3339),
			now.Sub(h.ProvenTo).Round(time.Second), rpo))
	}
	return h
}

// newestVerified is the chain's newest verified full.
func newestVerified(c *Chain) (Full, bool) {
	for i := len(c.Fulls) - 1; i >= 0; i-- {
		if c.Fulls[i].Verified {
			return c.Fulls[i], true
		}
	}
	return Full{}, false
}

// Unproven is the oldest log backup after the chain's newest verified full
// (the logs a proof restores) that finished more than lag before now and
// is not proven yet; nil when there is none. Logs after a hole are left to
// the hole's own reason: no proof can reach them.
func (c *Chain) Unproven(now time.Time, lag time.Duration) *Log {
	f, ok := newestVerified(c)
	if !ok {
		return nil
	}
	logs, _ := c.Restorable(f)
	for i, l := range logs {
		if l.Proven == nil {
			if now.Sub(l.Finish) > lag {
				return &logs[i]
			}
			return nil
		}
	}
	return nil
}
