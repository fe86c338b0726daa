package cycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/metrics"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
)

// CopyHeartbeat is what CopyToRemote records: each stripe's resumable
// checkpoint (offset + serialized SHA-256 state).
type CopyHeartbeat struct {
	Files   map[string]*copier.Progress `json:"files"`
	Percent float64                     `json:"percent"`
	Bytes   int64                       `json:"bytes"`
	// SentBefore is what earlier attempts wrote to the remote server.
	SentBefore int64 `json:"sent_before,omitempty"`
}

// CopyToRemote copies every stripe of the set to the remote server (several
// in parallel, hashed while streaming, verified at the destination), resuming
// from the heartbeat's checkpoints after a retry; the manifest is copied last
// with the hashes and state copied.
func (a *Activities) CopyToRemote(ctx context.Context, in activities.CopyInput) (activities.CopyOutput, error) {
	d := &a.Cycle
	db, err := d.DatabaseEntry(in.Instance, in.Database, in.Entry)
	if err != nil {
		return activities.CopyOutput{}, err
	}
	// From a server of the rotation to its copy target, as configured.
	from, err := d.RotationServer(db, "copy source", in.From)
	if err != nil {
		return activities.CopyOutput{}, err
	}
	if target := db.CopyTarget(from.Name); in.To != target {
		return activities.CopyOutput{}, d.NotOfDatabase(db, "copy target", in.To, "the copy target of "+from.Name, []string{target})
	}
	to, err := d.Server(in.To)
	if err != nil {
		return activities.CopyOutput{}, err
	}
	src, err := d.OpenServer(ctx, from)
	if err != nil {
		return activities.CopyOutput{}, err
	}
	defer src.Close()
	m, err := d.LoadManifest(ctx, src, db, in.Sequence)
	if err != nil {
		return activities.CopyOutput{}, activities.StorageError(from.Name, err)
	}
	if err := activities.OwnedByThisRun(ctx, m, from.Name); err != nil {
		return activities.CopyOutput{}, err
	}
	dst, err := d.OpenServer(ctx, to)
	if err != nil {
		return activities.CopyOutput{}, err
	}
	defer dst.Close()
	// The remote may hold a set of another run under this number (used
	// while that server could not be read): never copy over it, never
	// replace its manifest.
	if rm, err := d.LoadManifest(ctx, dst, db, in.Sequence); err == nil {
		if err := activities.OwnedByThisRun(ctx, rm, to.Name); err != nil {
			return activities.CopyOutput{}, err
		}
	}

	var hb CopyHeartbeat
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &hb)
	}
	if hb.Files == nil {
		hb.Files = map[string]*copier.Progress{}
	}
	// What the previous attempt sent, counted once: this attempt's
	// progress reports only its own bytes.
	for _, p := range hb.Files {
		hb.SentBefore += p.BytesSent
		p.BytesSent = 0
	}
	var total int64
	jobs := make([]copier.Job, len(m.Stripes))
	for i, s := range m.Stripes {
		jobs[i] = copier.Job{Src: s.Name, Dst: s.Name, Resume: hb.Files[s.Name]}
		total += s.Size
	}
	rep := activities.NewReporter(a.Activities, ctx, activities.StepCopy, in.Sequence)
	var mu sync.Mutex
	state := func() any {
		mu.Lock()
		defer mu.Unlock()
		var done int64
		files := make(map[string]*copier.Progress, len(hb.Files))
		for k, p := range hb.Files {
			cp := *p
			files[k] = &cp
			done += p.Offset
		}
		pct := 0.0
		if total > 0 {
			pct = 100 * float64(done) / float64(total)
		}
		return CopyHeartbeat{Files: files, Percent: pct, Bytes: done, SentBefore: hb.SentBefore}
	}
	stop := rep.Every(d.PollEvery(), nil, func(float64, int64) any {
		s := state().(CopyHeartbeat)
		rep.Set(s.Percent, s.Bytes)
		return s
	})
	defer stop()

	start := time.Now()
	c := copier.New(copier.Options{
		// One limiter per destination server: concurrent copies into it share the limit.
		Limit: activities.Bandwidth(a.Activities, to),
		Progress: func(p copier.Progress) {
			mu.Lock()
			cp := p
			cp.Ahead = nil // keep heartbeats small: resume re-sends the unconfirmed tail
			hb.Files[p.File] = &cp
			mu.Unlock()
			// The SDK throttles what it sends; recording every checkpoint
			// keeps the one reported with a failure current.
			activities.Heartbeat(ctx, state())
		},
	})
	results, err := c.Copy(ctx, src, dst, jobs)
	if err != nil {
		if errors.Is(err, copier.ErrDifferentContent) {
			return activities.CopyOutput{}, activities.NonRetryable(activities.ErrSequenceInUse, fmt.Errorf(
				"copy of %s seq %d to %s: %w; files of another run use this number there and are left untouched", db.ID(), in.Sequence, to.Name, err))
		}
		return activities.CopyOutput{}, activities.StorageError(to.Name, err)
	}
	out := activities.CopyOutput{Duration: time.Since(start)}
	for i, r := range results {
		if r.ResumeRejected {
			// The heartbeat's checkpoint is a hint: one that does not hold
			// for the partial file on disk (a forged or stale heartbeat)
			// costs a copy from the start, never an error.
			activities.Logger(a.Activities, ctx).Warn("copy checkpoint did not hold for the partial file: stripe copied again from the start",
				zap.String("db", db.Name), zap.Int64("seq", in.Sequence), zap.String("server", to.Name), zap.String("file", r.Dst))
		}
		m.Stripes[i].SHA256 = r.SHA256
		out.Bytes += r.Size
		out.Sent += r.BytesSent
		out.Resumed += r.ResumedAt
	}
	out.Resent = max(0, hb.SentBefore+out.Sent-out.Bytes)
	now := d.Clock()
	m.AddServer(to.Name)
	if err := activities.Advance(m, catalog.StateCopied, now); err != nil {
		return activities.CopyOutput{}, activities.NonRetryable(activities.ErrCorruptBackup, err)
	}
	_ = m.SetTiming(catalog.StepCopy, now.Add(-out.Duration), now)
	// Remote first: the manifest there is what says "this copy is complete".
	if err := d.SaveManifest(ctx, dst, m); err != nil {
		return activities.CopyOutput{}, activities.StorageError(to.Name, err)
	}
	if err := d.SaveManifest(ctx, src, m); err != nil {
		return activities.CopyOutput{}, activities.StorageError(from.Name, err)
	}
	activities.Logger(a.Activities, ctx).Info("set copied", zap.String("db", db.Name), zap.Int64("seq", in.Sequence),
		zap.String("server", to.Name), zap.Int64("bytes", out.Bytes), zap.Duration("duration", out.Duration))
	activities.Recorder(a.Activities).StepDone(metrics.StepCopy, db.Instance, db.Name, to.Name, out.Bytes, out.Duration)
	return out, nil
}
