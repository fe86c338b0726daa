package activities

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// What the BackupCycle's steps (package activities/cycle) use of this
// package besides shared.go: a step's progress, the set's manifest and
// who holds it, the verification copy and its proofs. The steps still
// here (backup, restore, CHECKDB, ...), the recover, the drill and the log
// chain use the same code. Functions or methods of CycleDeps and Reporter,
// never exported methods of Activities (each would be registered as an
// activity).

// Reporter carries a long step's progress to its heartbeats and, as the
// ProgressSignal, to its workflow's `progress` query.
type Reporter = reporter

// NewReporter is the progress of step of set seq, reported for the running
// activity. The first signal goes once the percent moved by 10 or after a
// minute, so a small database's steps send none.
func NewReporter(a *Activities, ctx context.Context, step string, seq int64) *Reporter {
	return a.newReporter(ctx, step, seq)
}

// Every heartbeats the progress every interval until stop is called:
// bytes, when not nil, is read for the byte count, and details, when not
// nil, makes each heartbeat's details (else the StepProgress).
func (r *reporter) Every(interval time.Duration, bytes func() int64, details func(percent float64, bytes int64) any) (stop func()) {
	return r.every(interval, bytes, details)
}

// Set records the percent done and bytes moved.
func (r *reporter) Set(p float64, b int64) { r.set(p, b) }

// SetPercent records the percent done.
func (r *reporter) SetPercent(p float64) { r.setPercent(p) }

// DatabaseEntry is the configuration of a database of a cycle: name as the
// plan resolved it, entry the databases: entry it is backed up with when
// that is spelled otherwise ("" otherwise). Missing: InvalidConfig.
func (d *CycleDeps) DatabaseEntry(instance, name, entry string) (*config.Database, error) {
	return d.database(instance, name, entry)
}

// SourceDatabase is DatabaseEntry for the steps that read from the source,
// with replica (Plan.Replica) set on the copy it returns.
func (d *CycleDeps) SourceDatabase(instance, name, entry, replica string) (*config.Database, error) {
	return d.sourceDatabase(instance, name, entry, replica)
}

// DatabaseServerList checks that every name is a server the database's
// sets may be on, each once (InvalidConfig naming input otherwise).
func (d *CycleDeps) DatabaseServerList(db *config.Database, input string, names []string) error {
	return d.databaseServerList(db, input, names)
}

// LoadManifest is catalog.Load of set seq of db on st, authenticated with
// the manifest keys.
func (d *CycleDeps) LoadManifest(ctx context.Context, st storage.Storage, db *config.Database, seq int64) (*catalog.Manifest, error) {
	return d.loadManifest(ctx, st, db, seq)
}

// SaveManifest is catalog.Save of m on st, signed with the manifest keys.
func (d *CycleDeps) SaveManifest(ctx context.Context, st storage.Storage, m *catalog.Manifest) error {
	return d.saveManifest(ctx, st, m)
}

// UpdateManifest loads the set's manifest from every reachable server of
// servers (the most advanced copy wins), applies change and saves it back
// to each; it fails when a server of required could not be updated.
func UpdateManifest(a *Activities, ctx context.Context, db *config.Database, seq int64, servers, required []string,
	change func(m *catalog.Manifest) error) (*catalog.Manifest, error) {
	return a.updateManifest(ctx, db, seq, servers, required, change)
}

// UpdateManifestOf is UpdateManifest; anyRun updates a set of any run (a
// record that changes no state), only an authenticated manifest.
func UpdateManifestOf(a *Activities, ctx context.Context, db *config.Database, seq int64, servers, required []string, anyRun bool,
	change func(m *catalog.Manifest) error) (*catalog.Manifest, error) {
	return a.updateManifestOf(ctx, db, seq, servers, required, anyRun, change)
}

// OwnedByThisRun is the SequenceInUse of a set another run claimed (or
// whose manifest is not authenticated): its manifest and files stay as
// they are.
func OwnedByThisRun(ctx context.Context, m *catalog.Manifest, server string) error {
	return ownedByThisRun(ctx, m, server)
}

// Untrusted is the SequenceInUse of a set whose manifest is not
// authenticated: it is no run's, and nothing of it is touched.
func Untrusted(m *catalog.Manifest, server string) error { return untrusted(m, server) }

// IsAppError reports whether err is already one of the typed errors.
func IsAppError(err error) bool { return isAppError(err) }

// Holders are the servers a manifest says hold the set, plus server.
func Holders(m *catalog.Manifest, server string) []string { return holders(m, server) }

// Advance moves m forward to state through the states in between, never
// backwards.
func Advance(m *catalog.Manifest, to catalog.State, at time.Time) error { return advance(m, to, at) }

// AdvanceOrKeep is Advance unless m is already at to or beyond (a step
// repeated after the verification instance was lost).
func AdvanceOrKeep(m *catalog.Manifest, to catalog.State, at time.Time) error {
	return advanceOrKeep(m, to, at)
}

// SetFiles lists the stripe files of set seq on st under any of namings,
// and the temporary files a copy writes them through.
func SetFiles(ctx context.Context, st storage.Storage, namings []tsql.SetNames, seq int64) ([]storage.FileInfo, error) {
	return setFiles(ctx, st, namings, seq)
}

