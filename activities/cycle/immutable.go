package cycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/metrics"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/location"
	"github.com/backupcycle/backupcycle/internal/storage/s3"
)

// ProbeEvery is how old an object store's newest immutability probe may be
// before a copy probes it again.
const ProbeEvery = 24 * time.Hour

// ImmutableInput asks for the immutable copy of a verified set.
type ImmutableInput struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	Entry    string `json:"entry,omitempty"`
	Sequence int64  `json:"seq"`
	// Servers are the backup servers holding the verified set: the copy
	// reads the first that answers, and its record goes to each.
	Servers []string `json:"servers"`
	// Target is the database's immutable_copy (the plan's Immutable).
	Target string `json:"target"`
}

// ImmutableOutput is what the copy did.
type ImmutableOutput struct {
	Target      string        `json:"target"`
	State       string        `json:"state"` // catalog.ImmutableState
	Objects     int           `json:"objects"`
	Bytes       int64         `json:"bytes"`
	Sent        int64         `json:"sent"` // sent by this attempt (not what was there already)
	Mode        string        `json:"mode"`
	RetainUntil time.Time     `json:"retain_until"`
	Probe       string        `json:"probe"`            // the probe's verdict
	Probed      bool          `json:"probed,omitempty"` // this copy ran the probe (else a recent one's record)
	Duration    time.Duration `json:"duration"`
	// CaughtUp are the earlier sets this copy also copied (their copy had
	// failed or was never made), oldest first; CatchUpError says why it
	// stopped before the rest.
	CaughtUp     []int64 `json:"caught_up,omitempty"`
	CatchUpError string  `json:"catch_up_error,omitempty"`
}

// ImmutableHeartbeat is what CopyImmutable records: each file's multipart
// upload (its upload id and the parts the server holds), which a retry
// continues once the server's own list of parts agrees with the source.
type ImmutableHeartbeat struct {
	Files   map[string]*s3.UploadProgress `json:"files"`
	Percent float64                       `json:"percent"`
	Bytes   int64                         `json:"bytes"`
}

