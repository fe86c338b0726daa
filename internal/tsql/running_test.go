package tsql

import (
	"reflect"
	"strings"
	"testing"
)

// The set-wide markers are a prefix of the statement the cycle sends, for
// any stripe count, and of no other set's or database's.
func TestSetMarkersPrefixEveryStripeCount(t *testing.T) {
	paths := []string{`\\bak01\backup`, `\\bak01-nic2\backup`}
	db := "Sa'les]"
	bm, err := SetBackupMarker(paths, NamesOf("sql01", db), 12)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := SetRestoreMarker(db+"_verify", paths, NamesOf("sql01", db), 12)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 7, 64} {
		layout, err := Layout(paths, NamesOf("sql01", db), 12, n)
		if err != nil {
			t.Fatal(err)
		}
		b, err := BackupDatabase(BackupOptions{Database: db, Disks: Paths(layout), Checksum: true, Init: true, Format: true})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(b, bm) {
			t.Errorf("%d stripes: BACKUP %q does not start with %q", n, b, bm)
		}
		r, err := RestoreDatabase(RestoreOptions{Database: db + "_verify", Disks: Paths(layout), Checksum: true, Replace: true})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(r, rm) {
			t.Errorf("%d stripes: RESTORE %q does not start with %q", n, r, rm)
		}
	}
	for _, other := range []int64{1, 120, 13} {
		layout, _ := Layout(paths, NamesOf("sql01", db), other, 2)
		b, _ := BackupDatabase(BackupOptions{Database: db, Disks: Paths(layout), Init: true})
		if strings.HasPrefix(b, bm) {
			t.Errorf("set %d's BACKUP %q matches set 12's marker", other, b)
		}
	}
}

// The running-statement lookup matches the command as a LIKE pattern (a
// CHECKDB reports each of its phases) and returns each session's original
// login beside the querying session's, so a statement of another login is
// never taken for this product's.
func TestRunningStatements(t *testing.T) {
	q, args, err := RunningStatements(CommandBackupDatabase, CommandCheckDB)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(r.command LIKE @p1 OR r.command LIKE @p2)", "CROSS APPLY sys.dm_exec_sql_text(r.sql_handle) t",
		"JOIN sys.dm_exec_sessions s ON s.session_id = r.session_id", "s.original_login_name AS login_name",
		"ORIGINAL_LOGIN() AS own_login", "r.session_id <> @@SPID"} {
		if !strings.Contains(q, want) {
			t.Errorf("query %q lacks %q", q, want)
		}
	}
	if !reflect.DeepEqual(args, []any{"BACKUP DATABASE", "DBCC %"}) {
		t.Errorf("args %v", args)
	}
	if _, _, err := RunningStatements(""); err == nil {
		t.Error("an empty command accepted")
	}
	q, args, err = LastGoodCheckDB("Sales_verify")
	if err != nil || q != "SELECT DATABASEPROPERTYEX(@p1, 'LastGoodCheckDbTime') AS last_good, GETDATE() AS server_now" ||
		!reflect.DeepEqual(args, []any{"Sales_verify"}) {
		t.Errorf("LastGoodCheckDB = %q, %v, %v", q, args, err)
	}
}
