package cycle

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The Backup activity (progress messages, heartbeats, share polling,
// liveness pings, checks) against the same BACKUP sent bare through
// go-mssqldb, on the same emulated instance: the ratio is the activity's
// overhead.
func benchBackup(b *testing.B, viaActivity bool) {
	f := newSQLFixture(b, "Bench", "")
	if err := f.src.CreateDatabase(sqlsim.DatabaseSpec{Name: "Big", Size: 32 << 20, DataFiles: 2}); err != nil {
		b.Fatal(err)
	}
	cfg := f.cfg
	big := cfg.Databases[0]
	big.Name, big.Compression = "Big", false
	cfg.Databases = append(cfg.Databases, big)
	srv, _ := cfg.BackupServer("bak01")
	raw, err := mssql.Open(context.Background(), mssql.Target{Address: f.src.Addr(), User: "sa", Password: sqlPassword, Encrypt: "disable"})
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	var seq int64
	b.ResetTimer()
	for b.Loop() {
		seq++
		if viaActivity {
			var out activities.BackupOutput
			if err := f.run(f.acts.Backup, activities.BackupInput{Database: "Big", Sequence: seq, Server: "bak01", Stripes: 2}, &out); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(out.Bytes)
			continue
		}
		layout, _ := tsql.Layout(srv.UNCPaths, tsql.NamesOf("sql01", "Big"), seq, 2)
		off := false
		stmt, _ := tsql.BackupDatabase(tsql.BackupOptions{Database: "Big", Disks: tsql.Paths(layout), Checksum: true, Init: true,
			Format: true, Compression: &off, Stats: activities.StatsPercent, Name: tsql.BackupSetName(seq)})
		if _, err := raw.DB.ExecContext(context.Background(), stmt); err != nil {
			b.Fatal(err)
		}
		var n int64
		for _, s := range layout {
			if fi, err := os.Stat(filepath.Join(f.dirs["bak01"], s.Name)); err == nil {
				n += fi.Size()
			}
		}
		b.SetBytes(n)
	}
}

func BenchmarkBackupActivity(b *testing.B)      { benchBackup(b, true) }
func BenchmarkBackupBareStatement(b *testing.B) { benchBackup(b, false) }