// CopyImmutable copies a verified set to its database's object store
// (immutable_copy): first the store's immutability probe, when its newest
// is older than ProbeEvery or failed; then every stripe, each locked for
// the database's ImmutableLock from the upload, its SHA-256
// checked by the store part by part and read back; the manifest last. The
// outcome is recorded in the set's manifest on every holder. Nothing here
// changes the set's state: a failure leaves it verified.
func (a *Activities) CopyImmutable(ctx context.Context, in ImmutableInput) (out ImmutableOutput, err error) {
	d := &a.Cycle
	start := time.Now()
	out.Target = in.Target
	db, err := d.DatabaseEntry(in.Instance, in.Database, in.Entry)
	if err != nil {
		return out, err
	}
	if in.Target == "" || in.Target != db.ImmutableCopy {
		return out, d.NotOfDatabase(db, "immutable copy target", in.Target, "the immutable_copy", []string{db.ImmutableCopy})
	}
	if err := d.DatabaseServerList(db, "servers", in.Servers); err != nil {
		return out, err
	}
	target, err := d.Server(in.Target)
	if err != nil {
		return out, err
	}
	if !target.IsObjectStore() {
		return out, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("immutable_copy %s of %s is not a kind: s3 backup server", target.Name, db.ID()))
	}
	log := activities.Logger(a.Activities, ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance), zap.Int64("seq", in.Sequence),
		zap.String("server", target.Name))

	src, from, m, err := a.verifiedSource(ctx, db, in)
	if err != nil {
		return out, err
	}
	defer src.Close()
	// Locked from the upload (a later attempt extends what an earlier one
	// wrote): a set copied late is kept as long as one copied at once.
	lock := s3.Lock{Mode: target.S3.LockMode, Until: d.Clock().Add(db.ImmutableLock()).UTC().Truncate(time.Second)}
	out.Mode, out.RetainUntil = lock.Mode, lock.Until
	rec := &catalog.ImmutableCopy{Server: target.Name, Mode: lock.Mode, RetainUntil: lock.Until}
	// Whatever happens from here is recorded in the set's manifest, best
	// effort: status shows it per set.
	defer func() {
		if err == nil {
			return
		}
		rec.State, rec.At, rec.Error = catalog.ImmutableFailed, d.Clock().UTC(), err.Error()
		if activities.ErrorType(err) == activities.ErrNotImmutable {
			rec.State = catalog.ImmutableNotImmutable
		}
		out.State = string(rec.State)
		if rerr := a.recordImmutable(ctx, db, in, rec, false); rerr != nil {
			log.Warn("immutable copy's failure not recorded in the manifests", zap.Error(rerr))
		}
	}()

	store, err := location.OpenObjectStore(ctx, target, lock)
	if err != nil {
		return out, activities.ObjectStoreError(target.Name, err)
	}
	defer store.Close()
	rec.Location = store.Location()

	probe, probed, err := a.probeImmutable(ctx, store, target)
	if err != nil {
		return out, activities.ObjectStoreError(target.Name, err)
	}
	out.Probe, out.Probed = probe.Summary(), probed
	rec.Probe = &catalog.ImmutableProbe{At: probe.At, Immutable: probe.Immutable, Summary: probe.Summary()}
	if !probe.Immutable {
		log.Error("object store is not immutable: nothing copied", zap.String("probe", probe.Summary()))
		return out, activities.NonRetryable(activities.ErrNotImmutable, fmt.Errorf("%s (%s) is not immutable: %s; nothing of %s seq %d was copied there: "+
			"enable Object Lock on the bucket, use lock_mode compliance, or deny the worker's S3 user what the bucket policy of "+
			"README \"Immutable copies on object storage\" denies (s3:DeleteObjectVersion, s3:BypassGovernanceRetention, ...)", target.Name, store.Location(), probe.Summary(), db.ID(), in.Sequence))
	}

	var hb ImmutableHeartbeat
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &hb)
	}
	prog := &immutableProgress{files: hb.Files}
	if prog.files == nil {
		prog.files = map[string]*s3.UploadProgress{}
	}
	rep := activities.NewReporter(a.Activities, ctx, activities.StepImmutableCopy, in.Sequence)
	stop := rep.Every(d.PollEvery(), nil, func(float64, int64) any {
		s := prog.state()
		rep.Set(s.Percent, s.Bytes)
		return s
	})
	defer stop()
	objects, size, sent, err := a.uploadSet(ctx, store, src, m, lock, target, prog)
	if err != nil {
		return out, err
	}
	rec.Objects, out.Bytes, out.Sent, out.Objects = objects, size, sent, len(objects)
	out.Duration = time.Since(start)
	rec.State, rec.At = catalog.ImmutableCopied, d.Clock().UTC()
	out.State = string(rec.State)
	if err := a.recordImmutable(ctx, db, in, rec, false); err != nil {
		return out, err
	}
	log.Info("immutable copy made", zap.String("from", from), zap.Int("objects", out.Objects), zap.Int64("bytes", out.Bytes),
		zap.Int64("sent", out.Sent), zap.String("mode", lock.Mode), zap.Time("retain_until", lock.Until), zap.Duration("duration", out.Duration))
	activities.Recorder(a.Activities).StepDone(metrics.StepImmutable, db.Instance, db.Name, target.Name, out.Sent, out.Duration)

	// The store answers now: the earlier sets whose copy failed or was
	// never made go there too, so an outage heals by the next cycle. Their
	// failure is this copy's warning, never its error.
	caught, cerr := a.catchUpImmutable(ctx, db, in, target, store, lock, rec, prog)
	out.CaughtUp = caught
	if cerr != nil {
		out.CatchUpError = cerr.Error()
		log.Warn("earlier sets' immutable copies not all caught up", zap.Int64s("caught_up", caught), zap.Error(cerr))
	}
	return out, nil
}

// immutableProgress is the heartbeat of a copy: each file's multipart
// upload, and the bytes of the sets it copies.
type immutableProgress struct {
	mu    sync.Mutex
	files map[string]*s3.UploadProgress
	total int64
}

func (p *immutableProgress) state() ImmutableHeartbeat {
	p.mu.Lock()
	defer p.mu.Unlock()
	files := make(map[string]*s3.UploadProgress, len(p.files))
	var done int64
	for k, u := range p.files {
		cp := *u
		cp.Parts = append([]int32(nil), u.Parts...)
		files[k] = &cp
		switch {
		case u.Done:
			done += u.Size
		case u.PartSize > 0:
			for _, n := range u.Parts { // the last part is shorter
				done += max(min(u.PartSize, u.Size-int64(n-1)*u.PartSize), 0)
			}
		}
	}
	pct := 0.0
	if p.total > 0 {
		pct = min(100, 100*float64(done)/float64(p.total))
	}
	return ImmutableHeartbeat{Files: files, Percent: pct, Bytes: done}
}

