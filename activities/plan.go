package activities

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// errNotWired is returned when the worker was started without a backup
// configuration.
var errNotWired = temporal.NewNonRetryableApplicationError(
	"backup cycle activities are not configured in this worker: start it with a backupcycle config (worker --config)",
	ErrInvalidConfig, errors.New("Activities.Cycle.Config is nil"))

// statsPercent is the STATS = n the benchmarks' reference BACKUP sends. The
// cycle itself sends no STATS (see longStatement): a progress message is a
// network write, and SQL Server stops the statement of a vanished client at
// its next write.
const statsPercent = 5

// PlanCycle decides the cycle: the round-robin primary (from the caller or
// the manifests on the rotation's servers), the fail-over order, the stripe
// count and the memory guard; from the source instance (its database's size,
// edition and updateability, its time zone) the step timeouts and how this
// run backs up (BackupMode). A source that cannot be read is no reason to
// stop here: the plan says so in Warnings, assumes UnknownSizeBytes, and the
// backup step meets the problem with its own waits and errors.
func (a *Activities) PlanCycle(ctx context.Context, in PlanInput) (Plan, error) {
	defer a.Cycle.keepAlive(ctx)()
	d := &a.Cycle
	db, err := d.database(in.Instance, in.Database)
	if err != nil {
		return Plan{}, err
	}
	if err := d.checkNames(db); err != nil { // a name a selection picked (names.go)
		return Plan{}, err
	}
	log := a.loggerFor(ctx).With(zap.String("db", db.Name))
	last, source := in.LastServer, "caller"
	unreachable := map[string]bool{}
	// The manifests tell the last server and the measured throughputs. A
	// caller that names the last server still gets the measurements, but a
	// server it cannot read changes nothing else in its plan.
	var all []*catalog.Manifest
	var calibrated []string // servers holding a calibration report of the database
	for _, name := range db.BackupServers {
		listing, err := a.listManifests(ctx, name, db)
		var appErr *temporal.ApplicationError
		if in.LastServer == "" && errors.As(err, &appErr) && appErr.NonRetryable() {
			// Wrong location or credentials: stop before any SQL runs.
			return Plan{}, err
		}
		if err != nil {
			// An unreachable server cannot tell what it holds; the
			// others still can, and the backup step fails over.
			log.Warn("backup server not readable while planning", zap.String("server", name), zap.Error(err))
			if in.LastServer == "" {
				unreachable[name] = true
			}
			continue
		}
		all = append(all, listing.Manifests...)
		if hasCalibration(listing, db) {
			calibrated = append(calibrated, name)
		}
	}
	if last == "" {
		last, source = catalog.LastServer(db.Instance, db.Name, all), "manifests"
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
	src, warnings := a.readSource(ctx, db)
	mode, modeWarnings := backupMode(db, src)
	warnings = append(warnings, modeWarnings...)
	size := src.SizeBytes
	if size <= 0 {
		size = plan.UnknownSizeBytes
	}
	stripes := int(db.Stripes)
	if db.Stripes == config.StripesAuto {
		stripes, err = autoStripes(size, len(srv.UNCPaths), db)
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
			CopyRetry: db.CopyWait.Initial, CopyRetryMax: db.CopyWait.MaxInterval,
		},
		Source: src, Mode: mode,
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
		for _, name := range []string{s, target} {
			if b, _ := d.server(name); b != nil && b.TaskQueue != "" {
				if p.CopyQueues == nil {
					p.CopyQueues = map[string]string{}
				}
				p.CopyQueues[name] = b.TaskQueue
			}
		}
	}
	remote, _ := d.server(p.Remote)
	p.VerifyInstance = remote.VerifyInstance

	est, rates, err := measuredEstimate(size, len(srv.UNCPaths), len(remote.UNCPaths), mode.Compression,
		int64(remote.BandwidthLimit), plan.FromManifests(db.Instance, db.Name, all, a.calibrations(ctx, db, calibrated)...))
	if err != nil {
		return Plan{}, nonRetryable(ErrInvalidConfig, fmt.Errorf("database %s: %w", db.ID(), err))
	}
	hb := db.HeartbeatTimeout
	if hb == 0 {
		hb = d.HeartbeatTimeout // the worker's setting (tests, the dev stack)
	}
	budget, err := plan.Timeouts(size, est, plan.Overrides{Backup: db.BackupTimeout, Restore: db.RestoreTimeout,
		CheckDB: db.CheckDBTimeout, CopyDeadline: db.CopyDeadline, Heartbeat: hb})
	if err != nil {
		return Plan{}, nonRetryable(ErrInvalidConfig, fmt.Errorf("database %s: %w", db.ID(), err))
	}
	budget.Rates = rates
	p.Budget = budget
	p.Limits.setTimeouts(budget)
	p.Warnings = warnings
	for _, w := range warnings {
		log.Warn("plan: "+w, zap.String("instance", db.Instance))
	}
	log.Info("cycle planned", zap.String("server", primary), zap.String("last_server", last),
		zap.String("last_server_source", source), zap.Int("stripes", stripes), zap.String("remote", p.Remote),
		zap.Int64("size_bytes", src.SizeBytes), zap.Bool("compression", mode.Compression), zap.Bool("copy_only", mode.CopyOnly),
		zap.String("sequence", mode.Sequence), zap.Duration("backup_timeout", budget.Backup.StartToClose),
		zap.Duration("restore_timeout", budget.Restore.StartToClose), zap.Duration("checkdb_timeout", budget.CheckDB.StartToClose),
		zap.Duration("copy_deadline", budget.Copy.ScheduleToClose), zap.Duration("heartbeat_timeout", budget.Heartbeat),
		zap.Strings("measured", measuredSteps(rates, true)), zap.Strings("assumed", measuredSteps(rates, false)),
		zap.Float64("backup_mbps", rates.Backup.MBps), zap.Float64("copy_mbps", rates.Copy.MBps),
		zap.Float64("restore_mbps", rates.Restore.MBps), zap.Float64("checkdb_mbps", rates.CheckDB.MBps))
	return p, nil
}

