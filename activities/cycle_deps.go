package activities

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/selection"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
	"github.com/backupcycle/backupcycle/internal/storage/location"
	"github.com/backupcycle/backupcycle/internal/storage/s3"
)

// CycleDeps are the BackupCycle activities' dependencies. Config or Live is
// required; the functions default to the real implementations.
type CycleDeps struct {
	// Config is a configuration fixed for the worker's lifetime; Live, when
	// set, takes its place.
	Config *config.Config
	// Live is the configuration of a worker that re-reads its file while it
	// runs: each lookup reads the one in force, so a database added to the
	// file needs no restart.
	Live LiveConfig
	// OpenStorage opens a backup server's directory as the worker reaches it
	// (its location), credentials resolved inside. Default: location.OpenServer.
	OpenStorage func(ctx context.Context, srv *config.BackupServer) (storage.Storage, error)
	// OpenSQL connects to an instance with database as the initial one.
	// Default: mssql.Open with the password resolved from the config.
	OpenSQL func(ctx context.Context, inst *config.SQLInstance, database string) (*mssql.DB, error)
	// Signal sends a signal to a workflow (client.SignalWorkflow); nil
	// disables live progress in the `progress` query.
	Signal func(ctx context.Context, workflowID, runID, name string, arg any) error
	// Schedules keeps the drill and differential schedules of databases a
	// selection picks (the worker's Temporal client); nil: a fleet run
	// keeps none.
	Schedules ScheduleKeeper
	// Now is the clock of manifests and retention. Default time.Now.
	Now func() time.Time
	// Poll is how often a re-attached statement is polled and idle
	// heartbeats are sent. Default 2 s.
	Poll time.Duration
	// HeartbeatTimeout of the long activities, handed to the workflow in
	// the plan; 0 = the workflow's default (1 min).
	HeartbeatTimeout time.Duration
	// FreeSlots finds indexes of a slot no cycle holds now (Slot.Free),
	// from Temporal; nil: the cycle tries its slots in order.
	FreeSlots func(ctx context.Context, s Slot) []int
}

// ScheduleKeeper creates or updates the drill schedules of drills and the
// differential schedules of diffs (starter/client's Client), deleting
// none, and returns the ids of those kept.
type ScheduleKeeper interface {
	KeepSelectedSchedules(ctx context.Context, drills, diffs []*config.Database) ([]string, error)
}

// LiveConfig is a configuration file the worker re-reads while it runs
// (on change and on SIGHUP), swapping the whole configuration at once.
type LiveConfig interface {
	// Config is the configuration in force.
	Config() *config.Config
	// Reload re-reads the file now if it changed and returns the
	// configuration then in force (the previous one when the file does not
	// load).
	Reload() *config.Config
}

// config is the configuration in force.
func (d *CycleDeps) config() *config.Config {
	if d.Live != nil {
		if c := d.Live.Config(); c != nil {
			return c
		}
	}
	return d.Config
}

// lookup finds something in the configuration in force; on a miss a live
// configuration is re-read first, so an entry saved a moment ago is found
// without waiting for the next poll of the file.
func lookup[T any](d *CycleDeps, find func(*config.Config) (T, error)) (T, error) {
	cfg := d.config()
	v, err := find(cfg)
	if err == nil || d.Live == nil {
		return v, err
	}
	if fresh := d.Live.Reload(); fresh != nil && fresh != cfg {
		if v, err2 := find(fresh); err2 == nil {
			return v, nil
		}
	}
	return v, err
}

// notConfigured completes a "not configured" error with how the worker
// learns of the fix: a live configuration is re-read on change, a fixed one
// only by a restart.
func (d *CycleDeps) notConfigured(err error) error {
	file := d.config().File
	if d.Live != nil {
		return fmt.Errorf("%w (this worker re-reads %s when it changes and on SIGHUP, no restart needed; "+
			"if this persists after the edit, the worker's log names the lines that kept the file from loading)", err, file)
	}
	return fmt.Errorf("%w (then restart the worker: it read %s at start)", err, file)
}

func (d *CycleDeps) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *CycleDeps) poll() time.Duration {
	if d.Poll > 0 {
		return d.Poll
	}
	return 2 * time.Second
}

