package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// errNotWired is returned when the worker was started without a backup
// configuration.
var errNotWired = temporal.NewNonRetryableApplicationError(
	"backup cycle activities are not configured in this worker: start it with a backupcycle config (worker --config)",
	ErrInvalidConfig, errors.New("Activities.Cycle.Config is nil"))

// statsPercent is the STATS = n of BACKUP and RESTORE: a progress message
// every n percent.
const statsPercent = 5

// PlanCycle decides the cycle: the round-robin primary (from the caller or
// the manifests on the rotation's servers), the fail-over order, the stripe
// count and the memory guard.
func (a *Activities) PlanCycle(ctx context.Context, in PlanInput) (Plan, error) {
	d := &a.Cycle
	db, err := d.database(in.Instance, in.Database)
	if err != nil {
		return Plan{}, err
	}
	log := a.loggerFor(ctx).With(zap.String("db", db.Name))
	last, source := in.LastServer, "caller"
	unreachable := map[string]bool{}
	if last == "" {
		var all []*catalog.Manifest
		for _, name := range db.BackupServers {
			listing, err := a.listManifests(ctx, name, db.Name)
			var appErr *temporal.ApplicationError
			if errors.As(err, &appErr) && appErr.NonRetryable() {
				// Wrong location or credentials: stop before any SQL runs.
				return Plan{}, err
			}
			if err != nil {
				// An unreachable server cannot tell what it holds; the
				// others still can, and the backup step fails over.
				log.Warn("backup server not readable while planning", zap.String("server", name), zap.Error(err))
				unreachable[name] = true
				continue
			}
			all = append(all, listing.Manifests...)
		}
		last, source = catalog.LastServer(db.Name, all), "manifests"
		if last == "" {
			source = "none"
		}
	}
	primary, err := plan.NextServer(db.BackupServers, last, unreachable)
	if errors.Is(err, plan.ErrNoServerReachable) {
		// Let the backup step find out and wait for a server.
		primary, err = plan.NextServer(db.BackupServers, last, nil)
	}
	if err != nil {
		return Plan{}, nonRetryable(ErrInvalidConfig, err)
	}
	i := slices.Index(db.BackupServers, primary)
	rotation := append(slices.Clone(db.BackupServers[i:]), db.BackupServers[:i]...)

	srv, err := d.server(primary)
	if err != nil {
		return Plan{}, err
	}
	stripes := int(db.Stripes)
	if db.Stripes == config.StripesAuto {
		stripes, err = plan.AutoStripes(0, len(srv.UNCPaths), 0)
	} else {
		err = plan.CheckBalance(stripes, len(srv.UNCPaths))
	}
	if err != nil {
		return Plan{}, nonRetryable(ErrInvalidConfig, fmt.Errorf("database %s: %w", db.ID(), err))
	}
	if err := tsql.CheckTuning(db.BufferCount, int(db.MaxTransferSize), int(db.BlockSize)); err != nil {
		return Plan{}, nonRetryable(ErrInvalidConfig, fmt.Errorf("database %s: %w", db.ID(), err))
	}
	tuning := plan.Tuning{Stripes: stripes, BufferCount: db.BufferCount, MaxTransferSize: int(db.MaxTransferSize), BlockSize: int(db.BlockSize)}
	if err := plan.CheckTuning(tuning, 1, int64(db.MemoryBudget)); err != nil {
		return Plan{}, nonRetryable(ErrInsufficientMemory, fmt.Errorf("database %s: %w", db.ID(), err))
	}

	p := Plan{
		Database: db.Name, Instance: db.Instance, Rotation: rotation, LastServer: last, LastServerSource: source,
		Stripes: stripes, Remote: db.CopyTarget(primary), Remotes: map[string]string{},
		KeepVerifyDB: db.KeepVerifyDB, MemoryBytes: plan.BackupMemory(tuning, 1),
		Limits: Limits{
			HostWait: db.SQLHostWait.GiveUpAfter, ServerWait: db.BackupServerWait.GiveUpAfter,
			WaitInitial: db.SQLHostWait.Initial, WaitMax: db.SQLHostWait.MaxInterval,
			CopyDeadline: db.CopyDeadline, CopyRetry: db.CopyWait.Initial, CopyRetryMax: db.CopyWait.MaxInterval,
			Heartbeat: d.HeartbeatTimeout,
		},
	}
	for _, s := range rotation {
		target := db.CopyTarget(s)
		if target == "" || target == s {
			return Plan{}, nonRetryable(ErrInvalidConfig, fmt.Errorf(
				"database %s: no remote copy target for backups on %s: set copy_to, or list a second backup server", db.ID(), s))
		}
		remote, err := d.server(target)
		if err != nil {
			return Plan{}, err
		}
		if remote.VerifyInstance == "" {
			return Plan{}, nonRetryable(ErrInvalidConfig, fmt.Errorf(
				"backup server %s receives the remote copy of %s but has no verify_instance to restore it: set verify_instance", target, db.ID()))
		}
		p.Remotes[s] = target
	}
	remote, _ := d.server(p.Remote)
	p.VerifyInstance = remote.VerifyInstance
	log.Info("cycle planned", zap.String("server", primary), zap.String("last_server", last),
		zap.String("last_server_source", source), zap.Int("stripes", stripes), zap.String("remote", p.Remote))
	return p, nil
}

