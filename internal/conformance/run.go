package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/hostcheck"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/location"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// cleanupTimeout bounds the removal of what a run created, which runs
// after an interrupt too.
const cleanupTimeout = 5 * time.Minute

// runner is one run of the probes.
type runner struct {
	p        *Plan
	o        Options
	src, ver *mssql.DB // ver is src when the copies are restored on the source
	st       storage.Storage
	rep      *Report
	made     created
	// srcSees, verSees: the logins see other sessions' requests.
	srcSees, verSees bool
	// running are statements this run sent that may still run; vanished
	// those whose client vanished (not stopped by an attention).
	running  []*mssql.Sent
	vanished []vanished
	// Observations, nil until measured; skip says why one was not.
	lastGood                    lastGoodObs
	phases                      *phasesObs
	texts                       []textObs
	restore                     *restoreObs
	vanishBackup, vanishRestore *vanishObs
	drop                        *dropObs
	header                      *headerObs
	diff                        *diffObs
	media                       *mediaObs
	fork                        *forkObs
	enc                         *encObs
	skip                        map[string]string
	notSeen                     bool // the server's paths and location are not one directory
}

// Run runs every probe on the plan's instances and removes what it
// created. The report is never nil: when err is not nil (a step every
// probe needs failed, or ctx ended), it says what was measured before and
// what was removed.
func Run(ctx context.Context, p *Plan) (*Report, error) {
	o := p.o
	if o.OpenSQL == nil {
		o.OpenSQL = openSQL
	}
	if o.OpenStorage == nil {
		o.OpenStorage = location.OpenServer
	}
	r := &runner{p: p, o: o, skip: map[string]string{},
		rep: &Report{Instance: p.Instance, VerifyInstance: p.VerifyInstance, Server: p.Server, Started: time.Now().UTC(),
			Scratch: Scratch{Database: p.Scratch, Copies: []string{p.Copy, p.Restoring}, Files: scratchFiles(p),
				FillBytes: p.FillRows * tsql.FillRowBytes, FillRows: p.FillRows}}}
	err := r.connect(ctx)
	if err == nil {
		err = r.probe(ctx)
		r.cleanup(ctx)
	}
	r.close()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted: %w", ctx.Err())
		}
		r.rep.Error = err.Error()
	}
	r.rep.Probes = r.judge()
	r.rep.finish()
	return r.rep, err
}

// connect opens both instances and the backup server, and reads what the
// report says about each instance.
func (r *runner) connect(ctx context.Context) error {
	var err error
	if r.src, err = r.o.OpenSQL(ctx, r.p.inst); err != nil {
		return fmt.Errorf("connect to %s: %w", r.p.Instance, err)
	}
	r.ver = r.src
	if r.p.verify != r.p.inst {
		if r.ver, err = r.o.OpenSQL(ctx, r.p.verify); err != nil {
			return fmt.Errorf("connect to %s: %w", r.p.VerifyInstance, err)
		}
	}
	if r.st, err = r.o.OpenStorage(ctx, r.p.srv); err != nil {
		return fmt.Errorf("open backup server %s (%s): %w", r.p.Server, r.p.Location, err)
	}
	var f ServerFacts
	if f, r.srcSees, err = serverFacts(ctx, r.src, r.p.Instance, r.p.inst.User); err != nil {
		return err
	}
	r.rep.Servers = append(r.rep.Servers, f)
	r.verSees = r.srcSees
	if r.ver != r.src {
		if f, r.verSees, err = serverFacts(ctx, r.ver, r.p.VerifyInstance, r.p.verify.User); err != nil {
			return err
		}
		r.rep.Servers = append(r.rep.Servers, f)
	}
	return nil
}

func (r *runner) close() {
	if r.st != nil {
		_ = r.st.Close()
	}
	if r.ver != nil && r.ver != r.src {
		_ = r.ver.Close()
	}
	if r.src != nil {
		_ = r.src.Close()
	}
}

