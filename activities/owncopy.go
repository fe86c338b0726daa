package activities

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The product replaces and drops only its own verification copy. Before
// each RESTORE it records in the set's manifest (VerifyCopy) what it is
// about to restore: the copy's name, the backup set, the instance's
// GETDATE(), the id of msdb's newest restore-history row, the database the
// name held and the ids of every other database; once msdb confirms the
// RESTORE, the restore-history row and the id and create_date of the
// database it produced. A database of the copy's name is the product's
// when the verification instance agrees with one of those records:
//   - it is owned by this login (sys.databases.owner_sid = SUSER_SID(): the
//     login whose RESTORE created it);
//   - finished: its newest restore-history row is the recorded one (id and
//     backup set GUID), and it is the recorded database (database_id and
//     create_date, exactly; a record written before create_date was kept:
//     created between the instance's clock before that RESTORE and after
//     it);
//   - RESTORING (a RESTORE cut short before msdb recorded anything): the
//     newest record is unconfirmed, msdb recorded no restore of another
//     set into the name since (a higher restore_history_id than its newest
//     then), and the database is one its RESTORE created (with an id no
//     other database had then, and not the one it replaced as it was) or
//     the database it was replacing, untouched. A RESTORE that ended while
//     no worker watched it is judged so too, its restore-history row of the
//     recorded set and recorded since.
//
// The manifests live on the backup servers, beside the stripes, and outlive
// a crash of the verification instance mid-RESTORE, which leaves only the
// RESTORING database (state, database_id, create_date, owner_sid) and no
// restore-history row. No create_date slack is guessed at: when SQL Server
// stamps create_date during a RESTORE is not documented; the confirmation
// reads it, and for a RESTORE no worker saw end the record tells the
// database it created by the ids of every database, read with the
// instance's clock just before: not by create_date, which is before that
// clock when the instance came back in another time zone or daylight
// saving time ended in between. (A record written before msdb's newest
// restore-history row was kept bounds create_date by that clock: such a
// copy is refused then.)
//
// Which restore came first is never told by dates: SQL Server keeps
// create_date and restore_date as the wall clock of the moment
// (sys.databases, restorehistory: datetime, which is neither time zone
// offset nor daylight saving aware, "datetime (Transact-SQL)",
// https://learn.microsoft.com/en-us/sql/t-sql/data-types/datetime-transact-sql),
// while GETDATE() is the operating system's local time now ("GETDATE
// (Transact-SQL)",
// https://learn.microsoft.com/en-us/sql/t-sql/functions/getdate-transact-sql):
// a change of the instance's time zone, or the end of daylight saving
// time, leaves older ones later than its GETDATE(). Restore history alone
// would not do either: a DBA's restore of a backupcycle set under the
// copy's name names a backupcycle backup set too.

// copyRecord is what one set records about a copy: its VerifyCopy, or for
// a set restored before VerifyCopy was recorded the proof its CHECKDB
// recorded (legacy, judged by createWindow).
type copyRecord struct {
	seq    int64
	vc     *catalog.VerifyCopy
	proof  *catalog.Proof
	window time.Duration
	// diff: the record of a differential set, whose VerifyCopy is its
	// base's RESTORE ... NORECOVERY (restorediff.go).
	diff bool
}

// recordOf is m's record of the copy verifyDB on instance, if any.
func recordOf(m *catalog.Manifest, instance, verifyDB string) (copyRecord, bool) {
	if m.VerifyCopy.On(instance, verifyDB) {
		return copyRecord{seq: m.Sequence, vc: m.VerifyCopy, diff: m.IsDifferential()}, true
	}
	if p := m.Proof; p != nil && p.VerifyInstance == instance && p.VerifyDatabase == verifyDB {
		return copyRecord{seq: m.Sequence, proof: p, window: createWindow(m)}, true
	}
	return copyRecord{}, false
}

