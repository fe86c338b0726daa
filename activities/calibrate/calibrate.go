// Package calibrate holds the activities of the Calibrate workflow: what
// BACKUP settings a database's site sustains. PlanCalibration settles the
// database, its backup server, the grid and the timeouts; CalibratePoint
// runs one BACKUP ... WITH COPY_ONLY of the grid and returns SQL Server's
// figure; CleanCalibration stops what a calibration left running and
// removes its files; SaveCalibration keeps the report beside the
// manifests, where the cycle's plan reads it (activities.LoadCalibration).
package calibrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/calibrate"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Activities are the Calibrate workflow's activities. The worker registers
// them beside the cycle's (workflows.Register); they share its
// dependencies through Base.
type Activities struct {
	// Base carries the dependencies; a field, not embedded, so that
	// registering Activities registers only this package's methods.
	Base *activities.Activities
}

// New returns the calibration's activities over base's dependencies.
func New(base *activities.Activities) *Activities { return &Activities{Base: base} }

// StepCalibrate is the step name a calibration's progress reports.
const StepCalibrate = "calibrate"

// CalibrateInput is what a calibration measures: a database and the backup
// server it writes to (the first of its rotation unless given), over Grid
// (calibrate.DefaultGrid for the server's NIC paths unless given).
type CalibrateInput struct {
	Database string          `json:"database"`
	Instance string          `json:"instance,omitempty"`
	Server   string          `json:"server,omitempty"`
	Grid     *calibrate.Grid `json:"grid,omitempty"`
}

// CalibrationPlan is what the workflow needs to run a calibration.
type CalibrationPlan struct {
	Database     string         `json:"database"`
	Instance     string         `json:"instance"`
	Server       string         `json:"server"`
	NICs         int            `json:"nics"`
	SizeBytes    int64          `json:"size_bytes"`
	Compression  bool           `json:"compression"`
	MemoryBudget int64          `json:"memory_budget_bytes"`
	Grid         calibrate.Grid `json:"grid"`
	// PointTimeout bounds one BACKUP of the grid (the cycle's backup
	// timeout for the size); Heartbeat is the cycle's heartbeat timeout.
	PointTimeout time.Duration `json:"point_timeout"`
	Heartbeat    time.Duration `json:"heartbeat"`
	Warnings     []string      `json:"warnings,omitempty"`
}