// probe runs the steps in order. Only a step that every later probe needs
// (the scratch database, its first BACKUP) ends the run with an error; a
// probe that cannot be measured is recorded in r.skip and judged
// inconclusive.
func (r *runner) probe(ctx context.Context) error {
	if err := r.createScratch(ctx); err != nil {
		return err
	}
	r.checkSource(ctx)
	if err := r.backup(ctx); err != nil {
		return err
	}
	r.probeMedia(ctx)
	r.vanishedClient(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if r.restoreCopy(ctx) {
		r.checkCopy(ctx)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.dropRestoring(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.probeFork(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.probeEncryption(ctx)
	return ctx.Err()
}

// createScratch creates and fills the scratch database.
func (r *runner) createScratch(ctx context.Context) error {
	stmt, err := tsql.CreateDatabase(r.p.Scratch)
	if err != nil {
		return err
	}
	if err := r.claim(ctx, r.src, r.p.Instance, r.p.Scratch); err != nil {
		return err
	}
	if _, err = r.src.Run(ctx, "CREATE DATABASE", stmt, nil); err != nil {
		var f *mssql.Failure
		if errors.As(err, &f) && slices.Contains(f.Numbers(), errPermissionDenied) {
			return fmt.Errorf("create the scratch database on %s: %w (the login %s needs CREATE DATABASE: GRANT CREATE ANY DATABASE TO %s)",
				r.p.Instance, err, r.p.inst.User, quoteLogin(r.p.inst.User))
		}
		return fmt.Errorf("create the scratch database on %s: %w", r.p.Instance, err)
	}
	setup, err := tsql.FillSetup(r.p.Scratch)
	if err != nil {
		return err
	}
	ops := []string{"CREATE TABLE", "INSERT"} // FillSetup's statements
	for i, s := range setup {
		if _, err := r.src.Run(ctx, ops[min(i, len(ops)-1)], s, nil); err != nil {
			return fmt.Errorf("fill the scratch database: %w", err)
		}
	}
	double, err := tsql.FillDouble(r.p.Scratch)
	if err != nil {
		return err
	}
	for rows := int64(1); rows < r.p.FillRows; rows *= 2 {
		if _, err := r.src.ExecContext(ctx, double, rows); err != nil {
			return fmt.Errorf("fill the scratch database: %w", mssql.Classify(r.src.Target, "INSERT", err))
		}
	}
	view, err := tsql.IndexedView(r.p.Scratch)
	if err != nil {
		return err
	}
	ops = []string{"CREATE VIEW", "CREATE INDEX"} // IndexedView's statements
	for i, s := range view {
		if _, err := r.src.Run(ctx, ops[min(i, len(ops)-1)], s, nil); err != nil {
			return fmt.Errorf("create the scratch database's indexed view: %w", err)
		}
	}
	return nil
}

// checkSource runs DBCC CHECKDB of the scratch database, so that it has a
// LastGoodCheckDbTime, and reads it.
func (r *runner) checkSource(ctx context.Context) {
	stmt, err := tsql.CheckDB(r.p.Scratch)
	if err == nil {
		_, err = r.src.Run(ctx, mssql.OpCheckDB, stmt, nil)
	}
	if err == nil {
		r.lastGood.Source, r.lastGood.SourceNow, _, err = r.readLastGood(ctx, r.src, r.p.Scratch)
	}
	if err != nil {
		r.skip[IDLastGoodRestored] = "the CHECKDB of the scratch database on " + r.p.Instance + " failed: " + err.Error()
	}
}

// backup takes the scratch database's backup every later step restores,
// as the cycle's BACKUP is (CHECKSUM, INIT, FORMAT, COPY_ONLY), reading
// the server's clocks before and after it for the HEADERONLY probe.
func (r *runner) backup(ctx context.Context) error {
	stmt, err := tsql.BackupDatabase(tsql.BackupOptions{Database: r.p.Scratch, Disks: []string{r.p.sourcePath(r.p.Backup)},
		Checksum: true, Init: true, Format: true, Compression: new(bool), CopyOnly: true, Name: r.p.setName()})
	if err != nil {
		return err
	}
	var h headerObs
	if h.BeforeLocal, h.BeforeUTC, err = clock(ctx, r.src); err != nil {
		return err
	}
	r.made.file(r.p.Backup)
	if _, err := r.src.Run(ctx, "BACKUP DATABASE", stmt, nil); err != nil {
		return fmt.Errorf("back up the scratch database on %s to %s: %w (the SQL Server service account of %s needs write access to %s)",
			r.p.Instance, r.p.sourcePath(r.p.Backup), err, r.p.Instance, r.p.SourcePaths[0])
	}
	if h.AfterLocal, h.AfterUTC, err = clock(ctx, r.src); err != nil {
		return err
	}
	q, err := tsql.RestoreHeaderOnly([]string{r.p.sourcePath(r.p.Backup)})
	if err != nil {
		return err
	}
	hdrs, err := r.src.HeaderOnly(ctx, q)
	switch {
	case err != nil:
		r.skip[IDHeaderClock] = "RESTORE HEADERONLY of the backup failed: " + err.Error()
	case len(hdrs) == 0:
		r.skip[IDHeaderClock] = "RESTORE HEADERONLY of the backup returned no row"
	default:
		h.Start, h.Finish = hdrs[0].BackupStartDate, hdrs[0].BackupFinishDate
		r.header = &h
	}
	return nil
}

// probeMedia runs the product's probe before a BACKUP (hostcheck.Probe)
// and a HEADERONLY of a name that does not exist.
func (r *runner) probeMedia(ctx context.Context) {
	m := &mediaObs{Paths: r.p.SourcePaths}
	m.ProbeErr = hostcheck.Probe(ctx, r.st, r.p.SourcePaths, func(ctx context.Context, path string) error {
		q, err := tsql.RestoreHeaderOnly([]string{path})
		if err != nil {
			return err
		}
		_, err = r.src.HeaderOnly(ctx, q)
		m.SQLErrors = append(m.SQLErrors, sqlErrors(err)...)
		return err
	})
	r.notSeen = errors.Is(m.ProbeErr, hostcheck.ErrNotSeen)
	m.MissingPath = r.p.sourcePath(r.p.Scratch + "_missing.bak")
	q, err := tsql.RestoreHeaderOnly([]string{m.MissingPath})
	if err == nil {
		_, m.MissingErr = r.src.HeaderOnly(ctx, q)
	}
	r.media = m
}

// restoreCopy restores the backup on the verification instance as the
// cycle does (MOVE into the restore directories, CHECKSUM, RECOVERY),
// with that server's clock before and after.
func (r *runner) restoreCopy(ctx context.Context) bool {
	moves, err := r.moves(ctx, r.p.Copy)
	if err != nil {
		r.skipCopy("the restore could not be planned: " + err.Error())
		return false
	}
	stmt, err := tsql.RestoreDatabase(tsql.RestoreOptions{Database: r.p.Copy, Disks: []string{r.p.verifyPath(r.p.Backup)},
		Moves: moves, Checksum: true})
	if err != nil {
		r.skipCopy(err.Error())
		return false
	}
	var o restoreObs
	if o.Before, _, err = clock(ctx, r.ver); err != nil {
		r.skipCopy(err.Error())
		return false
	}
	if err := r.claim(ctx, r.ver, r.p.VerifyInstance, r.p.Copy); err != nil {
		r.skipCopy(err.Error())
		return false
	}
	if _, err := r.ver.Run(ctx, "RESTORE DATABASE", stmt, nil); err != nil {
		r.skipCopy(fmt.Sprintf("the RESTORE on %s failed: %v (the login needs CREATE DATABASE; the SQL Server service account "+
			"read access to %s)", r.p.VerifyInstance, err, r.p.VerifyPath))
		return false
	}
	if o.After, _, err = clock(ctx, r.ver); err != nil {
		r.skipCopy(err.Error())
		return false
	}
	st, err := r.state(ctx, r.ver, r.p.Copy)
	if err != nil || st == nil {
		r.skipCopy(fmt.Sprintf("sys.databases has no row for the copy (%v)", err))
		return false
	}
	o.Created = st.Created
	q, args, err := tsql.RestoreProof(r.p.Copy)
	if err == nil {
		var pr *mssql.RestoreProof
		if pr, err = r.ver.LastRestoreProof(ctx, q, args...); err == nil && pr == nil {
			err = errors.New("no restore of the copy in msdb.dbo.restorehistory")
		}
		if err == nil {
			o.RestoreDate = pr.RestoreDate
		}
	}
	if err != nil {
		o.MSDBError = err.Error()
	}
	r.restore = &o
	r.lastGood.RestoreDate = o.RestoreDate
	if r.lastGood.Restored, r.lastGood.RestoredNow, _, err = r.readLastGood(ctx, r.ver, r.p.Copy); err != nil {
		r.skip[IDLastGoodRestored] = "LastGoodCheckDbTime of the copy could not be read: " + err.Error()
	}
	return true
}

// claim makes sure no database name exists on instance before the run
// creates one of that name, and records it for the cleanup: the run drops
// only what it made.
func (r *runner) claim(ctx context.Context, db *mssql.DB, instance, name string) error {
	st, err := r.state(ctx, db, name)
	switch {
	case err != nil:
		return fmt.Errorf("look for database %s on %s: %w", name, instance, err)
	case st != nil:
		return fmt.Errorf("a database named %s exists on %s already: not touched; run again (the name's suffix is random)", name, instance)
	}
	r.made.db(instance, name)
	return nil
}

// skipCopy records why the probes of the restored copy were not measured.
func (r *runner) skipCopy(why string) {
	for _, id := range []string{IDLastGoodRestored, IDLastGoodCheckDB, IDCheckDBPhases, IDCreateDate, IDRestoreDate} {
		if r.skip[id] == "" {
			r.skip[id] = why
		}
	}
}

// checkCopy runs the verification step's own DBCC CHECKDB of the copy
// (tsql.VerifyCheckDB, with its marker) on a session of its own and polls
// sys.dm_exec_requests from another one while it runs.
func (r *runner) checkCopy(ctx context.Context) {
	o := &phasesObs{Blind: !r.verSees}
	stmt, err := tsql.VerifyCheckDB(r.p.Copy, 0)
	if err != nil {
		r.skip[IDCheckDBPhases] = err.Error()
		return
	}
	o.Sent = stmt
	marker := mssql.Marker{Prefix: stmt, Whole: true}
	s, err := r.ver.Send(ctx, mssql.OpCheckDB, stmt)
	if err != nil {
		r.skip[IDCheckDBPhases], r.skip[IDLastGoodCheckDB] = "the CHECKDB could not be sent: "+err.Error(), "the CHECKDB could not be sent"
		return
	}
	r.running = append(r.running, s)
	r.phases = o
	text := textObs{Op: "DBCC CHECKDB", Sent: stmt}
	start := time.Now()
	for !o.Blind && !ended(ctx, s) {
		o.Polls++
		if sg, ok, err := r.sight(ctx, r.ver, s, tsql.CommandCheckDB, marker, start); err == nil && ok {
			o.Sightings = append(o.Sightings, sg)
			text.Seen = append(text.Seen, sg.Text)
		}
		if !r.sleep(ctx) {
			break
		}
	}
	_, err = s.Wait(ctx)
	o.Duration = time.Since(start)
	r.texts = append(r.texts, text)
	if err != nil {
		r.skip[IDLastGoodCheckDB] = "the CHECKDB of the copy failed: " + err.Error()
		return
	}
	r.lastGood.After, r.lastGood.AfterNow, _, err = r.readLastGood(ctx, r.ver, r.p.Copy)
	r.lastGood.AfterCheckDB = err == nil
}

// dropRestoring restores the backup WITH NORECOVERY, making its client
// vanish while it runs (vanishStatement: does the RESTORE run on?), then
// runs the product's drop statement on the RESTORING copy, once more when
// the copy is still there (the drop step is retried).
func (r *runner) dropRestoring(ctx context.Context) {
	moves, err := r.moves(ctx, r.p.Restoring)
	if err != nil {
		r.skipRestoring("the restore could not be planned: " + err.Error())
		return
	}
	disk := r.p.verifyPath(r.p.Backup)
	stmt, err := tsql.RestoreDatabase(tsql.RestoreOptions{Database: r.p.Restoring, Disks: []string{disk}, Moves: moves,
		Checksum: true, NoRecovery: true})
	if err != nil {
		r.skipRestoring(err.Error())
		return
	}
	prefix, err := tsql.RestoreMarker(r.p.Restoring, disk)
	if err != nil {
		r.skipRestoring(err.Error())
		return
	}
	if err := r.claim(ctx, r.ver, r.p.VerifyInstance, r.p.Restoring); err != nil {
		r.skipRestoring(err.Error())
		return
	}
	v := vanishing{id: IDVanishedRestore, db: r.ver, sees: r.verSees, op: "RESTORE DATABASE", stmt: stmt,
		command: tsql.CommandRestoreDatabase, marker: mssql.Marker{Prefix: prefix},
		completed: func(ctx context.Context) (bool, string, error) {
			// A RESTORE that ran to its end is in msdb's history; one cut
			// short leaves the database RESTORING all the same.
			q, args, err := tsql.RestoreProof(r.p.Restoring)
			if err != nil {
				return false, "", err
			}
			pr, err := r.ver.LastRestoreProof(ctx, q, args...)
			switch {
			case err != nil:
				return false, "", fmt.Errorf("msdb.dbo.restorehistory: %w", err)
			case pr == nil:
				return false, "msdb.dbo.restorehistory has no restore into " + r.p.Restoring, nil
			case pr.BackupSetName != r.p.setName():
				return false, fmt.Sprintf("msdb's newest restore into %s is of backup set %q", r.p.Restoring, pr.BackupSetName), nil
			}
			return true, "msdb.dbo.restorehistory records the finished restore", nil
		}}
	if r.verSees {
		r.vanishRestore = r.vanishStatement(ctx, v)
	} else {
		r.vanishRestore = &vanishObs{Blind: true}
		if _, err := r.ver.Run(ctx, "RESTORE DATABASE", stmt, nil); err != nil {
			r.skip[IDDropRestoring] = "the RESTORE WITH NORECOVERY failed: " + err.Error()
			return
		}
	}
	if ctx.Err() != nil {
		return
	}
	// The RESTORE may still run (the probe stopped waiting for it).
	if o := r.vanishRestore; o != nil && o.running != nil {
		if left := r.waitVanished(ctx, *o.running); left != "" {
			r.skip[IDDropRestoring] = left
			return
		}
	}
	o := &dropObs{}
	st, err := r.state(ctx, r.ver, r.p.Restoring)
	if err != nil || st == nil {
		r.skip[IDDropRestoring] = fmt.Sprintf("sys.databases has no row for the copy restored WITH NORECOVERY (%v)", err)
		return
	}
	o.StateBefore = st.State
	r.drop = o
	if st.State != "RESTORING" {
		return
	}
	drop, err := tsql.DropDatabase(r.p.Restoring)
	if err != nil {
		r.skip[IDDropRestoring] = err.Error()
		return
	}
	for range 2 {
		var run dropRun
		if _, err := r.ver.Run(ctx, "DROP DATABASE", drop, nil); err != nil {
			if run.Errors = sqlErrors(err); len(run.Errors) == 0 {
				run.Errors = []string{err.Error()}
			}
		}
		st, err := r.state(ctx, r.ver, r.p.Restoring)
		run.Gone = err == nil && st == nil
		o.Runs = append(o.Runs, run)
		if run.Gone || ctx.Err() != nil {
			return
		}
	}
}

// skipRestoring records why the probes of the RESTORE WITH NORECOVERY
// were not measured.
func (r *runner) skipRestoring(why string) {
	r.skip[IDVanishedRestore], r.skip[IDDropRestoring] = why, why
}

// moves relocates the backup's files for a restore into db: into the
// verification instance's restore directories, else beside the files
// they came from (the same instance).
func (r *runner) moves(ctx context.Context, db string) ([]tsql.Move, error) {
	q, err := tsql.RestoreFileListOnly([]string{r.p.verifyPath(r.p.Backup)})
	if err != nil {
		return nil, err
	}
	list, err := r.ver.FileListOnly(ctx, q)
	if err != nil {
		return nil, err
	}
	rows := make([]tsql.FileListRow, len(list))
	dataDir, logDir := r.p.DataDir, r.p.LogDir
	for i, f := range list {
		rows[i] = tsql.FileListRow{LogicalName: f.LogicalName, PhysicalName: f.PhysicalName, Type: f.Type, FileID: f.FileID}
		if r.p.DataDir == "" {
			if f.Type == "L" {
				logDir = dirOf(f.PhysicalName)
			} else if dataDir == "" {
				dataDir = dirOf(f.PhysicalName)
			}
		}
	}
	return tsql.Moves(db, rows, dataDir, logDir)
}

// dirOf is the directory of a path in SQL Server's syntax (\ or /).
func dirOf(path string) string {
	if i := strings.LastIndexAny(path, `\/`); i > 0 {
		return path[:i]
	}
	return path
}

// sight is one poll of s: its request in sys.dm_exec_requests by session,
// whatever its command, then the product's own query for command with
// marker. ok is false when s's session runs no request. A miss of the
// product's query counts only when the session still runs afterwards.
func (r *runner) sight(ctx context.Context, db *mssql.DB, s *mssql.Sent, command string, m mssql.Marker, start time.Time) (sighting, bool, error) {
	cur, err := r.sessionRequest(ctx, db, s.Session)
	if err != nil || cur == nil {
		return sighting{}, false, err
	}
	sg := sighting{At: time.Since(start), Command: cur.Command, Percent: cur.Percent, Text: cur.Text, Own: cur.Own}
	q, args, err := tsql.RunningStatements(command)
	if err != nil {
		return sighting{}, false, err
	}
	reqs, err := db.Requests(ctx, q, args...)
	if err != nil {
		return sighting{}, false, err
	}
	if f := mssql.Find(reqs, m); f != nil && f.SessionID == s.Session {
		sg.Found = true
		return sg, true, nil
	}
	again, err := r.sessionRequest(ctx, db, s.Session)
	if err != nil || again == nil {
		return sighting{}, false, err
	}
	return sg, true, nil
}

// sessionRequest is the request session runs now, nil when none.
func (r *runner) sessionRequest(ctx context.Context, db *mssql.DB, session int64) (*mssql.Request, error) {
	q, args, err := tsql.SessionRequests(session)
	if err != nil {
		return nil, err
	}
	reqs, err := db.Requests(ctx, q, args...)
	if err != nil || len(reqs) == 0 {
		return nil, err
	}
	return &reqs[0], nil
}

// ended reports s ended, or ctx.
func ended(ctx context.Context, s *mssql.Sent) bool {
	select {
	case <-s.Done():
		return true
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// sleep waits one poll; false when ctx ended.
func (r *runner) sleep(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(r.o.Poll):
		return true
	}
}

// state is db's row of sys.databases, nil when it does not exist.
func (r *runner) state(ctx context.Context, sqlDB *mssql.DB, db string) (*mssql.DatabaseState, error) {
	q, args, err := tsql.DatabaseState(db)
	if err != nil {
		return nil, err
	}
	return sqlDB.DatabaseState(ctx, q, args...)
}

// readLastGood is db's LastGoodCheckDbTime and the server's GETDATE().
func (r *runner) readLastGood(ctx context.Context, sqlDB *mssql.DB, db string) (time.Time, time.Time, bool, error) {
	q, args, err := tsql.LastGoodCheckDB(db)
	if err != nil {
		return time.Time{}, time.Time{}, false, err
	}
	return sqlDB.LastGoodCheckDB(ctx, q, args...)
}

// clock is the server's GETDATE() and GETUTCDATE().
func clock(ctx context.Context, db *mssql.DB) (local, utc time.Time, err error) {
	if err := db.QueryRowContext(ctx, tsql.ServerClock).Scan(&utc, &local); err != nil {
		return time.Time{}, time.Time{}, mssql.Classify(db.Target, "read the server's clock", err)
	}
	return local, utc, nil
}

// errPermissionDenied is 262, "%ls permission denied in database '%.*ls'"
// (Database engine events and errors (0 to 999)).
const errPermissionDenied = 262

// quoteLogin is a login's name as a GRANT takes it.
func quoteLogin(user string) string {
	if q, err := tsql.QuoteIdent(user); err == nil {
		return q
	}
	return user
}

// judge turns the observations into the probes' verdicts.
func (r *runner) judge() []Probe {
	or := func(id string, measured bool, judge func() Probe) Probe {
		if why := r.skip[id]; why != "" {
			return inconclusive(id, why)
		}
		if !measured {
			return inconclusive(id, "the run ended before this probe")
		}
		return judge()
	}
	return []Probe{
		or(IDLastGoodRestored, r.restore != nil, func() Probe { return judgeLastGoodRestored(r.lastGood) }),
		or(IDLastGoodCheckDB, r.phases != nil, func() Probe { return judgeLastGoodCheckDB(r.lastGood) }),
		or(IDCheckDBPhases, r.phases != nil, func() Probe { return judgeCheckDBPhases(*r.phases) }),
		or(IDBatchText, r.texts != nil, func() Probe { return judgeBatchText(r.texts, !r.srcSees || !r.verSees) }),
		or(IDCreateDate, r.restore != nil, func() Probe { return judgeCreateDate(*r.restore) }),
		or(IDRestoreDate, r.restore != nil, func() Probe { return judgeRestoreDate(*r.restore) }),
		or(IDVanishedBackup, r.vanishBackup != nil, func() Probe { return judgeVanished(IDVanishedBackup, *r.vanishBackup) }),
		or(IDVanishedRestore, r.vanishRestore != nil, func() Probe { return judgeVanished(IDVanishedRestore, *r.vanishRestore) }),
		or(IDDropRestoring, r.drop != nil, func() Probe { return judgeDropRestoring(*r.drop) }),
		or(IDHeaderClock, r.header != nil, func() Probe { return judgeHeaderClock(*r.header) }),
		or(IDGarbageMedia, r.media != nil, func() Probe { return judgeGarbage(*r.media) }),
		or(IDMissingFile, r.media != nil, func() Probe { return judgeMissing(*r.media) }),
		or(IDLogForkAfterRestore, r.fork != nil, func() Probe { return judgeLogFork(*r.fork) }),
		or(IDDifferentialBase, r.diff != nil, func() Probe { return judgeDifferentialBase(*r.diff) }),
		or(IDEncryptedBackup, r.enc != nil, func() Probe { return judgeEncryptedBackup(*r.enc) }),
	}
}