// database is the configuration of a database of a cycle: name is its
// sys.databases spelling, as the cycle's plan resolved it, and entry the
// databases: entry it is backed up with when that is spelled otherwise
// (Plan.Entry, "" otherwise): selection.Configured.
func (d *CycleDeps) database(instance, name, entry string) (*config.Database, error) {
	if d.config() == nil {
		return nil, errNotWired
	}
	// A database the instance's selection picks without an entry of its
	// own is backed up with the inherited settings.
	db, err := lookup(d, func(c *config.Config) (*config.Database, error) {
		return selection.Configured(c, instance, name, entry)
	})
	if err != nil {
		return nil, nonRetryable(ErrInvalidConfig, d.notConfigured(err))
	}
	return db, nil
}

// sourceDatabase is database for the activities that read from the
// source: replica is the plan's (Plan.Replica), the replica of the
// database's availability group the cycle backs up on, "" for a database
// of an instance. The result is a copy: Replica is set on it.
func (d *CycleDeps) sourceDatabase(instance, name, entry, replica string) (*config.Database, error) {
	db, err := d.database(instance, name, entry)
	if err != nil || replica == "" {
		return db, err
	}
	g, ok := d.config().AvailabilityGroup(db.Instance)
	if !ok || !slices.Contains(g.Replicas, replica) {
		return nil, nonRetryable(ErrInvalidConfig, d.notConfigured(fmt.Errorf(
			"%s is not a replica of availability group %s in %s (its replicas changed while the cycle ran): the next cycle plans again", replica, db.Instance, d.config().File)))
	}
	c := *db
	c.Replica = replica
	return &c, nil
}

// sourceInstance is the SQL instance to ask about db's source: its
// replica (db.Source), or, for a database of an availability group whose
// cycle chose none, the group's first replica (what a source tells of
// itself there, its build and certificates, every replica has).
func (d *CycleDeps) sourceInstance(db *config.Database) (*config.SQLInstance, error) {
	if g, ok := d.config().AvailabilityGroup(db.Source()); ok && len(g.Replicas) > 0 {
		return d.instance(g.Replicas[0])
	}
	return d.instance(db.Source())
}

func (d *CycleDeps) server(name string) (*config.BackupServer, error) {
	srv, err := lookup(d, func(c *config.Config) (*config.BackupServer, error) {
		if srv, ok := c.BackupServer(name); ok {
			return srv, nil
		}
		return nil, fmt.Errorf("backup server %q is not configured in %s: add it under backup_servers:", name, c.File)
	})
	if err != nil {
		return nil, nonRetryable(ErrInvalidConfig, d.notConfigured(err))
	}
	return srv, nil
}

func (d *CycleDeps) instance(name string) (*config.SQLInstance, error) {
	inst, err := lookup(d, func(c *config.Config) (*config.SQLInstance, error) {
		if inst, ok := c.SQLInstance(name); ok {
			return inst, nil
		}
		return nil, fmt.Errorf("SQL instance %q is not configured in %s: add it under sql_instances:", name, c.File)
	})
	if err != nil {
		return nil, nonRetryable(ErrInvalidConfig, d.notConfigured(err))
	}
	return inst, nil
}

// openSQL connects and classifies the failure.
func (d *CycleDeps) openSQL(ctx context.Context, inst *config.SQLInstance, database string) (*mssql.DB, error) {
	open := d.OpenSQL
	if open == nil {
		open = func(ctx context.Context, inst *config.SQLInstance, database string) (*mssql.DB, error) {
			t, err := mssql.TargetFor(*inst, database)
			if err != nil {
				return nil, nonRetryable(ErrInvalidConfig, err)
			}
			return mssql.Open(ctx, t)
		}
	}
	db, err := open(ctx, inst, database)
	if err != nil {
		return nil, sqlError(err)
	}
	return db, nil
}

// openStorage opens a backup server's directory and classifies the failure.
func (d *CycleDeps) openStorage(ctx context.Context, srv *config.BackupServer) (storage.Storage, error) {
	open := d.OpenStorage
	if open == nil {
		open = location.OpenServer
	}
	st, err := open(ctx, srv)
	if errors.Is(err, config.ErrSecretUnavailable) {
		return nil, nonRetryable(ErrInvalidConfig, err)
	}
	if errors.Is(err, storage.ErrNotFound) {
		// The server answers but the directory itself is missing: a wrong
		// location, which no retry fixes (a missing FILE of a set is
		// storageError's "incomplete set").
		return nil, nonRetryable(ErrInvalidConfig, fmt.Errorf(
			"backup server %s: location %s does not exist: create the directory on the server or fix location: in %s: %w",
			srv.Name, srv.Location, d.config().File, err))
	}
	if err != nil {
		return nil, storageError(srv.Name, err)
	}
	return st, nil
}