// PlanCalibration resolves the database and its backup server, reads the
// database's size and edition (as the cycle's plan does) and settles the
// grid and the timeouts.
func (a *Activities) PlanCalibration(ctx context.Context, in CalibrateInput) (CalibrationPlan, error) {
	defer a.Base.Cycle.KeepAlive(ctx)()
	d := &a.Base.Cycle
	db, err := d.Database(in.Instance, in.Database)
	if err != nil {
		return CalibrationPlan{}, err
	}
	name := in.Server
	if name == "" {
		if len(db.BackupServers) == 0 {
			return CalibrationPlan{}, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("database %s has no backup_servers to calibrate against: configure them or give --server", db.ID()))
		}
		name = db.BackupServers[0]
	}
	// A server the database backs up to, a grid no wider than the
	// product's own (the start's input is anyone's).
	srv, err := d.RotationServer(db, "calibration server", name)
	if err != nil {
		return CalibrationPlan{}, err
	}
	// A database of an availability group is calibrated on its first
	// replica (sourceInstance): its BACKUPs are COPY_ONLY, which every
	// replica takes.
	inst, err := d.SourceInstance(db)
	if err != nil {
		return CalibrationPlan{}, err
	}
	nics := len(srv.PathsFor(inst.Name)) // the source's paths to the server
	grid := calibrate.DefaultGrid(nics)
	if in.Grid != nil {
		grid = *in.Grid
	}
	if err := grid.CheckBounds(nics); err != nil {
		return CalibrationPlan{}, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("calibration of %s on %s: %w", db.ID(), srv.Name, err))
	}
	src, warnings := activities.ReadSource(a.Base, ctx, db)
	mode, more := activities.ModeOf(db, src)
	size := src.SizeBytes
	if size <= 0 {
		size = plan.UnknownSizeBytes
	}
	est, err := plan.SiteEstimate(size, nics, nics, mode.Compression, 0)
	if err != nil {
		return CalibrationPlan{}, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("calibration of %s: %w", db.ID(), err))
	}
	hb := db.HeartbeatTimeout
	if hb == 0 {
		hb = d.HeartbeatTimeout
	}
	budget, err := plan.Timeouts(size, est, plan.Overrides{Backup: db.BackupTimeout, Heartbeat: hb})
	if err != nil {
		return CalibrationPlan{}, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("calibration of %s: %w", db.ID(), err))
	}
	p := CalibrationPlan{
		Database: db.Name, Instance: db.Instance, Server: srv.Name, NICs: nics,
		SizeBytes: src.SizeBytes, Compression: mode.Compression, MemoryBudget: int64(db.MemoryBudget), Grid: grid,
		PointTimeout: budget.Backup.StartToClose, Heartbeat: budget.Heartbeat, Warnings: append(warnings, more...),
	}
	activities.Logger(a.Base, ctx).Info("calibration planned", zap.String("db", db.Name), zap.String("instance", db.Instance),
		zap.String("server", srv.Name), zap.Int("nics", p.NICs), zap.Int64("size_bytes", p.SizeBytes),
		zap.Ints("stripes", grid.Stripes), zap.Duration("point_timeout", p.PointTimeout))
	return p, nil
}

// CalibratePointInput is one BACKUP of a calibration: point Index of run
// Token (the file names carry both).
type CalibratePointInput struct {
	Database    string          `json:"database"`
	Instance    string          `json:"instance"`
	Server      string          `json:"server"`
	Token       string          `json:"token"`
	Index       int             `json:"index"`
	Point       calibrate.Point `json:"point"`
	Compression bool            `json:"compression"`
}

