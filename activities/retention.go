package activities

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// ApplyRetention deletes old and failed sets of the database per policy on
// every listed server (stripes first, manifest last), never the newest
// verified set and never the set this cycle protects.
func (a *Activities) ApplyRetention(ctx context.Context, in RetentionInput) (RetentionOutput, error) {
	d := &a.Cycle
	db, err := d.database(in.Instance, in.Database)
	if err != nil {
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
	part := tsql.FileNamePart(db.Name)
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
		l, err := catalog.List(ctx, catalogFS{st}, db.Instance, db.Name)
		if err != nil {
			return RetentionOutput{}, storageError(s, err)
		}
		for _, m := range l.Manifests {
			manifests = append(manifests, catalog.ServerManifest{Server: s, Manifest: m})
		}
		for _, f := range l.Files {
			if p, ok := tsql.ParseStripeFileName(f.Name); ok && p.DBPart == part {
				files[s] = append(files[s], f)
			} else if p, ok := tsql.ParseManifestFileName(f.Name); ok && p.DBPart == part {
				files[s] = append(files[s], f)
			}
		}
	}
	dels, err := catalog.Decide(policy, manifests, files, d.now(), catalog.SetKey{Instance: db.Instance, Database: db.Name, Sequence: in.Protect})
	if err != nil {
		return RetentionOutput{}, nonRetryable(ErrInvalidConfig, err)
	}
	var out RetentionOutput
	for _, del := range dels {
		st := stores[del.Server]
		for _, f := range del.Files {
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
