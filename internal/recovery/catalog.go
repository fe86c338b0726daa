// Package recovery is the restore plan of a database to a point in time or
// to the newest point its backups reach: which verified full backup, which
// log backups after it, up to where (STOPAT), from which backup servers. It
// decides from the manifests and the log chain records of every reachable
// backup server (read by the caller) and is pure: no I/O, no clock.
//
// The SQL Server facts it relies on are package logchain's: after a full
// the copy stands at the full's LastLSN, logs apply in order without a gap,
// and a log backup that started at or after an instant holds every record
// logged before it. A point-in-time restore is "the latest transaction
// commit that occurred at or before the datetime value" given as STOPAT
// ("Restore a SQL Server Database to a Point in Time (Full Recovery
// Model)",
// https://learn.microsoft.com/sql/relational-databases/backup-restore/restore-a-sql-server-database-to-a-point-in-time-full-recovery-model).
package recovery

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/logchain"
)

// Server is what one reachable backup server holds of the database: its
// manifests and chain records as read, each authenticated by the reader,
// and the drills of its trusted drill record (nil: none, or unreadable).
type Server struct {
	Name      string
	Manifests []*catalog.Manifest
	Chains    []*catalog.ChainRecord
	Drills    []catalog.DrillResult
}

// Set is a full backup set as the reachable servers know it together.
type Set struct {
	Sequence          int64
	GUID              string
	FirstLSN, LastLSN logchain.LSN
	Finish            time.Time // the instant its BACKUP finished (UTC)
	// Verified: a trusted manifest on some reachable server says so; a
	// copy's manifest on another server may lag behind (it missed the
	// update), which does not unmake it.
	Verified   bool
	VerifiedOn []string
	// Holders are the reachable servers a trusted manifest names as
	// holding every stripe of the set (its servers), in the order of the
	// servers given to Build.
	Holders []string
	// Manifest is the most advanced trusted copy of its manifest (its
	// stripes, options, header).
	Manifest *catalog.Manifest
	// Base is a differential's base (nil for a full).
	Base *catalog.DiffBase
}

// Chain is one log chain as the reachable servers hold it together, with
// what the model leaves out that a restore needs.
type Chain struct {
	logchain.Chain
	// GUIDs and Offsets are each log backup's backup set GUID and the
	// source's offset from UTC its dates were reported with, by number;
	// Versions the SQL Server build that wrote it, where recorded.
	GUIDs    map[int64]string
	Offsets  map[int64]int
	Versions map[int64]string
}

// Catalog is every backup a restore of the database may use.
type Catalog struct {
	// Servers are the reachable servers, in the order given.
	Servers []string
	Sets    []Set   // full backups, newest first (Finish, then sequence)
	Diffs   []Set   // differential backups, newest first
	Chains  []Chain // by ID
	// Ignored names what was read and not used: untrusted manifests and
	// records, chains with a part missing.
	Ignored []string
	// Drills are the drills the servers recorded, each once, oldest
	// first: what a restore's time is predicted from (what they measured).
	Drills []catalog.DrillResult
}

// Build merges what every reachable server holds. Only trusted manifests
// and records count; failed, cancelled and pending sets never restore.
func Build(servers []Server) Catalog {
	var c Catalog
	for _, s := range servers {
		c.Servers = append(c.Servers, s.Name)
	}
	byGUID := map[string]*Set{}
	var order []string
	for _, s := range servers {
		for _, m := range s.Manifests {
			if !m.Trusted() {
				c.Ignored = append(c.Ignored, fmt.Sprintf("manifest %s on %s is not trusted: %s", m.FileName(), s.Name, m.Auth.Why()))
				continue
			}
			h := m.Header
			if h == nil || h.BackupSetGUID == "" || !logchain.LSN(h.LastLSN).Valid() || m.State.Rank() < catalog.StateWritten.Rank() {
				continue // failed, cancelled, pending, or no header: nothing to restore
			}
			key := strings.ToUpper(h.BackupSetGUID)
			set := byGUID[key]
			if set == nil {
				set = &Set{Sequence: m.Sequence, GUID: h.BackupSetGUID, FirstLSN: logchain.LSN(h.FirstLSN), LastLSN: logchain.LSN(h.LastLSN),
					Finish: m.TakenAt(), Manifest: m, Base: m.Differential}
				byGUID[key] = set
				order = append(order, key)
			}
			if m.State.Rank() > set.Manifest.State.Rank() {
				set.Manifest = m
			}
			if m.State == catalog.StateVerified {
				set.Verified = true
				set.VerifiedOn = appendOnce(set.VerifiedOn, s.Name)
			}
			for _, h := range m.Servers {
				set.Holders = appendOnce(set.Holders, h)
			}
		}
	}
	for _, k := range order {
		set := byGUID[k]
		set.Holders = reachable(set.Holders, c.Servers)
		if set.Base != nil {
			c.Diffs = append(c.Diffs, *set) // never a full: it restores only on top of its base
		} else {
			c.Sets = append(c.Sets, *set)
		}
	}
	newestFirst(c.Sets)
	newestFirst(c.Diffs)
	c.Chains, c.Ignored = buildChains(servers, c.Sets, c.Servers, c.Ignored)
	seen := map[[2]string]bool{}
	for _, s := range servers {
		for _, d := range s.Drills {
			if k := [2]string{d.WorkflowID, d.RunID}; !seen[k] {
				seen[k] = true
				c.Drills = append(c.Drills, d)
			}
		}
	}
	sort.SliceStable(c.Drills, func(i, j int) bool { return c.Drills[i].At.Before(c.Drills[j].At) })
	return c
}

