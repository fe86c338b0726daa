package cycle

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// SanityChecks runs the database's configured queries against the restored
// copy and compares the first value of each with its expectation. The copy
// is proven to be this set's restore before the queries run and after
// (RestoreMismatch otherwise), and the activity heartbeats all along: a
// query on a cold multi-terabyte copy runs for minutes, longer than the
// heartbeat timeout.
//
// The copy is the database owner's: a function a query calls may be
// written to do anything its caller may. So the queries never run as the
// verification login but as tsql.SanityUser, a user of the copy that only
// reads it (sanitySession). Only a query that ran and returned a value
// failing its expectation is evidence (SanityCheckFailed); one SQL Server
// refused to run is SanityCheckCouldNotRun and the set stays checked.
// Neither error carries a returned value or SQL Server's text (they may
// quote the owner's data): the worker's log has them, the history a
// fingerprint. On success the manifest records the proof MarkVerified
// requires (catalog.SanityProof).
func (a *Activities) SanityChecks(ctx context.Context, in activities.VerifyInput) (activities.StepOutput, error) {
	db, srv, inst, verifyDB, err := activities.VerifyTarget(a.Activities, in)
	if err != nil {
		return activities.StepOutput{}, err
	}
	start := time.Now()
	if len(db.SanityChecks) == 0 {
		return activities.StepOutput{VerifyDatabase: verifyDB}, nil
	}
	m, want, err := activities.SetToProve(a.Activities, ctx, srv, db, in.Sequence)
	if err != nil {
		return activities.StepOutput{}, err
	}
	sqlDB, err := a.Cycle.ConnectSQL(ctx, inst, verifyDB)
	if err != nil {
		return activities.StepOutput{}, err
	}
	defer sqlDB.Close()
	rep := activities.NewReporter(a.Activities, ctx, activities.StepSanity, in.Sequence)
	stop := rep.Every(a.Cycle.PollEvery(), nil, nil)
	defer stop()
	log := activities.Logger(a.Activities, ctx).With(zap.String("db", db.Name), zap.Int64("seq", in.Sequence), zap.String("step", activities.StepSanity))
	before, err := activities.ProveRestored(ctx, sqlDB, inst.Name, db, in.Sequence, verifyDB, want, m)
	if err != nil {
		return activities.StepOutput{}, err
	}
	// proven checks that the queries ran on this set's copy: a failed check
	// is evidence about the content only then, and so is a passed one.
	proven := func() (*mssql.RestoreProof, error) {
		return activities.StillRestored(ctx, sqlDB, inst.Name, db, in.Sequence, verifyDB, want, m, before, "the sanity checks")
	}
	where := sanityWhere{db: db, instance: inst.Name, verifyDB: verifyDB, seq: in.Sequence}
	if err := runSanityChecks(ctx, sqlDB, where, m, in.SourceUTCOffsetMinutes, func() error { _, err := proven(); return err }, rep, log); err != nil {
		return activities.StepOutput{}, err
	}
	proof, err := proven()
	if err != nil {
		return activities.StepOutput{}, err
	}
	names := make([]string, len(db.SanityChecks))
	for i, c := range db.SanityChecks {
		names[i] = c.Name
	}
	now := a.Cycle.Clock()
	if _, err := activities.UpdateManifest(a.Activities, ctx, db, in.Sequence, activities.Holders(m, srv.Name), []string{srv.Name}, func(m *catalog.Manifest) error {
		if m == nil {
			return activities.StorageError(srv.Name, fmt.Errorf("manifest of seq %d missing: %w", in.Sequence, storage.ErrNotFound))
		}
		m.SanityProof = &catalog.SanityProof{VerifyInstance: inst.Name, VerifyDatabase: verifyDB, RestoreHistoryID: proof.HistoryID,
			BackupSetGUID: proof.BackupSetGUID, Checks: names, RanAs: tsql.SanityUser, CheckedAt: now, Passed: true}
		return nil
	}); err != nil {
		return activities.StepOutput{}, err
	}
	return activities.StepOutput{VerifyDatabase: verifyDB, Duration: time.Since(start), Checks: len(db.SanityChecks)}, nil
}

