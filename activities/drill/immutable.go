package drill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/recover"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/recovery"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
	"github.com/backupcycle/backupcycle/internal/storage/location"
	"github.com/backupcycle/backupcycle/internal/storage/s3"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Steps of a drill from the immutable copy.
const (
	StepStage   = "drill-stage"
	StepUnstage = "drill-unstage"
)

// Immutable is the source of a drill from the immutable copy: the objects
// of the newest verified set on the object store Store, staged in Dir of
// the backup server Staging for the drill instance to restore. The store
// holds no log backups: the drill restores the set to its end.
type Immutable struct {
	Store    string `json:"store"`
	Location string `json:"location,omitempty"`
	Staging  string `json:"staging"`
	Dir      string `json:"dir"`
	Sequence int64  `json:"sequence"`
	// Files are the objects staged: the stripes of the plan's sets, with
	// the SHA-256 their manifests record, and the manifests (without one:
	// their signature authenticates them).
	Files []recovery.File `json:"files"`
}

// Objects are the names of the objects staged.
func (im *Immutable) Objects() []string {
	out := make([]string, len(im.Files))
	for i, f := range im.Files {
		out[i] = f.Name
	}
	return out
}

// stagingDir is where db's drills from the immutable copy stage files:
// one directory per database (one drill of a database runs at a time).
func stagingDir(db *config.Database) string {
	return config.StagingDir + "/" + tsql.NamesOf(db.Instance, db.Name).Owner()
}

// immutableSource reads the manifests of db on its immutable copy
// (authenticated with the manifest keys, as on any backup server) and
// chooses the restore of its newest point there: the newest verified set
// (with its differential when the store holds one), no log backup.
func (a *Activities) immutableSource(ctx context.Context, db *config.Database, log *zap.Logger) (recovery.Catalog, *Immutable, error) {
	d := &a.Base.Cycle
	if db.ImmutableCopy == "" {
		return recovery.Catalog{}, nil, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
			"%s: a drill from immutable restores from the immutable copy, and the database has no immutable_copy: set one, or drill from any", db.ID()))
	}
	target, err := d.Server(db.ImmutableCopy)
	if err != nil {
		return recovery.Catalog{}, nil, err
	}
	staging, err := a.stagingServer(db, db.StagingServer())
	if err != nil {
		return recovery.Catalog{}, nil, err
	}
	store, err := location.OpenObjectStore(ctx, target, s3.Lock{})
	if err != nil {
		return recovery.Catalog{}, nil, activities.ObjectStoreError(target.Name, err)
	}
	defer store.Close()
	keys, err := d.ManifestKeys()
	if err != nil {
		return recovery.Catalog{}, nil, err
	}
	sets := activities.SetsOf(db)
	l, err := catalog.List(ctx, catalog.StorageFS{Storage: store}, keys, &sets)
	if err != nil {
		return recovery.Catalog{}, nil, activities.ObjectStoreError(target.Name, err)
	}
	for name, why := range l.Broken {
		log.Warn("manifest on the object store not read", zap.String("server", target.Name), zap.String("file", name), zap.Error(why))
	}
	cat := recovery.Build([]recovery.Server{{Name: target.Name, Manifests: recover.HeldBy(l.Manifests, target.Name)}})
	rp, err := recovery.Choose(cat, recovery.Point{Latest: true})
	if err != nil {
		return recovery.Catalog{}, nil, activities.NonRetryable(activities.ErrRecoveryPointUnreachable, fmt.Errorf(
			"the immutable copy of %s on %s (%s): %w", db.ID(), target.Name, store.Location(), err))
	}
	im := &Immutable{Store: target.Name, Location: store.Location(), Staging: staging.Name, Dir: stagingDir(db), Sequence: rp.Full().Sequence}
	for _, s := range rp.Steps {
		im.Files = append(im.Files, s.Files...)
		for _, set := range slices.Concat(cat.Sets, cat.Diffs) {
			if activities.SameGUID(set.GUID, s.GUID) {
				im.Files = append(im.Files, recovery.File{Name: set.Manifest.FileName()})
			}
		}
	}
	return cat, im, nil
}

