package sqlsim

import (
	"fmt"
	"testing"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// TestProductStatements runs one cycle with the statements exactly as the
// product builds them (internal/tsql), for a database with a hostile name:
// a contract test between the emulator and the T-SQL builders.
func TestProductStatements(t *testing.T) {
	e := newEnv(t)
	db := "Sales]; DROP DATABASE x--"
	e.create(t, DatabaseSpec{Name: db, Size: 8 << 20, DataFiles: 2, LogicalName: "Sales'data"})
	must := func(s string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	q, args, err := tsql.DatabaseExists(db)
	if err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, e.db, q, args...); len(r.rows) != 1 {
		t.Fatalf("DatabaseExists: %v", r.rows)
	}
	setup, err := tsql.SequenceSetup(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(setup, setup...) {
		mustRun(t, e.db, s)
	}
	next := must(tsql.SequenceNext(db))
	r := mustRun(t, e.db, next)
	seq := asInt(r.rows[0][0])
	if seq != 1 {
		t.Fatalf("first sequence %v", r.rows)
	}
	stripes, err := tsql.Layout([]string{`\\bak01\backup`}, tsql.NamesOf(e.in.cfg.Name, db), seq, 4)
	if err != nil {
		t.Fatal(err)
	}
	paths := tsql.Paths(stripes)
	yes := true
	backup := must(tsql.BackupDatabase(tsql.BackupOptions{Database: db, Disks: paths, Checksum: true, Init: true, Format: true,
		Compression: &yes, Stats: 10, BufferCount: 8, MaxTransferSize: 1 << 20, BlockSize: 65536, Name: tsql.BackupSetName(seq),
		Description: "it's a test"}))
	r = mustRun(t, e.db, backup)
	if r.infos[len(r.infos)-1].Number != 3014 {
		t.Fatalf("backup messages %v", r.infoNums())
	}
	r = mustRun(t, e.db, must(tsql.RestoreHeaderOnly(paths)))
	for i, c := range r.cols {
		if c == "BackupName" && r.rows[0][i] != tsql.BackupSetName(seq) {
			t.Fatalf("BackupName %v", r.rows[0][i])
		}
	}
	mustRun(t, e.db, must(tsql.RestoreVerifyOnly(paths, true)))
	r = mustRun(t, e.db, must(tsql.RestoreFileListOnly(paths)))
	var rows []tsql.FileListRow
	for _, row := range r.rows {
		rows = append(rows, tsql.FileListRow{LogicalName: row[0].(string), PhysicalName: row[1].(string), Type: row[2].(string), FileID: asInt(row[6])})
	}
	verify := tsql.VerifyDatabaseName(db)
	moves, err := tsql.Moves(verify, rows, `R:\restore`, `R:\restore`)
	if err != nil {
		t.Fatal(err)
	}
	restore := must(tsql.RestoreDatabase(tsql.RestoreOptions{Database: verify, Disks: paths, Moves: moves, Checksum: true, Replace: true, Stats: 10}))
	for round := 0; round < 2; round++ { // a retried restore replaces the copy
		mustRun(t, e.db, restore)
	}
	q, args, err = tsql.LastRestore(verify)
	if err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, e.db, q, args...); len(r.rows) != 1 || asInt(r.rows[0][0]) != 2 {
		t.Fatalf("LastRestore: %v", r.rows)
	}
	if r := mustRun(t, e.db, must(tsql.CheckDB(verify))); len(r.infos)+len(r.errs) != 0 {
		t.Fatalf("CHECKDB: %v %v", r.infos, r.errs)
	}
	for _, s := range []tsql.Sanity{
		{Kind: tsql.SanityRowCount, Table: "Orders"},
		{Kind: tsql.SanityMax, Table: "Orders", Column: "OrderDate"},
		{Kind: tsql.SanityRowCount, Schema: "DBBackup", Table: "Sequence"},
	} {
		src := mustRun(t, e.db, must(tsql.SanityStatement(db, s))).rows[0][0]
		cp := mustRun(t, e.db, must(tsql.SanityStatement(verify, s))).rows[0][0]
		if fmt.Sprint(src) != fmt.Sprint(cp) || src == nil {
			t.Fatalf("sanity %+v: source %v, copy %v", s, src, cp)
		}
	}
	// A configured query runs after USE [copy] on one pinned connection
	// (*sql.Conn): a pooled *sql.DB resets the connection, and with it the
	// database, before every reuse, as SQL Server's sp_reset_connection does.
	ctx := testCtx(t)
	conn, err := e.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, must(tsql.UseDatabase(verify))); err != nil {
		t.Fatal(err)
	}
	var one int64
	if err := conn.QueryRowContext(ctx, "SELECT 1 WHERE EXISTS (SELECT 1 FROM DBBackup.Sequence WHERE Number >= 1)").Scan(&one); err != nil || one != 1 {
		t.Fatalf("configured sanity query: %d, %v", one, err)
	}
	conn.Close()
	q, args, err = tsql.InFlightRequests(db)
	if err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, e.db, q, args...); len(r.rows) != 0 {
		t.Fatalf("nothing runs, yet InFlightRequests found %v", r.rows)
	}
	drop := must(tsql.DropDatabase(verify))
	mustRun(t, e.db, drop)
	mustRun(t, e.db, drop)
	if r := mustRun(t, e.db, "SELECT DB_ID(@p1)", verify); r.rows[0][0] != nil {
		t.Fatal("verification copy not dropped")
	}
}
