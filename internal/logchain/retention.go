package logchain

import (
	"fmt"
	"slices"
	"time"
)

// LogRef names one log backup of a database: its chain and number.
type LogRef struct {
	Chain  int64
	Number int64
}

func (r LogRef) String() string { return fmt.Sprintf("chain %d log %d", r.Chain, r.Number) }

// Retention is what the chain-aware retention rule allows and requires.
type Retention struct {
	// DeleteLogs may be deleted: no point from the oldest kept verified
	// full to now needs them.
	DeleteLogs []LogRef
	// DeleteChains are chains none of whose logs or fulls is needed any
	// more: their records may go once their logs are gone.
	DeleteChains []int64
	// KeepFulls are the fulls (BackupSetGUID) the chains need kept whatever
	// the set retention says: the newest verified full, the base every
	// point after it is reached from.
	KeepFulls []string
	// From is the oldest point the kept backups reach (the oldest kept
	// verified full's finish); zero when nothing is kept.
	From time.Time
}

// Retain is the chain-aware retention rule. kept are the verified fulls
// (BackupSetGUID) the set retention keeps (retention.keep_verified per
// server). Every point from the oldest of them to now must stay reachable:
// its chain's logs from the one that contains its LastLSN on, and every log
// of every later chain, are kept; a log that ends at or before that full's
// LastLSN, and every log of an earlier chain, may go. The newest verified
// full is always kept, with its chain: when kept names none of the
// verified fulls (a misconfiguration or every kept set lost), the newest
// verified full is the oldest kept. Without any verified full nothing is
// deleted: no chain can be judged unneeded. The rule needs no clock: "now"
// is wherever the newest log ends, and every log after the oldest kept
// full is kept, whatever its time says (a clock set back changes nothing).
func Retain(chains []Chain, kept []string) Retention {
	var r Retention
	type at struct {
		chain int64
		full  Full
	}
	var oldest, newest *at
	for _, c := range chains {
		for _, f := range c.Fulls {
			if !f.Verified {
				continue
			}
			a := &at{c.ID, f}
			if newest == nil || later(a.chain, a.full, newest.chain, newest.full) {
				newest = a
			}
			if slices.Contains(kept, f.BackupSetGUID) && (oldest == nil || later(oldest.chain, oldest.full, a.chain, a.full)) {
				oldest = a
			}
		}
	}
	if newest == nil {
		return r
	}
	if oldest == nil {
		oldest = newest
	}
	r.KeepFulls = []string{newest.full.BackupSetGUID}
	r.From = oldest.full.Finish
	for _, c := range chains {
		needed := false
		switch {
		case c.ID > oldest.chain:
			needed = true
		case c.ID == oldest.chain:
			needed = true
			for _, l := range c.Logs {
				if !oldest.full.LastLSN.Less(l.LastLSN) && len(l.Files) > 0 {
					r.DeleteLogs = append(r.DeleteLogs, LogRef{c.ID, l.Number})
				}
			}
		default:
			for _, l := range c.Logs {
				if len(l.Files) > 0 {
					r.DeleteLogs = append(r.DeleteLogs, LogRef{c.ID, l.Number})
				}
			}
		}
		if !needed {
			r.DeleteChains = append(r.DeleteChains, c.ID)
		}
	}
	return r
}

// later reports whether full a of chain ca comes after full b of chain cb:
// by chain, then by LastLSN within one chain (LSNs of one database only
// grow), then by finish.
func later(ca int64, a Full, cb int64, b Full) bool {
	if ca != cb {
		return ca > cb
	}
	if n := a.LastLSN.Cmp(b.LastLSN); n != 0 {
		return n > 0
	}
	return a.Finish.After(b.Finish)
}