// uploadSet copies a verified set's stripes to the store, each locked
// with lock, and then its manifest as it was when verified (signed): a
// manifest on the store says its stripes are all there. It returns the
// objects as the store holds them, the set's bytes and those sent.
func (a *Activities) uploadSet(ctx context.Context, store *s3.Store, src storage.Storage, m *catalog.Manifest, lock s3.Lock,
	target *config.BackupServer, prog *immutableProgress) (objects []catalog.ImmutableObject, size, sent int64, err error) {
	d := &a.Cycle
	jobs := make([]s3.UploadJob, len(m.Stripes))
	prog.mu.Lock()
	for i, s := range m.Stripes {
		jobs[i] = s3.UploadJob{Src: s.Name, Name: s.Name, SHA256: s.SHA256, Resume: prog.files[s.Name]}
		prog.total += s.Size
	}
	prog.mu.Unlock()
	results, err := store.UploadAll(ctx, src, jobs, s3.UploadOptions{
		PartSize: int64(target.S3.PartSize),
		Limit:    activities.Bandwidth(a.Activities, target),
		Progress: func(p s3.UploadProgress) {
			prog.mu.Lock()
			prev := prog.files[p.File]
			cp := p
			if p.UploadID == "" && prev != nil && !p.Done {
				// A read-back report: keep the upload's checkpoint.
				cp.UploadID, cp.PartSize, cp.Parts = prev.UploadID, prev.PartSize, prev.Parts
			}
			prog.files[p.File] = &cp
			prog.mu.Unlock()
			activities.Heartbeat(ctx, prog.state())
		},
	})
	if err != nil {
		return nil, 0, 0, a.uploadError(target.Name, src, err)
	}
	log := activities.Logger(a.Activities, ctx).With(zap.String("db", m.Database), zap.Int64("seq", m.Sequence), zap.String("server", target.Name))
	for i, r := range results {
		if r.ResumedParts > 0 {
			log.Info("stripe upload resumed: the parts the object store held were not sent again", zap.String("file", r.Name),
				zap.Int("resumed_parts", r.ResumedParts), zap.Int64("sent", r.BytesSent), zap.Int64("size", r.Size))
		}
		if r.Adopted {
			log.Info("stripe upload continued from an upload left in progress whose id no heartbeat recorded", zap.String("file", r.Name),
				zap.Int("resumed_parts", r.ResumedParts), zap.Int("aborted_duplicates", r.AbortedOwn))
		}
		if r.UnlistedUploads != "" {
			log.Warn("uploads in progress not listed: the stripe went into a new upload, an earlier attempt's is left to the bucket's lifecycle rule; "+
				"grant the worker's user s3:ListBucketMultipartUploads (README \"Immutable copies on object storage\")",
				zap.String("file", r.Name), zap.String("error", r.UnlistedUploads))
		}
		if r.ResumeRejected {
			log.Warn("upload checkpoint did not hold: stripe sent from the start", zap.String("file", r.Name))
		}
		if r.Replaced {
			log.Warn("the object store held other content under the stripe's name: written as a new version above it", zap.String("file", r.Name))
		}
		objects = append(objects, catalog.ImmutableObject{Name: r.Name, VersionID: r.VersionID, SHA256: m.Stripes[i].SHA256, Size: r.Size})
		size += r.Size
		sent += r.BytesSent
	}
	keys, err := d.ManifestKeys()
	if err != nil {
		return nil, 0, 0, err
	}
	verified := *m
	verified.Immutable = nil // as it was when verified: what the store holds is that manifest, whatever was recorded since
	body, err := catalog.EncodeSigned(&verified, keys)
	if err != nil {
		return nil, 0, 0, activities.NonRetryable(activities.ErrImmutableCopyFailed, fmt.Errorf("manifest of %s/%s seq %d: %w", m.SourceInstance, m.Database, m.Sequence, err))
	}
	mr := store.PutChecked(ctx, m.FileName(), body, lock)
	if mr.Err != nil {
		return nil, 0, 0, a.uploadError(target.Name, src, mr.Err)
	}
	objects = append(objects, catalog.ImmutableObject{Name: mr.Name, VersionID: mr.VersionID, SHA256: mr.SHA256Hex, Size: mr.Size})
	return objects, size, sent + mr.BytesSent, nil
}