// after reports whether r was written after o: a VerifyCopy by the
// instance's clock (the instants when both records have them: its wall
// clock runs back when its time zone changes or daylight saving time
// ends), a confirmed one before an unconfirmed one of the same RESTORE, and
// any VerifyCopy after a legacy proof.
func (r copyRecord) after(o copyRecord) bool {
	switch {
	case r.vc == nil || o.vc == nil:
		return r.vc != nil
	case r.vc.UTCOffsetMinutes != nil && o.vc.UTCOffsetMinutes != nil && !r.vc.InstanceTimeUTC.Equal(o.vc.InstanceTimeUTC):
		return r.vc.InstanceTimeUTC.After(o.vc.InstanceTimeUTC)
	case !r.vc.InstanceTime.Equal(o.vc.InstanceTime):
		return r.vc.InstanceTime.After(o.vc.InstanceTime)
	case !r.vc.SentAt.Equal(o.vc.SentAt):
		return r.vc.SentAt.After(o.vc.SentAt)
	}
	return r.vc.Confirmed() && !o.vc.Confirmed()
}

// copyRecords reads what db's sets record about the copy verifyDB on
// instance: every manifest of db on its servers that verify there (and on
// also, the server a step works with). It returns the servers it could not
// read.
func (a *Activities) copyRecords(ctx context.Context, db *config.Database, instance, verifyDB string, also ...string) ([]copyRecord, []string) {
	var servers []string
	for _, name := range slices.Concat(also, db.BackupServers, []string{db.CopyTo}) {
		if name == "" || slices.Contains(servers, name) {
			continue
		}
		if srv, err := a.Cycle.server(name); err == nil && srv.VerifyInstance == instance {
			servers = append(servers, name)
		}
	}
	bySeq := map[int64]copyRecord{}
	var unread []string
	for _, name := range servers {
		l, err := a.listManifests(ctx, name, db)
		if err != nil {
			unread = append(unread, name)
			continue
		}
		for _, m := range l.Manifests {
			// Only the workers' own record says which database they
			// restored: a planted one could name a DBA's database.
			if !m.Trusted() {
				continue
			}
			if r, ok := recordOf(m, instance, verifyDB); ok {
				if old, seen := bySeq[m.Sequence]; !seen || r.after(old) {
					bySeq[m.Sequence] = r
				}
			}
		}
	}
	out := make([]copyRecord, 0, len(bySeq))
	for _, r := range bySeq {
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y copyRecord) int {
		if x.after(y) {
			return -1
		}
		if y.after(x) {
			return 1
		}
		return 0
	})
	return out, unread
}

// madeBy reports whether st can be the database the RESTORE recorded in v
// created: one created since v was written, with an id no other database
// had then; or the database v replaces, as it was. A record with msdb's
// newest restore then (NewestRestoreBefore) read every database's id in
// the statement that read the instance's clock (tsql.AllDatabaseIDs): a
// database with none of those ids, or with the replaced one's id and
// another create_date, was created since, whatever its create_date says
// (a wall clock that runs back when the instance comes back in another
// time zone or daylight saving time ends). An older record has the clock
// only: created no earlier than it.
func madeBy(v *catalog.VerifyCopy, st *mssql.DatabaseState) bool {
	switch {
	case replaced(v, st):
		return true
	case slices.Contains(v.OtherDatabaseIDs, st.ID):
		return false
	}
	return v.NewestRestoreBefore != nil || madeAfter(v, st)
}

// replaced reports whether st is the database v's RESTORE replaced, as it
// was (a RESTORE WITH REPLACE keeps its id and creation date).
func replaced(v *catalog.VerifyCopy, st *mssql.DatabaseState) bool {
	r := v.Replaces
	return r != nil && st.ID == r.ID && st.Created.Equal(r.Created)
}

// madeAfter reports whether st was created no earlier than the instance's
// clock before v's RESTORE.
func madeAfter(v *catalog.VerifyCopy, st *mssql.DatabaseState) bool {
	return v.InstanceTime.IsZero() || !st.Created.Before(v.InstanceTime.Add(-clockSlack))
}

