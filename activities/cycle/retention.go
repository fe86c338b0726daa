package cycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/logchain"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// ApplyRetention deletes old and failed sets of the database per policy on
// every listed server (stripes first, manifest last), never the newest
// verified set and never the set this cycle protects. Then the log chains
// (chainRetention): the full a chain's record restores from is kept, and
// the log backups and records no point from the oldest kept verified full
// on needs go.
func (a *Activities) ApplyRetention(ctx context.Context, in activities.RetentionInput) (activities.RetentionOutput, error) {
	defer a.Cycle.KeepAlive(ctx)()
	d := &a.Cycle
	db, err := d.DatabaseEntry(in.Instance, in.Database, in.Entry)
	if err != nil {
		return activities.RetentionOutput{}, err
	}
	// Protect only ever keeps a set more: it is taken as given.
	if err := d.DatabaseServerList(db, "retention's servers", in.Servers); err != nil {
		return activities.RetentionOutput{}, err
	}
	policy := catalog.Retention{
		KeepVerified: db.Retention.KeepVerified, DeleteFailedAfter: db.Retention.DeleteFailedAfter,
		DeleteAbandonedAfter: max(7*24*time.Hour, 2*db.CopyDeadline),
	}
	var manifests []catalog.ServerManifest
	files := map[string][]catalog.FileInfo{}
	stores := map[string]storage.Storage{}
	defer func() {
		for _, st := range stores {
			st.Close()
		}
	}()
	sets := activities.SetsOf(db)
	keys, err := d.ManifestKeys()
	if err != nil {
		return activities.RetentionOutput{}, err
	}
	for _, s := range in.Servers {
		srv, err := d.Server(s)
		if err != nil {
			return activities.RetentionOutput{}, err
		}
		st, err := d.OpenServer(ctx, srv)
		if err != nil {
			activities.Logger(a.Activities, ctx).Warn("retention skips an unreachable server", zap.String("server", s), zap.Error(err))
			continue
		}
		stores[s] = st
		l, err := catalog.List(ctx, catalog.StorageFS{Storage: st}, keys, &sets)
		if err != nil {
			return activities.RetentionOutput{}, activities.StorageError(s, err)
		}
		for _, m := range l.Manifests {
			// One database, whichever spelling or naming its sets have.
			manifests = append(manifests, catalog.ServerManifest{Server: s, Manifest: m, Database: sets.String()})
		}
		for _, f := range l.Files {
			if p, ok := tsql.ParseStripeFileName(f.Name); ok && sets.OwnsName(p) {
				files[s] = append(files[s], f)
			} else if p, ok := tsql.ParseManifestFileName(f.Name); ok && sets.OwnsName(p) {
				files[s] = append(files[s], f)
			}
		}
	}
	manifests = a.healVerified(ctx, db, manifests, stores)
	dels, err := catalog.Decide(policy, manifests, files, d.Clock(), catalog.SetKey{Instance: db.Instance, Database: db.Name, Sequence: in.Protect})
	if err != nil {
		return activities.RetentionOutput{}, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	chains, err := a.listChains(ctx, db, sets, keys, stores)
	if err != nil {
		return activities.RetentionOutput{}, err
	}
	plan := planChains(manifests, dels, chains)
	dels = slices.DeleteFunc(dels, func(del catalog.Deletion) bool { return plan.protect[del.Server][del.Set.Sequence] })
	var out activities.RetentionOutput
	for _, del := range dels {
		st := stores[del.Server]
		// The manifest goes first: a set is never "verified" while its
		// stripes are half gone. A deletion cut short leaves stripes
		// without a manifest, which the orphan rule removes later.
		files := del.Files
		if n := len(files); n > 0 && del.Reason != catalog.ReasonOrphan {
			files = append([]string{files[n-1]}, files[:n-1]...)
		}
		for _, f := range files {
			if err := st.Remove(ctx, f); err != nil && !errors.Is(err, storage.ErrNotFound) {
				return out, activities.StorageError(del.Server, err)
			}
		}
		out.Deleted = append(out.Deleted, activities.SetRef{Server: del.Server, Sequence: del.Set.Sequence, State: string(del.Reason)})
		activities.Logger(a.Activities, ctx).Info("retention deleted a set", zap.String("db", db.Name), zap.String("server", del.Server),
			zap.Int64("seq", del.Set.Sequence), zap.String("reason", string(del.Reason)), zap.String("detail", del.Detail))
	}
	out.Kept = len(manifests) - len(out.Deleted)
	if err := a.deleteChains(ctx, db, chains, plan, stores, &out); err != nil {
		return out, err
	}
	return out, nil
}

// healVerified finishes a MarkVerified an outage cut short: a set verified
// (with its restore proof) on one server and still copied/restored/checked
// on another holder is marked verified there too, so the newest verified
// set counts on both servers and the other copy is not aged out as
// abandoned. It returns manifests with the healed ones updated.
func (a *Activities) healVerified(ctx context.Context, db *config.Database, manifests []catalog.ServerManifest,
	stores map[string]storage.Storage) []catalog.ServerManifest {
	// By file name: a set's number may repeat under another instance key
	// of the database (an availability group's replicas, catalog.DB).
	proven := map[string]*catalog.Manifest{}
	for _, sm := range manifests {
		m := sm.Manifest
		if m.Verified() && m.Trusted() && m.Proof != nil && m.Header != nil && activities.SameGUID(m.Proof.BackupSetGUID, m.Header.BackupSetGUID) {
			proven[m.FileName()] = m
		}
	}
	out := slices.Clone(manifests)
	for i, sm := range out {
		v := proven[sm.Manifest.FileName()]
		m := sm.Manifest
		if v == nil || !m.Trusted() || m.Verified() || m.State.Terminal() || m.State.Rank() < catalog.StateCopied.Rank() ||
			m.RunID != v.RunID || m.Header == nil || !activities.SameGUID(m.Header.BackupSetGUID, v.Header.BackupSetGUID) {
			continue
		}
		healed := *v
		if err := a.Cycle.SaveManifest(ctx, stores[sm.Server], &healed); err != nil {
			activities.Logger(a.Activities, ctx).Warn("verified state not caught up", zap.String("server", sm.Server), zap.Int64("seq", m.Sequence), zap.Error(err))
			continue
		}
		activities.Logger(a.Activities, ctx).Info("verified state caught up on a server that missed it", zap.String("db", db.Name),
			zap.String("instance", db.Instance), zap.String("server", sm.Server), zap.Int64("seq", m.Sequence))
		out[i].Manifest = &healed
	}
	return out
}

// serverChains is what one backup server holds of the database's chains.
type serverChains struct {
	listing catalog.ChainListing
	// chains are the chains whose every record part is authenticated and
	// assembles, by id.
	chains map[int64]logchain.Chain
	// unjudged are the chains a record of which is not authenticated,
	// cannot be read or does not assemble: nothing they say steers
	// retention.
	unjudged map[int64]string
}

// listChains reads the database's chain records and log files on every
// reachable server.
func (a *Activities) listChains(ctx context.Context, db *config.Database, sets catalog.DB, keys *catalog.Keys,
	stores map[string]storage.Storage) (map[string]*serverChains, error) {
	out := map[string]*serverChains{}
	for s, st := range stores {
		l, err := catalog.ListChains(ctx, catalog.StorageFS{Storage: st}, keys, sets)
		if err != nil {
			return nil, activities.StorageError(s, err)
		}
		sc := &serverChains{listing: l, chains: map[int64]logchain.Chain{}, unjudged: map[int64]string{}}
		parts := map[int64][]*catalog.ChainRecord{}
		for _, r := range l.Records {
			if !r.Trusted() {
				sc.unjudged[r.Chain] = fmt.Sprintf("record %s is not authenticated: %s", r.FileName(), r.Auth.Why())
				continue
			}
			parts[r.Chain] = append(parts[r.Chain], r)
		}
		for name, berr := range l.Broken {
			if p, ok := tsql.ParseChainRecordName(name); ok {
				sc.unjudged[p.Chain] = fmt.Sprintf("record %s cannot be read: %v", name, berr)
			}
		}
		for id, ps := range parts {
			if _, bad := sc.unjudged[id]; bad {
				continue
			}
			// Fulls are marked verified later, from the manifests.
			c, err := catalog.AssembleChain(ps, nil)
			if err != nil {
				sc.unjudged[id] = err.Error()
				continue
			}
			sc.chains[id] = c
		}
		for id, why := range sc.unjudged {
			activities.Logger(a.Activities, ctx).Warn("log chain record not trusted: it keeps and deletes nothing until a signed chain after it goes",
				zap.String("db", db.Name), zap.String("instance", db.Instance), zap.String("server", s), zap.Int64("chain", id), zap.String("why", why))
		}
		out[s] = sc
	}
	return out, nil
}

// chainPlan is what the chain-aware rule decides per server.
type chainPlan struct {
	protect map[string]map[int64]bool // server -> set number kept for a chain
	rules   map[string]logchain.Retention
}

// planChains applies logchain.Retain on each server. Which fulls are
// verified comes from the authenticated manifests; which are kept is what
// the set retention (dels) leaves. Two rules join:
//
//   - The newest verified full any chain's record names is kept, set
//     retention or not: the record is what the proofs and a restore to a
//     point in time read, and a full it does not name is no base for them.
//     While a chain runs without naming a later full, its base stays.
//   - A kept verified full the records do not name still counts for the
//     window: it is placed in the chain one of whose log backups (held)
//     contains its LastLSN, since SQL Server restores that log and the
//     ones after it on top of it ("Apply transaction log backups"), so
//     its chain's logs from there on are kept.
//
// A set is protected on every server that holds it.
func planChains(manifests []catalog.ServerManifest, dels []catalog.Deletion, chains map[string]*serverChains) chainPlan {
	plan := chainPlan{protect: map[string]map[int64]bool{}, rules: map[string]logchain.Retention{}}
	gone := map[string]map[int64]bool{}
	for _, del := range dels {
		if gone[del.Server] == nil {
			gone[del.Server] = map[int64]bool{}
		}
		gone[del.Server][del.Set.Sequence] = true
	}
	verified := map[string]*catalog.Manifest{}
	kept := map[string]bool{}
	for _, sm := range manifests {
		m := sm.Manifest
		// A differential is no full of a chain (its base is, whose logs
		// the chain holds): it keeps no log and protects nothing here.
		if m == nil || !m.Verified() || !m.Trusted() || m.IsDifferential() || m.Header == nil || m.Header.BackupSetGUID == "" {
			continue
		}
		g := strings.ToLower(m.Header.BackupSetGUID)
		verified[g] = m
		if !gone[sm.Server][m.Sequence] {
			kept[g] = true
		}
	}
	protect := map[string]bool{}
	for s, sc := range chains {
		var recorded []logchain.Chain
		named := map[string]bool{}
		for _, c := range sc.chains {
			for i := range c.Fulls {
				g := strings.ToLower(c.Fulls[i].BackupSetGUID)
				c.Fulls[i].BackupSetGUID, c.Fulls[i].Verified = g, verified[g] != nil
				named[g] = true
			}
			recorded = append(recorded, c)
		}
		slices.SortFunc(recorded, func(a, b logchain.Chain) int { return cmp.Compare(a.ID, b.ID) })
		keep := sortedKeys(kept)
		base := logchain.Retain(recorded, keep)
		for _, g := range base.KeepFulls {
			protect[g] = true
		}
		keep = append(keep, base.KeepFulls...)
		placed := slices.Clone(recorded)
		for _, g := range sortedKeys(kept) {
			if named[g] {
				continue
			}
			h := verified[g].Header
			f := logchain.Full{Sequence: verified[g].Sequence, BackupSetGUID: g, FirstLSN: logchain.LSN(h.FirstLSN),
				LastLSN: logchain.LSN(h.LastLSN), Finish: h.BackupFinishUTC, Verified: true}
			for i := range placed {
				if !f.LastLSN.Valid() {
					break // a manifest without the header's LSNs places nothing
				}
				if _, ok, _ := placed[i].FirstAfter(f); ok {
					placed[i].Fulls = append(slices.Clone(placed[i].Fulls), f)
					break
				}
			}
		}
		r := logchain.Retain(placed, keep)
		for _, g := range r.KeepFulls {
			protect[g] = true
		}
		plan.rules[s] = r
	}
	for _, sm := range manifests {
		if m := sm.Manifest; m != nil && m.Header != nil && protect[strings.ToLower(m.Header.BackupSetGUID)] && m.Verified() && m.Trusted() {
			if plan.protect[sm.Server] == nil {
				plan.protect[sm.Server] = map[int64]bool{}
			}
			plan.protect[sm.Server][m.Sequence] = true
		}
	}
	return plan
}

// deleteChains removes, on each server, the log backups the chain rule
// lets go and the chains wholly older than the oldest kept verified full:
// their log files first, their records last, so that a deletion cut short
// leaves records the next run finds again. A log backup deleted from a
// chain that stays is left listed in its record: the record belongs to
// the chain's workflow, which may be writing it, and no kept full is
// restored through that log (it ends before the oldest kept full's end).
// A chain nothing authenticated describes goes, with its files, only once
// an authenticated chain numbered after it goes (numbers are handed out
// upwards: it was started before); until then it is reported and kept.
func (a *Activities) deleteChains(ctx context.Context, db *config.Database, chains map[string]*serverChains, plan chainPlan,
	stores map[string]storage.Storage, out *activities.RetentionOutput) error {
	log := activities.Logger(a.Activities, ctx)
	for _, s := range sortedKeys(chains) {
		sc, st, r := chains[s], stores[s], plan.rules[s]
		remove := func(name string) error {
			if err := st.Remove(ctx, name); err != nil && !errors.Is(err, storage.ErrNotFound) {
				return activities.StorageError(s, err)
			}
			return nil
		}
		drop := map[int64]bool{}
		var below int64
		for _, id := range r.DeleteChains {
			drop[id] = true
			below = max(below, id)
		}
		for id := range sc.unjudged {
			if id < below {
				drop[id] = true
			}
		}
		for _, ref := range r.DeleteLogs {
			if drop[ref.Chain] {
				continue
			}
			for _, l := range sc.chains[ref.Chain].Logs {
				if l.Number != ref.Number {
					continue
				}
				for _, f := range l.Files {
					if err := remove(f.Name); err != nil {
						return err
					}
					out.DeletedLogs++
				}
			}
		}
		for _, f := range sc.listing.LogFiles {
			if p, ok := tsql.ParseLogFileName(f.Name); ok && drop[p.Chain] {
				if err := remove(f.Name); err != nil {
					return err
				}
				out.DeletedLogs++
			}
		}
		var records []string
		for _, rec := range sc.listing.Records {
			if drop[rec.Chain] {
				records = append(records, rec.FileName())
			}
		}
		for name := range sc.listing.Broken {
			if p, ok := tsql.ParseChainRecordName(name); ok && drop[p.Chain] {
				records = append(records, name)
			}
		}
		slices.Sort(records)
		for _, name := range records {
			if err := remove(name); err != nil {
				return err
			}
		}
		for _, id := range sortedKeys(drop) {
			out.DeletedChains = append(out.DeletedChains, activities.ChainRef{Server: s, Chain: id})
			log.Info("retention deleted a log chain", zap.String("db", db.Name), zap.String("instance", db.Instance),
				zap.String("server", s), zap.Int64("chain", id), zap.Time("oldest_kept_full", r.From))
		}
	}
	return nil
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
