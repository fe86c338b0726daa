package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// MarkFailed marks the set failed, with the step and reason, on every listed
// server it can reach; a server without a manifest gets one listing the
// stripe files found there, so retention removes them. A verified set is
// never marked failed.
func (a *Activities) MarkFailed(ctx context.Context, in MarkInput) error {
	d := &a.Cycle
	db, err := d.database(in.Instance, in.Database)
	if err != nil {
		return err
	}
	now := d.now()
	reason := in.Reason
	if reason == "" {
		reason = "failed at step " + in.Step
	}
	if in.ErrorType != "" {
		reason = in.ErrorType + ": " + reason
	}
	written := 0
	for _, s := range in.Servers {
		srv, serr := d.server(s)
		if serr != nil {
			return serr
		}
		st, oerr := d.openStorage(ctx, srv)
		if oerr != nil {
			a.loggerFor(ctx).Warn("set not marked failed: server unreachable", zap.String("server", s), zap.Error(oerr))
			continue
		}
		fsys := catalogFS{st}
		m, lerr := catalog.Load(ctx, fsys, db.Name, in.Sequence)
		if lerr != nil {
			m = catalog.New(db.Name, in.Sequence, now)
			m.PrimaryServer = s
			m.Stripes = partialStripes(ctx, st, db.Name, in.Sequence)
			m.Options.Stripes = len(m.Stripes)
			if activity.IsActivity(ctx) {
				info := activity.GetInfo(ctx)
				m.WorkflowID, m.RunID = info.WorkflowExecution.ID, info.WorkflowExecution.RunID
			}
		}
		if m.State == catalog.StateVerified {
			st.Close()
			continue
		}
		if ferr := m.Fail(failedStep(in.Step), reason, now); ferr != nil {
			st.Close()
			return nonRetryable(ErrInvalidConfig, ferr)
		}
		if serr := catalog.Save(ctx, fsys, m); serr != nil {
			a.loggerFor(ctx).Warn("set not marked failed", zap.String("server", s), zap.Error(serr))
		} else {
			written++
		}
		st.Close()
	}
	a.loggerFor(ctx).Warn("set marked failed", zap.String("db", db.Name), zap.Int64("seq", in.Sequence),
		zap.String("step", in.Step), zap.String("reason", reason), zap.Int("servers", written))
	return nil
}

// partialStripes lists the stripe files of a set found on a server, as a
// complete stripe list (missing ones with size 0).
func partialStripes(ctx context.Context, st storage.Storage, db string, seq int64) []catalog.Stripe {
	files, err := st.List(ctx, tsql.SetPrefix(db, seq)+"_")
	if err != nil {
		return nil
	}
	n := 0
	sizes := map[int]int64{}
	for _, f := range files {
		p, ok := tsql.ParseStripeFileName(f.Name)
		if !ok || p.Sequence != seq || p.DBPart != tsql.FileNamePart(db) {
			continue
		}
		n = max(n, p.Count)
		sizes[p.Index] = f.Size
	}
	out := make([]catalog.Stripe, n)
	for i := range out {
		out[i] = catalog.Stripe{Name: tsql.StripeFileName(db, seq, i+1, n), Size: sizes[i+1]}
	}
	return out
}

// failedStep maps a workflow step to the manifest's steps.
func failedStep(step string) catalog.Step {
	switch step {
	case StepCatalog:
		return catalog.StepCatalog
	case StepCopy:
		return catalog.StepCopy
	case StepRestore:
		return catalog.StepRestore
	case StepCheckDB:
		return catalog.StepCheckDB
	case StepSanity, StepVerified:
		return catalog.StepSanity
	}
	return catalog.StepBackup
}