// CalibratePoint runs one BACKUP DATABASE ... WITH COPY_ONLY of the grid to
// the backup server's NIC paths (or to NUL) and returns SQL Server's own
// figure from its 3014 message. COPY_ONLY leaves the backup chain alone;
// the files are deleted when the statement ends. A retry first stops the
// statement an earlier attempt left running (a calibration backup is
// disposable: stopping it loses nothing) and deletes what it wrote, so a
// worker killed mid-point leaves nothing behind once the point is retried.
func (a *Activities) CalibratePoint(ctx context.Context, in CalibratePointInput) (calibrate.Result, error) {
	d := &a.Base.Cycle
	res := calibrate.Result{Point: in.Point}
	db, err := d.Database(in.Instance, in.Database)
	if err != nil {
		return res, err
	}
	inst, err := d.SourceInstance(db)
	if err != nil {
		return res, err
	}
	srv, err := d.RotationServer(db, "calibration server", in.Server)
	if err != nil {
		return res, err
	}
	// The point is held to what a calibration may run (calibrate.Point.
	// CheckBounds) and to the memory budget, and COMPRESSION to the
	// configuration: the workflow's Explorer decides the same, but this
	// input is anyone's.
	if err := in.Point.CheckBounds(len(srv.PathsFor(inst.Name))); err != nil {
		return res, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("calibration of %s on %s: %w", db.ID(), srv.Name, err))
	}
	if !in.Point.Null {
		t := plan.Tuning{Stripes: in.Point.Stripes, BufferCount: in.Point.BufferCount, MaxTransferSize: in.Point.MaxTransferSize}
		if err := plan.CheckTuning(t, 1, int64(db.MemoryBudget)); err != nil {
			return res, activities.NonRetryable(activities.ErrInsufficientMemory, fmt.Errorf("calibration of %s: %w", db.ID(), err))
		}
	}
	compression := in.Compression && db.Compression
	log := activities.Logger(a.Base, ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance), zap.String("server", srv.Name),
		zap.String("step", StepCalibrate), zap.String("point", in.Point.String()))
	marker, err := calibrationMarker(db.Name, in.Token)
	if err != nil {
		return res, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	disks := []string{"NUL"}
	if !in.Point.Null {
		layout, err := tsql.CalibrationLayout(srv.PathsFor(inst.Name), db.Instance, db.Name, in.Token, in.Index, in.Point.Stripes)
		if err != nil {
			return res, activities.NonRetryable(activities.ErrInvalidConfig, err)
		}
		disks = tsql.Paths(layout)
	}
	stmt, err := tsql.BackupDatabase(tsql.BackupOptions{
		Database: db.Name, Disks: disks, Checksum: true, Init: true, Format: true,
		Compression: &compression, CopyOnly: true,
		BufferCount: in.Point.BufferCount, MaxTransferSize: in.Point.MaxTransferSize,
		Name: tsql.CalibrationSetName(in.Token),
	})
	if err != nil {
		return res, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	st, err := d.OpenServer(ctx, srv)
	if err != nil {
		return res, err
	}
	defer st.Close()
	// Whatever an earlier attempt of this calibration left: its statement,
	// then its files.
	var stopped activities.StopOutput
	if err := activities.StopOn(a.Base, ctx, inst.Name, "BACKUP DATABASE", tsql.CommandBackupDatabase, marker, &stopped, log); err != nil {
		return res, err
	}
	if len(stopped.Left) > 0 {
		return res, activities.Retryable(activities.ErrBackupDeviceInUse, fmt.Errorf(
			"calibration of %s: a BACKUP an earlier attempt left running could not be stopped (%s): the point is tried again once it ends",
			db.ID(), strings.Join(stopped.Left, "; ")))
	}
	if _, err := removeCalibrationFiles(ctx, st, db.Instance, db.Name, in.Token); err != nil {
		return res, activities.StorageError(srv.Name, err)
	}

	sqlDB, err := d.ConnectSQL(ctx, inst, "master")
	if err != nil {
		return res, err
	}
	defer sqlDB.Close()
	if err := a.waitForOtherBackups(ctx, sqlDB, db.Name, marker.Tag, log); err != nil {
		return res, err
	}
	out, sent, err := activities.RunStatementBeating(a.Base, ctx, activities.Statement{DB: sqlDB, Op: "BACKUP DATABASE",
		Command: tsql.CommandBackupDatabase, Text: stmt, Marker: marker.Prefix, Tag: marker.Tag, Log: log,
		Step: StepCalibrate, Number: int64(in.Index), Signal: true})
	if !sent {
		return res, err
	}
	if ctx.Err() == nil || temporal.IsCanceledError(context.Cause(ctx)) {
		// The statement has ended (or was stopped for the cancel): its
		// files go now. One left running for the next attempt keeps them
		// until that attempt stops it.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		if _, rerr := removeCalibrationFiles(cctx, st, db.Instance, db.Name, in.Token); rerr != nil {
			log.Warn("calibration files not removed: the next calibration removes them", zap.Error(rerr))
		}
		cancel()
	}
	if err != nil {
		if ctx.Err() != nil {
			return res, err
		}
		log.Warn("calibration point failed", zap.Error(err))
		return res, activities.SQLError(err)
	}
	if out.Summary == nil || out.Summary.Seconds <= 0 {
		res.Seconds = out.Elapsed.Seconds()
		if out.Summary != nil {
			res.Bytes = out.Summary.Bytes()
		}
		if res.Seconds > 0 && res.Bytes > 0 {
			res.MBps = float64(res.Bytes) / plan.MiB / res.Seconds
		}
	} else {
		res.MBps, res.Seconds, res.Bytes = out.Summary.MBps, out.Summary.Seconds, out.Summary.Bytes()
	}
	if res.MBps <= 0 {
		return res, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("calibration of %s: SQL Server reported no throughput for %s (no 3014 message)", db.ID(), in.Point))
	}
	log.Info("calibration point measured", zap.Float64("mb_per_sec", res.MBps), zap.Float64("seconds", res.Seconds))
	return res, nil
}

