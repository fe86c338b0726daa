package catalog

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Retention is the deletion policy of one database's backup sets.
type Retention struct {
	// KeepVerified is how many verified sets to keep per server. The newest
	// verified set is kept regardless (see Decide), so 0 behaves like 1.
	KeepVerified int
	// DeleteFailedAfter: failed sets are deleted once their last state change
	// is this old (0: at the next retention run).
	DeleteFailedAfter time.Duration
	// DeleteAbandonedAfter: sets that stopped before verified without being
	// marked failed (written/copied/restored/checked) are deleted once their
	// last state change is this old. Must be longer than the longest cycle,
	// or a running cycle would lose its set.
	DeleteAbandonedAfter time.Duration
	// DeleteOrphansAfter: stripe files without a manifest and leftover
	// temporary files are deleted once their modification time is this old
	// (0: DeleteAbandonedAfter). A BACKUP in progress keeps touching its
	// files, so their age stays near zero.
	DeleteOrphansAfter time.Duration
}

// Validate checks the policy.
func (r Retention) Validate() error {
	var errs []error
	if r.KeepVerified < 0 {
		errs = append(errs, fmt.Errorf("keep_verified = %d must be 0 or more", r.KeepVerified))
	}
	if r.DeleteFailedAfter < 0 {
		errs = append(errs, fmt.Errorf("delete_failed_after = %s must not be negative", r.DeleteFailedAfter))
	}
	if r.DeleteAbandonedAfter <= 0 {
		errs = append(errs, fmt.Errorf("delete_abandoned_after = %s must be positive and longer than the longest backup cycle (e.g. 72h)", r.DeleteAbandonedAfter))
	}
	if r.DeleteOrphansAfter < 0 {
		errs = append(errs, fmt.Errorf("delete_orphans_after = %s must not be negative", r.DeleteOrphansAfter))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	return nil
}

// ServerManifest is a manifest as found on one backup server.
type ServerManifest struct {
	Server   string
	Manifest *Manifest
	// Database groups sets for the newest-verified and KeepVerified rules:
	// "" is the manifest's own (instance, database); a caller that lists one
	// database under several spellings (DB.Also) gives its sets one value.
	Database string
}

// group is the database sm's set counts for.
func (sm ServerManifest) group() string {
	if sm.Database != "" {
		return sm.Database
	}
	return sm.Manifest.SourceInstance + "\x00" + sm.Manifest.Database
}

// SetKey identifies a backup set of one (instance, database).
type SetKey struct {
	Instance string // raw configuration name; for orphans, the file-name form (tsql.InstancePart)
	Database string // raw name; for orphans, the file-name form (tsql.FileNamePart)
	Sequence int64
}

// Reason says why a set or file is deleted.
type Reason string

const (
	ReasonSuperseded Reason = "superseded" // verified, but more than KeepVerified newer verified sets exist on the server
	ReasonFailed     Reason = "failed"     // failed or cancelled, older than DeleteFailedAfter
	ReasonAbandoned  Reason = "abandoned"  // never verified nor failed, older than DeleteAbandonedAfter
	ReasonOrphan     Reason = "orphan"     // files without a manifest, or temporary leftovers, older than DeleteOrphansAfter
)

// Deletion is one set (or group of orphan files) to delete on one server.
// Files are base names in the server's backup directory, stripes first and
// the manifest last. (The product removes the manifest first, so that no
// manifest calls a half-deleted set verified; a deletion interrupted
// half-way leaves orphan stripes, which the orphan rule removes.)
type Deletion struct {
	Server string
	Set    SetKey
	Files  []string
	Reason Reason
	Detail string // human-readable: state, age, rank
	// differential: the set is a differential (deleted before the fulls
	// of its database on the server).
	differential bool
}

// dbSeq is a set as file names identify it: owner is tsql's "<inst>@<db>"
// in the set's own naming.
type dbSeq struct {
	owner string
	seq   int64
}

func keyOf(m *Manifest) dbSeq { return dbSeq{m.Names().Owner(), m.Sequence} }

// Decide applies the policy. manifests are the decoded manifests of every
// server (one entry per server holding the set), files the directory listing
// per server (nil for a server means "not listed": no orphan detection and
// only manifest-named files for its sets), inFlight the sets of running
// cycles, which are never touched.
//
// Everything is keyed by (instance, database): a database of the same name
// on another instance is another database. "Newest" is the instant a set
// was taken as its manifest records it (Manifest.TakenAt), never the
// sequence number alone: a number handed out again after a rollback must
// not make an old set look new. And since a source's clock can still jump
// back between two sets in ways no manifest tells (a clock corrected, a
// zone changed while manifests recorded no offset), a verified set that is
// newer than a kept set both in sequence and in when it was verified (the
// worker's clock, Manifest.VerifiedAt) is kept as well.
//
// Rules:
//   - per server and (instance, database), verified full sets beyond the
//     newest KeepVerified are deleted (ReasonSuperseded);
//   - a verified differential is kept only while its base is the newest
//     verified full on its server, and only the newest KeepVerified of
//     that base's; every other goes (ReasonSuperseded), before the fulls
//     of its database, so that none is left without its base;
//   - failed and cancelled sets older than DeleteFailedAfter are deleted;
//   - sets in written/copied/restored/checked older than DeleteAbandonedAfter
//     are deleted;
//   - NEVER deleted: the newest verified full of an (instance, database)
//     (on every server holding it), and its newest verified full on each server,
//     whatever KeepVerified and however old; nor a verified set of a higher
//     sequence number, verified later, than either of those;
//   - stripe files whose set has no manifest file on that server, and
//     temporary files, older than DeleteOrphansAfter are deleted. Names
//     numbered above tsql.MaxSequence are no cycle's and never deleted. A manifest
//     file that exists but cannot be decoded still protects its set: a broken
//     manifest is for a human to look at, not a reason to delete.
//
// Only trusted manifests (Manifest.Trusted: signed by a worker, or read
// with no manifest key configured) count for the rules above: an
// untrusted one claiming a newer verified set protects nothing and
// supersedes nothing, and one claiming its set failed or abandoned deletes
// nothing. An untrusted manifest's set is kept (it may be a set written
// before manifest keys were configured) until its number is below those of
// the newest KeepVerified trusted verified sets on its server and of the
// newest trusted verified set of the database: numbers are handed out
// upwards (never again), so such a set was written before all of them and
// would be superseded if it were trusted (ReasonSuperseded). That decision
// rests on the trusted sets and on the set's file name alone, never on
// what the untrusted manifest says.
func Decide(r Retention, manifests []ServerManifest, files map[string][]FileInfo, now time.Time, inFlight ...SetKey) ([]Deletion, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	orphanAge := r.DeleteOrphansAfter
	if orphanAge == 0 {
		orphanAge = r.DeleteAbandonedAfter
	}
	busy := map[dbSeq]bool{}
	for _, k := range inFlight {
		for _, n := range tsql.AllNamesOf(k.Instance, k.Database) {
			busy[dbSeq{n.Owner(), k.Sequence}] = true
		}
	}

	// The protected sets: newest verified full per (instance, database),
	// and per (server, instance, database). Differentials are judged by
	// their base (below).
	newestGlobal := map[string]*Manifest{}
	newestOnServer := map[[2]string]*Manifest{}
	for _, sm := range manifests {
		m := sm.Manifest
		if m == nil || !m.Verified() || !m.Trusted() || m.IsDifferential() {
			continue
		}
		owner := sm.group()
		if b := newestGlobal[owner]; b == nil || m.Newer(b) {
			newestGlobal[owner] = m
		}
		k := [2]string{sm.Server, owner}
		if b := newestOnServer[k]; b == nil || m.Newer(b) {
			newestOnServer[k] = m
		}
	}
	isNewest := func(b, m *Manifest) bool { return b != nil && b.Sequence == m.Sequence }
	// after: m followed b in sequence and in verification: whatever the
	// dates SQL Server reported say, it is no older than b.
	after := func(b, m *Manifest) bool {
		return b != nil && m.Sequence > b.Sequence && m.VerifiedAt().After(b.VerifiedAt())
	}
	protected := func(server, owner string, m *Manifest) bool {
		g, s := newestGlobal[owner], newestOnServer[[2]string{server, owner}]
		return m.Verified() && m.Trusted() && !m.IsDifferential() && (isNewest(g, m) || isNewest(s, m) || after(g, m) || after(s, m))
	}

	// Verified full sets per (server, instance, database), newest first,
	// for KeepVerified; the verified differentials of each base per
	// server, newest first.
	rank := map[[2]string][]*Manifest{}
	diffRank := map[[2]string][]*Manifest{}
	for _, sm := range manifests {
		m := sm.Manifest
		if m == nil || !m.Verified() || !m.Trusted() {
			continue
		}
		k := [2]string{sm.Server, sm.group()}
		if m.IsDifferential() {
			k[1] += "\x00" + strconv.FormatInt(m.Differential.Sequence, 10)
			diffRank[k] = append(diffRank[k], m)
			continue
		}
		rank[k] = append(rank[k], m)
	}
	for _, r := range []map[[2]string][]*Manifest{rank, diffRank} {
		for k := range r {
			sort.SliceStable(r[k], func(i, j int) bool { return r[k][i].Newer(r[k][j]) })
		}
	}
	// A verified differential counts only on top of its base: it is kept
	// while its base is the newest verified full on its server (the one a
	// restore from there starts with; "Differential Backups (SQL
	// Server)": only the most recent differential is restored after its
	// base), the newest KeepVerified of them, and goes with or before an
	// older base.
	diffKept := func(server, group string, m *Manifest) (string, bool) {
		base := newestOnServer[[2]string{server, group}]
		if base == nil || base.Sequence != m.Differential.Sequence {
			newest := "none"
			if base != nil {
				newest = fmt.Sprintf("set %d", base.Sequence)
			}
			return fmt.Sprintf("differential set %d is on set %d, not on the newest verified full on %s (%s)", m.Sequence,
				m.Differential.Sequence, server, newest), false
		}
		k := [2]string{server, group + "\x00" + strconv.FormatInt(m.Differential.Sequence, 10)}
		if pos := indexOf(diffRank[k], m); pos >= max(r.KeepVerified, 1) {
			return fmt.Sprintf("differential set %d is number %d of set %d's on %s, keeping the newest %d", m.Sequence, pos+1,
				m.Differential.Sequence, server, max(r.KeepVerified, 1)), false
		}
		return "", true
	}

	// Files on each server, parsed once and grouped by set.
	stripesOf := map[string]map[dbSeq][]FileInfo{}
	hasManifest := map[string]map[dbSeq]bool{}
	for server, fl := range files {
		stripesOf[server] = map[dbSeq][]FileInfo{}
		hasManifest[server] = map[dbSeq]bool{}
		for _, f := range fl {
			if p, ok := tsql.ParseManifestFileName(f.Name); ok {
				hasManifest[server][dbSeq{p.Owner(), p.Sequence}] = true
			} else if p, ok := tsql.ParseStripeFileName(f.Name); ok {
				k := dbSeq{p.Owner(), p.Sequence}
				stripesOf[server][k] = append(stripesOf[server][k], f)
			}
		}
	}
	for _, sm := range manifests {
		if sm.Manifest == nil {
			continue
		}
		if hasManifest[sm.Server] == nil {
			hasManifest[sm.Server] = map[dbSeq]bool{}
		}
		hasManifest[sm.Server][keyOf(sm.Manifest)] = true
	}

	var out []Deletion
	for _, sm := range manifests {
		m := sm.Manifest
		if m == nil {
			continue
		}
		key, group := keyOf(m), sm.group()
		if busy[key] {
			continue
		}
		if !m.Trusted() {
			if detail, ok := untrustedSuperseded(r, m, newestGlobal[group], rank[[2]string{sm.Server, group}], sm.Server); ok {
				out = append(out, Deletion{Server: sm.Server, Set: SetKey{m.SourceInstance, m.Database, m.Sequence},
					Reason: ReasonSuperseded, Detail: detail, Files: setFiles(m, stripesOf[sm.Server][key])})
			}
			continue
		}
		if protected(sm.Server, group, m) {
			continue
		}
		age := now.Sub(m.UpdatedAt)
		var reason Reason
		var detail string
		switch {
		case m.Verified() && m.IsDifferential():
			why, keep := diffKept(sm.Server, group, m)
			if keep {
				continue
			}
			reason, detail = ReasonSuperseded, why
		case m.Verified():
			pos := indexOf(rank[[2]string{sm.Server, group}], m)
			if pos < r.KeepVerified {
				continue
			}
			reason, detail = ReasonSuperseded, fmt.Sprintf("verified set %d is number %d on %s, keeping the newest %d", m.Sequence, pos+1, sm.Server, max(r.KeepVerified, 1))
		case m.State == StateFailed || m.State == StateCancelled:
			if age < r.DeleteFailedAfter {
				continue
			}
			reason, detail = ReasonFailed, fmt.Sprintf("%s %s ago", m.State, age.Round(time.Second))
			if m.Failure != nil {
				detail = fmt.Sprintf("failed at %s %s ago (%s): %s", m.Failure.Step, age.Round(time.Second), m.Failure.Evidence, m.Failure.Reason)
			}
		default:
			if age < r.DeleteAbandonedAfter {
				continue
			}
			reason, detail = ReasonAbandoned, fmt.Sprintf("stuck in %s for %s", m.State, age.Round(time.Second))
		}
		out = append(out, Deletion{
			Server: sm.Server, Set: SetKey{m.SourceInstance, m.Database, m.Sequence}, Reason: reason, Detail: detail,
			Files: setFiles(m, stripesOf[sm.Server][key]), differential: m.IsDifferential(),
		})
	}

	// Orphans: stripe files without a manifest file, and temporary files.
	for server, fl := range files {
		groups := map[dbSeq][]string{}
		for _, f := range fl {
			if !IsTempName(f.Name) || now.Sub(f.ModTime) < orphanAge {
				continue
			}
			inner := strings.TrimPrefix(f.Name[:strings.Index(f.Name, tempMarker)], ".")
			if _, wide := tsql.WideSequence(inner); wide {
				continue // numbered above tsql.MaxSequence: no cycle wrote it
			}
			var k dbSeq
			if p, ok := tsql.ParseManifestFileName(inner); ok {
				k = dbSeq{p.Owner(), p.Sequence}
			}
			if !busy[k] {
				groups[k] = append(groups[k], f.Name)
			}
		}
		for k, stripes := range stripesOf[server] {
			if hasManifest[server][k] || busy[k] {
				continue
			}
			for _, f := range stripes {
				if now.Sub(f.ModTime) >= orphanAge {
					groups[k] = append(groups[k], f.Name)
				}
			}
		}
		for k, names := range groups {
			sort.Strings(names)
			inst, db, _ := strings.Cut(k.owner, "@")
			out = append(out, Deletion{
				Server: server, Set: SetKey{inst, db, k.seq}, Files: names, Reason: ReasonOrphan,
				Detail: fmt.Sprintf("%d file(s) without a manifest, untouched for at least %s", len(names), orphanAge),
			})
		}
	}

	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Server != b.Server {
			return a.Server < b.Server
		}
		if a.Set.Instance != b.Set.Instance {
			return a.Set.Instance < b.Set.Instance
		}
		if a.Set.Database != b.Set.Database {
			return a.Set.Database < b.Set.Database
		}
		if a.differential != b.differential {
			// A differential goes before any full of its database: never
			// one left whose base is gone.
			return a.differential
		}
		if a.Set.Sequence != b.Set.Sequence {
			return a.Set.Sequence < b.Set.Sequence
		}
		return a.Reason < b.Reason
	})
	return out, nil
}

