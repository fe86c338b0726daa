package activities

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// AllocateSequence returns a new, never used, backup sequence number of the
// (instance, database), by the database's `sequence` mode:
//
//   - catalog: one more than the highest number found on any backup server
//     the database uses (sets, and the sequence file each server keeps
//     beside the manifests) and in the source instance's msdb backup
//     history. Nothing is written to the source database. The number is
//     recorded in the sequence file of every reachable server before it is
//     returned, and Backup claims it with a pending manifest on the server
//     it writes to: of two runs that took the same number, the second finds
//     the claim and gets SequenceInUse, and allocates again.
//   - table: the larger of the seed's DBBackup.Sequence table in the
//     database (created if absent) and one more than the highest number on
//     any backup server; the table is moved past that number, so a database
//     restored from an older backup never hands out a used number again.
//   - utc: the UTC time of the call, or one more than the highest number on
//     any backup server when a worker's clock is behind.
func (a *Activities) AllocateSequence(ctx context.Context, in SequenceInput) (int64, error) {
	defer a.Cycle.keepAlive(ctx)()
	d := &a.Cycle
	db, err := d.sourceDatabase(in.Instance, in.Database, in.Entry, in.Replica)
	if err != nil {
		return 0, err
	}
	// The plan may have switched the mode for this run (a read-only source
	// takes catalog numbers: nothing may be written to it), never to one
	// that writes where the configuration does not.
	method, err := runSequenceMethod(db, in.Method)
	if err != nil {
		return 0, err
	}
	log := a.loggerFor(ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance), zap.String("mode", method))
	highest, unread := a.highestSequence(ctx, db, log)
	if len(unread) > 0 {
		// Their sets stay safe: Backup and CopyToRemote refuse a number
		// already used on the server they write to (SequenceInUse).
		log.Warn("backup servers not read for the highest sequence", zap.Strings("servers", unread), zap.Int64("highest_seen", highest))
	}
	var n int64
	switch method {
	case config.SequenceUTC:
		n, err = utcSequence(d.now())
		if err == nil && n <= highest {
			log.Warn("UTC sequence not above the highest used: taking the next free number",
				zap.Int64("utc", n), zap.Int64("highest", highest))
			n = highest + 1
		}
	case config.SequenceCatalog:
		n, err = a.catalogSequence(ctx, db, highest, log)
	default:
		n, err = a.tableSequence(ctx, db, highest, log)
	}
	if err == nil {
		err = checkWidth(db, n)
	}
	if err != nil {
		return 0, err
	}
	log.Info("sequence allocated", zap.Int64("seq", n), zap.Int64("highest_seen", highest))
	return n, nil
}

// checkWidth refuses a number above tsql.MaxSequence: file and database
// names are checked for that many digits at most. Numbers on the backup
// servers above it are ignored (highestSequence), so only a sequence table
// (or a server holding exactly the maximum) gets here.
func checkWidth(db *config.Database, n int64) error {
	if n <= tsql.MaxSequence {
		return nil
	}
	return nonRetryable(ErrInvalidConfig, fmt.Errorf(
		"sequence %d of %s is wider than %d digits, the widest that file and database names are checked for: the sequence table or a file on a backup server holds a number no cycle handed out; correct or remove it",
		n, db.ID(), len(fmt.Sprint(tsql.MaxSequence))))
}