// SourceFacts is what PlanCycle read from the source instance.
type SourceFacts struct {
	// Read is false when the source could not be asked (the plan's
	// Warnings say why); the fields below are then zero.
	Read bool `json:"read"`
	// SizeBytes is the database's allocated size, data and log files
	// (sys.master_files): what a RESTORE creates, and an upper bound of
	// what a BACKUP reads.
	SizeBytes int64 `json:"size_bytes,omitempty"`
	LogBytes  int64 `json:"log_bytes,omitempty"`
	// EngineEdition and Edition are SERVERPROPERTY's; Updateability is
	// DATABASEPROPERTYEX's READ_ONLY or READ_WRITE ("" = not read).
	EngineEdition int    `json:"engine_edition,omitempty"`
	Edition       string `json:"edition,omitempty"`
	Updateability string `json:"updateability,omitempty"`
	// UTCOffsetMinutes is the server's local time minus UTC, in which its
	// datetime values and backup dates are written; nil when not read.
	UTCOffsetMinutes *int `json:"utc_offset_minutes,omitempty"`
}

// ReadOnly reports whether the source database takes no writes.
func (s SourceFacts) ReadOnly() bool { return strings.EqualFold(s.Updateability, "READ_ONLY") }

// BackupMode is how this run backs up: the configuration, adjusted to what
// the source allows. Backup and AllocateSequence follow it.
type BackupMode struct {
	Compression bool   `json:"compression"`
	CopyOnly    bool   `json:"copy_only"`
	Sequence    string `json:"sequence"`
}