// runSanityChecks runs where.db's checks on the copy sqlDB is connected to,
// as the sanity user, each value held to its expectation (max_age measured
// from m's backup finish). proven (nil: none) shows the copy is still the
// one meant, before a failure is reported; rep (nil: none) shows progress.
func runSanityChecks(ctx context.Context, sqlDB *mssql.DB, where sanityWhere, m *catalog.Manifest, offset *int, proven func() error,
	rep *activities.Reporter, log *zap.Logger) error {
	if proven == nil {
		proven = func() error { return nil }
	}
	sess, err := openSanitySession(ctx, sqlDB, where.db, where, log)
	if err != nil {
		return err
	}
	defer sess.close()
	for i, c := range where.db.SanityChecks {
		v, found, err := mssql.QueryValueOn(ctx, sess.conn, sqlDB.Target, "sanity check "+c.Name, c.Query)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			if perr := proven(); perr != nil {
				return perr
			}
			return where.couldNotRun(c, err, log)
		}
		if expected, got := sanityMismatchAt(c, v, found, m, offset, time.Now()); expected != "" {
			if perr := proven(); perr != nil {
				return perr
			}
			log.Error("sanity check did not hold", zap.String("check", c.Name), zap.String("query", c.Query),
				zap.String("value", got), zap.String("fingerprint", mssql.Fingerprint(sanityText(v))))
			return activities.NonRetryable(activities.ErrSanityCheckFailed, fmt.Errorf(
				"sanity check %q on %s (seq %d) did not hold: %s; the value returned (%s) is in the worker's log",
				c.Name, where.verifyDB, where.seq, expected, valueFingerprint(v, found)))
		}
		if rep != nil {
			rep.SetPercent(float64(100 * (i + 1) / len(where.db.SanityChecks)))
		}
	}
	return nil
}

// SanityCheckCopy runs db's sanity checks on name on instance (sqlDB is
// connected to it), as the cycle's sanity step does, for the log proofs'
// copies; max_age is measured from ref's backup finish: the point the copy
// was restored to. seq names the full the copy started from in errors.
func SanityCheckCopy(ctx context.Context, sqlDB *mssql.DB, db *config.Database, instance, name string, seq int64, ref *catalog.Manifest,
	log *zap.Logger) error {
	if len(db.SanityChecks) == 0 {
		return nil
	}
	return runSanityChecks(ctx, sqlDB, sanityWhere{db: db, instance: instance, verifyDB: name, seq: seq}, ref, nil, nil, nil, log)
}

// sanityWhere names the copy the sanity checks run on, for their errors.
type sanityWhere struct {
	db       *config.Database
	instance string
	verifyDB string
	seq      int64
}

// sanitySession is a connection of the copy in the context of
// tsql.SanityUser: the user is created after the restore proof (a member
// of db_datareader, EXECUTE on the functions the checks list, nothing
// else), the connection switched to it with EXECUTE AS USER and the switch
// confirmed before any query runs. A database user's context cannot reach
// beyond its database while the database is not TRUSTWORTHY ("Extending
// Database Impersonation by Using EXECUTE AS"; a restored database is
// never TRUSTWORTHY, "TRUSTWORTHY database property"): the owner's code
// runs with no server permission, reads no other database and no login.
type sanitySession struct {
	sqlDB    *mssql.DB
	conn     *sql.Conn
	log      *zap.Logger
	verifyDB string
	// readOnly: the copy was READ_ONLY (as its source) and was made
	// writable for the user; close makes it read-only again.
	readOnly bool
}

