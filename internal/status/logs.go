package status

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/logchain"
)

// LogObjectives are a database's log backup settings status judges it by:
// log_backup.every (0: no log backups), log_proof and log_proof_lag.
type LogObjectives struct {
	Every     Duration `json:"log_backup_every_seconds,omitempty"`
	ProofMode string   `json:"log_proof,omitempty"`
	ProofLag  Duration `json:"log_proof_lag_seconds,omitempty"`
}

// FoundChain is one log chain record part as read from one backup server.
type FoundChain struct {
	Server string
	Record *catalog.ChainRecord
}

// LogChain is what status says of a database's log chain, from the
// authenticated chain records on the backup servers.
type LogChain struct {
	Chain int64 `json:"chain,omitempty"` // the newest chain; 0: none yet
	// ProvenTo is the latest instant the database is proven restorable to
	// (logchain ProvenTo: a verified full and the unbroken run of log
	// backups after it applied on the verification instance); zero when
	// nothing is. ProvenAge is now - ProvenTo: what a restore would lose.
	ProvenTo  time.Time `json:"proven_to,omitzero"`
	ProvenAge Duration  `json:"proven_age_seconds,omitempty"`
	// Logs is how many log backups the chain holds; LastLog the newest.
	Logs    int   `json:"logs"`
	LastLog int64 `json:"last_log,omitempty"`
	// Unproven is the oldest log backup unproven past log_proof_lag.
	Unproven *UnprovenLog `json:"unproven,omitempty"`
	// Broken is the chain's break (it ended; a full starts the next);
	// Gaps are the holes after its newest verified full, named.
	Broken *logchain.Break `json:"broken,omitempty"`
	Gaps   []string        `json:"gaps,omitempty"`
	// Unauthenticated counts record parts no worker's signature verifies:
	// they count for nothing.
	Unauthenticated int `json:"unauthenticated_records,omitempty"`
}

// UnprovenLog is a log backup waiting for its proof longer than allowed.
type UnprovenLog struct {
	Number   int64     `json:"number"`
	Finished time.Time `json:"finished"`
	Waiting  Duration  `json:"waiting_seconds"`
}

// BrokenOrGap reports whether the chain cannot reach the present: it
// ended, or a hole lies after its newest verified full.
func (l *LogChain) BrokenOrGap() bool { return l != nil && (l.Broken != nil || len(l.Gaps) > 0) }

// judgeLogs sets d.LogChain from the database's chain records (every
// server's, any chain) and adds the reasons it is out of its objectives:
// proven to a point older than its rpo, a log unproven past
// log_proof_lag, a broken chain or a hole. verified are the backup set
// GUIDs (upper case) of its trusted verified sets.
func judgeLogs(now time.Time, d *Database, found []FoundChain, verified map[string]bool) {
	lc := &LogChain{}
	d.LogChain = lc
	var trusted []*catalog.ChainRecord
	for _, f := range found {
		if f.Record.Trusted() {
			trusted = append(trusted, f.Record)
		} else {
			lc.Unauthenticated++
		}
	}
	parts := newestChain(trusted)
	var current *logchain.Chain
	if len(parts) > 0 {
		c, err := catalog.AssembleChain(parts, verifiedGUIDs(parts, verified))
		if err != nil {
			d.Reasons = append(d.Reasons, fmt.Sprintf("log chain %d cannot be judged: %v", parts[0].Chain, err))
			return
		}
		current = &c
		lc.Chain, lc.Logs = c.ID, len(c.Logs)
		if n := len(c.Logs); n > 0 {
			lc.LastLog = c.Logs[n-1].Number
		}
	}
	h := logchain.HealthOf(current, now, time.Duration(d.RPO))
	lc.ProvenTo, lc.Broken = h.ProvenTo, h.Broken
	if !h.ProvenTo.IsZero() && now.After(h.ProvenTo) {
		lc.ProvenAge = Duration(now.Sub(h.ProvenTo))
	}
	for _, g := range h.Gaps {
		lc.Gaps = append(lc.Gaps, g.String())
	}
	d.Reasons = append(d.Reasons, h.Reasons...)
	if current == nil {
		return
	}
	lag := time.Duration(d.ProofLag)
	if l := current.Unproven(now, lag); l != nil {
		lc.Unproven = &UnprovenLog{Number: l.Number, Finished: l.Finish, Waiting: Duration(now.Sub(l.Finish))}
		d.Reasons = append(d.Reasons, fmt.Sprintf("log %d of chain %d finished %s, %s ago, and is not proven yet: beyond the log_proof_lag of %s (log_proof %s)",
			l.Number, current.ID, l.Finish.UTC().Format(time.RFC3339), lc.Unproven.Waiting, d.ProofLag, d.ProofMode))
	}
}

// verifiedGUIDs maps the spelling each full of parts records to whether
// its set is verified (GUIDs compare without case).
func verifiedGUIDs(parts []*catalog.ChainRecord, verified map[string]bool) map[string]bool {
	out := map[string]bool{}
	for _, p := range parts {
		for _, f := range p.Fulls {
			if verified[strings.ToUpper(f.BackupSetGUID)] {
				out[f.BackupSetGUID] = true
			}
		}
	}
	return out
}

// newestChain are the parts of the newest chain among records, each part
// merged over the servers that hold it (catalog.MergeChainPart).
func newestChain(records []*catalog.ChainRecord) []*catalog.ChainRecord {
	var id int64
	for _, r := range records {
		id = max(id, r.Chain)
	}
	byPart := map[int][]*catalog.ChainRecord{}
	for _, r := range records {
		if r.Chain == id {
			byPart[r.Part] = append(byPart[r.Part], r)
		}
	}
	out := make([]*catalog.ChainRecord, 0, len(byPart))
	for _, rs := range byPart {
		out = append(out, catalog.MergeChainPart(rs))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Part < out[j].Part })
	return out
}

// readChains reads the chain records of the databases with log backups
// from one backup server.
func readChains(ctx context.Context, fsys catalog.FS, keys *catalog.Keys, server string, dbs []Target) ([]FoundChain, map[string]string) {
	var out []FoundChain
	broken := map[string]string{}
	for _, t := range dbs {
		if t.Every <= 0 {
			continue
		}
		l, err := catalog.ListChains(ctx, fsys, keys, catalog.Of(t.Instance, t.Database))
		if err != nil {
			broken[t.Instance+"/"+t.Database] = err.Error()
			continue
		}
		for _, r := range l.Records {
			out = append(out, FoundChain{Server: server, Record: r})
		}
		for name, err := range l.Broken {
			broken[name] = err.Error()
		}
	}
	return out, broken
}