// backupMode adjusts the configured mode to the source, saying why:
//   - no COMPRESSION on an edition that refuses it (Express, Web), where
//     the BACKUP would fail;
//   - COPY_ONLY for a read-only database and on an availability-group
//     secondary: "BACKUP DATABASE supports only copy-only full backups ...
//     on secondary replicas"
//     (https://learn.microsoft.com/sql/database-engine/availability-groups/windows/active-secondaries-backup-on-secondary-replicas-always-on-availability-groups),
//     and a read-only database's differential base cannot be moved anyway;
//   - a sequence that writes nothing to the source: `table` updates a row
//     in the database, so such a run allocates from the catalog beside the
//     manifests (`catalog`) instead.
//
// A readable secondary reports READ_ONLY updateability: "you cannot write
// data to secondary databases" (Active Secondaries: Readable Secondary
// Replicas). A non-readable secondary cannot be queried at all and is not
// detected here (sys.fn_hadr_is_primary_replica would tell); its BACKUP is
// COPY_ONLY by default all the same (copy_only is true unless
// owns_backup_chain).
func backupMode(db *config.Database, src SourceFacts) (BackupMode, []string) {
	m := BackupMode{Compression: db.Compression, CopyOnly: db.CopyOnly, Sequence: db.Sequence}
	var warnings []string
	if m.Compression {
		if ok, known := plan.CompressionSupported(src.EngineEdition, src.Edition); known && !ok {
			m.Compression = false
			warnings = append(warnings, fmt.Sprintf(
				"compression: %s of %s cannot create compressed backups (only Enterprise, Standard and Developer can): backing up without COMPRESSION; set compression: false to say so",
				editionName(src), db.Instance))
		}
	}
	if src.ReadOnly() {
		if !m.CopyOnly {
			m.CopyOnly = true
			warnings = append(warnings, fmt.Sprintf(
				"copy_only: %s is READ_ONLY (a read-only database or an availability-group secondary): backing up WITH COPY_ONLY although owns_backup_chain is true",
				db.ID()))
		}
		if m.Sequence == config.SequenceTable {
			m.Sequence = config.SequenceCatalog
			warnings = append(warnings, fmt.Sprintf(
				"sequence: %s is READ_ONLY, so its DBBackup.Sequence table cannot be updated: this run takes its number from the manifests (sequence: catalog); configure sequence: catalog to make that permanent",
				db.ID()))
		}
	}
	return m, warnings
}

func editionName(src SourceFacts) string {
	if src.Edition != "" {
		return src.Edition
	}
	return fmt.Sprintf("engine edition %d", src.EngineEdition)
}

// modeFor is the BACKUP mode of a run: the plan's, or the configuration's
// for a caller that passes none.
func modeFor(db *config.Database, m *BackupMode) BackupMode {
	if m != nil {
		return *m
	}
	return BackupMode{Compression: db.Compression, CopyOnly: db.CopyOnly, Sequence: db.Sequence}
}

// sequenceMethod is the sequence method of a run: the plan's (in.Method),
// else the configured one.
func sequenceMethod(db *config.Database, in SequenceInput) string {
	if in.Method != "" {
		return in.Method
	}
	return db.Sequence
}

// autoStripes is `stripes: auto` for a database of size bytes: the seed's
// balanced count (plan.AutoStripes), lowered to a multiple of the NIC paths
// whose buffers fit the memory budget.
func autoStripes(size int64, nics int, db *config.Database) (int, error) {
	n, err := plan.AutoStripes(size, nics, 0)
	if err != nil {
		return 0, err
	}
	if fit := db.MaxStripesInBudget(); n > fit && fit >= nics {
		n = fit / nics * nics
	}
	return n, nil
}

// readSource asks the source instance what the plan needs (tsql.SourceFacts,
// tsql.DatabaseFiles). Any failure becomes a warning: the facts stay unknown.
func (a *Activities) readSource(ctx context.Context, db *config.Database) (SourceFacts, []string) {
	var src SourceFacts
	unknown := func(what string, err error) []string {
		return []string{fmt.Sprintf("%s of %s not read (%v): timeouts assume %s, compression, copy_only and sequence as configured",
			what, db.ID(), err, plan.FormatBytes(plan.UnknownSizeBytes))}
	}
	inst, err := a.Cycle.instance(db.Instance)
	if err != nil {
		return src, unknown("source instance", err)
	}
	q, args, err := tsql.SourceFacts(db.Name)
	if err != nil {
		return src, unknown("source facts", err)
	}
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		return src, unknown("source instance", err)
	}
	defer sqlDB.Close()
	var (
		engine                 sql.NullInt64
		edition, updateability sql.NullString
		utcNow, localNow       sql.NullTime
	)
	if err := sqlDB.QueryRowContext(ctx, q, args...).Scan(&engine, &edition, &updateability, &utcNow, &localNow); err != nil {
		return src, unknown("edition and updateability", sqlError(mssql.Classify(sqlDB.Target, "read the source's edition", err)))
	}
	src.Read = true
	src.EngineEdition, src.Edition, src.Updateability = int(engine.Int64), edition.String, updateability.String
	if utcNow.Valid && localNow.Valid {
		off := utcOffsetMinutes(utcNow.Time, localNow.Time)
		src.UTCOffsetMinutes = &off
	}
	var warnings []string
	if !updateability.Valid {
		warnings = append(warnings, fmt.Sprintf("updateability of %s not read: the database is missing on %s or not visible to its login", db.ID(), db.Instance))
	}
	data, logBytes, err := databaseSize(ctx, sqlDB, db.Name)
	if err != nil || data+logBytes == 0 {
		if err == nil {
			err = fmt.Errorf("no file of the database is visible to the login: grant VIEW ANY DEFINITION, or make it a user of the database")
		}
		return src, append(warnings, unknown("size", err)...)
	}
	src.SizeBytes, src.LogBytes = data+logBytes, logBytes
	return src, append(warnings, pageVerifyWarning(ctx, sqlDB, db)...)
}

