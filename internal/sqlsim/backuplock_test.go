package sqlsim

import (
	"context"
	"errors"
	"testing"
	"time"

	mssql "github.com/microsoft/go-mssqldb"
)

// A second BACKUP of a database waits while the first runs (wait_type
// LCK_M_U in sys.dm_exec_requests), then runs; a backup of another
// database does not wait; files held by the first still fail at once.
func TestOneDataBackupOfADatabaseAtATime(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20})
	e.create(t, DatabaseSpec{Name: "Other", Size: 1 << 20})
	e.in.SetThrottle(8 << 20) // about a second
	first := make(chan error, 1)
	go func() {
		_, err := e.db.Exec(`BACKUP DATABASE [Sales] TO DISK = '\\bak01\backup\first.bak' WITH INIT, FORMAT, COPY_ONLY`)
		first <- err
	}()
	waitFor(t, func() bool {
		for _, r := range e.in.Statements() {
			if r.Kind == "BACKUP DATABASE" && r.Outcome == "running" {
				return true
			}
		}
		return false
	})
	second := e.open(t, "master")
	done := make(chan error, 1)
	go func() {
		_, err := second.Exec(`BACKUP DATABASE [Sales] TO DISK = '\\bak01\backup\second.bak' WITH INIT, FORMAT, COPY_ONLY`)
		done <- err
	}()
	waitFor(t, func() bool {
		var n int
		_ = e.open(t, "master").QueryRow(`SELECT COUNT(*) FROM sys.dm_exec_requests WHERE command = 'BACKUP DATABASE' AND wait_type = 'LCK_M_U'`).Scan(&n)
		return n == 1
	})
	// Another database is not held up.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.open(t, "master").ExecContext(ctx, `BACKUP DATABASE [Other] TO DISK = '\\bak01\backup\other.bak' WITH INIT, FORMAT, COPY_ONLY`); err != nil {
		t.Fatalf("a backup of another database: %v", err)
	}
	// The first's files are still refused at once.
	_, err := e.open(t, "master").Exec(`BACKUP DATABASE [Sales] TO DISK = '\\bak01\backup\first.bak' WITH INIT, FORMAT, COPY_ONLY`)
	var me mssql.Error
	if !errors.As(err, &me) || len(me.All) == 0 || me.All[0].Number != 3201 {
		t.Errorf("a BACKUP onto the running one's file: %v, want 3201 at once", err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the waiting backup: %v", err)
	}
	var st []StatementRecord
	for _, r := range e.in.Statements() {
		if r.Kind == "BACKUP DATABASE" && r.Database == "Sales" && r.Outcome == "ok" {
			st = append(st, r)
		}
	}
	if len(st) != 2 || st[1].End.Before(st[0].End) {
		t.Errorf("Sales backups %+v: the second should end after the first", st)
	}
}