// AllocateSequence returns a new, never used, backup sequence number: the
// seed's DBBackup.Sequence table in the database (created if absent), or the
// UTC time of the call.
func (a *Activities) AllocateSequence(ctx context.Context, in SequenceInput) (int64, error) {
	d := &a.Cycle
	db, err := d.database(in.Instance, in.Database)
	if err != nil {
		return 0, err
	}
	if db.Sequence == config.SequenceUTC {
		n, err := utcSequence(d.now())
		return n, err
	}
	inst, err := d.instance(db.Instance)
	if err != nil {
		return 0, err
	}
	setup, err := tsql.SequenceSetup(db.Name)
	if err != nil {
		return 0, nonRetryable(ErrInvalidConfig, err)
	}
	next, err := tsql.SequenceNext(db.Name)
	if err != nil {
		return 0, nonRetryable(ErrInvalidConfig, err)
	}
	sqlDB, err := d.openSQL(ctx, inst, "master")
	if err != nil {
		return 0, err
	}
	defer sqlDB.Close()
	for _, stmt := range setup {
		if _, err := sqlDB.Run(ctx, "create the backup sequence table", stmt, nil); err != nil {
			return 0, sqlError(err)
		}
	}
	v, ok, err := sqlDB.QueryValue(ctx, "allocate a backup sequence number", next)
	if err != nil {
		return 0, sqlError(err)
	}
	n, isInt := v.(int64)
	if !ok || !isInt || n <= 0 {
		return 0, temporal.NewApplicationError(fmt.Sprintf("sequence table of %s returned %v, want a positive number", db.ID(), v), "SQLError")
	}
	a.loggerFor(ctx).Info("sequence allocated", zap.String("db", db.Name), zap.Int64("seq", n))
	return n, nil
}

// utcSequence is yyyymmddhhmmss of t in UTC.
func utcSequence(t time.Time) (int64, error) {
	var n int64
	_, err := fmt.Sscan(t.UTC().Format("20060102150405"), &n)
	return n, err
}

// BackupHeartbeat is what Backup records in its heartbeats.
type BackupHeartbeat struct {
	Started bool    `json:"started"`
	Percent float64 `json:"percent"`
	Bytes   int64   `json:"bytes"`
}

// Backup runs BACKUP DATABASE ... WITH CHECKSUM, INIT, FORMAT, STATS to the
// stripes of one sequence on one backup server, heartbeating percent and the
// bytes on the share. A retry first looks for its statement still running
// (sys.dm_exec_requests) and waits for it, and recognises a backup that
// finished unseen (RESTORE HEADERONLY), instead of starting another one.
func (a *Activities) Backup(ctx context.Context, in BackupInput) (BackupOutput, error) {
	d := &a.Cycle
	db, err := d.database(in.Instance, in.Database)
	if err != nil {
		return BackupOutput{}, err
	}
	inst, err := d.instance(db.Instance)
	if err != nil {
		return BackupOutput{}, err
	}
	srv, err := d.server(in.Server)
	if err != nil {
		return BackupOutput{}, err
	}
	log := a.loggerFor(ctx).With(zap.String("db", db.Name), zap.Int64("seq", in.Sequence), zap.String("server", srv.Name),
		zap.String("step", StepBackup))
	layout, err := tsql.Layout(srv.UNCPaths, db.Name, in.Sequence, in.Stripes)
	if err != nil {
		return BackupOutput{}, nonRetryable(ErrInvalidConfig, err)
	}
	compression := db.Compression
	stmt, err := tsql.BackupDatabase(tsql.BackupOptions{
		Database: db.Name, Disks: tsql.Paths(layout), Checksum: true, Init: true, Format: true,
		Compression: &compression, CopyOnly: db.CopyOnly, Stats: statsPercent,
		BufferCount: db.BufferCount, MaxTransferSize: int(db.MaxTransferSize), BlockSize: int(db.BlockSize),
		Name: tsql.BackupSetName(in.Sequence),
	})
	if err != nil {
		return BackupOutput{}, nonRetryable(ErrInvalidConfig, err)
	}
	st, err := d.openStorage(ctx, srv)
	if err != nil {
		return BackupOutput{}, err
	}
	defer st.Close()
	sqlDB, err := d.openSQL(ctx, inst, "master")
	if err != nil {
		return BackupOutput{}, err
	}
	defer sqlDB.Close()

	rep := a.newReporter(ctx, StepBackup, in.Sequence)
	sizes := func() int64 {
		var n int64
		for _, s := range layout {
			if fi, err := st.Stat(ctx, s.Name); err == nil {
				n += fi.Size
			}
		}
		return n
	}
	start := time.Now()
	stop := rep.every(d.poll(), sizes, func(p float64, b int64) any {
		return BackupHeartbeat{Started: true, Percent: p, Bytes: b}
	})
	defer stop()

	// A retry: is our BACKUP still running, or did it finish unseen?
	if isRetry(ctx) {
		if out, ok := a.reattachBackup(ctx, sqlDB, st, db, layout, in.Sequence, rep, log); ok {
			return out, nil
		}
	}

	log.Info("backup starting", zap.Int("stripes", len(layout)))
	res, err := sqlDB.Run(ctx, "BACKUP DATABASE", stmt, func(m mssql.Message) {
		if m.Percent >= 0 {
			rep.setPercent(float64(m.Percent))
		}
	})
	if err != nil {
		pct, _ := rep.get()
		log.Warn("backup failed", zap.Float64("percent", pct), zap.Error(err))
		return BackupOutput{}, sqlError(err, BackupFailure{Started: true, Percent: pct})
	}
	out, err := finishedBackup(ctx, st, srv, layout, time.Since(start))
	if err != nil {
		return BackupOutput{}, err
	}
	if res.Summary != nil {
		out.Pages = res.Summary.Pages
	}
	log.Info("backup done", zap.Int64("bytes", out.Bytes), zap.Duration("duration", out.Duration))
	return out, nil
}

