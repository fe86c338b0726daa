package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// advance moves m forward to state through the states in between (a server
// that missed an update catches up), never backwards.
func advance(m *catalog.Manifest, to catalog.State, at time.Time) error {
	chain := catalog.Chain
	target := slices.Index(chain, to)
	cur := slices.Index(chain, m.State)
	if cur < 0 || target < 0 {
		return fmt.Errorf("set %d of %q is %s: cannot move to %s", m.Sequence, m.Database, m.State, to)
	}
	for i := cur + 1; i <= target; i++ {
		if err := m.Advance(chain[i], at); err != nil {
			return err
		}
	}
	return nil
}

// manifestKeys are the configuration's manifest keys, resolved now (nil
// without any: manifests are then neither signed nor authenticated). A key
// that cannot be read is InvalidConfig: nothing is written unsigned, nor
// trusted unauthenticated, in its stead.
func (d *CycleDeps) manifestKeys() (*catalog.Keys, error) {
	keys, err := d.config().ManifestKeyRing()
	if err != nil {
		return nil, nonRetryable(ErrInvalidConfig, fmt.Errorf("%w: every worker needs the manifest_keys of %s", err, d.config().File))
	}
	return keys, nil
}

// loadManifest is catalog.Load of set seq of db on st, authenticated with
// the manifest keys.
func (d *CycleDeps) loadManifest(ctx context.Context, st storage.Storage, db *config.Database, seq int64) (*catalog.Manifest, error) {
	keys, err := d.manifestKeys()
	if err != nil {
		return nil, err
	}
	return catalog.Load(ctx, catalog.StorageFS{Storage: st}, keys, setsOf(db), seq)
}

// saveManifest is catalog.Save of m on st, signed with the manifest keys.
func (d *CycleDeps) saveManifest(ctx context.Context, st storage.Storage, m *catalog.Manifest) error {
	keys, err := d.manifestKeys()
	if err != nil {
		return err
	}
	return catalog.Save(ctx, catalog.StorageFS{Storage: st}, keys, m)
}

// listManifests reads the manifests of database on a backup server.
func (a *Activities) listManifests(ctx context.Context, server string, db *config.Database) (catalog.Listing, error) {
	sets := setsOf(db)
	return a.listServer(ctx, server, func(ctx context.Context, fsys catalog.FS, keys *catalog.Keys) (catalog.Listing, error) {
		return catalog.List(ctx, fsys, keys, &sets)
	})
}

// listServer reads manifests on a backup server with list: catalog.List of
// one database, catalog.ListInstances of a fleet's, authenticated with the
// manifest keys.
func (a *Activities) listServer(ctx context.Context, server string,
	list func(context.Context, catalog.FS, *catalog.Keys) (catalog.Listing, error)) (catalog.Listing, error) {
	keys, err := a.Cycle.manifestKeys()
	if err != nil {
		return catalog.Listing{}, err
	}
	srv, err := a.Cycle.server(server)
	if err != nil {
		return catalog.Listing{}, err
	}
	st, err := a.Cycle.openStorage(ctx, srv)
	if err != nil {
		return catalog.Listing{}, err
	}
	defer st.Close()
	l, err := list(ctx, catalog.StorageFS{Storage: st}, keys)
	if err != nil {
		return catalog.Listing{}, storageError(server, err)
	}
	return l, nil
}

// updateManifest loads the set's manifest from every reachable server of
// servers (the most advanced copy wins), applies change, and saves it back
// to each, so a server that missed an update catches up. It fails when a
// server of required could not be updated; the others are best effort.
func (a *Activities) updateManifest(ctx context.Context, db *config.Database, seq int64, servers, required []string,
	change func(m *catalog.Manifest) error) (*catalog.Manifest, error) {
	return a.updateManifestOf(ctx, db, seq, servers, required, false, change)
}

// updateManifestOf is updateManifest; anyRun updates a set of any run
// (a record that changes no state, such as an earlier set's immutable
// copy), only an authenticated manifest.
func (a *Activities) updateManifestOf(ctx context.Context, db *config.Database, seq int64, servers, required []string, anyRun bool,
	change func(m *catalog.Manifest) error) (*catalog.Manifest, error) {
	d := &a.Cycle
	log := a.loggerFor(ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance), zap.Int64("seq", seq))
	type open struct {
		name string
		st   storage.Storage
	}
	var opened []open
	defer func() {
		for _, o := range opened {
			o.st.Close()
		}
	}()
	var best *catalog.Manifest
	var mustErr error
	// A verified copy outranks everything (it was proven good and is never
	// un-verified), then failed/cancelled (terminal), then the chain.
	rank := func(m *catalog.Manifest) int {
		switch m.State {
		case catalog.StateVerified:
			return 30
		case catalog.StateFailed, catalog.StateCancelled:
			return 20
		}
		return m.State.Rank()
	}
	for _, name := range servers {
		srv, err := d.server(name)
		if err != nil {
			return nil, err
		}
		st, err := d.openStorage(ctx, srv)
		if err != nil {
			if slices.Contains(required, name) {
				mustErr = err
			}
			log.Warn("manifest not reachable", zap.String("server", name), zap.Error(err))
			continue
		}
		opened = append(opened, open{name, st})
		m, err := d.loadManifest(ctx, st, db, seq)
		if isAppError(err) {
			return nil, err // the manifest keys
		}
		if err != nil {
			continue // not there (yet): written below
		}
		switch {
		case anyRun && !m.Trusted():
			return nil, untrusted(m, name)
		case !anyRun:
			if err := ownedByThisRun(ctx, m, name); err != nil {
				return nil, err
			}
		}
		if best == nil || rank(m) > rank(best) {
			best = m
		}
	}
	if mustErr != nil {
		return nil, mustErr
	}
	if err := change(best); err != nil {
		return nil, err
	}
	if best == nil {
		return nil, nil
	}
	saved := 0
	for _, o := range opened {
		if err := d.saveManifest(ctx, o.st, best); err != nil {
			if slices.Contains(required, o.name) {
				return nil, storageError(o.name, err)
			}
			log.Warn("manifest not updated", zap.String("server", o.name), zap.Error(err))
			continue
		}
		saved++
	}
	if saved == 0 {
		return nil, retryable(ErrBackupTargetUnreachable, fmt.Errorf("manifest of %s seq %d could be written on none of %v", db.ID(), seq, servers))
	}
	return best, nil
}

