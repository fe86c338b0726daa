package activities

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/metrics"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/limit"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The plumbing the log chain's activities (package activities/logs) share
// with the cycle's: the same configuration lookups, openers, error
// classification and long-statement handling, exported as small helpers
// rather than copied. They are methods of CycleDeps or functions, never
// exported methods of Activities (each of which would be registered as an
// activity).

// Logger is the worker logger tagged with the running activity and its
// workflow.
func Logger(a *Activities, ctx context.Context) *zap.Logger { return a.loggerFor(ctx) }

// Recorder is a's metrics recorder (one that records nothing without).
func Recorder(a *Activities) metrics.Recorder { return a.recorder() }

// Database is the configured database (instance, name) the configuration in
// force names, a missing one InvalidConfig naming the fix.
func (d *CycleDeps) Database(instance, name string) (*config.Database, error) {
	return d.database(instance, name, "")
}

// AvailabilityGroup is the configured availability group of that name.
func (d *CycleDeps) AvailabilityGroup(name string) (*config.AvailabilityGroup, bool) {
	if d.config() == nil {
		return nil, false
	}
	return d.config().AvailabilityGroup(name)
}

// Instance is the configured SQL instance of that name (InvalidConfig when
// missing).
func (d *CycleDeps) Instance(name string) (*config.SQLInstance, error) { return d.instance(name) }

// Server is the configured backup server of that name (InvalidConfig when
// missing).
func (d *CycleDeps) Server(name string) (*config.BackupServer, error) { return d.server(name) }

// ConnectSQL opens a connection to inst, failures classified.
func (d *CycleDeps) ConnectSQL(ctx context.Context, inst *config.SQLInstance, database string) (*mssql.DB, error) {
	return d.openSQL(ctx, inst, database)
}

// OpenServer opens a backup server's directory, failures classified.
func (d *CycleDeps) OpenServer(ctx context.Context, srv *config.BackupServer) (storage.Storage, error) {
	return d.openStorage(ctx, srv)
}

// ConfigFile is the configuration file in force, for messages.
func (d *CycleDeps) ConfigFile() string { return d.config().File }

// ManifestKeys are the configuration's manifest keys (nil without any).
func (d *CycleDeps) ManifestKeys() (*catalog.Keys, error) { return d.manifestKeys() }

// Clock is the clock of records and retention.
func (d *CycleDeps) Clock() time.Time { return d.now() }

// PollEvery is how often statements are polled and idle heartbeats sent.
func (d *CycleDeps) PollEvery() time.Duration { return d.poll() }

// KeepAlive heartbeats until stop is called (see keepAlive).
func (d *CycleDeps) KeepAlive(ctx context.Context) (stop func()) { return d.keepAlive(ctx) }

// NotOfDatabase is the InvalidConfig of an input naming a backup server the
// database does not use as what.
func (d *CycleDeps) NotOfDatabase(db *config.Database, input, server, what string, allowed []string) error {
	return d.notOfDatabase(db, input, server, what, allowed)
}

// ListManifests reads the database's manifests on a backup server.
func ListManifests(a *Activities, ctx context.Context, server string, db *config.Database) (catalog.Listing, error) {
	return a.listManifests(ctx, server, db)
}

// SQLError maps a SQL failure to the stable error types; details go to a
// retryable one's ApplicationError.
func SQLError(err error, details ...any) error { return sqlError(err, details...) }

// StorageError maps a backup server's storage failure to the stable types.
func StorageError(server string, err error) error { return storageError(server, err) }

// Bandwidth is the limiter of writes into a backup server (its
// bandwidth_limit, shared by every copy into it; nil: unlimited). A
// function: every exported method of Activities is an activity.
func Bandwidth(a *Activities, srv *config.BackupServer) *limit.Limiter {
	return a.bandwidth.For(srv.Name, int64(srv.BandwidthLimit))
}

// ObjectStoreError maps an object store's failure to the stable types.
func ObjectStoreError(server string, err error) error { return objectStoreError(server, err) }

// NonRetryable wraps err as a non-retryable ApplicationError of type typ.
func NonRetryable(typ string, err error) error { return nonRetryable(typ, err) }

// Retryable wraps err as a retryable ApplicationError of type typ, with
// details.
func Retryable(typ string, err error, details ...any) error { return retryable(typ, err, details...) }

// Heartbeat records details when running as an activity.
func Heartbeat(ctx context.Context, details any) { heartbeat(ctx, details) }

// IsRetry reports an attempt after the first (or one with heartbeat
// details): an earlier attempt may have left work behind.
func IsRetry(ctx context.Context) bool { return isRetry(ctx) }