// ImmutableCatchUp is how many earlier sets one immutable copy also
// copies, oldest first: a long outage heals over a few cycles instead of
// holding one cycle's copy step for all of them.
const ImmutableCatchUp = 3

// catchUpImmutable copies up to ImmutableCatchUp of the database's
// earlier verified fulls that the backup servers of in still keep and
// whose manifest records no copy on target (failed, never made, found not
// immutable, or on another store), oldest first, each locked as this run's
// set (cur: its record) and recorded in its manifests the same way. A
// failure is recorded in that set's manifests; one of the store stops
// the catch-up, one of the set alone (a stripe that no longer hashes as
// its manifest says) goes on to the next set.
// A retry finds the sets already copied recorded so, and skips them.
func (a *Activities) catchUpImmutable(ctx context.Context, db *config.Database, in ImmutableInput, target *config.BackupServer,
	store *s3.Store, lock s3.Lock, cur *catalog.ImmutableCopy, prog *immutableProgress) ([]int64, error) {
	d := &a.Cycle
	due, err := a.immutableDue(ctx, db, in, target.Name)
	if err != nil {
		return nil, err
	}
	var done []int64
	var errs []error
	var toCopy []dueSet
	for _, set := range due {
		if set.copied == nil {
			toCopy = append(toCopy, set)
			continue
		}
		// Copied: one holder's manifest lost the record (its server was
		// down when the copy ended). Write it there; send nothing again.
		sin := in
		sin.Sequence, sin.Servers = set.seq, set.servers
		if err := a.recordImmutable(ctx, db, sin, set.copied, true); err != nil {
			activities.Logger(a.Activities, ctx).Warn("immutable copy's record not repaired", zap.String("db", db.Name), zap.Int64("seq", set.seq),
				zap.Strings("servers", set.servers), zap.Error(err))
			continue
		}
		activities.Logger(a.Activities, ctx).Info("immutable copy's record repaired", zap.String("db", db.Name), zap.Int64("seq", set.seq),
			zap.Strings("servers", set.servers), zap.String("server", target.Name))
	}
	for _, set := range toCopy[:min(len(toCopy), ImmutableCatchUp)] {
		sin := in
		sin.Sequence, sin.Servers = set.seq, set.servers
		start := time.Now()
		rec := &catalog.ImmutableCopy{Server: target.Name, Location: cur.Location, Mode: lock.Mode, RetainUntil: lock.Until, Probe: cur.Probe}
		src, from, m, err := a.verifiedSourceOf(ctx, db, sin, true)
		var objects []catalog.ImmutableObject
		var sent int64
		if err == nil {
			objects, _, sent, err = a.uploadSet(ctx, store, src, m, lock, target, prog)
			src.Close()
		}
		if err != nil {
			rec.State, rec.At, rec.Error = catalog.ImmutableFailed, d.Clock().UTC(), err.Error()
			if rerr := a.recordImmutable(ctx, db, sin, rec, true); rerr != nil {
				activities.Logger(a.Activities, ctx).Warn("immutable copy's failure not recorded in the manifests", zap.String("db", db.Name), zap.Int64("seq", set.seq), zap.Error(rerr))
			}
			errs = append(errs, fmt.Errorf("catching up the immutable copy of %s seq %d: %w", db.ID(), set.seq, err))
			if !setOnly(err) {
				break // the store's: the next set meets it too
			}
			continue // this set's (its stripes, its holders): the others still go
		}
		rec.State, rec.At, rec.Objects = catalog.ImmutableCopied, d.Clock().UTC(), objects
		if err := a.recordImmutable(ctx, db, sin, rec, true); err != nil {
			errs = append(errs, fmt.Errorf("catching up the immutable copy of %s seq %d: %w", db.ID(), set.seq, err))
			continue
		}
		took := time.Since(start)
		activities.Logger(a.Activities, ctx).Info("immutable copy caught up", zap.String("db", db.Name), zap.String("instance", db.Instance), zap.Int64("seq", set.seq),
			zap.String("server", target.Name), zap.String("from", from), zap.Int("objects", len(objects)), zap.Int64("sent", sent),
			zap.Time("retain_until", lock.Until), zap.Duration("duration", took))
		activities.Recorder(a.Activities).StepDone(metrics.StepImmutable, db.Instance, db.Name, target.Name, sent, took)
		done = append(done, set.seq)
	}
	return done, errors.Join(errs...)
}