// nonRetryable wraps err as a non-retryable ApplicationError of type typ.
func nonRetryable(typ string, err error) error {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return err
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), typ, err)
}

// retryable wraps err as a retryable ApplicationError of type typ: the
// workflow's policy decides whether to retry it or handle it itself.
func retryable(typ string, err error, details ...any) error {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return err
	}
	return temporal.NewApplicationErrorWithCause(err.Error(), typ, err, details...)
}

// sqlError maps a classified SQL failure to the cycle's error types.
func sqlError(err error, details ...any) error {
	var appErr *temporal.ApplicationError
	if err == nil || errors.As(err, &appErr) {
		return err
	}
	if m, ok := sqlKindError(err, details...); ok {
		return m
	}
	if m, ok := hostKindError(err, details...); ok {
		return m
	}
	switch {
	case errors.Is(err, mssql.ErrLoginFailed):
		return nonRetryable(ErrLoginFailed, fmt.Errorf("%w: check the user and the password reference of the instance", err))
	case errors.Is(err, mssql.ErrDatabaseNotFound):
		return nonRetryable(ErrDatabaseNotFound, fmt.Errorf("%w: check the database name in the config (names are exact)", err))
	case errors.Is(err, mssql.ErrInvalidTarget):
		return nonRetryable(ErrInvalidConfig, err)
	// The instance cannot read the backup (Restore names the versions or
	// the certificate): the environment, never the set's content.
	case errors.Is(err, mssql.ErrCertificateMissing):
		return temporal.NewNonRetryableApplicationError(err.Error()+
			": install the certificate of the source database's TDE or backup encryption in master of this instance (BACKUP CERTIFICATE ... WITH PRIVATE KEY on the source, CREATE CERTIFICATE ... FROM FILE here)",
			ErrInvalidConfig, err, details...)
	case errors.Is(err, mssql.ErrEncryptorRefused):
		return temporal.NewNonRetryableApplicationError(err.Error()+
			": the certificate of encryption.server_certificate (or the asymmetric key) must be in master of the source, not expired, and visible to the worker's login (GRANT VIEW DEFINITION ON CERTIFICATE::[name]); `starter preflight` checks it",
			ErrInvalidConfig, err, details...)
	case errors.Is(err, mssql.ErrNewerVersion), errors.Is(err, mssql.ErrUnreadableFormat):
		return temporal.NewNonRetryableApplicationError(err.Error()+
			": this instance cannot read the backup's version or format: upgrade it to the source's version and build or later",
			ErrInvalidConfig, err, details...)
	case errors.Is(err, mssql.ErrBackupPathInvalid):
		return temporal.NewNonRetryableApplicationError(err.Error()+
			": check the backup server's paths for this instance, its sql_paths or unc_paths (the directory must exist and SQL Server's service account must write there; SQL Server on Linux cannot open UNC paths)",
			ErrInvalidConfig, err, details...)
	case errors.Is(err, mssql.ErrSecondaryReplica):
		// The plan refuses owns_backup_chain on a secondary before any
		// BACKUP; this is a fail-over between the plan and the BACKUP.
		return temporal.NewNonRetryableApplicationError(err.Error()+
			": a secondary replica of an availability group takes only COPY_ONLY full backups: back up on the primary (ALTER AVAILABILITY GROUP ... SET (AUTOMATED_BACKUP_PREFERENCE = PRIMARY)) or remove owns_backup_chain; the next cycle plans on the replica preferred then",
			ErrInvalidConfig, err, details...)
	case errors.Is(err, mssql.ErrShareFull):
		return temporal.NewNonRetryableApplicationError(err.Error()+": free space on the backup share or let retention run", ErrShareFull, err, details...)
	case errors.Is(err, mssql.ErrCorruptBackup):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrCorruptBackup, err, details...)
	case errors.Is(err, mssql.ErrInsufficientMemory):
		return temporal.NewNonRetryableApplicationError(err.Error()+": lower buffer_count / max_transfer_size or the stripe count", ErrInsufficientMemory, err, details...)
	case errors.Is(err, mssql.ErrCheckDBFailed):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrCheckDBFailed, err, details...)
	case errors.Is(err, mssql.ErrSourceDamaged):
		return temporal.NewNonRetryableApplicationError(err.Error()+": the source database is damaged: run DBCC CHECKDB on it",
			ErrSourceDatabaseDamaged, err, details...)
	case errors.Is(err, mssql.ErrBackupTargetUnreachable):
		return retryable(ErrBackupTargetUnreachable, err, details...)
	case errors.Is(err, mssql.ErrUnreachable):
		return retryable(ErrSQLHostUnreachable, err, details...)
	}
	return temporal.NewApplicationErrorWithCause(err.Error(), ErrSQLError, err, details...)
}

