package mssql

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// A severity 20+ error ends the session right after its message: Run
// reports the errors SQL Server sent before the connection went, not only
// "connection lost", and classifies by them.
func TestRunKeepsErrorsBeforeAFatalDisconnect(t *testing.T) {
	s := newProofSite(t)
	if err := s.src.CreateDatabase(sqlsim.DatabaseSpec{Name: "Sales", Size: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	s.src.SetThrottle(4 << 20)
	if err := s.src.FatalErrorAt("BACKUP", 30, 823, 24); err != nil {
		t.Fatal(err)
	}
	layout, err := tsql.Layout([]string{`\\bak01\backup`}, tsql.NamesOf("sql01", "Sales"), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := tsql.BackupDatabase(tsql.BackupOptions{Database: "Sales", Disks: tsql.Paths(layout), Checksum: true, Init: true,
		Format: true, Stats: 10})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.srcDB.Run(testCtx(t), "BACKUP DATABASE", stmt, nil)
	var f *Failure
	if !errors.As(err, &f) || !slices.Contains(f.Numbers(), 823) || errors.Is(err, ErrUnreachable) {
		t.Fatalf("BACKUP cut by a severity 24 error: %v; want a failure carrying error 823, classified by it", err)
	}
	if res.Percent < 10 {
		t.Errorf("progress before the fatal error: %d %%, want the messages received before it kept", res.Percent)
	}
}

// DATABASEPROPERTYEX 'LastGoodCheckDbTime' reads as a time: 1900-01-01
// before any CHECKDB, the end of the last clean one after.
func TestLastGoodCheckDBReadsAsTime(t *testing.T) {
	s := newProofSite(t)
	if err := s.src.CreateDatabase(sqlsim.DatabaseSpec{Name: "Sales", Size: 4 << 20}); err != nil {
		t.Fatal(err)
	}
	q, args, err := tsql.LastGoodCheckDB("Sales")
	if err != nil {
		t.Fatal(err)
	}
	v, ok, err := s.srcDB.QueryValue(testCtx(t), "read", q, args...)
	if tm, isTime := v.(time.Time); err != nil || !ok || !isTime || tm.Year() != 1900 {
		t.Fatalf("before any CHECKDB: %v (%T), %v; want 1900-01-01", v, v, err)
	}
	start := time.Now().UTC().Add(-time.Second)
	stmt, _ := tsql.CheckDB("Sales")
	if _, err := s.srcDB.Run(testCtx(t), "DBCC CHECKDB", stmt, nil); err != nil {
		t.Fatal(err)
	}
	v, _, err = s.srcDB.QueryValue(testCtx(t), "read", q, args...)
	if tm, isTime := v.(time.Time); err != nil || !isTime || tm.Before(start) {
		t.Fatalf("after a clean CHECKDB: %v, %v; want a time after %s", v, err, start)
	}
}

// A database whose name has a character outside the BMP is entered with
// USE after the login: the session is in it, also after a session reset.
func TestDatabaseOutsideTheBMP(t *testing.T) {
	s := newProofSite(t)
	name := "Sales 🧾 'q'"
	if err := s.verify.CreateDatabase(sqlsim.DatabaseSpec{Name: name, Size: 2 << 20}); err != nil {
		t.Fatal(err)
	}
	db, err := Open(testCtx(t), Target{Instance: "verify01", Address: s.verify.Addr(), User: "sa", Password: "pw", Database: name,
		Encrypt: "disable"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for i := range 2 { // the second query runs after a session reset
		v, _, err := db.QueryValue(testCtx(t), "DB_NAME", "SELECT DB_NAME()")
		if err != nil || v != name {
			t.Fatalf("query %d runs in %v (%v), want %q", i+1, v, err, name)
		}
	}
}