// reattachBackup waits for this database's BACKUP still running from an
// earlier attempt and reports a backup set already complete on our stripes.
func (a *Activities) reattachBackup(ctx context.Context, sqlDB *mssql.DB, st storage.Storage, db *config.Database,
	layout []tsql.Stripe, seq int64, rep *reporter, log *zap.Logger) (BackupOutput, bool) {
	start := time.Now()
	q, args, err := tsql.InFlightRequests(db.Name, tsql.CommandBackupDatabase)
	if err != nil {
		return BackupOutput{}, false
	}
	reqs, err := sqlDB.Requests(ctx, q, args...)
	if err == nil && len(reqs) > 0 {
		log.Info("re-attaching to the running BACKUP", zap.Int64("session", reqs[0].SessionID))
		err = sqlDB.WaitRequest(ctx, reqs[0].SessionID, a.Cycle.poll(), func(p float64) { rep.setPercent(p) }, q, args...)
		if err != nil {
			return BackupOutput{}, false
		}
	}
	hq, err := tsql.RestoreHeaderOnly(tsql.Paths(layout))
	if err != nil {
		return BackupOutput{}, false
	}
	hs, err := sqlDB.HeaderOnly(ctx, hq)
	if err != nil || len(hs) == 0 || hs[0].BackupName != tsql.BackupSetName(seq) || hs[0].BackupFinishDate.IsZero() {
		return BackupOutput{}, false // not ours or not complete: back up again
	}
	out, err := finishedBackup(ctx, st, nil, layout, time.Since(start))
	if err != nil {
		return BackupOutput{}, false
	}
	out.Reattached = true
	if !hs[0].BackupStartDate.IsZero() {
		out.Duration = hs[0].BackupFinishDate.Sub(hs[0].BackupStartDate)
	}
	log.Info("backup finished while no worker watched it: not running it again")
	return out, true
}

// finishedBackup checks that the worker sees every stripe SQL Server wrote
// and measures them.
func finishedBackup(ctx context.Context, st storage.Storage, srv *config.BackupServer, layout []tsql.Stripe, took time.Duration) (BackupOutput, error) {
	out := BackupOutput{Duration: took}
	for _, s := range layout {
		fi, err := st.Stat(ctx, s.Name)
		if errors.Is(err, storage.ErrNotFound) {
			where := st.Location()
			return BackupOutput{}, nonRetryable(ErrInvalidConfig, fmt.Errorf(
				"SQL Server wrote %s but the worker does not see %s in %s: the backup server's location must be the directory its unc_paths point to",
				s.Path, s.Name, where))
		}
		if err != nil {
			name := ""
			if srv != nil {
				name = srv.Name
			}
			return BackupOutput{}, storageError(name, err)
		}
		out.Stripes = append(out.Stripes, Stripe{Name: s.Name, Path: s.Path, Size: fi.Size})
		out.Bytes += fi.Size
	}
	return out, nil
}

