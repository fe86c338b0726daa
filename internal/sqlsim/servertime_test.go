package sqlsim

import (
	"testing"
	"time"
)

// TestServerLocalDatesKeepTheZoneTheyWereWrittenIn: SQL Server stores
// datetime values, not instants. A backup's media header and the msdb
// history rows keep the wall clock of the moment they were written, and a
// database's create_date the one of its creation, when the server's zone
// changes later (DST, a VM moved to another region): RESTORE HEADERONLY of
// an older backup still reports its old wall clock, while a new backup
// reports the new one.
func TestServerLocalDatesKeepTheZoneTheyWereWrittenIn(t *testing.T) {
	east, west := time.FixedZone("UTC+2", 2*3600), time.FixedZone("UTC-5", -5*3600)
	e := newEnv(t, func(c *Config) { c.TimeZone = east })
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	type window struct {
		zone          *time.Location
		before, after time.Time
	}
	// in reports whether a datetime the driver decoded (labelled UTC) is
	// the wall clock of w's zone between its two instants.
	in := func(got time.Time, w window) bool {
		wall := func(t time.Time) time.Time {
			l := t.In(w.zone)
			return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
		}
		return !got.Before(wall(w.before).Add(-time.Second)) && !got.After(wall(w.after).Add(time.Second))
	}
	sets := map[string]string{}
	windows := map[string]window{}
	step := func(name string, zone *time.Location) {
		from := disks([]string{`\\bak01\backup\` + name + `.bak`})
		sets[name] = from
		w := window{zone: zone, before: time.Now()}
		mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+from+" WITH INIT, FORMAT, NAME = N'"+name+"'")
		mustRun(t, e.db, "RESTORE DATABASE ["+name+"] FROM "+from+" WITH "+movesFor(t, e, from, name)+", REPLACE")
		w.after = time.Now()
		windows[name] = w
	}
	step("east", east)
	// The server restarts in another zone, on the same data.
	e.restartWith(t, func(c *Config) { c.TimeZone = west })
	step("west", west)

	for name, w := range windows {
		h := mustRun(t, e.db, "RESTORE HEADERONLY FROM "+sets[name])
		for _, c := range []string{"BackupStartDate", "BackupFinishDate"} {
			if got := h.rows[0][colIndex(t, h, c)].(time.Time); !in(got, w) {
				t.Errorf("HEADERONLY %s of the %s backup = %v, want the wall clock of %v when it was taken", c, name, got, w.zone)
			}
		}
		r := mustRun(t, e.db, "SELECT backup_start_date, backup_finish_date FROM msdb.dbo.backupset WHERE name = @p1", name)
		for i := range 2 {
			if got := r.rows[0][i].(time.Time); !in(got, w) {
				t.Errorf("msdb.dbo.backupset date %d of the %s backup = %v, want the wall clock of %v", i, name, got, w.zone)
			}
		}
		r = mustRun(t, e.db, "SELECT restore_date FROM msdb.dbo.restorehistory WHERE destination_database_name = @p1", name)
		if got := r.rows[0][0].(time.Time); !in(got, w) {
			t.Errorf("restorehistory.restore_date of %s = %v, want the wall clock of %v", name, got, w.zone)
		}
		r = mustRun(t, e.db, "SELECT create_date FROM sys.databases WHERE name = @p1", name)
		if got := r.rows[0][0].(time.Time); !in(got, w) {
			t.Errorf("sys.databases.create_date of %s = %v, want the wall clock of %v", name, got, w.zone)
		}
	}
	// datetime values compare as wall clocks: the east backup, taken first,
	// sorts last by its finish date, as on SQL Server.
	r := mustRun(t, e.db, "SELECT name FROM msdb.dbo.backupset ORDER BY backup_finish_date DESC")
	if len(r.rows) != 2 || r.rows[0][0] != "east" {
		t.Errorf("backupset by backup_finish_date DESC: %v, want east (the later wall clock) first", r.rows)
	}
	// GETDATE is the clock now, in the new zone.
	r = mustRun(t, e.db, "SELECT GETDATE()")
	if got := r.rows[0][0].(time.Time); !in(got, window{zone: west, before: windows["west"].after, after: time.Now()}) {
		t.Errorf("GETDATE() = %v, want the wall clock of %v", got, west)
	}
}

func colIndex(t *testing.T, r *result, name string) int {
	t.Helper()
	for i, c := range r.cols {
		if c == name {
			return i
		}
	}
	t.Fatalf("no column %s in %v", name, r.cols)
	return -1
}