// catalogSequence is `sequence: catalog`: one more than the highest of
// highest (the backup servers) and the source instance's backup history,
// recorded in every reachable server's sequence file.
//
// For a database of an availability group the history is the replica's
// the cycle backs up on: each replica records its own backups in its own
// msdb; the servers' sequence files hold the group's numbers.
func (a *Activities) catalogSequence(ctx context.Context, db *config.Database, highest int64, log *zap.Logger) (int64, error) {
	d := &a.Cycle
	inst, err := d.instance(db.Source())
	if err != nil {
		return 0, err
	}
	q, args, err := tsql.SequenceHistory(db.Name)
	if err != nil {
		return 0, nonRetryable(ErrInvalidConfig, err)
	}
	// The history survives losing every backup server; a BACKUP that did
	// not complete has no row, but its claim is on a server.
	sqlDB, err := d.openSQL(ctx, inst, "master")
	if err != nil {
		return 0, err
	}
	defer sqlDB.Close()
	// No number for a database the instance does not have: the cycle
	// stops here, before any claim is written.
	if st, err := databaseState(ctx, sqlDB, db.Name); err != nil {
		return 0, err
	} else if st == nil {
		return 0, nonRetryable(ErrDatabaseNotFound, fmt.Errorf(
			"database '%s' not found on SQL instance %s: check the database name in the config (names are exact)", db.Name, inst.Name))
	}
	history, err := backupHistoryHighest(ctx, sqlDB, q, args)
	sqlDB.Close()
	switch {
	case errors.Is(err, mssql.ErrUnreachable):
		return 0, sqlError(err)
	case err != nil:
		// Without the history the servers still give the floor.
		log.Warn("backup history not read (SELECT on msdb.dbo.backupset): the sequence rests on the backup servers alone", zap.Error(err))
	case history > highest:
		log.Info("backup history is ahead of the backup servers", zap.Int64("history", history), zap.Int64("servers", highest))
		highest = history
	}
	n := highest + 1
	// Checked before it is recorded: a number too wide for the names must
	// not reach another server's sequence file.
	if err := checkWidth(db, n); err != nil {
		return 0, err
	}
	a.recordSequence(ctx, db, n, log)
	return n, nil
}

// backupHistoryHighest is the highest sequence named by the rows of the
// SequenceHistory query.
func backupHistoryHighest(ctx context.Context, sqlDB *mssql.DB, q string, args []any) (int64, error) {
	rows, err := sqlDB.QueryContext(ctx, q, args...)
	if err != nil {
		return 0, mssql.Classify(sqlDB.Target, "read the backup history", err)
	}
	defer rows.Close()
	var highest int64
	for rows.Next() {
		var name sql.NullString
		if err := rows.Scan(&name); err != nil {
			return 0, mssql.Classify(sqlDB.Target, "read the backup history", err)
		}
		if n, ok := tsql.ParseBackupSetName(name.String); ok && n > highest {
			highest = n
		}
	}
	if err := rows.Err(); err != nil {
		return 0, mssql.Classify(sqlDB.Target, "read the backup history", err)
	}
	return highest, nil
}

// sequenceRecord is the sequence file of `sequence: catalog`
// (tsql.SequenceFileName) on a backup server.
type sequenceRecord struct {
	Instance   string    `json:"instance"`
	Database   string    `json:"database"`
	Sequence   int64     `json:"sequence"` // the highest number handed out
	UpdatedAt  time.Time `json:"updated_at"`
	WorkflowID string    `json:"workflow_id,omitempty"`
	RunID      string    `json:"run_id,omitempty"`
	// Signature is the workers' HMAC over the rest of the record
	// (catalog.PurposeSequence); nil when written without a manifest key.
	Signature *catalog.Signature `json:"signature,omitempty"`
}

// body is what the record's signature covers: the record as written,
// without the signature.
func (r sequenceRecord) body() ([]byte, error) {
	r.Signature = nil
	return json.MarshalIndent(r, "", "  ")
}

// encodeSequenceRecord renders r signed with keys (unsigned with nil keys).
func encodeSequenceRecord(r sequenceRecord, keys *catalog.Keys) ([]byte, error) {
	body, err := r.body()
	if err != nil || keys == nil {
		return body, err
	}
	r.Signature = keys.Sign(catalog.PurposeSequence, body)
	return json.MarshalIndent(r, "", "  ")
}

// errBadSequenceRecord is a sequence file that was read but does not hold
// a sequence of the database.
var errBadSequenceRecord = errors.New("not a sequence file of this database")