// MaxStripes is the most stripes a BACKUP of the database may write.
func MaxStripes(db *config.Database) int { return maxStripes(db) }

// FinishedBackup checks that the worker sees every stripe SQL Server wrote
// for a completed BACKUP and measures them (BackupUnconfirmed when the
// backup server cannot be read now).
func FinishedBackup(ctx context.Context, st storage.Storage, srv *config.BackupServer, instance string, layout []tsql.Stripe, took time.Duration) (BackupOutput, error) {
	return finishedBackup(ctx, st, srv, instance, layout, took)
}

// ForeignBase says which full backup a differential's header names as its
// base (guid) instead of the planned one, for the error.
func ForeignBase(a *Activities, ctx context.Context, sqlDB *mssql.DB, db *config.Database, guid string) string {
	return a.foreignBase(ctx, sqlDB, db, guid)
}

// VerifyTarget resolves a verification step's database, remote server, its
// verification instance and the restored copy's name.
func VerifyTarget(a *Activities, in VerifyInput) (*config.Database, *config.BackupServer, *config.SQLInstance, string, error) {
	return a.verifyTarget(in)
}

// SetToProve loads the set's manifest from srv and the backup set GUID its
// restore must show.
func SetToProve(a *Activities, ctx context.Context, srv *config.BackupServer, db *config.Database, seq int64) (*catalog.Manifest, string, error) {
	return a.setToProve(ctx, srv, db, seq)
}

// ProveRestored checks that the copy verifyDB on instance is set seq's
// restore (want: its backup set GUID); anything else is RestoreMismatch.
func ProveRestored(ctx context.Context, sqlDB *mssql.DB, instance string, db *config.Database, seq int64, verifyDB, want string,
	m *catalog.Manifest) (*mssql.RestoreProof, error) {
	return proveRestored(ctx, sqlDB, instance, db, seq, verifyDB, want, m)
}

// StillRestored checks, after step ran on the copy, that nothing restored
// it again meanwhile: the same restore (before) of the same set.
func StillRestored(ctx context.Context, sqlDB *mssql.DB, instance string, db *config.Database, seq int64, verifyDB, want string,
	m *catalog.Manifest, before *mssql.RestoreProof, step string) (*mssql.RestoreProof, error) {
	return stillRestored(ctx, sqlDB, instance, db, seq, verifyDB, want, m, before, step)
}

// GuardCopy is the guard before anything destructive is done to verifyDB
// on instance (action: "replaced", "dropped"): the database's state (nil
// when there is none) when it is a copy backupcycle restored, else
// VerifyDatabaseInUse and nothing is done.
func GuardCopy(a *Activities, ctx context.Context, sqlDB *mssql.DB, db *config.Database, instance, verifyDB, action string,
	also ...string) (*mssql.DatabaseState, error) {
	return a.guardCopy(ctx, sqlDB, db, instance, verifyDB, action, also...)
}

// SessionsIn lists the other sessions in verifyDB, for the log; a failure
// to read them is logged.
func SessionsIn(ctx context.Context, sqlDB *mssql.DB, instance, verifyDB string, log *zap.Logger) []mssql.Session {
	return sessionsIn(ctx, sqlDB, instance, verifyDB, log)
}

// LogDisconnected logs each session forced out of the copy before it is
// replaced or dropped (action).
func LogDisconnected(log *zap.Logger, sessions []mssql.Session, instance, verifyDB, action string) {
	logDisconnected(log, sessions, instance, verifyDB, action)
}

// The sequence and the claim of a set, which Backup and AllocateSequence
// (still here) use, are exercised by package cycle's tests on its
// fixtures, through these.

// SequenceRecord is the sequence file of `sequence: catalog` on a backup
// server.
type SequenceRecord = sequenceRecord

// ReadSequenceRecord reads db's sequence files on st: the highest number
// they hold and those whose signature does not verify under keys.
func ReadSequenceRecord(ctx context.Context, st storage.Storage, db *config.Database, keys *catalog.Keys) (highest int64, unauthenticated []string, err error) {
	return readSequenceRecord(ctx, st, db, keys)
}

// HighestSequence is the highest set number of db on every backup server
// it uses, and the servers that could not be read.
func HighestSequence(a *Activities, ctx context.Context, db *config.Database, log *zap.Logger) (int64, []string) {
	return a.highestSequence(ctx, db, log)
}

// RecordSequence writes n into the sequence file of every reachable server
// of db whose file holds less.
func RecordSequence(a *Activities, ctx context.Context, db *config.Database, n int64, log *zap.Logger) {
	a.recordSequence(ctx, db, n, log)
}

// ClaimSet claims set seq of db on server for this run (a pending manifest
// naming it; base for a differential): the set's naming, and whether the
// claim was already this run's.
func ClaimSet(a *Activities, ctx context.Context, st storage.Storage, db *config.Database, server string, seq int64,
	base *catalog.DiffBase) (names tsql.SetNames, resumed bool, err error) {
	return a.claimSet(ctx, st, db, server, seq, base)
}

// CreateClaim writes m, signed with keys, as a new file, never over an
// existing one.
func CreateClaim(ctx context.Context, st storage.Storage, keys *catalog.Keys, m *catalog.Manifest) error {
	return createClaim(ctx, st, keys, m)
}

// StatsPercent is the STATS = n of the benchmarks' reference BACKUP.
const StatsPercent = statsPercent