// finishedBy reports whether st, whose newest restore is last, is the copy
// the RESTORE recorded in v produced and msdb recorded.
func finishedBy(v *catalog.VerifyCopy, st *mssql.DatabaseState, last *mssql.RestoreProof) bool {
	if last == nil || !sameGUID(last.BackupSetGUID, v.BackupSetGUID) {
		return false
	}
	if v.Confirmed() {
		// The confirmation read this restore and this database once the
		// RESTORE had ended. An id another database held when the
		// RESTORE was sent proves nothing then: SQL Server reuses the id
		// of a database dropped while the RESTORE ran.
		if last.HistoryID != v.RestoreHistoryID || !confirmedDatabase(v, st) {
			return false
		}
		// A record written before the copy's create_date was kept: created
		// after the instance's clock before the RESTORE, or the database
		// it replaced.
		return !v.DatabaseCreated.IsZero() || madeAfter(v, st) || replaced(v, st)
	}
	// Finished while no worker watched it: msdb recorded it after v.
	return madeBy(v, st) && recordedAfter(v, last)
}

// confirmedDatabase reports whether st is the database v's confirmation
// read: its id and create_date, exactly. A record written before the
// create_date was kept has the instance's clock at the confirmation: st
// was created no later. (Its wall clock runs back when daylight saving
// time ends, so a copy restored across that hour may look created after.)
func confirmedDatabase(v *catalog.VerifyCopy, st *mssql.DatabaseState) bool {
	if st.ID != v.DatabaseID {
		return false
	}
	if !v.DatabaseCreated.IsZero() {
		return st.Created.Equal(v.DatabaseCreated)
	}
	return !st.Created.After(v.ConfirmedAt.Add(clockSlack))
}

// recordedAfter reports whether msdb recorded restore last after the
// RESTORE v records was about to be sent: its restore_history_id is higher
// than msdb's newest then (tsql.NewestRestore). A record written before
// that id was kept has only the instance's wall clock: restore_date no
// earlier than its GETDATE() then.
func recordedAfter(v *catalog.VerifyCopy, last *mssql.RestoreProof) bool {
	if n := v.NewestRestoreBefore; n != nil {
		return last.HistoryID > *n
	}
	return !v.InstanceTime.IsZero() && !last.RestoreDate.Before(v.InstanceTime.Add(-clockSlack))
}

// restoredSince reports whether restore last is a later RESTORE than the
// one v records: msdb recorded it after v's was about to be sent, and of
// another backup set (v's own RESTORE, ended while no worker watched it,
// has a row of v's set). A record written before restore_history_id was
// kept has only the instance's wall clock, which runs back when its time
// zone changes or daylight saving time ends: a restore before it may then
// look later.
func restoredSince(v *catalog.VerifyCopy, last *mssql.RestoreProof) bool {
	if n := v.NewestRestoreBefore; n != nil {
		return last.HistoryID > *n && !sameGUID(last.BackupSetGUID, v.BackupSetGUID)
	}
	return !v.InstanceTime.IsZero() && last.RestoreDate.After(v.InstanceTime.Add(clockSlack))
}

