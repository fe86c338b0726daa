package cycle

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// MarkFailed marks the set failed on evidence about its content (in.Evidence:
// an incomplete BACKUP, corrupt media, CHECKDB errors, a sanity mismatch, a
// hash mismatch), with the step and reason, on every listed server it can
// reach; a server without a manifest gets one listing the stripe files found
// there, so retention removes them. Without evidence nothing is marked (an
// outage says nothing about a set). A set verified on any server is never
// marked failed anywhere, and a set another run owns is never touched.
func (a *Activities) MarkFailed(ctx context.Context, in activities.MarkInput) error {
	defer a.Cycle.KeepAlive(ctx)()
	d := &a.Cycle
	db, err := d.DatabaseEntry(in.Instance, in.Database, in.Entry)
	if err != nil {
		return err
	}
	if err := d.DatabaseServerList(db, "MarkFailed's servers", in.Servers); err != nil {
		return err
	}
	evidence := catalog.Evidence(in.Evidence)
	if !evidence.Valid() {
		return activities.NonRetryable(activities.ErrNoEvidence, fmt.Errorf(
			"set %d of %s not marked failed: %q is no evidence about its content (error type %s)", in.Sequence, db.ID(), in.Evidence, in.ErrorType))
	}
	log := activities.Logger(a.Activities, ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance), zap.Int64("seq", in.Sequence))
	now := d.Clock()
	reason := in.Reason
	if reason == "" {
		reason = "failed at step " + in.Step
	}
	if in.ErrorType != "" {
		reason = in.ErrorType + ": " + reason
	}
	sets, closeAll := a.openSets(ctx, db, in.Sequence, in.Servers)
	defer closeAll()
	for _, o := range sets {
		if o.m != nil && o.m.Verified() && o.m.Trusted() {
			log.Warn("set is verified: not marked failed", zap.String("server", o.server), zap.String("reason", reason))
			return nil
		}
	}
	wid, rid := activities.RunOf(ctx)
	written := 0
	for _, o := range sets {
		m := o.m
		if m == nil {
			if evidence != catalog.EvidenceBackupIncomplete {
				continue // nothing of this set there
			}
			m = catalog.New(db.Instance, db.Name, in.Sequence, now)
			m.PrimaryServer, m.Entry = o.server, db.Entry
			m.Stripes = partialStripes(ctx, o.st, m.Names(), in.Sequence)
			m.Options.Stripes = len(m.Stripes)
			m.WorkflowID, m.RunID = wid, rid
		}
		if err := activities.OwnedByThisRun(ctx, m, o.server); err != nil {
			log.Warn("set of another run: not marked failed", zap.String("server", o.server), zap.Error(err))
			continue
		}
		if len(m.Stripes) == 0 {
			// A claim (pending) lists no stripes yet: record the partial
			// files found, so retention removes them with the manifest.
			m.Stripes = partialStripes(ctx, o.st, m.Names(), in.Sequence)
			m.Options.Stripes = len(m.Stripes)
		}
		if ferr := m.Fail(failedStep(in.Step), evidence, reason, now); ferr != nil {
			log.Warn("set not marked failed", zap.String("server", o.server), zap.Error(ferr))
			continue
		}
		if serr := d.SaveManifest(ctx, o.st, m); serr != nil {
			log.Warn("set not marked failed", zap.String("server", o.server), zap.Error(serr))
			continue
		}
		written++
	}
	log.Warn("set marked failed", zap.String("step", in.Step), zap.String("evidence", string(evidence)),
		zap.String("reason", reason), zap.Int("servers", written))
	if written > 0 {
		activities.Recorder(a.Activities).SetFailed(string(failedStep(in.Step)), string(evidence))
	}
	return nil
}