// runOf is the run an activity works for ("", "" outside an activity, as in
// plain unit tests).
func runOf(ctx context.Context) (workflowID, runID string) {
	if !activity.IsActivity(ctx) {
		return "", ""
	}
	info := activity.GetInfo(ctx)
	return info.WorkflowExecution.ID, info.WorkflowExecution.RunID
}

// ownedByThisRun refuses to touch a set another run claimed: after a
// sequence rollback or with two entry points, a number can meet a set that
// is not this run's, and its manifest and files must stay as they are. A
// manifest naming no run, and one that is not authenticated (its run ids
// are anybody's to write), are no run's.
func ownedByThisRun(ctx context.Context, m *catalog.Manifest, server string) error {
	if !m.Trusted() {
		return untrusted(m, server)
	}
	wid, rid := runOf(ctx)
	if rid == "" || m.OwnedBy(wid, rid) {
		return nil
	}
	return nonRetryable(ErrSequenceInUse, fmt.Errorf(
		"set %d of %s/%s on %s belongs to run %q of %q (state %s), not to this run: it is left untouched and this cycle takes a new number",
		m.Sequence, m.SourceInstance, m.Database, server, m.RunID, m.WorkflowID, m.State))
}

// untrusted is the SequenceInUse of a set whose manifest is not
// authenticated: it is no run's, and nothing of it is touched.
func untrusted(m *catalog.Manifest, server string) error {
	return nonRetryable(ErrSequenceInUse, fmt.Errorf(
		"set %d of %s/%s on %s: manifest %s is not authenticated: %s; it is no run's and is left untouched, and this cycle takes a new number",
		m.Sequence, m.SourceInstance, m.Database, server, m.FileName(), m.Auth.Why()))
}

// isAppError reports whether err is already one of the cycle's typed
// errors (a configuration problem, not a missing file).
func isAppError(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr)
}

// holders are the servers a manifest says hold the set, plus server.
func holders(m *catalog.Manifest, server string) []string {
	out := slices.Clone(m.Servers)
	if !slices.Contains(out, server) {
		out = append(out, server)
	}
	return out
}

// holdersOn reads the set's holders from its manifest on srv (just srv when
// it cannot be read: updateManifest then reports why).
func (a *Activities) holdersOn(ctx context.Context, srv *config.BackupServer, db *config.Database, seq int64) []string {
	st, err := a.Cycle.openStorage(ctx, srv)
	if err != nil {
		return []string{srv.Name}
	}
	defer st.Close()
	m, err := a.Cycle.loadManifest(ctx, st, db, seq)
	if err != nil || !m.Trusted() {
		return []string{srv.Name}
	}
	return holders(m, srv.Name)
}

// advanceOrKeep advances m to state unless it is already there or beyond
// (a restore repeated after the verification instance was lost).
func advanceOrKeep(m *catalog.Manifest, to catalog.State, at time.Time) error {
	if m.State.Terminal() && m.State != catalog.StateVerified {
		return nonRetryable(ErrCorruptBackup, fmt.Errorf("set %d of %s/%s is %s: it is never verified", m.Sequence, m.SourceInstance, m.Database, m.State))
	}
	if m.State.Rank() >= to.Rank() {
		return nil
	}
	if err := advance(m, to, at); err != nil {
		return nonRetryable(ErrCorruptBackup, err)
	}
	return nil
}

// isRetry reports whether an earlier attempt of this activity may have
// started its statement: a retry, or heartbeat details left by one.
func isRetry(ctx context.Context) bool {
	return activity.IsActivity(ctx) && (activity.GetInfo(ctx).Attempt > 1 || activity.HasHeartbeatDetails(ctx))
}

// setFiles lists the stripe files of set seq on a server under any of
// namings, and the temporary files a copy writes them through. The listing
// is by the set's prefix; each name is then parsed and its owner and
// sequence compared, since <inst>@<db>_<seq:08d>_ also starts every file
// of a database named <db>_<seq:08d>.
func setFiles(ctx context.Context, st storage.Storage, namings []tsql.SetNames, seq int64) ([]storage.FileInfo, error) {
	var out []storage.FileInfo
	for _, n := range namings {
		files, err := st.List(ctx, n.SetPrefix(seq)+"_", "")
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			p, ok := tsql.ParseStripeFileName(strings.TrimSuffix(f.Name, copier.DefaultTempSuffix))
			if ok && p.Sequence == seq && p.Owner() == n.Owner() {
				out = append(out, f)
			}
		}
	}
	return out, nil
}