// setFiles are the files of m's set on a server: the stripes it lists and
// those found under its name (also partial stripes it does not list), then
// the manifest. Every name is the set's own (Validate, keyOf).
func setFiles(m *Manifest, found []FileInfo) []string {
	names := map[string]bool{}
	for _, s := range m.Stripes {
		names[s.Name] = true
	}
	for _, f := range found {
		names[f.Name] = true
	}
	return append(sorted(names), m.FileName())
}

// untrustedSuperseded says whether the set of untrusted manifest m on
// server goes (see Decide): its number is below those of the newest
// trusted verified set of the database (newest) and of the newest
// KeepVerified trusted verified sets on the server (ranked, newest first).
func untrustedSuperseded(r Retention, m, newest *Manifest, ranked []*Manifest, server string) (string, bool) {
	keep := max(r.KeepVerified, 1)
	if newest == nil || m.Sequence >= newest.Sequence || len(ranked) < keep {
		return "", false
	}
	for _, k := range ranked[:keep] {
		if m.Sequence >= k.Sequence {
			return "", false
		}
	}
	return fmt.Sprintf("set %d's manifest is not authenticated (%s), and its number is below those of the newest %d authenticated verified sets on %s",
		m.Sequence, m.Auth, keep, server), true
}

func indexOf(s []*Manifest, m *Manifest) int {
	for i, x := range s {
		if x == m {
			return i
		}
	}
	return len(s)
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
