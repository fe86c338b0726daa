package cycle

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/calibrate"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// verifiedSetOn writes the manifest of a verified set seq of (sql01, db),
// compressed 10 GiB in 2.5 GiB of files, with the given step durations,
// into the directories of the servers.
func (f *sqlFixture) verifiedSetOn(seq int64, steps map[catalog.Step]time.Duration, servers ...string) {
	f.t.Helper()
	taken := time.Now().Add(-time.Duration(10-seq) * 24 * time.Hour).UTC().Truncate(time.Second)
	m := catalog.New("sql01", f.db, seq, taken)
	m.PrimaryServer = servers[0]
	m.Options = catalog.Options{Compression: true, Checksum: true, CopyOnly: true, Stripes: 2}
	m.Stripes = []catalog.Stripe{{Name: m.StripeFileName(1, 2), Size: 1280 << 20}, {Name: m.StripeFileName(2, 2), Size: 1280 << 20}}
	m.Header = &catalog.Header{FirstLSN: "10", LastLSN: "20", BackupFinish: taken, BackupSize: 10 << 30, CompressedBackupSize: 2560 << 20}
	at := taken
	for _, st := range []catalog.Step{catalog.StepBackup, catalog.StepCopy, catalog.StepRestore, catalog.StepCheckDB} {
		if d, ok := steps[st]; ok {
			if err := m.SetTiming(st, at, at.Add(d)); err != nil {
				f.t.Fatal(err)
			}
			at = at.Add(d)
		}
	}
	for _, s := range []catalog.State{catalog.StateCopied, catalog.StateRestored, catalog.StateChecked, catalog.StateVerified} {
		if err := m.Advance(s, at); err != nil {
			f.t.Fatal(err)
		}
	}
	data, err := catalog.Encode(m)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, s := range servers {
		if err := os.WriteFile(filepath.Join(f.dirs[s], m.FileName()), data, 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
}

// PlanCycle derives the timeouts from the rates measured on the database's
// last verified sets (the slowest of the newest three), keeps the safety
// factor and the floors, assumes TimeoutSite for the steps never measured,
// and records which is which in the budget.
func TestSQLPlanUsesMeasuredThroughput(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	p := f.plan()
	for _, r := range []plan.StepRate{p.Budget.Rates.Backup, p.Budget.Rates.Copy, p.Budget.Rates.Restore, p.Budget.Rates.CheckDB} {
		if r.Source != plan.SourceAssumed || r.MBps <= 0 {
			t.Fatalf("no verified set yet: rates %+v, want every step assumed", p.Budget.Rates)
		}
	}
	site := p.Budget.Expected

	// 10 GiB backed up in 100 s (102.4 MB/s), 200 s (51.2) and 50 s;
	// the oldest set, 1000 s, is outside the window. The copy of 2.5 GiB
	// took 25 s (102.4 MB/s), the restore 800 s (12.8 MB/s) once; CHECKDB
	// took 2 s: too short to measure.
	step := func(backup time.Duration) map[catalog.Step]time.Duration {
		return map[catalog.Step]time.Duration{catalog.StepBackup: backup, catalog.StepCopy: 25 * time.Second,
			catalog.StepCheckDB: 2 * time.Second}
	}
	f.verifiedSetOn(1, step(1000*time.Second), "bak01", "bak02")
	f.verifiedSetOn(2, step(100*time.Second), "bak02", "bak01")
	slow := step(200 * time.Second)
	slow[catalog.StepRestore] = 800 * time.Second
	f.verifiedSetOn(3, slow, "bak01", "bak02")
	f.verifiedSetOn(4, step(50*time.Second), "bak02")

	p = f.plan()
	r, size := p.Budget.Rates, float64(p.Budget.Size)
	if r.Backup.Source != plan.SourceCycle || r.Backup.Sequence != 3 || math.Abs(r.Backup.MBps-51.2) > 1e-9 {
		t.Errorf("backup rate %+v, want set 3's 51.2 MB/s (the slowest of sets 2-4)", r.Backup)
	}
	if r.Copy.Source != plan.SourceCycle || math.Abs(r.Copy.MBps-102.4) > 1e-9 || r.CompressionFactor != 4 {
		t.Errorf("copy rate %+v factor %v, want 102.4 MB/s and the measured factor 4", r.Copy, r.CompressionFactor)
	}
	if r.Restore.Source != plan.SourceCycle || math.Abs(r.Restore.MBps-12.8) > 1e-9 {
		t.Errorf("restore rate %+v, want set 3's 12.8 MB/s", r.Restore)
	}
	if r.CheckDB.Source != plan.SourceAssumed || p.Budget.Expected.CheckDB != site.CheckDB {
		t.Errorf("CHECKDB %+v expected %v, want the site's assumption %v", r.CheckDB, p.Budget.Expected.CheckDB, site.CheckDB)
	}
	wantBackup := time.Duration(size / plan.MiB / 51.2 * float64(time.Second))
	wantRestore := time.Duration(size / plan.MiB / 12.8 * float64(time.Second))
	e := p.Budget.Expected
	if (e.Backup-wantBackup).Abs() > time.Microsecond || (e.Restore-wantRestore).Abs() > time.Microsecond || e.Backup == site.Backup {
		t.Errorf("expected backup %v restore %v, want %v and %v from the measured rates (site: %v, %v)",
			e.Backup, e.Restore, wantBackup, wantRestore, site.Backup, site.Restore)
	}
	l := p.Limits
	if l.BackupTimeout != plan.SafetyFactor*e.Backup+plan.TimeoutFloor || l.RestoreTimeout != plan.SafetyFactor*e.Restore+plan.TimeoutFloor ||
		l.CopyDeadline != plan.SafetyFactor*e.Copy+plan.CopyWaitFloor {
		t.Errorf("limits %+v, want %d x the measured durations + the floors", l, plan.SafetyFactor)
	}

	// A caller that names the last server gets the measurements too.
	var q activities.Plan
	f.must(f.acts.PlanCycle, activities.PlanInput{Database: f.db, LastServer: "bak02"}, &q)
	if q.LastServerSource != "caller" || q.Budget.Rates != p.Budget.Rates {
		t.Errorf("plan with the caller's last server: source %s rates %+v, want the same measured rates", q.LastServerSource, q.Budget.Rates)
	}

	// Backups without compression: the compressed sets' backup and copy
	// rates do not fit; the restore's is still used only with compression.
	f.cfg.Databases[0].Compression = false
	p = f.plan()
	if r := p.Budget.Rates; r.Backup.Source != plan.SourceAssumed || r.Copy.Source != plan.SourceAssumed || r.Restore.Source != plan.SourceAssumed {
		t.Errorf("uncompressed run: rates %+v, want the site's assumptions", r)
	}
}

// A calibration report kept on a backup server gives the plan its backup
// rate (source calibration, with the settings it measured), ahead of the
// older cycles' backup rates.
func TestSQLPlanUsesTheCalibration(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	f.verifiedSetOn(1, map[catalog.Step]time.Duration{catalog.StepBackup: 100 * time.Second}, "bak01", "bak02")
	compressed := f.plan().Budget.Rates.Backup
	if compressed.Source != plan.SourceCycle {
		t.Fatalf("backup rate %+v, want the cycle's", compressed)
	}
	rep := calibrate.Report{Instance: "sql01", Database: f.db, Server: "bak01", NICs: 1, Compression: true,
		Finished: time.Now().UTC().Truncate(time.Second),
		Proposed: &calibrate.Result{Point: calibrate.Point{Stripes: 4, MaxTransferSize: 4 << 20}, MBps: 321, Seconds: 120, Bytes: 40 << 30}}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dirs["bak01"], tsql.CalibrationReportName("sql01", f.db)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	r := f.plan().Budget.Rates.Backup
	if r.Source != plan.SourceCalibration || r.MBps != 321 || r.Settings.Stripes != 4 || r.Settings.MaxTransferSize != 4<<20 {
		t.Errorf("backup rate %+v, want the calibration's 321 MB/s at 4 stripes, MAXTRANSFERSIZE 4 MiB", r)
	}
}