// ownCopy judges whether st (the copy's row of sys.databases, last the
// newest restore into it) is a copy the product restored, by the records
// (newest first). It returns the record that shows it, or why not.
func ownCopy(st *mssql.DatabaseState, last *mssql.RestoreProof, recs []copyRecord) (*copyRecord, string) {
	what := fmt.Sprintf("%s, database_id %d, created %s", st.State, st.ID, st.Created.Format(time.DateTime))
	if st.OwnerSID == "" || st.OwnerSID != st.LoginSID {
		return nil, fmt.Sprintf("%s, owned by SID %s, not by this login (%s)", what, st.OwnerSID, st.LoginSID)
	}
	if st.State == "RESTORING" {
		// Only the newest record can explain a RESTORE cut short: after
		// a RESTORE msdb confirmed, a RESTORING database is a later one.
		if len(recs) > 0 && recs[0].vc != nil {
			v := recs[0].vc
			// msdb recorded another RESTORE after this one was sent: the
			// RESTORING database is that later RESTORE's. A restore an
			// earlier record confirmed is not one.
			later := last != nil && restoredSince(v, last) && !confirmedBy(recs[1:], last)
			if !v.Confirmed() && !later && madeBy(v, st) {
				return &recs[0], ""
			}
			// A differential's base restored WITH NORECOVERY and
			// confirmed, its differential not (yet) restored on it.
			if recs[0].diff && v.Confirmed() && finishedBy(v, st, last) {
				return &recs[0], ""
			}
		}
		return nil, what + ", left by a RESTORE no backupcycle set records"
	}
	for i, r := range recs {
		switch {
		case r.vc != nil && finishedBy(r.vc, st, last):
			return &recs[i], ""
		case r.proof != nil && last != nil && r.proof.RestoreHistoryID == last.HistoryID && sameGUID(r.proof.BackupSetGUID, last.BackupSetGUID) &&
			!st.Created.After(last.RestoreDate.Add(r.window)):
			return &recs[i], ""
		}
	}
	if last == nil {
		return nil, what + ", never restored"
	}
	return nil, fmt.Sprintf("%s, last restored from backup set %q (%s, restore_history_id %d), a restore no backupcycle set records",
		what, last.BackupSetName, last.BackupSetGUID, last.HistoryID)
}

// confirmedBy reports whether one of recs confirmed the restore last (its
// restore-history row and backup set).
func confirmedBy(recs []copyRecord, last *mssql.RestoreProof) bool {
	for _, r := range recs {
		switch {
		case r.vc != nil && r.vc.Confirmed() && r.vc.RestoreHistoryID == last.HistoryID && sameGUID(r.vc.BackupSetGUID, last.BackupSetGUID):
			return true
		case r.proof != nil && r.proof.RestoreHistoryID == last.HistoryID && sameGUID(r.proof.BackupSetGUID, last.BackupSetGUID):
			return true
		}
	}
	return false
}

// guardCopy is the guard before anything destructive is done to verifyDB
// on instance (action: "replaced", "dropped"): the database's state (nil
// when there is none) when it is a copy backupcycle restored (ownCopy),
// else VerifyDatabaseInUse, and nothing is done. also names the server the
// step works with.
func (a *Activities) guardCopy(ctx context.Context, sqlDB *mssql.DB, db *config.Database, instance, verifyDB, action string,
	also ...string) (*mssql.DatabaseState, error) {
	st, err := databaseState(ctx, sqlDB, verifyDB)
	if err != nil || st == nil {
		return nil, err
	}
	last, err := lastRestoreProof(ctx, sqlDB, verifyDB)
	if err != nil {
		return nil, err
	}
	recs, unread := a.copyRecords(ctx, db, instance, verifyDB, also...)
	_, why := ownCopy(st, last, recs)
	if why == "" {
		return st, nil
	}
	if len(unread) > 0 {
		why += "; the manifests on " + strings.Join(unread, ", ") + " could not be read"
	}
	return nil, nonRetryable(ErrVerifyDatabaseInUse, fmt.Errorf(
		"database %q on %s exists and was not restored by backupcycle: nothing was %s; drop or rename it, or set verify_name (found: %s)",
		verifyDB, instance, action, why))
}

// copyIntent is the VerifyCopy recorded before a RESTORE into verifyDB on
// instance of backup set guid: the instance's clock with its offset from
// UTC and the ids of every database but st (the one the name holds, nil for
// none), read now.
func copyIntent(ctx context.Context, sqlDB *mssql.DB, instance, verifyDB, guid string, st *mssql.DatabaseState, sentAt time.Time) (*catalog.VerifyCopy, error) {
	ids, now, err := sqlDB.DatabaseIDs(ctx, tsql.AllDatabaseIDs)
	if err != nil {
		return nil, sqlError(err)
	}
	if now.IsZero() {
		return nil, temporal.NewApplicationError(fmt.Sprintf("%s did not report its GETDATE(): nothing is restored without a record of it", instance), ErrSQLError)
	}
	off, err := serverOffset(ctx, sqlDB)
	if err != nil {
		return nil, err
	}
	newest, err := sqlDB.NewestRestore(ctx, tsql.NewestRestore)
	if err != nil {
		return nil, sqlError(err)
	}
	v := &catalog.VerifyCopy{VerifyInstance: instance, VerifyDatabase: verifyDB, BackupSetGUID: guid, SentAt: sentAt.UTC(), InstanceTime: now,
		NewestRestoreBefore: &newest}
	v.SetUTCOffset(off)
	for _, id := range ids {
		if st == nil || id != st.ID {
			v.OtherDatabaseIDs = append(v.OtherDatabaseIDs, id)
		}
	}
	slices.Sort(v.OtherDatabaseIDs)
	if st != nil {
		v.Replaces = &catalog.DatabaseRef{ID: st.ID, Created: st.Created}
	}
	return v, nil
}

