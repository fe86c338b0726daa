package activities

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// ApplyRetention deletes old and failed sets of the database per policy on
// every listed server (stripes first, manifest last), never the newest
// verified set and never the set this cycle protects.
func (a *Activities) ApplyRetention(ctx context.Context, in RetentionInput) (RetentionOutput, error) {
	defer a.Cycle.keepAlive(ctx)()
	d := &a.Cycle
	db, err := d.database(in.Instance, in.Database, in.Entry)
	if err != nil {
		return RetentionOutput{}, err
	}
	// Protect only ever keeps a set more: it is taken as given.
	if err := d.databaseServerList(db, "retention's servers", in.Servers); err != nil {
		return RetentionOutput{}, err
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
	sets := setsOf(db)
	keys, err := d.manifestKeys()
	if err != nil {
		return RetentionOutput{}, err
	}
	for _, s := range in.Servers {
		srv, err := d.server(s)
		if err != nil {
			return RetentionOutput{}, err
		}
		st, err := d.openStorage(ctx, srv)
		if err != nil {
			a.loggerFor(ctx).Warn("retention skips an unreachable server", zap.String("server", s), zap.Error(err))
			continue
		}
		stores[s] = st
		l, err := catalog.List(ctx, catalog.StorageFS{Storage: st}, keys, &sets)
		if err != nil {
			return RetentionOutput{}, storageError(s, err)
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
	dels, err := catalog.Decide(policy, manifests, files, d.now(), catalog.SetKey{Instance: db.Instance, Database: db.Name, Sequence: in.Protect})
	if err != nil {
		return RetentionOutput{}, nonRetryable(ErrInvalidConfig, err)
	}
	var out RetentionOutput
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
				return out, storageError(del.Server, err)
			}
		}
		out.Deleted = append(out.Deleted, SetRef{Server: del.Server, Sequence: del.Set.Sequence, State: string(del.Reason)})
		a.loggerFor(ctx).Info("retention deleted a set", zap.String("db", db.Name), zap.String("server", del.Server),
			zap.Int64("seq", del.Set.Sequence), zap.String("reason", string(del.Reason)), zap.String("detail", del.Detail))
	}
	out.Kept = len(manifests) - len(out.Deleted)
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
		if m.Verified() && m.Trusted() && m.Proof != nil && m.Header != nil && sameGUID(m.Proof.BackupSetGUID, m.Header.BackupSetGUID) {
			proven[m.FileName()] = m
		}
	}
	out := slices.Clone(manifests)
	for i, sm := range out {
		v := proven[sm.Manifest.FileName()]
		m := sm.Manifest
		if v == nil || !m.Trusted() || m.Verified() || m.State.Terminal() || m.State.Rank() < catalog.StateCopied.Rank() ||
			m.RunID != v.RunID || m.Header == nil || !sameGUID(m.Header.BackupSetGUID, v.Header.BackupSetGUID) {
			continue
		}
		healed := *v
		if err := a.Cycle.saveManifest(ctx, stores[sm.Server], &healed); err != nil {
			a.loggerFor(ctx).Warn("verified state not caught up", zap.String("server", sm.Server), zap.Int64("seq", m.Sequence), zap.Error(err))
			continue
		}
		a.loggerFor(ctx).Info("verified state caught up on a server that missed it", zap.String("db", db.Name),
			zap.String("instance", db.Instance), zap.String("server", sm.Server), zap.Int64("seq", m.Sequence))
		out[i].Manifest = &healed
	}
	return out
}
