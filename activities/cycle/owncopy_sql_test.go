package cycle

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The product knows its own verification copy, and only its own: what it
// is about to restore is recorded in the set's manifest before the RESTORE
// is sent, and a copy counts as its own only when the verification
// instance agrees (owner, database id, create_date, restore history).

// reader opens a session in database db of the verification instance, as
// a reporting tool on report01 would, and checks that it works.
func (f *sqlFixture) reader(db string) *sql.Conn {
	f.t.Helper()
	pool, err := sql.Open("sqlserver", f.verify.DSN("sa", sqlPassword, db)+"&app+name=reporting-tool&workstation+id=report01")
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { pool.Close() })
	conn, err := pool.Conn(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(context.Background(), "SELECT COUNT_BIG(*) FROM sys.databases"); err != nil {
		f.t.Fatalf("reader in %s: %v", db, err)
	}
	return conn
}

// observe sends the activities' log to an observer.
func (f *sqlFixture) observe() *observer.ObservedLogs {
	core, logs := observer.New(zapcore.InfoLevel)
	f.acts.Log = zap.New(core)
	return logs
}

// cutRestore runs a Restore that the verification instance's crash cuts
// short mid-RESTORE (no restore history row), and brings the instance back:
// the copy is left RESTORING. What runs next is a new activity (no
// heartbeat details).
func (f *sqlFixture) cutRestore(verify activities.VerifyInput) {
	f.t.Helper()
	f.verify.SetThrottle(2 << 20)
	if err := f.verify.CrashAt(sqlsim.OpRestore, 50); err != nil {
		f.t.Fatal(err)
	}
	if err := f.run(f.acts.Restore, verify, nil); activities.ErrorType(err) != activities.ErrSQLHostUnreachable {
		f.t.Fatalf("restore through a crash: %v, want SQLHostUnreachable", err)
	}
	if err := f.verify.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.verify.SetThrottle(0)
	f.wantState("Sales_verify", "RESTORING")
	f.env.SetHeartbeatDetails(nil)
}

// wantState checks a database's state on the verification instance.
func (f *sqlFixture) wantState(name, state string) {
	f.t.Helper()
	st, err := activities.DatabaseState(context.Background(), f.verifySQL(), name)
	if err != nil || st == nil || st.State != state {
		f.t.Fatalf("%s: %+v %v, want %s", name, st, err, state)
	}
}

// foreignRestoring leaves a RESTORING Sales_verify from someone else's
// RESTORE (login dba) of the set's stripes, cut short by a crash.
func (f *sqlFixture) foreignRestoring(verify activities.VerifyInput) {
	f.t.Helper()
	if err := f.verify.SetLogin(sqlsim.Login{Name: "dba", Password: sqlPassword, Sysadmin: true}); err != nil {
		f.t.Fatal(err)
	}
	f.verify.SetThrottle(2 << 20)
	if err := f.verify.CrashAt(sqlsim.OpRestore, 50); err != nil {
		f.t.Fatal(err)
	}
	err := f.verify.RestoreDatabase(context.Background(), sqlsim.RestoreSpec{Database: "Sales_verify", Stripes: f.stripes(verify),
		Replace: true, Login: "dba", Move: map[string]string{"Sales'data": `D:\restore\dba.mdf`, "Sales'data_2": `D:\restore\dba.ndf`,
			"Sales'data_log": `D:\restore\dba.ldf`}})
	if err == nil {
		f.t.Fatal("the DBA's restore was not cut short")
	}
	if err := f.verify.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.verify.SetThrottle(0)
	f.wantState("Sales_verify", "RESTORING")
}

// stripes are the set's stripes on its remote server, as the verification
// instance reaches them.
func (f *sqlFixture) stripes(verify activities.VerifyInput) []string {
	f.t.Helper()
	srv, _ := f.cfg.BackupServer(verify.Server)
	m := f.load(verify.Server, verify.Sequence)
	layout, err := tsql.Layout(srv.UNCPaths, m.Names(), verify.Sequence, len(m.Stripes))
	if err != nil {
		f.t.Fatal(err)
	}
	return tsql.Paths(layout)
}