// forceOut disconnects every other session from the copy verifyDB (the
// product's own, ONLINE) before it is replaced: SET SINGLE_USER WITH
// ROLLBACK IMMEDIATE closes their connections (a keep_verify_db reader, a
// monitoring tool), or RESTORE ... REPLACE fails with 3101. Each session is
// logged with its login, host and program, as sys.dm_exec_sessions showed
// it just before (without VIEW SERVER STATE it shows none but this one's:
// the log says so). It reports whether the copy was set SINGLE_USER.
func forceOut(ctx context.Context, sqlDB *mssql.DB, instance, verifyDB string, log *zap.Logger) (bool, error) {
	sessions := sessionsIn(ctx, sqlDB, instance, verifyDB, log)
	stmt, err := tsql.SetSingleUser(verifyDB)
	if err != nil {
		return false, nonRetryable(ErrInvalidConfig, err)
	}
	if _, err := sqlDB.Run(ctx, "ALTER DATABASE", stmt, nil); err != nil {
		return false, sqlError(err)
	}
	logDisconnected(log, sessions, instance, verifyDB, "replaced")
	return true, nil
}

// logDisconnected logs each session forced out of the copy before it is
// replaced or dropped (action).
func logDisconnected(log *zap.Logger, sessions []mssql.Session, instance, verifyDB, action string) {
	for _, s := range sessions {
		log.Warn("session disconnected from the verification copy before it is "+action, zap.String("verify_db", verifyDB),
			zap.String("instance", instance), zap.Int64("session", s.ID), zap.String("login", s.Login), zap.String("host", s.Host),
			zap.String("program", s.Program))
	}
}

// sessionsIn lists the other sessions in verifyDB, for the log; a failure
// to read them is logged and does not stop what follows.
func sessionsIn(ctx context.Context, sqlDB *mssql.DB, instance, verifyDB string, log *zap.Logger) []mssql.Session {
	q, args, err := tsql.SessionsIn(verifyDB)
	if err != nil {
		return nil
	}
	sessions, err := sqlDB.Sessions(ctx, q, args...)
	if err != nil {
		log.Warn("sessions in the verification copy not listed (VIEW SERVER STATE shows them)", zap.String("verify_db", verifyDB),
			zap.String("instance", instance), zap.Error(err))
	}
	return sessions
}

// multiUser makes the copy MULTI_USER when it is not: a RESTORE gives the
// copy the user access its source had when it was backed up (SINGLE_USER,
// RESTRICTED_USER), and a copy left SINGLE_USER admits one reader at a
// time (keep_verify_db) or none while another holds it (CHECKDB).
func multiUser(ctx context.Context, sqlDB *mssql.DB, st *mssql.DatabaseState, instance, verifyDB string, log *zap.Logger) error {
	if st == nil || st.UserAccess == "" || st.UserAccess == "MULTI_USER" {
		return nil
	}
	stmt, err := tsql.SetMultiUser(verifyDB)
	if err != nil {
		return nonRetryable(ErrInvalidConfig, err)
	}
	if _, err := sqlDB.Run(ctx, "ALTER DATABASE", stmt, nil); err != nil {
		return sqlError(err)
	}
	log.Info("verification copy made MULTI_USER", zap.String("verify_db", verifyDB), zap.String("instance", instance),
		zap.String("was", st.UserAccess))
	return nil
}