// stagingServer is the staging backup server name of db: one of its own,
// a share (the drill instance restores from it), never an object store.
func (a *Activities) stagingServer(db *config.Database, name string) (*config.BackupServer, error) {
	srv, err := a.Base.Cycle.Server(name)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(db.ServersAndTargets(), name) || srv.IsObjectStore() {
		return nil, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
			"%s: staging server %s is not one of the database's file backup servers: set drill.staging to one the drill instance reads", db.ID(), name))
	}
	return srv, nil
}

// StageInput asks for the staging (or its removal) of a drill's objects.
type StageInput struct {
	Database  string     `json:"database"`
	Instance  string     `json:"instance,omitempty"`
	Immutable *Immutable `json:"immutable"`
}

// StageOutput is what StageDrill did.
type StageOutput struct {
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
	// Sent is what this attempt copied; Already the objects a staged
	// file held already (an earlier attempt's, checked by its SHA-256).
	Sent     int64         `json:"sent"`
	Already  int           `json:"already,omitempty"`
	Duration time.Duration `json:"duration"`
}

// StageHeartbeat is StageDrill's checkpoint: each file's copy progress,
// which a retry continues from.
type StageHeartbeat struct {
	Files map[string]*copier.Progress `json:"files"`
}

// check refuses an input that names anything the configuration does not
// give the database: another store or staging server, another directory,
// a file that is not one of its sets'.
func (a *Activities) check(in StageInput) (*config.Database, *config.BackupServer, error) {
	db, err := a.Base.Cycle.Database(in.Instance, in.Database)
	if err != nil {
		return nil, nil, err
	}
	im := in.Immutable
	bad := func(format string, args ...any) error {
		return activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("drill of %s from its immutable copy: "+format, append([]any{db.ID()}, args...)...))
	}
	if im == nil || im.Store == "" || im.Store != db.ImmutableCopy {
		return nil, nil, bad("the input names no object store, or not its immutable_copy %q", db.ImmutableCopy)
	}
	if im.Dir != stagingDir(db) {
		return nil, nil, bad("staging directory %q, want %q", im.Dir, stagingDir(db))
	}
	staging, err := a.stagingServer(db, im.Staging)
	if err != nil {
		return nil, nil, err
	}
	sets := activities.SetsOf(db)
	for _, f := range im.Files {
		p, ok := tsql.ParseStripeFileName(f.Name)
		if !ok {
			p, ok = tsql.ParseManifestFileName(f.Name)
		}
		if !ok || !sets.OwnsName(p) {
			return nil, nil, bad("%q is not a file of its sets", f.Name)
		}
	}
	return db, staging, nil
}

