package sqlsim

import (
	"fmt"
	"testing"
	"time"
)

// numeric(25,0) is exact: an LSN passed as a string and CAST to it
// compares with msdb's LSN columns digit for digit, as the log chain's
// queries do ("decimal and numeric (Transact-SQL)": fixed precision and
// scale; "Recover to a Log Sequence Number": LSNs are numeric(25,0)).
func TestCastToNumericIsExact(t *testing.T) {
	e := newEnv(t)
	logDB(t, e, "Sales", 2<<20, 5000)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full.bak' WITH INIT`)
	commit(t, e, "Sales", 2)
	mustRun(t, e.db, `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\l1.trn' WITH INIT`)
	rows := backupRows(t, e.db, "Sales")
	l := rows[len(rows)-1]
	for _, c := range []struct {
		op, lsn string
		want    int
	}{{">", l.first, 1}, {">", l.last, 0}, {"=", l.last, 1}, {"<", l.last, 0}} {
		q := fmt.Sprintf(`SELECT backup_set_id FROM msdb.dbo.backupset WHERE type = 'L' AND last_lsn %s CAST(N'%s' AS numeric(25,0))`, c.op, c.lsn)
		if r := mustRun(t, e.db, q); len(r.rows) != c.want {
			t.Errorf("last_lsn %s %s (last_lsn %s): %d rows, want %d", c.op, c.lsn, l.last, len(r.rows), c.want)
		}
	}
}

// backupset.time_zone is the server's offset from UTC when the backup
// started, in 15-minute units (backupset (Transact-SQL)).
func TestBackupsetTimeZone(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.TimeZone = time.FixedZone("UTC-05:30", -(5*60+30)*60) })
	logDB(t, e, "Sales", 2<<20, 5000)
	mustRun(t, e.db, `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\full.bak' WITH INIT`)
	r := mustRun(t, e.db, `SELECT time_zone FROM msdb.dbo.backupset WHERE database_name = N'Sales'`)
	if len(r.rows) != 1 || asInt(r.rows[0][0]) != -22 {
		t.Fatalf("time_zone %v, want -22", r.rows)
	}
}