// pageVerifyWarning warns of a source whose pages carry no checksum:
// BACKUP WITH CHECKSUM then verifies none of them, and damage in the source
// reaches the sets unseen until CHECKDB of a restored copy.
func pageVerifyWarning(ctx context.Context, sqlDB *mssql.DB, db *config.Database) []string {
	q, args, err := tsql.PageVerify(db.Name)
	if err != nil {
		return nil
	}
	v, found, err := sqlDB.QueryValue(ctx, "read PAGE_VERIFY", q, args...)
	pv, _ := v.(string)
	if err != nil || !found || pv == "" || strings.EqualFold(pv, "CHECKSUM") {
		return nil
	}
	fix, _ := tsql.PageVerifyChecksum(db.Name)
	return []string{fmt.Sprintf("PAGE_VERIFY of %s is %s: its pages carry no checksum, so BACKUP WITH CHECKSUM cannot verify them and "+
		"damage in the source reaches the sets unseen until CHECKDB of the copy: %s (pages get a checksum when next written)", db.ID(), pv, fix)}
}

// databaseSize sums the allocated size of a database's files: from
// sys.master_files, else (rows not visible to this login) from the
// database's own sys.database_files.
func databaseSize(ctx context.Context, sqlDB *mssql.DB, name string) (data, logBytes int64, err error) {
	sum := func(q string, args ...any) error {
		rows, err := sqlDB.QueryContext(ctx, q, args...)
		if err != nil {
			return sqlError(mssql.Classify(sqlDB.Target, "read the database's size", err))
		}
		defer rows.Close()
		for rows.Next() {
			var typ, pages int64
			if err := rows.Scan(&typ, &pages); err != nil {
				return fmt.Errorf("read the database's size: %w", err)
			}
			if typ == tsql.FileTypeLog {
				logBytes += pages * tsql.PageBytes
			} else {
				data += pages * tsql.PageBytes
			}
		}
		if err := rows.Err(); err != nil {
			return sqlError(mssql.Classify(sqlDB.Target, "read the database's size", err))
		}
		return nil
	}
	q, args, err := tsql.DatabaseFiles(name)
	if err != nil {
		return 0, 0, err
	}
	if err := sum(q, args...); err != nil || data+logBytes > 0 {
		return data, logBytes, err
	}
	q, err = tsql.DatabaseFilesInDatabase(name)
	if err != nil {
		return 0, 0, err
	}
	return data, logBytes, sum(q)
}

// setTimeouts puts a plan's budget into the limits the workflow reads.
func (l *Limits) setTimeouts(b plan.Budget) {
	l.BackupTimeout, l.BackupDeadline = b.Backup.StartToClose, b.Backup.ScheduleToClose
	l.RestoreTimeout, l.RestoreDeadline = b.Restore.StartToClose, b.Restore.ScheduleToClose
	l.CheckDBTimeout, l.CheckDBDeadline = b.CheckDB.StartToClose, b.CheckDB.ScheduleToClose
	l.CopyDeadline = b.Copy.ScheduleToClose
	l.Heartbeat = b.Heartbeat
}

// RunMode is the BackupInput.Mode of this plan's run: nil for a plan
// recorded before plans carried a mode, so that Backup uses the
// configuration instead of a zero mode.
func (p Plan) RunMode() *BackupMode {
	if p.Mode.Sequence == "" {
		return nil
	}
	m := p.Mode
	return &m
}