// openSanitySession prepares the user and the connection. Whatever fails
// here is SanityCheckCouldNotRun (a lost instance: retryable).
func openSanitySession(ctx context.Context, sqlDB *mssql.DB, db *config.Database, where sanityWhere, log *zap.Logger) (*sanitySession, error) {
	q, args, err := tsql.CopyOptions(where.verifyDB)
	if err != nil {
		return nil, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	var trustworthy, readOnly bool
	if err := sqlDB.QueryRowContext(ctx, q, args...).Scan(&trustworthy, &readOnly); err != nil {
		return nil, where.setupFailed("the copy's options could not be read", mssql.Classify(sqlDB.Target, "read the copy's options", err), log)
	}
	if trustworthy {
		quoted, _ := tsql.QuoteIdent(where.verifyDB)
		return nil, where.notRun(fmt.Sprintf("the copy is TRUSTWORTHY, so code in it could act beyond it: ALTER DATABASE %s SET TRUSTWORTHY OFF "+
			"(a sysadmin; a restore leaves it OFF, so someone set it)", quoted))
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return nil, activities.SQLError(err)
	}
	s := &sanitySession{sqlDB: sqlDB, conn: conn, log: log, verifyDB: where.verifyDB}
	run := func(what, stmt string) error {
		if _, err := mssql.RunOn(ctx, conn, sqlDB.Target, "prepare the sanity user", stmt, nil); err != nil {
			s.close()
			return where.setupFailed(what, err, log)
		}
		return nil
	}
	if readOnly {
		// A copy of a READ_ONLY database is read-only too; its owner (the
		// login) makes it writable for the user's sake and read-only again
		// in close. Idle sessions of the pool would hold it: none stay.
		rw, err := tsql.SetReadOnly(where.verifyDB, false)
		if err != nil {
			s.close()
			return nil, activities.NonRetryable(activities.ErrInvalidConfig, err)
		}
		sqlDB.SetMaxIdleConns(0)
		err = run("the copy is READ_ONLY, as its source, and could not be made writable for the sanity user", rw)
		sqlDB.SetMaxIdleConns(2)
		if err != nil {
			return nil, err
		}
		s.readOnly = true
		log.Info("copy made writable for the sanity checks' user; it is made read-only again after them")
	}
	for _, stmt := range tsql.SanityUserSetup() {
		if err := run("the sanity user could not be prepared in the copy (the login must own the copy, as it does when it restored it)", stmt); err != nil {
			return nil, err
		}
	}
	for _, c := range db.SanityChecks {
		for _, fn := range c.GrantExecute {
			grant, err := tsql.SanityGrant(fn)
			if err != nil {
				s.close()
				return nil, activities.NonRetryable(activities.ErrInvalidConfig, err)
			}
			if err := run(fmt.Sprintf("grant_execute %s of sanity check %q failed (is it a function of the copy?)", fn, c.Name), grant); err != nil {
				return nil, err
			}
		}
	}
	if err := run("the sanity user's context could not be entered", tsql.ExecuteAsSanityUser); err != nil {
		return nil, err
	}
	who, _, err := mssql.QueryValueOn(ctx, conn, sqlDB.Target, "sanity user context", tsql.CurrentUser)
	if err != nil || who != tsql.SanityUser {
		s.close()
		if err != nil {
			return nil, where.setupFailed("the sanity user's context could not be confirmed", err, log)
		}
		return nil, where.notRun(fmt.Sprintf("the session runs as %v, not as %s: no query is run as anyone else", who, tsql.SanityUser))
	}
	return s, nil
}

// close leaves the user's context, drops the user (a kept copy has no
// trace of it), makes a read-only copy read-only again, and discards the
// connection: it never goes back to the pool.
func (s *sanitySession) close() {
	if s.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(op, stmt string) error {
		_, err := mssql.RunOn(ctx, s.conn, s.sqlDB.Target, op, stmt, nil)
		return err
	}
	if err := run("revert the sanity user", tsql.Revert); err != nil {
		s.log.Warn("sanity user's context not reverted: the connection is discarded", zap.Error(err))
	} else {
		if err := run("drop the sanity user", tsql.DropSanityUser); err != nil {
			s.log.Warn("sanity user not dropped from the copy", zap.String("user", tsql.SanityUser), zap.Error(err))
		}
		if s.readOnly {
			ro, err := tsql.SetReadOnly(s.verifyDB, true)
			if err == nil {
				s.sqlDB.SetMaxIdleConns(0)
				err = run("make the copy read-only again", ro)
				s.sqlDB.SetMaxIdleConns(2)
			}
			if err != nil {
				s.log.Warn("copy not made read-only again", zap.String("verify_db", s.verifyDB), zap.Error(err))
			}
		}
	}
	_ = s.conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = s.conn.Close()
	s.conn = nil
}

// notRun is SanityCheckCouldNotRun for why.
func (w sanityWhere) notRun(why string) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"sanity checks of %s could not run on %s on %s (seq %d): %s. This says nothing about the backup set, which stays checked: "+
			"fix it, then finish the set with `starter run --database %s --resume %d`",
		w.db.Name, w.verifyDB, w.instance, w.seq, why, w.db.Name, w.seq), activities.ErrSanityCheckCouldNotRun, nil)
}

// setupFailed is what a failed preparation of the sanity session becomes.
func (w sanityWhere) setupFailed(what string, err error, log *zap.Logger) error {
	var f *mssql.Failure
	if !errors.As(err, &f) {
		return activities.SQLError(err)
	}
	log.Error("sanity checks could not be prepared", zap.String("what", what), zap.Error(err))
	if f.Kind == mssql.ErrUnreachable {
		return temporal.NewApplicationErrorWithCause(what+": "+f.Redacted(), activities.ErrSQLHostUnreachable, nil)
	}
	return w.notRun(fmt.Sprintf("%s: %s", what, f.Redacted()))
}