// intendRestore records in the set's manifest the RESTORE into its copy an
// earlier attempt was about to send, as Restore records it first.
func (f *sqlFixture) intendRestore(verify activities.VerifyInput) {
	f.t.Helper()
	ctx := context.Background()
	db, srv, inst, verifyDB, err := activities.VerifyTarget(f.acts.Activities, verify)
	if err != nil {
		f.t.Fatal(err)
	}
	st, err := activities.DatabaseState(ctx, f.verifySQL(), verifyDB)
	if err != nil {
		f.t.Fatal(err)
	}
	v, err := activities.CopyIntent(f.acts.Activities, ctx, f.verifySQL(), inst.Name, verifyDB, f.setGUID(verify.Sequence), st)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := activities.UpdateManifest(f.acts.Activities, ctx, db, verify.Sequence, []string{"bak01", "bak02"}, []string{srv.Name}, func(m *catalog.Manifest) error {
		m.VerifyCopy = v
		return nil
	}); err != nil {
		f.t.Fatal(err)
	}
}

// refusedIntact runs fn and wants VerifyDatabaseInUse, with no RESTORE or
// DROP sent.
func (f *sqlFixture) refusedIntact(what string, fn any, in activities.VerifyInput) {
	f.t.Helper()
	restores, drops := f.verifyRestores(), len(statements(f.verify, "DROP DATABASE"))
	err := f.run(fn, in, nil)
	if activities.ErrorType(err) != activities.ErrVerifyDatabaseInUse || !strings.Contains(err.Error(), `"Sales_verify"`) {
		f.t.Fatalf("%s: %v, want VerifyDatabaseInUse naming Sales_verify", what, err)
	}
	if n, d := f.verifyRestores(), len(statements(f.verify, "DROP DATABASE")); n != restores || d != drops {
		f.t.Fatalf("%s: %d RESTORE and %d DROP statements ran", what, n-restores, d-drops)
	}
}