// StageDrill copies the objects of a drill from the immutable copy to the
// staging directory of the staging server, each stripe's SHA-256 checked
// against its manifest while it is read from the store and read back
// from the share before it takes its name; a file staged already with
// that content is not copied again, and a retry continues a partial one.
// An object whose bytes are not its manifest's is HashMismatch, naming
// it: the drill fails, and the set's state is not touched (the copies on
// the backup servers are not this object).
func (a *Activities) StageDrill(ctx context.Context, in StageInput) (StageOutput, error) {
	began := time.Now()
	db, staging, err := a.check(in)
	if err != nil {
		return StageOutput{}, err
	}
	d := &a.Base.Cycle
	im := in.Immutable
	log := activities.Logger(a.Base, ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance), zap.String("step", StepStage),
		zap.String("server", im.Store), zap.String("staging", staging.Name))
	target, err := d.Server(im.Store)
	if err != nil {
		return StageOutput{}, err
	}
	store, err := location.OpenObjectStore(ctx, target, s3.Lock{})
	if err != nil {
		return StageOutput{}, activities.ObjectStoreError(target.Name, err)
	}
	defer store.Close()
	share, err := d.OpenServer(ctx, staging)
	if err != nil {
		return StageOutput{}, err
	}
	defer share.Close()
	dst := storage.Under(share, im.Dir)

	var hb StageHeartbeat
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &hb)
	}
	if hb.Files == nil {
		hb.Files = map[string]*copier.Progress{}
	}
	var mu sync.Mutex
	jobs := make([]copier.Job, len(im.Files))
	for i, f := range im.Files {
		jobs[i] = copier.Job{Src: f.Name, Dst: f.Name, SHA256: f.SHA256, Resume: hb.Files[f.Name]}
	}
	// Written to the staging server within its bandwidth_limit, shared
	// with the cycle's copies into it.
	c := copier.New(copier.Options{Limit: activities.Bandwidth(a.Base, staging), Progress: func(p copier.Progress) {
		mu.Lock()
		cp := p
		hb.Files[p.File] = &cp
		snap := StageHeartbeat{Files: make(map[string]*copier.Progress, len(hb.Files))}
		for k, v := range hb.Files {
			snap.Files[k] = v
		}
		mu.Unlock()
		activities.Heartbeat(ctx, snap)
	}})
	results, err := c.Copy(ctx, store, dst, jobs)
	if err != nil && errors.Is(err, copier.ErrDifferentContent) {
		// A file of an earlier drill under the name, of another set of
		// that sequence: the staging directory is the drill's own.
		for _, r := range results {
			if errors.Is(r.Err, copier.ErrDifferentContent) {
				log.Warn("staged file of an earlier drill differs: removed", zap.String("file", r.Dst))
				if rerr := dst.Remove(ctx, r.Dst); rerr != nil && !errors.Is(rerr, storage.ErrNotFound) {
					return StageOutput{}, activities.StorageError(staging.Name, rerr)
				}
			}
		}
		results, err = c.Copy(ctx, store, dst, jobs)
	}
	if err != nil {
		return StageOutput{}, stageError(results, store, target.Name, staging.Name, err)
	}
	out := StageOutput{Objects: len(results)}
	for _, r := range results {
		out.Bytes += r.Size
		out.Sent += r.BytesSent
		if r.AlreadyThere {
			out.Already++
		}
	}
	out.Duration = time.Since(began)
	log.Info("immutable copy staged", zap.Int64("seq", im.Sequence), zap.Int("objects", out.Objects), zap.Int64("bytes", out.Bytes),
		zap.Int64("sent", out.Sent), zap.Int("already", out.Already), zap.String("dir", im.Dir), zap.Duration("took", out.Duration))
	return out, nil
}

// stageError classifies a staging failure: an object whose bytes are not
// its manifest's is HashMismatch (no retry reads other bytes), naming
// the object; the store's other failures as the immutable copy's, the
// share's as a backup server's.
func stageError(results []copier.Result, store *s3.Store, storeName, staging string, err error) error {
	for _, r := range results {
		var se *storage.Error
		if r.Err == nil || !errors.As(r.Err, &se) || se.Location != store.Location() {
			continue
		}
		if errors.Is(r.Err, storage.ErrCorrupt) {
			return activities.NonRetryable(activities.ErrHashMismatch, fmt.Errorf(
				"object %s on the immutable copy %s (%s) is not the file its manifest records: %w; nothing of it was restored, "+
					"and the set's state on the backup servers is unchanged (their copies are checked by their own hashes)",
				r.Src, storeName, store.Location(), r.Err))
		}
		return activities.ObjectStoreError(storeName, r.Err)
	}
	return activities.StorageError(staging, err)
}

// UnstageOutput says what UnstageDrill removed.
type UnstageOutput struct {
	Removed int `json:"removed"`
}

// UnstageDrill removes every file of the database's staging directory on
// the staging server (what this drill staged, partial copies, and what an
// earlier drill's crash left): staged files are no sets, and nothing else
// reads them. Nothing there is not an error.
func (a *Activities) UnstageDrill(ctx context.Context, in StageInput) (UnstageOutput, error) {
	_, staging, err := a.check(in)
	if err != nil {
		return UnstageOutput{}, err
	}
	share, err := a.Base.Cycle.OpenServer(ctx, staging)
	if err != nil {
		return UnstageOutput{}, err
	}
	defer share.Close()
	dst := storage.Under(share, in.Immutable.Dir)
	files, err := dst.List(ctx, "", "")
	if err != nil {
		return UnstageOutput{}, activities.StorageError(staging.Name, err)
	}
	var out UnstageOutput
	for _, f := range files {
		if err := dst.Remove(ctx, f.Name); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return out, activities.StorageError(staging.Name, err)
		}
		out.Removed++
	}
	activities.Logger(a.Base, ctx).Info("staged files removed", zap.String("db", in.Database), zap.String("server", staging.Name),
		zap.String("dir", in.Immutable.Dir), zap.Int("removed", out.Removed))
	return out, nil
}