// couldNotRun is the error of a sanity query SQL Server did not run to a
// value: the check, the error numbers and the fix, without SQL Server's
// text, which the worker's log holds.
func (w sanityWhere) couldNotRun(c config.SanityCheck, err error, log *zap.Logger) error {
	var f *mssql.Failure
	if !errors.As(err, &f) {
		return activities.SQLError(err)
	}
	log.Error("sanity check could not run", zap.String("check", c.Name), zap.String("query", c.Query), zap.Error(err))
	if f.Kind == mssql.ErrUnreachable {
		return temporal.NewApplicationErrorWithCause(fmt.Sprintf("sanity check %q on %s: %s", c.Name, w.verifyDB, f.Redacted()),
			activities.ErrSQLHostUnreachable, nil)
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"sanity check %q could not run on %s on %s (seq %d): %s (the worker's log has the text): %s. "+
			"This says nothing about the backup set, which stays checked: fix it, then finish the set with `starter run --database %s --resume %d`",
		c.Name, w.verifyDB, w.instance, w.seq, f.ErrorSummary(), sanityFix(f.Numbers(), w), w.db.Name, w.seq),
		activities.ErrSanityCheckCouldNotRun, nil)
}

// sanityFixes say what to do about the SQL Server errors a sanity query
// meets on a copy restored on another instance (Microsoft Learn,
// "Database engine events and errors"; MSSQLSERVER_15517, _6263, _208,
// _229, _916, _468).
var sanityFixes = []struct {
	numbers []int32
	fix     string
}{
	{[]int32{15517}, "a module the query calls runs as its owner (EXECUTE AS OWNER) and the copy's owner (dbo) has no login on %[1]s: " +
		"the copy keeps its source's owner SID, so create that login on %[1]s with the same SID (CREATE LOGIN ... WITH SID = " +
		"the source's sys.databases.owner_sid), or make the source database's owner a login whose SID both instances share " +
		"(ALTER AUTHORIZATION ON DATABASE::%[2]s TO [sa] on the source, for the next sets)"},
	{[]int32{6263, 6522}, "the query calls CLR code and CLR integration is off on %[1]s: EXEC sp_configure 'clr enabled', 1; RECONFIGURE; there"},
	{[]int32{208, 4060, 911, 2812, 4121}, "an object, function or database the query names does not exist in the copy or on %[1]s " +
		"(a cross-database reference or a synonym to a database the verification instance does not have): create it there, or change the query"},
	{[]int32{229, 230, 262, 297, 300, 916, 15562}, "the query needs a permission the sanity user (" + tsql.SanityUser + ": db_datareader " +
		"in the copy, nothing outside it) does not have: list the functions the query calls under grant_execute of the check; " +
		"server-level views, other databases and commands stay out of its reach by design"},
	{[]int32{468, 446, 457}, "the copy's collation conflicts with %[1]s's (tempdb, the server's): add COLLATE to the query"},
	{[]int32{102, 105, 156, 207, 4104, 245, 8114, 8115, 8134}, "the query does not run on the copy as written (syntax, column names, " +
		"conversions): fix the query"},
}

// sanityFix is the fix for the first error number a fix is known for.
func sanityFix(numbers []int32, w sanityWhere) string {
	for _, n := range numbers {
		for _, f := range sanityFixes {
			if slices.Contains(f.numbers, n) {
				if !strings.Contains(f.fix, "%") {
					return f.fix
				}
				db, _ := tsql.QuoteIdent(w.db.Name)
				return fmt.Sprintf(f.fix, w.instance, db)
			}
		}
	}
	return "fix the query or the verification instance (" + w.instance + ")"
}

// valueFingerprint describes a returned value without showing it.
func valueFingerprint(v any, found bool) string {
	if !found {
		return "no row"
	}
	if v == nil {
		return "NULL"
	}
	return fmt.Sprintf("%T, %s", v, mssql.Fingerprint(sanityText(v)))
}