// RunOf is the running activity's workflow and run id ("" outside one).
func RunOf(ctx context.Context) (workflowID, runID string) { return runOf(ctx) }

// ServerOffset reads a server's offset from UTC now, in minutes.
func ServerOffset(ctx context.Context, sqlDB *mssql.DB) (int, error) { return serverOffset(ctx, sqlDB) }

// BackupOffset is the offset from UTC, in minutes, of the clock backup set
// guid's dates are on, as msdb recorded it (the server's now when it
// records none).
func BackupOffset(ctx context.Context, sqlDB *mssql.DB, guid string) (int, error) {
	return backupOffset(ctx, sqlDB, guid)
}

// Statement is a long statement another package's step runs under the
// cycle's rules (statement.go): sent without STATS and not bound to the
// attempt, found again by its marker after a worker crash instead of sent
// twice, stopped only on cancel.
type Statement struct {
	DB      *mssql.DB
	Op      string // e.g. "BACKUP LOG": errors are classified by it
	Command string // its sys.dm_exec_requests.command (tsql.CommandBackupLog)
	Text    string
	Marker  string // the start of the batch only this statement has
	Log     *zap.Logger
	Step    string // for the heartbeats' progress
	Number  int64
	// Signal sends the statement's percent to the workflow as the
	// ProgressSignal (StepProgress of Step and Number), as the cycle's
	// steps do; a workflow without a handler for it leaves it quiet.
	Signal bool
	// Tag, when set, must also be in the batch (mssql.Marker.Tag): for a
	// statement whose start others share.
	Tag string
}

// reporter is the statement's progress reporter: quiet unless Signal.
func (s Statement) reporter(a *Activities, ctx context.Context) *reporter {
	if s.Signal {
		return a.newReporter(ctx, s.Step, s.Number)
	}
	return a.newQuietReporter(ctx, s.Step, s.Number)
}

func (s Statement) long() *longStatement {
	return &longStatement{db: s.DB, op: s.Op, command: s.Command, text: s.Text, marker: mssql.Marker{Prefix: s.Marker, Tag: s.Tag}, log: s.Log}
}

// AwaitEarlier looks for the statement an earlier attempt sent, still
// running in this process or on the instance, and waits for it to end.
// waited: one was found (res and err are its outcome when it was this
// process's; otherwise the caller reads what it left). A login that cannot
// see other sessions gets StatementMayStillRun, naming the grant.
func AwaitEarlier(a *Activities, ctx context.Context, s Statement) (waited bool, res mssql.Result, err error) {
	ls := s.long()
	found, err := ls.find(ctx)
	if err != nil {
		return false, res, err
	}
	rep := s.reporter(a, ctx)
	switch {
	case found.local != nil:
		res, err = a.wait(ctx, ls, found, rep)
		return true, res, err
	case found.session > 0:
		_, err = a.wait(ctx, ls, found, rep)
		return true, mssql.Result{Percent: -1}, err
	case found.blind:
		return false, res, blindError(ls, nil)
	}
	return false, res, nil
}

// RunStatement sends the statement and waits for it (see wait): a lost
// connection is followed on the instance (IsEndedUnseen: read what it
// left), the end of the attempt leaves it running (StatementLeftRunning).
func RunStatement(a *Activities, ctx context.Context, s Statement) (mssql.Result, error) {
	ls := s.long()
	st, err := ls.start(ctx)
	if err != nil {
		return mssql.Result{}, err
	}
	return a.wait(ctx, ls, running{local: st}, s.reporter(a, ctx))
}

// IsEndedUnseen reports a statement that ended on the instance after its
// connection was lost: only what it left tells whether it completed.
func IsEndedUnseen(err error) bool { return isEndedUnseen(err) }

// RestoringState is what SQL Server shows of database name on sqlDB's
// instance while it is restored (state, redo LSN, the restore that made
// it), failures classified.
func RestoringState(ctx context.Context, sqlDB *mssql.DB, name string) (mssql.RestoringState, error) {
	q, args, err := tsql.RestoringState(name)
	if err != nil {
		return mssql.RestoringState{}, nonRetryable(ErrInvalidConfig, err)
	}
	rs, err := sqlDB.RestoringState(ctx, q, args...)
	if err != nil {
		return rs, sqlError(err)
	}
	return rs, nil
}

// CurrentConfig is the configuration the activities run with now (the
// live one when the worker reloads it).
func (d *CycleDeps) CurrentConfig() *config.Config { return d.config() }