// calibrationMarker identifies the BACKUPs of calibration token of db:
// a BACKUP of db whose NAME = is the calibration's, whatever its devices.
func calibrationMarker(db, token string) (mssql.Marker, error) {
	start, err := tsql.AnyBackupMarker(db)
	if err != nil {
		return mssql.Marker{}, err
	}
	tag, err := tsql.CalibrationMarker(token)
	if err != nil {
		return mssql.Marker{}, err
	}
	return mssql.Marker{Prefix: start, Tag: tag}, nil
}

// waitForOtherBackups waits while another BACKUP DATABASE of db runs (the
// nightly cycle, another tool): SQL Server would make the calibration's
// wait for it, and the figure would time the wait. A login that cannot see
// other sessions sees none and goes ahead.
func (a *Activities) waitForOtherBackups(ctx context.Context, sqlDB *mssql.DB, db, ours string, log *zap.Logger) error {
	anyBackup, err := tsql.AnyBackupMarker(db)
	if err != nil {
		return activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	q, args, err := tsql.RunningStatements(tsql.CommandBackupDatabase)
	if err != nil {
		return activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	defer a.Base.Cycle.KeepAlive(ctx)()
	logged := false
	for {
		reqs, err := sqlDB.Requests(ctx, q, args...)
		if err != nil {
			return activities.SQLError(err)
		}
		busy := int64(0)
		for _, r := range reqs {
			if strings.Contains(r.Text, anyBackup) && !strings.Contains(r.Text, ours) {
				busy = r.SessionID
			}
		}
		if busy == 0 {
			return nil
		}
		if !logged {
			log.Info("another backup of the database runs: the calibration waits for it", zap.Int64("session", busy))
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.Base.Cycle.PollEvery()):
		}
	}
}

// CleanCalibrationInput names the calibration whose leftovers go: Token's
// statement, and every calibration file of the database on Server (those of
// earlier calibrations that ended without cleaning up included).
type CleanCalibrationInput struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	Server   string `json:"server"`
	Token    string `json:"token"`
}

// CleanCalibrationOutput is what was removed and what could not be.
type CleanCalibrationOutput struct {
	Removed []string `json:"removed,omitempty"`
	Stopped []string `json:"stopped,omitempty"`
	Left    []string `json:"left,omitempty"`
}

// CleanCalibration stops the calibration's statement if one still runs and
// deletes the calibration files of the database on the backup server. The
// workflow runs it before its first point and after its last, also when it
// is cancelled or fails.
func (a *Activities) CleanCalibration(ctx context.Context, in CleanCalibrationInput) (CleanCalibrationOutput, error) {
	defer a.Base.Cycle.KeepAlive(ctx)()
	d := &a.Base.Cycle
	var out CleanCalibrationOutput
	db, err := d.Database(in.Instance, in.Database)
	if err != nil {
		return out, err
	}
	srv, err := d.RotationServer(db, "calibration server", in.Server)
	if err != nil {
		return out, err
	}
	log := activities.Logger(a.Base, ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance), zap.String("server", srv.Name),
		zap.String("step", StepCalibrate))
	if in.Token != "" {
		marker, err := calibrationMarker(db.Name, in.Token)
		if err != nil {
			return out, activities.NonRetryable(activities.ErrInvalidConfig, err)
		}
		inst, err := d.SourceInstance(db)
		if err != nil {
			return out, err
		}
		var so activities.StopOutput
		if err := activities.StopOn(a.Base, ctx, inst.Name, "BACKUP DATABASE", tsql.CommandBackupDatabase, marker, &so, log); err != nil {
			return out, err
		}
		out.Stopped, out.Left = so.Stopped, so.Left
	}
	st, err := d.OpenServer(ctx, srv)
	if err != nil {
		return out, err
	}
	defer st.Close()
	removed, err := removeCalibrationFiles(ctx, st, db.Instance, db.Name, "")
	out.Removed = removed
	if err != nil {
		return out, activities.StorageError(srv.Name, err)
	}
	if len(removed) > 0 {
		log.Info("calibration files removed", zap.Int("files", len(removed)))
	}
	return out, nil
}

