package cycle

import (
	"context"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// TestVerifyWithoutAlterAnyDatabase: the verification login of the minimal
// grants (CREATE ANY DATABASE, VIEW SERVER PERFORMANCE STATE, SELECT in
// msdb; no ALTER ANY DATABASE) restores the copy, checks it, restores it
// again over itself (REPLACE, as its owner) and drops it: what `starter
// preflight` no longer asks ALTER ANY DATABASE for.
func TestVerifyWithoutAlterAnyDatabase(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	seq, verify := f.copiedSet()
	f.loginAs("verify01", f.verify, sqlsim.Login{Name: "bk_ver", Password: sqlPassword,
		Server:    []string{tsql.PermCreateAnyDatabase, tsql.PermViewServerPerformanceState},
		Databases: map[string][]string{"msdb": {tsql.PermSelect}}})
	f.must(f.acts.Restore, verify, nil)
	f.must(f.acts.CheckDB, verify, nil)
	f.must(f.acts.SanityChecks, verify, nil)
	f.idle("Sales_verify")
	f.must(f.acts.Restore, verify, nil) // REPLACE over its own copy
	if got := statements(f.verify, "RESTORE DATABASE"); len(got) != 2 || got[1].Outcome != "ok" {
		t.Fatalf("RESTORE statements %+v; want two, ok", got)
	}
	f.must(f.acts.DropVerifyDB, activities.VerifyInput{Database: "Sales", Sequence: seq, Server: verify.Server, OwnRestore: true}, nil)
	if got := statements(f.verify, "DROP DATABASE"); len(got) != 1 || got[0].Outcome != "ok" {
		t.Fatalf("DROP DATABASE statements %+v; want one, ok", got)
	}
}

// idle waits until no session is in database db on the verification
// instance. A connection the client closed ends its session on the server
// a moment later, on SQL Server as on the emulator, and RESTORE ... WITH
// REPLACE needs the database to itself (3101, retried by the activity's
// policy; a direct call has no retry).
func (f *sqlFixture) idle(db string) {
	f.t.Helper()
	conn := f.verifySQL()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n, _, err := conn.QueryValue(context.Background(), "sessions", "SELECT COUNT(*) FROM sys.dm_exec_sessions WHERE database_id = DB_ID(@p1)", db)
		if err != nil {
			f.t.Fatal(err)
		}
		if n == int64(0) {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%v sessions still in %s after 10 s", n, db)
		}
	}
}