// setOnly reports a catch-up failure of the set itself (a stripe that no
// longer hashes as its manifest says, no holder readable), which does not
// stop the copy of the next set.
func setOnly(err error) bool {
	t := activities.ErrorType(err)
	return t == activities.ErrImmutableCopyFailed || t == activities.ErrBackupTargetUnreachable || t == activities.ErrSequenceInUse
}

// dueSet is a verified set still without its immutable copy, and the
// servers of the copy's input holding it verified; or, with copied, a set
// one holder records copied and servers do not.
type dueSet struct {
	seq     int64
	m       *catalog.Manifest
	servers []string
	copied  *catalog.ImmutableCopy
}

// immutableDue lists the verified fulls of the database on in's servers,
// other than in's set, whose manifest records no copy on target, oldest
// first. A server that cannot be listed is skipped; none, an error.
func (a *Activities) immutableDue(ctx context.Context, db *config.Database, in ImmutableInput, target string) ([]dueSet, error) {
	bySeq := map[int64]*dueSet{}
	copied := map[int64]*catalog.ImmutableCopy{}
	var errs []error
	listed := 0
	for _, name := range in.Servers {
		l, err := activities.ListManifests(a.Activities, ctx, name, db)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		listed++
		for _, m := range l.Manifests {
			if !m.Trusted() || m.State != catalog.StateVerified || m.IsDifferential() || m.Sequence == in.Sequence {
				continue
			}
			if im := m.Immutable; im != nil && im.State == catalog.ImmutableCopied && im.Server == target {
				copied[m.Sequence] = im
				continue
			}
			s := bySeq[m.Sequence]
			if s == nil {
				s = &dueSet{seq: m.Sequence, m: m}
				bySeq[m.Sequence] = s
			}
			s.servers = append(s.servers, name)
		}
	}
	if listed == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out := make([]dueSet, 0, len(bySeq))
	for _, s := range bySeq {
		s.copied = copied[s.seq]
		out = append(out, *s)
	}
	slices.SortFunc(out, func(x, y dueSet) int {
		switch {
		case y.m.Newer(x.m):
			return -1
		case x.m.Newer(y.m):
			return 1
		}
		return cmp.Compare(x.seq, y.seq)
	})
	return out, nil
}

// verifiedSource opens the first holder of the set that answers and loads
// its manifest, which must say verified (and be this run's).
func (a *Activities) verifiedSource(ctx context.Context, db *config.Database, in ImmutableInput) (storage.Storage, string, *catalog.Manifest, error) {
	return a.verifiedSourceOf(ctx, db, in, false)
}

// verifiedSourceOf is verifiedSource; anyRun takes a verified set of
// any run (an earlier cycle's, caught up), authenticated.
func (a *Activities) verifiedSourceOf(ctx context.Context, db *config.Database, in ImmutableInput, anyRun bool) (storage.Storage, string, *catalog.Manifest, error) {
	d := &a.Cycle
	var errs []error
	for _, name := range in.Servers {
		srv, err := d.Server(name)
		if err != nil {
			return nil, "", nil, err
		}
		st, err := d.OpenServer(ctx, srv)
		if err != nil {
			if slices.Contains(activities.NonRetryableErrorTypes, activities.ErrorType(err)) {
				return nil, "", nil, err
			}
			errs = append(errs, err)
			continue
		}
		m, err := d.LoadManifest(ctx, st, db, in.Sequence)
		switch {
		case err == nil && anyRun && !m.Trusted():
			err = activities.Untrusted(m, name)
		case err == nil && !anyRun:
			err = activities.OwnedByThisRun(ctx, m, name)
		}
		if err == nil && m.State != catalog.StateVerified {
			err = activities.NonRetryable(activities.ErrImmutableCopyFailed, fmt.Errorf("set %d of %s on %s is %s: only a verified set is copied to the object store",
				in.Sequence, db.ID(), name, m.State))
		}
		if err != nil {
			st.Close()
			if activities.IsAppError(err) {
				return nil, "", nil, err
			}
			errs = append(errs, activities.StorageError(name, err))
			continue
		}
		return st, name, m, nil
	}
	return nil, "", nil, activities.Retryable(activities.ErrBackupTargetUnreachable, fmt.Errorf("no holder of %s seq %d could be read: %w", db.ID(), in.Sequence, errors.Join(errs...)))
}

