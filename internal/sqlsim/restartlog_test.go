package sqlsim

import "testing"

// A commit is in the log once it returns, and the log goes on after a
// restart where it ended ("Each new log record is written to the logical
// end of the log with an LSN that is higher than the LSN of the record
// before it"; "log records are written to disk when the transactions are
// committed", "SQL Server transaction log architecture and management
// guide",
// https://learn.microsoft.com/sql/relational-databases/sql-server-transaction-log-architecture-and-management-guide):
// whether the instance stopped or crashed, the next log backup holds every
// row committed since the previous one, those of before the restart
// included, and a copy restored from the full and the logs holds every
// row of the source.
func TestCommitsBeforeARestartAreInTheNextLogBackup(t *testing.T) {
	for _, how := range []string{"stop", "crash"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			logDB(t, e, "Sales", 2<<20, 5000)
			mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full.bak' WITH INIT`)
			commitMany(t, e, "Sales", 4)
			mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\l1.trn' WITH INIT`)
			// Committed after the log backup, before the restart.
			commitMany(t, e, "Sales", 6)
			if how == "stop" {
				if err := e.in.Stop(); err != nil {
					t.Fatal(err)
				}
				if err := e.in.Start(); err != nil {
					t.Fatal(err)
				}
			} else if err := e.in.Restart(); err != nil {
				t.Fatal(err)
			}
			db := e.open(t, "master")
			commitMany(t, e, "Sales", 2)
			mustRun(t, db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\l2.trn' WITH INIT`)
			all := commitRows(t, db, "Sales")
			mustRun(t, db, `RESTORE DATABASE [V] FROM DISK = N'\\bak01\backup\full.bak' WITH NORECOVERY, `+restoreMoves("v"))
			mustRun(t, db, `RESTORE LOG [V] FROM DISK = N'\\bak01\backup\l1.trn' WITH NORECOVERY`)
			mustRun(t, db, `RESTORE LOG [V] FROM DISK = N'\\bak01\backup\l2.trn' WITH RECOVERY`)
			sameRows(t, "the copy restored from the full and both logs", commitRows(t, db, "V"), all)
		})
	}
}