// removeCalibrationFiles deletes the calibration files of (instance, db):
// of run token, or of every run when token is "". The listing is by prefix;
// each name is then parsed, since the prefix also starts the files of a
// database whose name merely begins the same way.
func removeCalibrationFiles(ctx context.Context, st storage.Storage, instance, db, token string) ([]string, error) {
	var files []storage.FileInfo
	for _, prefix := range tsql.CalibrationFilePrefixes(instance, db, token) {
		more, err := st.List(ctx, prefix, "")
		if err != nil {
			return nil, err
		}
		files = append(files, more...)
	}
	var removed []string
	var errs []error
	for _, f := range files {
		if !tsql.IsCalibrationFileOf(f.Name, instance, db, token) {
			continue
		}
		if err := st.Remove(ctx, f.Name); err != nil && !errors.Is(err, storage.ErrNotFound) {
			errs = append(errs, fmt.Errorf("remove %s: %w", f.Name, err))
			continue
		}
		removed = append(removed, f.Name)
	}
	return removed, errors.Join(errs...)
}

// SaveCalibrationOutput says where the report was kept.
type SaveCalibrationOutput struct {
	Report string `json:"report"` // file name on the backup server
}

// SaveCalibration keeps the report on the backup server beside the
// manifests, replacing the previous calibration of the database: the plan
// reads the newest measurement from there. (The chart is drawn by the
// starter, from the same report.)
func (a *Activities) SaveCalibration(ctx context.Context, r calibrate.Report) (SaveCalibrationOutput, error) {
	defer a.Base.Cycle.KeepAlive(ctx)()
	d := &a.Base.Cycle
	// A report of a configured database, kept on a server it backs up to:
	// the plan reads its measurements from there.
	db, err := d.Database(r.Instance, r.Database)
	if err != nil {
		return SaveCalibrationOutput{}, err
	}
	srv, err := d.RotationServer(db, "calibration server", r.Server)
	if err != nil {
		return SaveCalibrationOutput{}, err
	}
	r.Instance, r.Database = db.Instance, db.Name
	st, err := d.OpenServer(ctx, srv)
	if err != nil {
		return SaveCalibrationOutput{}, err
	}
	defer st.Close()
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return SaveCalibrationOutput{}, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("calibration report of %s: %w", r.Database, err))
	}
	name := tsql.CalibrationReportName(r.Instance, r.Database)
	if err := writeReplacing(ctx, st, name, data); err != nil {
		return SaveCalibrationOutput{}, activities.StorageError(srv.Name, err)
	}
	return SaveCalibrationOutput{Report: name}, nil
}

// writeReplacing writes data to name through a temporary file and one
// Replace, so a reader never sees half a report.
func writeReplacing(ctx context.Context, st storage.Storage, name string, data []byte) error {
	tmp := name + ".tmp-" + fmt.Sprint(time.Now().UnixNano())
	w, err := st.Create(ctx, tmp)
	if err != nil {
		return err
	}
	if _, err := w.WriteAt(data, 0); err != nil {
		_ = w.Close()
		_ = st.Remove(ctx, tmp)
		return err
	}
	if err := w.Close(); err != nil {
		_ = st.Remove(ctx, tmp)
		return err
	}
	if err := st.Replace(ctx, tmp, name); err != nil {
		_ = st.Remove(ctx, tmp)
		return err
	}
	return nil
}