// probeImmutable returns the store's newest probe when it is recent and
// passed, else probes now, with the privilege checks of the key, and
// records the result on the store.
func (a *Activities) probeImmutable(ctx context.Context, store *s3.Store, target *config.BackupServer) (s3.ProbeResult, bool, error) {
	now := time.Now() // the probe's own clock
	last, err := store.ReadProbeRecord(ctx)
	if err == nil && last.Immutable && last.Mode == target.S3.LockMode && last.Location == store.Location() &&
		!last.At.After(now) && now.Sub(last.At) < ProbeEvery {
		return last, false, nil
	}
	if err != nil && !errors.Is(err, storage.ErrNotFound) && !errors.Is(err, storage.ErrCorrupt) {
		return s3.ProbeResult{}, false, err
	}
	res, err := store.Probe(ctx, target.S3.LockMode)
	if err != nil {
		return res, false, err
	}
	// What the key may do beyond the worker's needs, as preflight checks
	// it: a key that could make the next copies deletable fails the probe.
	began := time.Now()
	privs, err := store.Privileges(ctx)
	if err != nil {
		return res, false, err
	}
	res.AddPrivileges(target.S3.AccessKeyID, privs, time.Since(began))
	for _, w := range res.Warnings {
		activities.Logger(a.Activities, ctx).Warn("the worker's key may do more than it needs on the object store", zap.String("server", target.Name), zap.String("why", w))
	}
	activities.Logger(a.Activities, ctx).Info("object store probed", zap.String("server", target.Name), zap.Bool("immutable", res.Immutable),
		zap.String("verdict", res.Summary()), zap.Duration("took", res.Duration))
	activities.Recorder(a.Activities).ImmutableProbed(target.Name, res.Immutable, res.At)
	if err := store.WriteProbeRecord(ctx, res); err != nil {
		// The verdict stands; the next copy probes again.
		activities.Logger(a.Activities, ctx).Warn("probe result not recorded on the object store", zap.String("server", target.Name), zap.Error(err))
	}
	return res, true, nil
}

// recordImmutable records the immutable copy in the set's manifest on each
// holder; anyRun for a set of an earlier run (caught up).
func (a *Activities) recordImmutable(ctx context.Context, db *config.Database, in ImmutableInput, rec *catalog.ImmutableCopy, anyRun bool) error {
	_, err := activities.UpdateManifestOf(a.Activities, ctx, db, in.Sequence, in.Servers, nil, anyRun, func(m *catalog.Manifest) error {
		if m == nil {
			return activities.NonRetryable(activities.ErrImmutableCopyFailed, fmt.Errorf("no manifest of %s seq %d on %v", db.ID(), in.Sequence, in.Servers))
		}
		if m.State != catalog.StateVerified {
			return activities.NonRetryable(activities.ErrImmutableCopyFailed, fmt.Errorf("set %d of %s is %s: only a verified set is copied", in.Sequence, db.ID(), m.State))
		}
		cp := *rec
		m.Immutable = &cp
		return nil
	})
	return err
}

// uploadError classifies an upload's failure: the source no longer as its
// manifest says is ImmutableCopyFailed (no retry changes the source), the
// rest as objectStoreError.
func (a *Activities) uploadError(server string, src storage.Storage, err error) error {
	var se *storage.Error
	if errors.As(err, &se) && se.Location == src.Location() {
		if errors.Is(err, storage.ErrCorrupt) {
			return activities.NonRetryable(activities.ErrImmutableCopyFailed, fmt.Errorf("%w: the set's stripe on the backup server differs from its manifest; "+
				"the set needs a look (starter run --resume is not affected, the next cycle takes a new set)", err))
		}
		return activities.StorageError(se.Location, err)
	}
	return activities.ObjectStoreError(server, err)
}