// WriteManifest reads the set's RESTORE HEADERONLY and writes its manifest
// (state written) beside the stripes on the primary server.
func (a *Activities) WriteManifest(ctx context.Context, in ManifestInput) (ManifestOutput, error) {
	d := &a.Cycle
	db, err := d.database(in.Instance, in.Database)
	if err != nil {
		return ManifestOutput{}, err
	}
	inst, err := d.instance(db.Instance)
	if err != nil {
		return ManifestOutput{}, err
	}
	srv, err := d.server(in.Server)
	if err != nil {
		return ManifestOutput{}, err
	}
	if len(in.Backup.Stripes) == 0 {
		return ManifestOutput{}, nonRetryable(ErrInvalidConfig, fmt.Errorf("manifest of %s seq %d: the backup reported no stripes", db.ID(), in.Sequence))
	}
	paths := make([]string, len(in.Backup.Stripes))
	for i, s := range in.Backup.Stripes {
		paths[i] = s.Path
	}
	hq, err := tsql.RestoreHeaderOnly(paths)
	if err != nil {
		return ManifestOutput{}, nonRetryable(ErrInvalidConfig, err)
	}
	sqlDB, err := d.openSQL(ctx, inst, "master")
	if err != nil {
		return ManifestOutput{}, err
	}
	defer sqlDB.Close()
	hs, err := sqlDB.HeaderOnly(ctx, hq)
	if err != nil {
		return ManifestOutput{}, sqlError(err)
	}
	if len(hs) == 0 {
		return ManifestOutput{}, nonRetryable(ErrCorruptBackup, fmt.Errorf("RESTORE HEADERONLY of %s seq %d returned no backup set", db.ID(), in.Sequence))
	}
	h := hs[0]
	if !strings.EqualFold(h.DatabaseName, db.Name) || (h.BackupName != "" && h.BackupName != tsql.BackupSetName(in.Sequence)) {
		return ManifestOutput{}, nonRetryable(ErrCorruptBackup, fmt.Errorf(
			"stripes of %s seq %d hold backup %q of database %q, not this set", db.ID(), in.Sequence, h.BackupName, h.DatabaseName))
	}
	now := d.now()
	m := catalog.New(db.Name, in.Sequence, now)
	// The config name is stable; the address may change (it does in --dev).
	m.SourceInstance = inst.Name
	m.PrimaryServer = srv.Name
	m.Servers = []string{srv.Name}
	for _, s := range in.Backup.Stripes {
		m.Stripes = append(m.Stripes, catalog.Stripe{Name: s.Name, Size: s.Size})
	}
	m.Options = catalog.Options{Compression: db.Compression, Checksum: true, CopyOnly: db.CopyOnly,
		BufferCount: db.BufferCount, MaxTransferSize: int(db.MaxTransferSize), BlockSize: int(db.BlockSize), Stripes: len(m.Stripes)}
	m.Header = &catalog.Header{
		BackupSetGUID: h.BackupSetGUID, FirstLSN: h.FirstLSN, LastLSN: h.LastLSN, DatabaseBackupLSN: h.DatabaseBackupLSN,
		BackupStart: h.BackupStartDate, BackupFinish: h.BackupFinishDate, BackupSize: h.BackupSize,
		CompressedBackupSize: h.CompressedBackupSize, ServerName: h.ServerName, DatabaseName: h.DatabaseName,
		HasBackupChecksums: h.HasBackupChecksums,
	}
	if h.FirstLSN == "" || h.LastLSN == "" {
		m.Header.FirstLSN, m.Header.LastLSN = orZero(h.FirstLSN), orZero(h.LastLSN)
	}
	_ = m.SetTiming(catalog.StepBackup, now.Add(-in.Backup.Duration), now)
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		m.WorkflowID, m.RunID = info.WorkflowExecution.ID, info.WorkflowExecution.RunID
	}
	st, err := d.openStorage(ctx, srv)
	if err != nil {
		return ManifestOutput{}, err
	}
	defer st.Close()
	if err := catalog.Save(ctx, catalogFS{st}, m); err != nil {
		return ManifestOutput{}, storageError(srv.Name, err)
	}
	a.loggerFor(ctx).Info("manifest written", zap.String("db", db.Name), zap.Int64("seq", in.Sequence),
		zap.String("server", srv.Name), zap.String("manifest", m.FileName()))
	return ManifestOutput{Manifest: m.FileName(), BackupSetGUID: h.BackupSetGUID, Stripes: stripesOf(m, in.Backup.Stripes)}, nil
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// stripesOf lists a manifest's stripes with the paths SQL Server used.
func stripesOf(m *catalog.Manifest, paths []Stripe) []Stripe {
	out := make([]Stripe, len(m.Stripes))
	for i, s := range m.Stripes {
		out[i] = Stripe{Name: s.Name, Size: s.Size, SHA256: s.SHA256}
		if i < len(paths) {
			out[i].Path = paths[i].Path
		}
	}
	return out
}

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
func (a *Activities) CopyToRemote(ctx context.Context, in CopyInput) (CopyOutput, error) {
	d := &a.Cycle
	db, err := d.database(in.Instance, in.Database)
	if err != nil {
		return CopyOutput{}, err
	}
	from, err := d.server(in.From)
	if err != nil {
		return CopyOutput{}, err
	}
	to, err := d.server(in.To)
	if err != nil {
		return CopyOutput{}, err
	}
	src, err := d.openStorage(ctx, from)
	if err != nil {
		return CopyOutput{}, err
	}
	defer src.Close()
	m, err := catalog.Load(ctx, catalogFS{src}, db.Name, in.Sequence)
	if err != nil {
		return CopyOutput{}, storageError(from.Name, err)
	}
	dst, err := d.openStorage(ctx, to)
	if err != nil {
		return CopyOutput{}, err
	}
	defer dst.Close()

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
	rep := a.newReporter(ctx, StepCopy, in.Sequence)
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
	stop := rep.every(d.poll(), nil, func(float64, int64) any {
		s := state().(CopyHeartbeat)
		rep.set(s.Percent, s.Bytes)
		return s
	})
	defer stop()

	start := time.Now()
	c := copier.New(copier.Options{
		BytesPerSecond: int64(db.BandwidthLimit),
		Progress: func(p copier.Progress) {
			mu.Lock()
			cp := p
			cp.Ahead = nil // keep heartbeats small: resume re-sends the unconfirmed tail
			hb.Files[p.File] = &cp
			mu.Unlock()
			// The SDK throttles what it sends; recording every checkpoint
			// keeps the one reported with a failure current.
			heartbeat(ctx, state())
		},
	})
	results, err := c.Copy(ctx, src, dst, jobs)
	if err != nil {
		if errors.Is(err, copier.ErrDifferentContent) {
			return CopyOutput{}, nonRetryable(ErrInvalidConfig, fmt.Errorf(
				"copy of %s seq %d to %s: %w; another set uses these file names: check the server's directory", db.ID(), in.Sequence, to.Name, err))
		}
		return CopyOutput{}, storageError(to.Name, err)
	}
	out := CopyOutput{Duration: time.Since(start)}
	for i, r := range results {
		m.Stripes[i].SHA256 = r.SHA256
		out.Bytes += r.Size
		out.Sent += r.BytesSent
		out.Resumed += r.ResumedAt
	}
	out.Resent = max(0, hb.SentBefore+out.Sent-out.Bytes)
	now := d.now()
	m.AddServer(to.Name)
	if err := advance(m, catalog.StateCopied, now); err != nil {
		return CopyOutput{}, nonRetryable(ErrCorruptBackup, err)
	}
	_ = m.SetTiming(catalog.StepCopy, now.Add(-out.Duration), now)
	// Remote first: the manifest there is what says "this copy is complete".
	if err := catalog.Save(ctx, catalogFS{dst}, m); err != nil {
		return CopyOutput{}, storageError(to.Name, err)
	}
	if err := catalog.Save(ctx, catalogFS{src}, m); err != nil {
		return CopyOutput{}, storageError(from.Name, err)
	}
	a.loggerFor(ctx).Info("set copied", zap.String("db", db.Name), zap.Int64("seq", in.Sequence),
		zap.String("server", to.Name), zap.Int64("bytes", out.Bytes), zap.Duration("duration", out.Duration))
	return out, nil
}