// MarkCancelled records that the cycle making the set was cancelled: its
// stripe files are removed from every listed server (they are unfinished
// work nobody will finish), and the manifest stays as the record, in state
// cancelled. A verified or failed set, and a set of another run, are left as
// they are.
func (a *Activities) MarkCancelled(ctx context.Context, in activities.MarkInput) error {
	defer a.Cycle.KeepAlive(ctx)()
	d := &a.Cycle
	db, err := d.DatabaseEntry(in.Instance, in.Database, in.Entry)
	if err != nil {
		return err
	}
	if err := d.DatabaseServerList(db, "MarkCancelled's servers", in.Servers); err != nil {
		return err
	}
	log := activities.Logger(a.Activities, ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance), zap.Int64("seq", in.Sequence))
	now := d.Clock()
	reason := in.Reason
	if reason == "" {
		reason = "cancelled at step " + in.Step
	}
	sets, closeAll := a.openSets(ctx, db, in.Sequence, in.Servers)
	defer closeAll()
	for _, o := range sets {
		if o.m != nil && o.m.Verified() && o.m.Trusted() {
			return nil
		}
	}
	wid, rid := activities.RunOf(ctx)
	var errs []error
	for _, o := range sets {
		m := o.m
		if m == nil {
			m = catalog.New(db.Instance, db.Name, in.Sequence, now)
			m.PrimaryServer, m.Entry = o.server, db.Entry
			m.WorkflowID, m.RunID = wid, rid
		}
		if err := activities.OwnedByThisRun(ctx, m, o.server); err != nil {
			log.Warn("set of another run: left as it is", zap.String("server", o.server), zap.Error(err))
			continue
		}
		if m.State == catalog.StateFailed {
			continue
		}
		names := map[string]bool{}
		for _, s := range m.Stripes {
			names[s.Name] = true
		}
		for _, s := range partialStripes(ctx, o.st, m.Names(), in.Sequence) {
			names[s.Name] = true
		}
		// A stripe the copy was writing when the cancel came.
		if files, err := activities.SetFiles(ctx, o.st, []tsql.SetNames{m.Names()}, in.Sequence); err == nil {
			for _, f := range files {
				names[f.Name] = true
			}
		}
		if o.m == nil && len(names) == 0 {
			continue // nothing of this set there
		}
		m.Stripes, m.Options.Stripes = nil, 0 // the record keeps no file names of removed files
		if cerr := m.Cancel(failedStep(in.Step), reason, now); cerr != nil {
			errs = append(errs, cerr)
			continue
		}
		// Manifest first: a crash between the two leaves a cancelled record
		// and orphan stripes retention removes, never a live-looking set.
		if serr := d.SaveManifest(ctx, o.st, m); serr != nil {
			errs = append(errs, activities.StorageError(o.server, serr))
			continue
		}
		for name := range names {
			if rerr := o.st.Remove(ctx, name); rerr != nil && !errors.Is(rerr, storage.ErrNotFound) {
				errs = append(errs, activities.StorageError(o.server, rerr))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	log.Info("set cancelled", zap.String("step", in.Step), zap.String("reason", reason))
	return nil
}

// openSet is one server's storage and its manifest of a set (nil when it
// has none).
type openSet struct {
	server string
	st     storage.Storage
	m      *catalog.Manifest
}

// openSets opens every reachable server of servers and loads the set's
// manifest there, authenticated (Manifest.Auth); unreachable servers are
// skipped (logged), and so is one whose manifest exists but cannot be read.
func (a *Activities) openSets(ctx context.Context, db *config.Database, seq int64, servers []string) ([]openSet, func()) {
	var out []openSet
	for _, s := range servers {
		srv, err := a.Cycle.Server(s)
		if err != nil {
			continue
		}
		st, err := a.Cycle.OpenServer(ctx, srv)
		if err != nil {
			activities.Logger(a.Activities, ctx).Warn("backup server unreachable", zap.String("server", s), zap.Error(err))
			continue
		}
		m, err := a.Cycle.LoadManifest(ctx, st, db, seq)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, storage.ErrNotFound) {
			// A manifest that cannot be read (or the manifest keys) leaves
			// the set there as it is: nothing is written over it.
			activities.Logger(a.Activities, ctx).Warn("manifest not read: the set there is left as it is", zap.String("server", s), zap.Error(err))
			st.Close()
			continue
		}
		out = append(out, openSet{server: s, st: st, m: m})
	}
	return out, func() {
		for _, o := range out {
			o.st.Close()
		}
	}
}

// partialStripes lists the stripe files of a set (named by names) found on
// a server, as a complete stripe list (missing ones with size 0).
func partialStripes(ctx context.Context, st storage.Storage, names tsql.SetNames, seq int64) []catalog.Stripe {
	files, err := activities.SetFiles(ctx, st, []tsql.SetNames{names}, seq)
	if err != nil {
		return nil
	}
	n := 0
	sizes := map[int]int64{}
	for _, f := range files {
		p, ok := tsql.ParseStripeFileName(f.Name)
		if !ok {
			continue // a copy's temporary file
		}
		n = max(n, p.Count)
		sizes[p.Index] = f.Size
	}
	out := make([]catalog.Stripe, n)
	for i := range out {
		out[i] = catalog.Stripe{Name: names.Stripe(seq, i+1, n), Size: sizes[i+1]}
	}
	return out
}

// failedStep maps a workflow step to the manifest's steps.
func failedStep(step string) catalog.Step {
	switch step {
	case activities.StepCatalog:
		return catalog.StepCatalog
	case activities.StepCopy:
		return catalog.StepCopy
	case activities.StepRestore:
		return catalog.StepRestore
	case activities.StepCheckDB:
		return catalog.StepCheckDB
	case activities.StepSanity, activities.StepVerified:
		return catalog.StepSanity
	}
	return catalog.StepBackup
}