// storageError maps a storage failure of a backup server to the cycle's types.
func storageError(server string, err error) error {
	var appErr *temporal.ApplicationError
	if err == nil || errors.As(err, &appErr) {
		return err
	}
	err = fmt.Errorf("backup server %s: %w", server, err)
	switch {
	case errors.Is(err, storage.ErrNoSpace):
		return nonRetryable(ErrShareFull, err)
	case errors.Is(err, storage.ErrAuth), errors.Is(err, storage.ErrShareNotFound), errors.Is(err, storage.ErrPermission),
		errors.Is(err, storage.ErrInvalidName), errors.Is(err, storage.ErrNotRegular), errors.Is(err, storage.ErrTooLarge):
		// ErrNotRegular and ErrTooLarge: something else took a name of the
		// set (a link, a huge file); a person removes it, and it says
		// nothing about the set's content.
		return nonRetryable(ErrInvalidConfig, err)
	case errors.Is(err, copier.ErrReadBack):
		// A copy's destination read back otherwise than the bytes sent
		// (its disk, the path to it, an earlier attempt still writing the
		// partial file): the copy is bad, not the set, whose bytes hashed
		// as they were sent. The retry copies again.
		return retryable(ErrBackupTargetUnreachable, err)
	case errors.Is(err, storage.ErrCorrupt):
		return nonRetryable(ErrCorruptBackup, err)
	case errors.Is(err, storage.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		// A file of the set is missing on a reachable server: the set is
		// incomplete, and no retry brings the file back.
		return nonRetryable(ErrCorruptBackup, fmt.Errorf("%w: the backup set is incomplete", err))
	}
	return retryable(ErrBackupTargetUnreachable, err)
}

// heartbeat records details when running as an activity (tests may call the
// methods directly).
func heartbeat(ctx context.Context, details any) {
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx, details)
	}
}

// keepAlive heartbeats every d.poll() until stop is called: activities that
// report no progress of their own (a DROP DATABASE, retention over a large
// share, a manifest update) still run under a heartbeat timeout, so a dead
// worker is noticed within it and not only after the StartToClose timeout.
// The first goes after one interval: an activity shorter than that sends
// none (each is an RPC, and a write of the workflow's state on the
// server; the heartbeat timeout is minutes).
func (d *CycleDeps) keepAlive(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(d.poll())
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			activity.RecordHeartbeat(ctx)
		}
	}()
	// stop waits for the goroutine: a heartbeat recorded after the activity
	// returned would race with whatever the worker does with the attempt next.
	var once sync.Once
	return func() { once.Do(func() { close(done); <-exited }) }
}

// objectStoreError classifies an object store's failure: a bucket that does
// not keep the lock is NotImmutable; credentials, a missing bucket, a
// refused request are the configuration's (InvalidConfig); the rest is
// retried (ObjectStoreUnreachable).
func objectStoreError(server string, err error) error {
	if err == nil || isAppError(err) {
		return err
	}
	err = fmt.Errorf("object store %s: %w", server, err)
	switch {
	case errors.Is(err, config.ErrSecretUnavailable):
		return nonRetryable(ErrInvalidConfig, err)
	case errors.Is(err, s3.ErrNotLocked):
		return nonRetryable(ErrNotImmutable, err)
	case errors.Is(err, storage.ErrAuth), errors.Is(err, storage.ErrShareNotFound), errors.Is(err, storage.ErrPermission),
		errors.Is(err, storage.ErrInvalidName):
		return nonRetryable(ErrInvalidConfig, fmt.Errorf("%w: check the bucket, the access key and the bucket policy (README \"Immutable copies on object storage\")", err))
	case errors.Is(err, storage.ErrNoSpace), errors.Is(err, storage.ErrUnsupported), s3.Refused(err) && !errors.Is(err, storage.ErrConnection):
		// The server's considered answer: the same request meets it again.
		return nonRetryable(ErrImmutableCopyFailed, err)
	}
	return retryable(ErrObjectStoreUnreachable, err)
}