// advance moves m forward to state through the states in between (a server
// that missed an update catches up), never backwards.
func advance(m *catalog.Manifest, to catalog.State, at time.Time) error {
	chain := []catalog.State{catalog.StateWritten, catalog.StateCopied, catalog.StateRestored, catalog.StateChecked, catalog.StateVerified}
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

// listManifests reads the manifests of database on a backup server.
func (a *Activities) listManifests(ctx context.Context, server, database string) (catalog.Listing, error) {
	srv, err := a.Cycle.server(server)
	if err != nil {
		return catalog.Listing{}, err
	}
	st, err := a.Cycle.openStorage(ctx, srv)
	if err != nil {
		return catalog.Listing{}, err
	}
	defer st.Close()
	l, err := catalog.List(ctx, catalogFS{st}, database)
	if err != nil {
		return catalog.Listing{}, storageError(server, err)
	}
	return l, nil
}

// updateManifest loads the set's manifest from every reachable server of
// servers (the most advanced copy wins), applies change, and saves it back
// to each, so a server that missed an update catches up. It fails when a
// server of required could not be updated; the others are best effort.
func (a *Activities) updateManifest(ctx context.Context, database string, seq int64, servers, required []string,
	change func(m *catalog.Manifest) error) (*catalog.Manifest, error) {
	d := &a.Cycle
	log := a.loggerFor(ctx).With(zap.String("db", database), zap.Int64("seq", seq))
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
	rank := func(m *catalog.Manifest) int {
		if m.State == catalog.StateFailed {
			return 10
		}
		return slices.Index([]catalog.State{catalog.StateWritten, catalog.StateCopied, catalog.StateRestored,
			catalog.StateChecked, catalog.StateVerified}, m.State)
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
		m, err := catalog.Load(ctx, catalogFS{st}, database, seq)
		if err != nil {
			continue // not there (yet): written below
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
		if err := catalog.Save(ctx, catalogFS{o.st}, best); err != nil {
			if slices.Contains(required, o.name) {
				return nil, storageError(o.name, err)
			}
			log.Warn("manifest not updated", zap.String("server", o.name), zap.Error(err))
			continue
		}
		saved++
	}
	if saved == 0 {
		return nil, retryable(ErrBackupTargetUnreachable, fmt.Errorf("manifest of %s seq %d could be written on none of %v", database, seq, servers))
	}
	return best, nil
}

// verifyTarget resolves the remote server, its verification instance and
// the restored copy's name.
func (a *Activities) verifyTarget(in VerifyInput) (*config.Database, *config.BackupServer, *config.SQLInstance, string, error) {
	d := &a.Cycle
	db, err := d.database(in.Instance, in.Database)
	if err != nil {
		return nil, nil, nil, "", err
	}
	srv, err := d.server(in.Server)
	if err != nil {
		return nil, nil, nil, "", err
	}
	if srv.VerifyInstance == "" {
		return nil, nil, nil, "", nonRetryable(ErrInvalidConfig, fmt.Errorf("backup server %s has no verify_instance to restore %s on", srv.Name, db.ID()))
	}
	inst, err := d.instance(srv.VerifyInstance)
	if err != nil {
		return nil, nil, nil, "", err
	}
	name := db.VerifyDatabaseName(in.Sequence)
	if err := tsql.CheckIdent(name); err != nil {
		return nil, nil, nil, "", nonRetryable(ErrInvalidConfig, fmt.Errorf("verify_name of %s gives %q: %w", db.ID(), name, err))
	}
	return db, srv, inst, name, nil
}

// Restore restores the set from the REMOTE copies on the remote server's
// verification instance: FILELISTONLY, every file moved into the restore
// directories, RESTORE DATABASE ... WITH CHECKSUM, REPLACE, STATS; the
// restore is confirmed in msdb.dbo.restorehistory.
func (a *Activities) Restore(ctx context.Context, in VerifyInput) (StepOutput, error) {
	db, srv, inst, verifyDB, err := a.verifyTarget(in)
	if err != nil {
		return StepOutput{}, err
	}
	log := a.loggerFor(ctx).With(zap.String("db", db.Name), zap.Int64("seq", in.Sequence), zap.String("server", srv.Name),
		zap.String("step", StepRestore))
	st, err := a.Cycle.openStorage(ctx, srv)
	if err != nil {
		return StepOutput{}, err
	}
	m, err := catalog.Load(ctx, catalogFS{st}, db.Name, in.Sequence)
	st.Close()
	if err != nil {
		return StepOutput{}, storageError(srv.Name, err)
	}
	if m.State == catalog.StateFailed {
		return StepOutput{}, nonRetryable(ErrCorruptBackup, fmt.Errorf("set %d of %s is marked failed on %s: it is never restored", in.Sequence, db.ID(), srv.Name))
	}
	layout, err := tsql.Layout(srv.UNCPaths, db.Name, in.Sequence, len(m.Stripes))
	if err != nil {
		return StepOutput{}, nonRetryable(ErrInvalidConfig, err)
	}
	disks := tsql.Paths(layout)
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		return StepOutput{}, err
	}
	defer sqlDB.Close()
	hq, hargs, err := tsql.LastRestore(verifyDB)
	if err != nil {
		return StepOutput{}, nonRetryable(ErrInvalidConfig, err)
	}
	before, err := sqlDB.LastRestore(ctx, hq, hargs...)
	if err != nil {
		return StepOutput{}, sqlError(err)
	}
	rep := a.newReporter(ctx, StepRestore, in.Sequence)
	stop := rep.every(a.Cycle.poll(), nil, nil)
	defer stop()
	start := time.Now()

	restored := false
	if isRetry(ctx) {
		q, args, err := tsql.InFlightRequests(verifyDB, tsql.CommandRestoreDatabase)
		if err == nil {
			if reqs, err := sqlDB.Requests(ctx, q, args...); err == nil && len(reqs) > 0 {
				log.Info("re-attaching to the running RESTORE", zap.Int64("session", reqs[0].SessionID))
				if err := sqlDB.WaitRequest(ctx, reqs[0].SessionID, a.Cycle.poll(), func(p float64) { rep.setPercent(p) }, q, args...); err != nil {
					return StepOutput{}, sqlError(err)
				}
				after, err := sqlDB.LastRestore(ctx, hq, hargs...)
				restored = err == nil && after != nil && (before == nil || after.ID != before.ID)
				if restored {
					before = nil
				}
			}
		}
	}
	if !restored {
		fq, err := tsql.RestoreFileListOnly(disks)
		if err != nil {
			return StepOutput{}, nonRetryable(ErrInvalidConfig, err)
		}
		files, err := sqlDB.FileListOnly(ctx, fq)
		if err != nil {
			return StepOutput{}, sqlError(err)
		}
		rows := make([]tsql.FileListRow, len(files))
		for i, f := range files {
			rows[i] = tsql.FileListRow{LogicalName: f.LogicalName, PhysicalName: f.PhysicalName, Type: f.Type, FileID: f.FileID}
		}
		moves, err := tsql.Moves(verifyDB, rows, srv.RestoreDataDir, srv.RestoreLogDir)
		if err != nil {
			return StepOutput{}, nonRetryable(ErrInvalidConfig, fmt.Errorf("backup server %s: %w", srv.Name, err))
		}
		stmt, err := tsql.RestoreDatabase(tsql.RestoreOptions{Database: verifyDB, Disks: disks, Moves: moves,
			Checksum: true, Replace: true, Stats: statsPercent})
		if err != nil {
			return StepOutput{}, nonRetryable(ErrInvalidConfig, err)
		}
		log.Info("restore starting", zap.String("verify_db", verifyDB), zap.Int("files", len(moves)))
		res, err := sqlDB.Run(ctx, "RESTORE DATABASE", stmt, func(m mssql.Message) {
			if m.Percent >= 0 {
				rep.setPercent(float64(m.Percent))
			}
		})
		if err != nil {
			return StepOutput{}, sqlError(err)
		}
		if res.Summary != nil {
			rep.set(100, res.Summary.Bytes())
		}
	}
	after, err := sqlDB.LastRestore(ctx, hq, hargs...)
	if err != nil {
		return StepOutput{}, sqlError(err)
	}
	if after == nil || (before != nil && after.ID == before.ID) {
		return StepOutput{}, temporal.NewApplicationError(fmt.Sprintf(
			"RESTORE of %s seq %d into %s on %s reported success but msdb.dbo.restorehistory has no new row", db.ID(), in.Sequence, verifyDB, inst.Name),
			"RestoreNotRecorded")
	}
	out := StepOutput{VerifyDatabase: verifyDB, Duration: time.Since(start)}
	_, out.Bytes = rep.get()
	now := a.Cycle.now()
	_, err = a.updateManifest(ctx, db.Name, in.Sequence, holders(m, srv.Name), []string{srv.Name}, func(m *catalog.Manifest) error {
		if m == nil {
			return storageError(srv.Name, fmt.Errorf("manifest of seq %d missing: %w", in.Sequence, storage.ErrNotFound))
		}
		m.VerifyDB = verifyDB
		_ = m.SetTiming(catalog.StepRestore, now.Add(-out.Duration), now)
		return advanceOrKeep(m, catalog.StateRestored, now)
	})
	if err != nil {
		return StepOutput{}, err
	}
	log.Info("restore done", zap.String("verify_db", verifyDB), zap.Duration("duration", out.Duration))
	return out, nil
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
func (a *Activities) holdersOn(ctx context.Context, srv *config.BackupServer, db string, seq int64) []string {
	st, err := a.Cycle.openStorage(ctx, srv)
	if err != nil {
		return []string{srv.Name}
	}
	defer st.Close()
	m, err := catalog.Load(ctx, catalogFS{st}, db, seq)
	if err != nil {
		return []string{srv.Name}
	}
	return holders(m, srv.Name)
}

// advanceOrKeep advances m to state unless it is already there or beyond
// (a restore repeated after the verification instance was lost).
func advanceOrKeep(m *catalog.Manifest, to catalog.State, at time.Time) error {
	chain := []catalog.State{catalog.StateWritten, catalog.StateCopied, catalog.StateRestored, catalog.StateChecked, catalog.StateVerified}
	if slices.Index(chain, m.State) >= slices.Index(chain, to) {
		return nil
	}
	if err := advance(m, to, at); err != nil {
		return nonRetryable(ErrCorruptBackup, err)
	}
	return nil
}

// CheckDB runs DBCC CHECKDB ... WITH NO_INFOMSGS, ALL_ERRORMSGS,
// EXTENDED_LOGICAL_CHECKS, DATA_PURITY on the restored copy. Any error is a
// corrupt backup (CheckDBFailed, with every message). A lost instance or a
// vanished copy is SQLHostUnreachable: the workflow restores again.
func (a *Activities) CheckDB(ctx context.Context, in VerifyInput) (StepOutput, error) {
	db, srv, inst, verifyDB, err := a.verifyTarget(in)
	if err != nil {
		return StepOutput{}, err
	}
	stmt, err := tsql.CheckDB(verifyDB)
	if err != nil {
		return StepOutput{}, nonRetryable(ErrInvalidConfig, err)
	}
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		return StepOutput{}, err
	}
	defer sqlDB.Close()
	rep := a.newReporter(ctx, StepCheckDB, in.Sequence)
	stop := rep.every(a.Cycle.poll(), nil, nil)
	defer stop()
	start := time.Now()
	_, err = sqlDB.Run(ctx, "DBCC CHECKDB", stmt, nil)
	if errors.Is(err, mssql.ErrDatabaseNotFound) {
		return StepOutput{}, retryable(ErrSQLHostUnreachable, fmt.Errorf("restored copy %s is gone from %s: restore it again: %w", verifyDB, inst.Name, err))
	}
	if err != nil {
		return StepOutput{}, sqlError(err)
	}
	out := StepOutput{VerifyDatabase: verifyDB, Duration: time.Since(start)}
	now := a.Cycle.now()
	if _, err := a.updateManifest(ctx, db.Name, in.Sequence, a.holdersOn(ctx, srv, db.Name, in.Sequence), []string{srv.Name}, func(m *catalog.Manifest) error {
		if m == nil {
			return storageError(srv.Name, fmt.Errorf("manifest of seq %d missing: %w", in.Sequence, storage.ErrNotFound))
		}
		_ = m.SetTiming(catalog.StepCheckDB, now.Add(-out.Duration), now)
		return advanceOrKeep(m, catalog.StateChecked, now)
	}); err != nil {
		return StepOutput{}, err
	}
	return out, nil
}

// SanityChecks runs the database's configured queries against the restored
// copy and compares the first value of each with its expectation.
func (a *Activities) SanityChecks(ctx context.Context, in VerifyInput) (StepOutput, error) {
	db, srv, inst, verifyDB, err := a.verifyTarget(in)
	if err != nil {
		return StepOutput{}, err
	}
	start := time.Now()
	if len(db.SanityChecks) == 0 {
		return StepOutput{VerifyDatabase: verifyDB}, nil
	}
	st, err := a.Cycle.openStorage(ctx, srv)
	if err != nil {
		return StepOutput{}, err
	}
	m, err := catalog.Load(ctx, catalogFS{st}, db.Name, in.Sequence)
	st.Close()
	if err != nil {
		return StepOutput{}, storageError(srv.Name, err)
	}
	sqlDB, err := a.Cycle.openSQL(ctx, inst, verifyDB)
	if err != nil {
		return StepOutput{}, err
	}
	defer sqlDB.Close()
	for _, c := range db.SanityChecks {
		v, found, err := sqlDB.QueryValue(ctx, "sanity check "+c.Name, c.Query)
		if err != nil {
			var f *mssql.Failure
			if errors.As(err, &f) && f.Kind == mssql.ErrStatement {
				return StepOutput{}, nonRetryable(ErrSanityCheckFailed, fmt.Errorf("sanity check %q on %s: query %q failed: %w", c.Name, verifyDB, c.Query, err))
			}
			return StepOutput{}, sqlError(err)
		}
		if msg := sanityMismatch(c, v, found, m); msg != "" {
			return StepOutput{}, nonRetryable(ErrSanityCheckFailed, fmt.Errorf("sanity check %q on %s (seq %d): query %q %s",
				c.Name, verifyDB, in.Sequence, c.Query, msg))
		}
	}
	return StepOutput{VerifyDatabase: verifyDB, Duration: time.Since(start), Checks: len(db.SanityChecks)}, nil
}

// sanityMismatch returns why a sanity value fails its expectation, or "".
func sanityMismatch(c config.SanityCheck, v any, found bool, m *catalog.Manifest) string {
	if !found {
		return "returned no row"
	}
	switch c.Expect {
	case config.ExpectEquals:
		if got := sanityText(v); got != c.Equals {
			return fmt.Sprintf("returned %q, want %q", got, c.Equals)
		}
	case config.ExpectAtLeast:
		n, ok := v.(int64)
		if f, isF := v.(float64); isF {
			n, ok = int64(f), true
		}
		if !ok || n < c.AtLeast {
			return fmt.Sprintf("returned %v, want at least %d", v, c.AtLeast)
		}
	case config.ExpectMaxAge:
		t, ok := v.(time.Time)
		if !ok {
			return fmt.Sprintf("returned %v (%T), want a date/time no older than %s", v, v, c.MaxAge)
		}
		ref := time.Now()
		if m != nil && m.Header != nil && !m.Header.BackupFinish.IsZero() {
			ref = m.Header.BackupFinish
		}
		if age := ref.Sub(t); age > c.MaxAge {
			return fmt.Sprintf("returned %s, %s older than the backup, want at most %s", t.Format(time.RFC3339), age.Round(time.Second), c.MaxAge)
		}
	default:
		return fmt.Sprintf("has no expectation (%q)", c.Expect)
	}
	return ""
}

func sanityText(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case bool:
		if x {
			return "1"
		}
		return "0"
	case time.Time:
		return x.Format(time.RFC3339)
	}
	return fmt.Sprint(v)
}