// readSequenceRecord is the highest number in a server's sequence files of
// db, under every naming of its sets (a file written before names were
// made case-safe counts too); 0 when there is none. unauthenticated names
// the files whose signature does not verify under keys (none without
// keys): their numbers count all the same, as file names of the database
// do, since a number counted as used is never one a cycle overwrites; a
// number above tsql.MaxSequence never counts.
func readSequenceRecord(ctx context.Context, st storage.Storage, db *config.Database, keys *catalog.Keys) (highest int64, unauthenticated []string, err error) {
	sets := setsOf(db)
	for _, n := range sets.Names() {
		name := n.SequenceFile()
		data, err := catalog.StorageFS{Storage: st}.ReadFile(ctx, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if errors.Is(err, storage.ErrTooLarge) || errors.Is(err, storage.ErrNotRegular) {
			// Not a file this product wrote: reported, and replaced by the
			// next number recorded.
			return 0, nil, fmt.Errorf("%w: %w", errBadSequenceRecord, err)
		}
		if err != nil {
			return 0, nil, err
		}
		var r sequenceRecord
		if err := json.Unmarshal(data, &r); err != nil {
			return 0, nil, fmt.Errorf("%s: %w: %v", name, errBadSequenceRecord, err)
		}
		if r.Instance != n.Instance || r.Database != n.Database || r.Sequence < 0 {
			return 0, nil, fmt.Errorf("%s: %w: it describes %s/%s sequence %d", name, errBadSequenceRecord, r.Instance, r.Database, r.Sequence)
		}
		if r.Sequence > tsql.MaxSequence {
			// No cycle handed it out (checkWidth): ignored, and replaced by
			// the next number recorded.
			return 0, nil, fmt.Errorf("%s: %w: sequence %d is above %d, the widest a cycle hands out", name, errBadSequenceRecord, r.Sequence, tsql.MaxSequence)
		}
		if keys != nil {
			body, err := r.body()
			if auth := keys.Verify(catalog.PurposeSequence, body, r.Signature); err != nil || !auth.Trusted() {
				unauthenticated = append(unauthenticated, name)
			}
		}
		highest = max(highest, r.Sequence)
	}
	return highest, unauthenticated, nil
}

// recordSequence writes n into the sequence file of every reachable server
// of db whose file holds less. A server it cannot write keeps its older
// number: the claim Backup writes and the copy's check protect the set, and
// the next allocation that reads the server moves it on.
func (a *Activities) recordSequence(ctx context.Context, db *config.Database, n int64, log *zap.Logger) {
	wid, rid := runOf(ctx)
	keys, err := a.Cycle.manifestKeys()
	if err != nil {
		log.Warn("sequence file not written", zap.Error(err))
		return
	}
	data, err := encodeSequenceRecord(sequenceRecord{Instance: db.Instance, Database: db.Name, Sequence: n,
		UpdatedAt: a.Cycle.now().UTC(), WorkflowID: wid, RunID: rid}, keys)
	if err != nil {
		log.Warn("sequence file not encoded", zap.Error(err))
		return
	}
	var missed []string
	for _, name := range db.ServersAndTargets() {
		if err := a.recordOn(ctx, db, name, n, data, keys); err != nil {
			missed = append(missed, name)
			log.Warn("sequence file not written", zap.String("server", name), zap.Error(err))
		}
	}
	if len(missed) > 0 {
		log.Warn("sequence recorded on some backup servers only", zap.Int64("seq", n), zap.Strings("not_on", missed))
	}
}

func (a *Activities) recordOn(ctx context.Context, db *config.Database, server string, n int64, data []byte, keys *catalog.Keys) error {
	srv, err := a.Cycle.server(server)
	if err != nil {
		return err
	}
	st, err := a.Cycle.openStorage(ctx, srv)
	if err != nil {
		return err
	}
	defer st.Close()
	if have, _, err := readSequenceRecord(ctx, st, db, keys); err == nil && have >= n {
		return nil
	}
	return catalog.WriteFileAtomic(ctx, catalog.StorageFS{Storage: st}, tsql.SequenceFileName(db.Instance, db.Name), data)
}

// tableSequence is `sequence: table`: the seed's DBBackup.Sequence table,
// kept above highest.
func (a *Activities) tableSequence(ctx context.Context, db *config.Database, highest int64, log *zap.Logger) (int64, error) {
	d := &a.Cycle
	inst, err := d.instance(db.Source())
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
	raise, err := tsql.SequenceRaise(db.Name)
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
	n, err := allocate(ctx, sqlDB.QueryValue, db, next)
	if err != nil {
		return 0, err
	}
	if n <= highest {
		// Write the floor back, so the table never hands out a used
		// number again; a concurrent allocation that already moved past
		// it leaves no row, and the plain increment is taken again.
		floor := highest + 1
		log.Warn("sequence table behind the backup servers (database restored from an older backup?): moving it past the highest used number",
			zap.Int64("table", n), zap.Int64("highest", highest))
		v, found, err := sqlDB.QueryValue(ctx, "raise the backup sequence number", raise, floor)
		if err != nil {
			return 0, sqlError(err)
		}
		if got, ok := v.(int64); found && ok && got == floor {
			n = floor
		} else if n, err = allocate(ctx, sqlDB.QueryValue, db, next); err != nil {
			return 0, err
		}
		if n <= highest {
			return 0, temporal.NewApplicationError(fmt.Sprintf(
				"sequence table of %s returned %d, not above the highest used number %d", db.ID(), n, highest), ErrSQLError)
		}
	}
	return n, nil
}

// allocate runs the table's increment once.
func allocate(ctx context.Context, query func(context.Context, string, string, ...any) (any, bool, error), db *config.Database, stmt string) (int64, error) {
	v, ok, err := query(ctx, "allocate a backup sequence number", stmt)
	if err != nil {
		return 0, sqlError(err)
	}
	n, isInt := v.(int64)
	if !ok || !isInt || n <= 0 {
		return 0, temporal.NewApplicationError(fmt.Sprintf("sequence table of %s returned %v, want a positive number", db.ID(), v), ErrSQLError)
	}
	return n, nil
}

// highestSequence is the highest set number of (instance, database) on
// every backup server the database uses (rotation and copy targets), from
// manifests, stripe file names and the sequence file `sequence: catalog`
// keeps there, and the servers it could not read.
func (a *Activities) highestSequence(ctx context.Context, db *config.Database, log *zap.Logger) (int64, []string) {
	var highest int64
	var unread []string
	sets := setsOf(db)
	keys, kerr := a.Cycle.manifestKeys()
	if kerr != nil {
		// Without the keys no record can be checked: they all count, as
		// file names do.
		log.Warn("sequence files not authenticated", zap.Error(kerr))
	}
	for _, name := range db.ServersAndTargets() {
		srv, err := a.Cycle.server(name)
		if err != nil {
			unread = append(unread, name)
			continue
		}
		st, err := a.Cycle.openStorage(ctx, srv)
		if err != nil {
			unread = append(unread, name)
			continue
		}
		var files []storage.FileInfo
		for _, n := range sets.Names() {
			var more []storage.FileInfo
			if more, err = st.List(ctx, n.DBPrefix(), ""); err != nil {
				break
			}
			files = append(files, more...)
		}
		var recorded int64
		if err == nil {
			var unauth []string
			recorded, unauth, err = readSequenceRecord(ctx, st, db, keys)
			for _, file := range unauth {
				log.Warn("sequence file not authenticated (no signature of the manifest keys): its number counts as used, as a file name would, "+
					"and the next number recorded replaces it with a signed one; if no worker wrote it, someone else writes to the backup share",
					zap.String("server", name), zap.String("file", file), zap.Int64("recorded", recorded))
			}
			if errors.Is(err, errBadSequenceRecord) {
				// A damaged file does not hide the sets beside it.
				log.Warn("sequence file not readable: the sets on the server still count", zap.String("server", name), zap.Error(err))
				err = nil
			}
		}
		st.Close()
		if err != nil {
			unread = append(unread, name)
			continue
		}
		highest = max(highest, recorded)
		for _, f := range files {
			p, ok := tsql.ParseStripeFileName(f.Name)
			if !ok {
				p, ok = tsql.ParseManifestFileName(f.Name)
			}
			if ok && sets.OwnsName(p) && p.Sequence > highest {
				highest = p.Sequence
			}
			if p, wide := tsql.WideSequence(f.Name); wide && sets.OwnsName(p) {
				// Someone else's file: counting it would stop every cycle
				// (checkWidth), so it is ignored, and left where it is.
				log.Warn("a file on the backup server is numbered above the widest sequence a cycle hands out: ignored, not counted and never deleted; remove it",
					zap.String("server", name), zap.String("file", f.Name), zap.Int64("max_sequence", tsql.MaxSequence))
			}
		}
	}
	return highest, unread
}

// utcSequence is yyyymmddhhmmss of t in UTC.
func utcSequence(t time.Time) (int64, error) {
	var n int64
	_, err := fmt.Sscan(t.UTC().Format("20060102150405"), &n)
	return n, err
}