// LogBytes are the file bytes of logs first..last of chain, when every
// one is held.
func (c Catalog) LogBytes(chain, first, last int64) (int64, bool) {
	for _, ch := range c.Chains {
		if ch.ID != chain {
			continue
		}
		var n int64
		for i := first; i <= last; i++ {
			j := slices.IndexFunc(ch.Logs, func(l logchain.Log) bool { return l.Number == i })
			if j < 0 {
				return 0, false
			}
			for _, f := range ch.Logs[j].Files {
				n += f.Size
			}
		}
		return n, n > 0
	}
	return 0, false
}

// newestFirst orders sets by their finish, then their number, newest first.
func newestFirst(sets []Set) {
	sort.SliceStable(sets, func(i, j int) bool {
		a, b := sets[i], sets[j]
		if !a.Finish.Equal(b.Finish) {
			return a.Finish.After(b.Finish)
		}
		return a.Sequence > b.Sequence
	})
}

// buildChains assembles each chain from its trusted parts on every server,
// a part both servers hold merged as they know it together.
func buildChains(servers []Server, sets []Set, reachableServers, ignored []string) ([]Chain, []string) {
	type key struct {
		chain int64
		part  int
	}
	copies := map[key][]*catalog.ChainRecord{}
	for _, s := range servers {
		for _, r := range s.Chains {
			if !r.Trusted() {
				ignored = append(ignored, fmt.Sprintf("log chain record %s on %s is not trusted: %s", r.FileName(), s.Name, r.Auth.Why()))
				continue
			}
			k := key{r.Chain, r.Part}
			copies[k] = append(copies[k], r)
		}
	}
	parts := map[int64][]*catalog.ChainRecord{}
	for k, rs := range copies {
		parts[k.chain] = append(parts[k.chain], catalog.MergeChainPart(rs))
	}
	verified := map[string]bool{}
	for _, s := range sets {
		if s.Verified {
			verified[s.GUID], verified[strings.ToUpper(s.GUID)], verified[strings.ToLower(s.GUID)] = true, true, true
		}
	}
	ids := make([]int64, 0, len(parts))
	for id := range parts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []Chain
	for _, id := range ids {
		ch, err := catalog.AssembleChain(parts[id], verified)
		if err != nil {
			ignored = append(ignored, fmt.Sprintf("log chain %d is not used: %v", id, err))
			continue
		}
		c := Chain{Chain: ch, GUIDs: map[int64]string{}, Offsets: catalog.LogOffsets(parts[id]), Versions: catalog.LogVersions(parts[id])}
		for _, p := range parts[id] {
			for _, l := range p.Logs {
				c.GUIDs[l.Number] = l.BackupSetGUID
			}
		}
		for i := range c.Logs {
			c.Logs[i].Servers = reachable(c.Logs[i].Servers, reachableServers)
		}
		out = append(out, c)
	}
	return out, ignored
}

// reachable are the servers of have that are reachable, in the order of
// the reachable list.
func reachable(have, servers []string) []string {
	var out []string
	for _, s := range servers {
		if slices.Contains(have, s) {
			out = append(out, s)
		}
	}
	return out
}

func appendOnce(ss []string, s string) []string {
	if slices.Contains(ss, s) {
		return ss
	}
	return append(ss, s)
}