// sanityMismatchAt says, when v fails c's expectation, what was expected
// (the configuration's own words: safe for the workflow history) and what
// came (the value: the worker's log only); "" when v holds. offsetMinutes
// is the source server's offset from UTC (nil: unknown), now the worker's
// clock.
func sanityMismatchAt(c config.SanityCheck, v any, found bool, m *catalog.Manifest, offsetMinutes *int, now time.Time) (expected, got string) {
	if !found {
		return "want one row, the query returned none", "no row"
	}
	switch c.Expect {
	case config.ExpectEquals:
		if s := sanityText(v); s != c.Equals {
			return fmt.Sprintf("want %q", c.Equals), fmt.Sprintf("returned %q", s)
		}
	case config.ExpectAtLeast:
		n, ok := v.(int64)
		if f, isF := v.(float64); isF {
			n, ok = int64(f), true
		}
		if !ok || n < c.AtLeast {
			return fmt.Sprintf("want an integer of at least %d", c.AtLeast), fmt.Sprintf("returned %v", v)
		}
	case config.ExpectMaxAge:
		want := fmt.Sprintf("want a date/time no older than %s before the backup finished", c.MaxAge)
		t, ok := v.(time.Time)
		if !ok {
			return want, fmt.Sprintf("returned %v (%T)", v, v)
		}
		// max_age is measured from the backup's finish, which RESTORE
		// HEADERONLY gives in the source server's local time (the manifest
		// records its instant); without it (an old manifest) from now.
		// The value is the source's local time too, converted by the
		// manifest's offset. The plan's offset (read before the backup)
		// may convert it instead when it is within a clock change of the
		// manifest's: a value written before a DST change. It comes with
		// the activity's input, so next to the manifest's it only ever
		// makes the check more lenient (the smaller age counts), by that
		// hour at most: an input cannot fail a fresh copy. Only a
		// manifest that records no offset (written by an older build)
		// takes the input's alone.
		var h *catalog.Header
		if m != nil {
			h = m.Header
		}
		offsets := []*int{nil}
		if o := offsetMinutes; o != nil && abs(*o) <= catalog.MaxUTCOffsetMinutes {
			offsets[0] = o
		}
		if h != nil && h.UTCOffsetMinutes != nil {
			r := h.UTCOffsetMinutes
			offsets[0] = r
			if o := offsetMinutes; o != nil && *o != *r && abs(*o-*r) <= maxClockChangeMinutes {
				offsets = append(offsets, o)
			}
		}
		var age time.Duration
		for i, off := range offsets {
			ref := now
			if h != nil && !h.BackupFinish.IsZero() {
				ref = serverInstant(h.BackupFinish, off)
				if !h.BackupFinishUTC.IsZero() {
					ref = h.BackupFinishUTC
				}
			}
			if a := ref.Sub(serverInstant(t, off)); i == 0 || a < age {
				age = a
			}
		}
		if age > c.MaxAge {
			return want, fmt.Sprintf("returned %s, %s older than the backup", t.Format(time.RFC3339), age.Round(time.Second))
		}
	default:
		return fmt.Sprintf("has no expectation (%q)", c.Expect), ""
	}
	return "", ""
}

// maxClockChangeMinutes is the most a zone's offset from UTC moves at a
// clock change (daylight saving time: one hour).
const maxClockChangeMinutes = 60

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// serverInstant reads a date/time value of the source server: datetime,
// datetime2 and smalldatetime carry no zone and hold the server's local
// wall clock (what GETDATE() returns; backupset (Transact-SQL) records
// backup dates in local time, its time_zone column being the difference to
// UTC), which go-mssqldb decodes as if it were UTC; offsetMinutes makes it
// an instant. A datetimeoffset value (decoded with its own zone) is an
// instant already. With the offset unknown the wall clock is taken as is:
// values and backup dates of one server still compare correctly.
func serverInstant(t time.Time, offsetMinutes *int) time.Time {
	if offsetMinutes == nil || t.Location() != time.UTC {
		return t
	}
	return t.Add(-time.Duration(*offsetMinutes) * time.Minute)
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

// CheckDBCopy runs DBCC CHECKDB on the copy name (sqlDB connected to its
// instance's master), for the copies the log proofs and the drills
// restore: the errors it reported come back as the detail ("" when it
// found none); an outage as the error.
func CheckDBCopy(ctx context.Context, sqlDB *mssql.DB, name string) (string, error) {
	stmt, err := tsql.CheckDB(name)
	if err != nil {
		return "", activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	if _, err := sqlDB.Run(ctx, "DBCC CHECKDB", stmt, nil); err != nil {
		var f *mssql.Failure
		if errors.As(err, &f) && f.Kind != mssql.ErrUnreachable && len(f.Errors) > 0 {
			return "DBCC CHECKDB of the copy: " + f.ErrorSummary(), nil
		}
		return "", activities.SQLError(err)
	}
	return "", nil
}
