package activities

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/hostcheck"
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

// PlanCycle decides the cycle: which database the start names (resolved on
// its instance, resolveDatabase: Plan.Database and Plan.Entry), the
// round-robin primary (from the caller or the manifests on the rotation's
// servers), the fail-over order, the stripe count and the memory guard;
// from the source instance (its database's size, edition and
// updateability, its time zone, its build and TDE) the step timeouts and
// how this run backs up (BackupMode); from the verification instances
// whether they can read the sets (checkVerifiers: InvalidConfig before any
// BACKUP when one cannot). For a database of an availability group, the
// replica it backs up on (chooseReplica; Plan.NotPreferred when none can,
// and owns_backup_chain refused on a secondary, checkChainOnReplica). A
// source that cannot be read is no reason to fail here: the plan says so
// in Warnings and Unresolved, assumes UnknownSizeBytes, and the workflow
// waits for the instance before it runs anything.
func (a *Activities) PlanCycle(ctx context.Context, in PlanInput) (Plan, error) {
	defer a.Cycle.keepAlive(ctx)()
	d := &a.Cycle
	db, unresolved, note, err := a.resolveDatabase(ctx, in.Instance, in.Database)
	if err != nil {
		return Plan{}, err
	}
	if err := d.checkNames(db); err != nil { // a name a selection picked (names.go)
		return Plan{}, err
	}
	log := a.loggerFor(ctx).With(zap.String("db", db.Name))
	// A database of an availability group backs up on the replica SQL
	// Server prefers (replica.go), or not at all this time.
	var choice replicaChoice
	if g, ok := d.config().AvailabilityGroup(db.Instance); ok && unresolved == "" {
		choice = a.chooseReplica(ctx, g, db.Name)
		if choice.replica == "" {
			reason := choice.notPreferredReason(g, db.Name)
			log.Warn("plan: "+reason, zap.String("instance", db.Instance))
			return Plan{Database: db.Name, Instance: db.Instance, Entry: db.Entry, NotPreferred: reason, Warnings: choice.warnings}, nil
		}
		c := *db
		c.Replica = choice.replica
		db = &c
		if err := checkChainOnReplica(db, g, choice.role); err != nil {
			return Plan{}, err
		}
	}
	last, source := in.LastServer, "caller"
	unreachable := map[string]bool{}
	// The manifests tell the last server and the measured throughputs. A
	// caller that names the last server still gets the measurements, but a
	// server it cannot read changes nothing else in its plan.
	var all []*catalog.Manifest
	var readable []string // servers whose calibration reports of the database are read
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
		readable = append(readable, name)
	}
	var primary string
	var rotation []string
	var diff *catalog.DiffBase
	if in.Differential {
		// A differential goes beside its base, the newest verified full
		// (diff.go), and leaves the full backups' round robin alone.
		if err := differentialAllowed(d.config(), db); err != nil {
			return Plan{}, err
		}
		base, holders, why := diffBase(setsOf(db), all)
		if why == "" {
			rotation, why = diffRotation(db, base, holders, unreachable)
		}
		if why != "" {
			log.Warn("plan: no differential now: "+why, zap.String("instance", db.Instance))
			return Plan{Database: db.Name, Instance: db.Instance, Entry: db.Entry, NoDifferentialBase: why, Warnings: choice.warnings}, nil
		}
		diff = &catalog.DiffBase{Sequence: base.Sequence, BackupSetGUID: base.Header.BackupSetGUID}
		primary, last, source = rotation[0], base.PrimaryServer, "differential base"
	} else {
		if last == "" {
			last, source = catalog.LastServer(setsOf(db), all), "manifests"
			if last == "" {
				source = "none"
			}
		}
		var err error
		primary, err = plan.NextServer(db.BackupServers, last, unreachable)
		if errors.Is(err, plan.ErrNoServerReachable) {
			// Let the backup step find out and wait for a server.
			primary, err = plan.NextServer(db.BackupServers, last, nil)
		}
		if err != nil {
			return Plan{}, nonRetryable(ErrInvalidConfig, err)
		}
		i := slices.Index(db.BackupServers, primary)
		rotation = append(slices.Clone(db.BackupServers[i:]), db.BackupServers[:i]...)
	}

	srv, err := d.server(primary)
	if err != nil {
		return Plan{}, err
	}
	src, warnings := a.readSource(ctx, db)
	src.Role = choice.role
	warnings = append(choice.warnings, warnings...)
	if note != "" {
		warnings = append(warnings, note)
	}
	mode, modeWarnings := backupMode(db, src)
	if diff != nil {
		// A differential is never COPY_ONLY (SQL Server ignores it beside
		// DIFFERENTIAL): whatever made this run's full COPY_ONLY does not
		// apply; its base is a conventional full.
		mode.CopyOnly, mode.Differential = false, diff
		modeWarnings = slices.DeleteFunc(modeWarnings, func(w string) bool { return strings.HasPrefix(w, "copy_only:") })
	}
	warnings = append(warnings, modeWarnings...)
	size := src.SizeBytes
	if size <= 0 {
		size = plan.UnknownSizeBytes
	}
	// SQL Server on Linux cannot write to UNC paths: refused before any
	// BACKUP, for every server the rotation may fail over to.
	if strings.EqualFold(src.Platform, hostcheck.Linux) {
		for _, name := range rotation {
			if b, _ := d.server(name); b != nil {
				if err := checkHostPaths(db.Source(), hostcheck.Facts{Platform: src.Platform}, b); err != nil {
					return Plan{}, err
				}
			}
		}
	}
	nics := len(srv.PathsFor(db.Source())) // the source's paths to its primary
	stripes := int(db.Stripes)
	if db.Stripes == config.StripesAuto {
		stripes, err = autoStripes(size, nics, db)
	} else {
		err = plan.CheckBalance(stripes, nics)
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
		Database: db.Name, Instance: db.Instance, Replica: db.Replica, Entry: db.Entry, Unresolved: unresolved,
		Rotation: rotation, LastServer: last, LastServerSource: source,
		Stripes: stripes, Remote: db.CopyTarget(primary), Remotes: map[string]string{},
		KeepVerifyDB: db.KeepVerifyDB, MemoryBytes: plan.BackupMemory(tuning, 1),
		Limits: Limits{
			HostWait: db.SQLHostWait.GiveUpAfter, ServerWait: db.BackupServerWait.GiveUpAfter,
			WaitInitial: db.SQLHostWait.Initial, WaitMax: db.SQLHostWait.MaxInterval,
			CopyRetry: db.CopyWait.Initial, CopyRetryMax: db.CopyWait.MaxInterval,
		},
		Source: src, Mode: mode,
	}
	if db.LogBackups() {
		// What the log proof takes on the verification instance beside
		// the cycle's copy; preflight checks it against the volumes.
		ps := plan.ProofSpaceOf(db.ProofMode(), db.KeepVerifyDB, max(src.SizeBytes-src.LogBytes, 0), src.LogBytes)
		p.ProofSpace = &ps
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
	if db.ImmutableCopy != "" {
		// The object store that takes the verified set's locked copy: a
		// slot of its max_concurrent, and its task_queue for the copy.
		target, err := d.server(db.ImmutableCopy)
		if err != nil {
			return Plan{}, err
		}
		if !target.IsObjectStore() {
			return Plan{}, nonRetryable(ErrInvalidConfig, fmt.Errorf("database %s: immutable_copy %s is not a kind: s3 backup server", db.ID(), target.Name))
		}
		p.Immutable = target.Name
		if target.TaskQueue != "" {
			if p.CopyQueues == nil {
				p.CopyQueues = map[string]string{}
			}
			p.CopyQueues[target.Name] = target.TaskQueue
		}
	}
	p.Evidence = d.config().Evidence.Signs()
	p.Slots = slotsOf(d.config(), db.Instance, primary, p.Remote, p.Immutable)
	if d.FreeSlots != nil {
		// Each resource's lookups at once: they are round trips to Temporal.
		var wg sync.WaitGroup
		for i := range p.Slots {
			wg.Go(func() { p.Slots[i].Free = d.FreeSlots(ctx, p.Slots[i]) })
		}
		wg.Wait()
	}
	// Before any BACKUP: can the source encrypt them, can every
	// verification instance read the sets?
	if src.EncryptorProblem != "" {
		return Plan{}, nonRetryable(ErrInvalidConfig, errors.New(src.EncryptorProblem))
	}
	vw, err := a.checkVerifiers(ctx, db, src, mode, verifyInstances(d, p))
	if err != nil {
		return Plan{}, err
	}
	warnings = append(warnings, vw...)

	est, rates, err := measuredEstimate(size, nics, len(remote.UNCPaths), mode.Compression,
		int64(remote.BandwidthLimit), plan.FromManifests(setsOf(db), all, a.calibrations(ctx, db, readable)...))
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
	if unresolved != "" {
		log.Warn("plan: "+unresolved+": waiting for the instance before the cycle runs", zap.String("instance", db.Instance))
	} else if in.AllocateSequence {
		// Failing here fails nothing: the cycle's own AllocateSequence
		// takes over, with its waits for the source.
		seq, err := a.AllocateSequence(ctx, SequenceInput{Database: p.Database, Instance: p.Instance, Entry: p.Entry,
			Method: mode.Sequence, Replica: p.Replica})
		if err != nil {
			log.Warn("plan: sequence not allocated: the cycle allocates it", zap.String("instance", db.Instance), zap.Error(err))
		}
		p.Sequence = seq
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
	// ProductVersion is the source's build (SERVERPROPERTY
	// 'ProductVersion', e.g. 16.0.4135.4): no older major version restores
	// its backups.
	ProductVersion string `json:"product_version,omitempty"`
	// TDE: the database is encrypted (sys.databases.is_encrypted); its
	// backups restore only where master holds the certificate
	// TDECertificate of thumbprint TDEThumbprint (0x...), each "" when the
	// login may not read it.
	TDE            bool   `json:"tde,omitempty"`
	TDEThumbprint  string `json:"tde_thumbprint,omitempty"`
	TDECertificate string `json:"tde_certificate,omitempty"`
	// EncryptorThumbprint is the thumbprint (0x...) of the certificate
	// db's backups are encrypted with (encryption:), read from master of
	// the source; "" without encryption or when not read. EncryptorProblem
	// says why the source's BACKUP WITH ENCRYPTION cannot succeed (its
	// edition, the certificate missing, invisible to the login, or
	// expired).
	EncryptorThumbprint string `json:"encryptor_thumbprint,omitempty"`
	EncryptorProblem    string `json:"encryptor_problem,omitempty"`
	// Platform is the operating system SQL Server runs on (Windows,
	// Linux; sys.dm_os_host_info), "" when not read.
	Platform string `json:"platform,omitempty"`
	// Role is the replica's role for a database of an availability group,
	// RolePrimary or RoleSecondary ("" outside a group, or when the login
	// may not read it: sys.dm_hadr_database_replica_states).
	Role string `json:"role,omitempty"`
}

// ReadOnly reports whether the source database takes no writes.
func (s SourceFacts) ReadOnly() bool { return strings.EqualFold(s.Updateability, "READ_ONLY") }

// BackupMode is how this run backs up: the configuration, adjusted to what
// the source allows. Backup and AllocateSequence follow it.
type BackupMode struct {
	Compression bool   `json:"compression"`
	CopyOnly    bool   `json:"copy_only"`
	Sequence    string `json:"sequence"`
	// MaxTransferSize, when set, replaces the configured max_transfer_size
	// (0): a TDE database on SQL Server 2016 or 2017 compresses only with
	// an explicit one (plan.TDEMaxTransferSize).
	MaxTransferSize int `json:"max_transfer_size,omitempty"`
	// Differential, when set, takes a differential (BACKUP ... WITH
	// DIFFERENTIAL, never COPY_ONLY) on this base, the newest verified
	// full as the plan found it: its set number and backup set GUID (the
	// LSN comes with the header).
	Differential *catalog.DiffBase `json:"differential,omitempty"`
}

// backupMode adjusts the configured mode to the source, saying why:
//   - no COMPRESSION on an edition that refuses it (Express, Web), where
//     the BACKUP would fail;
//   - COPY_ONLY for a read-only database and on an availability-group
//     secondary: "BACKUP DATABASE supports only copy-only full backups ...
//     on secondary replicas"
//     (https://learn.microsoft.com/sql/database-engine/availability-groups/windows/active-secondaries-backup-on-secondary-replicas-always-on-availability-groups),
//     and a read-only database's differential base cannot be moved anyway;
//   - for a TDE database with COMPRESSION, a warning on builds whose
//     compressed TDE backups may not restore (plan.TDECompressionRisk), and
//     on SQL Server 2016 and 2017 an explicit MAXTRANSFERSIZE when none is
//     configured, without which its pages do not compress
//     (plan.TDEMaxTransferSize);
//   - a sequence that writes nothing to the source: `table` updates a row
//     in the database, so such a run allocates from the catalog beside the
//     manifests (`catalog`) instead.
//
// A database of a configured availability group backs up on the replica
// the plan chose (Plan.Replica): COPY_ONLY unless that replica is the
// primary (SourceFacts.Role; owns_backup_chain on a secondary is refused
// before, checkChainOnReplica). Outside a configured group a readable
// secondary reports READ_ONLY updateability: "you cannot write data to
// secondary databases" (Active Secondaries: Readable Secondary Replicas);
// its BACKUP is COPY_ONLY by default all the same (copy_only is true
// unless owns_backup_chain).
func backupMode(db *config.Database, src SourceFacts) (BackupMode, []string) {
	m := configuredMode(db)
	var warnings []string
	if m.Compression {
		if ok, known := plan.CompressionSupported(src.EngineEdition, src.Edition); known && !ok {
			m.Compression = false
			warnings = append(warnings, fmt.Sprintf(
				"compression: %s of %s cannot create compressed backups (only Enterprise, Standard and Developer can): backing up without COMPRESSION; set compression: false to say so",
				editionName(src), db.Instance))
		}
	}
	if m.Compression && src.TDE {
		srcVersion, _ := plan.ParseVersion(src.ProductVersion)
		if why, fix := plan.TDECompressionRisk(srcVersion); why != "" {
			warnings = append(warnings, fmt.Sprintf("compression: %s is encrypted (TDE) and %s; %s", db.ID(), why, fix))
		}
		if n := plan.TDEMaxTransferSize(srcVersion); n > 0 && db.MaxTransferSize == 0 {
			m.MaxTransferSize = n
			warnings = append(warnings, fmt.Sprintf(
				"max_transfer_size: %s is encrypted (TDE) and %s compresses it only with MAXTRANSFERSIZE above 64 KiB: sending MAXTRANSFERSIZE = %d; set max_transfer_size to say so",
				db.ID(), srcVersion.Release(), n))
		}
	}
	if db.Replica != "" && src.Role != RolePrimary {
		// A secondary (or a replica whose role is unknown) takes only
		// COPY_ONLY full backups; owns_backup_chain was refused there
		// (checkChainOnReplica), and nothing may be written to it.
		m.CopyOnly = true
		if m.Sequence == config.SequenceTable {
			m.Sequence = config.SequenceCatalog
			warnings = append(warnings, fmt.Sprintf(
				"sequence: %s backs up on %s, a secondary replica, whose DBBackup.Sequence table cannot be updated: this run takes its number from the manifests (sequence: catalog); configure sequence: catalog to make that permanent",
				db.ID(), db.Replica))
		}
		return m, warnings
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

// configuredMode is the BACKUP mode the configuration gives the database.
func configuredMode(db *config.Database) BackupMode {
	return BackupMode{Compression: db.Compression, CopyOnly: db.CopyOnly, Sequence: db.Sequence}
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
	inst, err := a.Cycle.sourceInstance(db)
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
		engine                          sql.NullInt64
		edition, updateability, version sql.NullString
		utcNow, localNow                sql.NullTime
	)
	if err := sqlDB.QueryRowContext(ctx, q, args...).Scan(&engine, &edition, &updateability, &utcNow, &localNow, &version); err != nil {
		return src, unknown("edition and updateability", sqlError(mssql.Classify(sqlDB.Target, "read the source's edition", err)))
	}
	src.Read = true
	src.EngineEdition, src.Edition, src.Updateability = int(engine.Int64), edition.String, updateability.String
	src.ProductVersion = version.String
	if utcNow.Valid && localNow.Valid {
		off := utcOffsetMinutes(utcNow.Time, localNow.Time)
		src.UTCOffsetMinutes = &off
	}
	var warnings []string
	if f, ok := hostFacts(ctx, sqlDB, inst.Name, a.loggerFor(ctx)); ok {
		src.Platform = f.Platform
	}
	if inst.Platform != "" && src.Platform != "" && !strings.EqualFold(inst.Platform, src.Platform) {
		warnings = append(warnings, fmt.Sprintf("platform: %s is declared %s in the configuration but runs on %s: fix platform under sql_instances",
			inst.Name, inst.Platform, src.Platform))
	}
	if !updateability.Valid {
		warnings = append(warnings, fmt.Sprintf("updateability of %s not read: the database is missing on %s or not visible to its login", db.ID(), inst.Name))
	} else {
		warnings = append(warnings, readEncryption(ctx, sqlDB, db, &src)...)
		warnings = append(warnings, a.readEncryptor(ctx, sqlDB, db, &src)...)
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
