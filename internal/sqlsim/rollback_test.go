package sqlsim

import (
	"context"
	"strings"
	"testing"
)

// sequenceSetup creates the product's counter table in db at Number = 0.
func sequenceSetup(t *testing.T, e *testEnv, db string) {
	t.Helper()
	mustRun(t, e.db, "EXEC "+qi(db)+".sys.sp_executesql N'CREATE SCHEMA [DBBackup]'")
	mustRun(t, e.db, "CREATE TABLE "+qi(db)+".[DBBackup].[Sequence] (Number int NOT NULL, ID int NOT NULL, CONSTRAINT PK_Seq PRIMARY KEY CLUSTERED (ID ASC), CONSTRAINT CK_Seq CHECK (ID = 1))")
	mustRun(t, e.db, "INSERT INTO "+qi(db)+".[DBBackup].[Sequence] (Number, ID) VALUES (0, 1)")
}

func allocate(t *testing.T, e *testEnv, db string, n int) int64 {
	t.Helper()
	var last int64
	for range n {
		r := mustRun(t, e.db, "UPDATE "+qi(db)+".[DBBackup].[Sequence] SET Number = Number + 1 OUTPUT inserted.Number WHERE ID = 1")
		last = asInt(r.rows[0][0])
	}
	return last
}

func sequenceNumber(t *testing.T, e *testEnv, db string) int64 {
	t.Helper()
	return asInt(mustRun(t, e.db, "SELECT Number FROM "+qi(db)+".[DBBackup].[Sequence] WHERE ID = 1").rows[0][0])
}

// TestSequenceRollback: the counter table travels inside the backup, so
// restoring the source database over itself from an older backup (WITH
// REPLACE, on the source instance) brings Number back, and the next
// allocation hands out a number that was used before — the rollback the
// product must survive (a sequence rollback). Plain T-SQL over TDS and
// Instance.RestoreDatabase do the same.
func TestSequenceRollback(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20, DataFiles: 2})
	sequenceSetup(t, e, "Sales")
	if n := allocate(t, e, "Sales", 5); n != 5 {
		t.Fatalf("allocated up to %d", n)
	}
	old := stripeNames("Sales", 2)
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+disks(old)+" WITH CHECKSUM, INIT, FORMAT, NAME = N'backupcycle seq 00000005'")
	if n := allocate(t, e, "Sales", 3); n != 8 {
		t.Fatalf("allocated up to %d", n)
	}
	files, _ := e.in.DatabaseFiles("Sales")

	// Over TDS, as a DBA would: the files go back where the backup says
	// (the database's own), so no MOVE.
	mustRun(t, e.db, "RESTORE DATABASE [Sales] FROM "+disks(old)+" WITH REPLACE")
	if n := sequenceNumber(t, e, "Sales"); n != 5 {
		t.Fatalf("Number after restoring the backup taken at 5: %d", n)
	}
	if n := allocate(t, e, "Sales", 1); n != 6 {
		t.Fatalf("next number after the rollback: %d, want 6 (reused)", n)
	}
	if after, _ := e.in.DatabaseFiles("Sales"); strings.Join(after, "|") != strings.Join(files, "|") {
		t.Fatalf("restored onto other files: %v, was %v", after, files)
	}
	mustRun(t, e.db, "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS")
	p, _ := proof(t, e.db, "Sales")
	if p.id != 1 || p.name.String != "backupcycle seq 00000005" {
		t.Fatalf("restore history of the rollback: %+v", p)
	}

	// Through the Go helper; without REPLACE SQL Server refuses (3159: the
	// tail of the log of an online database in FULL recovery).
	allocate(t, e, "Sales", 2) // 8
	ctx := testCtx(t)
	err := e.in.RestoreDatabase(ctx, RestoreSpec{Database: "Sales", Stripes: old})
	if err == nil || !strings.Contains(err.Error(), "tail of the log") {
		t.Fatalf("RestoreDatabase without Replace: %v", err)
	}
	if n := sequenceNumber(t, e, "Sales"); n != 8 {
		t.Fatalf("a refused restore changed Number to %d", n)
	}
	// Another session inside the database blocks it (3101) unless the
	// others are rolled back first.
	inside := e.open(t, "Sales")
	inside.SetMaxOpenConns(1)
	if err := inside.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.in.RestoreDatabase(ctx, RestoreSpec{Database: "Sales", Stripes: old, Replace: true}); err == nil || !strings.Contains(err.Error(), "Exclusive access could not be obtained") {
		t.Fatalf("RestoreDatabase while another session is in the database: %v", err)
	}
	if err := e.in.RestoreDatabase(ctx, RestoreSpec{Database: "Sales", Stripes: old, Replace: true, RollbackOthers: true}); err != nil {
		t.Fatal(err)
	}
	if n := sequenceNumber(t, e, "Sales"); n != 5 {
		t.Fatalf("Number after RestoreDatabase: %d", n)
	}
	if r := mustRun(t, e.db, "SELECT user_access_desc FROM sys.databases WHERE name = N'Sales'"); r.rows[0][0] != "MULTI_USER" {
		t.Fatalf("after the restore the database is %v", r.rows)
	}
	// Local paths work too, and a MOVE puts a copy elsewhere.
	local := []string{localStripe(e, old[0]), localStripe(e, old[1])}
	moves := map[string]string{}
	for _, row := range mustRun(t, e.db, "RESTORE FILELISTONLY FROM "+disks(old)).rows {
		moves[row[0].(string)] = `R:\restore\` + row[0].(string) + ".copy"
	}
	if err := e.in.RestoreDatabase(ctx, RestoreSpec{Database: "Sales_copy", Stripes: local, Move: moves}); err != nil {
		t.Fatal(err)
	}
	if n := sequenceNumber(t, e, "Sales_copy"); n != 5 {
		t.Fatalf("copy's Number: %d", n)
	}
	if err := e.in.RestoreDatabase(ctx, RestoreSpec{Database: "Sales", Stripes: old[:1], Replace: true}); err == nil || !strings.Contains(err.Error(), "media families") {
		t.Fatalf("RestoreDatabase with a stripe missing: %v", err)
	}
	if err := e.in.RestoreDatabase(context.Background(), RestoreSpec{Database: "Sales"}); err == nil {
		t.Fatal("RestoreDatabase without stripes succeeded")
	}
	restores := 0
	for _, s := range statementsOf(e.in, "RESTORE DATABASE") {
		if s.Outcome == "ok" {
			restores++
		}
	}
	if restores != 3 {
		t.Fatalf("statement log has %d successful restores, want 3", restores)
	}
}