// TestRestoreForcesReadersOutOfItsOwnCopy: a reporting session holds the
// copy a previous cycle kept (keep_verify_db). The next cycle's RESTORE
// ... REPLACE succeeds: the session is forced out first (SINGLE_USER WITH
// ROLLBACK IMMEDIATE), and the log names it. The new copy is MULTI_USER.
func TestRestoreForcesReadersOutOfItsOwnCopy(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, first := f.copiedSet()
	f.must(f.acts.Restore, first, nil)
	conn := f.reader("Sales_verify")
	logs := f.observe()
	_, second := f.copiedSet()
	if err := f.run(f.acts.Restore, second, nil); err != nil {
		t.Fatalf("restore over its own copy with a reader in it: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := conn.ExecContext(ctx, "SELECT 1"); err == nil {
		t.Error("the reader's session survived the restore over its database")
	}
	found := false
	for _, e := range logs.All() {
		m := e.ContextMap()
		if strings.Contains(e.Message, "disconnected") && m["login"] == "sa" && m["host"] == "report01" && m["program"] == "reporting-tool" &&
			m["verify_db"] == "Sales_verify" {
			found = true
		}
	}
	if !found {
		var msgs []string
		for _, e := range logs.All() {
			msgs = append(msgs, e.Message)
		}
		t.Errorf("no log line names the disconnected session (login sa, host report01, program reporting-tool): %q", msgs)
	}
	p, err := activities.LastRestore(context.Background(), f.verifySQL(), "Sales_verify")
	if err != nil || p == nil || !activities.SameGUID(p.BackupSetGUID, f.setGUID(second.Sequence)) {
		t.Fatalf("restore history %+v %v, want the second set", p, err)
	}
	if v, _, err := f.verifySQL().QueryValue(context.Background(), "access", "SELECT user_access_desc FROM sys.databases WHERE name = N'Sales_verify'"); err != nil || v != "MULTI_USER" {
		t.Fatalf("user access of the new copy: %v %v, want MULTI_USER", v, err)
	}
	f.reader("Sales_verify") // readers come back
}

// TestRestoreLeavesAForeignDatabaseWithAReader: a database of the copy's
// name that backupcycle did not restore, with a session in it, is left
// alone: VerifyDatabaseInUse, and the session still works.
func TestRestoreLeavesAForeignDatabaseWithAReader(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, verify := f.copiedSet()
	if err := f.verify.CreateDatabase(sqlsim.DatabaseSpec{Name: "Sales_verify", Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	conn := f.reader("Sales_verify")
	f.refusedIntact("restore over a foreign database with a reader", f.acts.Restore, verify)
	if _, err := conn.ExecContext(context.Background(), "SELECT 1"); err != nil {
		t.Fatalf("the foreign database's session was disturbed: %v", err)
	}
}

// TestRestoreMakesTheCopyMultiUser: a source backed up while
// RESTRICTED_USER gives a RESTRICTED_USER copy (RESTORE gives the copy the
// database's own options); the copy is made MULTI_USER, for keep_verify_db
// readers.
func TestRestoreMakesTheCopyMultiUser(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	src, err := mssql.Open(context.Background(), mssql.Target{Instance: "sql01", Address: f.src.Addr(), User: "sa", Password: sqlPassword, Encrypt: "disable"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Run(context.Background(), "ALTER", "ALTER DATABASE [Sales] SET RESTRICTED_USER WITH ROLLBACK IMMEDIATE", nil); err != nil {
		t.Fatal(err)
	}
	_, verify := f.copiedSet()
	f.must(f.acts.Restore, verify, nil)
	if v, _, err := f.verifySQL().QueryValue(context.Background(), "access", "SELECT user_access_desc FROM sys.databases WHERE name = N'Sales_verify'"); err != nil || v != "MULTI_USER" {
		t.Fatalf("user access of the copy of a RESTRICTED_USER source: %v %v, want MULTI_USER", v, err)
	}
}

// TestRestoreRecognisesItsCutFirstRestore: the first RESTORE into the name
// was cut short by the verification instance's crash before msdb had any
// restore into it. The next cycle (a new activity, no heartbeat) and a
// resume of the same set recognise the RESTORING copy as their own and
// restore over it; so does DropVerifyDB.
func TestRestoreRecognisesItsCutFirstRestore(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, first := f.copiedSet()
	f.cutRestore(first)
	if p, err := activities.LastRestore(context.Background(), f.verifySQL(), "Sales_verify"); err != nil || p != nil {
		t.Fatalf("restore history after the cut restore: %+v %v, want none", p, err)
	}

	// The set itself, resumed by a new run.
	var res ResumeOutput
	f.must(f.acts.ResumeSet, ResumeInput{Database: "Sales", Sequence: first.Sequence, Servers: []string{"bak01", "bak02"}}, &res)
	if err := f.run(f.acts.Restore, first, nil); err != nil {
		t.Fatalf("resumed restore over its own cut copy: %v", err)
	}
	f.must(f.acts.CheckDB, first, nil)

	// The next cycle, over a copy cut short again.
	_, second := f.copiedSet()
	f.cutRestore(second)
	_, third := f.copiedSet()
	if err := f.run(f.acts.Restore, third, nil); err != nil {
		t.Fatalf("next cycle's restore over its own cut copy: %v", err)
	}
	f.must(f.acts.CheckDB, third, nil)

	// And a copy cut short is dropped by the cycle that cut it.
	_, fourth := f.copiedSet()
	f.cutRestore(fourth)
	f.must(f.acts.DropVerifyDB, activities.VerifyInput{Database: "Sales", Sequence: fourth.Sequence, Server: fourth.Server, OwnRestore: true}, nil)
	if st, err := activities.DatabaseState(context.Background(), f.verifySQL(), "Sales_verify"); err != nil || st != nil {
		t.Fatalf("after DropVerifyDB: %+v %v, want no database", st, err)
	}
}

// TestRestoreRefusesAForeignCutRestore: after backupcycle's own restore
// finished, a DBA's RESTORE (another login) into the name was cut short:
// the RESTORING database is not backupcycle's. The next cycle, a retry
// whose heartbeat says "restore started into Sales_verify", and
// DropVerifyDB with OwnRestore all leave it alone.
func TestRestoreRefusesAForeignCutRestore(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, first := f.copiedSet()
	f.must(f.acts.Restore, first, nil)
	f.foreignRestoring(first)
	_, second := f.copiedSet()
	f.refusedIntact("next cycle over a DBA's cut restore", f.acts.Restore, second)
	f.env.SetHeartbeatDetails(activities.RestoreHeartbeat{StepProgress: activities.StepProgress{Step: activities.StepRestore, Sequence: second.Sequence, Percent: 50},
		StartedInto: "Sales_verify"})
	f.refusedIntact("a retry whose heartbeat claims the RESTORING copy", f.acts.Restore, second)
	f.env.SetHeartbeatDetails(nil)
	f.refusedIntact("DropVerifyDB{OwnRestore} of a DBA's RESTORING database", f.acts.DropVerifyDB,
		activities.VerifyInput{Database: "Sales", Sequence: second.Sequence, Server: second.Server, OwnRestore: true})
	f.wantState("Sales_verify", "RESTORING")
}

// TestRestoreRefusesAForeignCutRestoreWithoutHistory: a DBA's RESTORE
// (another login) cut short into a free name, and a forged heartbeat
// claiming it: nothing is replaced or dropped.
func TestRestoreRefusesAForeignCutRestoreWithoutHistory(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, verify := f.copiedSet()
	f.foreignRestoring(verify)
	f.env.SetHeartbeatDetails(activities.RestoreHeartbeat{StepProgress: activities.StepProgress{Step: activities.StepRestore, Sequence: verify.Sequence, Percent: 50},
		StartedInto: "Sales_verify"})
	f.refusedIntact("a forged heartbeat over a DBA's cut restore", f.acts.Restore, verify)
	f.env.SetHeartbeatDetails(nil)
	f.refusedIntact("DropVerifyDB{OwnRestore} of a DBA's RESTORING database", f.acts.DropVerifyDB,
		activities.VerifyInput{Database: "Sales", Sequence: verify.Sequence, Server: verify.Server, OwnRestore: true})
}

// TestOwnCopyCreatedLate: the verification instance stamps the copy's
// create_date minutes after restore_date (a RESTORE that zeroes a large log
// before it creates the database). The copy is still backupcycle's: CHECKDB
// proves it, the next cycle replaces it, DropVerifyDB drops it.
func TestOwnCopyCreatedLate(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, first := f.copiedSet()
	f.verify.StampCreateLate(5 * time.Minute)
	f.must(f.acts.Restore, first, nil)
	f.must(f.acts.CheckDB, first, nil)
	f.must(f.acts.SanityChecks, first, nil)
	_, second := f.copiedSet()
	f.verify.StampCreateLate(5 * time.Minute)
	if err := f.run(f.acts.Restore, second, nil); err != nil {
		t.Fatalf("restore over its own copy created late: %v", err)
	}
	f.must(f.acts.CheckDB, second, nil)
	f.must(f.acts.DropVerifyDB, second, nil)
	if st, err := activities.DatabaseState(context.Background(), f.verifySQL(), "Sales_verify"); err != nil || st != nil {
		t.Fatalf("after DropVerifyDB: %+v %v, want no database", st, err)
	}
}

// TestDBARestoreOfABackupcycleSetIsNotOurs: a DBA recovered a production
// database from a backupcycle set, under the copy's name, with the same
// login: its restore names a backupcycle backup set, but backupcycle did
// not restore it. It is never replaced or dropped.
func TestDBARestoreOfABackupcycleSetIsNotOurs(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, first := f.copiedSet()
	moves := map[string]string{"Sales'data": `D:\restore\prod.mdf`, "Sales'data_2": `D:\restore\prod.ndf`, "Sales'data_log": `D:\restore\prod.ldf`}
	if err := f.verify.RestoreDatabase(context.Background(), sqlsim.RestoreSpec{Database: "Sales_verify", Stripes: f.stripes(first), Move: moves}); err != nil {
		t.Fatal(err)
	}
	p, err := activities.LastRestore(context.Background(), f.verifySQL(), "Sales_verify")
	if err != nil || p == nil {
		t.Fatalf("the DBA's restore: %+v %v", p, err)
	}
	if _, ours := tsql.ParseBackupSetName(p.BackupSetName); !ours {
		t.Fatalf("the DBA's restore: %+v, want one of a backupcycle set", p)
	}
	_, second := f.copiedSet()
	f.refusedIntact("restore over a DBA's restore of a backupcycle set", f.acts.Restore, second)
	f.refusedIntact("DropVerifyDB of a DBA's restore of a backupcycle set", f.acts.DropVerifyDB, first)
	f.refusedIntact("DropVerifyDB{OwnRestore} of a DBA's restore of a backupcycle set", f.acts.DropVerifyDB,
		activities.VerifyInput{Database: "Sales", Sequence: first.Sequence, Server: first.Server, OwnRestore: true})
	f.wantState("Sales_verify", "ONLINE")
}

// TestOwnCutRestoreAfterTheClockWentBack: the verification instance's
// clock goes back between two cycles (its time zone changed: the host
// moved, or a container was rebuilt on UTC; a fall-back to winter time does
// it by an hour), so the copy an earlier cycle restored, while the instance
// ran 13 hours ahead, records a later GETDATE() than the RESTORE the next
// cycle was cut in. The RESTORING copy is still the product's own: the
// cycle that cut it drops it, and the next restore replaces it.
func TestOwnCutRestoreAfterTheClockWentBack(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	auckland, err := time.LoadLocation("Pacific/Auckland")
	if err != nil {
		t.Fatal(err)
	}
	f.RestartVerify(func(c *sqlsim.Config) { c.TimeZone = auckland })
	_, first := f.copiedSet()
	f.must(f.acts.Restore, first, nil)
	f.must(f.acts.CheckDB, first, nil)
	f.RestartVerify(func(c *sqlsim.Config) { c.TimeZone = time.UTC })

	_, second := f.copiedSet()
	f.cutRestore(second)
	if err := f.run(f.acts.DropVerifyDB, activities.VerifyInput{Database: "Sales", Sequence: second.Sequence, Server: second.Server, OwnRestore: true}, nil); err != nil {
		t.Fatalf("drop of the copy its own RESTORE left RESTORING, the instance's clock behind the earlier copy's record: %v", err)
	}
	if st, err := activities.DatabaseState(context.Background(), f.verifySQL(), "Sales_verify"); err != nil || st != nil {
		t.Fatalf("after DropVerifyDB: %+v %v, want no database", st, err)
	}

	_, third := f.copiedSet()
	f.cutRestore(third)
	_, fourth := f.copiedSet()
	if err := f.run(f.acts.Restore, fourth, nil); err != nil {
		t.Fatalf("next cycle's restore over its own cut copy: %v", err)
	}
	f.must(f.acts.CheckDB, fourth, nil)
}

// fallBackAt is central European time whose daylight saving time ends at
// at: two hours ahead of UTC (CEST) before, one hour (CET) from then on,
// as its zone data (TZif, RFC 8536) would say for that night.
func fallBackAt(t *testing.T, at time.Time) *time.Location {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("TZif\x00")
	b.Write(make([]byte, 15))
	// isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
	for _, n := range []uint32{0, 0, 0, 1, 2, 9} {
		_ = binary.Write(&b, binary.BigEndian, n)
	}
	_ = binary.Write(&b, binary.BigEndian, int32(at.Unix()))
	b.WriteByte(1) // to CET
	for _, z := range []struct {
		off      int32
		dst, idx byte
	}{{2 * 3600, 1, 0}, {3600, 0, 5}} {
		_ = binary.Write(&b, binary.BigEndian, z.off)
		b.WriteByte(z.dst)
		b.WriteByte(z.idx)
	}
	b.WriteString("CEST\x00CET\x00")
	loc, err := time.LoadLocationFromTZData("Europe/Fallback", b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if _, off := at.Add(-time.Second).In(loc).Zone(); off != 2*3600 {
		t.Fatalf("before the fall-back the zone is %d s ahead of UTC", off)
	}
	if _, off := at.In(loc).Zone(); off != 3600 {
		t.Fatalf("after the fall-back the zone is %d s ahead of UTC", off)
	}
	return loc
}

// TestOwnCopyAcrossTheEndOfDaylightSavingTime: daylight saving time ends
// during a RESTORE. The instance's GETDATE() recorded before it reads CEST,
// and the RESTORE, which creates its database ten minutes after it starts
// (a large log zeroed first), stamps create_date on CET, before that
// GETDATE() as a wall clock. The copy is still the product's own: CHECKDB
// proves it, the next cycle replaces it, and DropVerifyDB drops it.
func TestOwnCopyAcrossTheEndOfDaylightSavingTime(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	f.RestartVerify(func(c *sqlsim.Config) { c.TimeZone = fallBackAt(t, time.Now().Add(5*time.Minute)) })
	_, first := f.copiedSet()
	f.verify.StampCreateLate(10 * time.Minute)
	f.must(f.acts.Restore, first, nil)
	v := f.load(first.Server, first.Sequence).VerifyCopy
	st, err := activities.DatabaseState(context.Background(), f.verifySQL(), "Sales_verify")
	if err != nil || st == nil || v == nil || !st.Created.Before(v.InstanceTime.Add(-time.Minute)) {
		t.Fatalf("the copy %+v, its record %+v, %v: want it created before the GETDATE() recorded for its RESTORE (the case is not built)", st, v, err)
	}
	f.must(f.acts.CheckDB, first, nil)
	_, second := f.copiedSet()
	if err := f.run(f.acts.Restore, second, nil); err != nil {
		t.Fatalf("next cycle's restore over its own copy restored across the end of daylight saving time: %v", err)
	}
	f.must(f.acts.CheckDB, second, nil)
	f.must(f.acts.DropVerifyDB, second, nil)
	if st, err := activities.DatabaseState(context.Background(), f.verifySQL(), "Sales_verify"); err != nil || st != nil {
		t.Fatalf("after DropVerifyDB: %+v %v, want no database", st, err)
	}
}

// After a verified set (Cleanup) a verification instance that takes the
// connection but never answers the login is given CleanupConnectTimeout,
// not the instance's connect_timeout, and is not retried: the copy is
// left to the next cycle, which the error says. Without Cleanup (a failed
// restore, a cancel) the same failure stays retryable.
func TestDropVerifyDBCleanupLoginTimeout(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, verify := f.copiedSet()
	f.must(f.acts.Restore, verify, nil)

	srv, ok := f.cfg.BackupServer(verify.Server)
	if !ok {
		t.Fatalf("no backup server %s", verify.Server)
	}
	inst, ok := f.cfg.SQLInstance(srv.VerifyInstance)
	if !ok {
		t.Fatalf("no instance %s", srv.VerifyInstance)
	}
	inst.Address, inst.ConnectTimeout = sitetest.SilentServer(t), time.Minute

	verify.Cleanup = true
	began := time.Now()
	err := f.run(f.acts.DropVerifyDB, verify, nil)
	took := time.Since(began)
	t.Logf("drop against a silent instance: %s: %v", took.Round(time.Millisecond), err)
	if took > CleanupConnectTimeout+5*time.Second {
		t.Errorf("the drop took %s, want about CleanupConnectTimeout (%s)", took.Round(time.Millisecond), CleanupConnectTimeout)
	}
	if activities.ErrorType(err) != activities.ErrSQLHostUnreachable || !appErrorOf(t, err).NonRetryable() {
		t.Fatalf("drop: %v, want non-retryable SQLHostUnreachable", err)
	}
	if want := "the copy Sales_verify is left on " + srv.VerifyInstance + ": the next cycle replaces it and drops it"; !strings.Contains(err.Error(), want) {
		t.Errorf("drop: %v, want %q", err, want)
	}

	verify.Cleanup = false
	inst.ConnectTimeout = time.Second
	err = f.run(f.acts.DropVerifyDB, verify, nil)
	if activities.ErrorType(err) != activities.ErrSQLHostUnreachable || appErrorOf(t, err).NonRetryable() {
		t.Errorf("drop without Cleanup: %v, want retryable SQLHostUnreachable", err)
	}
}

// With verify_name "{db}_v{seq}" every set's copy has its own name: a copy
// a verified set's cleanup could not drop (the instance did not answer its
// login) is never restored into again. The next verified set's cleanup
// drops it, and every other copy of an earlier set its manifest shows the
// product restored; a database a DBA created under such a name since is
// not the product's, and stays.
func TestDropVerifyDBDropsCopiesEarlierCleanupsLeft(t *testing.T) {
	f := newSQLFixture(t, "Sales", "    verify_name: \"{db}_v{seq}\"\n")
	exists := func(name string) bool {
		t.Helper()
		st, err := activities.DatabaseState(context.Background(), f.verifySQL(), name)
		if err != nil {
			t.Fatal(err)
		}
		return st != nil
	}
	// verified restores a set on the verification instance and runs the
	// cleanup's drop; silent: the instance does not answer that login.
	verified := func(silent bool) (string, error) {
		t.Helper()
		seq, verify := f.copiedSet()
		f.must(f.acts.Restore, verify, nil)
		srv, _ := f.cfg.BackupServer(verify.Server)
		inst, _ := f.cfg.SQLInstance(srv.VerifyInstance)
		if silent {
			addr := inst.Address
			inst.Address = sitetest.SilentServer(t)
			defer func() { inst.Address = addr }()
		}
		verify.Cleanup = true
		return fmt.Sprintf("Sales_v%08d", seq), f.run(f.acts.DropVerifyDB, verify, nil) // {seq}: eight digits
	}
	left1, err := verified(true)
	if activities.ErrorType(err) != activities.ErrSQLHostUnreachable || !exists(left1) {
		t.Fatalf("cleanup against a silent instance: %v (%s there: %v), want SQLHostUnreachable and the copy left", err, left1, exists(left1))
	}
	left2, err := verified(true)
	if activities.ErrorType(err) != activities.ErrSQLHostUnreachable || !exists(left2) {
		t.Fatalf("cleanup against a silent instance: %v, want SQLHostUnreachable and the copy left", err)
	}
	// A DBA drops the second copy and creates a database of that name.
	sitetest.ExecIn(t, f.verify, "master", "DROP DATABASE ["+left2+"]")
	sitetest.ExecIn(t, f.verify, "master", "CREATE DATABASE ["+left2+"]")

	if want := "the copy " + left2 + " is left on verify01: the next verified set's cleanup drops it"; !strings.Contains(err.Error(), want) {
		t.Errorf("cleanup: %v, want %q", err, want)
	}
	logs := f.observe()
	name3, err := verified(false)
	if err != nil {
		t.Fatalf("cleanup of %s: %v", name3, err)
	}
	if exists(name3) {
		t.Errorf("%s (this set's copy) is still there", name3)
	}
	if exists(left1) {
		t.Errorf("%s, the copy an earlier cleanup left, is still on the verification instance after the next verified set's cleanup", left1)
	}
	if !exists(left2) {
		t.Errorf("%s, a database the product did not restore, was dropped", left2)
	}
	if n := logs.FilterMessage("copy an earlier cleanup left: not dropped").FilterField(zap.String("copy", left2)).Len(); n != 1 {
		t.Errorf("%d warnings that %s was not dropped, want 1", n, left2)
	}
}