// MarkVerified moves the set's manifest to verified, with the timings, on
// every server holding it.
func (a *Activities) MarkVerified(ctx context.Context, in MarkInput) error {
	db, err := a.Cycle.database(in.Instance, in.Database)
	if err != nil {
		return err
	}
	now := a.Cycle.now()
	_, err = a.updateManifest(ctx, db.Name, in.Sequence, in.Servers, in.Servers, func(m *catalog.Manifest) error {
		if m == nil {
			return storageError(strings.Join(in.Servers, ", "), fmt.Errorf("manifest of seq %d missing: %w", in.Sequence, storage.ErrNotFound))
		}
		if in.Timings.Sanity > 0 {
			_ = m.SetTiming(catalog.StepSanity, now.Add(-in.Timings.Sanity), now)
		}
		for _, s := range in.Servers {
			m.AddServer(s)
		}
		return advanceOrKeep(m, catalog.StateVerified, now)
	})
	if err != nil {
		return err
	}
	a.loggerFor(ctx).Info("set verified", zap.String("db", db.Name), zap.Int64("seq", in.Sequence), zap.Strings("servers", in.Servers))
	return nil
}

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

// DropVerifyDB drops the restored copy (idempotent).
func (a *Activities) DropVerifyDB(ctx context.Context, in VerifyInput) error {
	_, _, inst, verifyDB, err := a.verifyTarget(in)
	if err != nil {
		return err
	}
	stmt, err := tsql.DropDatabase(verifyDB)
	if err != nil {
		return nonRetryable(ErrInvalidConfig, err)
	}
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	if _, err := sqlDB.Run(ctx, "DROP DATABASE", stmt, nil); err != nil {
		return sqlError(err)
	}
	return nil
}

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
		l, err := catalog.List(ctx, catalogFS{st}, db.Name)
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
	dels, err := catalog.Decide(policy, manifests, files, d.now(), catalog.SetKey{Database: db.Name, Sequence: in.Protect})
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

// isRetry reports whether an earlier attempt of this activity may have
// started its statement: a retry, or heartbeat details left by one.
func isRetry(ctx context.Context) bool {
	return activity.IsActivity(ctx) && (activity.GetInfo(ctx).Attempt > 1 || activity.HasHeartbeatDetails(ctx))
}
